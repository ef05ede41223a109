"""Random schedules of the example kernels: every primitive either refuses (ScheduleError, the
program unchanged) or keeps the program's meaning.

Each hypothesis example picks an example kernel and applies 1-6 random primitives with random
but plausible arguments: handles from ``get_block`` / ``get_loops`` / ``get_child_blocks`` of
the current program, random split factors, buffer indices, scopes, annotation values. Then:

- a refused primitive raised ``ScheduleError`` and left the program and the trace as they were;
- any other exception is a bug;
- the validator (``tir.analysis.verify``) finds nothing wrong with the result;
- the result prints and parses back to a structurally equal program;
- it computes what the original computes in the interpreter (integers exactly, floats within a
  tolerance that allows reassociated reductions);
- its trace replays (directly and through JSON) to a structurally equal program;
- on a hypothesis-drawn fraction of the results, the LLVM build computes the same too (a
  ``LoweringError`` / ``CodegenError`` on a program the schedule accepted is a bug).

Hunting bugs with many more examples and fresh seeds:

    HYPOTHESIS_PROFILE=dev TIR_RANDOM_SCHEDULES=2000 python -m pytest tests/schedule/test_random_schedules.py

(``TIR_RANDOM_SCHEDULES_STEPS`` raises the longest sequence from 6, ``TIR_RANDOM_SCHEDULES_LLVM=1``
builds every changed result with LLVM, ``TIR_RANDOM_SCHEDULES_VERIFY=0`` skips the validator;
``--hypothesis-show-statistics`` shows how often each primitive applied or was refused, and why.)
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from schedule_testing import random_args, run_interp, run_llvm

import tir
import tir.script as T
from tir.analysis import verify
from tir.ir import IntImm, PrimFunc
from tir.schedule import BlockRV, LoopRV, Schedule, ScheduleError, Trace
from tir.schedule.primitives.compute_location import compute_location_candidates

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples"
EXAMPLE_NAMES = [
    "matmul",
    "matmul_relu",
    "conv2d_nhwc",
    "depthwise_conv2d",
    "softmax",
    "layer_norm",
    "batch_matmul",
    "max_pool2d",
    "conv2d_transpose",
    "int8_matmul",
]

#: How many random schedules the test tries (CI keeps it modest; raise it to hunt bugs).
MAX_EXAMPLES = int(os.environ.get("TIR_RANDOM_SCHEDULES", "200"))

#: The longest primitive sequence tried.
MAX_STEPS = int(os.environ.get("TIR_RANDOM_SCHEDULES_STEPS", "6"))

#: Build every changed result with LLVM (not only a drawn fifth of them) when set to 1.
ALWAYS_LLVM = os.environ.get("TIR_RANDOM_SCHEDULES_LLVM", "0") == "1"

#: Whether results also go through the validator (``tir.analysis.verify``).
VERIFY = os.environ.get("TIR_RANDOM_SCHEDULES_VERIFY", "1") != "0"

#: Reductions reordered by reorder / rfactor / decompose may round differently.
FLOAT_TOLERANCE = 1e-4

SCOPES = ["global", "local"]


def _load_kernel(name: str) -> PrimFunc:
    if str(EXAMPLES_DIR) not in sys.path:
        sys.path.insert(0, str(EXAMPLES_DIR))  # the examples import their shared harness
    spec = importlib.util.spec_from_file_location(f"tir_random_schedule_{name}", EXAMPLES_DIR / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    kernel = module.KERNEL
    assert isinstance(kernel, PrimFunc)
    return kernel


KERNELS = {name: _load_kernel(name) for name in EXAMPLE_NAMES}


# ---------------------------------------------------------------- handles from the program


def block_names(sch: Schedule, data: st.DataObject) -> list[str]:
    """The blocks' names to draw from; the root block (rarely a useful target) only now and then."""
    names = sorted(sch.index.blocks)
    others = [name for name in names if name != "root"]
    if not others or data.draw(st.integers(0, 7), label="root too") == 0:
        return names
    return others


def draw_block(sch: Schedule, data: st.DataObject) -> BlockRV:
    """A block of the current program: by name, or as a child of a loop or of a block."""
    how = data.draw(st.sampled_from(["name", "child_of_loop", "child_of_block", "name"]), label="block via")
    if how == "child_of_loop":
        loop = draw_loop(sch, data)
        if loop is not None:
            children = sch.get_child_blocks(loop)
            if children:
                return data.draw(st.sampled_from(children), label="child block")
    elif how == "child_of_block":
        parent = sch.get_block(data.draw(st.sampled_from(sorted(sch.index.blocks)), label="parent"))
        children = sch.get_child_blocks(parent)
        if children:
            return data.draw(st.sampled_from(children), label="child block")
    return sch.get_block(data.draw(st.sampled_from(block_names(sch, data)), label="block"))


def block_loops(sch: Schedule, data: st.DataObject) -> list[LoopRV]:
    """The loops of a random block (outermost first); may be empty."""
    return sch.get_loops(sch.get_block(data.draw(st.sampled_from(block_names(sch, data)), label="loops of")))


def draw_loop(sch: Schedule, data: st.DataObject) -> LoopRV | None:
    loops = block_loops(sch, data)
    return data.draw(st.sampled_from(loops), label="loop") if loops else None


def draw_block_or_loop(sch: Schedule, data: st.DataObject) -> BlockRV | LoopRV | None:
    if data.draw(st.booleans(), label="loop, not block"):
        return draw_loop(sch, data)
    return draw_block(sch, data)


def loop_extent(sch: Schedule, loop: LoopRV) -> int | None:
    extent = sch.get_loop_node(loop).extent
    return extent.value if isinstance(extent, IntImm) else None


def draw_factors(sch: Schedule, loop: LoopRV, data: st.DataObject) -> list[int | None]:
    """Split factors: mostly a perfect or inferred split of the extent, sometimes anything."""
    extent = loop_extent(sch, loop) or 16
    parts = data.draw(st.integers(2, 3), label="parts")
    divisors = [d for d in range(1, extent + 1) if extent % d == 0]
    factors: list[int | None] = [
        data.draw(st.sampled_from(divisors) | st.integers(1, 9), label="factor") for _ in range(parts)
    ]
    if data.draw(st.integers(0, 3), label="infer one") > 0:
        factors[data.draw(st.integers(0, parts - 1), label="inferred position")] = None
    return factors


# ---------------------------------------------------------------- one random primitive each

# An action draws its arguments (calling getters on the schedule, which the trace records),
# then returns the primitive call to attempt; ``None`` when the program offers no arguments.
Action = Callable[[Schedule, st.DataObject], "Callable[[], Any] | None"]


def act_split(sch: Schedule, data: st.DataObject) -> Callable[[], Any] | None:
    loop = draw_loop(sch, data)
    if loop is None:
        return None
    factors = draw_factors(sch, loop, data)
    return lambda: sch.split(loop, factors)


def act_sample_and_split(sch: Schedule, data: st.DataObject) -> Callable[[], Any] | None:
    loop = draw_loop(sch, data)
    if loop is None:
        return None
    n = data.draw(st.integers(1, 4), label="n")
    max_innermost = data.draw(st.sampled_from([1, 2, 4, 16]), label="max_innermost_factor")

    def call() -> None:
        sizes = sch.sample_perfect_tile(loop, n=n, max_innermost_factor=max_innermost)
        sch.split(loop, sizes)

    return call


def act_fuse(sch: Schedule, data: st.DataObject) -> Callable[[], Any] | None:
    loops = block_loops(sch, data)
    if not loops:
        return None
    if data.draw(st.integers(0, 4), label="scattered loops") == 0:
        chosen = data.draw(st.lists(st.sampled_from(loops), min_size=1, max_size=3), label="loops")
    else:
        start = data.draw(st.integers(0, len(loops) - 1), label="start")
        count = data.draw(st.integers(1, min(3, len(loops) - start)), label="count")
        chosen = loops[start : start + count]
    return lambda: sch.fuse(*chosen)


def act_reorder(sch: Schedule, data: st.DataObject) -> Callable[[], Any] | None:
    loops = block_loops(sch, data)
    if len(loops) < 2:
        return None
    order = data.draw(st.permutations(loops), label="order")
    count = data.draw(st.integers(2, len(loops)), label="count")
    return lambda: sch.reorder(*order[:count])


def act_add_unit_loop(sch: Schedule, data: st.DataObject) -> Callable[[], Any] | None:
    target = draw_block_or_loop(sch, data)
    return None if target is None else lambda: sch.add_unit_loop(target)


def _loop_kind_action(method: str) -> Action:
    def act(sch: Schedule, data: st.DataObject) -> Callable[[], Any] | None:
        loop = draw_loop(sch, data)
        return None if loop is None else lambda: getattr(sch, method)(loop)

    return act


def act_annotate(sch: Schedule, data: st.DataObject) -> Callable[[], Any] | None:
    target = draw_block_or_loop(sch, data)
    if target is None:
        return None
    key = data.draw(st.sampled_from(["pragma_auto_unroll_max_step", "pragma_unroll_explicit", "meta_note"]))
    value = data.draw(st.integers(0, 64) | st.sampled_from(["x", "y"]), label="value")
    return lambda: sch.annotate(target, key, value)


def _compute_at_action(method: str) -> Action:
    def act(sch: Schedule, data: st.DataObject) -> Callable[[], Any] | None:
        # Mostly a block with a consumer (compute_at) or a producer (reverse_compute_at) and a
        # loop of that neighbour, where the primitive has a chance; sometimes anything.
        get_neighbours = sch.get_consumers if method == "compute_at" else sch.get_producers
        for _ in range(3):
            block = draw_block(sch, data)
            neighbours = get_neighbours(block)
            if neighbours or data.draw(st.integers(0, 3), label="keep block") == 0:
                break
        loops = sch.get_loops(data.draw(st.sampled_from(neighbours), label="neighbour")) if neighbours else []
        if loops and data.draw(st.integers(0, 3), label="any loop") > 0:
            loop: LoopRV | None = data.draw(st.sampled_from(loops), label="loop")
        else:
            loop = draw_loop(sch, data)
        if loop is None:
            return None
        keep = data.draw(st.booleans(), label="preserve_unit_loops")
        return lambda: getattr(sch, method)(block, loop, preserve_unit_loops=keep)

    return act


def _block_action(method: str) -> Action:
    def act(sch: Schedule, data: st.DataObject) -> Callable[[], Any] | None:
        block = draw_block(sch, data)
        return lambda: getattr(sch, method)(block)

    return act


def act_cache_read(sch: Schedule, data: st.DataObject) -> Callable[[], Any] | None:
    block = draw_block(sch, data)
    index = data.draw(st.integers(0, 3), label="read_buffer_index")
    scope = data.draw(st.sampled_from(SCOPES), label="scope")
    return lambda: sch.cache_read(block, index, scope)


def act_cache_write(sch: Schedule, data: st.DataObject) -> Callable[[], Any] | None:
    block = draw_block(sch, data)
    index = data.draw(st.integers(0, 1), label="write_buffer_index")
    scope = data.draw(st.sampled_from(SCOPES), label="scope")
    return lambda: sch.cache_write(block, index, scope)


def act_set_scope(sch: Schedule, data: st.DataObject) -> Callable[[], Any] | None:
    block = draw_block(sch, data)
    index = data.draw(st.integers(0, 1), label="buffer_index")
    scope = data.draw(st.sampled_from(SCOPES), label="scope")
    return lambda: sch.set_scope(block, index, scope)


def act_storage_align(sch: Schedule, data: st.DataObject) -> Callable[[], Any] | None:
    block = draw_block(sch, data)
    index = data.draw(st.integers(0, 1), label="buffer_index")
    axis = data.draw(st.integers(-1, 3), label="axis")
    factor = data.draw(st.integers(0, 16), label="factor")
    offset = data.draw(st.integers(0, 4), label="offset")
    return lambda: sch.storage_align(block, index, axis, factor, offset)


def act_rolling_buffer(sch: Schedule, data: st.DataObject) -> Callable[[], Any] | None:
    block = draw_block(sch, data)
    index = data.draw(st.integers(0, 1), label="write_buffer_index")
    return lambda: sch.rolling_buffer(block, index)


def act_cache_index(sch: Schedule, data: st.DataObject) -> Callable[[], Any] | None:
    block = draw_block(sch, data)
    threshold = data.draw(st.integers(0, 3), label="cse_thresh")
    return lambda: sch.cache_index(block, "global", threshold)


def act_set_axis_separator(sch: Schedule, data: st.DataObject) -> Callable[[], Any] | None:
    block = draw_block(sch, data)
    buffer = (data.draw(st.sampled_from(["read", "write"]), label="kind"), data.draw(st.integers(0, 1), label="index"))
    separators = data.draw(st.lists(st.integers(0, 3), max_size=2).map(sorted), label="axis_separators")
    return lambda: sch.set_axis_separator(block, buffer, separators)


def act_decompose_reduction(sch: Schedule, data: st.DataObject) -> Callable[[], Any] | None:
    block = draw_block(sch, data)
    loops = sch.get_loops(block)
    if not loops or data.draw(st.integers(0, 4), label="foreign loop") == 0:
        loop = draw_loop(sch, data)
    else:
        loop = data.draw(st.sampled_from(loops), label="loop")
    return None if loop is None else lambda: sch.decompose_reduction(block, loop)


def act_merge_reduction(sch: Schedule, data: st.DataObject) -> Callable[[], Any] | None:
    init, update = draw_block(sch, data), draw_block(sch, data)
    return lambda: sch.merge_reduction(init, update)


def act_rfactor(sch: Schedule, data: st.DataObject) -> Callable[[], Any] | None:
    loop = draw_loop(sch, data)
    if loop is None:
        return None
    axis = data.draw(st.integers(0, 2), label="factor_axis")
    return lambda: sch.rfactor(loop, axis)


def act_compute_location(sch: Schedule, data: st.DataObject) -> Callable[[], Any] | None:
    block = draw_block(sch, data)

    def call() -> None:
        location = sch.sample_compute_location(block)
        sch.apply_compute_location(block, location)

    return call


def act_reorder_block_iter_var(sch: Schedule, data: st.DataObject) -> Callable[[], Any] | None:
    block = draw_block(sch, data)
    count = len(sch.get(block).iter_vars)
    order = data.draw(st.permutations(list(range(count))), label="iterator order")
    return lambda: sch.reorder_block_iter_var(block, order)


ACTIONS: dict[str, Action] = {
    "split": act_split,
    "sample_perfect_tile+split": act_sample_and_split,
    "fuse": act_fuse,
    "reorder": act_reorder,
    "add_unit_loop": act_add_unit_loop,
    "parallel": _loop_kind_action("parallel"),
    "vectorize": _loop_kind_action("vectorize"),
    "unroll": _loop_kind_action("unroll"),
    "annotate": act_annotate,
    "compute_at": _compute_at_action("compute_at"),
    "reverse_compute_at": _compute_at_action("reverse_compute_at"),
    "compute_inline": _block_action("compute_inline"),
    "reverse_compute_inline": _block_action("reverse_compute_inline"),
    "cache_read": act_cache_read,
    "cache_write": act_cache_write,
    "set_scope": act_set_scope,
    "storage_align": act_storage_align,
    "cache_index": act_cache_index,
    "rolling_buffer": act_rolling_buffer,
    "set_axis_separator": act_set_axis_separator,
    "decompose_reduction": act_decompose_reduction,
    "merge_reduction": act_merge_reduction,
    "rfactor": act_rfactor,
    "sample_compute_location": act_compute_location,
    "reorder_block_iter_var": act_reorder_block_iter_var,
}


#: The primitives to draw from; those with the most intricate preconditions twice as often.
PRIMITIVE_CHOICES = list(ACTIONS) + [
    "compute_at",
    "reverse_compute_at",
    "cache_read",
    "cache_write",
    "rfactor",
    "decompose_reduction",
    "reorder",
    "fuse",
    "split",
]


# ---------------------------------------------------------------- checks


def apply_step(sch: Schedule, kind: str, data: st.DataObject) -> bool:
    """Draw and attempt one primitive; whether it changed the schedule."""
    call = ACTIONS[kind](sch, data)
    if call is None:
        return False
    func, length = sch.func, len(sch.trace)
    try:
        call()
    except ScheduleError as error:
        # `--hypothesis-show-statistics` lists how often each primitive applied or was refused, and why.
        event(f"{kind}: refused: {error.rule[:60]}")
        # A refusal says who refused and why, and changes nothing.
        assert str(error).strip(), "a ScheduleError without a message"
        assert sch.func is func, f"{kind} raised ScheduleError but changed the program:\n{error}"
        assert len(sch.trace) in (length, length + 1), f"{kind} raised ScheduleError but recorded instructions"
        if len(sch.trace) == length + 1:  # only a sampling step before the refused primitive
            assert sch.trace.instructions[-1].kind.startswith("sample_")
        return False
    event(f"{kind}: applied")
    return True


def assert_outputs_close(original: PrimFunc, expected: list[Any], actual: list[Any], how: str) -> None:
    for param, want, got in zip(original.params, expected, actual):
        if not isinstance(want, np.ndarray):
            continue
        message = f"{how}: buffer {param.name} differs from the unscheduled program"
        if want.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=FLOAT_TOLERANCE, atol=FLOAT_TOLERANCE, err_msg=message)
        else:
            np.testing.assert_array_equal(got, want, err_msg=message)


def check_result(sch: Schedule, original: PrimFunc, llvm: bool) -> None:
    scheduled = sch.func
    if VERIFY:
        problems = verify(scheduled)
        assert not problems, f"the validator rejects an accepted schedule: {problems}\n{scheduled.script()}"
    text = scheduled.script()
    tir.assert_structural_equal(tir.parse(text), scheduled)

    args = random_args(original)
    expected = run_interp(original, args)
    assert_outputs_close(original, expected, run_interp(scheduled, args), "interpreter")

    fresh = Schedule(original)
    sch.trace.apply_to(fresh)
    tir.assert_structural_equal(fresh.func, scheduled)
    again = Schedule(original)
    Trace.from_json(sch.trace.to_json()).apply_to(again)
    tir.assert_structural_equal(again.func, scheduled)

    if llvm:
        assert_outputs_close(original, expected, run_llvm(scheduled, args), "LLVM")


@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_random_schedule_is_refused_or_correct(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(EXAMPLE_NAMES), label="example")
    original = KERNELS[name]
    # Sampling primitives draw from the schedule's own generator: seed it from hypothesis.
    sch = Schedule(original, seed=data.draw(st.integers(0, 2**16), label="seed"))
    changed = False
    for _ in range(data.draw(st.integers(1, MAX_STEPS), label="steps")):
        kind = data.draw(st.sampled_from(PRIMITIVE_CHOICES), label="primitive")
        changed |= apply_step(sch, kind, data)
    llvm = changed and (ALWAYS_LLVM or data.draw(st.integers(0, 4), label="llvm") == 0)
    check_result(sch, original, llvm)


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_examples_schedule_unchanged_without_primitives(name: str) -> None:
    """The harness itself: an empty schedule replays to the original program."""
    original = KERNELS[name]
    sch = Schedule(original)
    check_result(sch, original, llvm=False)
    assert sch.func is original


# ---------------------------------------------------------------- regressions the random test found

SCALE_N = """
@T.prim_func
def scale_n(a: T.handle, n: T.int32):
    A = T.match_buffer(a, (n,), "float32")
    for i in range(n):
        with T.block("B"):
            vi = T.spatial_axis(n, i)
            A[vi] = A[vi] * 2.0
"""


def test_split_refuses_factors_that_lose_iterations() -> None:
    original = KERNELS["matmul"]
    sch = Schedule(original)
    i, _, _ = sch.get_loops(sch.get_block("C"))
    rule = (
        r"split: loop i: the factors \[1, 1\] multiply to 1, less than the loop's extent 16: iterations would be lost"
    )
    with pytest.raises(ScheduleError, match=rule):
        sch.split(i, [1, 1])
    assert sch.func is original


def test_split_of_a_symbolic_loop_needs_an_inferred_factor() -> None:
    original = tir.parse(SCALE_N)
    sch = Schedule(original)
    (i,) = sch.get_loops(sch.get_block("B"))
    with pytest.raises(
        ScheduleError, match=r"split: loop i: the factors \[4, 8\] multiply to 32, which may be less than the loop's"
    ):
        sch.split(i, [4, 8])
    assert sch.func is original


def test_parallel_loop_of_one_iteration_builds() -> None:
    original = KERNELS["matmul"]
    sch = Schedule(original)
    i, _, _ = sch.get_loops(sch.get_block("C"))
    _, inner = sch.split(i, [16, 1])
    sch.parallel(inner)  # one iteration: nothing to race with (lowering used to refuse it)
    check_result(sch, original, llvm=True)


@T.script
def neighbour_sum(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    S = T.alloc_buffer((64,), "float32")
    for j in range(64):
        with T.block("X"):
            vj = T.spatial_axis(64, j)
            S[vj] = A[vj] * 2.0
        with T.block("Y"):
            vj = T.spatial_axis(64, j)
            B[vj] = S[vj] + S[T.max(vj - 1, 0)]


def test_parallel_refuses_scratch_read_across_iterations() -> None:
    """S is used only under the loop, but iteration j reads what iteration j - 1 wrote: the
    threads raced (a wrong LLVM result) when S counted as per-iteration scratch."""
    sch = Schedule(neighbour_sum)
    (j,) = sch.get_loops(sch.get_block("X"))
    with pytest.raises(ScheduleError, match=r"parallel: loop j: blocks \['X', 'Y'\] under the loop share buffer 'S'"):
        sch.parallel(j)
    assert sch.func is neighbour_sum


def test_parallel_refuses_a_reduction_into_scratch_under_the_loop() -> None:
    """row_sum accumulates across the iterations of its reduction loop: not a scratch tile that
    each iteration of j writes before reading (lowering refused the build)."""
    original = KERNELS["softmax"]
    sch = Schedule(original)
    _, j = sch.get_loops(sch.get_block("normalize"))
    sch.compute_at(sch.get_block("row_sum"), j)
    func = sch.func
    with pytest.raises(ScheduleError, match=r"parallel: loop j: cannot prove that different iterations run different"):
        sch.parallel(j)
    assert sch.func is func


def test_compute_at_refuses_to_break_a_parallel_loop() -> None:
    """The same program, reached by parallel first: compute_at now rechecks the parallel loop."""
    original = KERNELS["softmax"]
    sch = Schedule(original)
    _, j = sch.get_loops(sch.get_block("normalize"))
    sch.parallel(j)
    func = sch.func
    rule = r"compute_at: block 'row_sum': the block would run under the parallel loop j, whose iterations would then"
    with pytest.raises(ScheduleError, match=rule):
        sch.compute_at(sch.get_block("row_sum"), j)
    assert sch.func is func
    # and sampling does not offer it as a location
    assert j.loop_var not in compute_location_candidates(sch.func, "row_sum")


def test_compute_at_under_a_parallel_loop_when_iterations_stay_independent() -> None:
    original = KERNELS["matmul_relu"]
    sch = Schedule(original)
    i, _ = sch.get_loops(sch.get_block("D"))
    sch.parallel(i)
    sch.compute_at(sch.get_block("C"), i)  # each iteration computes its own row of C
    check_result(sch, original, llvm=True)


# ---------------------------------------------------------------- moving and inlining blocks (issue 17 A, C)
#
# Random sequences of the primitives that move blocks, merge them and add caches around them,
# on small kernels shaped after the defects these primitives had: a padding consumer wider than
# its producer, a strided or clamped gather, a reduction over a produced row, a stencil over a
# reduction, a concatenation, a tiled layout read back as rows and reshaped (affine reads).
# Every accepted step must give a program that verifies, prints and parses back, and computes
# what the original computes.


@T.script
def _pad_1d(A: T.Buffer((6,), "float32"), P: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((6,), "float32")
    for i in range(6):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi] * 2.0
    for i in range(8):
        with T.block("P"):
            vi = T.remap("S", i)
            P[vi] = T.if_then_else(1 <= vi and vi < 7, B[vi - 1], T.float32(0))


@T.script
def _gathers(A: T.Buffer((31,), "float32"), B: T.Buffer((10,), "float32"), C: T.Buffer((12,), "float32")):
    R = T.alloc_buffer((31,), "float32")
    for i in range(31):
        with T.block("R"):
            vi = T.spatial_axis(31, i)
            R[vi] = A[30 - vi] + 1.0
    for i in range(10):
        with T.block("B"):
            vi = T.spatial_axis(10, i)
            B[vi] = R[vi * 3 + 1]
    for i in range(12):
        with T.block("C"):
            vi = T.spatial_axis(12, i)
            C[vi] = R[T.min(vi, 7)] * 2.0


@T.script
def _row_sum_stencil(A: T.Buffer((9, 8), "float32"), D: T.Buffer((8,), "float32")):
    P = T.alloc_buffer((9, 8), "float32")
    S = T.alloc_buffer((9,), "float32")
    for i, j in T.grid(9, 8):
        with T.block("P"):
            vi, vj = T.remap("SS", i, j)
            P[vi, vj] = A[vi, vj] * 2.0
    for i, k in T.grid(9, 8):
        with T.block("S"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                S[vi] = 0.0
            S[vi] += P[vi, vk]
    for i in range(8):
        with T.block("D"):
            vi = T.remap("S", i)
            D[vi] = S[vi] + S[vi + 1]


@T.script
def _concat(A: T.Buffer((5, 6), "float32"), B: T.Buffer((7, 6), "float32"), C: T.Buffer((12, 6), "float32")):
    for i, j in T.grid(12, 6):
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = T.if_then_else(vi < 5, A[T.min(vi, 4), vj], B[T.max(vi - 5, 0), vj])


@T.script
def _small_matmul(A: T.Buffer((10, 7), "float32"), B: T.Buffer((7, 12), "float32"), C: T.Buffer((10, 12), "float32")):
    for i, j, k in T.grid(10, 12, 7):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]


@T.script
def _tiles_reshaped(A: T.Buffer((12, 12), "float32"), D: T.Buffer((11, 11), "float32")):
    B = T.alloc_buffer((3, 3, 4, 4), "float32")
    C = T.alloc_buffer((11, 11), "float32")
    for i0, j0, i1, j1 in T.grid(3, 3, 4, 4):
        with T.block("B"):
            vi, vj, vm, vn = T.remap("SSSS", i0, j0, i1, j1)
            B[vi, vj, vm, vn] = A[vi * 4 + vm, vj * 4 + vn] * 2.0
    for i, j in T.grid(11, 11):
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = B[vi // 4, vj // 4, vi % 4, vj % 4] + 1.0
    for f in range(121):
        with T.block("D"):
            vf = T.spatial_axis(121, f)
            D[vf // 11, vf % 11] = T.max(C[vf // 11, vf % 11], 0.0)


LOCATION_KERNELS = {
    "tiles_reshaped": _tiles_reshaped,
    "pad_1d": _pad_1d,
    "gathers": _gathers,
    "row_sum_stencil": _row_sum_stencil,
    "concat": _concat,
    "small_matmul": _small_matmul,
}
LOCATION_EXAMPLES = int(os.environ.get("TIR_LOCATION_SCHEDULES", "60"))


def act_blockize(sch: Schedule, data: st.DataObject) -> Callable[[], Any] | None:
    loop = draw_loop(sch, data)
    return None if loop is None else lambda: sch.blockize(loop)


def act_pad_einsum(sch: Schedule, data: st.DataObject) -> Callable[[], Any] | None:
    block = draw_block(sch, data)
    count = len(sch.get(block).iter_vars)
    padding = [data.draw(st.sampled_from([1, 1, 2, 4, 8]), label="pad multiple") for _ in range(count)]
    return lambda: sch.pad_einsum(block, padding)


ACTIONS["blockize"] = act_blockize
ACTIONS["pad_einsum"] = act_pad_einsum

#: Weighted towards the primitives under test; split, blockize and caches set the stage.
LOCATION_CHOICES = [
    *["compute_at", "reverse_compute_at", "compute_inline", "reverse_compute_inline"] * 3,
    *["cache_read", "cache_write", "blockize", "pad_einsum", "decompose_reduction", "split"],
]


@settings(
    max_examples=LOCATION_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
def test_random_location_and_inline_sequences(data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(sorted(LOCATION_KERNELS)), label="kernel")
    original = LOCATION_KERNELS[name]
    sch = Schedule(original, seed=data.draw(st.integers(0, 2**16), label="seed"))
    changed = False
    for _ in range(data.draw(st.integers(1, MAX_STEPS), label="steps")):
        kind = data.draw(st.sampled_from(LOCATION_CHOICES), label="primitive")
        changed |= apply_step(sch, kind, data)
    llvm = changed and (ALWAYS_LLVM or data.draw(st.integers(0, 3), label="llvm") == 0)
    check_result(sch, original, llvm)
