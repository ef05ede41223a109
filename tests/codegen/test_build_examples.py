"""Every example under examples/, built for "llvm", matches its numpy reference and the interpreter."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from examples_testing import load_example

import tir
from tir.runtime.aarch64 import toolchain_missing_reason
from tir.target import Target

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples"
EXAMPLE_NAMES = sorted(path.stem for path in EXAMPLES_DIR.glob("*.py") if not path.stem.startswith("_"))


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_example_built_for_llvm(name: str) -> None:
    example = load_example(name)
    kernel = example.KERNEL
    # An example for another CPU (int8_matmul_sdot: AArch64) names its TARGET; it runs under qemu.
    target = getattr(example, "TARGET", "llvm")
    if Target.parse(target).is_cuda:
        pytest.skip(f"{name} targets {target}: tests/cuda builds it")
    if Target.parse(target).isa == "aarch64" and toolchain_missing_reason() is not None:
        pytest.skip(f"{name} targets AArch64: {toolchain_missing_reason()}")
    args = example.make_args(np.random.default_rng(0))
    compiled = [a.copy() for a in args]
    interpreted = [a.copy() for a in args]
    tir.build(kernel, target)(*compiled)
    tir.interpret(kernel, *interpreted)
    expected = example.reference(*[a.copy() for a in args])
    by_name = {buffer.name: k for k, buffer in enumerate(kernel.buffer_params)}
    for output, want in expected.items():
        got = compiled[by_name[output]]
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=0, atol=example.ATOL)
        np.testing.assert_allclose(
            got.astype(np.float64),
            interpreted[by_name[output]].astype(np.float64),
            rtol=0,
            atol=max(example.ATOL, 1e-6),
        )
