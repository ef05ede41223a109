"""Tensor-core matmuls (WMMA m16n16k16 and mma.sync m16n8k16 with ldmatrix): tensorized schedules
match numpy in the interpreter, compile for sm_80 / sm_90 to HMMA, and run where a GPU is."""

from __future__ import annotations

import numpy as np
import pytest
from cuda_kernels import make_matmul_f16, schedule_tensor_core

import tir
from tir.codegen.cuda import codegen_cuda
from tir.codegen.cuda_compile import compile_cuda, disassemble
from tir.interp import interpret
from tir.transform import lower


def _inputs(n: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.standard_normal((n, n)).astype("float16"), rng.standard_normal((n, n)).astype("float16")


@pytest.mark.parametrize("mma", [False, True], ids=["wmma", "mma_sync"])
def test_tensorized_matches_numpy_in_interpreter(mma: bool) -> None:
    n = 128
    sch = schedule_tensor_core(make_matmul_f16(n), mma=mma)
    a, b = _inputs(n)
    c = np.zeros((n, n), "float32")
    interpret(sch.func, a, b, c)
    np.testing.assert_allclose(c, a.astype("float32") @ b.astype("float32"), rtol=1e-3, atol=1e-3)


def test_wmma_source() -> None:
    source = codegen_cuda(lower(schedule_tensor_core(make_matmul_f16(256)).func, "cuda -arch=sm_80"), "cuda")
    assert "nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float>" in source
    for call in ("fill_fragment", "load_matrix_sync", "mma_sync", "store_matrix_sync"):
        assert f"nvcuda::wmma::{call}(" in source


@pytest.mark.parametrize("mma", [False, True], ids=["wmma", "mma_sync"])
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_tensor_core_sass_has_hmma(nvcc: str, sass_tool: str, mma: bool, arch: str) -> None:
    lowered = lower(schedule_tensor_core(make_matmul_f16(256), mma=mma).func, f"cuda -arch={arch}")
    sass = disassemble(compile_cuda(codegen_cuda(lowered, f"cuda -arch={arch}"), arch))
    assert "HMMA.16816.F32" in sass
    if mma:
        assert "LDSM" in sass  # ldmatrix


@pytest.mark.cuda
@pytest.mark.parametrize("mma", [False, True], ids=["wmma", "mma_sync"])
def test_tensor_core_runs(mma: bool) -> None:
    n = 256
    mod = tir.build(schedule_tensor_core(make_matmul_f16(n), mma=mma).func, "cuda -arch=sm_80")
    a, b = _inputs(n)
    c = np.zeros((n, n), "float32")
    mod(a, b, c)
    np.testing.assert_allclose(c, a.astype("float32") @ b.astype("float32"), rtol=1e-2, atol=1e-2)
