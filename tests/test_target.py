"""Target strings: a processor or feature LLVM does not know is refused up front, with suggestions
(issue 17 F): before, LLVM printed warnings and built anyway, or aborted the process."""

from __future__ import annotations

import pytest

from tir.target import Target, TargetError


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("llvm -mcpu=foo", r"-mcpu: 'foo' is not a processor LLVM knows for x86_64"),
        ("llvm -mcpu=znver", r"did you mean 'znver\d'"),
        ("llvm -mattr=+foo", r"-mattr: 'foo' is not a feature"),
        ("llvm -mattr=+avx3", r"did you mean 'avx"),
        ("llvm -mtriple=aarch64-linux-gnu -mattr=+neon,+dotprodd", r"'dotprodd' .* did you mean 'dotprod'"),
    ],
)
def test_unknown_processors_and_features_are_refused(spec: str, message: str) -> None:
    with pytest.raises(TargetError, match=message):
        Target.parse(spec)


@pytest.mark.parametrize(
    "spec",
    [
        "llvm",
        "llvm -mcpu=haswell",
        "llvm -mcpu=x86-64 -mattr=+avx2,-fma",
        "llvm -mtriple=aarch64-linux-gnu -mattr=+neon,+dotprod",
    ],
)
def test_known_processors_and_features_parse(spec: str) -> None:
    assert Target.parse(spec).is_cpu
