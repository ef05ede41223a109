"""An empty search is never silent: how many candidates fell out at each stage, with the first
reason of each, in the log, in the result and in the error a task with no program raises."""

from __future__ import annotations

import pytest

import metasched
import tir.script as T
from metasched.measure import MeasureResult
from metasched.space import SpaceGenerator
from metasched.space.postproc import Postproc, PostprocError, default_postprocs
from tir.target import Target


@T.script
def matmul(A: T.Buffer((32, 32), "float32"), B: T.Buffer((32, 32), "float32"), C: T.Buffer((32, 32), "float32")):
    for i, j, k in T.grid(32, 32, 32):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]


class Refuse(Postproc):
    name = "refuse-all"

    def apply(self, sch: object) -> None:
        raise PostprocError(self.name, "this space takes nothing")


class FailingBuilds:
    """A measurer whose every build fails."""

    def measure(self, inputs: list[object], best_seconds: float | None = None) -> list[MeasureResult]:
        return [MeasureResult(None, "build", "LLVM ERROR: no such instruction") for _ in inputs]

    def close(self) -> None:
        pass


def test_a_space_that_rejects_everything_says_where_and_why() -> None:
    lines: list[str] = []
    space = SpaceGenerator(postprocs=[*default_postprocs(Target.parse("llvm"))[:-1], Refuse()])
    with pytest.raises(metasched.NoProgramError) as raised:
        metasched.tune(matmul, "llvm", trials=8, space=space, measure_default=False, search_workers=1, log=lines.append)
    message = str(raised.value)
    assert message.startswith("task 'matmul' ended with no valid program: ")
    assert "rejected at postprocessor refuse-all (first: this space takes nothing)" in message
    # The log said so as soon as the search ran dry, with the same counts.
    dry = [line for line in lines if "no new valid candidate" in line]
    assert dry and "rejected at postprocessor refuse-all" in dry[0]
    task = raised.value.result.tasks[0]
    stage, count, reason = task.failure_stages()[0]
    assert stage == "postprocessor refuse-all" and count > 0 and reason == "this space takes nothing"


def test_measured_failures_are_counted_by_stage_with_the_first_message() -> None:
    with pytest.raises(metasched.NoProgramError, match=r"failed: build \(first: LLVM ERROR: no such instruction\)"):
        metasched.tune(matmul, "llvm", trials=4, batch_size=4, measurer=FailingBuilds(), log=lambda line: None)


def test_allow_empty_returns_the_task_without_a_program() -> None:
    result = metasched.tune(
        matmul, "llvm", trials=4, batch_size=4, measurer=FailingBuilds(), allow_empty=True, log=lambda line: None
    )
    task = result.tasks[0]
    assert task.best_func is None and task.failure_stages() == [("build", 4, "LLVM ERROR: no such instruction")]
    assert "fell out: 4 failed: build (first: LLVM ERROR: no such instruction)" in result.summary()


def test_an_unregistered_intrinsic_name_is_refused_before_tuning() -> None:
    with pytest.raises(ValueError, match="no tensor intrinsic named 'no_such_dot'"):
        metasched.tune(matmul, "llvm", trials=4, intrinsics=["no_such_dot"])
