"""tir.build and the host module: argument checks, timing, sources, shared-library export, targets."""

from __future__ import annotations

import ctypes
import re
from pathlib import Path

import numpy as np
import pytest

import tir
import tir.script as T
from tir.codegen import codegen_llvm
from tir.runtime import LLVMModule, Module
from tir.target import Target


@T.script
def axpy(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4, 8), "float32"), alpha: T.float32, n: T.int32):
    for i, j in T.grid(4, 8):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = B[vi, vj] + A[vi, vj] * alpha + T.cast(n, "float32")


@T.script
def parallel_fill(A: T.Buffer((64,), "int32")):
    for i in T.parallel(64):
        with T.block("A"):
            vi = T.spatial_axis(64, i)
            A[vi] = vi * 3


@pytest.fixture(scope="module")
def module() -> Module:
    return tir.build(axpy, target="llvm")


def args() -> list[object]:
    return [np.ones((4, 8), np.float32), np.full((4, 8), 2.0, np.float32), 0.5, 3]


def test_build_returns_a_callable_module(module: Module) -> None:
    assert isinstance(module, LLVMModule) and module.entry_name == "axpy"
    assert [spec.name for spec in module.param_specs] == ["A", "B", "alpha", "n"]
    assert module.param_specs[0].shape == (4, 8) and not module.param_specs[2].is_buffer
    a, b, alpha, n = args()
    module(a, b, alpha, n)
    np.testing.assert_array_equal(b, np.full((4, 8), 5.5, np.float32))
    assert "axpy(A: float32[4, 8]" in repr(module)


def test_numpy_scalars_are_accepted(module: Module) -> None:
    a, b, _, _ = args()
    module(a, b, np.float64(0.5), np.int64(3))
    assert b[0, 0] == 5.5


@pytest.mark.parametrize(
    ("position", "value", "error", "message"),
    [
        (0, np.ones((4, 8), np.float64), TypeError, r"axpy\(\) parameter A: expected dtype float32, got float64"),
        (0, np.ones((8, 4), np.float32), ValueError, r"parameter A: expected shape \(4, 8\), got \(8, 4\)"),
        (0, np.ones(32, np.float32), ValueError, r"parameter A: expected shape \(4, 8\) \(2 dimensions\)"),
        (0, np.ones((4, 16), np.float32)[:, ::2], ValueError, "parameter A: the array must be C-contiguous"),
        (
            1,
            [[1.0] * 8] * 4,
            TypeError,
            r"parameter B: expected a numpy.ndarray of dtype float32 and shape \(4, 8\), got list",
        ),
        (2, "x", TypeError, "parameter alpha: expected a number for float32, got str"),
        (3, 2.5, TypeError, "parameter n: expected an integer for int32, got float"),
        (3, 2**40, ValueError, r"parameter n: 1099511627776 does not fit in int32"),
    ],
)
def test_bad_arguments_are_refused_with_the_parameter_named(
    module: Module, position: int, value: object, error: type[Exception], message: str
) -> None:
    values = args()
    values[position] = value
    with pytest.raises(error, match=message):
        module(*values)


def test_wrong_argument_count(module: Module) -> None:
    with pytest.raises(TypeError, match=r"axpy\(\) takes 4 arguments \(A, B, alpha, n\), 2 given"):
        module(*args()[:2])


def test_aliasing_buffers_are_refused(module: Module) -> None:
    a = np.ones((4, 8), np.float32)
    with pytest.raises(ValueError, match="parameters A and B share memory"):
        module(a, a, 1.0, 0)


def test_time_and_time_evaluator(module: Module) -> None:
    seconds = module.time(*args(), repeat=3, number=2)
    assert isinstance(seconds, float) and 0 < seconds < 1
    assert 0 < module.time_evaluator(*args(), repeat=2) < 1
    evaluator = module.time_evaluator("axpy", number=2, repeat=2)
    assert 0 < evaluator(*args()) < 1
    with pytest.raises(TypeError, match="takes 4 arguments"):
        module.time(np.ones((4, 8), np.float32))


def test_get_source(module: Module) -> None:
    ll = module.get_source("ll")
    assert "define i32 @axpy(ptr" in ll or "define noundef i32 @axpy(ptr" in ll
    assert "target triple" in ll
    asm = module.get_source("asm")
    assert re.search(r"^axpy:", asm, re.MULTILINE)
    with pytest.raises(ValueError, match="unknown source format"):
        module.get_source("cuda")


def test_codegen_llvm_text_has_the_entry_abi() -> None:
    text = codegen_llvm(tir.transform.lower(axpy), "llvm")
    assert 'define i32 @"axpy"(ptr %"args")' in text
    assert f'target triple = "{Target.host().triple}"' in text and "target datalayout" in text
    arm = codegen_llvm(tir.transform.lower(axpy), "llvm -mtriple=aarch64-linux-gnu -mattr=+neon")
    assert 'target triple = "aarch64-unknown-linux-gnu"' in arm


def test_export_library_loads_with_ctypes(tmp_path: Path, module: Module) -> None:
    path = module.export_library(tmp_path / "libaxpy.so")
    library = ctypes.CDLL(path)
    function = library.axpy
    function.restype = ctypes.c_int32
    function.argtypes = [ctypes.c_void_p]
    a, b = np.ones((4, 8), np.float32), np.full((4, 8), 2.0, np.float32)
    alpha, n = ctypes.c_float(0.5), ctypes.c_int32(3)
    pointers = (ctypes.c_void_p * 4)(a.ctypes.data, b.ctypes.data, ctypes.addressof(alpha), ctypes.addressof(n))
    assert function(pointers) == 0
    np.testing.assert_array_equal(b, np.full((4, 8), 5.5, np.float32))


def test_export_library_with_a_parallel_loop(tmp_path: Path) -> None:
    m = tir.build(parallel_fill)
    library = ctypes.CDLL(m.export_library(tmp_path / "libfill.so"))
    ctypes.c_int32.in_dll(library, "__tir_num_threads").value = 2
    out = np.zeros(64, np.int32)
    assert library.parallel_fill((ctypes.c_void_p * 1)(out.ctypes.data)) == 0
    np.testing.assert_array_equal(out, np.arange(64) * 3)


def test_target_with_features_this_cpu_lacks() -> None:
    host = Target.host()
    spec = "llvm -mcpu=x86-64 -mattr=+avx512f,+avx512vnni" if "avx512vnni" not in host.features else None
    if host.isa != "x86_64" or spec is None:
        pytest.skip("needs an x86-64 host without AVX-512 VNNI")
    m = tir.build(axpy, spec)
    assert "axpy" in m.get_source("asm")
    with pytest.raises(RuntimeError, match=r"needs CPU feature\(s\) .*avx512vnni"):
        m(*args())


def test_baseline_x86_target_runs_here() -> None:
    if Target.host().isa != "x86_64":
        pytest.skip("x86-64 only")
    m = tir.build(axpy, "llvm -mcpu=x86-64")
    values = args()
    m(*values)
    assert values[1][0, 0] == 5.5
    assert "ymm" not in m.get_source("asm")


def test_aarch64_target_gives_the_aarch64_module() -> None:
    m = tir.build(axpy, "llvm -mtriple=aarch64-linux-gnu -mattr=+neon")
    assert type(m).__name__ == "AArch64Module"
    assert m.entry_name == "axpy"


def test_build_refuses_unbound_programs_for_cuda_and_non_functions() -> None:
    with pytest.raises(ValueError, match="thread"):  # a CUDA build needs thread-bound loops
        tir.build(axpy, "cuda -arch=sm_80")
    with pytest.raises(TypeError, match="PrimFunc or an IRModule"):
        tir.build("axpy")  # type: ignore[arg-type]


def test_multi_function_module() -> None:
    mod = tir.ir.IRModule({"axpy": axpy, "parallel_fill": parallel_fill})
    m = tir.build(mod)
    assert m.entry_names == ("axpy", "parallel_fill")
    out = np.zeros(64, np.int32)
    m["parallel_fill"](out)
    np.testing.assert_array_equal(out, np.arange(64) * 3)


@pytest.mark.parametrize(
    "dtype", ["bool", "int8", "int16", "int32", "int64", "uint8", "float16", "bfloat16", "float32", "float64"]
)
def test_scalar_parameters_of_every_dtype(dtype: str) -> None:
    from tir.ir import Buffer, BufferStore, IntImm, PrimFunc, Var

    x = Var("x", dtype)
    out = Buffer("Out", (1,), dtype)
    f = PrimFunc("store_scalar", (out, x), BufferStore(out, x, (IntImm(0),)))
    value: object = True if dtype == "bool" else -3 if dtype.startswith("int") else 200 if dtype == "uint8" else 1.3
    storage = np.uint16 if dtype == "bfloat16" else dtype
    got, want = np.zeros(1, storage), np.zeros(1, storage)
    tir.build(f)(got, value)
    tir.interpret(f, want, value)
    np.testing.assert_array_equal(got, want)
    assert got[0] != 0
