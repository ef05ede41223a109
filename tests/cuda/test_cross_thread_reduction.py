"""Cross-thread reductions: ``bind`` of a reduce loop to threadIdx.x, lowered to warp shuffles.

The schedule-level program runs in the interpreter (thread loops one after another); the
lowered program's shuffles cannot (no lane can read another's register there), so it is
checked by its structure (a golden), by compiling it (``SHFL.DOWN`` in the SASS) and, on a
machine with a GPU, by running it.
"""

from __future__ import annotations

import numpy as np
import pytest

import tir
import tir.script as T
from tir.codegen.cuda import codegen_cuda
from tir.codegen.cuda_compile import compile_cuda, disassemble
from tir.schedule import Schedule
from tir.transform import LoweringError, lower
from tir.transform.lower_cross_thread_reduction import SHFL_DOWN_OP, lower_cross_thread_reduction

TARGET = "cuda -arch=sm_80"
ROWS, COLS = 128, 1024


def make_row_reduce(kind: str, rows: int = ROWS, cols: int = COLS) -> tir.PrimFunc:
    """``B[i] = sum_k A[i, k]`` (kind "sum") or ``max_k A[i, k]`` (kind "max")."""
    if kind == "sum":

        @T.script
        def row_sum(A: T.Buffer((rows, cols), "float32"), B: T.Buffer((rows,), "float32")):
            for i, k in T.grid(rows, cols):
                with T.block("B"):
                    vi, vk = T.remap("SR", i, k)
                    with T.init():
                        B[vi] = 0.0
                    B[vi] = B[vi] + A[vi, vk]

        return row_sum

    @T.script
    def row_max(A: T.Buffer((rows, cols), "float32"), B: T.Buffer((rows,), "float32")):
        for i, k in T.grid(rows, cols):
            with T.block("B"):
                vi, vk = T.remap("SR", i, k)
                with T.init():
                    B[vi] = T.float32("-inf")
                B[vi] = T.max(B[vi], A[vi, vk])

    return row_max


def schedule_row_reduce(func: tir.PrimFunc, threads: int) -> Schedule:
    """One thread block per row; the reduction loop split, its inner part bound to threadIdx.x."""
    sch = Schedule(func)
    i, k = sch.get_loops(sch.get_block("B"))
    _, k_inner = sch.split(k, [None, threads])
    sch.bind(i, "blockIdx.x")
    sch.bind(k_inner, "threadIdx.x")
    return sch


def _reference(kind: str, a: np.ndarray) -> np.ndarray:
    return a.sum(axis=1) if kind == "sum" else a.max(axis=1)


CASES = [("sum", 32), ("sum", 256), ("max", 32), ("max", 256)]
IDS = [f"{kind}-{threads}" for kind, threads in CASES]


@pytest.mark.parametrize("kind,threads", CASES, ids=IDS)
def test_schedule_is_accepted_and_valid(kind: str, threads: int) -> None:
    sch = schedule_row_reduce(make_row_reduce(kind), threads)
    block = sch.get_block_node(sch.get_block("B"))
    assert block.annotations == {"cross_thread_reduction": True}
    assert tir.analysis.verify(sch.func, TARGET) == []


@pytest.mark.parametrize("kind,threads", CASES, ids=IDS)
def test_schedule_level_program_matches_numpy(kind: str, threads: int) -> None:
    sch = schedule_row_reduce(make_row_reduce(kind), threads)
    a = np.random.default_rng(0).standard_normal((ROWS, COLS)).astype(np.float32)
    b = np.zeros(ROWS, np.float32)
    tir.interpret(sch.func, a, b)
    np.testing.assert_allclose(b, _reference(kind, a), rtol=1e-5, atol=1e-4)


def test_lowered_structure(golden) -> None:  # type: ignore[no-untyped-def]
    mod = lower(schedule_row_reduce(make_row_reduce("sum"), 256).func, TARGET)
    golden.check("cuda/cross_thread_reduction_sum_256", mod.script())


def _kernel_script(func: tir.PrimFunc) -> str:
    mod = lower(func, TARGET)
    return "\n".join(f.script() for f in mod.functions.values() if f.attrs.get("kernel"))


@pytest.mark.parametrize("kind,threads", CASES, ids=IDS)
def test_lowered_shuffles(kind: str, threads: int) -> None:
    text = _kernel_script(schedule_row_reduce(make_row_reduce(kind), threads).func)
    # Five shuffles within each warp; with more than one warp, three more across the 8 warps.
    assert text.count(SHFL_DOWN_OP) == (5 if threads == 32 else 8)
    assert ('scope="shared"' in text) == (threads > 32)
    assert "cross_thread_reduction" not in text


def test_tail_mask_for_a_partial_warp() -> None:
    # 48 threads: a full warp and one of 16 lanes, which names only its lanes in the mask.
    func = make_row_reduce("sum", rows=4, cols=96)
    sch = schedule_row_reduce(func, 48)
    text = _kernel_script(sch.func)
    assert "65535" in text  # (1 << 16) - 1
    assert text.count(SHFL_DOWN_OP) == 5 + 1  # 2 warps: offset 1 only in the second stage
    source = codegen_cuda(lower(sch.func, TARGET), TARGET)
    assert "__shfl_down_sync((unsigned)(" in source


def test_pass_output_round_trips_and_is_not_interpretable() -> None:
    func = schedule_row_reduce(make_row_reduce("sum", rows=4, cols=64), 32).func
    lowered = lower_cross_thread_reduction(func)
    assert tir.ir.structural.structural_equal(tir.parse(lowered.script()), lowered)
    # Thread loops run one after another in the interpreter: no lane can read another's register.
    with pytest.raises(NotImplementedError, match="cuda_shfl_down_sync"):
        tir.interpret(lowered, np.ones((4, 64), np.float32), np.zeros(4, np.float32))


def test_the_pass_leaves_other_programs_alone() -> None:
    func = make_row_reduce("sum", rows=4, cols=64)
    assert lower_cross_thread_reduction(func) is func


def test_lowering_refuses_a_reduce_loop_on_another_thread_axis() -> None:
    @T.script
    def odd(A: T.Buffer((4, 64), "float32"), B: T.Buffer((4,), "float32")):
        for i in T.thread_binding(4, thread="blockIdx.x"):
            for k in T.thread_binding(64, thread="threadIdx.y"):
                with T.block("B"):
                    vi, vk = T.remap("SR", i, k)
                    T.block_attr({"cross_thread_reduction": True})
                    with T.init():
                        B[vi] = 0.0
                    B[vi] = B[vi] + A[vi, vk]

    with pytest.raises(LoweringError, match="exactly one of its reduce loops must be bound to threadIdx.x"):
        lower(odd, TARGET)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("kind,threads", CASES, ids=IDS)
def test_compiles_to_warp_shuffles(nvcc: str, sass_tool: str, arch: str, kind: str, threads: int) -> None:
    target = f"cuda -arch={arch}"
    source = codegen_cuda(lower(schedule_row_reduce(make_row_reduce(kind), threads).func, target), target)
    sass = disassemble(compile_cuda(source, arch))
    assert "SHFL.DOWN" in sass
    assert ("BAR.SYNC" in sass) == (threads > 32)


@pytest.mark.cuda
@pytest.mark.parametrize("kind,threads", [*CASES, ("sum", 48)], ids=[*IDS, "sum-48"])
def test_runs_on_the_gpu(kind: str, threads: int) -> None:
    cols = 96 if threads == 48 else COLS
    module = tir.build(schedule_row_reduce(make_row_reduce(kind, cols=cols), threads).func, TARGET)
    a = np.random.default_rng(1).standard_normal((ROWS, cols)).astype(np.float32)
    b = np.zeros(ROWS, np.float32)
    module(a, b)
    np.testing.assert_allclose(b, _reference(kind, a), rtol=1e-5, atol=1e-4)


def schedule_rfactor_reduce(func: tir.PrimFunc, threads: int) -> Schedule:
    """TVM's recipe: rfactor the inner part of the split reduction, bind it to threadIdx.x,
    and move the write-back under that loop, where each thread holds one partial."""
    sch = Schedule(func, debug=True)
    i, k = sch.get_loops(sch.get_block("B"))
    _, k_inner = sch.split(k, [None, threads])
    rf = sch.rfactor(k_inner, 0)
    sch.set_scope(rf, 0, "local")
    i_rf, k_outer_rf, k_inner_rf = sch.get_loops(rf)
    sch.reorder(k_inner_rf, k_outer_rf)
    sch.bind(i_rf, "blockIdx.x")
    sch.bind(k_inner_rf, "threadIdx.x")
    sch.reverse_compute_at(sch.get_block("B"), k_inner_rf)
    return sch


@pytest.mark.parametrize("kind", ["sum", "max"])
def test_rfactor_write_back_under_the_thread_loop_lowers_to_shuffles(kind: str) -> None:
    """Each thread's partials first (the rfactor block), then the write-back combines the 32
    threads' partials with shuffles; thread 0 stores the row."""
    func = make_row_reduce(kind, rows=8, cols=256)
    sch = schedule_rfactor_reduce(func, 32)
    assert sch.get(sch.get_block("B")).annotations["cross_thread_reduction"] is True
    a = np.random.default_rng(0).standard_normal((8, 256)).astype(np.float32)
    b = np.zeros(8, np.float32)
    tir.interpret(sch.func, a, b)
    np.testing.assert_allclose(b, _reference(kind, a), rtol=1e-5, atol=1e-5)
    text = _kernel_script(sch.func)
    assert text.count(SHFL_DOWN_OP) == 5
    assert text.index("B_rf") < text.index(SHFL_DOWN_OP)  # the partials come first
    assert "cross_thread_reduction" not in text


def test_lowering_refuses_statements_after_the_reduction_in_the_thread_loop() -> None:
    """Another statement after the write-back in the thread loop would run before thread 0
    has stored the result: refused, not reordered."""

    @T.script
    def after(A: T.Buffer((4, 32), "float32"), B: T.Buffer((4,), "float32"), C: T.Buffer((4, 32), "float32")):
        for i in T.thread_binding(4, thread="blockIdx.x"):
            for k in T.thread_binding(32, thread="threadIdx.x"):
                with T.block("B"):
                    vi, vk = T.remap("SR", i, k)
                    T.block_attr({"cross_thread_reduction": True})
                    with T.init():
                        B[vi] = 0.0
                    B[vi] = B[vi] + A[vi, vk]
                with T.block("C"):
                    vi, vk = T.remap("SS", i, k)
                    C[vi, vk] = A[vi, vk] * 2.0

    with pytest.raises(LoweringError, match="statements follow its reduction in the threadIdx.x loop"):
        lower_cross_thread_reduction(after)


@pytest.mark.parametrize("kind", ["sum", "max"])
def test_rfactor_write_back_compiles_to_warp_shuffles(nvcc: str, sass_tool: str, kind: str) -> None:
    source = codegen_cuda(lower(schedule_rfactor_reduce(make_row_reduce(kind), 32).func, TARGET), TARGET)
    sass = disassemble(compile_cuda(source, "sm_80"))
    assert "SHFL.DOWN" in sass


@pytest.mark.cuda
@pytest.mark.parametrize("kind", ["sum", "max"])
def test_rfactor_write_back_runs_on_the_gpu(kind: str) -> None:
    module = tir.build(schedule_rfactor_reduce(make_row_reduce(kind), 32).func, TARGET)
    a = np.random.default_rng(2).standard_normal((ROWS, COLS)).astype(np.float32)
    b = np.zeros(ROWS, np.float32)
    module(a, b)
    np.testing.assert_allclose(b, _reference(kind, a), rtol=1e-5, atol=1e-4)
