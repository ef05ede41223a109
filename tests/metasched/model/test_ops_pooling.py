"""LpPool and GlobalLpPool against onnxruntime: p = 1, 2, 3; pads, strides, dilations,
ceil_mode, 1-D and 2-D."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from model_testing import assert_close, make_model, ort_run  # noqa: E402
from onnx import helper  # noqa: E402

from metasched import model as msm  # noqa: E402

RNG = np.random.default_rng(19)


def check(node, x, opset=18, schedule="none"):  # type: ignore[no-untyped-def]
    model = make_model([node], {"x": x}, ["y"], (), opset)
    want = ort_run(model, {"x": x})["y"]
    got = msm.compile(msm.from_onnx(model), schedule=schedule, threads=1).run({"x": x})["y"]
    assert got.shape == want.shape
    assert_close(got, want)


@pytest.mark.parametrize(
    "attrs",
    [
        {"kernel_shape": [3, 3]},
        {"kernel_shape": [2, 3], "p": 1, "strides": [2, 1], "pads": [1, 0, 0, 1]},
        {"kernel_shape": [3, 2], "p": 3, "dilations": [2, 1], "ceil_mode": 1, "strides": [2, 2]},
        {"kernel_shape": [3, 3], "auto_pad": "SAME_UPPER", "strides": [2, 2]},
    ],
)
def test_lp_pool(attrs):  # type: ignore[no-untyped-def]
    check(helper.make_node("LpPool", ["x"], ["y"], **attrs), RNG.standard_normal((1, 3, 7, 8)).astype(np.float32))


def test_lp_pool_1d_opset11():  # type: ignore[no-untyped-def]
    node = helper.make_node("LpPool", ["x"], ["y"], kernel_shape=[3], strides=[2], p=2)
    check(node, RNG.standard_normal((2, 2, 9)).astype(np.float32), opset=11)


@pytest.mark.parametrize("p", [None, 1, 3])
def test_global_lp_pool(p):  # type: ignore[no-untyped-def]
    attrs = {} if p is None else {"p": p}
    x = RNG.standard_normal((2, 3, 5, 4)).astype(np.float32)
    check(helper.make_node("GlobalLpPool", ["x"], ["y"], **attrs), x, schedule="default")
