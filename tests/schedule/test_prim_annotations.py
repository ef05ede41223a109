"""parallel, vectorize, unroll, bind, annotate, unannotate: golden, numerics, replay, and one
negative test per precondition."""

from __future__ import annotations

import time

import pytest
from schedule_testing import check_numerics, check_replay, check_schedule

import tir
import tir.script as T
from tir.ir import ForKind
from tir.schedule import Schedule, ScheduleError


@T.script
def scale(A: T.Buffer((100, 8), "float32"), B: T.Buffer((100, 8), "float32")):
    for i, j in T.grid(100, 8):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0


@T.script
def matmul(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")):
    for i, j, k in T.grid(16, 16, 16):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]


@T.script
def two_stage(A: T.Buffer((16, 8), "float32"), C: T.Buffer((16, 8), "float32")):
    B = T.alloc_buffer((16, 8), "float32")
    for i in range(16):
        for j in range(8):
            with T.block("B"):
                vi, vj = T.remap("SS", i, j)
                B[vi, vj] = A[vi, vj] * 2.0
        for j in range(8):
            with T.block("C"):
                vi, vj = T.remap("SS", i, j)
                C[vi, vj] = B[vi, vj] + 1.0


@T.script
def pipeline(A: T.Buffer((16, 8), "float32"), C: T.Buffer((16, 8), "float32")):
    B = T.alloc_buffer((16, 8), "float32")
    for i, j in T.grid(16, 8):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = B[vi, vj] + 1.0


@T.script
def mirrored(A: T.Buffer((16, 8), "float32"), B: T.Buffer((16, 8), "float32"), C: T.Buffer((16, 8), "float32")):
    for i, j in T.grid(16, 8):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = B[vi, vj] + B[15 - vi, vj]


@T.script
def running_sum(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("B"):
            vi = T.opaque_axis(16, i)
            B[vi] = B[T.max(vi - 1, 0)] + A[vi]


@T.script
def no_blocks(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        B[i] = A[i] * 2.0


@T.script
def accumulate(A: T.Buffer((16,), "float32"), B: T.Buffer((1,), "float32")):
    for i in range(16):  # noqa: B007  (every iteration runs the same block instance)
        with T.block("B"):
            B[0] = B[0] + 1.0


@T.script
def let_bound(A: T.Buffer((32,), "float32"), B: T.Buffer((32,), "float32")):
    for i in range(16):
        x = i * 2
        with T.block("B"):
            vi = T.spatial_axis(32, x)
            B[vi] = A[vi] * 2.0


def _loops(sch: Schedule, block: str = "B") -> list:  # type: ignore[type-arg]
    return sch.get_loops(sch.get_block(block))


def _refused(sch: Schedule, call, message: str) -> None:  # type: ignore[no-untyped-def]
    before = sch.func
    with pytest.raises(ScheduleError, match=message):
        call()
    assert sch.func is before  # a refused primitive changes nothing


# ---------------------------------------------------------------- parallel


def test_parallel_outer_loop(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(scale)
    i, _ = _loops(sch)
    sch.parallel(i)
    assert sch.get_loop_node(i).kind is ForKind.PARALLEL
    check_schedule(sch, scale, golden, "schedule/parallel_outer")


def test_parallel_vectorize_unroll_matmul(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(matmul)
    i, j, k = _loops(sch, "C")
    sch.reorder(i, k, j)
    sch.parallel(i)
    sch.unroll(k)
    sch.vectorize(j)
    check_schedule(sch, matmul, golden, "schedule/parallel_vectorize_unroll_matmul")


def test_parallel_over_a_producer_and_its_consumer(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(two_stage)
    (i, _) = _loops(sch, "B")
    outer, _ = sch.split(i, [4, 4])
    sch.parallel(outer)
    check_schedule(sch, two_stage, golden, "schedule/parallel_two_stage")


def test_parallel_fused_loop_over_two_blocks(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(pipeline)
    i, j = _loops(sch)
    sch.parallel(sch.fuse(i, j))
    check_schedule(sch, pipeline, golden, "schedule/parallel_fused_two_blocks")


def test_parallel_twice_changes_nothing_the_second_time() -> None:
    sch = Schedule(scale)
    i, _ = _loops(sch)
    sch.parallel(i)
    once = sch.func
    sch.parallel(i)
    assert sch.func is once


def test_parallel_refuses_a_loop_of_another_kind() -> None:
    sch = Schedule(scale)
    _, j = _loops(sch)
    sch.vectorize(j)
    _refused(
        sch,
        lambda: sch.parallel(j),
        r"parallel: loop j: only a serial loop can be changed; this loop is vectorized\n    for j in T.vectorized\(8\):",
    )


def test_parallel_refuses_a_parallel_loop_above() -> None:
    sch = Schedule(scale)
    i, j = _loops(sch)
    sch.parallel(i)
    _refused(sch, lambda: sch.parallel(j), r"parallel: loop j: nested parallelism: loop i above it is already parallel")


def test_parallel_refuses_a_parallel_loop_below() -> None:
    sch = Schedule(scale)
    i, j = _loops(sch)
    sch.parallel(j)
    _refused(sch, lambda: sch.parallel(i), r"parallel: loop i: nested parallelism: loop j below it is already parallel")


def test_parallel_refuses_a_reduction_iterator() -> None:
    sch = Schedule(matmul)
    _, _, k = _loops(sch, "C")
    _refused(
        sch,
        lambda: sch.parallel(k),
        r"parallel: loop k: a reduction iterator cannot be parallelized: it is bound to this loop \(block 'C'\)\n"
        r"    vk = T.reduce_axis\(16, k\)",
    )


def test_parallel_refuses_an_opaque_iterator() -> None:
    sch = Schedule(running_sum)
    (i,) = _loops(sch)
    _refused(sch, lambda: sch.parallel(i), r"parallel: loop i: an opaque iterator cannot be parallelized")


def test_parallel_refuses_a_statement_outside_every_block() -> None:
    sch = Schedule(no_blocks)
    i = sch.loop_rv(no_blocks.body.block.body.loop_var)
    _refused(
        sch,
        lambda: sch.parallel(i),
        r"parallel: loop i: a statement outside every block sits under the loop; .*\n    B\[i\] = A\[i\] \* 2.0",
    )


def test_parallel_refuses_a_dependence_between_iterations() -> None:
    sch = Schedule(mirrored)
    i, _ = _loops(sch)
    _refused(
        sch,
        lambda: sch.parallel(i),
        r"parallel: loop i: blocks \['B', 'C'\] under the loop share buffer 'B' \(written by \['B'\]\); cannot "
        r"prove that different iterations touch disjoint parts of it, so it is not safe to parallelize the loop\n"
        r"    block 'B' writes B\[i, 0:8\]\n    block 'C' reads B\[0:16, 0:8\]",
    )


def test_parallel_refuses_iterations_running_the_same_block_instance() -> None:
    sch = Schedule(accumulate)
    (i,) = _loops(sch)
    _refused(
        sch,
        lambda: sch.parallel(i),
        r"parallel: loop i: cannot prove that different iterations run different instances of block 'B' "
        r"\(its spatial iterators must tell the iterations apart\) to parallelize the loop\n"
        r"    block 'B': no iterators",
    )


def test_parallel_refuses_a_binding_through_a_let_variable() -> None:
    sch = Schedule(let_bound)
    (i,) = _loops(sch)
    _refused(
        sch,
        lambda: sch.parallel(i),
        r"parallel: loop i: the variable x bound inside depends on the loop variables; block bindings using it "
        r"cannot be checked\n    x = i \* 2",
    )


def test_parallel_refuses_a_loop_that_is_gone() -> None:
    sch = Schedule(scale)
    i, j = _loops(sch)
    sch.fuse(i, j)
    _refused(sch, lambda: sch.parallel(i), r"parallel: loop i: no such loop in the current program")


# ---------------------------------------------------------------- vectorize


def test_vectorize_inner_loop(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(scale)
    _, j = _loops(sch)
    sch.vectorize(j)
    check_schedule(sch, scale, golden, "schedule/vectorize_inner")


def test_vectorize_refuses_a_symbolic_extent() -> None:
    func = tir.parse(
        """
@T.script
def symbolic(a: T.handle, n: T.int32):
    A = T.match_buffer(a, (n,), "float32")
    for i in range(n):
        with T.block("A"):
            vi = T.remap("S", i)
            A[vi] = A[vi] * 2.0
"""
    )
    sch = Schedule(func)
    (i,) = _loops(sch, "A")
    _refused(sch, lambda: sch.vectorize(i), r"vectorize: loop i: the extent must be a constant, got n")


def test_vectorize_refuses_a_loop_of_another_kind() -> None:
    sch = Schedule(scale)
    _, j = _loops(sch)
    sch.unroll(j)
    _refused(
        sch, lambda: sch.vectorize(j), r"vectorize: loop j: only a serial loop can be changed; this loop is unroll"
    )


def test_vectorize_refuses_a_reduction_iterator() -> None:
    sch = Schedule(matmul)
    _, _, k = _loops(sch, "C")
    _refused(sch, lambda: sch.vectorize(k), r"vectorize: loop k: a reduction iterator cannot be vectorized")


def test_vectorize_refuses_a_dependence_between_iterations() -> None:
    sch = Schedule(mirrored)
    i, _ = _loops(sch)
    _refused(sch, lambda: sch.vectorize(i), r"vectorize: loop i: blocks \['B', 'C'\] under the loop share buffer 'B'")


# ---------------------------------------------------------------- unroll


def test_unroll_loop(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(matmul)
    _, j, k = _loops(sch, "C")
    sch.unroll(k)
    sch.unroll(j)
    check_schedule(sch, matmul, golden, "schedule/unroll_matmul")


@pytest.mark.parametrize("kind", ["parallel", "vectorize", "bind"])
def test_unroll_replaces_the_kind_of_a_loop(kind: str) -> None:
    # As TVM: the iterations of an unrolled loop run in order, right whatever the loop was.
    sch = Schedule(scale)
    i, j = _loops(sch)
    loop = j if kind == "vectorize" else i
    getattr(sch, kind)(*([loop, "blockIdx.x"] if kind == "bind" else [loop]))
    sch.unroll(loop)
    node = sch.get_loop_node(loop)
    assert node.kind is ForKind.UNROLLED and node.thread_tag is None
    check_numerics(scale, sch.func, llvm=kind != "bind")


# ---------------------------------------------------------------- bind


def test_bind_block_and_thread_axes(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(scale)
    i, j = _loops(sch)
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    sch.bind(j, "threadIdx.x")  # already bound to that axis: nothing changes
    assert sch.get_loop_node(j).thread_tag == "threadIdx.x"
    # CPU targets cannot run thread-bound loops: numerics through the interpreter only.
    check_schedule(sch, scale, golden, "schedule/bind_thread_axes", llvm=False)


def test_bind_refuses_an_unknown_thread_axis() -> None:
    sch = Schedule(scale)
    i, _ = _loops(sch)
    _refused(
        sch, lambda: sch.bind(i, "threadIdx.w"), r"bind: loop i: unknown thread axis 'threadIdx.w'; expected one of"
    )


def test_bind_again_replaces_the_binding() -> None:
    sch = Schedule(scale)
    i, _ = _loops(sch)
    sch.bind(i, "blockIdx.x")
    sch.bind(i, "threadIdx.x")
    assert sch.get_loop_node(i).thread_tag == "threadIdx.x"
    check_numerics(scale, sch.func, llvm=False)
    check_replay(sch, scale)


def test_bind_again_is_checked_like_a_first_binding() -> None:
    sch = Schedule(scale)
    i, j = _loops(sch)
    sch.bind(i, "threadIdx.x")
    sch.bind(j, "blockIdx.x")
    _refused(sch, lambda: sch.bind(j, "threadIdx.x"), r"bind: loop j: loop i above it is already bound to threadIdx.x")
    assert sch.get_loop_node(j).thread_tag == "blockIdx.x"


def test_bind_refuses_the_same_axis_above() -> None:
    sch = Schedule(scale)
    i, j = _loops(sch)
    sch.bind(i, "threadIdx.x")
    _refused(sch, lambda: sch.bind(j, "threadIdx.x"), r"bind: loop j: loop i above it is already bound to threadIdx.x")


def test_bind_refuses_the_same_axis_below() -> None:
    sch = Schedule(scale)
    i, j = _loops(sch)
    sch.bind(j, "threadIdx.x")
    _refused(sch, lambda: sch.bind(i, "threadIdx.x"), r"bind: loop i: loop j below it is already bound to threadIdx.x")


def test_bind_refuses_a_reduction_iterator() -> None:
    # Only threadIdx.x can carry a cross-thread reduction.
    sch = Schedule(matmul)
    _, _, k = _loops(sch, "C")
    _refused(sch, lambda: sch.bind(k, "threadIdx.y"), r"bind: loop k: a reduction iterator cannot be bound to threads")


@T.script
def row_sum(A: T.Buffer((8, 64), "float32"), B: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 64):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] + A[vi, vk]


@T.script
def row_sum_plus_one(A: T.Buffer((8, 64), "float32"), B: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 64):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                B[vi] = 1.0
            B[vi] = B[vi] + A[vi, vk]


def test_bind_a_cross_thread_reduction(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(row_sum)
    i, k = _loops(sch)
    ko, ki = sch.split(k, [None, 32])
    sch.bind(i, "blockIdx.x")
    sch.bind(ki, "threadIdx.x")
    assert sch.get_block_node(sch.get_block("B")).annotations == {"cross_thread_reduction": True}
    assert tir.analysis.verify(sch.func, "cuda -arch=sm_80") == []
    check_schedule(sch, row_sum, golden, "schedule/bind_cross_thread_reduction", llvm=False)


def test_bind_refuses_a_reduction_whose_init_is_not_the_identity() -> None:
    sch = Schedule(row_sum_plus_one)
    _, k = _loops(sch)
    _refused(sch, lambda: sch.bind(k, "threadIdx.x"), r"bind: loop k: a reduction iterator cannot be bound to threads")


_MAKE_CONCURRENT = {
    "parallel": (lambda sch, loop: sch.parallel(loop), "parallelized", "parallelize the loop"),
    "vectorize": (lambda sch, loop: sch.vectorize(loop), "vectorized", "vectorize the loop"),
    # threadIdx.y: a sum bound to threadIdx.x is a cross-thread reduction (accepted).
    "bind": (lambda sch, loop: sch.bind(loop, "threadIdx.y"), "bound to threads", "bind the loop"),
}


@pytest.mark.parametrize("primitive", sorted(_MAKE_CONCURRENT))
@pytest.mark.parametrize(
    "func,message",
    [
        (matmul, r"{p}: loop k: a reduction iterator cannot be {verb}: it is bound to this loop \(block 'C'\)"),
        (running_sum, r"{p}: loop i: an opaque iterator cannot be {verb}: it is bound to this loop \(block 'B'\)"),
        (no_blocks, r"{p}: loop i: a statement outside every block sits under the loop; .* may be {verb}"),
        (accumulate, r"{p}: loop i: cannot prove that different iterations run different instances of block 'B'"),
        (let_bound, r"{p}: loop i: the variable x bound inside depends on the loop variables"),
        (mirrored, r"{p}: loop i: blocks \['B', 'C'\] under the loop share buffer 'B' .* to {what}"),
    ],
    ids=["reduction", "opaque", "outside-block", "same-instance", "let", "dependence"],
)
def test_concurrent_kinds_refuse_dependent_iterations(primitive: str, func: tir.PrimFunc, message: str) -> None:
    apply, verb, what = _MAKE_CONCURRENT[primitive]
    sch = Schedule(func)
    # The outermost loop, except for matmul's reduction loop k.
    loop_var = func.body.block.body.loop_var
    if func is matmul:
        loop_var = func.body.block.body.body.body.loop_var
    loop = sch.loop_rv(loop_var)
    _refused(sch, lambda: apply(sch, loop), message.format(p=primitive, verb=verb, what=what))


# ---------------------------------------------------------------- fused and split nests (issue 17 B)
#
# The tuner's most common pattern: fuse the spatial loops, split the fused loop, run the outer
# part in parallel and vectorize the inner one. The proof is iterator-map detection of the
# bindings (no enumeration of the iteration space), so its cost does not grow with the nest.


@T.script
def conv_nhwc(
    X: T.Buffer((1, 58, 58, 64), "float32"),
    W: T.Buffer((3, 3, 64, 64), "float32"),
    Y: T.Buffer((1, 56, 56, 64), "float32"),
):
    for n, h, w, co, rh, rw, ci in T.grid(1, 56, 56, 64, 3, 3, 64):
        with T.block("Y"):
            vn, vh, vw, vco, vrh, vrw, vci = T.remap("SSSSRRR", n, h, w, co, rh, rw, ci)
            with T.init():
                Y[vn, vh, vw, vco] = 0.0
            Y[vn, vh, vw, vco] += X[vn, vh + vrh, vw + vrw, vci] * W[vrh, vrw, vci, vco]


@T.script
def small_conv_nhwc(
    X: T.Buffer((1, 9, 9, 4), "float32"), W: T.Buffer((3, 3, 4, 6), "float32"), Y: T.Buffer((1, 7, 7, 6), "float32")
):
    for n, h, w, co, rh, rw, ci in T.grid(1, 7, 7, 6, 3, 3, 4):
        with T.block("Y"):
            vn, vh, vw, vco, vrh, vrw, vci = T.remap("SSSSRRR", n, h, w, co, rh, rw, ci)
            with T.init():
                Y[vn, vh, vw, vco] = 0.0
            Y[vn, vh, vw, vco] += X[vn, vh + vrh, vw + vrw, vci] * W[vrh, vrw, vci, vco]


@T.script
def scale_1e6(A: T.Buffer((1000, 1000), "float32"), B: T.Buffer((1000, 1000), "float32")):
    for i, j in T.grid(1000, 1000):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0


@T.script
def scale_1e9(A: T.Buffer((1000, 1000, 1000), "float32"), B: T.Buffer((1000, 1000, 1000), "float32")):
    for i, j, k in T.grid(1000, 1000, 1000):
        with T.block("B"):
            vi, vj, vk = T.remap("SSS", i, j, k)
            B[vi, vj, vk] = A[vi, vj, vk] * 2.0


@T.script
def fused_pipeline(A: T.Buffer((1000, 1000), "float32"), C: T.Buffer((1000, 1000), "float32")):
    B = T.alloc_buffer((1000, 1000), "float32")
    for f in range(1000000):
        with T.block("B"):
            vi = T.spatial_axis(1000, f // 1000)
            vj = T.spatial_axis(1000, f % 1000)
            B[vi, vj] = A[vi, vj] * 2.0
        with T.block("C"):
            vi = T.spatial_axis(1000, f // 1000)
            vj = T.spatial_axis(1000, f % 1000)
            C[vi, vj] = B[vi, vj] + A[vi, 999 - vj]


@T.script
def halve_1e6(A: T.Buffer((2000000,), "float32"), B: T.Buffer((1000000,), "float32")):
    for f in range(2000000):
        with T.block("B"):
            vi = T.spatial_axis(1000000, f // 2)
            B[vi] = A[vi * 2]


@T.script
def wrap_1e7(A: T.Buffer((32,), "float32"), B: T.Buffer((32,), "float32")):
    for o, i in T.grid(1000000, 16):
        with T.block("B"):
            vi = T.spatial_axis(32, (o * 16 + i) % 32)
            B[vi] = A[vi] * 2.0


def _timed(call) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


# A few milliseconds each on one core; the bound leaves room for a loaded machine.
_PROOF_SECONDS = 0.25


def test_parallel_fused_split_conv2d_nhwc() -> None:
    sch = Schedule(conv_nhwc)
    _, h, w, *_ = _loops(sch, "Y")
    outer, _ = sch.split(sch.fuse(h, w), [None, 16])
    assert _timed(lambda: sch.parallel(outer)) < _PROOF_SECONDS
    assert sch.get_loop_node(outer).kind is ForKind.PARALLEL
    assert tir.analysis.verify(sch.func) == []


@pytest.mark.parametrize("factor", [16, 5])  # 5 does not divide 7 * 7: the split has a predicate
def test_parallel_and_vectorize_fused_split_conv2d_computes_the_same(factor: int) -> None:
    sch = Schedule(small_conv_nhwc)
    _, h, w, co, *_ = _loops(sch, "Y")
    outer, inner = sch.split(sch.fuse(h, w), [None, factor])
    sch.parallel(outer)
    sch.reorder(co, inner)
    sch.vectorize(inner)
    assert tir.analysis.verify(sch.func) == []
    tir.assert_structural_equal(tir.parse(sch.func.script()), sch.func)
    check_numerics(small_conv_nhwc, sch.func)
    check_replay(sch, small_conv_nhwc)


@pytest.mark.parametrize(
    "func,factor",
    [(scale_1e6, 16), (scale_1e6, 48), (scale_1e9, 16), (scale_1e9, 48), (scale_1e9, 1000)],
    ids=["1e6-16", "1e6-48", "1e9-16", "1e9-48", "1e9-1000"],
)
def test_parallel_and_vectorize_fused_split_nests_of_1e6_to_1e9_iterations(func: tir.PrimFunc, factor: int) -> None:
    sch = Schedule(func)
    outer, inner = sch.split(sch.fuse(*_loops(sch)), [None, factor])
    assert _timed(lambda: sch.parallel(outer)) < _PROOF_SECONDS
    assert _timed(lambda: sch.vectorize(inner)) < _PROOF_SECONDS
    assert tir.analysis.verify(sch.func) == []


def test_parallel_and_vectorize_a_fused_loop_over_a_producer_and_its_consumer() -> None:
    # Two blocks share B: the proof that iterations touch disjoint parts of it reads
    # f // 1000, f % 1000 as the digits of f (10^6 iterations, past any enumeration).
    sch = Schedule(fused_pipeline)
    assert _timed(lambda: sch.parallel(_loops(sch, "C")[0])) < _PROOF_SECONDS
    sch = Schedule(fused_pipeline)
    outer, inner = sch.split(_loops(sch, "C")[0], [None, 64])
    assert _timed(lambda: sch.parallel(outer)) < _PROOF_SECONDS
    assert _timed(lambda: sch.vectorize(inner)) < _PROOF_SECONDS


@pytest.mark.parametrize("func", [halve_1e6, wrap_1e7], ids=["f//2", "(o*16+i)%32"])
def test_parallel_refuses_large_nests_whose_iterations_write_the_same_element(func: tir.PrimFunc) -> None:
    sch = Schedule(func)
    loop = _loops(sch)[0]
    start = time.perf_counter()
    _refused(sch, lambda: sch.parallel(loop), r"cannot prove that different iterations run different instances")
    assert time.perf_counter() - start < _PROOF_SECONDS


def test_parallel_refuses_a_fused_loop_that_feeds_a_reduction_iterator() -> None:
    sch = Schedule(matmul)
    _, j, k = _loops(sch, "C")
    # Split by 8, the outer loop runs j and the upper half of k (by 16 it would run j only).
    outer, _ = sch.split(sch.fuse(j, k), [None, 8])
    _refused(sch, lambda: sch.parallel(outer), r"a reduction iterator cannot be parallelized: it is bound to this loop")


# ---------------------------------------------------------------- annotate / unannotate


def test_annotate_loops_and_blocks(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(matmul)
    block = sch.get_block("C")
    i, j, _ = _loops(sch, "C")
    sch.annotate(i, "pragma_auto_unroll_max_step", 16)
    sch.annotate(j, "tile_sizes", [4, 4, 2.5, "x", True])
    sch.annotate(block, "meta_schedule.tiling_structure", "SSRSRS")
    sch.annotate(block, "ratio", 0.5)
    sch.annotate(block, "ratio", 0.25)  # a later value replaces the earlier one
    assert sch.get_block_node(block).annotations == {"meta_schedule.tiling_structure": "SSRSRS", "ratio": 0.25}
    check_schedule(sch, matmul, golden, "schedule/annotate")


def test_unannotate_loop_and_block(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(scale)
    block = sch.get_block("B")
    i, _ = _loops(sch)
    sch.annotate(i, "a", 1)
    sch.annotate(i, "b", False)
    sch.annotate(block, "c", "keep")
    sch.annotate(block, "d", "drop")
    sch.unannotate(i, "a")
    sch.unannotate(block, "d")
    assert sch.get_loop_node(i).annotations == {"b": False}
    check_schedule(sch, scale, golden, "schedule/unannotate")


@pytest.mark.parametrize("value", [{1: 1}, [[1, None]], None, (1, 2), {"a": (1,)}])
def test_annotate_refuses_a_value_of_another_type(value: object) -> None:
    sch = Schedule(scale)
    i, _ = _loops(sch)
    _refused(
        sch,
        lambda: sch.annotate(i, "key", value),
        r"annotate: loop i: an annotation value must be an int, float, str, bool, or a list or a dict",
    )


def test_annotate_with_a_dict_value() -> None:
    # TVM's loop annotations whose value is a dict: printed as Python data, read back, replayed.
    sch = Schedule(scale, debug=True)
    i, _ = _loops(sch)
    value = {"a": 1, "b": [1, 2], "c": {"d": "e"}}
    sch.annotate(i, "pragma_x", value)
    value["a"] = 2  # the schedule and its trace keep their own copies
    assert sch.get_loop_node(i).annotations == {"pragma_x": {"a": 1, "b": [1, 2], "c": {"d": "e"}}}
    assert tir.structural_equal(tir.parse(sch.func.script()), sch.func)
    check_replay(sch, scale)


def test_annotate_refuses_an_empty_key() -> None:
    sch = Schedule(scale)
    block = sch.get_block("B")
    _refused(
        sch,
        lambda: sch.annotate(block, "", 1),
        r"annotate: block 'B': the annotation key must be a non-empty string, got ''",
    )


def test_annotate_refuses_a_block_that_is_gone() -> None:
    sch = Schedule(scale)
    _refused(sch, lambda: sch.annotate(sch.block_rv("X"), "k", 1), r"annotate: block 'X': no such block")


def test_unannotate_refuses_a_missing_key() -> None:
    sch = Schedule(scale)
    i, _ = _loops(sch)
    sch.annotate(i, "a", 1)
    _refused(sch, lambda: sch.unannotate(i, "b"), r"unannotate: loop i: there is no annotation 'b' \(it has \['a'\]\)")


def test_deferred_independence_checks_leave_the_proof_to_check_independent_loops() -> None:
    """The tuner's lazy candidates: within ``deferred_independence_checks`` parallel and
    vectorize skip the proof of independent iterations (only that), and
    ``check_independent_loops`` refuses the finished program as the primitive would have."""
    from tir.schedule.primitives.annotate import check_independent_loops, deferred_independence_checks

    sch = Schedule(mirrored)
    i, j = _loops(sch)
    with deferred_independence_checks():
        sch.parallel(i)  # a race: the proof is deferred
        with pytest.raises(ScheduleError, match="nested parallelism"):
            sch.parallel(j)  # every other check stays
    with pytest.raises(ScheduleError, match=r"parallel: loop i: blocks \['B', 'C'\] under the loop share buffer 'B'"):
        check_independent_loops(sch.func)
    fresh = Schedule(mirrored)
    with pytest.raises(ScheduleError, match="share buffer 'B'"):
        fresh.parallel(_loops(fresh)[0])  # outside the block: checked again
    good = Schedule(mirrored)
    good.vectorize(_loops(good)[1])
    check_independent_loops(good.func)  # a proved program passes


def test_unroll_of_a_cross_thread_reduction_loop_drops_the_reduction() -> None:
    sch = Schedule(row_sum)
    i, k = _loops(sch)
    _, ki = sch.split(k, [None, 32])
    sch.bind(i, "blockIdx.x")
    sch.bind(ki, "threadIdx.x")
    assert sch.get_block_node(sch.get_block("B")).annotations == {"cross_thread_reduction": True}
    sch.unroll(ki)
    assert sch.get_block_node(sch.get_block("B")).annotations == {}
    check_numerics(row_sum, sch.func, llvm=False)
