"""A residual add written over its input: the compiled model's plan aliases the output with the
residual when nothing reads the residual afterwards, and only then; results match onnxruntime."""

from __future__ import annotations

import numpy as np
from model_testing import assert_close, make_model, ort_run
from onnx import helper

import metasched.model as msm


def _residual_block(residual_read_later: bool) -> object:
    """x -> conv+relu = r -> conv+relu = s -> conv(s) + r -> relu = t -> conv = y
    (with ``residual_read_later``, y = conv(t) + r: r lives past t's kernel)."""
    rng = np.random.default_rng(0)
    weights = {f"w{k}": (rng.standard_normal((8, 8, 1, 1)) * 0.3).astype("float32") for k in range(4)}
    nodes = [
        helper.make_node("Conv", ["x", "w0"], ["c0"]),
        helper.make_node("Relu", ["c0"], ["r"]),
        helper.make_node("Conv", ["r", "w1"], ["c1"]),
        helper.make_node("Relu", ["c1"], ["s"]),
        helper.make_node("Conv", ["s", "w2"], ["c2"]),
        helper.make_node("Add", ["c2", "r"], ["a"]),
        helper.make_node("Relu", ["a"], ["t"]),
        helper.make_node("Conv", ["t", "w3"], ["c3" if residual_read_later else "y"]),
    ]
    if residual_read_later:
        nodes.append(helper.make_node("Add", ["c3", "r"], ["y"]))
    return make_model(nodes, {"x": np.zeros((1, 8, 6, 6), "float32")}, ["y"], weights)


def _aliases(compiled: msm.CompiledModel) -> dict[str, str]:
    return {name: t.base for name, t in compiled.plan.tensors.items() if t.storage == "alias" and t.base is not None}


def _check(model: object) -> msm.CompiledModel:
    graph = msm.from_onnx(model)
    compiled = msm.compile(graph, threads=2)
    x = np.random.default_rng(1).standard_normal((1, 8, 6, 6)).astype("float32")
    want = ort_run(model, {"x": x})["y"]
    for _ in range(2):  # a second run starts from the arena the first left behind
        assert_close(compiled.run({"x": x})["y"], want)
    return compiled


def test_residual_add_writes_over_a_residual_read_nowhere_else() -> None:
    compiled = _check(_residual_block(residual_read_later=False))
    in_place = {step.args[-1] for step in compiled.plan.calls if "_add" in step.func}
    (output,) = in_place
    assert output in _aliases(compiled)  # the residual add's output shares the residual's memory
    # ... and still counts among the intermediates the arena is compared with.
    tensors = compiled.plan.tensors
    written = {step.args[-1] for step in compiled.plan.calls}
    nbytes = sum(int(np.prod(tensors[name].shape)) * 4 for name in written)
    assert compiled.plan.intermediate_bytes == nbytes


def test_residual_read_later_keeps_its_memory() -> None:
    compiled = _check(_residual_block(residual_read_later=True))
    for step in compiled.plan.calls:
        if "_add" in step.func and step.args[-1] != "y":
            assert step.args[-1] not in _aliases(compiled)
