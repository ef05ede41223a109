"""Every example under examples/, built for "llvm", matches its numpy reference and the interpreter."""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

import tir
from tir.runtime.aarch64 import toolchain_missing_reason
from tir.target import Target

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples"
EXAMPLE_NAMES = sorted(path.stem for path in EXAMPLES_DIR.glob("*.py") if not path.stem.startswith("_"))


@functools.cache
def load_example(name: str) -> ModuleType:
    if str(EXAMPLES_DIR) not in sys.path:
        sys.path.insert(0, str(EXAMPLES_DIR))  # examples import their harness as `_common`
    module_name = f"tir_codegen_examples_{name}"
    spec = importlib.util.spec_from_file_location(module_name, EXAMPLES_DIR / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


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
