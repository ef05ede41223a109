"""GridSample (every mode, padding mode and align_corners; grids reaching far outside the
image) and AffineGrid against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from model_testing import assert_close, make_model, ort_run  # noqa: E402
from onnx import helper  # noqa: E402

from metasched import model as msm  # noqa: E402

RNG = np.random.default_rng(23)


def check(nodes, inputs, inits=(), opset=16, schedule="none"):  # type: ignore[no-untyped-def]
    model = make_model(nodes, inputs, ["y"], inits, opset)
    want = ort_run(model, inputs)["y"]
    got = msm.compile(msm.from_onnx(model), schedule=schedule, threads=1).run(inputs)["y"]
    assert got.shape == want.shape
    assert_close(got, want)


def grid(n, h, w):  # type: ignore[no-untyped-def]
    """Mostly inside [-1, 1], some far outside (several reflections), some exactly on pixels."""
    g = RNG.uniform(-1.2, 1.2, (n, h, w, 2)).astype(np.float32)
    g[0, 0, :3] = [[-3.7, 2.9], [4.4, -5.1], [1.0, -1.0]]
    g[0, 1, :2] = [[0.0, 0.0], [-1.0, 1.0]]
    return g


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample(mode, padding, align):  # type: ignore[no-untyped-def]
    node = helper.make_node("GridSample", ["x", "g"], ["y"], mode=mode, padding_mode=padding, align_corners=align)
    check([node], {"x": RNG.standard_normal((2, 3, 5, 6)).astype(np.float32), "g": grid(2, 4, 7)})


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_grid_sample_opset20_names(mode):  # type: ignore[no-untyped-def]
    node = helper.make_node("GridSample", ["x", "g"], ["y"], mode=mode)
    check([node], {"x": RNG.standard_normal((1, 2, 4, 4)).astype(np.float32), "g": grid(1, 3, 3)}, opset=20)


@pytest.mark.parametrize("align", [0, 1])
def test_affine_grid_then_sample(align):  # type: ignore[no-untyped-def]
    """torch's spatial transformer: affine_grid then grid_sample (default schedules)."""
    nodes = [
        helper.make_node("AffineGrid", ["theta", "size"], ["g"], align_corners=align),
        helper.make_node("GridSample", ["x", "g"], ["y"], align_corners=align),
    ]
    theta = np.array([[[0.9, -0.2, 0.1], [0.3, 1.1, -0.2]], [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]], np.float32)
    inputs = {"x": RNG.standard_normal((2, 3, 5, 6)).astype(np.float32), "theta": theta}
    check(nodes, inputs, inits={"size": np.array([2, 3, 4, 7], np.int64)}, opset=20, schedule="default")
