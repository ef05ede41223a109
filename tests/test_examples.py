"""Every script under examples/: it runs, matches numpy, round-trips, and prints as recorded."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from examples_testing import load_example

import tir

REPO_ROOT = Path(__file__).resolve().parents[1]
EXAMPLES_DIR = REPO_ROOT / "examples"

#: Every example module; files starting with "_" are shared helpers, not examples.
EXAMPLE_NAMES = sorted(path.stem for path in EXAMPLES_DIR.glob("*.py") if not path.stem.startswith("_"))


def kernel_of(name: str) -> tir.PrimFunc:
    return load_example(name).KERNEL


def test_examples_are_found() -> None:
    assert "quickstart" in EXAMPLE_NAMES
    assert len(EXAMPLE_NAMES) >= 11


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_example_interface(name: str) -> None:
    module = load_example(name)
    assert isinstance(module.KERNEL, tir.PrimFunc)
    assert module.KERNEL.name == name or name == "quickstart"
    for attribute in ("make_args", "reference", "main"):
        assert callable(getattr(module, attribute)), f"examples/{name}.py lacks {attribute}()"
    assert module.ATOL >= 0.0
    args = module.make_args(np.random.default_rng(0))
    buffers = module.KERNEL.buffer_params
    assert [tuple(a.shape) for a in args] == [b.const_shape() for b in buffers]
    assert [a.dtype for a in args] == [np.dtype(str(b.dtype)) for b in buffers]
    # The reference names outputs by parameter name.
    expected = module.reference(*args)
    assert set(expected) <= {b.name for b in buffers}


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_interpreter_matches_reference(name: str) -> None:
    module = load_example(name)
    func = module.KERNEL
    args = module.make_args(np.random.default_rng(0))
    expected = module.reference(*[a.copy() for a in args])
    tir.interpret(func, *args)
    by_name = {b.name: a for b, a in zip(func.buffer_params, args)}
    for out_name, want in expected.items():
        got = by_name[out_name]
        assert got.dtype == np.dtype(str(next(b for b in func.buffer_params if b.name == out_name).dtype))
        np.testing.assert_allclose(got, want, rtol=0, atol=module.ATOL, err_msg=f"{name}: output {out_name}")


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_round_trip(name: str) -> None:
    func = kernel_of(name)
    text = func.script()
    reparsed = tir.parse(text)
    assert isinstance(reparsed, tir.PrimFunc)
    tir.assert_structural_equal(reparsed, func)
    assert tir.structural_equal(reparsed, func)
    assert tir.structural_hash(reparsed) == tir.structural_hash(func)
    assert reparsed.script() == text


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_printed_program_matches_golden(name: str, golden) -> None:  # type: ignore[no-untyped-def]
    golden.check(f"examples/{name}", kernel_of(name).script())


@pytest.mark.parametrize("name", [n for n in EXAMPLE_NAMES if n != "quickstart"])
def test_main_prints_program_and_error(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    module = load_example(name)
    module.main()
    out = capsys.readouterr().out
    assert out.startswith(module.KERNEL.script())
    assert "max abs error" in out


def test_quickstart_runs_as_a_script() -> None:
    result = subprocess.run(
        [sys.executable, str(EXAMPLES_DIR / "quickstart.py")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.rstrip().splitlines()[-1].startswith("OK:")
    assert result.stderr == ""
