"""The model's tasks: ``extract_tasks`` and ``compile`` name them alike (after the first fused
group, ``g0_matmul_add``); a database record that does not replay is reported, the model still
compiles with the default schedule; the plan round-trips through its JSON form."""

from __future__ import annotations

import json

import numpy as np
import pytest
from model_testing import assert_close, make_model, ort_run
from onnx import helper

import metasched.model as msm
from metasched.database import Database, TuningRecord
from metasched.model.plan import Plan
from metasched.task import workload_hash
from tir.schedule import Schedule
from tir.target import Target


def _dense_layers() -> object:
    """Two MatMul + Add layers of one shape (one task of weight 2), then a MatMul of its own."""
    rng = np.random.default_rng(0)
    weights = {
        "W1": rng.standard_normal((32, 32)).astype("float32"),
        "b1": rng.standard_normal(32).astype("float32"),
        "W2": rng.standard_normal((32, 32)).astype("float32"),
        "b2": rng.standard_normal(32).astype("float32"),
        "W3": rng.standard_normal((32, 16)).astype("float32"),
    }
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["m1"]),
        helper.make_node("Add", ["m1", "b1"], ["h1"]),
        helper.make_node("MatMul", ["h1", "W2"], ["m2"]),
        helper.make_node("Add", ["m2", "b2"], ["h2"]),
        helper.make_node("MatMul", ["h2", "W3"], ["y"]),
    ]
    return make_model(nodes, {"x": np.zeros((4, 32), "float32")}, ["y"], weights)


def test_extract_tasks_and_compile_name_the_tasks_alike() -> None:
    graph = msm.from_onnx(_dense_layers())
    tasks = msm.extract_tasks(graph)
    assert [(t.name, t.pattern, t.weight) for t in tasks] == [("g0_matmul_add", "matmul_add", 2), ("g2_matmul", "matmul", 1)]
    compiled = msm.compile(graph, threads=1)
    assert [(t.name, t.key, t.weight) for t in compiled.report.tasks] == [(t.name, t.key, t.weight) for t in tasks]
    # the kernels are the tasks: both groups of the first call its kernel
    assert [(step.group, step.func) for step in compiled.plan.calls] == [
        ("g0_matmul_add", "g0_matmul_add"),
        ("g1_matmul_add", "g0_matmul_add"),
        ("g2_matmul", "g2_matmul"),
    ]


def _broken_trace(func: object, how: str) -> str:
    """A trace of ``func`` that cannot be applied to it: its block renamed, or not JSON at all."""
    if how == "not json":
        return "{this is no trace"
    sch = Schedule(func)
    block = sch.get_block("matmul")
    sch.split(sch.get_loops(block)[0], [None, 2])
    return sch.trace.to_json().replace('"matmul"', '"no_such_block"')


@pytest.mark.parametrize("how", ["a block the program lacks", "not json"])
def test_a_record_that_does_not_replay_is_reported_and_the_default_schedule_used(tmp_path, how) -> None:  # type: ignore[no-untyped-def]
    model = _dense_layers()
    graph = msm.from_onnx(model)
    broken = msm.extract_tasks(graph)[-1]
    database = Database(tmp_path / "db")
    database.commit_workload(broken.func)
    record = TuningRecord(workload_hash(broken.func), Target.parse("llvm").text, _broken_trace(broken.func, how), 1e-3)
    database.commit_record(record)
    compiled = msm.compile(graph, database=database, threads=1)
    (warning,) = compiled.report.warnings
    assert warning.startswith("g2_matmul: ") and "default schedule used" in warning, warning
    if how != "not json":
        assert "do not replay" in warning and "no_such_block" in warning, warning
    assert {t.name: t.schedule for t in compiled.report.tasks} == {"g0_matmul_add": "default", "g2_matmul": "default"}
    assert "1 warning(s): g2_matmul" in compiled.report.summary()
    x = np.random.default_rng(1).standard_normal((4, 32)).astype("float32")
    assert_close(compiled.run({"x": x})["y"], ort_run(model, {"x": x})["y"])


def test_a_record_that_does_not_replay_on_the_symbolic_program_is_reported(tmp_path) -> None:  # type: ignore[no-untyped-def]
    model = _dense_layers()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"  # type: ignore[attr-defined]
    graph = msm.from_onnx(model, symbolic={"N": 4})
    broken = msm.extract_tasks(graph)[-1]
    assert broken.symbolic_func is not None and broken.name == "g2_matmul"
    database = Database(tmp_path / "db")
    database.commit_workload(broken.func)
    trace = _broken_trace(broken.func, "a block the program lacks")
    database.commit_record(TuningRecord(workload_hash(broken.func), Target.parse("llvm").text, trace, 1e-3))
    compiled = msm.compile(graph, database=database, threads=1)
    (warning,) = compiled.report.warnings
    assert warning.startswith("g2_matmul: the database's records of it do not replay") and "no_such_block" in warning
    x = np.random.default_rng(1).standard_normal((3, 32)).astype("float32")
    assert_close(compiled.run({"x": x})["y"], ort_run(model, {"x": x})["y"])


def test_the_plan_round_trips_through_its_json_form(tmp_path) -> None:  # type: ignore[no-untyped-def]
    compiled = msm.compile(msm.from_onnx(_dense_layers()), threads=1)
    data = json.loads(json.dumps(compiled.plan.to_json()))
    assert Plan.from_json(data) == compiled.plan
    assert list(data) == [
        "version",
        "inputs",
        "outputs",
        "tensors",
        "steps",
        "constants",
        "arena_bytes",
        "intermediate_bytes",
        "symbolic",
        "functions",
    ]
    assert {step["kind"] for step in data["steps"]} == {"call"}
    saved = json.loads((tmp_path / "m" / "graph.json").read_text()) if compiled.save(tmp_path / "m") else None
    assert saved is not None and Plan.from_json(saved) == compiled.plan
