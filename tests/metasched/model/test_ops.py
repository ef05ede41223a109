"""Every operator against onnxruntime on small shapes: broadcasting, odd sizes, negative axes,
opset differences. Unscheduled programs (schedule="none") keep these fast; test_models.py runs
the default schedules."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from model_testing import assert_close, make_model, ort_run  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from metasched import model as msm  # noqa: E402

RNG = np.random.default_rng(0)
F = TensorProto.FLOAT


def check(nodes, inputs, outputs=("y",), inits=(), opset=17, schedule="none", rtol=1e-4):  # type: ignore[no-untyped-def]
    model = make_model(nodes, inputs, list(outputs), inits, opset)
    want = ort_run(model, inputs)
    compiled = msm.compile(msm.from_onnx(model), schedule=schedule, threads=1)
    got = compiled.run(inputs)
    for name in outputs:
        assert got[name].shape == want[name].shape, name
        if want[name].dtype == np.float32:
            assert_close(got[name], want[name], rtol=rtol, name=name)
        else:
            np.testing.assert_array_equal(got[name], want[name])
    return compiled


def r(*shape, dtype="float32"):  # type: ignore[no-untyped-def]
    return RNG.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize(
    "op", ["Add", "Sub", "Mul", "Div", "Max", "Min", "Sum", "PRelu"]
)
def test_binary_broadcast(op):  # type: ignore[no-untyped-def]
    b = r(1, 5)
    if op == "Div":
        b = np.abs(b) + 0.5
    check([helper.make_node(op, ["a", "b"], ["y"])], {"a": r(3, 1, 5), "b": b})


def test_pow_and_comparisons_where():  # type: ignore[no-untyped-def]
    nodes = [
        helper.make_node("Pow", ["a", "two"], ["p"]),
        helper.make_node("Less", ["a", "b"], ["lt"]),
        helper.make_node("Greater", ["a", "b"], ["gt"]),
        helper.make_node("Equal", ["a", "a"], ["eq"]),
        helper.make_node("Not", ["lt"], ["nlt"]),
        helper.make_node("Where", ["nlt", "p", "b"], ["y"]),
    ]
    check(nodes, {"a": r(2, 3, 7), "b": r(7)}, outputs=("y", "gt", "eq"), inits={"two": np.float32(2.0)})


@pytest.mark.parametrize(
    "op,attrs",
    [("Relu", {}), ("Sqrt", {}), ("Reciprocal", {}), ("Exp", {}), ("Log", {}), ("Erf", {}), ("Tanh", {}),
     ("Sigmoid", {}), ("HardSigmoid", {"alpha": 0.3}), ("HardSwish", {}), ("LeakyRelu", {"alpha": 0.2}),
     ("Neg", {}), ("Abs", {}), ("Floor", {}), ("Round", {}), ("Elu", {}), ("Softplus", {})],
)
def test_unary(op, attrs):  # type: ignore[no-untyped-def]
    x = r(3, 17)
    if op in ("Sqrt", "Log", "Reciprocal"):
        x = np.abs(x) + 0.1
    if op == "Round":
        x = np.array([[0.5, 1.5, 2.5, -0.5, -1.5, 0.4, 2.6]], dtype=np.float32)
    check([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": x})


def test_clip_cast_opsets():  # type: ignore[no-untyped-def]
    check([helper.make_node("Clip", ["x", "lo", "hi"], ["y"])], {"x": r(4, 5)},
          inits={"lo": np.float32(-0.5), "hi": np.float32(0.7)})
    check([helper.make_node("Clip", ["x"], ["y"], min=-0.2, max=0.3)], {"x": r(4, 5)}, opset=9)
    check([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.INT32)], {"x": r(4, 5) * 10})


@pytest.mark.parametrize("group,stride,pads,dil", [(1, 1, [1, 1, 1, 1], 1), (2, 2, [0, 1, 2, 0], 1),
                                                    (6, 1, [1, 1, 1, 1], 2)])
def test_conv(group, stride, pads, dil):  # type: ignore[no-untyped-def]
    w = r(6, 6 // group, 3, 3)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], group=group, strides=[stride, stride], pads=pads,
                            dilations=[dil, dil])
    check([node], {"x": r(2, 6, 9, 11)}, inits={"w": w, "b": r(6)})


def test_conv_auto_pad_1d_and_bn_folding():  # type: ignore[no-untyped-def]
    check([helper.make_node("Conv", ["x", "w"], ["y"], auto_pad="SAME_UPPER", strides=[2])], {"x": r(1, 3, 10)},
          inits={"w": r(4, 3, 3)})
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "s", "bb", "m", "v"], ["n"]),
             helper.make_node("Relu", ["n"], ["y"])]
    inits = {"w": r(4, 3, 3, 3), "s": r(4), "bb": r(4), "m": r(4), "v": np.abs(r(4)) + 0.5}
    model = make_model(nodes, {"x": r(1, 3, 6, 6)}, ["y"], inits)
    graph = msm.from_onnx(model)
    assert [n.op_type for n in graph.nodes] == ["Conv", "Relu"]  # BN folded
    check(nodes, {"x": r(1, 3, 6, 6)}, inits=inits)


def test_conv_transpose():  # type: ignore[no-untyped-def]
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], strides=[2, 2], pads=[1, 0, 1, 0],
                            output_padding=[1, 0])
    check([node], {"x": r(1, 4, 5, 6)}, inits={"w": r(4, 3, 3, 3), "b": r(3)})


def test_matmul_gemm():  # type: ignore[no-untyped-def]
    check([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": r(2, 1, 3, 5), "b": r(4, 5, 7)})
    check([helper.make_node("MatMul", ["a", "b"], ["y"])], {"a": r(5), "b": r(2, 5, 3)})
    check([helper.make_node("Gemm", ["a", "b", "c"], ["y"], transA=1, transB=1, alpha=0.5, beta=2.0)],
          {"a": r(5, 3)}, inits={"b": r(4, 5), "c": r(4)})


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("ceil,pads,include", [(0, [1, 1, 1, 1], 0), (1, [0, 0, 1, 1], 1), (1, [0, 0, 0, 0], 0)])
def test_pool(op, ceil, pads, include):  # type: ignore[no-untyped-def]
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": pads, "ceil_mode": ceil}
    if op == "AveragePool":
        attrs["count_include_pad"] = include
    check([helper.make_node(op, ["x"], ["y"], **attrs)], {"x": r(1, 2, 8, 9)})


def test_global_pools_and_lrn():  # type: ignore[no-untyped-def]
    check([helper.make_node("GlobalAveragePool", ["x"], ["a"]), helper.make_node("GlobalMaxPool", ["x"], ["y"])],
          {"x": r(2, 3, 5, 7)}, outputs=("a", "y"))
    check([helper.make_node("LRN", ["x"], ["y"], size=3, alpha=1e-2, beta=0.75, bias=1.0)], {"x": r(1, 5, 3, 3)})


@pytest.mark.parametrize("op", ["ReduceMean", "ReduceSum", "ReduceMax"])
def test_reductions(op):  # type: ignore[no-untyped-def]
    check([helper.make_node(op, ["x"], ["y"], axes=[-1, 1], keepdims=0)], {"x": r(2, 3, 5)}, opset=11)
    check([helper.make_node(op, ["x", "axes"], ["y"], keepdims=1)], {"x": r(2, 3, 5)}, opset=18,
          inits={"axes": np.array([-2], np.int64)})


def test_softmax_layernorm():  # type: ignore[no-untyped-def]
    check([helper.make_node("Softmax", ["x"], ["y"], axis=-2)], {"x": r(2, 3, 5)})
    check([helper.make_node("Softmax", ["x"], ["y"], axis=1)], {"x": r(2, 3, 5)}, opset=11)
    check([helper.make_node("LogSoftmax", ["x"], ["y"])], {"x": r(2, 7)})
    check([helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], axis=-1, epsilon=1e-5)],
          {"x": r(2, 3, 8)}, inits={"s": r(8), "b": r(8)})


def test_shape_ops():  # type: ignore[no-untyped-def]
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], perm=[0, 2, 1]),
        helper.make_node("Reshape", ["t", "shape"], ["rs"]),
        helper.make_node("Flatten", ["rs"], ["f"], axis=1),
        helper.make_node("Unsqueeze", ["f", "ax"], ["u"]),
        helper.make_node("Squeeze", ["u", "ax"], ["y"]),
    ]
    check(nodes, {"x": r(2, 3, 4)}, inits={"shape": np.array([0, -1, 3], np.int64), "ax": np.array([-1], np.int64)})


def test_concat_split_slice():  # type: ignore[no-untyped-def]
    nodes = [
        helper.make_node("Concat", ["a", "b"], ["c"], axis=-1),
        helper.make_node("Split", ["c", "sp"], ["s0", "s1"], axis=2),
        helper.make_node("Slice", ["s1", "st", "en", "ax", "step"], ["y"]),
    ]
    inits = {"sp": np.array([2, 5], np.int64), "st": np.array([-1, 0], np.int64),
             "en": np.array([-100, 2], np.int64), "ax": np.array([2, 1], np.int64),
             "step": np.array([-2, 1], np.int64)}
    check(nodes, {"a": r(2, 3, 3), "b": r(2, 3, 4)}, outputs=("y", "s0"), inits=inits)


def test_gather_expand_tile_pad():  # type: ignore[no-untyped-def]
    check([helper.make_node("Gather", ["x", "i"], ["y"], axis=1)], {"x": r(3, 5, 2), "i": np.array([[0, -1], [4, 2]])})
    check([helper.make_node("Expand", ["x", "s"], ["y"])], {"x": r(3, 1)}, inits={"s": np.array([2, 3, 4], np.int64)})
    check([helper.make_node("Tile", ["x", "s"], ["y"])], {"x": r(2, 3)}, inits={"s": np.array([2, 3], np.int64)})
    for mode in ("constant", "reflect", "edge"):
        check([helper.make_node("Pad", ["x", "p", "v"], ["y"], mode=mode)], {"x": r(1, 3, 4)},
              inits={"p": np.array([0, 1, 2, 0, 2, 1], np.int64), "v": np.float32(0.5)})


@pytest.mark.parametrize("mode,ctm", [("nearest", "asymmetric"), ("nearest", "half_pixel"),
                                      ("linear", "half_pixel"), ("linear", "align_corners")])
def test_resize(mode, ctm):  # type: ignore[no-untyped-def]
    node = helper.make_node("Resize", ["x", "", "sc"], ["y"], mode=mode, coordinate_transformation_mode=ctm)
    check([node], {"x": r(1, 2, 3, 5)}, inits={"sc": np.array([1, 1, 2.0, 1.5], np.float32)})


def test_quantization():  # type: ignore[no-untyped-def]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])]
    check(nodes, {"x": r(3, 8) * 3}, outputs=("y", "q"), inits={"s": np.float32(0.05), "z": np.uint8(128)})
    a = RNG.integers(0, 255, (3, 6)).astype(np.uint8)
    b = RNG.integers(0, 255, (6, 4)).astype(np.uint8)
    check([helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])], {"a": a, "b": b},
          inits={"az": np.uint8(3), "bz": np.uint8(7)})
    x = RNG.integers(0, 255, (1, 2, 5, 5)).astype(np.uint8)
    check([helper.make_node("ConvInteger", ["x", "w", "xz"], ["y"], pads=[1, 1, 1, 1])], {"x": x},
          inits={"w": RNG.integers(0, 255, (3, 2, 3, 3)).astype(np.uint8), "xz": np.uint8(5)})


def test_constant_folding_shape_chain():  # type: ignore[no-untyped-def]
    nodes = [
        helper.make_node("Shape", ["x"], ["sh"]),
        helper.make_node("Gather", ["sh", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "ax"], ["nu"]),
        helper.make_node("Concat", ["nu", "m1"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y0"]),
        helper.make_node("ConstantOfShape", ["target2"], ["ones"], value=numpy_helper.from_array(np.ones(1, np.float32))),
        helper.make_node("Add", ["y0", "ones"], ["y"]),
    ]
    inits = {"zero": np.array(0, np.int64), "ax": np.array([0], np.int64), "m1": np.array([-1], np.int64),
             "target2": np.array([1, 12], np.int64)}
    model = make_model(nodes, {"x": r(2, 3, 4)}, ["y"], inits)
    graph = msm.from_onnx(model)
    assert [n.op_type for n in graph.nodes] == ["Reshape", "Add"]
    check(nodes, {"x": r(2, 3, 4)}, inits=inits)


# ---------------------------------------------------------------- errors


def test_unsupported_operator_named_before_work():  # type: ignore[no-untyped-def]
    model = make_model([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("NonMaxSuppression", ["a"], ["y"],
                                                                                  name="nms")],
                       {"x": r(2)}, ["y"])
    with pytest.raises(msm.UnsupportedOperatorError, match=r"'NonMaxSuppression'.*'nms'.*opset 17"):
        msm.from_onnx(model)


def test_symbolic_dimension_needs_binding():  # type: ignore[no-untyped-def]
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "t",
                              [helper.make_tensor_value_info("x", F, ["batch", 4])],
                              [helper.make_tensor_value_info("y", F, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    with pytest.raises(msm.ModelImportError, match=r"input 'x' dimension 0 'batch'"):
        msm.from_onnx(model)
    with pytest.raises(msm.ModelImportError, match=r"dimension 1 is fixed at 4"):
        msm.from_onnx(model, input_shapes={"x": (2, 5)})
    assert msm.from_onnx(model, input_shapes={"x": (3, 4)}).infos["y"].shape == (3, 4)


def test_broken_file(tmp_path):  # type: ignore[no-untyped-def]
    path = tmp_path / "broken.onnx"
    path.write_bytes(b"\x08\x07garbage\xff\xff")
    with pytest.raises(msm.ModelImportError, match="broken.onnx"):
        msm.from_onnx(str(path))


def test_wrong_inputs_named(tmp_path):  # type: ignore[no-untyped-def]
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], {"x": r(2, 3)}, ["y"])
    compiled = msm.compile(msm.from_onnx(model), schedule="none")
    with pytest.raises(ValueError, match="unknown input.*'z'"):
        compiled.run({"x": r(2, 3), "z": r(1)})
    with pytest.raises(ValueError, match=r"input 'x' has shape \(3, 3\)"):
        compiled.run({"x": r(3, 3)})
    with pytest.raises(TypeError, match="input 'x' has dtype float64"):
        compiled.run({"x": r(2, 3).astype(np.float64)})
    with pytest.raises(ValueError, match="missing input 'x'"):
        compiled.run({})
