"""IR construction: dtypes, operator overloading, type checks, visitor/mutator identity."""

from __future__ import annotations

import pytest

from tir.ir import (
    Add,
    Block,
    BlockRealize,
    Broadcast,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    Cast,
    DataType,
    FloatImm,
    FloorDiv,
    For,
    ForKind,
    IntImm,
    IRMutator,
    IterKind,
    IterVar,
    Mul,
    PrimExpr,
    Ramp,
    Range,
    Var,
    const,
    post_order_visit,
    substitute,
)
from tir.ir.stmt import seq


def test_dtype_parse_and_print() -> None:
    for text in ["bool", "int8", "int16", "int32", "int64", "uint8", "float16", "bfloat16", "float32", "float64"]:
        assert str(DataType.parse(text)) == text
    vec = DataType.parse("float32x8")
    assert (vec.kind, vec.bits, vec.lanes) == ("float", 32, 8)
    assert str(vec.element) == "float32"
    assert DataType.parse("int8").max_value() == 127
    assert DataType.parse("uint8").min_value() == 0


@pytest.mark.parametrize("bad", ["float7", "int", "floaty32", "int32x0", "uint32"])
def test_dtype_rejects_unknown(bad: str) -> None:
    with pytest.raises(ValueError):
        DataType.parse(bad)


def test_operators_build_nodes_with_literal_promotion() -> None:
    i = Var("i")
    expr = i * 4 + 1
    assert isinstance(expr, Add) and isinstance(expr.a, Mul)
    assert expr.dtype == DataType.parse("int32")
    x = Var("x", "float16")
    prod = x * 2
    assert isinstance(prod.b, FloatImm) and str(prod.b.dtype) == "float16"
    assert isinstance(i // 2, FloorDiv)
    assert str((i < 3).dtype) == "bool"


def test_mismatched_dtypes_are_rejected() -> None:
    with pytest.raises(TypeError, match="different dtypes: int32 and float32"):
        Add(Var("i"), Var("x", "float32"))
    with pytest.raises(TypeError, match="non-integer"):
        const(1.5, "int32")
    with pytest.raises(ValueError, match="does not fit in int8"):
        IntImm(300, "int8")


def test_expressions_have_no_truth_value() -> None:
    with pytest.raises(TypeError, match="no Python truth value"):
        bool(Var("i") < 3)


def test_vector_nodes() -> None:
    ramp = Ramp(IntImm(0), IntImm(1), 8)
    assert str(ramp.dtype) == "int32x8"
    buf = Buffer("A", (64,), "float32")
    load = BufferLoad(buf, (ramp,))
    assert str(load.dtype) == "float32x8"
    assert str(Broadcast(FloatImm(0.0), 4).dtype) == "float32x4"
    assert str(Cast("int32x8", load).dtype) == "int32x8"
    with pytest.raises(TypeError, match="changes lanes"):
        Cast("int32", load)


def test_buffer_indexing_sugar() -> None:
    buf = Buffer("A", (16, 16), "float32")
    i = Var("i")
    assert isinstance(buf[i, 3], BufferLoad)
    region = buf[i, 0:4]
    assert isinstance(region, BufferRegion)
    assert region.region[1].extent.value == 4  # type: ignore[union-attr]
    assert buf.const_shape() == (16, 16)


def _matmul_block() -> tuple[BlockRealize, Var]:
    A = Buffer("A", (8, 8), "float32")
    C = Buffer("C", (8,), "float32")
    i, k = Var("i"), Var("k")
    vi, vk = Var("vi"), Var("vk")
    block = Block(
        name="C",
        iter_vars=(IterVar(vi, Range.from_extent(8)), IterVar(vk, Range.from_extent(8), IterKind.REDUCE)),
        reads=(BufferRegion.point(A, (vi, vk)),),
        writes=(BufferRegion.point(C, (vi,)),),
        body=BufferStore(C, C[vi] + A[vi, vk], (vi,)),
        init=BufferStore(C, FloatImm(0.0), (vi,)),
    )
    realize = BlockRealize((i, k), const(True), block)
    loops = For(i, IntImm(0), IntImm(8), ForKind.SERIAL, For(k, IntImm(0), IntImm(8), ForKind.SERIAL, realize))
    return loops, i  # type: ignore[return-value]


def test_mutator_returns_same_object_when_nothing_changes() -> None:
    loops, _ = _matmul_block()
    assert IRMutator().visit(loops) is loops
    j = Var("j")
    assert substitute(loops, {j: IntImm(0)}) is loops


def test_substitute_replaces_uses_not_definitions() -> None:
    loops, i = _matmul_block()
    replaced = substitute(loops, {i: IntImm(3)})
    assert replaced is not loops
    assert replaced.loop_var is i  # the definition stays
    realize = replaced.body.body
    assert isinstance(realize.iter_values[0], IntImm) and realize.iter_values[0].value == 3


def test_post_order_visit_sees_children_first() -> None:
    i = Var("i")
    expr = i * 2 + 1
    seen: list[str] = []
    post_order_visit(expr, lambda n: seen.append(type(n).__name__))
    assert seen[-1] == "Add"
    assert seen.index("Mul") < seen.index("Add")


def test_replace_with_no_change_is_identity() -> None:
    i = Var("i")
    expr = i + 1
    assert expr.replace(a=expr.a) is expr
    assert expr.replace(a=i) is expr


def test_seq_flattens() -> None:
    buf = Buffer("A", (4,), "int32")
    s1 = BufferStore(buf, IntImm(1), (IntImm(0),))
    s2 = BufferStore(buf, IntImm(2), (IntImm(1),))
    assert seq(s1) is s1
    assert len(seq(seq(s1, s2), s1).stmts) == 3


def test_prim_expr_is_base() -> None:
    assert isinstance(Var("x"), PrimExpr)
