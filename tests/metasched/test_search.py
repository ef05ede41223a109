"""The search on a hand-written sketch: candidates, mutators, evolutionary and replay strategies.

These tests use neither the design-space rules nor the measurer: a small sketch (sampled tiles of
a matmul) and an analytical "latency" keep them fast and deterministic.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

import tir
import tir.script as T
from metasched.scheduler import Gradient, RoundRobin, TaskProgress
from metasched.search import (
    EvolutionarySearch,
    MutateCategorical,
    MutateTileSize,
    Rejected,
    ReplaySearch,
    make_candidate,
    sampling_positions,
    sketch_of,
)
from metasched.task import Task, count_flops, extract_tasks
from tir.schedule import Schedule, Trace


@T.script
def matmul(A: T.Buffer((64, 48), "float32"), B: T.Buffer((48, 32), "float32"), C: T.Buffer((64, 32), "float32")):
    for i, j, k in T.grid(64, 32, 48):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]


@T.script
def add_relu(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32")):
    for i, j in T.grid(16, 16):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = T.max(A[vi, vj] + 1.0, 0.0)


def tiling_sketch() -> Trace:
    """Tiles of i, j, k sampled; an unroll depth sampled; the program reordered to i0 j0 k0 i1 j1 k1."""
    sch = Schedule(matmul, seed=0)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, sch.sample_perfect_tile(i, 2, 16))
    j0, j1 = sch.split(j, sch.sample_perfect_tile(j, 2, 16))
    k0, k1 = sch.split(k, sch.sample_perfect_tile(k, 2, 16))
    sch.reorder(i0, j0, k0, i1, j1, k1)
    depth = sch.sample_categorical([0, 16, 64], [1, 1, 1])
    sch.annotate(block, "pragma_auto_unroll_max_step", depth)
    return sch.trace


def fake_seconds(candidate) -> float:  # noqa: ANN001
    """A deterministic "latency": best with a 16-wide inner j tile and an 8-high i tile."""
    sizes = [candidate.decisions[pos] for pos in sorted(candidate.decisions)]
    return 1.0 + abs(sizes[0][1] - 8) + abs(sizes[1][1] - 16) + 0.1 * sizes[2][1]


class OracleModel:
    """A cost model that knows the fake latency (what a perfectly trained model would predict)."""

    def update(self, task_key, features, seconds) -> None:  # noqa: ANN001
        pass

    def predict(self, task_key, features) -> np.ndarray:  # noqa: ANN001
        return np.array([-f for f in features], dtype=float)


def test_count_flops_of_a_matmul_counts_multiply_add() -> None:
    assert count_flops(matmul) == 2 * 64 * 32 * 48
    assert count_flops(add_relu) == 2 * 16 * 16


def test_extract_tasks_dedupes_structurally_equal_functions() -> None:
    mod = tir.IRModule({"a": matmul, "b": matmul.replace(name="b"), "c": add_relu})
    tasks = extract_tasks(mod, "llvm")
    assert sorted(t.weight for t in tasks) == [1.0, 2.0]
    assert all(isinstance(t, Task) and str(t.target) == "llvm" for t in tasks)


def test_candidate_replays_sketch_with_given_and_fresh_decisions() -> None:
    sketch = tiling_sketch()
    positions = sampling_positions(sketch)
    assert len(positions) == 4
    fixed = {positions[0]: [8, 8], positions[1]: [2, 16], positions[2]: [6, 8], positions[3]: 1}
    candidate = make_candidate(matmul, sketch, 0, fixed, [], seed=1)
    assert candidate.decisions == fixed
    loops = [loop.extent.value for loop in _loops(candidate.func)]
    assert loops == [8, 2, 6, 8, 16, 8]
    fresh = make_candidate(matmul, sketch, 0, None, [], seed=2)
    assert set(fresh.decisions) == set(positions)
    # The full trace replays to the same program, and names its sketch.
    again = Schedule(matmul)
    fresh.trace.apply_to(again)
    assert tir.structural_equal(again.func, fresh.func)
    assert sketch_of(fresh.trace, [sketch]) == (0, fresh.decisions)


def test_candidate_with_an_impossible_decision_is_rejected_with_its_stage() -> None:
    sketch = tiling_sketch()
    bad = {sampling_positions(sketch)[0]: [5, 13]}
    with pytest.raises(Rejected) as info:
        make_candidate(matmul, sketch, 0, bad, [], seed=0)
    assert info.value.stage == "replay"


def test_tile_mutator_keeps_the_product_and_the_innermost_bound() -> None:
    sketch = tiling_sketch()
    rng = random.Random(0)
    decisions = make_candidate(matmul, sketch, 0, None, [], seed=3).decisions
    for _ in range(200):
        mutated = MutateTileSize().mutate(sketch, decisions, rng)
        assert mutated is not None
        changed = [pos for pos in decisions if mutated[pos] != decisions[pos]]
        assert len(changed) == 1
        sizes = mutated[changed[0]]
        assert np.prod(sizes) == np.prod(decisions[changed[0]]) and sizes[-1] <= 16
        decisions = mutated
    categorical = MutateCategorical().mutate(sketch, decisions, rng)
    assert categorical is not None and categorical != decisions


def test_categorical_mutation_resamples_the_tiles_of_a_loop_it_split() -> None:
    """A register tile of 3 or 5 rows (sample_categorical) splits i; the tiles of what is left
    were sampled for that loop, so changing the tile resamples them (and only them): every
    mutant replays."""
    sch = Schedule(matmul, seed=0)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    rows = sch.sample_categorical([3, 5], [1, 1])
    i_rest, i_tile = sch.split(i, [None, rows])
    i0, i1 = sch.split(i_rest, sch.sample_perfect_tile(i_rest, 2, 16))
    j0, j1 = sch.split(j, sch.sample_perfect_tile(j, 2, 16))
    sch.reorder(i0, j0, i1, k, i_tile, j1)
    sketch = sch.trace
    categorical, i_tiles, j_tiles = sampling_positions(sketch)
    rng = random.Random(0)
    for seed in range(6):
        decisions = make_candidate(matmul, sketch, 0, None, [], seed=seed).decisions
        mutated = MutateCategorical().mutate(sketch, decisions, rng)
        assert mutated is not None and mutated[categorical] != decisions[categorical]
        assert mutated[i_tiles] is None and mutated[j_tiles] == decisions[j_tiles]
        replayed = make_candidate(matmul, sketch, 0, mutated, [], seed=seed)
        assert np.prod(replayed.decisions[i_tiles]) == -(-64 // [3, 5][mutated[categorical]])


def _loops(func: tir.PrimFunc) -> list[tir.For]:
    found: list[tir.For] = []
    node = func.body.block.body
    while isinstance(node, tir.For):
        found.append(node)
        node = node.body
    return found


def _run_search(strategy_cls, model, seed: int, rounds: int = 4, batch: int = 8):  # noqa: ANN001, ANN202
    task = Task.from_func(matmul)
    options = {"population": 24} if strategy_cls is EvolutionarySearch else {}
    search = strategy_cls(task, [tiling_sketch()], [], model, seed=seed, **options)
    if model is not None:
        search.score = lambda cands: [setattr(c, "score", -fake_seconds(c)) for c in cands]  # type: ignore[method-assign]
    seen: list[tuple] = []
    best = float("inf")
    for _ in range(rounds):
        candidates = search.next_batch(batch)
        assert len({c.hash for c in candidates}) == len(candidates)
        times = [fake_seconds(c) for c in candidates]
        search.notify(candidates, times)
        seen += [c.key for c in candidates]
        best = min([best, *times])
    return seen, best


def test_evolutionary_search_is_deterministic_and_never_measures_twice() -> None:
    first, _ = _run_search(EvolutionarySearch, OracleModel(), seed=5)
    second, _ = _run_search(EvolutionarySearch, OracleModel(), seed=5)
    assert first == second
    assert len(set(first)) == len(first)


def test_a_good_model_makes_evolution_beat_random_replay() -> None:
    evolved = [_run_search(EvolutionarySearch, OracleModel(), seed=s)[1] for s in range(3)]
    replayed = [_run_search(ReplaySearch, None, seed=s)[1] for s in range(3)]
    assert np.mean(evolved) < np.mean(replayed)


def test_task_schedulers_cover_every_task_first_then_follow_the_gain() -> None:
    tasks = [TaskProgress(weight=1.0), TaskProgress(weight=3.0)]
    gradient = Gradient()
    assert gradient.pick(tasks) == 0
    tasks[0].history.append((8, 1.0))
    assert gradient.pick(tasks) == 1
    tasks[1].history.append((8, 1.0))
    assert gradient.pick(tasks) == 1  # same latency, three times the weight
    rr = RoundRobin()
    assert [rr.pick(tasks) for _ in range(3)] == [0, 1, 0]
    tasks[0].done = True
    assert rr.pick(tasks) == 1


def test_candidates_made_in_worker_processes_equal_those_made_here() -> None:
    """CandidateMaker: the same candidates (or rejections) as make_candidate in this process for
    the same seeds; a worker that dies makes the maker fall back to this process."""
    from metasched.search.parallel import CandidateMaker, make_here
    from metasched.space import SpaceGenerator

    space = SpaceGenerator()
    sketches = space.generate(matmul, "llvm")
    postprocs = list(space.postprocs_for("llvm"))
    jobs = [(seed % len(sketches), None, seed, False) for seed in range(8)]
    here = [make_here(matmul, sketches, postprocs, job) for job in jobs]

    def outcome(made: object) -> object:
        return getattr(made, "hash", None) or (made.stage, made.reason)  # type: ignore[attr-defined]

    with CandidateMaker(workers=2) as maker:
        there = maker.make_many(matmul, sketches, postprocs, jobs)
        assert [outcome(m) for m in there] == [outcome(m) for m in here]
        assert all(tir.structural_equal(a.func, b.func) for a, b in zip(here, there) if hasattr(a, "func"))
        maker._pool[0].process.kill()
        maker._pool[0].process.wait()
        again = maker.make_many(matmul, sketches, postprocs, jobs)
        assert [outcome(m) for m in again] == [outcome(m) for m in here]


def test_lazy_candidates_once_finished_are_the_checked_candidates() -> None:
    """A lazy make (proofs left out) then ``finish_many`` gives the same programs and rejections
    as checked makes, in worker processes and here; unfinished lazy candidates say so."""
    from metasched.search.parallel import CandidateMaker, make_here
    from metasched.space import SpaceGenerator

    space = SpaceGenerator()
    sketches = space.generate(matmul, "llvm")
    postprocs = list(space.postprocs_for("llvm"))
    checked = [make_here(matmul, sketches, postprocs, (s % len(sketches), None, s, False)) for s in range(12)]
    for workers in (1, 2):
        with CandidateMaker(workers=workers) as maker:
            lazy = maker.make_many(matmul, sketches, postprocs, [(s % len(sketches), None, s, True) for s in range(12)])
            made = [m for m in lazy if not isinstance(m, Rejected)]
            assert made and not any(m.checked for m in made)
            finished = iter(maker.finish_many(matmul, sketches, postprocs, made))
            results = [m if isinstance(m, Rejected) else next(finished) for m in lazy]
        for want, got in zip(checked, results):
            if isinstance(want, Rejected):
                assert isinstance(got, Rejected), got
                continue
            assert not isinstance(got, Rejected), (got.stage, got.reason)
            assert got.checked and got.hash == want.hash
            assert tir.structural_equal(got.func, want.func)
