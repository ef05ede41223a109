"""The channels-last layout pass (metasched/model/layout.py): where transposes go, and that
every channels-last operator computes what onnxruntime computes, in both layouts."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from model_testing import assert_close, make_model, ort_run  # noqa: E402
from onnx import helper  # noqa: E402

from metasched import model as msm  # noqa: E402
from metasched.model.layout import TO_FIRST, TO_LAST, channels_last, for_target  # noqa: E402
from metasched.model.ops.conv import LAYOUT_ATTR  # noqa: E402
from tir.target import Target  # noqa: E402

RNG = np.random.default_rng(0)


def r(*shape):  # type: ignore[no-untyped-def]
    return RNG.standard_normal(shape).astype("float32")


def _run_both(model, inputs, outputs=("y",), schedule="none"):  # type: ignore[no-untyped-def]
    want = ort_run(model, inputs)
    for layout in ("NHWC", "NCHW"):
        compiled = msm.compile(msm.from_onnx(model), schedule=schedule, threads=1, layout=layout)
        got = compiled.run(inputs)
        for name in outputs:
            assert got[name].shape == want[name].shape, (layout, name)
            assert_close(got[name], want[name], name=f"{layout} {name}")


def _block_model():  # type: ignore[no-untyped-def]
    """Conv-Relu-MaxPool-Conv-Add(skip)-Relu-GlobalAveragePool-Flatten-Gemm: a ResNet in small."""
    nodes = [
        helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c0"], ["r0"]),
        helper.make_node("MaxPool", ["r0"], ["p0"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Conv", ["p0", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c1", "p0"], ["a1"]),
        helper.make_node("Relu", ["a1"], ["r1"]),
        helper.make_node("GlobalAveragePool", ["r1"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Gemm", ["f", "wf"], ["y"], transB=1),
    ]
    inits = {"w0": r(8, 3, 3, 3), "b0": r(8), "w1": r(8, 8, 3, 3), "wf": r(5, 8)}
    return make_model(nodes, {"x": r(1, 3, 17, 17)}, ["y"], inits)


def test_transposes_only_at_the_borders():  # type: ignore[no-untyped-def]
    graph = msm.from_onnx(_block_model())
    last = channels_last(graph)
    transposes = [n for n in last.nodes if n.op_type == "Transpose"]
    # one into NHWC (the image), one back before the Flatten; the skip Add finds both twins
    assert [t.attrs["perm"] for t in transposes] == [TO_LAST, TO_FIRST]
    assert transposes[0].inputs == ["x"] and transposes[1].outputs == ["g"]
    marked = {n.op_type for n in last.nodes if n.attrs.get(LAYOUT_ATTR) == "NHWC"}
    assert marked == {"Conv", "MaxPool", "GlobalAveragePool"}
    # weights transposed once to (kh, kw, C, M); the input graph is unchanged
    assert last.constants["w1.nhwc"].shape == (3, 3, 8, 8)
    assert not any(n.op_type == "Transpose" for n in graph.nodes)
    assert for_target(graph, Target.parse("llvm"), "NCHW") is graph
    with pytest.raises(ValueError, match="layout must be"):
        for_target(graph, Target.parse("llvm"), "NWHC")


def test_dropout_with_its_mask_output_stays_channels_last():  # type: ignore[no-untyped-def]
    """SqueezeNet's Conv -> Concat -> Dropout (its mask output written, read by nobody) -> Conv:
    the Dropout is a view of the twin, not a transpose back to NCHW and forth again."""
    nodes = [
        helper.make_node("Conv", ["x", "w0"], ["c0"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c0"], ["r0"]),
        helper.make_node("Dropout", ["r0"], ["d0", "mask"]),
        helper.make_node("Conv", ["d0", "w1"], ["y"]),
    ]
    model = make_model(nodes, {"x": r(1, 3, 9, 9)}, ["y"], {"w0": r(8, 3, 3, 3), "w1": r(5, 8, 1, 1)})
    last = channels_last(msm.from_onnx(model))
    transposes = [n for n in last.nodes if n.op_type == "Transpose"]
    assert [t.attrs["perm"] for t in transposes] == [TO_LAST, TO_FIRST], [n.op_type for n in last.nodes]
    _run_both(model, {"x": r(1, 3, 9, 9)}, schedule="default")


def _squeeze_excite_model(opset: int, keepdims: int):  # type: ignore[no-untyped-def]
    """Conv -> SiLU -> squeeze-and-excitation (ReduceMean over H, W -> 1x1 convs -> Sigmoid ->
    Mul) -> ReduceMax over H, W without keepdims -> Gemm: EfficientNet's block in small."""
    axes = {"axes": [2, 3]} if opset < 18 else {}
    axes_input = [] if opset < 18 else ["hw"]
    nodes = [
        helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1]),
        helper.make_node("Sigmoid", ["c0"], ["s0"]),
        helper.make_node("Mul", ["c0", "s0"], ["a0"]),
        helper.make_node("ReduceMean", ["a0", *axes_input], ["m"], keepdims=1, **axes),
        helper.make_node("Conv", ["m", "w1", "b1"], ["e1"]),
        helper.make_node("Relu", ["e1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["e2"]),
        helper.make_node("Sigmoid", ["e2"], ["g"]),
        helper.make_node("Mul", ["a0", "g"], ["se"]),
        helper.make_node("ReduceMax", ["se", *axes_input], ["p"], keepdims=keepdims, **axes),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "wf"], ["y"], transB=1),
    ]
    inits = {"w0": r(8, 3, 3, 3), "b0": r(8), "w1": r(2, 8, 1, 1), "b1": r(2), "w2": r(8, 2, 1, 1), "b2": r(8)}
    inits["wf"] = r(5, 8)
    if opset >= 18:
        inits["hw"] = np.array([-1, 2], np.int64)
    return make_model(nodes, {"x": r(1, 3, 9, 11)}, ["y"], inits, opset=opset)


@pytest.mark.parametrize("opset,keepdims", [(17, 1), (17, 0), (18, 1), (18, 0)])
def test_reductions_over_constant_axes_stay_channels_last(opset: int, keepdims: int) -> None:
    """A squeeze-and-excitation block's ReduceMean over H and W (axes as an attribute, or from
    opset 18 as an input) reads the twin with the axes permuted: the only transposes left are
    the image's, and none when the pooled value leaves (N, C) without keepdims."""
    model = _squeeze_excite_model(opset, keepdims)
    last = channels_last(msm.from_onnx(model))
    transposes = [n for n in last.nodes if n.op_type == "Transpose"]
    expected = [TO_LAST] if not keepdims else [TO_LAST, TO_FIRST]
    assert [t.attrs["perm"] for t in transposes] == expected, [n.op_type for n in last.nodes]
    reductions = [n for n in last.nodes if n.op_type.startswith("Reduce")]
    assert all(n.inputs[0].endswith(".nhwc") for n in reductions)
    _run_both(model, {"x": r(1, 3, 9, 11)}, schedule="default")


def test_a_reduction_over_the_channels_without_keepdims_stays_channels_first() -> None:
    nodes = [
        helper.make_node("Conv", ["x", "w0"], ["c0"], pads=[1, 1, 1, 1]),
        helper.make_node("ReduceMax", ["c0"], ["y"], axes=[1, 2], keepdims=0),
    ]
    model = make_model(nodes, {"x": r(1, 3, 5, 7)}, ["y"], {"w0": r(4, 3, 3, 3)})
    last = channels_last(msm.from_onnx(model))
    (reduction,) = [n for n in last.nodes if n.op_type == "ReduceMax"]
    assert reduction.inputs == ["c0"]  # (N, W) comes out in NCHW's order only
    _run_both(model, {"x": r(1, 3, 5, 7)})


def _shuffle_model(opset: int):  # type: ignore[no-untyped-def]
    """ShuffleNet's unit: two convolutions, channel Concat, the channel shuffle (Reshape to
    (N, 2, C/2, H, W), Transpose (0, 2, 1, 3, 4), Reshape back), a channel Split, two
    convolutions on the halves."""
    split = helper.make_node("Split", ["v1", "halves"], ["s0", "s1"], axis=1)
    if opset >= 18:
        split = helper.make_node("Split", ["v1"], ["s0", "s1"], axis=1, num_outputs=2)
    nodes = [
        helper.make_node("Conv", ["x", "w0"], ["a"], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["x", "w1"], ["b"]),
        helper.make_node("Concat", ["a", "b"], ["cat"], axis=1),
        helper.make_node("Reshape", ["cat", "grouped"], ["v0"]),
        helper.make_node("Transpose", ["v0"], ["t"], perm=[0, 2, 1, 3, 4]),
        helper.make_node("Reshape", ["t", "flat"], ["v1"]),
        split,
        helper.make_node("Conv", ["s0", "w2"], ["y0"]),
        helper.make_node("Conv", ["s1", "w3"], ["y1"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["y0", "y1"], ["y"]),
    ]
    inits = {"w0": r(8, 3, 3, 3), "w1": r(8, 3, 1, 1), "w2": r(4, 8, 1, 1), "w3": r(4, 8, 3, 3)}
    inits["grouped"] = np.array([1, 2, 8, 6, 7], np.int64)
    inits["flat"] = np.array([1, 16, 6, 7], np.int64)
    if opset < 18:
        inits["halves"] = np.array([8, 8], np.int64)
    return make_model(nodes, {"x": r(1, 3, 6, 7)}, ["y"], inits, opset=opset)


@pytest.mark.parametrize("opset", [17, 18])
def test_channel_shuffle_and_split_stay_channels_last(opset: int) -> None:
    """The shuffle is a permutation of the channels: on the twin (N, H, W, 2, C/2) swapped to
    (N, H, W, C/2, 2); the Split cuts the last axis. No transpose to NCHW and back."""
    model = _shuffle_model(opset)
    last = channels_last(msm.from_onnx(model))
    perms = [n.attrs["perm"] for n in last.nodes if n.op_type == "Transpose"]
    assert perms == [TO_LAST, [0, 1, 2, 4, 3], TO_FIRST], [n.op_type for n in last.nodes]
    (split,) = [n for n in last.nodes if n.op_type == "Split"]
    assert split.attrs["axis"] == 3 and split.inputs[0].endswith(".nhwc")
    _run_both(model, {"x": r(1, 3, 6, 7)}, schedule="default")


def test_block_model_matches_onnxruntime_default_schedules():  # type: ignore[no-untyped-def]
    model = _block_model()
    _run_both(model, {"x": r(1, 3, 17, 17)}, schedule="default")


@pytest.mark.parametrize(
    "attrs,wshape",
    [
        ({"group": 2, "strides": [2, 1], "pads": [0, 1, 2, 0]}, (6, 2, 3, 2)),
        ({"group": 4, "dilations": [2, 2], "pads": [2, 2, 2, 2]}, (4, 1, 3, 3)),  # depthwise
        ({"auto_pad": "SAME_UPPER", "strides": [2, 2]}, (6, 4, 3, 3)),
        ({"auto_pad": "SAME_LOWER"}, (6, 4, 2, 2)),
        ({}, (6, 4, 1, 1)),
    ],
)
def test_conv_variants(attrs, wshape):  # type: ignore[no-untyped-def]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], **attrs)]
    model = make_model(nodes, {"x": r(2, 4, 9, 8)}, ["y"], {"w": r(*wshape), "b": r(wshape[0])})
    _run_both(model, {"x": r(2, 4, 9, 8)})


@pytest.mark.parametrize(
    "op,attrs",
    [
        ("MaxPool", {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [1, 0, 1, 1], "ceil_mode": 1}),
        ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "count_include_pad": 1}),
        ("AveragePool", {"kernel_shape": [2, 2], "ceil_mode": 1, "strides": [2, 2]}),
        ("GlobalMaxPool", {}),
    ],
)
def test_pools_after_a_conv(op, attrs):  # type: ignore[no-untyped-def]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"]), helper.make_node(op, ["c"], ["y"], **attrs)]
    model = make_model(nodes, {"x": r(1, 3, 9, 9)}, ["y"], {"w": r(4, 3, 1, 1)})
    _run_both(model, {"x": r(1, 3, 9, 9)})


def test_mixed_consumers_constants_and_outputs():  # type: ignore[no-untyped-def]
    """A value read by a channels-last and an NCHW operator, a per-channel constant (PRelu), a
    graph input met by a channels-last value (Add), channel Concat, an unfused BatchNormalization
    (stays NCHW), and a channels-last value that is also a graph output."""
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("PRelu", ["c", "slope"], ["p"]),
        helper.make_node("Add", ["p", "skip"], ["a"]),
        helper.make_node("Concat", ["a", "c"], ["cat"], axis=1),
        helper.make_node("Softmax", ["cat"], ["s"], axis=1),  # NCHW consumer of cat
        helper.make_node("Relu", ["cat"], ["y"]),  # channels-last consumer, a graph output
        helper.make_node("BatchNormalization", ["s", "g", "beta", "mean", "var"], ["bn"]),
    ]
    inits = {
        "w": r(4, 3, 3, 3),
        "slope": r(4, 1, 1),
        "g": r(8),
        "beta": r(8),
        "mean": r(8),
        "var": np.abs(r(8)) + 0.5,
    }
    inputs = {"x": r(1, 3, 6, 7), "skip": r(1, 4, 6, 7)}
    model = make_model(nodes, inputs, ["y", "bn", "c"], inits)
    _run_both(model, inputs, outputs=("y", "bn", "c"))


def test_extract_tasks_agrees_with_compile():  # type: ignore[no-untyped-def]
    graph = msm.from_onnx(_block_model())
    keys = {task.key for task in msm.extract_tasks(graph, "llvm")}
    compiled = msm.compile(graph, threads=1)
    assert keys == {task.key for task in compiled.report.tasks}
    nchw = {task.key for task in msm.extract_tasks(graph, "llvm", layout="NCHW")}
    assert nchw != keys


def test_profile_times_every_kernel_call():  # type: ignore[no-untyped-def]
    compiled = msm.compile(msm.from_onnx(_block_model()), threads=1)
    rows = compiled.profile({"x": r(1, 3, 17, 17)}, repeat=2)
    assert sorted(row.group for row in rows) == sorted(s.group for s in compiled.plan.calls)
    assert [row.seconds for row in rows] == sorted((row.seconds for row in rows), reverse=True)
    assert abs(sum(row.share for row in rows) - 1.0) < 1e-6
