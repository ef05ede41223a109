"""Normalization operators against onnxruntime: GroupNormalization (opset 18: per-group
scale; 21: per-channel), MeanVarianceNormalization, LpNormalization (p = 1, 2; a zero vector),
RMSNormalization (opset 23: lowered through a hand-built graph while the importer stops at
``MAX_OPSET``)."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from model_testing import assert_close, make_model, ort_run  # noqa: E402
from onnx import helper  # noqa: E402

from metasched import model as msm  # noqa: E402
from metasched.model.graph import Graph, Node, TensorInfo  # noqa: E402
from metasched.model.onnx import MAX_OPSET  # noqa: E402

RNG = np.random.default_rng(13)


def r(*shape):  # type: ignore[no-untyped-def]
    return RNG.standard_normal(shape).astype(np.float32)


def check(node, inputs, inits=(), opset=18):  # type: ignore[no-untyped-def]
    model = make_model([node], inputs, ["y"], inits, opset)
    want = ort_run(model, inputs)["y"]
    got = msm.compile(msm.from_onnx(model), schedule="none", threads=1).run(inputs)["y"]
    assert got.shape == want.shape
    assert_close(got, want)


@pytest.mark.parametrize("shape,groups", [((2, 6, 5, 3), 3), ((1, 4, 7), 2), ((2, 4, 3, 3), 4), ((2, 6, 4), 1)])
def test_group_normalization_opset18(shape, groups):  # type: ignore[no-untyped-def]
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=groups, epsilon=1e-3)
    check(node, {"x": r(*shape) * 3 + 1}, inits={"s": r(groups), "b": r(groups)}, opset=18)


@pytest.mark.parametrize("shape,groups", [((2, 6, 5, 3), 3), ((1, 4, 7), 2)])
def test_group_normalization_opset21(shape, groups):  # type: ignore[no-untyped-def]
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=groups)
    check(node, {"x": r(*shape)}, inits={"s": r(shape[1]), "b": r(shape[1])}, opset=21)


@pytest.mark.parametrize("attrs", [{}, {"axes": [1]}, {"axes": [0, -1]}, {"axes": [0, 1, 2, 3]}])
def test_mean_variance_normalization(attrs):  # type: ignore[no-untyped-def]
    check(
        helper.make_node("MeanVarianceNormalization", ["x"], ["y"], **attrs), {"x": r(2, 3, 4, 5) * 2 + 0.5}, opset=13
    )


@pytest.mark.parametrize("attrs", [{}, {"p": 1}, {"axis": 0, "p": 2}, {"axis": 1, "p": 1}])
def test_lp_normalization(attrs):  # type: ignore[no-untyped-def]
    x = r(3, 4)
    x[1] = 0.0  # a zero vector along the last axis stays zero
    check(helper.make_node("LpNormalization", ["x"], ["y"], **attrs), {"x": x}, opset=13)


@pytest.mark.parametrize("axis,scale_shape", [(-1, (6,)), (1, (4, 6)), (-2, (1, 6))])
def test_rms_normalization(axis, scale_shape):  # type: ignore[no-untyped-def]
    x, scale = r(2, 4, 6), r(*scale_shape)
    node = helper.make_node("RMSNormalization", ["x", "s"], ["y"], axis=axis, epsilon=1e-4)
    try:
        want = ort_run(make_model([node], {"x": x}, ["y"], {"s": scale}, 23), {"x": x})["y"]
    except Exception as error:  # an onnxruntime without opset 23
        pytest.skip(f"onnxruntime cannot run RMSNormalization: {error}")
    if MAX_OPSET >= 23:
        got = msm.compile(make_model([node], {"x": x}, ["y"], {"s": scale}, 23), schedule="none", threads=1)
    else:
        # The importer stops at MAX_OPSET: the lowering alone, through a graph built by hand.
        graph = Graph(
            "rms",
            ["x"],
            ["y"],
            [Node("RMSNormalization", "rms", ["x", "s"], ["y"], {"axis": axis, "epsilon": 1e-4})],
            {"s": scale},
            {
                "x": TensorInfo(x.shape, "float32"),
                "s": TensorInfo(scale.shape, "float32"),
                "y": TensorInfo(x.shape, "float32"),
            },
            23,
        )
        got = msm.compile(graph, schedule="none", threads=1)
    assert_close(got.run({"x": x})["y"], want)
