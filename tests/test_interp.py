"""The reference interpreter: dtype rules, block semantics, vectors, argument checks, speed.

Programs are built with the IR constructors directly (through the small helpers below), so
these tests depend on nothing but ``tir.ir``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

import tir
from tir.interp import InterpretError, to_python
from tir.ir import (
    Allocate,
    Block,
    BlockRealize,
    Broadcast,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    Call,
    Cast,
    Div,
    Evaluate,
    FloorDiv,
    FloorMod,
    For,
    ForKind,
    IfThenElse,
    IterKind,
    IterVar,
    Let,
    LetStmt,
    MatchBufferRegion,
    Max,
    Min,
    PrimExpr,
    PrimFunc,
    Ramp,
    Range,
    Select,
    Stmt,
    StringImm,
    Var,
    const,
)
from tir.ir.stmt import seq

# ---------------------------------------------------------------- building programs


def loop(var: Var, extent: int | PrimExpr, body: Stmt, kind: ForKind = ForKind.SERIAL, tag: str | None = None) -> For:
    extent_expr = const(extent) if isinstance(extent, int) else extent
    return For(var, const(0, extent_expr.dtype), extent_expr, kind, body, thread_tag=tag)


def grid(extents: Sequence[int | PrimExpr], make_body: Callable[..., Stmt]) -> Stmt:
    """Nested serial loops ``i0, i1, ...`` over ``extents`` around ``make_body(i0, i1, ...)``."""
    loop_vars = [Var(f"i{n}") for n in range(len(extents))]
    stmt = make_body(*loop_vars)
    for var, extent in reversed(list(zip(loop_vars, extents))):
        stmt = loop(var, extent, stmt)
    return stmt


def block(
    name: str,
    axes: Sequence[tuple[Any, PrimExpr]],
    make_body: Callable[..., Stmt],
    *,
    kinds: str = "",
    make_init: Callable[..., Stmt] | None = None,
    predicate: PrimExpr | None = None,
    alloc_buffers: Sequence[Buffer] = (),
    make_match: Callable[..., Sequence[MatchBufferRegion]] | None = None,
) -> BlockRealize:
    """A block realize; ``axes`` are ``(extent or (lo, hi), binding)``, ``kinds`` like ``"SSR"``."""
    iter_vars = []
    for n, (dom, _) in enumerate(axes):
        lo, hi = dom if isinstance(dom, tuple) else (0, dom)
        kind = IterKind(kinds[n]) if kinds else IterKind.SPATIAL
        iter_vars.append(IterVar(Var(f"v{n}"), Range(const(lo), const(hi - lo)), kind))
    vs = [iv.var for iv in iter_vars]
    body = make_body(*vs)
    init = make_init(*vs) if make_init else None
    match = tuple(make_match(*vs)) if make_match else ()
    blk = Block(name, tuple(iter_vars), (), (), body, init, tuple(alloc_buffers), match)
    return BlockRealize(tuple(value for _, value in axes), const(True) if predicate is None else predicate, blk)


def prim_func(name: str, params: Sequence[Any], *stmts: Stmt, alloc_buffers: Sequence[Buffer] = ()) -> PrimFunc:
    root = Block("root", (), (), (), seq(*stmts), alloc_buffers=tuple(alloc_buffers))
    return PrimFunc(name, tuple(params), BlockRealize((), const(True), root))


def elementwise(name: str, n: int, dtype: str, compute: Callable[..., PrimExpr], inputs: int = 2) -> PrimFunc:
    """``Out[i] = compute(In0[i], In1[i], ...)`` over ``n`` elements."""
    ins = [Buffer(f"In{k}", (n,), dtype) for k in range(inputs)]
    out_dtype = compute(*[b[0] for b in ins]).dtype
    out = Buffer("Out", (n,), out_dtype)
    body = grid([n], lambda i: block("E", [(n, i)], lambda v: BufferStore(out, compute(*[b[v] for b in ins]), (v,))))
    return prim_func(name, [*ins, out], body)


def matmul(n: int, dtype: str = "float32", split_k: int | None = None) -> PrimFunc:
    a, b, c = (Buffer(name, (n, n), dtype) for name in "ABC")

    def update(vi: Var, vj: Var, vk: Var) -> Stmt:
        return BufferStore(c, c[vi, vj] + a[vi, vk] * b[vk, vj], (vi, vj))

    def init(vi: Var, vj: Var, vk: Var) -> Stmt:
        return BufferStore(c, const(0, dtype), (vi, vj))

    if split_k is None:
        body = grid([n, n, n], lambda i, j, k: block("C", [(n, i), (n, j), (n, k)], update, kinds="SSR", make_init=init))
    else:
        body = grid(
            [n, n, n // split_k, split_k],
            lambda i, j, ko, ki: block(
                "C", [(n, i), (n, j), (n, ko * split_k + ki)], update, kinds="SSR", make_init=init
            ),
        )
    return prim_func("matmul", [a, b, c], body)


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """Independent reference: round float32 to bfloat16 bits (nearest even), integer math only."""
    out = []
    for bits in np.asarray(x, dtype=np.float32).view(np.uint32).ravel().tolist():
        upper, lower = bits >> 16, bits & 0xFFFF
        if lower > 0x8000 or (lower == 0x8000 and upper & 1):
            upper += 1
        out.append(upper)
    return np.array(out, dtype=np.uint16).reshape(np.shape(x))


def bf16_values(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


# ---------------------------------------------------------------- basics


def test_matmul_matches_numpy() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 16, 16), dtype=np.float32)
    c = np.empty((16, 16), np.float32)
    tir.interpret(matmul(16), a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_matmul_64_is_fast() -> None:
    f = matmul(64)
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((2, 64, 64), dtype=np.float32)
    c = np.empty((64, 64), np.float32)
    start = time.perf_counter()
    tir.interpret(f, a, b, c)
    elapsed = time.perf_counter() - start
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    assert elapsed < 1.0, f"64^3 matmul took {elapsed:.3f} s"


def test_generated_code_is_plain_python() -> None:
    text = to_python(matmul(4))
    assert "for i0_" in text and "range(4)" in text
    assert "if v2_" in text and "== 0:" in text  # the init condition
    compile(text, "<test>", "exec")


def test_interpret_accepts_a_single_function_module() -> None:
    f = elementwise("add", 4, "float32", lambda x, y: x + y)
    x, y, out = np.ones(4, np.float32), np.ones(4, np.float32), np.zeros(4, np.float32)
    tir.interpret(tir.IRModule({"add": f}), x, y, out)
    np.testing.assert_array_equal(out, 2 * np.ones(4))


# ---------------------------------------------------------------- dtypes


def test_int8_arithmetic_wraps_around() -> None:
    f = elementwise("mul", 4, "int8", lambda x, y: x * y + x)
    x = np.array([100, -128, 127, 5], np.int8)
    y = np.array([3, -1, 2, -7], np.int8)
    out = np.zeros(4, np.int8)
    tir.interpret(f, x, y, out)
    expected = [((int(p) * int(q) + int(p) + 128) % 256) - 128 for p, q in zip(x, y)]
    assert out.tolist() == expected == [-112, 0, 125, -30]


def test_int8_product_widened_by_cast_does_not_wrap() -> None:
    f = elementwise("mul", 3, "int8", lambda x, y: Cast("int32", x) * Cast("int32", y))
    x, y = np.array([100, -128, 127], np.int8), np.array([3, -128, 127], np.int8)
    out = np.zeros(3, np.int32)
    tir.interpret(f, x, y, out)
    assert out.tolist() == [300, 16384, 16129]


def test_uint8_and_int32_wrap() -> None:
    f = elementwise("sub", 2, "uint8", lambda x, y: x - y)
    out = np.zeros(2, np.uint8)
    tir.interpret(f, np.array([1, 200], np.uint8), np.array([2, 100], np.uint8), out)
    assert out.tolist() == [255, 100]
    g = elementwise("add", 1, "int32", lambda x, y: x + y)
    out32 = np.zeros(1, np.int32)
    tir.interpret(g, np.array([2**31 - 1], np.int32), np.array([1], np.int32), out32)
    assert out32.tolist() == [-(2**31)]


def test_integer_division_semantics() -> None:
    a, b = np.array([7, -7, 7, -7], np.int32), np.array([2, 2, -2, -2], np.int32)
    results = {}
    for name, op in (("floordiv", FloorDiv), ("floormod", FloorMod), ("div", Div)):
        out = np.zeros(4, np.int32)
        tir.interpret(elementwise(name, 4, "int32", op), a, b, out)
        results[name] = out.tolist()
    assert results["floordiv"] == [3, -4, -4, 3]
    assert results["floormod"] == [1, 1, -1, -1]
    assert results["div"] == [3, -3, -3, 3]  # C: toward zero



def test_integer_division_by_zero_and_overflow_follow_numpy() -> None:
    """x // 0, x % 0 and truncdiv(x, 0) give 0; MIN // -1 wraps to MIN, MIN % -1 is 0 (as LLVM)."""
    minimum = -(2**31)
    a = np.array([7, -7, 0, minimum, minimum], np.int32)
    b = np.array([0, 0, 0, -1, 0], np.int32)
    expected = {
        "floordiv": [0, 0, 0, minimum, 0],
        "floormod": [0, 0, 0, 0, 0],
        "div": [0, 0, 0, minimum, 0],
    }
    for name, op in (("floordiv", FloorDiv), ("floormod", FloorMod), ("div", Div)):
        out = np.full(5, 3, np.int32)
        tir.interpret(elementwise(name, 5, "int32", op), a, b, out)
        assert out.tolist() == expected[name], name


def test_float16_rounds_every_operation() -> None:
    f = elementwise("fma16", 64, "float16", lambda x, y, z: x * y + z, inputs=3)
    rng = np.random.default_rng(2)
    x, y, z = (rng.standard_normal(64).astype(np.float16) for _ in range(3))
    out = np.zeros(64, np.float16)
    tir.interpret(f, x, y, z, out)
    np.testing.assert_array_equal(out, (x * y) + z)  # numpy float16 rounds each op
    assert not np.array_equal(out, (x.astype(np.float64) * y + z).astype(np.float16))


def test_float32_constant_is_rounded_to_float32() -> None:
    f = elementwise("add", 1, "float32", lambda x: x + 0.1, inputs=1)
    out = np.zeros(1, np.float32)
    tir.interpret(f, np.array([1.0], np.float32), out)
    assert out[0] == np.float32(1.0) + np.float32(0.1)


def test_bfloat16_buffers_hold_bits_and_round_to_nearest_even() -> None:
    f = elementwise("mul", 256, "bfloat16", lambda x, y: x * y + x)
    rng = np.random.default_rng(3)
    x = bf16_bits(rng.standard_normal(256).astype(np.float32))
    y = bf16_bits(rng.standard_normal(256).astype(np.float32))
    out = np.zeros(256, np.uint16)
    tir.interpret(f, x, y, out)
    product = bf16_bits(bf16_values(x) * bf16_values(y))
    expected = bf16_bits(bf16_values(product) + bf16_values(x))
    np.testing.assert_array_equal(out, expected)


def test_bfloat16_cast_ties_to_even() -> None:
    f = elementwise("cast", 3, "float32", lambda x: Cast("bfloat16", x), inputs=1)
    # 1 + 2^-8 is halfway between bfloat16 1.0 and 1 + 2^-7: ties to even -> 1.0;
    # 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6 -> 1 + 2^-6.
    x = np.array([1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-20], np.float32)
    out = np.zeros(3, np.uint16)
    tir.interpret(f, x, out)
    assert bf16_values(out).tolist() == [1.0, 1 + 2**-6, 1 + 2**-7]


def test_bfloat16_rejects_float32_arrays() -> None:
    f = elementwise("copy", 2, "bfloat16", lambda x: x, inputs=1)
    with pytest.raises(TypeError, match=r"expected dtype bfloat16 \(bfloat16 buffers take a uint16 array"):
        tir.interpret(f, np.zeros(2, np.float32), np.zeros(2, np.uint16))


def test_casts() -> None:
    f = elementwise("to_int8", 4, "float32", lambda x: Cast("int8", x), inputs=1)
    out = np.zeros(4, np.int8)
    tir.interpret(f, np.array([2.9, -2.9, 127.5, -128.9], np.float32), out)
    assert out.tolist() == [2, -2, 127, -128]  # truncation toward zero
    # Out of range saturates and NaN becomes 0 (llvm.fptosi.sat semantics, docs/lowering.md).
    tir.interpret(f, np.array([1e10, -1e10, np.inf, np.nan], np.float32), out)
    assert out.tolist() == [127, -128, 127, 0]
    g = elementwise("narrow", 3, "int32", lambda x: Cast("int8", x), inputs=1)
    out8 = np.zeros(3, np.int8)
    tir.interpret(g, np.array([300, -129, 5], np.int32), out8)
    assert out8.tolist() == [44, 127, 5]
    h = elementwise("bool", 3, "float32", lambda x: Cast("int32", Cast("bool", x)), inputs=1)
    out32 = np.zeros(3, np.int32)
    tir.interpret(h, np.array([0.0, -0.5, np.nan], np.float32), out32)
    assert out32.tolist() == [0, 1, 1]


def test_math_calls() -> None:
    def call(op: str) -> Callable[[PrimExpr], PrimExpr]:
        return lambda x: Call("float32", op, (x,))

    x = np.array([-2.5, -0.5, 0.5, 1.5, 2.5, 0.49999997], np.float32)
    out = np.zeros_like(x)
    tir.interpret(elementwise("round", 6, "float32", call("round"), inputs=1), x, out)
    assert out.tolist() == [-3.0, -1.0, 1.0, 2.0, 3.0, 0.0]  # llvm.round: half away from zero
    for op, reference in (("exp", np.exp), ("tanh", np.tanh), ("sqrt", np.sqrt), ("erf", np.vectorize(math.erf))):
        y = np.array([0.25, 1.0, 2.0], np.float32)
        got = np.zeros(3, np.float32)
        tir.interpret(elementwise(op, 3, "float32", call(op), inputs=1), y, got)
        np.testing.assert_array_equal(got, reference(y.astype(np.float64)).astype(np.float32))
    sig = np.zeros(1, np.float32)
    tir.interpret(elementwise("sigmoid", 1, "float32", call("sigmoid"), inputs=1), np.zeros(1, np.float32), sig)
    assert sig[0] == 0.5


def test_fma_and_known_llvm_intrinsics() -> None:
    fma = elementwise("fma", 1, "float64", lambda a, b, c: Call("float64", "fma", (a, b, c)), inputs=3)
    a, b, c = np.array([1 + 2**-30]), np.array([1 - 2**-30]), np.array([-1.0])
    out = np.zeros(1)
    tir.interpret(fma, a, b, c, out)
    assert out[0] == -(2.0**-60)  # single rounding; a * b + c in float64 gives 0.0
    llvm = elementwise(
        "llvm_fma",
        2,
        "float32",
        lambda a, b, c: Call("float32", "call_llvm_pure_intrin", (StringImm("llvm.fmuladd.f32"), a, b, c)),
        inputs=3,
    )
    got = np.zeros(2, np.float32)
    tir.interpret(llvm, np.float32([2, 3]), np.float32([4, 5]), np.float32([1, 1]), got)
    assert got.tolist() == [9.0, 16.0]


def test_unknown_intrinsic_raises_not_implemented() -> None:
    f = elementwise(
        "vnni_words",
        1,
        "int32",
        lambda a: Call("int32", "call_llvm_intrin", (StringImm("llvm.x86.avx512.vpdpwssd.512"), a)),
        inputs=1,
    )
    with pytest.raises(NotImplementedError, match=r"call_llvm_intrin 'llvm.x86.avx512.vpdpwssd.512'"):
        tir.interpret(f, np.zeros(1, np.int32), np.zeros(1, np.int32))


def test_min_max_select_let() -> None:
    f = elementwise(
        "mix",
        3,
        "float32",
        lambda x, y: Select(x < y, Max(x, y), Min(x, y)) + Let(Var("t", "float32"), x, x),
    )
    x, y = np.float32([1, 5, -2]), np.float32([3, 2, -2])
    out = np.zeros(3, np.float32)
    tir.interpret(f, x, y, out)
    assert out.tolist() == [4.0, 7.0, -4.0]


# ---------------------------------------------------------------- blocks


def test_init_runs_on_first_iteration_of_split_reduction() -> None:
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((2, 8, 8), dtype=np.float32)
    c = np.full((8, 8), 123.0, np.float32)
    f = matmul(8, split_k=4)
    tir.interpret(f, a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    assert "== 0:" in to_python(f)


def test_init_condition_uses_the_domain_minimum() -> None:
    # Sum of A[4:8]: the reduce axis has domain [4, 8), so init runs when vk == 4.
    a, out = Buffer("A", (8,), "int32"), Buffer("S", (1,), "int32")
    body = grid(
        [4],
        lambda k: block(
            "S",
            [((4, 8), k + 4)],
            lambda vk: BufferStore(out, out[0] + a[vk], (const(0),)),
            kinds="R",
            make_init=lambda vk: BufferStore(out, const(0), (const(0),)),
        ),
    )
    s = np.array([999], np.int32)
    tir.interpret(prim_func("partial_sum", [a, out], body), np.arange(8, dtype=np.int32), s)
    assert s.tolist() == [4 + 5 + 6 + 7]


def test_predicate_skips_block_instances() -> None:
    # 10 elements, loops split 3 x 4: the predicate guards the two extra instances.
    a, b = Buffer("A", (10,), "float32"), Buffer("B", (10,), "float32")
    body = grid(
        [3, 4],
        lambda io, ii: block(
            "B",
            [(10, io * 4 + ii)],
            lambda v: BufferStore(b, a[v] * 2.0, (v,)),
            predicate=io * 4 + ii < 10,
        ),
    )
    x, y = np.arange(10, dtype=np.float32), np.zeros(10, np.float32)
    tir.interpret(prim_func("split", [a, b], body), x, y)
    np.testing.assert_array_equal(y, x * 2)


def test_binding_outside_the_domain_is_refused() -> None:
    a = Buffer("A", (16,), "float32")
    body = grid([12], lambda i: block("B", [(10, i)], lambda v: BufferStore(a, const(1.0), (v,))))
    with pytest.raises(InterpretError, match=r"block 'B': iterator v0 is bound to 10, outside its domain \[0, 10\)"):
        tir.interpret(prim_func("bad", [a], body), np.zeros(16, np.float32))


def test_alloc_buffer_is_poisoned() -> None:
    # B[i] = T[i] + 1 reads the scratch buffer T before anything wrote it.
    a, b = Buffer("A", (4,), "float32"), Buffer("B", (4,), "float32")
    tmp = Buffer("T", (4,), "float32")
    write_half = grid([2], lambda i: block("T", [(4, i)], lambda v: BufferStore(tmp, a[v], (v,))))
    read_all = grid([4], lambda i: block("B", [(4, i)], lambda v: BufferStore(b, tmp[v] + 1.0, (v,))))
    f = prim_func("uninit", [a, b], write_half, read_all, alloc_buffers=[tmp])
    x, y = np.arange(4, dtype=np.float32), np.zeros(4, np.float32)
    tir.interpret(f, x, y)
    assert y[:2].tolist() == [1.0, 2.0] and np.isnan(y[2:]).all()
    tir.interpret(f, x, y, poison=False)
    assert y.tolist() == [1.0, 2.0, 1.0, 1.0]


def test_int_poison_pattern_and_fresh_storage_per_block_instance() -> None:
    # Each instance of block "B" gets its own scratch buffer, poisoned again.
    out = Buffer("Out", (3,), "int32")
    tmp = Buffer("T", (1,), "int32")

    def body(v: Var) -> Stmt:
        return seq(
            BufferStore(out, tmp[0], (v,)),
            BufferStore(tmp, const(7), (const(0),)),
        )

    f = prim_func("poison", [out], grid([3], lambda i: block("B", [(3, i)], body, alloc_buffers=[tmp])))
    y = np.zeros(3, np.int32)
    tir.interpret(f, y)
    assert y.tolist() == [0x5B5B5B5B] * 3


def test_match_buffer_is_a_view_of_the_region() -> None:
    # Each 2x2 tile of A is doubled through a match_buffer view of it.
    a = Buffer("A", (4, 4), "float32")
    sub = Buffer("Asub", (2, 2), "float32")
    row = Buffer("Row", (4,), "float32")

    def tile(vi: Var, vj: Var) -> Stmt:
        return grid([2, 2], lambda x, y: BufferStore(sub, sub[x, y] * 2.0, (x, y)))

    def tile_match(vi: Var, vj: Var) -> list[MatchBufferRegion]:
        region = BufferRegion(a, (Range(vi * 2, const(2)), Range(vj * 2, const(2))))
        return [MatchBufferRegion(sub, region)]

    tiles = grid([2, 2], lambda i, j: block("tile", [(2, i), (2, j)], tile, make_match=tile_match))

    # A unit dimension of the region is dropped: A[v, 0:4] (extents (1, 4)) as a (4,) buffer.
    def row_match(v: Var) -> list[MatchBufferRegion]:
        return [MatchBufferRegion(row, BufferRegion(a, (Range(v, const(1)), Range(const(0), const(4)))))]

    rows = grid(
        [4], lambda i: block("row", [(4, i)], lambda v: BufferStore(row, row[3] + 1.0, (const(3),)), make_match=row_match)
    )
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    expected = x * 2
    expected[:, 3] += 1
    tir.interpret(prim_func("tiles", [a], tiles, rows), x)
    np.testing.assert_array_equal(x, expected)


def test_match_buffer_binds_stride_and_offset_variables() -> None:
    a, out = Buffer("A", (4, 6), "float32"), Buffer("Out", (3,), "int32")
    s0, s1, offset = Var("s0"), Var("s1"), Var("off")
    sub = Buffer("Asub", (2, 3), "float32", strides=(s0, s1), elem_offset=offset)

    def body() -> Stmt:
        return seq(
            BufferStore(out, s0, (const(0),)),
            BufferStore(out, s1, (const(1),)),
            BufferStore(out, offset, (const(2),)),
        )

    region = BufferRegion(a, (Range(const(1), const(2)), Range(const(2), const(3))))
    inner = block("m", [], body, make_match=lambda: [MatchBufferRegion(sub, region)])
    y = np.zeros(3, np.int32)
    tir.interpret(prim_func("strides", [a, out], inner), np.zeros((4, 6), np.float32), y)
    assert y.tolist() == [6, 1, 1 * 6 + 2]


def test_deep_loop_nests_run() -> None:
    # CPython allows 20 nested loops per function; the translator splits deeper nests.
    out = Buffer("Out", (1,), "int32")
    f = prim_func("deep", [out], grid([1] * 22 + [2, 3], lambda *vs: BufferStore(out, out[0] + 1, (const(0),))))
    y = np.zeros(1, np.int32)
    tir.interpret(f, y)
    assert y[0] == 6


# ---------------------------------------------------------------- statements and vectors


def test_vector_ramp_load_and_store() -> None:
    a, b = Buffer("A", (4, 8), "float32"), Buffer("B", (4, 8), "float32")

    def body(i: Var, j: Var) -> Stmt:
        lanes = Ramp(j * 4, const(1), 4)
        return BufferStore(b, BufferLoad(a, (i, lanes)) * Broadcast(const(2.0), 4), (i, lanes))

    f = prim_func("vec", [a, b], grid([4, 2], body))
    x, y = np.arange(32, dtype=np.float32).reshape(4, 8), np.zeros((4, 8), np.float32)
    tir.interpret(f, x, y)
    np.testing.assert_array_equal(y, x * 2)


def test_vector_index_in_first_dimension_and_two_vector_axes() -> None:
    a, b = Buffer("A", (4, 4), "int8"), Buffer("B", (16,), "int8")
    rows, cols = Ramp(const(0), const(1), 4), Ramp(const(0), const(1), 4)
    transpose = BufferStore(a, BufferLoad(a, (rows, const(1))) * Broadcast(const(100, "int8"), 4), (const(0), cols))
    flatten = BufferStore(b, BufferLoad(a, (rows, cols)), (Ramp(const(0), const(1), 16),))
    x = np.arange(16, dtype=np.int8).reshape(4, 4)
    expected = x.copy()
    expected[0, :] = (x[:, 1].astype(np.int32) * 100).astype(np.int8)
    y = np.zeros(16, np.int8)
    tir.interpret(prim_func("vec2", [a, b], transpose, flatten), x, y)
    np.testing.assert_array_equal(x, expected)
    np.testing.assert_array_equal(y, expected.reshape(-1))


def test_if_then_else_evaluates_only_the_taken_branch() -> None:
    a, b = Buffer("A", (8,), "float32"), Buffer("B", (10,), "float32")
    i = Var("i")
    lazy = Call("float32", "if_then_else", (i < 8, a[i], const(0.0)))
    x, y = np.arange(8, dtype=np.float32), np.full(10, -1.0, np.float32)
    tir.interpret(prim_func("pad", [a, b], loop(i, 10, BufferStore(b, lazy, (i,)))), x, y)
    assert y.tolist() == [*range(8), 0, 0]
    # Select evaluates both sides, so the same program with Select reads out of bounds.
    eager = Select(i < 8, a[i], const(0.0))
    with pytest.raises(IndexError, match=r"out-of-bounds access A\[8\]"):
        tir.interpret(prim_func("pad", [a, b], loop(i, 10, BufferStore(b, eager, (i,)))), x, y)


def test_statements_if_let_allocate_evaluate_thread_loops() -> None:
    out = Buffer("Out", (8,), "int32")
    tmp = Buffer("T", (8,), "int32")
    i, j, t = Var("i"), Var("j"), Var("t")
    fill = loop(i, 8, BufferStore(tmp, i * 10, (i,)), ForKind.THREAD_BINDING, "threadIdx.x")
    copy = loop(
        j,
        8,
        LetStmt(
            t,
            tmp[j],
            IfThenElse((j % 2).equal(0), BufferStore(out, t, (j,)), BufferStore(out, -t, (j,))),
        ),
        ForKind.PARALLEL,
    )
    f = PrimFunc("stmts", (out,), Allocate(tmp, seq(fill, copy, Evaluate(const(0)))))
    y = np.zeros(8, np.int32)
    tir.interpret(f, y)
    assert y.tolist() == [0, -10, 20, -30, 40, -50, 60, -70]


# ---------------------------------------------------------------- errors


def test_out_of_bounds_access_names_buffer_indices_and_shape() -> None:
    a, b = Buffer("A", (4, 4), "float32"), Buffer("B", (4,), "float32")
    f = prim_func("oob", [a, b], grid([4], lambda i: BufferStore(b, a[i, i + 1], (i,))))
    with pytest.raises(IndexError, match=r"out-of-bounds access A\[3, 4\]: buffer A has shape \(4, 4\)"):
        tir.interpret(f, np.zeros((4, 4), np.float32), np.zeros(4, np.float32))


def test_negative_index_does_not_wrap_around() -> None:
    a, b = Buffer("A", (4,), "float32"), Buffer("B", (4,), "float32")
    f = prim_func("neg", [a, b], grid([4], lambda i: BufferStore(b, a[i - 1], (i,))))
    with pytest.raises(IndexError, match=r"out-of-bounds access A\[-1\]: buffer A has shape \(4,\)"):
        tir.interpret(f, np.zeros(4, np.float32), np.zeros(4, np.float32))


def test_argument_count_dtype_shape_are_checked() -> None:
    f = matmul(4)
    ok = np.zeros((4, 4), np.float32)
    with pytest.raises(TypeError, match=r"matmul\(\) takes 3 arguments \(A, B, C\), 2 given"):
        tir.interpret(f, ok, ok)
    with pytest.raises(TypeError, match=r"parameter B: expected dtype float32, got float64"):
        tir.interpret(f, ok, np.zeros((4, 4)), ok)
    with pytest.raises(ValueError, match=r"parameter C: expected shape \(4, 4\), got \(4, 5\)"):
        tir.interpret(f, ok, ok, np.zeros((4, 5), np.float32))
    with pytest.raises(ValueError, match=r"parameter A: expected shape \(4, 4\) \(2 dimensions\), got \(16,\)"):
        tir.interpret(f, np.zeros(16, np.float32), ok, ok)
    with pytest.raises(TypeError, match=r"parameter A: expected a numpy.ndarray of dtype float32 and shape \(4, 4\), got list"):
        tir.interpret(f, [[0.0] * 4] * 4, ok, ok)
    with pytest.raises(ValueError, match=r"parameter C: the array must be C-contiguous"):
        tir.interpret(f, ok, ok, np.zeros((4, 4), np.float32).T)


def test_symbolic_shapes() -> None:
    # A: (n,) with n a parameter; B: (m, 2) with m bound from the array; C: (m, 2).
    n, m = Var("n"), Var("m")
    a, b, c = Buffer("A", (n,), "float32"), Buffer("B", (m, 2), "float32"), Buffer("C", (m, 2), "float32")
    i, j, k = Var("i"), Var("j"), Var("k")
    total = loop(i, n, BufferStore(a, a[i] + 1.0, (i,)))
    copy = loop(j, m, loop(k, 2, BufferStore(c, b[j, k] * 3.0, (j, k))))
    f = prim_func("sym", [a, n, b, c], total, copy)
    x = np.zeros(5, np.float32)
    y, z = np.ones((3, 2), np.float32), np.zeros((3, 2), np.float32)
    tir.interpret(f, x, 5, y, z)
    assert x.tolist() == [1.0] * 5 and z.tolist() == [[3.0, 3.0]] * 3
    with pytest.raises(ValueError, match=r"parameter A: expected shape \(n,\) = \(4,\), got \(5,\)"):
        tir.interpret(f, x, 4, y, z)
    with pytest.raises(ValueError, match=r"parameter C: expected shape \(m, 2\) = \(3, 2\), got \(4, 2\)"):
        tir.interpret(f, x, 5, y, np.zeros((4, 2), np.float32))
    with pytest.raises(TypeError, match=r"parameter n: expected an integer for int32, got float"):
        tir.interpret(f, x, 5.0, y, z)


def test_strided_parameter_buffer() -> None:
    s = Var("s")
    a = Buffer("A", (2, 3), "float32", strides=(s, const(1)))
    b = Buffer("B", (2, 3), "float32", strides=(const(3), const(1)))
    f = prim_func("strided", [a, b], grid([2, 3], lambda i, j: BufferStore(b, a[i, j], (i, j))))
    base = np.arange(12, dtype=np.float32).reshape(2, 6)
    out = np.zeros((2, 3), np.float32)
    tir.interpret(f, base[:, :3], out)
    np.testing.assert_array_equal(out, base[:, :3])
    with pytest.raises(ValueError, match=r"parameter B: expected strides \(3, 1\) \(elements\), got \(6, 1\)"):
        tir.interpret(f, base[:, :3], base[:, 3:])


def test_bfloat16_from_float64_rounds_once() -> None:
    # Just above the midpoint 1 + 2^-8: float64 -> float32 -> bfloat16 by nearest twice would
    # land on the tie and round down to 1.0; the direct rounding gives 1 + 2^-7.
    f = elementwise("cast", 2, "float64", lambda x: Cast("bfloat16", x), inputs=1)
    out = np.zeros(2, np.uint16)
    tir.interpret(f, np.array([1 + 2**-8 + 2**-40, -(1 + 2**-8 + 2**-40)]), out)
    assert bf16_values(out).tolist() == [1 + 2**-7, -(1 + 2**-7)]


def test_zero_dimensional_buffers_and_scalar_params() -> None:
    a, out = Buffer("A", (), "int8"), Buffer("Out", (), "float32")
    alpha, shift = Var("alpha", "float32"), Var("shift", "int8")
    f = prim_func("scalar", [a, alpha, shift, out], BufferStore(out, Cast("float32", a[()] + shift) * alpha, ()))
    y = np.zeros((), np.float32)
    tir.interpret(f, np.array(120, np.int8), 0.5, 10, y)
    assert y[()] == np.float32(-126 * 0.5)  # 120 + 10 wraps to -126 in int8
    with pytest.raises(ValueError, match=r"parameter shift: 200 does not fit in int8"):
        tir.interpret(f, np.array(1, np.int8), 0.5, 200, y)


def test_vector_if_then_else_evaluates_a_side_only_if_some_lane_takes_it() -> None:
    a, b = Buffer("A", (4,), "float32"), Buffer("B", (8,), "float32")
    i = Var("i")
    lanes = Ramp(i * 4, const(1), 4)
    cond = lanes < Broadcast(const(4), 4)
    value = Call("float32x4", "if_then_else", (cond, BufferLoad(a, (lanes,)), Broadcast(const(-1.0), 4)))
    x, y = np.arange(4, dtype=np.float32), np.zeros(8, np.float32)
    tir.interpret(prim_func("vpad", [a, b], loop(i, 2, BufferStore(b, value, (lanes,)))), x, y)
    assert y.tolist() == [0, 1, 2, 3, -1, -1, -1, -1]


MATMUL_RELU = '''
@T.script
def matmul_relu(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"), D: T.Buffer((16, 16), "float32")):
    C = T.alloc_buffer((16, 16), "float32")
    for i, j, k in T.grid(16, 16, 16):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]
    for i, j in T.grid(16, 16):
        with T.block("D"):
            vi = T.spatial_axis(16, i)
            vj = T.spatial_axis(16, j)
            D[vi, vj] = T.max(C[vi, vj], 0.0)
'''


SYMBOLIC_TILES = '''
@T.script
def tiles(a: T.handle, n: T.int32):
    A = T.match_buffer(a, (n, 8), "float32")
    for i, j in T.grid(n, 2):
        with T.block("tile"):
            vi, vj = T.remap("SS", i, j)
            Asub = T.match_buffer(A[vi, vj * 4:vj * 4 + 4], (4,), "float32")
            for x in T.vectorized(4):
                Asub[x] = T.if_then_else(x < 2, Asub[x] * 2.0, T.float32(-1))
    for io, ii in T.grid(3, 4):
        with T.block("count"):
            v = T.spatial_axis(10, io * 4 + ii)
            T.where(io * 4 + ii < 10)
            A[0, 0] = A[0, 0] + 1.0
'''


def parse_or_skip(text: str) -> PrimFunc:
    try:
        func = tir.parse(text)
    except NotImplementedError:
        pytest.skip("the script parser is not written yet")
    assert isinstance(func, PrimFunc)
    return func


def test_script_symbolic_match_buffer_program() -> None:
    f = parse_or_skip(SYMBOLIC_TILES)
    x = np.ones((3, 8), np.float32)
    tir.interpret(f, x, 3)
    row = [2, 2, -1, -1, 2, 2, -1, -1]
    assert x.tolist() == [[12, *row[1:]], row, row]


def test_script_program() -> None:
    f = parse_or_skip(MATMUL_RELU)
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((2, 16, 16), dtype=np.float32)
    d = np.empty((16, 16), np.float32)
    tir.interpret(f, a, b, d)
    np.testing.assert_allclose(d, np.maximum(a @ b, 0), rtol=1e-5, atol=1e-5)
