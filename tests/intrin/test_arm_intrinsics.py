"""The built-in AArch64 tensor intrinsics (tir/intrin/arm.py), compiled for AArch64 and run
under qemu (marker ``aarch64``; the listing, assembly and refusal tests need only llvmlite)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

import tir
from tir.codegen import CodegenError
from tir.intrin import TensorIntrin
from tir.intrin.arm import NEON_FMA_F32, NEON_SDOT
from tir.runtime.aarch64 import toolchain_missing_reason

ARM = "llvm -mtriple=aarch64-linux-gnu -mattr=+neon,+dotprod"
ARM_NO_DOTPROD = "llvm -mtriple=aarch64-linux-gnu -mattr=+neon"
_MISSING = toolchain_missing_reason()
needs_qemu = pytest.mark.skipif(_MISSING is not None, reason=f"AArch64 tools missing: {_MISSING}")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _run(func: tir.PrimFunc, target: str | None, *args: np.ndarray) -> np.ndarray:
    copies = [a.copy() for a in args]
    if target is None:
        tir.interpret(func, *copies)
    else:
        tir.build(func, target)(*copies)
    return copies[-1]


def _sdot_operands(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random operands of the sdot intrinsic, in its parameter shapes."""
    a = rng.integers(-128, 128, (1, 4), dtype=np.int8)
    b = rng.integers(-128, 128, (1, 1, 16), dtype=np.int8)
    c = rng.integers(-(10**6), 10**6, (1, 4), dtype=np.int32)
    return a, b, c


def _sdot_exact(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    return c + (a.astype(np.int32).reshape(1, 4) * b.reshape(4, 4).astype(np.int32)).sum(axis=1)[None, :]


def _example(name: str) -> ModuleType:
    """``examples/<name>.py`` as a module (examples/ is not a package)."""
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    module_name = f"tir_examples_{name}"
    if module_name not in sys.modules:
        spec = importlib.util.spec_from_file_location(module_name, EXAMPLES / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    return sys.modules[module_name]


def test_listing_follows_the_features() -> None:
    assert {NEON_FMA_F32, NEON_SDOT} <= set(TensorIntrin.list(ARM))
    assert NEON_FMA_F32 in TensorIntrin.list(ARM_NO_DOTPROD)
    assert NEON_SDOT not in TensorIntrin.list(ARM_NO_DOTPROD)
    assert not {NEON_FMA_F32, NEON_SDOT} & set(TensorIntrin.list("llvm"))
    assert TensorIntrin.get(NEON_SDOT).required_features == ("neon", "dotprod")


def test_sdot_assembly_and_refusals() -> None:
    impl = TensorIntrin.get(NEON_SDOT).impl
    assert "sdot\tv" in tir.build(impl, ARM).get_source("asm")
    with pytest.raises(CodegenError, match=r"sdot\.v4i32\.v16i8 needs target feature\(s\) dotprod"):
        tir.build(impl, ARM_NO_DOTPROD)
    with pytest.raises(CodegenError, match="needs an aarch64 target"):
        tir.build(impl, "llvm")


def test_sdot_semantics_in_the_interpreter() -> None:
    intrin = TensorIntrin.get(NEON_SDOT)
    a, b, c = _sdot_operands(np.random.default_rng(0))
    a[0, 0], b[0, 0, 0] = -128, -128
    want = _sdot_exact(a, b, c)
    np.testing.assert_array_equal(_run(intrin.impl, None, a, b, c), want)
    np.testing.assert_array_equal(_run(intrin.desc, None, a, b, c), want)


@pytest.mark.aarch64
@needs_qemu
def test_sdot_runs_under_qemu() -> None:
    intrin = TensorIntrin.get(NEON_SDOT)
    a, b, c = _sdot_operands(np.random.default_rng(1))
    a[:], b[..., :4] = -128, -128  # 4 * 16384 in lane 0
    want = _sdot_exact(a, b, c)
    np.testing.assert_array_equal(_run(intrin.impl, ARM, a, b, c), want)


@pytest.mark.aarch64
@needs_qemu
def test_fma_tile_runs_under_qemu() -> None:
    intrin = TensorIntrin.get(NEON_FMA_F32)
    rng = np.random.default_rng(2)
    a = rng.standard_normal((4, 4), dtype=np.float32)
    b = rng.standard_normal((4, 16), dtype=np.float32)
    c = rng.standard_normal((4, 16), dtype=np.float32)
    emulated = _run(intrin.impl, ARM, a, b, c)
    np.testing.assert_allclose(emulated, c + a @ b, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_run(intrin.impl, None, a, b, c), emulated, rtol=0, atol=1e-6)
    np.testing.assert_allclose(_run(intrin.desc, None, a, b, c), emulated, rtol=1e-5, atol=1e-5)
    assert tir.build(intrin.impl, ARM).get_source("asm").count("fmla") == 64


# ---------------------------------------------------------------- tensorized int8 matmul


def _sdot_count(asm: str) -> int:
    return sum(1 for line in asm.splitlines() if line.split()[:1] == ["sdot"])


@pytest.mark.aarch64
@needs_qemu
def test_tensorized_int8_matmul_512_under_qemu_equals_numpy_exactly() -> None:
    example = _example("int8_matmul_sdot")
    sch = example.schedule_int8_matmul(example.make_int8_matmul(512, 512, 512))
    assert "llvm.aarch64.neon.sdot" in sch.func.script()
    module = tir.build(sch.func, ARM)
    assert _sdot_count(module.get_source("asm")) == 16  # the 4 x 4 register tile, unrolled
    rng = np.random.default_rng(3)
    a = rng.integers(-128, 128, (512, 512), dtype=np.int8)
    b = rng.integers(-128, 128, (512, 512), dtype=np.int8)
    a[0, :], b[:, 0] = -128, -128  # 512 * 16384: the largest sum, row 0 x column 0
    c = np.zeros((512, 512), np.int32)
    module(a, b, c)
    np.testing.assert_array_equal(c, a.astype(np.int32) @ b.astype(np.int32))


def test_tensorized_int8_matmul_assembly_and_interpreter() -> None:
    example = _example("int8_matmul_sdot")
    assert _sdot_count(tir.build(example.KERNEL, ARM).get_source("asm")) >= 1
    with pytest.raises(CodegenError, match="dotprod"):
        tir.build(example.KERNEL, ARM_NO_DOTPROD)
    args = example.make_args(np.random.default_rng(4))
    tir.interpret(example.KERNEL, *args)
    np.testing.assert_array_equal(args[2], example.reference(*args)["C"])


@pytest.mark.aarch64
@needs_qemu
def test_fma_tile_tensorizes_a_float32_matmul_under_qemu() -> None:
    sys.path.insert(0, str(EXAMPLES))
    from matmul_schedule import make_matmul

    sch = tir.Schedule(make_matmul(64))
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    i_tile, i_row = sch.split(i, [None, 4])
    j_tile, j_col = sch.split(j, [None, 16])
    k_tile, k_step = sch.split(k, [None, 4])
    sch.reorder(i_tile, j_tile, k_tile, i_row, j_col, k_step)
    sch.decompose_reduction(block, k_tile)
    sch.tensorize(i_row, NEON_FMA_F32)
    rng = np.random.default_rng(5)
    a = rng.standard_normal((64, 64), dtype=np.float32)
    b = rng.standard_normal((64, 64), dtype=np.float32)
    c = np.zeros((64, 64), np.float32)
    module = tir.build(sch.func, ARM)
    assert "fmla" in module.get_source("asm")
    module(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
