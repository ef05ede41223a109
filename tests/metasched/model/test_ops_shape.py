"""Shape and indexing operators in the forms the torch exporters use, against onnxruntime:
Gather with negative indices and scalar indices, Where broadcasting three ranks, Expand to a
lower / higher rank, Slice with negative steps and clamped bounds, Pad in every mode (negative
pads, axes), Resize in every mode and coordinate transformation, Range on floats."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from model_testing import assert_close, make_model, ort_run  # noqa: E402
from onnx import helper  # noqa: E402

from metasched import model as msm  # noqa: E402

RNG = np.random.default_rng(17)
I64 = np.int64


def r(*shape, dtype="float32"):  # type: ignore[no-untyped-def]
    if np.dtype(dtype).kind in "iu":
        return RNG.integers(-9, 10, shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def check(nodes, inputs, inits=(), opset=18, outputs=("y",), rtol=1e-4):  # type: ignore[no-untyped-def]
    nodes = nodes if isinstance(nodes, list) else [nodes]
    model = make_model(nodes, inputs, list(outputs), inits, opset)
    want = ort_run(model, inputs)
    got = msm.compile(msm.from_onnx(model), schedule="none", threads=1).run(inputs)
    for name in outputs:
        assert got[name].shape == want[name].shape, name
        assert got[name].dtype == want[name].dtype, name
        if want[name].dtype.kind == "f":
            assert_close(got[name], want[name], rtol=rtol, name=name)
        else:
            np.testing.assert_array_equal(got[name], want[name], err_msg=name)


@pytest.mark.parametrize(
    "data,indices,axis",
    [
        (r(5, 3), np.array(-1, I64), 0),  # scalar index: the axis disappears
        (r(5, 3), np.array([[-5, 4], [0, -2]], I64), 0),
        (r(2, 7), np.array([-7, -1, 3], np.int32), -1),
        (r(4, 3, dtype="int64"), np.array([[[-1]]], I64), 1),
    ],
)
def test_gather(data, indices, axis):  # type: ignore[no-untyped-def]
    check(helper.make_node("Gather", ["x", "i"], ["y"], axis=axis), {"x": data, "i": indices})


def test_where_broadcasts_three_ranks():  # type: ignore[no-untyped-def]
    cond = RNG.random((4, 1)) > 0.5
    check(helper.make_node("Where", ["c", "a", "b"], ["y"]), {"c": cond, "a": r(2, 1, 5), "b": r(5)})
    # a scalar constant branch (masked_fill), int64 data
    check(
        helper.make_node("Where", ["c", "a", "b"], ["y"]),
        {"c": RNG.random((2, 3)) > 0.5, "a": r(3, dtype="int64")},
        inits={"b": np.array(-7, I64)},
    )


@pytest.mark.parametrize(
    "shape,target",
    [((3, 1), (2, 3, 4)), ((2, 3, 4), (3, 1)), ((1, 4), (1, 1)), ((3, 1, 1), (1, 1, 2, 5)), ((4,), (4,))],
)
def test_expand(shape, target):  # type: ignore[no-untyped-def]
    check(helper.make_node("Expand", ["x", "s"], ["y"]), {"x": r(*shape)}, inits={"s": np.array(target, I64)})


@pytest.mark.parametrize(
    "starts,ends,axes,steps",
    [
        ([-1], [-(2**63)], [1], [-1]),  # reverse a whole axis (torch.flip)
        ([5], [-100], [0], [-2]),
        ([-2, 10], [0, -10], [0, 1], [-1, -3]),
        ([1, 0], [2**63 - 1, 3], None, [2, 1]),
        ([0], [-1], [-1], None),
        ([20], [30], [1], [1]),  # empty
    ],
)
def test_slice(starts, ends, axes, steps):  # type: ignore[no-untyped-def]
    names = ["x", "st", "en"]
    inits = {"st": np.array(starts, I64), "en": np.array(ends, I64)}
    if axes is not None or steps is not None:
        names.append("ax")
        inits["ax"] = np.array(axes if axes is not None else list(range(len(starts))), I64)
    if steps is not None:
        names.append("sp")
        inits["sp"] = np.array(steps, I64)
    check(helper.make_node("Slice", names, ["y"]), {"x": r(6, 7)}, inits=inits)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize(
    "pads,axes",
    [([0, 2, 1, 0, 3, 2], None), ([2, -1, 1, 2], [-1, 1]), ([0, 1, -1, 1, -2, 1], None), ([0, 0, 0, 0, 0, 0], None)],
)
def test_pad(mode, pads, axes):  # type: ignore[no-untyped-def]
    names = ["x", "p", "v"] + ([] if axes is None else ["a"])
    inits = {"p": np.array(pads, I64), "v": np.float32(1.5)}
    if axes is not None:
        inits["a"] = np.array(axes, I64)
    check(helper.make_node("Pad", names, ["y"], mode=mode), {"x": r(2, 4, 5)}, inits=inits, opset=19)


def test_pad_int_and_old_opset():  # type: ignore[no-untyped-def]
    check(
        helper.make_node("Pad", ["x", "p"], ["y"]),
        {"x": r(3, 4, dtype="int64")},
        inits={"p": np.array([1, 0, 0, 2], I64)},
        opset=13,
    )
    check(helper.make_node("Pad", ["x"], ["y"], pads=[0, 1, 1, 0], value=2.0, mode="constant"), {"x": r(3, 4)}, opset=9)


NEAREST_MODES = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
TRANSFORMS = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"]


@pytest.mark.parametrize("nearest_mode", NEAREST_MODES)
@pytest.mark.parametrize("ctm", TRANSFORMS + ["tf_half_pixel_for_nn"])
def test_resize_nearest(nearest_mode, ctm):  # type: ignore[no-untyped-def]
    node = helper.make_node(
        "Resize", ["x", "", "sc"], ["y"], mode="nearest", coordinate_transformation_mode=ctm, nearest_mode=nearest_mode
    )
    check(node, {"x": r(1, 2, 4, 5)}, inits={"sc": np.array([1, 1, 1.75, 0.6], np.float32)})


@pytest.mark.parametrize("ctm", TRANSFORMS)
@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_resize_interpolating(mode, ctm):  # type: ignore[no-untyped-def]
    node = helper.make_node("Resize", ["x", "", "sc"], ["y"], mode=mode, coordinate_transformation_mode=ctm)
    check(node, {"x": r(1, 2, 4, 5)}, inits={"sc": np.array([1, 1, 2.0, 0.6], np.float32)})


@pytest.mark.parametrize(
    "attrs",
    [
        {"mode": "cubic", "cubic_coeff_a": -0.5},
        {"mode": "cubic", "exclude_outside": 1},
        {"mode": "linear"},
        {"mode": "nearest"},
    ],
)
def test_resize_sizes(attrs):  # type: ignore[no-untyped-def]
    """Sizes instead of scales (torch's interpolate(size=...)), one axis of output size 1."""
    node = helper.make_node(
        "Resize", ["x", "", "", "sz"], ["y"], coordinate_transformation_mode="pytorch_half_pixel", **attrs
    )
    check(node, {"x": r(1, 3, 5, 6)}, inits={"sz": np.array([1, 3, 1, 9], I64)})


@pytest.mark.parametrize("policy", ["not_larger", "not_smaller"])
def test_resize_axes_and_aspect_ratio(policy):  # type: ignore[no-untyped-def]
    node = helper.make_node(
        "Resize", ["x", "", "", "sz"], ["y"], mode="linear", axes=[2, 3], keep_aspect_ratio_policy=policy
    )
    check(node, {"x": r(1, 2, 4, 6)}, inits={"sz": np.array([9, 7], I64)})
    node = helper.make_node("Resize", ["x", "", "sc"], ["y"], mode="nearest", axes=[3])
    check(node, {"x": r(1, 2, 4, 6)}, inits={"sc": np.array([1.5], np.float32)})


def test_upsample_and_resize_opset10():  # type: ignore[no-untyped-def]
    check(
        helper.make_node("Upsample", ["x", "sc"], ["y"], mode="nearest"),
        {"x": r(1, 1, 2, 3)},
        inits={"sc": np.array([1, 1, 2, 3], np.float32)},
        opset=9,
    )
    check(
        helper.make_node("Resize", ["x", "sc"], ["y"], mode="linear"),
        {"x": r(1, 1, 3, 3)},
        inits={"sc": np.array([1, 1, 2, 2], np.float32)},
        opset=10,
    )


def test_range_on_floats_folds():  # type: ignore[no-untyped-def]
    nodes = [helper.make_node("Range", ["s", "l", "d"], ["rg"]), helper.make_node("Add", ["x", "rg"], ["y"])]
    inits = {"s": np.float32(0.5), "l": np.float32(3.2), "d": np.float32(0.75)}
    check(nodes, {"x": r(2, 4)}, inits=inits)


@pytest.mark.parametrize(
    "shape,target,axes",
    [((4, 6), (2, 9), None), ((5, 7), (8, 2), None), ((2, 5, 6), (3, 3), [-1, 1]), ((3, 4), (3, 4), None)],
)
def test_center_crop_pad(shape, target, axes):  # type: ignore[no-untyped-def]
    attrs = {} if axes is None else {"axes": axes}
    node = helper.make_node("CenterCropPad", ["x", "s"], ["y"], **attrs)
    check(node, {"x": r(*shape)}, inits={"s": np.array(target, I64)})


@pytest.mark.parametrize("attrs", [{}, {"k": 2}, {"k": -1, "dtype": onnx.TensorProto.INT64}])
def test_eye_like(attrs):  # type: ignore[no-untyped-def]
    check(helper.make_node("EyeLike", ["x"], ["y"], **attrs), {"x": r(3, 5)}, opset=9)


def test_windows_fold():  # type: ignore[no-untyped-def]
    nodes = [
        helper.make_node("HannWindow", ["n"], ["w0"]),
        helper.make_node("BlackmanWindow", ["n"], ["w1"], periodic=0),
        helper.make_node("Mul", ["x", "w0"], ["a"]),
        helper.make_node("Add", ["a", "w1"], ["y"]),
    ]
    graph = msm.from_onnx(make_model(nodes, {"x": r(2, 8)}, ["y"], {"n": np.array(8, I64)}, 17))
    assert [n.op_type for n in graph.nodes] == ["Mul", "Add"]
    check(nodes, {"x": r(2, 8)}, inits={"n": np.array(8, I64)}, opset=17)
