"""Trace files are data: loading one runs nothing, and anything but schedule primitives with plain
arguments is refused with the instruction's index (issue 17 E)."""

from __future__ import annotations

import json

import pytest

import tir
import tir.script as T
from tir.schedule import Schedule, Trace, TraceError


@T.script
def scale(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32")):
    for i, j in T.grid(16, 16):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0


def _saved() -> dict:
    sch = Schedule(scale)
    i, j = sch.get_loops(sch.get_block("B"))
    sch.split(i, [None, 4])
    return json.loads(sch.trace.to_json())


def _load(data: dict) -> Trace:
    return Trace.from_json(json.dumps(data))


def test_a_saved_trace_loads_and_replays() -> None:
    trace = _load(_saved())
    sch = Schedule(scale)
    trace.apply_to(sch)
    assert len(sch.get_loops(sch.get_block("B"))) == 3


@pytest.mark.parametrize("kind", ["__setattr__", "__init__", "copy", "_set_func", "resolve_loop", "nonsense"])
def test_a_kind_that_is_not_a_primitive_is_refused_before_anything_runs(kind: str) -> None:
    data = _saved()
    data["instructions"][1]["kind"] = kind
    with pytest.raises(TraceError, match=rf"instruction 1: '{kind}' is not a schedule primitive"):
        _load(data)


def test_a_near_miss_kind_gets_a_suggestion() -> None:
    data = _saved()
    data["instructions"][2]["kind"] = "splitt"
    with pytest.raises(TraceError, match="did you mean 'split'"):
        _load(data)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["instructions"][0].pop("kind"), "instruction 0: missing 'kind'"),
        (lambda d: d["instructions"][1].update(args="x"), "instruction 1: 'args' must be a list"),
        (lambda d: d["instructions"][1].update(kwargs={"a b": 1}), "instruction 1: 'kwargs' must map"),
        (lambda d: d["instructions"][0].update(outputs=["__class__"]), "instruction 0: 'outputs' must be"),
        (lambda d: d["instructions"][2]["args"].append({"eval": "1"}), "instruction 2: unexpected object"),
        (lambda d: d["instructions"].__setitem__(0, 5), "instruction 0: expected a JSON object"),
        (lambda d: d.update(instructions={}), "'instructions' must be a list"),
        (lambda d: d.update(version=7), "version 1"),
    ],
)
def test_malformed_instructions_name_their_index(edit, message: str) -> None:  # noqa: ANN001
    data = _saved()
    edit(data)
    with pytest.raises(TraceError, match=message):
        _load(data)


def test_invalid_json_is_a_trace_error() -> None:
    with pytest.raises(TraceError, match="invalid JSON"):
        Trace.from_json("{not json")


def test_unknown_keyword_arguments_are_refused_at_replay_with_the_index() -> None:
    data = _saved()
    data["instructions"][2]["kwargs"]["evil"] = 1
    trace = _load(data)
    with pytest.raises(TraceError, match=r"instruction 2 \(split\)"):
        trace.apply_to(Schedule(scale))
    assert tir.structural_equal(Schedule(scale).func, scale)


def test_a_handle_used_before_it_is_defined_is_refused() -> None:
    data = _saved()
    data["instructions"][2]["args"][0] = {"rv": "l99"}
    with pytest.raises(TraceError, match="l99 before an instruction defines it"):
        _load(data).apply_to(Schedule(scale))


def test_a_handle_from_another_schedule_is_refused_but_copies_share_handles() -> None:
    first, second = Schedule(scale), Schedule(scale)
    loop = first.get_loops(first.get_block("B"))[0]
    with pytest.raises(tir.ScheduleError, match="belongs to another Schedule"):
        second.split(loop, [None, 4])
    with pytest.raises(tir.ScheduleError, match="belongs to another Schedule"):
        second.get_loops(first.get_block("B"))
    copy = first.copy()
    copy.split(loop, [None, 4])  # a copy continues the same schedule: its handles stay valid
    assert len(copy.trace) == len(first.trace) + 1


def test_an_unknown_block_name_suggests_the_closest() -> None:
    sch = Schedule(scale)
    with pytest.raises(tir.ScheduleError, match=r"no such block .* did you mean 'B'\?"):
        sch.get_block("b")
