"""Sampling primitives: sample_perfect_tile, sample_categorical, sample_compute_location (and
apply_compute_location): valid and reproducible samples, decisions recorded, replayed, changed
and saved in JSON, and one negative test per precondition."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from schedule_testing import check_replay, check_schedule

import tir
import tir.script as T
from tir.schedule import Schedule, ScheduleError, Trace
from tir.schedule.primitives.compute_location import compute_at
from tir.schedule.primitives.inline import compute_inline
from tir.schedule.primitives.sampling import (
    INLINE_LOCATION,
    ROOT_LOCATION,
    count_factorizations,
    sample_perfect_tile,
)


@T.script
def matmul(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")):
    for i, j, k in T.grid(16, 16, 16):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]


@T.script
def pipeline(A: T.Buffer((16, 8), "float32"), C: T.Buffer((16, 8), "float32")):
    B = T.alloc_buffer((16, 8), "float32")
    for i, j in T.grid(16, 8):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(16, 8):
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = B[vi, vj] + 1.0


@T.script
def symbolic(a: T.handle, n: T.int32):
    A = T.match_buffer(a, (n,), "float32")
    for i in range(n):
        with T.block("A"):
            vi = T.remap("S", i)
            A[vi] = 0.0


def _tile_decisions(sch: Schedule) -> list[list[int]]:
    return [inst.decision for inst in sch.trace if inst.kind == "sample_perfect_tile"]


# ---------------------------------------------------------------- sample_perfect_tile


def test_perfect_tile_then_split(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(matmul, seed=7)
    i, j, _ = sch.get_loops(sch.get_block("C"))
    tiles = sch.sample_perfect_tile(i, n=3, max_innermost_factor=4)
    assert tiles[0].value * tiles[1].value * tiles[2].value == 16 and tiles[2].value <= 4
    sch.split(i, tiles)
    sch.split(j, sch.sample_perfect_tile(j, n=2))
    check_schedule(sch, matmul, golden, "schedule/sampling_perfect_tile_split")


def test_perfect_tile_samples_are_valid_and_uniform() -> None:
    rng = random.Random(0)
    # 16 = a * b with b <= 16: five factorizations, each about a fifth of the time.
    counts = Counter(tuple(sample_perfect_tile(rng, 16, 2, 16)) for _ in range(2000))
    assert set(counts) == {(16, 1), (8, 2), (4, 4), (2, 8), (1, 16)}
    assert all(300 < c < 500 for c in counts.values()), counts
    # Three factors of 48, innermost at most 4: every one of them shows up, no other does.
    valid = {(a, b, c) for a in range(1, 49) for b in range(1, 49) for c in range(1, 5) if a * b * c == 48}
    seen = Counter(tuple(sample_perfect_tile(rng, 48, 3, 4)) for _ in range(3000))
    assert set(seen) == valid
    assert count_factorizations(48, 3) == 45 and count_factorizations(1, 0) == 1 and count_factorizations(2, 0) == 0


def test_same_seed_same_samples_and_different_seeds_differ() -> None:
    def run(seed: int) -> list[list[int]]:
        sch = Schedule(matmul, seed=seed)
        for loop in sch.get_loops(sch.get_block("C")):
            sch.sample_perfect_tile(loop, n=4, max_innermost_factor=8)
        return _tile_decisions(sch)

    assert run(3) == run(3)
    assert len({str(run(seed)) for seed in range(8)}) > 1


def test_perfect_tile_decision_is_used_and_recorded() -> None:
    sch = Schedule(matmul)
    i, _, _ = sch.get_loops(sch.get_block("C"))
    tiles = sch.sample_perfect_tile(i, n=2, decision=[2, 8])
    assert [t.value for t in tiles] == [2, 8]
    assert sch.trace.instructions[-1].decision == [2, 8]
    assert "decision=[2, 8]" in sch.trace.as_python()


def test_trace_with_a_changed_tile_decision_replays_to_the_new_tiling() -> None:
    sch = Schedule(matmul, seed=1)
    i, _, _ = sch.get_loops(sch.get_block("C"))
    sch.split(i, sch.sample_perfect_tile(i, n=2, max_innermost_factor=16))
    position = next(p for p, inst in enumerate(sch.trace) if inst.kind == "sample_perfect_tile")
    mutated = sch.trace.with_decision(position, [4, 4])
    fresh = Schedule(matmul)
    mutated.apply_to(fresh)
    expected = Schedule(matmul)
    expected.split(expected.get_loops(expected.get_block("C"))[0], [4, 4])
    tir.assert_structural_equal(fresh.func, expected.func)
    assert _tile_decisions(fresh) == [[4, 4]]
    # Through JSON too, and the saved trace keeps the decision.
    again = Schedule(matmul)
    loaded = Trace.from_json(mutated.to_json())
    assert loaded.decisions == mutated.decisions == {position: [4, 4]}
    loaded.apply_to(again)
    tir.assert_structural_equal(again.func, expected.func)


def test_replay_without_decisions_samples_anew_reproducibly() -> None:
    sch = Schedule(matmul, seed=5)
    for loop in sch.get_loops(sch.get_block("C")):
        sch.sample_perfect_tile(loop, n=3)
    positions = list(sch.trace.decisions)
    cleared = {p: None for p in positions}
    first, second = Schedule(matmul, seed=11), Schedule(matmul, seed=11)
    sch.trace.apply_to(first, decisions=cleared)
    sch.trace.apply_to(second, decisions=cleared)
    assert _tile_decisions(first) == _tile_decisions(second)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"n": 2, "decision": [4, 8]}, r"the decision \[4, 8\] multiplies to 32, the loop extent is 16"),
        ({"n": 3, "decision": [4, 4]}, r"the decision \[4, 4\] has 2 factors, n is 3"),
        ({"n": 2, "max_innermost_factor": 4, "decision": [2, 8]}, "innermost factor 8 above max_innermost_factor 4"),
        ({"n": 2, "decision": [-4, -4]}, "has a factor below 1"),
        ({"n": 2, "decision": [4.0, 4]}, "the decision must be a list of integers"),
        ({"n": 0}, "n must be a positive integer, got 0"),
        ({"n": 2, "max_innermost_factor": 0}, "max_innermost_factor must be at least 1"),
        ({"n": 1, "max_innermost_factor": 8}, "no factorization into 1 factor has its innermost at most 8"),
    ],
)
def test_perfect_tile_refuses(kwargs: dict, message: str) -> None:  # type: ignore[type-arg]
    sch = Schedule(matmul)
    i, _, _ = sch.get_loops(sch.get_block("C"))
    length = len(sch.trace)
    with pytest.raises(ScheduleError, match=message):
        sch.sample_perfect_tile(i, **kwargs)
    assert len(sch.trace) == length and sch.func is matmul


def test_perfect_tile_of_a_symbolic_extent_leaves_it_to_split() -> None:
    # As TVM: [-1, 1, ...]; split reads the sampled -1 as the inferred factor.
    sch = Schedule(symbolic, debug=True)
    (i,) = sch.get_loops(sch.get_block("A"))
    sizes = sch.sample_perfect_tile(i, n=3)
    assert [size.value for size in sizes] == [-1, 1, 1]
    outer, _, _ = sch.split(i, sizes)
    assert "for i_0, i_1, i_2 in T.grid(n, 1, 1):" in sch.func.script()
    check_replay(sch, symbolic)
    other = Schedule(symbolic)
    (j,) = other.get_loops(other.get_block("A"))
    with pytest.raises(ScheduleError, match=r"the decision must be \[-1, 1\]"):
        other.sample_perfect_tile(j, n=2, decision=[2, 1])


# ---------------------------------------------------------------- sample_categorical


def test_categorical_follows_the_probabilities_and_the_seed() -> None:
    sch = Schedule(matmul, seed=2)
    values = [sch.sample_categorical([0, 16, 64], [0.5, 0.25, 0.25]).value for _ in range(800)]
    counts = Counter(values)
    assert 330 < counts[0] < 470 and 140 < counts[16] < 260 and 140 < counts[64] < 260
    other = Schedule(matmul, seed=2)
    assert [other.sample_categorical([0, 16, 64], [0.5, 0.25, 0.25]).value for _ in range(800)] == values
    never = Schedule(matmul, seed=2)
    assert {never.sample_categorical([1, 2], [0.0, 1.0]).value for _ in range(50)} == {2}


def test_categorical_decision_replays_and_changes() -> None:
    sch = Schedule(matmul, seed=0)
    value = sch.sample_categorical([4, 8, 16], [1.0, 1.0, 1.0], decision=2)
    assert value.value == 16
    assert sch.trace.as_python() == "v0 = sch.sample_categorical([4, 8, 16], [1.0, 1.0, 1.0], decision=2)"
    fresh = Schedule(matmul)
    sch.trace.with_decision(0, 0).apply_to(fresh)
    assert fresh.trace.instructions[0].decision == 0
    assert Trace.from_json(sch.trace.to_json()).decisions == {0: 2}


@pytest.mark.parametrize(
    "args,message",
    [
        (([], []), "needs at least one candidate"),
        (([1, 2], [1.0]), r"2 candidates but 1 probabilities"),
        (([1, 2], [1.0, -1.0]), "probabilities must be finite, non-negative and not all zero"),
        (([1, 2], [0.0, 0.0]), "probabilities must be finite, non-negative and not all zero"),
        (([1.5, 2], [1.0, 1.0]), "candidates must be integers"),
        (([1, 2], [1.0, 1.0], 2), r"the decision must be an index in \[0, 2\), got 2"),
    ],
)
def test_categorical_refuses(args: tuple, message: str) -> None:  # type: ignore[type-arg]
    sch = Schedule(matmul)
    with pytest.raises(ScheduleError, match=message):
        sch.sample_categorical(*args)
    assert len(sch.trace) == 0


# ---------------------------------------------------------------- sample_compute_location


def test_compute_location_sample_and_apply(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(pipeline, seed=0)
    block = sch.get_block("B")
    location = sch.sample_compute_location(block, decision=3)  # scope loops: B's i, j, then C's i, j
    sch.apply_compute_location(block, location)
    check_schedule(sch, pipeline, golden, "schedule/sampling_compute_location")
    consumer_j = sch.get_loops(sch.get_block("C"))[1]
    assert location.loop_var is sch.get_loop_node(consumer_j).loop_var


def _apply_decision(decision: int) -> Schedule:
    sch = Schedule(pipeline)
    block = sch.get_block("B")
    sch.apply_compute_location(block, sch.sample_compute_location(block, decision=decision))
    return sch


def test_compute_location_decisions_mean_loop_root_inline() -> None:
    consumer = pipeline.body.block.body.stmts[1]  # type: ignore[attr-defined]
    i, j = consumer.loop_var, consumer.body.loop_var
    tir.assert_structural_equal(_apply_decision(2).func, compute_at(pipeline, "B", i))
    tir.assert_structural_equal(_apply_decision(3).func, compute_at(pipeline, "B", j))
    tir.assert_structural_equal(_apply_decision(-1).func, pipeline)
    tir.assert_structural_equal(_apply_decision(-2).func, compute_inline(pipeline, "B"))
    root = Schedule(pipeline)
    assert root.sample_compute_location(root.get_block("B"), decision=-1).loop_var is ROOT_LOCATION
    inline = Schedule(pipeline)
    assert inline.sample_compute_location(inline.get_block("B"), decision=-2).loop_var is INLINE_LOCATION


def test_compute_location_sampling_is_reproducible_and_covers_every_choice() -> None:
    def decisions(seed: int) -> list[int]:
        sch = Schedule(pipeline, seed=seed)
        block = sch.get_block("B")
        for _ in range(30):
            sch.sample_compute_location(block)
        return [inst.decision for inst in sch.trace if inst.kind == "sample_compute_location"]

    assert decisions(4) == decisions(4)
    assert set(decisions(4)) == {2, 3, -1, -2}  # B's own loops 0, 1 are refused


@pytest.mark.parametrize("new_decision", [2, -1, -2])
def test_compute_location_trace_replays_with_a_changed_decision(new_decision: int) -> None:
    sch = _apply_decision(3)
    position = next(p for p, inst in enumerate(sch.trace) if inst.kind == "sample_compute_location")
    mutated = Trace.from_json(sch.trace.with_decision(position, new_decision).to_json())
    fresh = Schedule(pipeline)
    mutated.apply_to(fresh)
    tir.assert_structural_equal(fresh.func, _apply_decision(new_decision).func)


def test_compute_location_refuses_a_bad_decision() -> None:
    sch = Schedule(pipeline)
    block = sch.get_block("B")
    with pytest.raises(ScheduleError, match=r"a loop position in \[0, 4\) of the block's scope, -1 .* or -2 .*; got 4"):
        sch.sample_compute_location(block, decision=4)
    with pytest.raises(
        ScheduleError, match="the decision 1 is refused: compute_at: block 'B': the block is already under"
    ):
        sch.sample_compute_location(block, decision=1)
    with pytest.raises(ScheduleError, match="got 'root'"):
        sch.sample_compute_location(block, decision="root")  # type: ignore[arg-type]
    assert sch.func is pipeline


def test_compute_location_refuses_inline_when_inlining_is_illegal() -> None:
    sch = Schedule(matmul)
    block = sch.get_block("C")
    # C has no consumer (no loop candidate) and, as an output, cannot be inlined.
    with pytest.raises(ScheduleError, match=r"the decision -2 is refused: compute_inline: .*"):
        sch.sample_compute_location(block, decision=-2)
    assert sch.sample_compute_location(block).loop_var is ROOT_LOCATION


def test_apply_compute_location_refuses_what_compute_at_refuses() -> None:
    sch = Schedule(pipeline)
    block = sch.get_block("B")
    own_loop = sch.get_loops(block)[0]
    with pytest.raises(ScheduleError, match="compute_at"):
        sch.apply_compute_location(block, own_loop)
    with pytest.raises(ScheduleError, match="expected a location handle"):
        sch.apply_compute_location(block, None)  # type: ignore[arg-type]
    assert sch.func is pipeline
