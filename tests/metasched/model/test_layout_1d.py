"""Channels-last 1-D convolutions (metasched/model/layout.py, NWC): which nodes move, the
transposes a speech encoder writes itself, padded frame counts, and numerics against
onnxruntime in both layouts."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from model_testing import assert_close, make_model, ort_run  # noqa: E402
from onnx import helper  # noqa: E402

from metasched import model as msm  # noqa: E402
from metasched.model.compiled import SERIAL_FLOPS, serial_loops  # noqa: E402
from metasched.model.layout import channels_last, to_first_perm, to_last_perm  # noqa: E402
from metasched.model.ops.conv import LAYOUT_ATTR, padded_frames  # noqa: E402
from tir.ir.functor import post_order_visit  # noqa: E402
from tir.ir.stmt import For, ForKind  # noqa: E402

RNG = np.random.default_rng(0)


def r(*shape):  # type: ignore[no-untyped-def]
    return RNG.standard_normal(shape).astype("float32")


def _run_both(model, inputs, outputs=("y",), schedule="default"):  # type: ignore[no-untyped-def]
    want = ort_run(model, inputs)
    for layout in ("NHWC", "NCHW"):
        compiled = msm.compile(msm.from_onnx(model), schedule=schedule, threads=1, layout=layout)
        got = compiled.run(inputs)
        for name in outputs:
            assert got[name].shape == want[name].shape, (layout, name)
            assert_close(got[name], want[name], name=f"{layout} {name}")


def _ops(graph):  # type: ignore[no-untyped-def]
    return [n.op_type for n in graph.nodes]


def test_perms():  # type: ignore[no-untyped-def]
    assert to_last_perm(3) == [0, 2, 1] and to_first_perm(3) == [0, 2, 1]
    assert to_last_perm(4) == [0, 2, 3, 1] and to_first_perm(4) == [0, 3, 1, 2]


@pytest.mark.parametrize(
    "attrs,wshape,width",
    [
        ({"strides": [2]}, (8, 6, 3), 23),
        ({"strides": [5]}, (8, 6, 10), 61),  # a wav2vec2 stem: kernel 10, stride 5
        ({"pads": [2, 1], "dilations": [2]}, (8, 6, 3), 17),
        ({"group": 2, "pads": [4, 4], "strides": [3]}, (8, 3, 8), 29),
        ({"group": 6, "pads": [1, 1]}, (6, 1, 3), 19),  # depthwise
        ({"group": 3, "pads": [8, 8]}, (6, 2, 16), 21),  # a positional convolution in small
        ({"auto_pad": "SAME_UPPER", "strides": [2]}, (8, 6, 4), 20),
        ({"auto_pad": "SAME_LOWER"}, (8, 6, 2), 9),
        ({}, (8, 6, 1), 7),
    ],
)
def test_conv1d_variants_channels_last(attrs, wshape, width):  # type: ignore[no-untyped-def]
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], **attrs),
        helper.make_node("Relu", ["c"], ["y"]),
    ]
    x = r(2, 6, width)
    model = make_model(nodes, {"x": x}, ["y"], {"w": r(*wshape), "b": r(wshape[0])})
    last = channels_last(msm.from_onnx(model))
    conv = next(n for n in last.nodes if n.op_type == "Conv")
    assert conv.attrs.get(LAYOUT_ATTR) == "NHWC"
    # weights (M, C / group, k) -> (k, C / group, M), once
    assert last.constants[conv.inputs[1]].shape == (wshape[2], wshape[1], wshape[0])
    assert conv.outputs == ["c.nwc"] and last.infos["c.nwc"].shape[2] == wshape[0]
    _run_both(model, {"x": x})


@pytest.mark.parametrize(
    "op,attrs",
    [
        ("MaxPool", {"kernel_shape": [3], "strides": [2], "pads": [1, 1], "ceil_mode": 1}),
        ("AveragePool", {"kernel_shape": [4], "strides": [3], "pads": [2, 1], "count_include_pad": 1}),
        ("GlobalAveragePool", {}),
    ],
)
def test_pools_and_concat_after_a_conv1d(op, attrs):  # type: ignore[no-untyped-def]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1]),
        helper.make_node(op, ["c"], ["p"], **attrs),
        helper.make_node("Concat", ["p", "p"], ["y"], axis=1),
    ]
    x = r(1, 3, 16)
    model = make_model(nodes, {"x": x}, ["y"], {"w": r(4, 3, 3)})
    last = channels_last(msm.from_onnx(model))
    assert [n.op_type for n in last.nodes if n.attrs.get(LAYOUT_ATTR) == "NHWC"] == ["Conv", op]
    assert next(n for n in last.nodes if n.op_type == "Concat").attrs["axis"] == 2
    _run_both(model, {"x": x})


def test_one_channel_input_is_a_view():  # type: ignore[no-untyped-def]
    """A waveform (N, 1, T) is the same bytes as (N, T, 1): a Reshape, not a Transpose kernel."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["y"], strides=[5])]
    x = r(1, 1, 100)
    model = make_model(nodes, {"x": x}, ["y"], {"w": r(16, 1, 10)})
    last = channels_last(msm.from_onnx(model))
    assert _ops(last) == ["Reshape", "Conv", "Transpose"]
    _run_both(model, {"x": x})


def _feature_extractor():  # type: ignore[no-untyped-def]
    """wav2vec2's front in small: Conv(stride 5) -> Reshape to its own shape ->
    InstanceNormalization -> Mul/Add by (C, 1) constants -> Relu -> Conv(stride 2) -> Relu ->
    Transpose(0, 2, 1) -> Add (N, T, C) -> a positional convolution: Transpose(0, 2, 1) ->
    grouped Conv (padded by half its even kernel) -> Slice off the last frame -> Transpose back."""
    nodes = [
        helper.make_node("Conv", ["x", "w0"], ["c0"], strides=[5]),
        helper.make_node("Reshape", ["c0", "shape0"], ["c0r"]),
        helper.make_node("InstanceNormalization", ["c0r", "scale", "bias"], ["n0"], epsilon=1e-5),
        helper.make_node("Mul", ["n0", "gamma"], ["m0"]),
        helper.make_node("Add", ["m0", "beta"], ["a0"]),
        helper.make_node("Relu", ["a0"], ["r0"]),
        helper.make_node("Conv", ["r0", "w1"], ["c1"], strides=[2]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Transpose", ["r1"], ["t1"], perm=[0, 2, 1]),
        helper.make_node("Add", ["t1", "proj_bias"], ["h"]),
        helper.make_node("Transpose", ["h"], ["hT"], perm=[0, 2, 1]),
        helper.make_node("Conv", ["hT", "wp", "bp"], ["p"], group=4, pads=[4, 4]),
        helper.make_node("Slice", ["p", "starts", "ends", "axes"], ["ps"]),
        helper.make_node("Sigmoid", ["ps"], ["pg"]),
        helper.make_node("Transpose", ["pg"], ["pt"], perm=[0, 2, 1]),
        helper.make_node("Add", ["h", "pt"], ["y"]),
    ]
    channels = 16
    inits = {
        "w0": r(channels, 1, 10),
        "shape0": np.array([1, channels, -1], np.int64),
        "scale": r(channels),
        "bias": r(channels),
        "gamma": r(channels, 1),
        "beta": r(channels, 1),
        "w1": r(channels, channels, 3),
        "proj_bias": r(channels),
        "wp": r(channels, channels // 4, 8),
        "bp": r(channels),
        "starts": np.array([0], np.int64),
        "ends": np.array([-1], np.int64),
        "axes": np.array([2], np.int64),
    }
    x = r(1, 1, 400)
    return make_model(nodes, {"x": x}, ["y", "c1"], inits), {"x": x}


def test_feature_extractor_runs_channels_last():  # type: ignore[no-untyped-def]
    model, inputs = _feature_extractor()
    graph = msm.from_onnx(model)
    last = channels_last(graph)
    marked = [n.op_type for n in last.nodes if n.attrs.get(LAYOUT_ATTR) == "NHWC"]
    assert marked == ["Conv", "InstanceNormalization", "Conv", "Conv"]
    transposes = [n for n in last.nodes if n.op_type == "Transpose"]
    # the model's four transposes are gone: r1 -> t1 is the twin itself, hT is h, and the
    # positional convolution's output goes back to (N, T, C) as its twin; one transpose
    # remains, for the graph output c1 (channels-first)
    assert [(t.inputs, t.outputs) for t in transposes] == [(["c1.nwc"], ["c1"])]
    reshape = next(n for n in last.nodes if n.name == graph.nodes[1].name)
    assert reshape.op_type == "Identity" and reshape.inputs == ["c0.nwc"]
    slice_node = next(n for n in last.nodes if n.op_type == "Slice")
    assert slice_node.inputs[0] == "p.nwc" and last.constants[slice_node.inputs[3]].tolist() == [1]
    # Add(h, pt) reads the sigmoid's twin directly, and h is read by the convolution as is
    assert next(n for n in last.nodes if n.outputs == ["y"]).inputs == ["h", "pg.nwc"]
    assert next(n for n in last.nodes if n.outputs == ["p.nwc"]).inputs[0] == "h"
    _run_both(model, inputs, outputs=("y", "c1"))


def test_transpose_of_a_twin_composes():  # type: ignore[no-untyped-def]
    """A Transpose of a channels-last value by another permutation reads the twin; a graph
    output that is a Transpose of a twin still comes out."""
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1]),
        helper.make_node("Transpose", ["c"], ["t"], perm=[2, 1, 0]),
        helper.make_node("Transpose", ["c"], ["y"], perm=[0, 2, 1]),
    ]
    x = r(2, 3, 11)
    model = make_model(nodes, {"x": x}, ["t", "y"], {"w": r(5, 3, 3)})
    last = channels_last(msm.from_onnx(model))
    t = next(n for n in last.nodes if n.outputs == ["t"])
    assert t.inputs == ["c.nwc"] and t.attrs["perm"] == [1, 2, 0]
    assert next(n for n in last.nodes if n.outputs == ["y"]).op_type == "Identity"
    _run_both(model, {"x": x}, outputs=("t", "y"))


def test_transpose_not_into_a_conv_stays():  # type: ignore[no-untyped-def]
    """Only a Transpose that feeds a convolution is absorbed (elsewhere it would only move)."""
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 1]),
        helper.make_node("Relu", ["t"], ["y"]),
        helper.make_node("Conv", ["x2", "w"], ["z"]),
    ]
    inputs = {"x": r(1, 7, 5), "x2": r(1, 3, 9)}
    model = make_model(nodes, inputs, ["y", "z"], {"w": r(4, 3, 1)})
    graph = msm.from_onnx(model)
    last = channels_last(graph)
    assert last.nodes[0] == graph.nodes[0]
    _run_both(model, inputs, outputs=("y", "z"))


def test_padded_frames():  # type: ignore[no-untyped-def]
    assert padded_frames(199) == 200 and padded_frames(799) == 800 and padded_frames(194) == 200
    assert padded_frames(99) == 99 and padded_frames(1500) == 1500 and padded_frames(13) == 13


def test_awkward_frame_count_computes_whole_tiles():  # type: ignore[no-untyped-def]
    """199 output frames: the convolution computes 200 (reading one padded frame more) and the
    epilogue keeps 199."""
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], strides=[2]), helper.make_node("Relu", ["c"], ["y"])]
    x = r(1, 8, 399)
    model = make_model(nodes, {"x": x}, ["y"], {"w": r(16, 8, 3), "b": r(16)})
    tasks = msm.extract_tasks(msm.from_onnx(model), "llvm")
    conv = next(t for t in tasks if "conv" in t.name)
    text = conv.func.script()
    assert "(1, 200, 16)" in text and "(1, 401, 8)" in text
    _run_both(model, {"x": x})


def test_small_kernels_run_serially():  # type: ignore[no-untyped-def]
    from metasched.space.default import default_schedule

    nodes = [helper.make_node("Transpose", ["x"], ["y"], perm=[0, 2, 1, 3])]
    x = r(1, 49, 4, 64)
    graph = msm.from_onnx(make_model(nodes, {"x": x}, ["y"]))
    (task,) = msm.extract_tasks(graph, "llvm")
    assert task.flops < SERIAL_FLOPS
    scheduled = default_schedule(task.func, "llvm")

    def kinds(func):  # type: ignore[no-untyped-def]
        found = []
        post_order_visit(func.body, lambda n: found.append(n.kind) if isinstance(n, For) else None)
        return found

    assert ForKind.PARALLEL in kinds(scheduled)
    serial = serial_loops(scheduled)
    assert ForKind.PARALLEL not in kinds(serial) and serial_loops(serial) is serial
    compiled = msm.compile(graph, threads=2)
    np.testing.assert_array_equal(compiled.run({"x": x})["y"], x.transpose(0, 2, 1, 3))
