"""The numpy folding kernels (metasched.model.fold) against onnxruntime, one small case per
operator form (opset differences, negative axes, clamping, integer semantics), and constant
folding in from_onnx: quantized weights, the onnx.reference fallback, what stays a kernel,
FOLD_LIMIT and the skip hook."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from model_testing import make_model, ort_run  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from metasched import model as msm  # noqa: E402
from metasched.model import fold  # noqa: E402

RNG = np.random.default_rng(0)
I64, I32, F32 = np.int64, np.int32, np.float32


def a(values: Any, dtype: Any = I64) -> np.ndarray:
    return np.array(values, dtype=dtype)


def r(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(F32)


def check(op: str, inputs: list[Any], attrs: dict[str, Any] | None = None, opset: int = 17, outputs: int = 1) -> None:
    """The kernel's outputs equal onnxruntime's on the same node, every input fed at run time."""
    attrs = attrs or {}
    names = [f"i{k}" if value is not None else "" for k, value in enumerate(inputs)]
    out_names = [f"o{k}" for k in range(outputs)]
    proto_attrs = {k: numpy_helper.from_array(v) if isinstance(v, np.ndarray) else v for k, v in attrs.items()}
    node = helper.make_node(op, names, out_names, **proto_attrs)
    feeds = {n: np.asarray(v) for n, v in zip(names, inputs, strict=True) if n}
    want = ort_run(make_model([node], feeds, out_names, (), opset), feeds)
    ctx = fold.FoldContext(op, attrs, opset, outputs)
    with np.errstate(all="ignore"):  # as fold.evaluate: a cast to float16 may overflow to inf
        got = fold.KERNELS[op](ctx, [None if v is None else np.asarray(v) for v in inputs])
    assert len(got) == outputs
    for name, value in zip(out_names, got, strict=True):
        expected = want[name]
        assert value.shape == expected.shape and value.dtype == expected.dtype, (op, value, expected)
        if expected.dtype.kind == "f":
            np.testing.assert_allclose(value, expected, rtol=2e-6, atol=1e-7, err_msg=op)
        else:
            np.testing.assert_array_equal(value, expected, err_msg=op)


CASES: list[tuple[str, list[Any], dict[str, Any], int, int]] = [
    # shapes
    ("Shape", [r(2, 3, 4)], {}, 13, 1),
    ("Shape", [r(2, 3, 4)], {"start": 1, "end": -1}, 17, 1),
    ("Shape", [r(2, 3, 4)], {"start": -10}, 17, 1),
    ("Size", [r(2, 3, 4)], {}, 17, 1),
    ("Gather", [r(3, 4), a([[0, -1], [2, 1]])], {"axis": 1}, 17, 1),
    ("Gather", [a([5, 6, 7]), a(-1)], {}, 17, 1),
    ("GatherElements", [r(3, 3), a([[0, -1, 2], [1, 1, -3]])], {"axis": 1}, 17, 1),
    ("Concat", [a([1, 2]), a([3]), a([], I64)], {"axis": 0}, 17, 1),
    ("Concat", [r(2, 3), r(2, 1)], {"axis": -1}, 17, 1),
    ("Unsqueeze", [r(2, 3)], {"axes": [0, -1]}, 11, 1),
    ("Unsqueeze", [r(2, 3), a([1, 3])], {}, 13, 1),
    ("Unsqueeze", [a(4), a([0])], {}, 13, 1),
    ("Squeeze", [r(1, 3, 1)], {"axes": [-1]}, 11, 1),
    ("Squeeze", [r(1, 3, 1), a([0])], {}, 13, 1),
    ("Squeeze", [r(1, 3, 1)], {}, 13, 1),
    ("Flatten", [r(2, 3, 4)], {"axis": -1}, 17, 1),
    ("Flatten", [r(2, 3, 4)], {"axis": 0}, 17, 1),
    ("Slice", [r(5, 6)], {"starts": [1, -4], "ends": [100, -1], "axes": [0, 1]}, 9, 1),
    ("Slice", [r(5, 6), a([1]), a([-1])], {}, 13, 1),
    ("Slice", [r(5, 6), a([-1, 4]), a([-(2**63), 0]), a([0, -1]), a([-1, -2])], {}, 13, 1),
    ("Slice", [r(5, 6), a([10]), a([-10]), a([1]), a([-3])], {}, 13, 1),
    ("Slice", [a([1, 2, 3, 4]), a([2**62]), a([2**63 - 1])], {}, 13, 1),
    ("Reshape", [r(2, 3, 4), a([0, -1])], {}, 13, 1),
    ("Reshape", [r(2, 3, 4), a([4, 0, 2, -1])], {}, 14, 1),
    ("Reshape", [np.zeros((0, 3), F32), a([0, 3])], {"allowzero": 1}, 14, 1),
    ("Expand", [r(3, 1), a([2, 1, 4])], {}, 13, 1),
    ("Expand", [a([[7]]), a([3])], {}, 13, 1),
    ("Tile", [a([[1, 2], [3, 4]]), a([2, 3])], {}, 13, 1),
    ("Transpose", [r(2, 3, 4)], {}, 13, 1),
    ("Transpose", [r(2, 3, 4)], {"perm": [1, 2, 0]}, 13, 1),
    ("Split", [r(6, 2)], {"split": [1, 5]}, 11, 2),
    ("Split", [r(2, 6), a([2, 4])], {"axis": 1}, 13, 2),
    ("Split", [r(6, 2)], {}, 13, 3),
    ("Split", [r(7, 2)], {"num_outputs": 3}, 18, 3),
    # types
    ("Cast", [a([-1.7, -0.5, 2.5, 3.9], F32)], {"to": TensorProto.INT32}, 17, 1),
    ("Cast", [a([-3, 0, 70000])], {"to": TensorProto.FLOAT16}, 17, 1),
    ("Cast", [a([0.0, -2.0, 0.5], F32)], {"to": TensorProto.BOOL}, 17, 1),
    ("Cast", [a([True, False], np.bool_)], {"to": TensorProto.FLOAT}, 17, 1),
    ("Cast", [a([1, 2], I32)], {"to": TensorProto.INT64}, 13, 1),
    ("CastLike", [a([1.5, -2.5], F32), a([0])], {}, 15, 1),
    # arithmetic: integer Div truncates toward zero, Mod follows the divisor unless fmod=1
    ("Add", [r(3, 1), r(4)], {}, 17, 1),
    ("Sub", [a([5, -3]), a([[1], [10]])], {}, 17, 1),
    ("Mul", [a([3, -4], I32), a(7, I32)], {}, 17, 1),
    ("Div", [r(2, 3), np.abs(r(3)) + 0.5], {}, 17, 1),
    ("Div", [a([7, -7, 7, -7, 0, 5]), a([2, 2, -2, -2, 3, -3])], {}, 17, 1),
    ("Div", [a([7, -7, 9], I32), a([2, 2, -4], I32)], {}, 17, 1),
    ("Mod", [a([7, -7, 7, -7, 0]), a([2, 2, -2, -2, 3])], {}, 17, 1),
    ("Mod", [a([7, -7, 7, -7, 0]), a([2, 2, -2, -2, 3])], {"fmod": 1}, 17, 1),
    ("Mod", [a([7.5, -7.5], F32), a([2.0, 2.0], F32)], {"fmod": 1}, 17, 1),
    ("Pow", [np.abs(r(4)) + 0.1, a([2.0, 0.5, -1.0, 3.0], F32)], {}, 17, 1),
    ("Pow", [r(4), a(2)], {}, 17, 1),
    ("Pow", [a([2, -3, 5]), a([3, 3, 0])], {}, 17, 1),
    ("Neg", [a([1, -2])], {}, 17, 1),
    ("Abs", [r(5)], {}, 17, 1),
    ("Sqrt", [np.abs(r(5))], {}, 17, 1),
    ("Exp", [r(5)], {}, 17, 1),
    ("Log", [np.abs(r(5)) + 0.1], {}, 17, 1),
    ("Floor", [r(5)], {}, 17, 1),
    ("Ceil", [r(5)], {}, 17, 1),
    ("Round", [a([0.5, 1.5, 2.5, -0.5, -1.5, 2.4, 2.6], F32)], {}, 17, 1),
    ("Sign", [a([-2.0, 0.0, 3.0], F32)], {}, 17, 1),
    ("Reciprocal", [np.abs(r(5)) + 0.5], {}, 17, 1),
    ("Sin", [r(5)], {}, 17, 1),
    ("Cos", [r(5)], {}, 17, 1),
    ("Tanh", [r(5)], {}, 17, 1),
    ("Sigmoid", [r(5)], {}, 17, 1),
    ("Relu", [r(5)], {}, 17, 1),
    ("Identity", [a([1, 2])], {}, 17, 1),
    ("IsNaN", [a([1.0, np.nan], F32)], {}, 17, 1),
    ("IsInf", [a([1.0, np.inf, -np.inf], F32)], {"detect_negative": 0}, 17, 1),
    ("Equal", [a([1, 2, 3]), a([[1], [3]])], {}, 17, 1),
    ("Less", [a([1, 2, 3]), a(2)], {}, 17, 1),
    ("Greater", [r(3), r(1)], {}, 17, 1),
    ("LessOrEqual", [a([1, 2, 3]), a(2)], {}, 17, 1),
    ("GreaterOrEqual", [a([1, 2, 3]), a(2)], {}, 17, 1),
    ("Not", [a([True, False], np.bool_)], {}, 17, 1),
    ("And", [a([True, False, True], np.bool_), a([True], np.bool_)], {}, 17, 1),
    ("Or", [a([True, False, False], np.bool_), a([False], np.bool_)], {}, 17, 1),
    ("Xor", [a([True, False], np.bool_), a([True, True], np.bool_)], {}, 17, 1),
    ("Where", [a([[True], [False]], np.bool_), a([1, 2, 3]), a(-1)], {}, 17, 1),
    ("Min", [a([1, 5]), a([[3], [0]]), a(2)], {}, 17, 1),
    ("Max", [r(2, 3), r(3)], {}, 17, 1),
    ("Sum", [r(2, 3), r(3), r(1)], {}, 17, 1),
    ("Mean", [r(2, 3), r(3)], {}, 17, 1),
    ("Clip", [r(6)], {"min": -0.5, "max": 0.5}, 6, 1),
    ("Clip", [r(6), a(-0.2, F32)], {}, 13, 1),
    ("Clip", [a([-5, 0, 5, 9]), a(-1), a(6)], {}, 13, 1),
    ("Clip", [r(6), None, a(0.1, F32)], {}, 13, 1),
    ("MatMul", [r(2, 3, 4), r(4, 5)], {}, 13, 1),
    ("MatMul", [r(4), r(4, 2)], {}, 13, 1),
    # generators
    ("Range", [a(0), a(10), a(3)], {}, 17, 1),
    ("Range", [a(10, I32), a(0, I32), a(-3, I32)], {}, 17, 1),
    ("Range", [a(5), a(0), a(1)], {}, 17, 1),
    ("Range", [a(0.1, F32), a(2.3, F32), a(0.3, F32)], {}, 17, 1),
    ("ConstantOfShape", [a([2, 3])], {"value": a([7])}, 17, 1),
    ("ConstantOfShape", [a([2])], {}, 17, 1),
    ("ConstantOfShape", [a([], I64)], {"value": a([1.5], F32)}, 17, 1),
    ("EyeLike", [r(3, 4)], {"k": 1}, 17, 1),
    ("EyeLike", [r(3, 2)], {"dtype": TensorProto.INT64}, 17, 1),
    # reductions: axes an attribute before opset 13 (ReduceSum) / 18 (the others)
    ("ReduceSum", [r(2, 3, 4)], {"axes": [0, -1], "keepdims": 0}, 11, 1),
    ("ReduceSum", [a([[1, 2], [3, 4]]), a([1])], {}, 13, 1),
    ("ReduceSum", [r(2, 3)], {"keepdims": 0}, 13, 1),
    ("ReduceSum", [r(2, 3), a([], I64)], {"noop_with_empty_axes": 1}, 13, 1),
    ("ReduceProd", [a([[1, 2], [3, 4]])], {"axes": [1]}, 13, 1),
    ("ReduceProd", [a([[1, 2], [3, 4]]), a([0])], {"keepdims": 0}, 18, 1),
    ("ReduceMax", [r(3, 4)], {"axes": [-1]}, 13, 1),
    ("ReduceMax", [r(3, 4), a([0])], {}, 18, 1),
    ("ReduceMin", [a([[1, 7], [3, -4]])], {"keepdims": 0}, 13, 1),
    ("ReduceMin", [r(3, 4)], {"noop_with_empty_axes": 1}, 18, 1),
    ("ReduceMean", [r(3, 4)], {"axes": [1]}, 13, 1),
    ("ReduceMean", [r(3, 4), a([0, 1])], {"keepdims": 0}, 18, 1),
    ("ReduceL2", [r(3, 4)], {"axes": [1]}, 13, 1),
    ("ReduceSumSquare", [r(3, 4)], {}, 13, 1),
    # ordering and selection
    ("Trilu", [r(3, 4)], {}, 17, 1),
    ("Trilu", [r(2, 3, 4), a(-1)], {"upper": 0}, 17, 1),
    ("Trilu", [a([[1, 2, 3], [4, 5, 6]]), a(1)], {"upper": 1}, 17, 1),
    ("CumSum", [r(3, 4), a(1)], {}, 17, 1),
    ("CumSum", [a([[1, 2, 3], [4, 5, 6]]), a(-1)], {"exclusive": 1}, 17, 1),
    ("CumSum", [a([1, 2, 3, 4]), a(0)], {"reverse": 1}, 17, 1),
    ("CumSum", [r(2, 3), a(0, I32)], {"reverse": 1, "exclusive": 1}, 17, 1),
    ("NonZero", [a([[0, 1, 0], [2, 0, 3]])], {}, 17, 1),
    ("NonZero", [a([0.0, 0.0], F32)], {}, 17, 1),
    # quantization: (x - zero) * scale; saturate(round_half_even(x / scale) + zero)
    ("DequantizeLinear", [a([-128, -1, 0, 127], np.int8), a(0.5, F32), a(3, np.int8)], {}, 17, 1),
    ("DequantizeLinear", [a([0, 255, 7], np.uint8), a(0.1, F32)], {}, 10, 1),
    (
        "DequantizeLinear",
        [a([[1, 2], [3, 4], [5, 6]], np.int8), a([0.5, 1.0, 2.0], F32), a([0, 1, -1], np.int8)],
        {"axis": 0},
        13,
        1,
    ),
    ("DequantizeLinear", [a([[1, -2, 3]], np.int8), a([0.5, 0.25, 2.0], F32)], {"axis": -1}, 17, 1),
    ("DequantizeLinear", [a([100000, -7], I32), a(0.5, F32)], {}, 17, 1),
    ("DequantizeLinear", [a([[1, 2, 3, 4]], np.int8), a([[0.5, 2.0]], F32)], {"axis": 1, "block_size": 2}, 21, 1),
    ("QuantizeLinear", [a([0.0, 1.0, 2.5, 3.5, -1.0, 1000.0], F32), a(1.0, F32)], {}, 13, 1),
    ("QuantizeLinear", [a([-2.5, -1.5, 0.5, 300.0, -300.0], F32), a(1.0, F32), a(1, np.int8)], {}, 17, 1),
    ("QuantizeLinear", [r(3, 2) * 10, a([0.5, 0.1], F32), a([128, 0], np.uint8)], {"axis": 1}, 17, 1),
    (
        "QuantizeLinear",
        [r(2, 4) * 10, a([[0.5, 0.1], [1, 2]], F32), a([[1, 0], [0, 2]], np.int8)],
        {"axis": 1, "block_size": 2},
        21,
        1,
    ),
]


@pytest.mark.parametrize(
    ("op", "inputs", "attrs", "opset", "outputs"),
    CASES,
    ids=[f"{case[0]}-{k}" for k, case in enumerate(CASES)],
)
def test_kernel_matches_onnxruntime(
    op: str, inputs: list[Any], attrs: dict[str, Any], opset: int, outputs: int
) -> None:
    check(op, inputs, attrs, opset, outputs)


def test_refusals_are_fold_errors() -> None:
    with pytest.raises(fold.FoldError, match="cannot reshape"):
        fold.evaluate("Reshape", [np.zeros(6), a([4, -1])], {}, 17)
    with pytest.raises(fold.FoldError, match="division by zero"):
        fold.evaluate("Div", [a([1]), a([0])], {}, 17)
    with pytest.raises(fold.FoldError, match="out of range"):
        fold.evaluate("Gather", [a([1, 2]), a(2)], {}, 17)
    # The size limit is checked before anything is allocated.
    with pytest.raises(fold.FoldTooLarge, match="1073741824 elements"):
        fold.evaluate("ConstantOfShape", [a([1 << 15, 1 << 15])], {}, 17, limit=1 << 26)
    with pytest.raises(fold.FoldTooLarge):
        fold.evaluate("Expand", [a([1.0], F32), a([1 << 15, 1 << 15])], {}, 17, limit=1 << 26)
    # No numpy kernel: onnx.reference is tried, and its failure is a FoldError too.
    assert not fold.has_kernel("Softmax")
    got = fold.evaluate("Softmax", [a([0.0, 0.0], F32)], {"axis": -1}, 17)
    np.testing.assert_allclose(got[0], [0.5, 0.5])
    with pytest.raises(fold.FoldError, match="onnx.reference cannot evaluate it"):
        fold.evaluate("NoSuchOperator", [a([1])], {}, 17)


# ---------------------------------------------------------------- folding in from_onnx


def _qdq_model() -> Any:
    """Conv + MatMul on int8 weights through DequantizeLinear (opset 17), as onnxruntime's
    quantizer writes them: onnx.reference has no DequantizeLinear for opset 17."""
    rng = np.random.default_rng(1)
    nodes = [
        helper.make_node("DequantizeLinear", ["w_q", "w_scale", "w_zero"], ["w"], axis=0),
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Flatten", ["c"], ["f"]),
        helper.make_node("DequantizeLinear", ["m_q", "m_scale", "m_zero"], ["m"]),
        helper.make_node("MatMul", ["f", "m"], ["y"]),
    ]
    inits = {
        "w_q": rng.integers(-127, 127, (4, 2, 3, 3)).astype(np.int8),
        "w_scale": np.array([0.01, 0.02, 0.03, 0.04], F32),
        "w_zero": np.zeros(4, np.int8),
        "m_q": rng.integers(0, 255, (64, 5)).astype(np.uint8),
        "m_scale": np.float32(0.005),
        "m_zero": np.uint8(128),
    }
    return make_model(nodes, {"x": r(1, 2, 4, 4)}, ["y"], inits, 17)


def ort_unoptimized(model: Any, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """onnxruntime without graph optimizations: its fusions quantize a MatMul's float
    activations on the fly (an approximation of the model's arithmetic)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, feeds), strict=True))


def test_quantized_weights_fold_and_match_onnxruntime() -> None:
    model = _qdq_model()
    graph = msm.from_onnx(model)
    assert [n.op_type for n in graph.nodes] == ["Conv", "Flatten", "MatMul"]
    assert graph.constants[graph.nodes[0].inputs[1]].dtype == np.float32
    x = r(1, 2, 4, 4)
    got = msm.compile(graph, schedule="none", threads=1).run({"x": x})["y"]
    np.testing.assert_allclose(got, ort_unoptimized(model, {"x": x})["y"], rtol=1e-4, atol=1e-5)


def test_quantize_static_model_imports(tmp_path: Any, like_onnxruntime: None) -> None:
    """A model from onnxruntime's quantizer (quantize_static, QDQ, opset 17) imports. On a CPU
    where onnxruntime sums uint8 x int8 products in saturated int16 pairs (AVX2 without VNNI),
    ours does too for the comparison: the exact sums differ from it there by several steps."""
    quantization = pytest.importorskip("onnxruntime.quantization")
    rng = np.random.default_rng(2)
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["y"]),
    ]
    inits = {"w": rng.standard_normal((4, 3, 3, 3)).astype(F32) * 0.3, "b": rng.standard_normal(4).astype(F32)}
    source, target = tmp_path / "f.onnx", tmp_path / "q.onnx"
    onnx.save(make_model(nodes, {"x": r(1, 3, 8, 8)}, ["y"], inits, 17), str(source))

    class Reader(quantization.CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            self.feeds = iter([{"x": r(1, 3, 8, 8)} for _ in range(4)])

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.feeds, None)

    quantization.quantize_static(str(source), str(target), Reader(), quant_format=quantization.QuantFormat.QDQ)
    model = onnx.load(str(target))
    assert any(n.op_type == "DequantizeLinear" for n in model.graph.node)
    graph = msm.from_onnx(model)
    x = r(1, 3, 8, 8)
    got = msm.compile(graph, schedule="none", threads=1).run({"x": x})["y"]
    want = ort_run(model, {"x": x})["y"]
    scale = float(np.max(np.abs(want))) / 127
    np.testing.assert_allclose(got, want, atol=3 * scale)  # a requantized value may land one step off


def test_reference_fallback_and_what_stays_a_kernel() -> None:
    nodes = [
        helper.make_node("Softmax", ["c"], ["s"], axis=-1),  # no numpy kernel: onnx.reference folds it
        helper.make_node("Add", ["x", "s"], ["y0"]),
        helper.make_node("Expand", ["one", "big"], ["e"]),  # 2**27 elements: over FOLD_LIMIT, stays
        helper.make_node("ReduceMax", ["e"], ["m"], keepdims=0),
        helper.make_node("Add", ["y0", "m"], ["y"]),
    ]
    inits = {"c": a([1.0, 2.0, 3.0], F32), "one": a([1.0], F32), "big": a([1 << 14, 1 << 13])}
    graph = msm.from_onnx(make_model(nodes, {"x": r(3)}, ["y"], inits))
    assert [n.op_type for n in graph.nodes] == ["Add", "Expand", "ReduceMax", "Add"]
    assert graph.infos["e"].shape == (1 << 14, 1 << 13)


def test_fold_only_operators_fold_on_constants() -> None:
    """Operators the library only computes at import fold on constants (their refusal on
    run-time values: test_import_robust.py)."""
    nodes = [
        helper.make_node("NonZero", ["mask"], ["nz"]),
        helper.make_node("Shape", ["nz"], ["s"]),
        helper.make_node("Gather", ["s", "one"], ["count"]),
        helper.make_node("Range", ["zero", "count", "one"], ["idx"]),
        helper.make_node("Cast", ["idx"], ["f"], to=TensorProto.FLOAT),
        helper.make_node("Add", ["x", "f"], ["y"]),
    ]
    inits = {"mask": a([[0, 1, 1], [1, 0, 1]]), "zero": a(0), "one": a(1)}
    model = make_model(nodes, {"x": r(4)}, ["y"], inits)
    graph = msm.from_onnx(model)
    assert [n.op_type for n in graph.nodes] == ["Add"]
    x = r(4)
    got = msm.compile(graph, schedule="none", threads=1).run({"x": x})["y"]
    np.testing.assert_allclose(got, ort_run(model, {"x": x})["y"])


def test_skip_fold_keeps_a_node() -> None:
    """The hook a graph rewrite can use (from_onnx's ``skip_fold``): a node it names stays in
    the graph although its inputs are constant."""
    from metasched.model.graph import Graph, Node, TensorInfo
    from metasched.model.onnx import _attr, _initializers, _propagate, _remove_dead

    model = _qdq_model()
    assert "DequantizeLinear" in [n.op_type for n in msm.from_onnx(model, fold_constants=False).nodes]
    nodes = [
        Node(n.op_type, n.name, list(n.input), list(n.output), {x.name: _attr(x) for x in n.attribute}, n)
        for n in model.graph.node
    ]
    infos = {"x": TensorInfo((1, 2, 4, 4), "float32")}
    graph = Graph("g", ["x"], ["y"], nodes, _initializers(model), infos, 17)
    _propagate(graph, True, lambda node: node.op_type == "DequantizeLinear" and node.outputs[0] == "w")
    _remove_dead(graph)
    assert [n.op_type for n in graph.nodes] == ["DequantizeLinear", "Conv", "Flatten", "MatMul"]
    assert graph.constants["w_q"].dtype == np.int8 and "m" in graph.constants


def test_why_a_value_was_not_folded_reaches_the_error() -> None:
    """A Range over a value left unfolded upstream (over FOLD_LIMIT) names the node and why."""
    nodes = [
        helper.make_node("Expand", ["one", "big"], ["e"], name="expand"),
        helper.make_node("ReduceSum", ["e"], ["s"], keepdims=0),
        helper.make_node("Cast", ["s"], ["n"], to=TensorProto.INT64, name="cast"),
        helper.make_node("Range", ["zero", "n", "step"], ["y"], name="range"),
    ]
    inits = {"one": a([1.0], F32), "big": a([1 << 14, 1 << 13]), "zero": a(0), "step": a(1)}
    with pytest.raises(
        msm.ModelImportError,
        match=r"Range node 'range' \(opset 17\): its input 'n' \(from Cast node 'cast', which was not folded: its "
        r"result would have 134217728 elements, more than the folding limit 67108864\)",
    ):
        msm.from_onnx(make_model(nodes, {}, ["y"], inits))
