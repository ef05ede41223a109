"""Weights packed once: a model's constant parameters are layout-free, and a schedule that packs
them (from the database) runs with the packing done at compile time."""

from __future__ import annotations

import numpy as np
from model_testing import assert_close, make_model, ort_run
from onnx import helper

import metasched.model as msm
from metasched.database import Database, TuningRecord
from metasched.task import workload_hash
from tir.schedule import Schedule
from tir.target import Target


def _two_dense_layers() -> object:
    rng = np.random.default_rng(0)
    weights = {
        "W1": rng.standard_normal((64, 48)).astype("float32"),
        "b1": rng.standard_normal(48).astype("float32"),
        "W2": rng.standard_normal((48, 48)).astype("float32"),
    }
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["m1"]),
        helper.make_node("Add", ["m1", "b1"], ["h"]),
        helper.make_node("MatMul", ["h", "W2"], ["y"]),
    ]
    return make_model(nodes, {"x": np.zeros((8, 64), "float32")}, ["y"], weights)


def _packing_trace(func: object) -> str:
    """A schedule of a matmul task that packs its weight into 16-wide panels at the root."""
    sch = Schedule(func)
    block = sch.get_block("matmul")
    weight = next(i for i, region in enumerate(sch.get(block).reads) if region.buffer.name.startswith("W"))
    packed = sch.cache_read(block, weight, "global")
    sch.transform_layout(packed, ("write", 0), "lambda d0, d1: (d1 // 16, d0, d1 % 16)")
    return sch.trace.to_json()


def test_constants_are_layout_free_and_packed_weights_are_made_at_compile_time(tmp_path) -> None:  # noqa: ANN001
    model = _two_dense_layers()
    graph = msm.from_onnx(model)
    target = Target.parse("llvm").text
    tasks = msm.extract_tasks(graph)
    assert all(task.func.attrs.get("layout_free_buffers") for task in tasks)
    database = Database(tmp_path / "db")
    for task in tasks:
        database.commit_workload(task.func)
        database.commit_record(TuningRecord(workload_hash(task.func), target, _packing_trace(task.func), 1e-3))
    compiled = msm.compile(graph, database=database, threads=1)
    assert {t.schedule for t in compiled.report.tasks} == {"database"}
    constants = compiled.plan.constants
    packed = [name for name in constants if ":" in name]
    assert len(packed) == 2 and "W1" not in constants and "W2" not in constants
    x = np.random.default_rng(1).standard_normal((8, 64)).astype("float32")
    want = ort_run(model, {"x": x})["y"]
    assert_close(compiled.run({"x": x})["y"], want)
    reloaded = msm.load(compiled.save(tmp_path / "saved"))
    assert_close(reloaded.run({"x": x})["y"], want)


def test_a_transposed_constant_is_packed_in_its_logical_order(tmp_path) -> None:  # noqa: ANN001
    """A Transpose of an initializer folds into a transposed view; the packing must read it as
    the task sees it, not in the view's memory order (pytorch's Linear without bias)."""
    rng = np.random.default_rng(0)
    weights = {"W": rng.standard_normal((48, 64)).astype("float32")}
    nodes = [helper.make_node("Transpose", ["W"], ["Wt"]), helper.make_node("MatMul", ["x", "Wt"], ["y"])]
    model = make_model(nodes, {"x": np.zeros((8, 64), "float32")}, ["y"], weights)
    graph = msm.from_onnx(model)
    target = Target.parse("llvm").text
    database = Database(tmp_path / "db")
    for task in msm.extract_tasks(graph):
        database.commit_workload(task.func)
        database.commit_record(TuningRecord(workload_hash(task.func), target, _packing_trace(task.func), 1e-3))
    compiled = msm.compile(graph, database=database, threads=1)
    assert any(":" in name for name in compiled.plan.constants)  # the weight was packed at compile time
    x = rng.standard_normal((8, 64)).astype("float32")
    assert_close(compiled.run({"x": x})["y"], ort_run(model, {"x": x})["y"])
