"""Read/write region inference on blocks built by hand with the IR constructors."""

from __future__ import annotations

from tir.analysis import infer_block_access
from tir.ir import (
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    FloatImm,
    For,
    ForKind,
    IfThenElse,
    IntImm,
    IterKind,
    IterVar,
    LetStmt,
    MatchBufferRegion,
    Max,
    Min,
    Ramp,
    Range,
    Var,
    const,
)
from tir.ir.stmt import seq
from tir.ir.structural import structural_equal


def _buf(name: str, *shape: int) -> Buffer:
    return Buffer(name, tuple(const(s) for s in shape), "float32")


def _region(buffer: Buffer, *ranges: tuple[object, object]) -> BufferRegion:
    """``BufferRegion`` from (min, extent) pairs; ints become int32 constants."""
    return BufferRegion(
        buffer,
        tuple(Range(const(m) if isinstance(m, int) else m, const(e) if isinstance(e, int) else e) for m, e in ranges),
    )


def _serial(var: Var, extent: int, body: object, start: int = 0) -> For:
    return For(var, const(start), const(extent), ForKind.SERIAL, body)  # type: ignore[arg-type]


def _iter(var: Var, extent: int, kind: IterKind = IterKind.SPATIAL) -> IterVar:
    return IterVar(var, Range.from_extent(extent), kind)


def _assert_regions(actual: tuple[BufferRegion, ...], expected: list[BufferRegion]) -> None:
    assert len(actual) == len(expected), f"{actual} vs {expected}"
    for got, want in zip(actual, expected):
        assert got.buffer is want.buffer, f"{got} vs {want}"
        assert structural_equal(got.region, want.region), f"{got} vs {want}"


def test_matmul_reduction_with_init() -> None:
    A, B, C = _buf("A", 128, 128), _buf("B", 128, 128), _buf("C", 128, 128)
    vi, vj, vk = Var("vi"), Var("vj"), Var("vk")
    update = BufferStore(C, BufferLoad(C, (vi, vj)) + BufferLoad(A, (vi, vk)) * BufferLoad(B, (vk, vj)), (vi, vj))
    block = Block(
        "C",
        (_iter(vi, 128), _iter(vj, 128), _iter(vk, 128, IterKind.REDUCE)),
        (),
        (),
        update,
        init=BufferStore(C, FloatImm(0.0), (vi, vj)),
    )
    reads, writes = infer_block_access(block)
    _assert_regions(reads, [_region(C, (vi, 1), (vj, 1)), _region(A, (vi, 1), (vk, 1)), _region(B, (vk, 1), (vj, 1))])
    _assert_regions(writes, [_region(C, (vi, 1), (vj, 1))])


def test_inner_loops_are_relaxed_and_outer_vars_stay_symbolic() -> None:
    A, B = _buf("A", 64, 64), _buf("B", 64)
    vi, ii, k = Var("vi"), Var("ii"), Var("k")
    body = _serial(ii, 4, _serial(k, 64, BufferStore(B, BufferLoad(A, (vi * 4 + ii, k)), (vi * 4 + ii,))))
    reads, writes = infer_block_access(Block("blk", (_iter(vi, 16),), (), (), body))
    _assert_regions(reads, [_region(A, (vi * 4, 4), (0, 64))])
    _assert_regions(writes, [_region(B, (vi * 4, 4))])


def test_loop_with_nonzero_start_and_split_floordiv() -> None:
    A, B = _buf("A", 32), _buf("B", 8)
    i = Var("i")
    body = _serial(i, 8, BufferStore(B, BufferLoad(A, (i * 2 + 1,)), (i // 2,)), start=8)
    reads, writes = infer_block_access(Block("blk", (), (), (), body))
    _assert_regions(reads, [_region(A, (17, 15))])
    _assert_regions(writes, [_region(B, (4, 4))])


def test_regions_of_one_buffer_merge_into_a_hull_in_first_seen_order() -> None:
    A, B = _buf("A", 16), _buf("B", 16)
    vi = Var("vi")
    body = seq(
        BufferStore(B, BufferLoad(A, (vi + 2,)), (vi,)),
        BufferStore(B, BufferLoad(A, (vi,)) + BufferLoad(B, (vi,)), (vi + 1,)),
    )
    reads, writes = infer_block_access(Block("blk", (_iter(vi, 14),), (), (), body))
    _assert_regions(reads, [_region(A, (vi, 3)), _region(B, (vi, 1))])
    _assert_regions(writes, [_region(B, (vi, 2))])


def test_incomparable_symbolic_regions_fall_back_to_the_full_dimension() -> None:
    A, B = _buf("A", 100), _buf("B", 1)
    x, y = Var("x"), Var("y")
    body = BufferStore(B, BufferLoad(A, (x,)) + BufferLoad(A, (y,)), (const(0),))
    reads, _ = infer_block_access(Block("blk", (), (), (), body))
    _assert_regions(reads, [_region(A, (0, 100))])


def test_let_stmt_is_substituted() -> None:
    A, B = _buf("A", 64), _buf("B", 64)
    vi, t = Var("vi"), Var("t")
    body = LetStmt(t, vi * 2, BufferStore(B, BufferLoad(A, (t + 1,)), (t,)))
    reads, writes = infer_block_access(Block("blk", (_iter(vi, 16),), (), (), body))
    _assert_regions(reads, [_region(A, (vi * 2 + 1, 1))])
    _assert_regions(writes, [_region(B, (vi * 2, 1))])


def test_let_of_a_loop_var_is_relaxed() -> None:
    A, B = _buf("A", 64), _buf("B", 1)
    k, t = Var("k"), Var("t")
    body = _serial(k, 8, LetStmt(t, k * 4, BufferStore(B, BufferLoad(A, (t + 3,)), (const(0),))))
    reads, _ = infer_block_access(Block("blk", (), (), (), body))
    _assert_regions(reads, [_region(A, (3, 29))])


def test_alloc_buffers_are_excluded() -> None:
    A, B, S = _buf("A", 16), _buf("B", 16), _buf("S", 16)
    i = Var("i")
    body = seq(
        _serial(i, 16, BufferStore(S, BufferLoad(A, (i,)), (i,))),
        _serial(i, 16, BufferStore(B, BufferLoad(S, (i,)), (i,))),
    )
    reads, writes = infer_block_access(Block("blk", (), (), (), body, alloc_buffers=(S,)))
    _assert_regions(reads, [_region(A, (0, 16))])
    _assert_regions(writes, [_region(B, (0, 16))])


def test_match_buffer_view_maps_to_its_source_region() -> None:
    A, B = _buf("A", 64, 64), _buf("B", 64, 64)
    view = _buf("Asub", 4, 4)
    vi, i, j = Var("vi"), Var("i"), Var("j")
    source = _region(A, (vi * 4, 4), (0, 4))
    body = _serial(i, 4, _serial(j, 4, BufferStore(B, BufferLoad(view, (i, j)), (vi * 4 + i, j))))
    block = Block("blk", (_iter(vi, 16),), (), (), body, match_buffers=(MatchBufferRegion(view, source),))
    reads, writes = infer_block_access(block)
    _assert_regions(reads, [source])
    _assert_regions(writes, [_region(B, (vi * 4, 4), (0, 4))])


def test_child_block_contributes_its_signature_with_bindings_relaxed() -> None:
    A, B = _buf("A", 128, 128), _buf("B", 128, 128)
    vo, ii, j = Var("vo"), Var("ii"), Var("j")
    ci, cj = Var("ci"), Var("cj")
    # The child's body touches A[0, 0] only, but its signature is what counts.
    child = Block(
        "child",
        (_iter(ci, 128), _iter(cj, 128)),
        (_region(A, (ci, 1), (0, 128)),),
        (_region(B, (ci, 1), (cj, 1)),),
        BufferStore(B, BufferLoad(A, (const(0), const(0))), (ci, cj)),
    )
    realize = BlockRealize((vo * 8 + ii, j), const(True), child)
    body = _serial(ii, 8, _serial(j, 128, realize))
    reads, writes = infer_block_access(Block("outer", (_iter(vo, 16),), (), (), body))
    _assert_regions(reads, [_region(A, (vo * 8, 8), (0, 128))])
    _assert_regions(writes, [_region(B, (vo * 8, 8), (0, 128))])


def test_vector_ramp_index_covers_all_lanes() -> None:
    A, B = _buf("A", 64), _buf("B", 64)
    vi = Var("vi")
    body = BufferStore(B, BufferLoad(A, (Ramp(vi * 8, const(1), 8),)), (Ramp(vi * 8, const(2), 4),))
    reads, writes = infer_block_access(Block("blk", (_iter(vi, 8),), (), (), body))
    _assert_regions(reads, [_region(A, (vi * 8, 8))])
    _assert_regions(writes, [_region(B, (vi * 8, 7))])


def test_if_then_else_reads_condition_and_both_branches() -> None:
    A, B, C, F = _buf("A", 8), _buf("B", 8), _buf("C", 8), _buf("F", 8)
    vi = Var("vi")
    body = IfThenElse(
        BufferLoad(F, (vi,)) > FloatImm(0.0),
        BufferStore(C, BufferLoad(A, (vi,)), (vi,)),
        BufferStore(C, BufferLoad(B, (vi,)), (vi,)),
    )
    reads, writes = infer_block_access(Block("blk", (_iter(vi, 8),), (), (), body))
    assert [region.buffer for region in reads] == [F, A, B]
    _assert_regions(writes, [_region(C, (vi, 1))])


def test_min_max_indices_and_data_dependent_index() -> None:
    A, B, idx = _buf("A", 40), _buf("B", 10), Buffer("idx", (const(10),), "int32")
    i = Var("i")
    body = _serial(
        i,
        10,
        BufferStore(
            B, BufferLoad(A, (Min(i * 4, const(36)),)) + BufferLoad(A, (BufferLoad(idx, (i,)),)), (Max(i, const(2)),)
        ),
    )
    reads, writes = infer_block_access(Block("blk", (), (), (), body))
    # A[idx[i]] cannot be bounded: the whole of A is read.
    _assert_regions(reads, [_region(A, (0, 40)), _region(idx, (0, 10))])
    _assert_regions(writes, [_region(B, (2, 8))])


def test_int_constant_region_and_empty_block() -> None:
    A = _buf("A", 4)
    reads, writes = infer_block_access(Block("blk", (), (), (), BufferStore(A, FloatImm(1.0), (IntImm(3),))))
    assert reads == ()
    _assert_regions(writes, [_region(A, (3, 1))])
