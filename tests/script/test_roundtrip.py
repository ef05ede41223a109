"""``tir.parse(f.script())`` is structurally equal to ``f``, and printing is stable."""

from __future__ import annotations

import pytest
from script_exprgen import ExprGen
from script_programs import ALL_PROGRAMS

import tir
import tir.script as T
from tir.ir import (
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferStore,
    For,
    ForKind,
    IntImm,
    IterKind,
    IterVar,
    PrimFunc,
    Range,
    SeqStmt,
    Var,
)


def assert_round_trip(func: tir.PrimFunc | tir.IRModule) -> None:
    text = func.script()
    reparsed = tir.parse(text)
    tir.assert_structural_equal(reparsed, func)
    assert tir.structural_hash(reparsed) == tir.structural_hash(func)
    assert reparsed.script() == text  # printing what was parsed gives the same text
    assert func.script() == text  # and printing is deterministic


@pytest.mark.parametrize("func", ALL_PROGRAMS, ids=[f.name for f in ALL_PROGRAMS])
def test_program_round_trip(func: tir.PrimFunc) -> None:
    assert_round_trip(func)


@pytest.mark.parametrize("seed", range(12))
def test_random_expressions_round_trip(seed: int) -> None:
    # Precedence, literal typing and constant folding on random well-typed expressions.
    assert_round_trip(ExprGen(seed).func(count=6, depth=4))


def test_module_round_trip() -> None:
    text = (
        "@T.script\n"
        'def first(A: T.Buffer((4,), "float32")):\n'
        "    for i in range(4):\n"
        "        A[i] = 1.0\n"
        "\n\n"
        "@T.script\n"
        'def second(B: T.Buffer((2, 2), "int32")):\n'
        "    for i, j in T.grid(2, 2):\n"
        "        B[i, j] = i * 2 + j\n"
    )
    module = tir.parse(text)
    assert isinstance(module, tir.IRModule)
    assert list(module) == ["first", "second"]
    assert module.script() == text.rstrip("\n")
    assert_round_trip(module)


def _root(body: tir.Stmt) -> BlockRealize:
    return BlockRealize((), IntImm(1, "bool"), Block("root", (), (), (), body))


def test_same_names_distinct_objects_round_trip() -> None:
    # Two loop variables and two buffers called alike must print with distinct names.
    i_outer, i_inner = Var("i"), Var("i")
    a_param, a_alloc = Buffer("A", (IntImm(4), IntImm(4)), "float32"), Buffer("A", (IntImm(4),), "float32")
    store = BufferStore(a_param, BufferLoad(a_alloc, (i_inner,)), (i_outer, i_inner))
    inner = For(i_inner, IntImm(0), IntImm(4), ForKind.SERIAL, store)
    outer = For(i_outer, IntImm(0), IntImm(4), ForKind.PARALLEL, inner)
    root = BlockRealize((), IntImm(1, "bool"), Block("root", (), (), (), outer, alloc_buffers=(a_alloc,)))
    func = PrimFunc("shadow", (a_param,), root)
    text = func.script()
    assert "for i in T.parallel(4):" in text
    assert "for i_1 in range(4):" in text
    assert 'A_1 = T.alloc_buffer((4,), "float32")' in text
    assert "A[i, i_1] = A_1[i_1]" in text
    assert_round_trip(func)


def test_non_plain_bindings_round_trip() -> None:
    # A block whose iterator domain differs from its loop range prints T.spatial_axis.
    i = Var("i")
    vi = Var("vi")
    buf = Buffer("A", (IntImm(8),), "float32")
    block = Block(
        "b",
        (IterVar(vi, Range(IntImm(0), IntImm(8)), IterKind.SPATIAL),),
        (),
        (tir.BufferRegion.point(buf, [vi]),),
        BufferStore(buf, tir.ir.FloatImm(1.0, "float32"), (vi,)),
    )
    loop = For(i, IntImm(0), IntImm(4), ForKind.SERIAL, BlockRealize((i * 2,), IntImm(1, "bool"), block))
    func = PrimFunc("bind", (buf,), _root(loop))
    assert "vi = T.spatial_axis(8, i * 2)" in func.script()
    assert_round_trip(func)


def test_unsimplified_constant_arithmetic_round_trip() -> None:
    # Constant-only operations must not be folded by the parser when reading them back.
    i = Var("i")
    buf = Buffer("A", (IntImm(8),), "int32")
    value = tir.ir.Add(tir.ir.Mul(IntImm(2), IntImm(3)), tir.ir.Sub(IntImm(0), IntImm(5)))
    loop = For(i, IntImm(1), tir.ir.Sub(IntImm(8), IntImm(1)), ForKind.SERIAL, BufferStore(buf, value, (i,)))
    func = PrimFunc("consts", (buf,), _root(SeqStmt((loop, BufferStore(buf, IntImm(-3), (IntImm(0),))))))
    assert_round_trip(func)


def test_storage_align_rules_round_trip() -> None:
    """A buffer padded by storage_align prints its rules (``dim_align``): parsed back, lowering
    pads the compacted tile again (rows of 16 + 4) instead of keeping the whole row's stride."""
    from tir.schedule import Schedule
    from tir.transform import lower

    @T.script
    def matmul(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"), C: T.Buffer((64, 64), "float32")):
        for i, j, k in T.grid(64, 64, 64):
            with T.block("C"):
                vi, vj, vk = T.remap("SSR", i, j, k)
                with T.init():
                    C[vi, vj] = 0.0
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

    sch = Schedule(matmul)
    block = sch.get_block("C")
    cached = sch.cache_read(block, 1, "global")
    i, j, k = sch.get_loops(block)
    ko, _ = sch.split(k, [None, 16])
    sch.reorder(i, ko)
    sch.compute_at(cached, ko)
    sch.storage_align(cached, 0, axis=0, factor=8, offset=4)
    assert "dim_align=((0, 8, 4),)" in sch.func.script()
    assert_round_trip(sch.func)
    lowered = [lower(f, "llvm").script() for f in (sch.func, tir.parse(sch.func.script()))]
    assert lowered[0] == lowered[1]


@pytest.mark.parametrize(
    "rules,message",
    [("((0, 8),)", "not a dim_align rule"), ("((2, 8, 4),)", "out of range for 2 dimensions"), ("x", "literal")],
)
def test_bad_dim_align_is_a_clear_error(rules: str, message: str) -> None:
    text = f"""
@T.script
def f(A: T.Buffer((4, 4), "float32", strides=(8, 1), dim_align={rules})):
    A[0, 0] = 1.0
"""
    with pytest.raises(tir.script.ScriptError, match=message):
        tir.parse(text)
