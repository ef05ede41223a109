"""One refusal per documented precondition of the operators added with the exporters'
coverage: each names the operator, the node and the opset, and says what is wrong."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from model_testing import make_model  # noqa: E402
from onnx import helper  # noqa: E402

from metasched import model as msm  # noqa: E402


def z(*shape, dtype="float32"):  # type: ignore[no-untyped-def]
    return np.zeros(shape, dtype)


CASES = [
    (
        helper.make_node("GatherElements", ["x", "i"], ["y"]),
        {"x": z(3, 4), "i": z(3, dtype="int64")},
        {},
        13,
        r"indices of rank 1 for data of rank 2",
    ),
    (
        helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], reduction="sum"),
        {"x": z(3, 4), "i": z(1, 4, dtype="int64"), "u": z(1, 4)},
        {},
        18,
        r"reduction='sum' is not one of",
    ),
    (
        helper.make_node("ScatterND", ["x", "i", "u"], ["y"]),
        {"x": z(3, 4), "i": z(2, 1, dtype="int64"), "u": z(2, 3)},
        {},
        18,
        r"updates of shape \(2, 3\); expected \(2, 4\)",
    ),
    (helper.make_node("Trilu", ["x"], ["y"]), {"x": z(4)}, {}, 14, r"the input must have rank >= 2, got 1"),
    (
        helper.make_node("TopK", ["x", "k"], ["y", "i"]),
        {"x": z(2, 4)},
        {"k": np.array([5], np.int64)},
        11,
        r"K=5 for an axis of extent 4",
    ),
    (helper.make_node("LpNormalization", ["x"], ["y"], p=3), {"x": z(2, 4)}, {}, 13, r"p=3"),
    (
        helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=3),
        {"x": z(1, 4, 2)},
        {"s": z(3), "b": z(3)},
        18,
        r"4 channels do not split into num_groups=3",
    ),
    (
        helper.make_node("Einsum", ["a", "b"], ["y"], equation="ij->i"),
        {"a": z(2, 3), "b": z(3)},
        {},
        12,
        r"equation 'ij->i': the equation has 1 operands, the node 2 inputs",
    ),
    (
        helper.make_node("Mod", ["a", "b"], ["y"]),
        {"a": z(3), "b": z(3)},
        {},
        13,
        r"fmod=0 on floating-point inputs",
    ),
    (
        helper.make_node("GridSample", ["x", "g"], ["y"]),
        {"x": z(1, 1, 2, 2, 2), "g": z(1, 2, 2, 2, 3)},
        {},
        20,
        r"only 2-D sampling is supported",
    ),
    (
        helper.make_node("Pad", ["x", "p"], ["y"], mode="mirror"),
        {"x": z(2, 4)},
        {"p": np.array([0, 1, 0, 1], np.int64)},
        18,
        r"Pad mode 'mirror' is not supported",
    ),
    (
        helper.make_node("Resize", ["x", "", "", "s"], ["y"], keep_aspect_ratio_policy="fit"),
        {"x": z(1, 1, 2, 2)},
        {"s": np.array([1, 1, 4, 4], np.int64)},
        18,
        r"keep_aspect_ratio_policy='fit' is not supported",
    ),
]


@pytest.mark.parametrize("node,inputs,inits,opset,message", CASES, ids=[c[0].op_type for c in CASES])
def test_refusal(node, inputs, inits, opset, message):  # type: ignore[no-untyped-def]
    model = make_model([node], inputs, [node.output[0]], inits, opset)
    with pytest.raises(
        msm.ModelImportError, match=rf"{node.op_type} node '{node.op_type}_0' \(opset {opset}\): {message}"
    ):
        msm.from_onnx(model)
