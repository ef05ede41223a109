"""CUDA lowering and source generation: kernels split from the host, barriers, nvcc compiles."""

from __future__ import annotations

import numpy as np
import pytest
from cuda_kernels import make_add_one, make_matmul_f32, schedule_elementwise, schedule_shared_tiled

import tir
import tir.script as T
from tir.codegen.cuda import codegen_cuda
from tir.codegen.cuda_compile import CudaCompileError, compile_cuda, disassemble
from tir.schedule import Schedule
from tir.transform import LoweringError, lower
from tir.transform.insert_syncthreads import SYNC_OP


def _source(func: tir.PrimFunc, arch: str = "sm_80") -> str:
    return codegen_cuda(lower(func, f"cuda -arch={arch}"), f"cuda -arch={arch}")


def test_split_host_device_elementwise() -> None:
    mod = lower(schedule_elementwise(make_add_one()).func, "cuda -arch=sm_80")
    host, kernel = mod["add_one"], mod["add_one_kernel0"]
    assert kernel.attrs["kernel"] is True
    assert [e.value for e in kernel.attrs["grid"]] == [8, 1, 1]
    assert [e.value for e in kernel.attrs["block"]] == [128, 1, 1]
    assert host.attrs["kernels"] == ("add_one_kernel0",)
    assert "tir.cuda_launch" in host.script()
    assert [p.name for p in kernel.params] == ["A", "B"]


def test_elementwise_source() -> None:
    source = _source(schedule_elementwise(make_add_one()).func)
    assert 'extern "C" __global__ void __launch_bounds__(128) add_one_kernel0(float* __restrict__ A' in source
    assert "(int)blockIdx.x" in source and "(int)threadIdx.x" in source
    assert "expf(" in source
    assert "tir_floordiv<int>" in source and "tir_floormod<int>" in source


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_elementwise_compiles(nvcc: str, arch: str) -> None:
    cubin = compile_cuda(_source(schedule_elementwise(make_add_one()).func, arch), arch)
    assert cubin[:4] == b"\x7fELF"


def test_shared_tiled_matmul_barriers() -> None:
    source = _source(schedule_shared_tiled(make_matmul_f32(64)).func)
    assert "__shared__ __align__(16) float A_shared[256];" in source
    # The k loop: a barrier before the copies overwrite the tiles, one before they are read.
    body = source[source.index("for (int k_0") :]
    assert body.count("__syncthreads();") == 2
    first, second = body.index("__syncthreads();"), body.rindex("__syncthreads();")
    assert first < body.index("B_shared[((ax0") < second < body.index("A_shared[((i_1")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_shared_tiled_matmul_compiles(nvcc: str, sass_tool: str, arch: str) -> None:
    cubin = compile_cuda(_source(schedule_shared_tiled(make_matmul_f32(64)).func, arch), arch)
    sass = disassemble(cubin)
    assert "BAR.SYNC" in sass and "LDS" in sass


def test_insert_syncthreads_idempotent() -> None:
    mod = lower(schedule_shared_tiled(make_matmul_f32(64)).func, "cuda -arch=sm_80")
    from tir.transform import insert_syncthreads

    kernel = mod["matmul_kernel0"]
    assert insert_syncthreads(kernel).script().count(SYNC_OP) == kernel.script().count(SYNC_OP) == 2


def test_unbound_program_refused() -> None:
    with pytest.raises(LoweringError, match="no thread-bound loop"):
        lower(make_add_one(), "cuda -arch=sm_80")


def test_host_loop_refused() -> None:
    @T.script
    def f(A: T.Buffer((4, 32), "float32")):
        for i in range(4):
            for j in T.thread_binding(32, thread="threadIdx.x"):
                with T.block("A"):
                    vi, vj = T.remap("SS", i, j)
                    A[vi, vj] = 1.0

    with pytest.raises(LoweringError, match="outside every thread-bound loop"):
        lower(f, "cuda -arch=sm_80")


def test_nvcc_error_has_stderr(nvcc: str) -> None:
    with pytest.raises(CudaCompileError, match="(?s)nvcc failed.*undefined_thing"):
        compile_cuda('extern "C" __global__ void k() { undefined_thing(); }', "sm_80")


def test_build_module_source(nvcc: str) -> None:
    mod = tir.build(schedule_elementwise(make_add_one()).func, "cuda -arch=sm_80")
    assert "add_one_kernel0" in mod.get_source("cuda")
    assert mod.cubin[:4] == b"\x7fELF"


@pytest.mark.cuda
def test_elementwise_runs() -> None:
    mod = tir.build(schedule_elementwise(make_add_one()).func, "cuda -arch=sm_80")
    a = np.random.default_rng(0).standard_normal(1024).astype("float32")
    b = np.zeros_like(a)
    mod(a, b)
    i = np.arange(1024)
    np.testing.assert_allclose(b, np.exp(a) + (i // 3 - i % 5), rtol=1e-5)


@pytest.mark.cuda
def test_shared_tiled_matmul_runs() -> None:
    mod = tir.build(schedule_shared_tiled(make_matmul_f32(128)).func, "cuda -arch=sm_80")
    rng = np.random.default_rng(0)
    a, b = rng.random((128, 128), "float32"), rng.random((128, 128), "float32")
    c = np.zeros((128, 128), "float32")
    mod(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4)


def test_gpu_pipeline_pass_names() -> None:
    from tir.target import Target
    from tir.transform import GPU_PASS_NAMES, passes

    seen: list[str] = []
    lower(schedule_elementwise(make_add_one()).func, "cuda -arch=sm_80", dump=lambda name, _: seen.append(name))
    assert tuple(seen) == GPU_PASS_NAMES == tuple(name for name, _ in passes(Target.parse("cuda -arch=sm_80")))


def _shifted_copy(shift: int, lanes: int = 4) -> tir.PrimFunc:
    """``B[i] = A[i + shift]`` over 1024 floats: 32-thread blocks, ``lanes`` floats per thread."""

    @T.script
    def copy(A: T.Buffer((1024 + 8,), "float32"), B: T.Buffer((1024,), "float32")):
        for i in range(1024):
            with T.block("B"):
                vi = T.remap("S", i)
                B[vi] = A[vi + shift]

    sch = tir.schedule.Schedule(copy)
    (i,) = sch.get_loops(sch.get_block("B"))
    bx, tx, vec = sch.split(i, [None, 32, lanes])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    sch.vectorize(vec)
    return sch.func


def test_aligned_vectorized_copies_are_one_vector_load_and_store(nvcc: str, sass_tool: str) -> None:
    source = _source(_shifted_copy(shift=4))
    assert "*(uint4*)(&B[" in source and "*(const uint4*)(&A[" in source
    sass = disassemble(compile_cuda(source, "sm_80"))
    assert "LDG.E.128" in sass and "STG.E.128" in sass
    # 2 floats per thread: 8 bytes, one uint2
    assert "*(uint2*)(&B[" in _source(_shifted_copy(shift=2, lanes=2))


@pytest.mark.parametrize("shift", [1, 2])
def test_vectorized_copies_that_may_be_misaligned_stay_loops(shift: int) -> None:
    source = _source(_shifted_copy(shift=shift))  # A[4 t + 1] is not 16-byte aligned
    assert "uint4" not in source.split("__global__")[1]
    assert "for (int i_2 = 0; i_2 < 4; ++i_2)" in source


def test_tensor_core_copies_to_shared_memory_are_128_bit(nvcc: str, sass_tool: str) -> None:
    """The example's global -> shared copies, not pipelined (no cp.async), are 16-byte loads and stores."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    import matmul_tensorcore

    func = matmul_tensorcore.schedule_matmul(matmul_tensorcore.make_matmul(256), pipelined=False).func
    source = _source(func)
    assert source.count("*(uint4*)(&A_shared[") == 1 and source.count("*(uint4*)(&B_shared[") == 1
    sass = disassemble(compile_cuda(source, "sm_80"))
    assert "LDG.E.128" in sass and "STS.128" in sass


@pytest.mark.cuda
@pytest.mark.parametrize("shift,lanes", [(4, 4), (1, 4), (2, 2)])
def test_vectorized_copies_run(shift: int, lanes: int) -> None:
    module = tir.build(_shifted_copy(shift, lanes), "cuda -arch=sm_80")
    a = np.random.default_rng(0).standard_normal(1024 + 8).astype("float32")
    b = np.full(1024, np.nan, "float32")
    module(a, b)
    np.testing.assert_array_equal(b, a[shift : shift + 1024])


def test_bitwise_operators_compile(nvcc: str) -> None:
    @T.script
    def bits(A: T.Buffer((256,), "int32"), B: T.Buffer((256,), "uint8")):
        for i in range(256):
            with T.block("B"):
                vi = T.remap("S", i)
                B[vi] = T.cast((A[vi] & 255) | (A[vi] ^ vi), "uint8") & ~T.uint8(3)

    sch = Schedule(bits)
    (i,) = sch.get_loops(sch.get_block("B"))
    bx, tx = sch.split(i, [None, 64])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    source = _source(sch.func)
    assert "(int)(" in source and " & " in source and " | " in source and " ^ " in source and "~" in source
    compile_cuda(source, "sm_80")
