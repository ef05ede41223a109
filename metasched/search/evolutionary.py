"""Search strategies: which candidates of a task's design space to measure next.

``EvolutionarySearch`` (the default) keeps a population of candidates, scores them with the cost
model, breeds the fitter ones by mutating their decisions, and hands out the best-scored
candidates not yet measured, plus a few random ones (epsilon-greedy) so a wrong model cannot
starve exploration. ``ReplaySearch`` only samples afresh (no model): the baseline.

Both are deterministic for a seed and the same measurements: every random choice comes from one
``random.Random(seed)`` and candidates are seeded from it.
"""

from __future__ import annotations

import math
import random
from collections import Counter, OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from metasched.search.candidate import (
    Candidate,
    Rejected,
    decision_key,
    sampling_positions,
    sketch_of,
)
from metasched.search.mutators import Mutator, default_mutators
from metasched.task import Task
from tir.schedule import Trace

__all__ = ["EvolutionarySearch", "ReplaySearch", "SearchStrategy"]


class SearchStrategy:
    """What both strategies share: making candidates, remembering what was measured, counting rejects."""

    def __init__(
        self,
        task: Task,
        sketches: Sequence[Trace],
        postprocs: Sequence[Any],
        cost_model: Any = None,
        seed: int = 0,
        maker: Any = None,
    ) -> None:
        if not sketches:
            raise ValueError(f"task {task.name!r}: the design space has no sketch")
        self.task = task
        self.sketches = list(sketches)
        self.postprocs = list(postprocs)
        self.cost_model = cost_model
        self.rng = random.Random(seed)
        self.measured_hashes: set[int] = set()
        self.measured_keys: set[Any] = set()
        self.measured: list[tuple[float, Candidate]] = []  # (seconds, candidate) of valid runs
        self.rejects: Counter[str] = Counter()
        self.made = 0
        self._positions = [frozenset(sampling_positions(sketch)) for sketch in self.sketches]
        # Candidates (or rejections) by their full decisions: mutation often proposes a decision
        # set made before (a fifth of the mutants of a 64-trial tune), and making one -- replay,
        # postprocessors, validator -- is most of the search's time.
        self._made: OrderedDict[tuple[Any, ...], Candidate | Rejected] = OrderedDict()
        self.maker = maker  # a CandidateMaker (metasched.search.parallel); None: made here

    # ---------------------------------------------------------------- making candidates

    MEMO_SIZE = 1024

    def make(self, sketch_index: int, decisions: dict[int, Any] | None) -> Candidate | None:
        """A checked candidate, or None (its reject is counted)."""
        return self.make_many([(sketch_index, decisions)])[0]

    def make_many(
        self, requests: Sequence[tuple[int, dict[int, Any] | None]], lazy: bool = False
    ) -> list[Candidate | None]:
        """``make`` for each (sketch index, decisions), in order; the makes run in the
        ``maker``'s worker processes when it has some. Seeds are drawn here, in order, so the
        results do not depend on where they were made. ``lazy``: unchecked candidates, to be
        ranked only (``make_candidate(lazy=True)``); ``finish_many`` checks the ones to measure."""
        from metasched.search.parallel import Job, make_here

        results: list[Candidate | Rejected | None] = [None] * len(requests)
        jobs: list[Job] = []
        job_positions: list[list[int]] = []  # request positions each job answers
        pending: dict[tuple[Any, ...], int] = {}  # memo key -> its job, within this round
        memo_keys: list[tuple[Any, ...] | None] = []
        for position, (sketch_index, decisions) in enumerate(requests):
            seed = self.rng.getrandbits(31)  # drawn even when remembered: the same sequence either way
            # With every sampling position decided, the seed plays no part: the result is remembered.
            full = decisions is not None and self._positions[sketch_index] <= decisions.keys()
            memo_key = (sketch_index, decision_key(decisions)) if full else None  # type: ignore[arg-type]
            remembered = self._made.get(memo_key) if memo_key is not None else None
            if remembered is not None and (lazy or getattr(remembered, "checked", True)):
                assert memo_key is not None  # remembered only under a key
                self._made.move_to_end(memo_key)
                results[position] = remembered
                continue
            if memo_key is not None and memo_key in pending:
                job_positions[pending[memo_key]].append(position)
                continue
            if memo_key is not None:
                pending[memo_key] = len(jobs)
            jobs.append((sketch_index, decisions, seed, lazy))
            job_positions.append([position])
            memo_keys.append(memo_key)
        if jobs:
            if self.maker is not None:
                made = self.maker.make_many(self.task.func, self.sketches, self.postprocs, jobs)
            else:
                made = [make_here(self.task.func, self.sketches, self.postprocs, job) for job in jobs]
            for result, positions, memo_key in zip(made, job_positions, memo_keys):
                for position in positions:
                    results[position] = result
                if memo_key is not None:
                    self._made[memo_key] = result
                    if len(self._made) > self.MEMO_SIZE:
                        self._made.popitem(last=False)
        out: list[Candidate | None] = []
        for result in results:
            if isinstance(result, Rejected):
                self.rejects[f"{result.stage}: {result.reason}"] += 1
                out.append(None)
            else:
                self.made += 1
                out.append(result)
        return out

    def finish_many(self, candidates: Sequence[Candidate]) -> list[Candidate | None]:
        """Each candidate checked (``finish_candidate``): itself, or the program made again with
        every check when a deferred proof failed, or None (its reject is counted)."""
        from metasched.search.parallel import finish_here

        todo = [c for c in candidates if not c.checked]
        if todo:
            if self.maker is not None:
                finished = self.maker.finish_many(self.task.func, self.sketches, self.postprocs, todo)
            else:
                finished = [finish_here(self.task.func, self.sketches, self.postprocs, c) for c in todo]
            done = {id(c): result for c, result in zip(todo, finished)}
        out: list[Candidate | None] = []
        for candidate in candidates:
            result = candidate if candidate.checked else done[id(candidate)]
            if isinstance(result, Rejected):
                self.rejects[f"{result.stage}: {result.reason}"] += 1
                out.append(None)
            else:
                out.append(result)
        return out

    def sample(self) -> Candidate | None:
        return self.make(self.rng.randrange(len(self.sketches)), None)

    def is_new(self, candidate: Candidate) -> bool:
        return candidate.key not in self.measured_keys and candidate.hash not in self.measured_hashes

    def score(self, candidates: Sequence[Candidate]) -> None:
        """Cost-model scores (higher = faster) onto the candidates that have none yet."""
        todo = [c for c in candidates if c.features is None]
        if self.cost_model is None or not candidates:
            return
        if todo:
            from metasched.cost import extract_features

            for candidate in todo:
                candidate.features = extract_features(candidate.func, self.task.target)
        scores = self.cost_model.predict(self.task.key, [c.features for c in candidates])
        for candidate, value in zip(candidates, np.asarray(scores, dtype=float)):
            candidate.score = float(value) if math.isfinite(value) else -math.inf

    # ---------------------------------------------------------------- results

    def notify(self, candidates: Sequence[Candidate], seconds: Sequence[float | None]) -> None:
        """Measured results of a batch (None: the candidate failed)."""
        for candidate, value in zip(candidates, seconds):
            self.measured_keys.add(candidate.key)
            self.measured_hashes.add(candidate.hash)
            if value is not None:
                self.measured.append((value, candidate))
        self.measured.sort(key=lambda pair: pair[0])

    def warm_start(self, traces_and_seconds: Sequence[tuple[Trace, float | None]]) -> list[Candidate]:
        """Take measured traces (e.g. from the database) as known results; returns the candidates
        remade from them (for the cost model's features)."""
        found = [(sketch_of(trace, self.sketches), value) for trace, value in traces_and_seconds]
        found = [(where, value) for where, value in found if where is not None]
        made = self.make_many([where for where, _ in found])  # type: ignore[misc]
        remade = [candidate for candidate in made if candidate is not None]
        seconds = [value for candidate, (_, value) in zip(made, found) if candidate is not None]
        self.notify(remade, seconds)
        return remade

    def next_batch(self, size: int) -> list[Candidate]:
        raise NotImplementedError

    def _fresh(self, count: int, seen: set[Any], attempts_per: int = 4, lazy: bool = False) -> list[Candidate]:
        """Up to ``count`` new random candidates, not measured and not in ``seen`` (unchecked
        with ``lazy``)."""
        out: list[Candidate] = []
        attempts = 0
        while len(out) < count and attempts < count * attempts_per:
            wanted = min(count - len(out), count * attempts_per - attempts)
            attempts += wanted
            requests = [(self.rng.randrange(len(self.sketches)), None) for _ in range(wanted)]
            for candidate in self.make_many(requests, lazy=lazy):
                if len(out) >= count:
                    break
                if candidate is None or not self.is_new(candidate) or candidate.key in seen:
                    continue
                seen.add(candidate.key)
                out.append(candidate)
        return out


class ReplaySearch(SearchStrategy):
    """Fresh random samples only (TVM's "replay trace")."""

    def next_batch(self, size: int) -> list[Candidate]:
        return self._fresh(size, set())


class EvolutionarySearch(SearchStrategy):
    """Cost-model guided evolution over sampling decisions.

    Per batch: a population of ``population`` candidates (the best measured ones, a share
    ``init_measured_ratio``, and fresh samples), ``generations`` rounds of scoring and mutating
    the fitter ones, then the best-scored unmeasured candidates seen, with a share ``epsilon`` of
    fresh random ones.
    """

    def __init__(
        self,
        task: Task,
        sketches: Sequence[Trace],
        postprocs: Sequence[Any],
        cost_model: Any = None,
        seed: int = 0,
        maker: Any = None,
        population: int = 64,
        generations: int = 2,
        init_measured_ratio: float = 0.25,
        mutate_prob: float = 0.85,
        epsilon: float = 0.1,
        mutators: Sequence[tuple[Mutator, float]] | None = None,
    ) -> None:
        super().__init__(task, sketches, postprocs, cost_model, seed, maker)
        self.population = population
        self.generations = generations
        self.init_measured_ratio = init_measured_ratio
        self.mutate_prob = mutate_prob
        self.epsilon = epsilon
        self.mutators = list(mutators) if mutators is not None else default_mutators()

    def _mutation(self, parent: Candidate) -> dict[int, Any] | None:
        """New decisions for ``parent``'s sketch (up to three mutators tried), or None."""
        mutators = [m for m, _ in self.mutators]
        weights = [w for _, w in self.mutators]
        sketch = self.sketches[parent.sketch_index]
        for _ in range(3):
            mutator = self.rng.choices(mutators, weights=weights)[0]
            decisions = mutator.mutate(sketch, parent.decisions, self.rng)
            if decisions is not None:
                return decisions
        return None

    def _children(self, parents: list[Candidate]) -> list[Candidate | None]:
        """Each parent mutated (with probability ``mutate_prob``; else itself); None where no
        mutation applied or the mutant was rejected. The mutants are made in one round."""
        plan: list[Candidate | int | None] = []
        requests: list[tuple[int, dict[int, Any]]] = []
        for parent in parents:
            if self.rng.random() >= self.mutate_prob:
                plan.append(parent)
                continue
            decisions = self._mutation(parent)
            if decisions is None:
                plan.append(None)
                continue
            plan.append(len(requests))
            requests.append((parent.sketch_index, decisions))
        made = self.make_many(requests, lazy=True)
        return [made[item] if isinstance(item, int) else item for item in plan]

    def next_batch(self, size: int) -> list[Candidate]:
        seen: set[Any] = set()
        # The population: the best measured candidates (re-used as they are) and fresh samples.
        elite_count = min(len(self.measured), int(self.population * self.init_measured_ratio))
        population = [candidate for _, candidate in self.measured[:elite_count]]
        seen.update(c.key for c in population)
        # Made lazily: only the candidates picked for measuring are proved valid (in ``_pick``).
        population += self._fresh(self.population - len(population), seen, lazy=self.cost_model is not None)
        if not population:
            return []
        pool: dict[Any, Candidate] = {c.key: c for c in population if self.is_new(c)}
        if self.cost_model is None:
            return self._pick(pool, size)
        for _ in range(self.generations):
            self.score(population)
            parents = self._select(population)
            children: list[Candidate] = []
            for child in self._children(parents):
                if child is None:
                    continue
                if child.key not in seen:
                    seen.add(child.key)
                    if self.is_new(child):
                        pool[child.key] = child
                children.append(child)
            if not children:
                break
            population = children
        self.score(list(pool.values()))
        return self._pick(pool, size)

    def _checked_prefix(self, ranked: list[Candidate], count: int, hashes: set[int]) -> tuple[list[Candidate], int]:
        """The first ``count`` of ``ranked`` that pass their checks (``finish_many``) and are new
        programs (not measured, not in ``hashes``, which grows), and how many were tried."""
        out: list[Candidate] = []
        tried = 0
        while len(out) < count and tried < len(ranked):
            group = ranked[tried : tried + count - len(out)]
            tried += len(group)
            for candidate in self.finish_many(group):
                if candidate is None or candidate.hash in hashes or not self.is_new(candidate):
                    continue
                hashes.add(candidate.hash)
                out.append(candidate)
        return out, tried

    def _select(self, population: list[Candidate]) -> list[Candidate]:
        """Parents drawn with probability rising with the score (rank-based, so the scale of the
        model's scores does not matter)."""
        ranked = sorted(population, key=lambda c: c.score, reverse=True)
        weights = [1.0 / (rank + 1) for rank in range(len(ranked))]
        return self.rng.choices(ranked, weights=weights, k=len(ranked))

    def _pick(self, pool: dict[Any, Candidate], size: int) -> list[Candidate]:
        # Distinct programs only (two decision sets can give the same program), best first.
        unique: dict[int, Candidate] = {}
        for candidate in sorted(pool.values(), key=lambda c: c.score, reverse=True):
            if candidate.hash not in self.measured_hashes:
                unique.setdefault(candidate.hash, candidate)
        ranked = list(unique.values())
        explore = max(0, min(size, round(size * self.epsilon))) if self.cost_model is not None else 0
        hashes: set[int] = set()
        chosen, tried = self._checked_prefix(ranked, size - explore, hashes)
        rest = ranked[tried:]
        self.rng.shuffle(rest)
        chosen += self._checked_prefix(rest, explore, hashes)[0]
        if len(chosen) < size:  # the pool ran dry: top up with fresh samples
            hashes = {c.hash for c in chosen}
            for candidate in self._fresh(2 * (size - len(chosen)), {c.key for c in chosen}):
                if len(chosen) < size and candidate.hash not in hashes:
                    hashes.add(candidate.hash)
                    chosen.append(candidate)
        return chosen
