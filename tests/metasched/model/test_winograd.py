"""Winograd F(2x2, 3x3) convolutions: which channels-last Conv nodes become ``WinogradConv``, the
transforms' algebra, and compiled models against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from model_testing import assert_close, make_model, ort_run  # noqa: E402
from onnx import helper  # noqa: E402

from metasched import model as msm  # noqa: E402
from metasched.model.layout import WINOGRAD_AT, WINOGRAD_BT, channels_last, winograd_weights  # noqa: E402

RNG = np.random.default_rng(0)


def r(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def test_the_transforms_compute_a_3x3_correlation() -> None:
    """At (U * (Bt d Bt^T)) At^T over a 4x4 tile d is the 2x2 output of the 3x3 filter g."""
    d = RNG.standard_normal((4, 4))
    g = RNG.standard_normal((1, 1, 3, 3))
    u = winograd_weights(g.astype(np.float32)).astype(np.float64)[:, :, 0, 0]
    bt, at = WINOGRAD_BT.astype(np.float64), WINOGRAD_AT.astype(np.float64)
    got = at @ (u * (bt @ d @ bt.T)) @ at.T
    want = np.array([[np.sum(d[i : i + 3, j : j + 3] * g[0, 0]) for j in range(2)] for i in range(2)])
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def _conv_model(x: np.ndarray, m: int, bias: bool = True, **attrs: object) -> object:
    c = x.shape[1]
    kernel = attrs.pop("kernel", 3)
    group = int(attrs.get("group", 1))  # type: ignore[call-overload]
    inits = {"w": r(m, c // group, kernel, kernel) * 0.2}
    inputs = ["x", "w"]
    if bias:
        inits["b"] = r(m)
        inputs.append("b")
    nodes = [
        helper.make_node("Conv", inputs, ["c"], kernel_shape=[kernel, kernel], **attrs),
        helper.make_node("Relu", ["c"], ["y"]),
    ]
    return make_model(nodes, {"x": x}, ["y"], inits)


@pytest.mark.parametrize(
    "shape,attrs,winograd",
    [
        ((1, 8, 8, 8), {"pads": [1, 1, 1, 1]}, True),
        ((1, 8, 6, 10), {"pads": [1, 1, 1, 1]}, True),
        ((1, 8, 7, 7), {"pads": [1, 1, 1, 1]}, False),  # odd: no whole 2x2 tiles
        ((1, 8, 8, 8), {"pads": [1, 1, 1, 1], "strides": [2, 2]}, False),
        ((1, 8, 8, 8), {"pads": [0, 0, 0, 0]}, False),
        ((1, 8, 8, 8), {"pads": [2, 2, 2, 2], "dilations": [2, 2]}, False),
        ((1, 8, 8, 8), {"pads": [1, 1, 1, 1], "group": 2}, False),
        ((1, 8, 8, 8), {"pads": [2, 2, 2, 2], "kernel": 5}, False),
    ],
    ids=["8x8", "6x10", "odd", "stride2", "valid", "dilated", "grouped", "5x5"],
)
def test_which_convolutions_become_winograd(shape: tuple[int, ...], attrs: dict[str, object], winograd: bool) -> None:
    graph = channels_last(msm.from_onnx(_conv_model(r(*shape), 8, **dict(attrs))), winograd=True)
    ops = [node.op_type for node in graph.nodes]
    assert ("WinogradConv" in ops) == winograd and ("Conv" in ops) != winograd, ops
    if winograd:
        assert any(
            name.endswith(".winograd") and value.shape == (4, 4, 8, 8) for name, value in graph.constants.items()
        )


@pytest.mark.parametrize(
    "shape,m,bias", [((1, 16, 8, 8), 32, True), ((2, 8, 6, 10), 8, True), ((1, 3, 4, 4), 5, False)]
)
def test_winograd_convolutions_match_onnxruntime(shape: tuple[int, ...], m: int, bias: bool) -> None:
    x = r(*shape)
    model = _conv_model(x, m, bias=bias, pads=[1, 1, 1, 1])
    graph = msm.from_onnx(model)
    assert any("winogradconv" in task.name for task in msm.extract_tasks(graph))
    want = ort_run(model, {"x": x})["y"]
    for schedule in ("none", "default"):
        got = msm.compile(graph, schedule=schedule, threads=1, winograd=True).run({"x": x})["y"]
        assert_close(got, want, name=schedule)


def test_winograd_with_a_residual_add_matches_onnxruntime() -> None:
    """Conv (Winograd) + bias + Add(skip) + Relu fuse into one group whose epilogue reads the skip."""
    x = r(1, 8, 8, 8)
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c", "x"], ["s"]),
        helper.make_node("Relu", ["s"], ["y"]),
    ]
    model = make_model(nodes, {"x": x}, ["y"], {"w": r(8, 8, 3, 3) * 0.2, "b": r(8)})
    graph = msm.from_onnx(model)
    assert [t.name for t in msm.extract_tasks(graph) if "winograd" in t.name] == ["g1_winogradconv_add_relu_transpose"]
    got = msm.compile(graph, threads=1, winograd=True).run({"x": x})["y"]
    assert_close(got, ort_run(model, {"x": x})["y"])


def test_winograd_is_used_where_the_tuner_was(tmp_path: object) -> None:
    """extract_tasks gives the tuner the Winograd tasks; compile uses them with a database and
    keeps the direct convolution without one (its default schedules are faster)."""
    x = r(1, 8, 8, 8)
    graph = msm.from_onnx(_conv_model(x, 8, pads=[1, 1, 1, 1]))
    assert any("winogradconv" in t.name for t in msm.extract_tasks(graph))
    assert not any("winogradconv" in t.name for t in msm.extract_tasks(graph, winograd=False))
    assert not any("winogradconv" in t.name for t in msm.compile(graph, threads=1).report.tasks)
    tuned = msm.compile(graph, threads=1, database=str(tmp_path))
    assert any("winogradconv" in t.name for t in tuned.report.tasks)
