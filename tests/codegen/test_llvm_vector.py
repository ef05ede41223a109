"""Vector code: contiguous and strided (gather/scatter) accesses, broadcasts, vector selects,
AVX registers in the assembly, alignment, and where allocations go."""

from __future__ import annotations

import re

import numpy as np
import pytest
from codegen_kernels import assert_matches_interp, elementwise, run_llvm

import tir
import tir.script as T
from tir.codegen import codegen_llvm
from tir.ir import (
    LT,
    Allocate,
    Broadcast,
    Buffer,
    BufferLoad,
    BufferStore,
    Call,
    For,
    ForKind,
    IntImm,
    PrimFunc,
    Ramp,
    Var,
    const,
)
from tir.target import Target


@T.script
def scale_add(A: T.Buffer((64, 32), "float32"), B: T.Buffer((64, 32), "float32"), C: T.Buffer((64, 32), "float32")):
    for i in range(64):
        for j in T.vectorized(32):
            with T.block("C"):
                vi, vj = T.remap("SS", i, j)
                C[vi, vj] = A[vi, vj] * 2.0 + B[vi, vj]


@pytest.mark.skipif(not Target.host().has("avx"), reason="this CPU has no AVX")
def test_vectorized_loop_uses_ymm_or_zmm_registers() -> None:
    m = tir.build(scale_add, "llvm")
    asm = m.get_source("asm")
    assert re.search(r"v(add|fmadd\w*|mul)ps\s+.*%[yz]mm", asm), asm[:2000]
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 64, 32)).astype(np.float32)
    c = np.zeros((64, 32), np.float32)
    m(a, b, c)
    np.testing.assert_allclose(c, a * 2 + b, rtol=1e-6)


def test_llvm_ir_has_vector_types() -> None:
    ir_text = codegen_llvm(tir.transform.lower(scale_add, "llvm"), "llvm")
    assert "<8 x float>" in ir_text or "<16 x float>" in ir_text or "<32 x float>" in ir_text


def _strided_copy(stride: int, lanes: int = 8) -> PrimFunc:
    """``Out[i*lanes : i*lanes+lanes] = A[i : i + lanes*stride : stride]`` (a gather)."""
    a = Buffer("A", (lanes * stride + lanes,), "float32")
    out = Buffer("Out", (lanes * lanes,), "float32")
    i = Var("i")
    load = BufferLoad(a, (Ramp(i, IntImm(stride), lanes),))
    store = BufferStore(out, load, (Ramp(i * lanes, IntImm(1), lanes),))
    return PrimFunc("gather", (a, out), For(i, IntImm(0), IntImm(lanes), ForKind.SERIAL, store))


@pytest.mark.parametrize("stride", [2, 3, 0])
def test_gather(stride: int) -> None:
    f = _strided_copy(stride)
    a = np.arange(8 * stride + 8, dtype=np.float32)
    out = assert_matches_interp(f, [a, np.zeros(64, np.float32)])[1]
    assert out[8:16].tolist() == [1 + stride * k for k in range(8)]


def test_scatter_and_transpose() -> None:
    # Out[j*8 + i] for j in lanes = A[i*8 + j]: a transpose with a strided (scatter) store.
    a = Buffer("A", (64,), "int16")
    out = Buffer("Out", (64,), "int16")
    i = Var("i")
    store = BufferStore(out, BufferLoad(a, (Ramp(i * 8, IntImm(1), 8),)), (Ramp(i, IntImm(8), 8),))
    f = PrimFunc("transpose", (a, out), For(i, IntImm(0), IntImm(8), ForKind.SERIAL, store))
    x = np.arange(64, dtype=np.int16)
    got = assert_matches_interp(f, [x, np.zeros(64, np.int16)])[1]
    np.testing.assert_array_equal(got.reshape(8, 8), x.reshape(8, 8).T)


def test_scatter_with_a_repeated_index_keeps_the_last_lane() -> None:
    out = Buffer("Out", (2,), "int32")
    value = Ramp(IntImm(10), IntImm(1), 4)
    store = BufferStore(out, value, (Ramp(IntImm(0), IntImm(0), 4),))
    f = PrimFunc("repeat", (out,), store)
    assert run_llvm(f, [np.zeros(2, np.int32)])[0].tolist() == [13, 0]


def test_broadcast_index_and_value() -> None:
    a = Buffer("A", (4,), "float32")
    out = Buffer("Out", (8,), "float32")
    load = BufferLoad(a, (Broadcast(IntImm(2), 8),))  # one element, eight lanes
    store = BufferStore(out, load + Broadcast(const(1.0), 8), (Ramp(IntImm(0), IntImm(1), 8),))
    f = PrimFunc("bcast", (a, out), store)
    got = assert_matches_interp(f, [np.array([1, 2, 3, 4], np.float32), np.zeros(8, np.float32)])[1]
    assert got.tolist() == [4.0] * 8


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "int8", "uint8", "int64", "float64", "bool"])
def test_vector_loads_and_stores_of_every_dtype(dtype: str) -> None:
    from tir.interp.runtime import bf16_to_bits

    f = elementwise(f"copy_{dtype}", 32, [dtype, dtype], lambda a, b: tir.ir.Select(LT(a, b), b, a), ForKind.VECTORIZED)
    rng = np.random.default_rng(3)
    if dtype == "bool":
        a, b = rng.integers(0, 2, (2, 32)).astype(bool)
    elif dtype == "bfloat16":
        a, b = bf16_to_bits(rng.standard_normal((2, 32)).astype(np.float32))
    else:
        a, b = (rng.standard_normal((2, 32)) * 50).astype(dtype)
    out = np.zeros(32, a.dtype)
    assert_matches_interp(f, [a, b, out])


def test_vector_if_then_else_with_mixed_lanes() -> None:
    a = Buffer("A", (8,), "float32")
    out = Buffer("Out", (8,), "float32")
    lanes = Ramp(IntImm(0), IntImm(1), 8)
    condition = LT(lanes, Broadcast(IntImm(5), 8))
    value = Call("float32x8", "if_then_else", (condition, BufferLoad(a, (lanes,)), Broadcast(const(-1.0), 8)))
    f = PrimFunc("vite", (a, out), BufferStore(out, value, (lanes,)))
    got = assert_matches_interp(f, [np.arange(8, dtype=np.float32), np.zeros(8, np.float32)])[1]
    assert got.tolist() == [0, 1, 2, 3, 4, -1, -1, -1]


def _local_buffer_program(extent: int, storage: str) -> PrimFunc:
    """``for i: tmp = A[i*8 : i*8+8] * 2 (vector); Out[i*8 ...] = tmp + 1`` with ``tmp`` allocated in the loop."""
    a = Buffer("A", (extent * 8,), "float32")
    out = Buffer("Out", (extent * 8,), "float32")
    tmp = Buffer("tmp", (8,), "float32")
    i = Var("i")
    whole = Ramp(IntImm(0), IntImm(1), 8)
    part = Ramp(i * 8, IntImm(1), 8)
    body = Allocate(
        tmp,
        tir.ir.SeqStmt(
            (
                BufferStore(tmp, BufferLoad(a, (part,)) * Broadcast(const(2.0), 8), (whole,)),
                BufferStore(out, BufferLoad(tmp, (whole,)) + Broadcast(const(1.0), 8), (part,)),
            )
        ),
        storage,
    )
    return PrimFunc("local", (a, out), For(i, IntImm(0), IntImm(extent), ForKind.SERIAL, body))


def test_stack_allocation_is_hoisted_to_the_entry_block_and_aligned() -> None:
    f = _local_buffer_program(4, "stack")
    text = codegen_llvm(f, "llvm")
    body = text[text.index('define internal i32 @"local.body"') :]
    body = body[: body.index("\n}\n")]
    entry, rest = body.split("\nbody:", 1)
    assert "alloca [8 x float], align 64" in entry
    assert "alloca" not in rest
    assert re.search(r"load <8 x float>, ptr %\S+, align 32", rest)  # tmp: provably aligned
    x = np.arange(32, dtype=np.float32)
    out = run_llvm(f, [x, np.zeros(32, np.float32)])[1]
    np.testing.assert_array_equal(out, x * 2 + 1)


def test_heap_allocation_is_freed() -> None:
    f = _local_buffer_program(4, "heap")
    text = codegen_llvm(f, "llvm")
    assert re.search(r"call ptr @\"?aligned_alloc", text) and re.search(r"call void @\"?free", text)
    x = np.arange(32, dtype=np.float32)
    np.testing.assert_array_equal(run_llvm(f, [x, np.zeros(32, np.float32)])[1], x * 2 + 1)


@T.script
def with_local(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("outer"):
            vi = T.spatial_axis(16, i)
            acc = T.alloc_buffer((16,), "float32")
            for j in range(16):
                with T.block("copy"):
                    vj = T.spatial_axis(16, j)
                    acc[vj] = A[vi, vj] * A[vi, vj]
            for j in range(16):
                with T.block("sum"):
                    vj = T.reduce_axis(16, j)
                    with T.init():
                        B[vi] = 0.0
                    B[vi] = B[vi] + acc[vj]


def test_block_local_buffer_through_the_pipeline() -> None:
    a = np.random.default_rng(4).standard_normal((16, 16)).astype(np.float32)
    b = np.zeros(16, np.float32)
    tir.build(with_local)(a, b)
    np.testing.assert_allclose(b, (a.astype(np.float64) ** 2).sum(axis=1), rtol=1e-5)
