"""Elementwise operators against onnxruntime: Mod (fmod 0 / 1, negative operands, broadcast,
dtypes), BitShift, IsInf, Celu, Shrink, Mish, CastLike, Cast to every integer width, and the
inverse trigonometric / hyperbolic functions over their domains (tiny, large and edge values)."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from model_testing import make_model, ort_run  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

from metasched import model as msm  # noqa: E402
from metasched.model.onnx import ModelImportError  # noqa: E402

RNG = np.random.default_rng(3)


def check(node, inputs, inits=(), opset=18, rtol=2e-6, atol=1e-7):  # type: ignore[no-untyped-def]
    """Elementwise results compare per element (no scale-relative slack)."""
    model = make_model([node], inputs, ["y"], inits, opset)
    want = ort_run(model, inputs)["y"]
    got = msm.compile(msm.from_onnx(model), schedule="none", threads=1).run(inputs)["y"]
    assert got.shape == want.shape and got.dtype == want.dtype
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


def signed(dtype):  # type: ignore[no-untyped-def]
    """Every sign combination, including exact multiples."""
    a = np.array([7, -7, 7, -7, 6, -6, 0, 5, -5, 13], dtype)
    b = np.array([3, 3, -3, -3, 3, -3, 4, 5, 7, -4], dtype)
    return a, b


@pytest.mark.parametrize("dtype", ["int64", "int32", "int8"])
@pytest.mark.parametrize("fmod", [0, 1])
def test_mod_integers(dtype, fmod):  # type: ignore[no-untyped-def]
    a, b = signed(dtype)
    check(helper.make_node("Mod", ["a", "b"], ["y"], fmod=fmod), {"a": a, "b": b}, opset=13)


def test_mod_floats_and_broadcast():  # type: ignore[no-untyped-def]
    a, b = signed("float32")
    a = a * np.float32(1.37)
    check(helper.make_node("Mod", ["a", "b"], ["y"], fmod=1), {"a": a, "b": b}, opset=13)
    check(
        helper.make_node("Mod", ["a", "b"], ["y"], fmod=1),
        {"a": RNG.standard_normal((3, 4)).astype(np.float32) * 10},
        inits={"b": np.float32(-2.5)},
        opset=13,
    )
    check(
        helper.make_node("Mod", ["a", "b"], ["y"]),
        {"a": np.arange(-6, 6, dtype=np.int64).reshape(3, 4), "b": np.array([5, -5, 3, -2], np.int64)},
        opset=13,
    )


def test_mod_float_needs_fmod():  # type: ignore[no-untyped-def]
    a, b = signed("float32")
    model = make_model([helper.make_node("Mod", ["a", "b"], ["y"])], {"a": a, "b": b}, ["y"], (), 13)
    with pytest.raises(ModelImportError, match="fmod=0 on floating-point"):
        msm.from_onnx(model)


# The IR's unsigned dtypes stop at uint8 (tir.ir.dtype): uint16 / 32 / 64 tensors are refused at import.
@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bit_shift(direction):  # type: ignore[no-untyped-def]
    x = np.array([1, 3, 255, 16, 200, 7, 1, 129], np.uint8)
    y = np.array([0, 1, 3, 4, 2, 7, 6, 5], np.uint8)
    check(helper.make_node("BitShift", ["x", "s"], ["y"], direction=direction), {"x": x, "s": y}, opset=11)
    check(
        helper.make_node("BitShift", ["x", "s"], ["y"], direction=direction),
        {"x": x.reshape(2, 4)},
        inits={"s": np.uint8(3)},
        opset=11,
    )


@pytest.mark.parametrize("attrs", [{}, {"detect_positive": 0}, {"detect_negative": 0}])
def test_is_inf(attrs):  # type: ignore[no-untyped-def]
    x = np.array([np.inf, -np.inf, np.nan, 0.0, 3.4e38, -1.0], np.float32)
    check(helper.make_node("IsInf", ["x"], ["y"], **attrs), {"x": x}, opset=10)


X = np.array([-30.0, -5.0, -1.2, -0.5, -0.3, -1e-6, 0.0, 1e-6, 0.3, 0.5, 1.2, 5.0, 30.0], np.float32)


@pytest.mark.parametrize(
    "op,attrs,opset",
    [
        ("Celu", {}, 12),
        ("Celu", {"alpha": 0.5}, 12),
        ("Shrink", {}, 9),
        ("Shrink", {"bias": 1.5, "lambd": 1.0}, 9),
        ("Mish", {}, 18),
    ],
)
def test_activations(op, attrs, opset):  # type: ignore[no-untyped-def]
    check(helper.make_node(op, ["x"], ["y"], **attrs), {"x": X}, opset=opset, atol=1e-6)


def test_shrink_integers():  # type: ignore[no-untyped-def]
    x = np.arange(-5, 6, dtype=np.int32)
    check(helper.make_node("Shrink", ["x"], ["y"], bias=1.5, lambd=1.5), {"x": x}, opset=9)


@pytest.mark.parametrize(
    "to",
    [TensorProto.INT32, TensorProto.INT64, TensorProto.UINT8, TensorProto.INT8, TensorProto.DOUBLE, TensorProto.BOOL],
)
def test_cast_like(to):  # type: ignore[no-untyped-def]
    from onnx.helper import tensor_dtype_to_np_dtype

    target = np.zeros((1,), tensor_dtype_to_np_dtype(to))
    x = np.array([0.0, 1.7, 2.2, 120.9, 3.0, 0.4], np.float32)  # in range of every target
    check(helper.make_node("CastLike", ["x", "t"], ["y"]), {"x": x, "t": target}, opset=15)
    check(helper.make_node("Cast", ["x"], ["y"], to=to), {"x": x}, opset=13)


TINY = np.array([1e-30, -1e-12, 3e-8, -2e-5, 1e-4, -0.01], np.float32)


@pytest.mark.parametrize(
    "op,values",
    [
        ("Tan", np.concatenate([TINY, np.linspace(-1.5, 1.5, 21, dtype=np.float32), [3.0, -10.0]])),
        ("Asin", np.concatenate([TINY, np.linspace(-1, 1, 41, dtype=np.float32), [0.99999, -0.9999999]])),
        ("Acos", np.concatenate([TINY, np.linspace(-1, 1, 41, dtype=np.float32), [0.99999, -0.9999999]])),
        ("Atan", np.concatenate([TINY, np.linspace(-5, 5, 41, dtype=np.float32), [0.66, 2.414, 1e6, -1e30, np.inf]])),
        ("Sinh", np.concatenate([TINY, np.linspace(-10, 10, 41, dtype=np.float32), [80.0, -85.0]])),
        ("Cosh", np.concatenate([TINY, np.linspace(-10, 10, 41, dtype=np.float32), [80.0, -85.0]])),
        ("Asinh", np.concatenate([TINY, np.linspace(-10, 10, 41, dtype=np.float32), [1e20, -1e30]])),
        ("Acosh", np.concatenate([[1.0, 1.0000001, 1.001], np.linspace(1, 100, 41, dtype=np.float32), [1e30]])),
        ("Atanh", np.concatenate([TINY, np.linspace(-0.99, 0.99, 41, dtype=np.float32), [0.9999999, -0.9999]])),
    ],
)
def test_inverse_trigonometric_and_hyperbolic(op, values):  # type: ignore[no-untyped-def]
    x = np.asarray(values, np.float32)
    check(helper.make_node(op, ["x"], ["y"]), {"x": x}, opset=9, rtol=3e-6, atol=0.0)


@pytest.mark.parametrize(
    "op,reference",
    [
        ("Atan", np.arctan),
        ("Asin", np.arcsin),
        ("Acos", np.arccos),
        ("Sinh", np.sinh),
        ("Atanh", np.arctanh),
        ("Asinh", np.arcsinh),
    ],
)
def test_float64(op, reference):  # type: ignore[no-untyped-def]
    """float64 inputs keep float64 accuracy (onnxruntime has no float64 kernels for most: numpy decides)."""
    x = np.concatenate([np.linspace(-0.99, 0.99, 23), [1e-9, -3e-5, 0.5]])
    model = make_model([helper.make_node(op, ["x"], ["y"])], {"x": x}, ["y"], (), 9)
    got = msm.compile(msm.from_onnx(model), schedule="none", threads=1).run({"x": x})["y"]
    np.testing.assert_allclose(got, reference(x), rtol=1e-14, atol=0.0)
