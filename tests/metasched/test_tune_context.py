"""The tuner's centre: the budget, the one commit of a measurement, the registries of strategies
and cost models, and a user's measurer whose results carry only the fields the protocol asks."""

from __future__ import annotations

import math
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest

import metasched
import tir.script as T
from metasched.context import Budget, Tuning
from metasched.cost import COST_MODELS, make_cost_model
from metasched.database import Database
from metasched.measure import MeasureResult
from metasched.search import STRATEGIES, ReplaySearch, make_strategy
from metasched.space import SpaceGenerator
from metasched.task import Task
from tir.target import Target


@T.script
def matmul(A: T.Buffer((32, 32), "float32"), B: T.Buffer((32, 32), "float32"), C: T.Buffer((32, 32), "float32")):
    for i, j, k in T.grid(32, 32, 32):
        with T.block("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


def _quiet(line: str) -> None:
    pass


def test_a_budget_needs_trials_or_seconds() -> None:
    with pytest.raises(ValueError, match="give trials= or time_budget="):
        Budget()
    with pytest.raises(ValueError, match="trials must be at least 1, got 0"):
        Budget(trials=0)
    assert Budget(seconds=1.5).trials is None


def test_an_outcome_with_only_the_protocol_fields_reads_as_a_measure_result() -> None:
    read = MeasureResult.of(SimpleNamespace(seconds=2e-3, error_kind=None, error_msg=""))
    assert read == MeasureResult(2e-3)
    assert not read.busy and not read.emulated and read.build_seconds == 0.0
    full = MeasureResult(1e-3, load=0.9, stall=0.5)
    assert MeasureResult.of(full) is full


def test_unknown_names_list_the_registered_ones() -> None:
    task = Task.from_func(matmul)
    with pytest.raises(ValueError, match="unknown strategy 'annealing'; use 'evolutionary' or 'replay'"):
        make_strategy("annealing", task, [], [], None, seed=0)
    with pytest.raises(ValueError, match="unknown cost_model 'mlp'; use 'xgb', 'random'"):
        make_cost_model("mlp")
    assert set(COST_MODELS) == {"xgb", "random"}


class _Model:
    """Records what it was taught."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, int, list[float | None]]] = []

    def update(self, task_key: str, features: list[np.ndarray], seconds: list[float | None]) -> None:
        self.updates.append((task_key, len(features), list(seconds)))

    def predict(self, task_key: str, features: list[np.ndarray]) -> np.ndarray:
        return np.zeros(len(features))


def test_commit_records_folds_teaches_and_updates_progress_in_one_place(tmp_path) -> None:  # noqa: ANN001
    target = Target.parse("llvm")
    model = _Model()
    run = Tuning(target, Database(str(tmp_path)), measurer=None, model=model, log=_quiet, budget=Budget(trials=4))  # type: ignore[arg-type]
    task = Task.from_func(matmul, target)
    context = run.add_task(task, SpaceGenerator(), "replay", seed=0, options={}, maker=None)
    batch = context.search.next_batch(run.batch_size(3))
    assert len(batch) == 3
    outcomes = [MeasureResult(3e-3), MeasureResult(None, "wrong", "differs"), MeasureResult(2e-3, load=0.9)]
    seconds = run.commit(context, batch, outcomes)
    assert seconds == [3e-3, None, 2e-3]
    # The database has all three, the result the best and the failure's first message.
    assert len(run.database.records(task.func, target)) == 3
    assert context.result.best_seconds == 2e-3 and context.result.best_func is batch[2].func
    assert context.result.errors == Counter({"wrong": 1}) and context.result.first_errors == {"wrong": "differs"}
    assert context.result.busy_trials == 1  # the third timing was taken on a busy machine
    # The model learned all three, the search knows they were measured, the scheduler sees it.
    assert model.updates == [(task.key, 3, [3e-3, None, 2e-3])]
    assert all(context.search.is_new(candidate) is False for candidate in batch)
    assert context.progress.history[-1] == (3, 2e-3) and run.total == 3
    assert run.batch_size(3) == 1 and not run.out_of_budget()
    run.commit(context, context.search.next_batch(run.batch_size(3)), [MeasureResult(None, "build", "no")])
    assert run.out_of_budget() and context.result.trials == 4
    assert not math.isinf(context.progress.best)


class _CountingSearch(ReplaySearch):
    """A user's strategy: one module, one entry in ``STRATEGIES``."""

    batches = 0

    def next_batch(self, size: int) -> list:
        type(self).batches += 1
        return super().next_batch(size)


class _Measurer:
    """A user's measurer whose results have only the fields the protocol asks for."""

    def measure(self, inputs, best_seconds=None):  # noqa: ANN001, ANN201
        return [SimpleNamespace(seconds=1e-3 * (1 + i), error_kind=None, error_msg="") for i, _ in enumerate(inputs)]

    def close(self) -> None:
        pass


def test_a_registered_strategy_and_a_plain_measurer_plug_into_tune(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001
    monkeypatch.setitem(STRATEGIES, "counting", _CountingSearch)
    result = metasched.tune(
        matmul,
        "llvm",
        trials=6,
        batch_size=3,
        strategy="counting",
        cost_model="random",
        measurer=_Measurer(),
        work_dir=str(tmp_path),
        search_workers=1,
        log=_quiet,
    )
    assert _CountingSearch.batches >= 1
    assert result.trials == 6 and result.tasks[0].best_seconds is not None
