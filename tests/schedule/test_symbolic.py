"""Schedule primitives on symbolic extents, built once and run for many sizes (issue 18, part 1).

Every scheduled program is checked against numpy through the interpreter and through one LLVM
build, for sizes 1, primes, and multiples of the split factors.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from schedule_testing import check_replay

import tir
import tir.script as T
from tir.schedule import Schedule, ScheduleError

SIZES = (1, 2, 7, 8, 13, 16, 31)


@T.script
def add_one(a: T.handle, b: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n, 64), "float32")
    B = T.match_buffer(b, (n, 64), "float32")
    for i, j in T.grid(n, 64):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] + 1.0


@T.script
def matmul(a: T.handle, b: T.handle, c: T.handle):
    m = T.int32()
    n = T.int32()
    A = T.match_buffer(a, (m, 24), "float32")
    B = T.match_buffer(b, (24, n), "float32")
    C = T.match_buffer(c, (m, n), "float32")
    for i, j, k in T.grid(m, n, 24):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]


@T.script
def two_stage(a: T.handle, c: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n, 16), "float32")
    C = T.match_buffer(c, (n, 16), "float32")
    B = T.alloc_buffer((n, 16), "float32")
    for i, j in T.grid(n, 16):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(n, 16):
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = B[vi, vj] + 1.0


@T.script
def tail_without_predicate(a: T.handle, b: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n,), "float32")
    B = T.match_buffer(b, (n,), "float32")
    for i_0, i_1 in T.grid((n + 3) // 4, 4):
        with T.block("B"):
            vi = T.spatial_axis(n, i_0 * 4 + i_1)
            B[vi] = A[vi] + 1.0


@T.script
def tail_with_predicate(a: T.handle, b: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n,), "float32")
    B = T.match_buffer(b, (n,), "float32")
    for i_0, i_1 in T.grid((n + 3) // 4, 4):
        with T.block("B"):
            vi = T.spatial_axis(n, i_0 * 4 + i_1)
            T.where(i_0 * 4 + i_1 < n)
            B[vi] = A[vi] + 1.0


Case = Callable[[int], tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]]


def _elementwise(n: int) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    a = np.random.default_rng(n).standard_normal((n, 64)).astype("float32")
    return [a], [np.empty_like(a)], [a + 1.0]


def _matmul(m: int) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    n = m + 3  # two sizes that differ
    rng = np.random.default_rng(m)
    a, b = rng.standard_normal((m, 24)).astype("float32"), rng.standard_normal((24, n)).astype("float32")
    return [a, b], [np.empty((m, n), "float32")], [a @ b]


def _two_stage(n: int) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    a = np.random.default_rng(n).standard_normal((n, 16)).astype("float32")
    return [a], [np.empty_like(a)], [a * 2.0 + 1.0]


def _check_sizes(func: tir.PrimFunc, case: Case) -> None:
    assert tir.analysis.verify(func) == []
    module = tir.build(func)  # one build for every size
    for size in SIZES:
        inputs, outputs, expected = case(size)
        for run in (module, lambda *args: tir.interpret(func, *args)):
            results = [np.full_like(out, np.nan) for out in outputs]
            run(*inputs, *results)
            for result, want in zip(results, expected):
                np.testing.assert_allclose(result, want, rtol=1e-4, atol=1e-4, err_msg=f"size {size}")


def test_split_infers_ceildiv_and_predicates_the_tail() -> None:
    sch = Schedule(add_one, debug=True)
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.split(i, [None, 4])
    text = sch.mod.script()
    assert "for i_0, i_1, j in T.grid((n + 3) // 4, 4, 64):" in text
    assert "T.where(i_0 * 4 + i_1 < n)" in text
    _check_sizes(sch.mod, _elementwise)


def test_elementwise_split_parallel_vectorize_unroll() -> None:
    sch = Schedule(add_one, debug=True)
    i, j = sch.get_loops(sch.get_block("B"))
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, 8])
    sch.parallel(i0)
    sch.unroll(i1)
    sch.vectorize(j1)
    _check_sizes(sch.mod, _elementwise)


def test_elementwise_fuse_then_split() -> None:
    sch = Schedule(add_one, debug=True)
    fused = sch.fuse(*sch.get_loops(sch.get_block("B")))
    outer, inner = sch.split(fused, [None, 16])
    sch.parallel(outer)
    sch.vectorize(inner)
    _check_sizes(sch.mod, _elementwise)


def test_matmul_tiled_parallel_vectorized() -> None:
    sch = Schedule(matmul, debug=True)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, 8])
    sch.reorder(i0, j0, k, i1, j1)
    sch.parallel(i0)
    sch.vectorize(j1)
    _check_sizes(sch.mod, _matmul)


def test_matmul_cache_read_compute_at_and_cache_write() -> None:
    sch = Schedule(matmul, debug=True)
    block = sch.get_block("C")
    i, _, _ = sch.get_loops(block)
    i0, _ = sch.split(i, [None, 4])
    sch.compute_at(sch.cache_read(block, 1, "global"), i0)
    sch.reverse_compute_at(sch.cache_write(block, 0, "global"), i0)
    _check_sizes(sch.mod, _matmul)


def test_matmul_pad_einsum_then_exact_tiles() -> None:
    sch = Schedule(matmul, debug=True)
    block = sch.get_block("C")
    sch.pad_einsum(block, [4, 8, 1])
    assert "C_pad = T.alloc_buffer(((m + 3) // 4 * 4, (n + 7) // 8 * 8)" in sch.mod.script()
    i, j, _ = sch.get_loops(block)
    sch.parallel(i)
    _check_sizes(sch.mod, _matmul)


@pytest.mark.parametrize("reverse", [False, True])
def test_compute_at_under_a_symbolic_split(reverse: bool) -> None:
    sch = Schedule(two_stage, debug=True)
    moved, anchor = ("C", "B") if reverse else ("B", "C")
    i, _ = sch.get_loops(sch.get_block(anchor))
    i0, _ = sch.split(i, [None, 4])
    if reverse:
        sch.reverse_compute_at(sch.get_block(moved), i0)
    else:
        sch.compute_at(sch.get_block(moved), i0)
    _check_sizes(sch.mod, _two_stage)


def test_verify_reports_an_unpredicated_tail_and_accepts_a_covering_predicate() -> None:
    problems = tir.analysis.verify(tail_without_predicate)
    assert len(problems) == 1
    assert "outside its domain [0, n - 1] for some sizes (n = 1" in problems[0].message
    assert tir.analysis.verify(tail_with_predicate) == []


def test_split_with_an_int_suggests_a_list() -> None:
    sch = Schedule(add_one)
    i, _ = sch.get_loops(sch.get_block("B"))
    with pytest.raises(ScheduleError, match=r"split\(loop, \[None, 4\]\)"):
        sch.split(i, 4)  # type: ignore[arg-type]


def test_tvm_keywords() -> None:
    sch = Schedule(two_stage)
    i, j = sch.get_loops(sch.get_block("C"))
    i0, _ = sch.split(i, [None, 4], preserve_unit_iters=True)
    sch.fuse(*sch.get_loops(sch.get_block("B")), preserve_unit_iters=True)
    with pytest.raises(ScheduleError, match=r"index=5: the body of the loop i_0 has 1 statements"):
        sch.compute_at(sch.get_block("B"), i0, index=5)
    with pytest.raises(ScheduleError, match=r"index=1: statement 0 of the loop i_0 reads what the block writes"):
        sch.compute_at(sch.get_block("B"), i0, index=1)
    sch.compute_at(sch.get_block("B"), i0, index=-1)
    _check_sizes(sch.mod, _two_stage)


def test_stale_loop_handle_suggests_the_loops_that_replaced_it() -> None:
    sch = Schedule(add_one)
    i, _ = sch.get_loops(sch.get_block("B"))
    sch.split(i, [None, 4])
    with pytest.raises(ScheduleError, match=r"the program has loop\(s\) 'i_0', 'i_1'"):
        sch.parallel(i)
    with pytest.raises(ScheduleError, match=r"expected a loop handle \(LoopRV\).*'i_0'"):
        sch.parallel("i")  # type: ignore[arg-type]


def test_matmul_pad_einsum_then_tensorize() -> None:
    """Padding makes the symbolic extents multiples of the intrinsic's tile (split then needs
    no tail predicate), so the 4x16x4 AVX2 FMA intrinsic covers every tile, for every size."""
    from tir.intrin.x86 import AVX2_FMA_F32
    from tir.target import Target

    host = Target.parse("llvm")
    if not (host.isa == "x86_64" and host.has("avx2") and host.has("fma")):
        pytest.skip("this CPU lacks AVX2/FMA")
    sch = Schedule(matmul, debug=True)
    block = sch.get_block("C")
    sch.pad_einsum(block, [4, 16, 4])
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, 16])
    k0, k1 = sch.split(k, [None, 4])
    sch.reorder(i0, j0, k0, i1, j1, k1)
    sch.decompose_reduction(block, k0)
    sch.tensorize(i1, AVX2_FMA_F32)
    sch.parallel(i0)
    assert "llvm.fma.v8f32" in sch.mod.script()
    _check_sizes(sch.mod, _matmul)


def test_split_of_a_padded_symbolic_extent_has_no_tail() -> None:
    sch = Schedule(matmul)
    block = sch.get_block("C")
    sch.pad_einsum(block, [4, 1, 1])
    i, _, _ = sch.get_loops(block)
    sch.split(i, [None, 4])
    assert "T.where" not in sch.mod.script()
    _check_sizes(sch.mod, _matmul)


@T.script
def add_one_inner_symbolic(a: T.handle, b: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (4, 8, n), "float32")
    B = T.match_buffer(b, (4, 8, n), "float32")
    for i, j, k in T.grid(4, 8, n):
        with T.block("B"):
            vi, vj, vk = T.remap("SSS", i, j, k)
            B[vi, vj, vk] = A[vi, vj, vk] + 1.0


def _inner_symbolic(n: int) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    a = np.random.default_rng(n).standard_normal((4, 8, n)).astype("float32")
    return [a], [np.empty_like(a)], [a + 1.0]


def test_fuse_over_a_symbolic_inner_extent() -> None:
    # TVM's test_fuse_symbolic: the fused extent n * 32 is split at n * 8, which divides it
    # factor by factor although n is unknown.
    sch = Schedule(add_one_inner_symbolic, debug=True)
    fused = sch.fuse(*sch.get_loops(sch.get_block("B")))
    text = sch.mod.script()
    assert "for i_j_k_fused in range(n * 32):" in text
    assert "vi = T.spatial_axis(4, i_j_k_fused // (n * 8))" in text
    outer, inner = sch.split(fused, [None, 8])
    sch.parallel(outer)
    sch.vectorize(inner)
    _check_sizes(sch.mod, _inner_symbolic)


@T.script
def nt_matmul_rf(a: T.handle, b: T.handle, c: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (32, 1, 128), "float32")
    B = T.match_buffer(b, (32, n, 128), "float32")
    C = T.match_buffer(c, (32, 1, n), "float32")
    C_rf = T.alloc_buffer((128, 32, 1, n), "float32")
    for ax0_ax1_fused, ax2_fused_1, ax2_fused_0 in T.grid(n * 32, 128, 1):
        with T.block("NT_matmul_rf"):
            vax2_fused_1 = T.axis.spatial(128, ax2_fused_1)
            v0 = T.axis.spatial(32, ax0_ax1_fused // n)
            v1 = T.axis.spatial(n, ax0_ax1_fused % n)
            vax2_fused_0 = T.axis.reduce(1, ax2_fused_0)
            with T.init():
                C_rf[vax2_fused_1, v0, 0, v1] = T.float32(0)
            C_rf[vax2_fused_1, v0, 0, v1] = (
                C_rf[vax2_fused_1, v0, 0, v1]
                + A[v0, 0, vax2_fused_0 * 128 + vax2_fused_1] * B[v0, v1, vax2_fused_0 * 128 + vax2_fused_1]
            )
    for ax0_ax1_fused, ax2_fused_1 in T.grid(n * 32, 128):
        with T.block("NT_matmul"):
            vax2_fused_1 = T.axis.reduce(128, ax2_fused_1)
            v0 = T.axis.spatial(32, ax0_ax1_fused // n)
            v1 = T.axis.spatial(n, ax0_ax1_fused % n)
            with T.init():
                C[v0, 0, v1] = T.float32(0)
            C[v0, 0, v1] = C[v0, 0, v1] + C_rf[vax2_fused_1, v0, 0, v1]


def _nt_matmul(n: int) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    rng = np.random.default_rng(n)
    a = rng.standard_normal((32, 1, 128)).astype("float32")
    b = rng.standard_normal((32, n, 128)).astype("float32")
    return [a, b], [np.empty((32, 1, n), "float32")], [np.einsum("ik,ijk->ij", a[:, 0, :], b)[:, None, :]]


def test_reverse_compute_at_under_a_fused_loop_divided_by_a_size(golden) -> None:  # type: ignore[no-untyped-def]
    # TVM's test_shape_var_as_bound: the new bindings divide by the buffer size n, positive as
    # the verifier assumes of every size.
    sch = Schedule(nt_matmul_rf, debug=True)
    loop, _, _ = sch.get_loops(sch.get_block("NT_matmul_rf"))
    sch.reverse_compute_at(sch.get_block("NT_matmul"), loop, preserve_unit_loops=True)
    assert [sch.get(lp).extent.value for lp in sch.get_loops(sch.get_block("NT_matmul"))[1:]] == [128, 1, 1]
    golden.check(
        "schedule/reverse_compute_at_size_divisor",
        f"# before\n{nt_matmul_rf.script()}\n# after\n{sch.mod.script()}\n# trace\n{sch.trace.as_python()}",
    )
    tir.assert_structural_equal(tir.parse(sch.func.script()), sch.func)
    _check_sizes(sch.mod, _nt_matmul)
    check_replay(sch, nt_matmul_rf)
