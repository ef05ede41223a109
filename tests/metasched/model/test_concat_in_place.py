"""Concats that copy nothing (metasched/model/fuse.py ``_assemble_concats``): producers write
their slices of the Concat's output in place, readers of those values address them through the
output's strides, and the model still computes what onnxruntime computes."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from model_testing import assert_close, make_model, ort_run  # noqa: E402
from onnx import helper  # noqa: E402

from metasched import model as msm  # noqa: E402
from metasched.model.fuse import partition  # noqa: E402
from metasched.model.plan import AssembledStep  # noqa: E402

RNG = np.random.default_rng(0)


def r(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def conv(x: str, w: str, y: str, relu: bool = True, pad: int = 0) -> list:
    out = f"{y}_c" if relu else y
    nodes = [helper.make_node("Conv", [x, w], [out], pads=[pad] * 4)]
    if relu:
        nodes.append(helper.make_node("Relu", [out], [y]))
    return nodes


def fire() -> onnx.ModelProto:
    """SqueezeNet's fire module: squeeze, then a 1x1 and a 3x3 expand concatenated."""
    nodes = [
        *conv("x", "ws", "s"),
        *conv("s", "w1", "e1"),
        *conv("s", "w3", "e3", pad=1),
        helper.make_node("Concat", ["e1", "e3"], ["cat"], axis=1),
        *conv("cat", "wo", "y", relu=False),
    ]
    inits = {"ws": r(8, 12, 1, 1), "w1": r(16, 8, 1, 1), "w3": r(16, 8, 3, 3), "wo": r(10, 32, 1, 1)}
    return make_model(nodes, {"x": r(1, 12, 9, 7)}, ["y"], inits)


def dense_block() -> onnx.ModelProto:
    """DenseNet's block as torch exports it: every layer reads the Concat of all features so far."""
    nodes = [*conv("x", "w0", "x0")]
    features = ["x0"]
    for k in range(1, 4):
        if len(features) == 1:
            source = features[0]
        else:
            source = f"cat{k}"
            nodes.append(helper.make_node("Concat", list(features), [source], axis=1))
        nodes += conv(source, f"w{k}", f"f{k}", pad=1)
        features.append(f"f{k}")
    nodes.append(helper.make_node("Concat", features, ["block"], axis=1))
    nodes += conv("block", "wt", "y", relu=False)
    inits = {"w0": r(8, 3, 1, 1), "wt": r(6, 8 + 3 * 4, 1, 1)}
    for k in range(1, 4):
        inits[f"w{k}"] = r(4, 8 + (k - 1) * 4, 3, 3)
    return make_model(nodes, {"x": r(1, 3, 6, 5)}, ["y"], inits)


def nested() -> onnx.ModelProto:
    """Inception's 3x3 branch pair: a Concat that is an input of the outer Concat."""
    nodes = [
        *conv("x", "wa", "a"),
        *conv("x", "wb", "b"),
        *conv("x", "wc", "c", pad=1),
        helper.make_node("Concat", ["b", "c"], ["bc"], axis=1),
        *conv("x", "wd", "d"),
        helper.make_node("Concat", ["a", "bc", "d"], ["cat"], axis=1),
        *conv("cat", "wo", "y", relu=False),
    ]
    inits = {"wa": r(4, 6, 1, 1), "wb": r(5, 6, 1, 1), "wc": r(3, 6, 3, 3), "wd": r(7, 6, 1, 1), "wo": r(2, 19, 1, 1)}
    return make_model(nodes, {"x": r(1, 6, 5, 5)}, ["y"], inits)


def kinds(model: onnx.ModelProto, layout: str = "auto") -> dict[str, int]:
    from metasched.model.layout import for_target
    from tir.target import Target

    counts: dict[str, int] = {}
    for group in partition(for_target(msm.from_onnx(model), Target.parse("llvm"), layout, False)):
        key = f"{group.kind} {'+'.join(group.op_types)}"
        counts[key] = counts.get(key, 0) + 1
    return counts


def check(model: onnx.ModelProto, inputs: dict[str, np.ndarray], assembled: int) -> None:
    want = ort_run(model, inputs)
    for layout in ("NHWC", "NCHW"):
        compiled = msm.compile(msm.from_onnx(model), threads=2, layout=layout)
        steps = compiled.plan.steps
        assert sum(isinstance(step, AssembledStep) for step in steps) == assembled, layout
        assert not any("concat" in step.func for step in compiled.plan.calls), layout
        for name, value in want.items():
            assert_close(compiled.run(inputs)[name], value, name=f"{layout} {name}")


def test_a_fire_modules_expands_write_their_halves_of_the_concat() -> None:
    model = fire()
    assert kinds(model)["assembled Concat"] == 1
    check(model, {"x": r(1, 12, 9, 7)}, assembled=1)


def test_a_dense_block_copies_nothing_its_concats_are_stretches_of_the_last() -> None:
    model = dense_block()
    groups = partition(msm.from_onnx(model))
    last = next(g for g in reversed(groups) if g.op_types == ["Concat"])
    assert last.kind == "assembled" and last.slice_of is None  # the block's output owns the memory
    inner = [g for g in groups if g.op_types == ["Concat"] and g is not last]
    assert [g.slice_of for g in inner] == [("block", 1, 0), ("block", 1, 0)]  # prefixes of it
    check(model, {"x": r(1, 3, 6, 5)}, assembled=3)


def test_a_concat_inside_a_concat_places_its_inputs_in_the_outer_one() -> None:
    model = nested()
    groups = partition(msm.from_onnx(model))
    inner = next(g for g in groups if g.outputs == ["bc"])
    assert inner.kind == "assembled" and inner.slice_of == ("cat", 1, 4)
    producer_of_c = next(g for g in groups if g.outputs == ["c"])
    assert producer_of_c.slice_of == ("bc", 1, 5)
    check(model, {"x": r(1, 6, 5, 5)}, assembled=2)


def test_placed_values_live_at_their_offsets_in_the_plan_and_after_save_and_load(tmp_path) -> None:  # type: ignore[no-untyped-def]
    model = fire()
    compiled = msm.compile(msm.from_onnx(model), threads=1, layout="NHWC")
    tensors = compiled.plan.tensors
    placed = {name: t for name, t in tensors.items() if t.byte_offset is not None}
    assert sorted(t.byte_offset or 0 for t in placed.values()) == [0, 16 * 4]  # e1 then e3, channels-last
    (base,) = {t.base for t in placed.values()}
    assert base is not None and tensors[base].storage == "arena" and tensors[base].shape == (1, 9, 7, 32)
    inputs = {"x": r(1, 12, 9, 7)}
    compiled.save(tmp_path)
    assert_close(msm.load(tmp_path, threads=1).run(inputs)["y"], ort_run(model, inputs)["y"], name="loaded y")


def test_a_concat_of_a_graph_input_or_of_a_value_a_view_reads_stays_a_copy() -> None:
    nodes = [*conv("x", "w", "a"), helper.make_node("Concat", ["x", "a"], ["y"], axis=1)]
    model = make_model(nodes, {"x": r(1, 3, 4, 4)}, ["y"], {"w": r(2, 3, 1, 1)})
    assert kinds(model, "NCHW").get("assembled Concat", 0) == 0  # channels-last: x's transpose writes it
    inputs = {"x": r(1, 3, 4, 4)}
    got = msm.compile(model, threads=1, layout="NCHW").run(inputs)["y"]
    assert_close(got, ort_run(model, inputs)["y"], name="y")

    shape = np.array([1, -1], dtype=np.int64)
    nodes = [
        *conv("x", "w", "a"),
        *conv("x", "v", "b"),
        helper.make_node("Concat", ["a", "b"], ["cat"], axis=1),
        helper.make_node("Reshape", ["a", "shape"], ["flat"]),  # a strided value is no reshape's view
        helper.make_node("ReduceSum", ["cat"], ["y"], keepdims=0),
    ]
    model = make_model(
        nodes, {"x": r(1, 3, 4, 4)}, ["y", "flat"], {"w": r(2, 3, 1, 1), "v": r(5, 3, 1, 1), "shape": shape}
    )
    assert kinds(model, "NCHW").get("assembled Concat", 0) == 0
    want = ort_run(model, inputs)
    got = msm.compile(model, threads=1, layout="NCHW").run(inputs)
    for name in want:
        assert_close(got[name], want[name], name=name)


def test_a_concat_that_is_a_model_output_is_written_in_place_and_returned_whole() -> None:
    nodes = [*conv("x", "w", "a"), *conv("x", "v", "b", pad=1), helper.make_node("Concat", ["a", "b"], ["y"], axis=1)]
    model = make_model(nodes, {"x": r(1, 3, 5, 4)}, ["y"], {"w": r(2, 3, 1, 1), "v": r(3, 3, 3, 3)})
    check(model, {"x": r(1, 3, 5, 4)}, assembled=1)
