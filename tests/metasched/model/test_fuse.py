"""Fusion groups (metasched/model/fuse.py): activations that read their input twice fuse into
the producer's epilogue, and the fused program still computes what onnxruntime computes."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import helper  # noqa: E402

from metasched import model as msm  # noqa: E402
from metasched.model.fuse import partition  # noqa: E402
from metasched.model.testing import assert_close, make_model, ort_run  # noqa: E402

RNG = np.random.default_rng(0)


def r(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def _kernels(model) -> list[list[str]]:  # type: ignore[no-untyped-def]
    return [group.op_types for group in partition(msm.from_onnx(model)) if group.kind == "kernel"]


def _conv_then(activation: list, extra_outputs: tuple[str, ...] = ()):  # type: ignore[no-untyped-def]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), *activation]
    inits = {"w": r(16, 8, 3, 3), "b": r(16), "half": np.float32(0.5), "one": np.float32(1.0)}
    inits["root2"] = np.float32(np.sqrt(2.0))
    return make_model(nodes, {"x": r(1, 8, 6, 7)}, ["y", *extra_outputs], inits)


SILU = [helper.make_node("Sigmoid", ["c"], ["s"]), helper.make_node("Mul", ["c", "s"], ["y"])]
GELU = [
    helper.make_node("Div", ["c", "root2"], ["d"]),
    helper.make_node("Erf", ["d"], ["e"]),
    helper.make_node("Add", ["e", "one"], ["p"]),
    helper.make_node("Mul", ["c", "p"], ["q"]),
    helper.make_node("Mul", ["q", "half"], ["y"]),
]


@pytest.mark.parametrize("activation", [SILU, GELU], ids=["silu", "gelu"])
def test_an_activation_reading_its_input_twice_is_the_convolutions_epilogue(activation: list) -> None:
    model = _conv_then(activation)
    assert _kernels(model) == [["Conv", *[node.op_type for node in activation]]]
    inputs = {"x": r(1, 8, 6, 7)}
    want = ort_run(model, inputs)["y"]
    for layout in ("NHWC", "NCHW"):
        got = msm.compile(msm.from_onnx(model), threads=1, layout=layout).run(inputs)["y"]
        assert_close(got, want, name=f"{layout} y")


def test_a_value_read_outside_the_activation_is_not_fused_away() -> None:
    # the convolution's output is also a graph output: it must be written, so the SiLU stays
    # a kernel of its own
    model = _conv_then([*SILU, helper.make_node("Identity", ["c"], ["c_out"])], extra_outputs=("c_out",))
    kernels = _kernels(model)
    assert ["Conv"] in kernels and ["Sigmoid", "Mul"] in kernels, kernels
    inputs = {"x": r(1, 8, 6, 7)}
    want = ort_run(model, inputs)
    got = msm.compile(msm.from_onnx(model), threads=1).run(inputs)
    for name in ("y", "c_out"):
        assert_close(got[name], want[name], name=name)
