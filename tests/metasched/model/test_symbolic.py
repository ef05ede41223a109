"""Symbolic dimensions in the model path (issue 18): a dim_param kept symbolic compiles once, is
scheduled for a representative size, and runs for other sizes, matching onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from model_testing import assert_close, ort_run  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from metasched import model as msm  # noqa: E402
from metasched.cli.demo_model import light_model_path, randomize_weights  # noqa: E402


def _init(name, array):
    return numpy_helper.from_array(np.asarray(array, dtype=np.float32), name)


def cnn_classifier(seed=0):
    rng = np.random.default_rng(seed)
    inits = [
        _init("w1", rng.standard_normal((8, 3, 3, 3)) * 0.3),
        _init("b1", rng.standard_normal(8) * 0.1),
        _init("w2", rng.standard_normal((16, 8, 3, 3)) * 0.2),
        _init("b2", rng.standard_normal(16) * 0.1),
        _init("fc_w", rng.standard_normal((10, 16)) * 0.3),
        _init("fc_b", rng.standard_normal(10) * 0.1),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"], axis=1),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["logits"], transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 16, 16])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", 10])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=10)


def line_recognizer(seed=0, classes=12):
    """1x1x32xW image -> conv stack (one stride-2) -> (W', features) -> MatMul per column -> Softmax."""
    rng = np.random.default_rng(seed)
    inits = [
        _init("w1", rng.standard_normal((4, 1, 3, 3)) * 0.4),
        _init("b1", rng.standard_normal(4) * 0.1),
        _init("w2", rng.standard_normal((8, 4, 3, 3)) * 0.3),
        _init("b2", rng.standard_normal(8) * 0.1),
        _init("cls_w", rng.standard_normal((8 * 8, classes)) * 0.2),
        _init("cls_b", rng.standard_normal(classes) * 0.1),
        numpy_helper.from_array(np.array([0, 8 * 8, -1], np.int64), "seq_shape"),
    ]
    nodes = [
        helper.make_node("Conv", ["img", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),  # 16 x W/2
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[0, 1, 0, 1], strides=[2, 1]),  # 7 x W/2
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Pad", ["r2", "pads"], ["r2p"]),  # 8 x W/2
        helper.make_node("Reshape", ["r2p", "seq_shape"], ["seq"]),  # 1 x 64 x W'
        helper.make_node("Transpose", ["seq"], ["cols"], perm=[0, 2, 1]),  # 1 x W' x 64
        helper.make_node("MatMul", ["cols", "cls_w"], ["mm"]),
        helper.make_node("Add", ["mm", "cls_b"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=-1),
    ]
    inits.append(numpy_helper.from_array(np.array([0, 0, 0, 0, 0, 0, 1, 0], np.int64), "pads"))
    graph = helper.make_graph(
        nodes,
        "line",
        [helper.make_tensor_value_info("img", TensorProto.FLOAT, [1, 1, 32, "W"])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, "Wout", classes])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=10)


def _rand(*shape: int) -> np.ndarray:
    return np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)


@pytest.fixture(scope="module")
def classifier():  # type: ignore[no-untyped-def]
    model = cnn_classifier()
    return model, msm.compile(model, symbolic={"N": 4})


@pytest.fixture(scope="module")
def recognizer():  # type: ignore[no-untyped-def]
    model = line_recognizer()
    return model, msm.compile(model, symbolic={"W": 100})


def test_classifier_symbolic_batch_one_build_every_batch(classifier):  # type: ignore[no-untyped-def]
    model, compiled = classifier
    assert compiled.input_specs == {"x": (("N", 3, 16, 16), "float32")}
    assert all(task.schedule != "unscheduled" for task in compiled.report.tasks)
    library = compiled.library_path
    for n in (1, 2, 5, 16):
        feeds = {"x": _rand(n, 3, 16, 16)}
        got = compiled.run(feeds)
        assert got["probs"].shape == (n, 10)
        assert_close(got["probs"], ort_run(model, feeds)["probs"], name=f"batch {n}")
    assert compiled.library_path == library  # no rebuild


def test_classifier_symbolic_save_load(classifier, tmp_path):  # type: ignore[no-untyped-def]
    model, compiled = classifier
    loaded = msm.load(compiled.save(tmp_path / "m"))
    for n in (3, 1):
        feeds = {"x": _rand(n, 3, 16, 16)}
        assert_close(loaded.run(feeds)["probs"], ort_run(model, feeds)["probs"], name=f"loaded batch {n}")


def test_fixed_batch_unchanged_without_symbolic():  # type: ignore[no-untyped-def]
    with pytest.raises(msm.ModelImportError, match=r"symbolic=\{'N': size\}"):
        msm.from_onnx(cnn_classifier())
    graph = msm.from_onnx(cnn_classifier(), input_shapes={"x": (2, 3, 16, 16)})
    assert graph.symbolic == {} and graph.infos["probs"].shape == (2, 10)


def test_line_recognizer_symbolic_width(recognizer):  # type: ignore[no-untyped-def]
    model, compiled = recognizer
    for width in (8, 37, 100, 257):  # odd widths: the pooling floors, the sequence is W // 2 long
        feeds = {"img": _rand(1, 1, 32, width)}
        got = compiled.run(feeds)["probs"]
        assert got.shape == (1, width // 2, 12)
        assert_close(got, ort_run(model, feeds)["probs"], name=f"width {width}")


def test_reports_say_where_each_schedule_came_from(recognizer):  # type: ignore[no-untyped-def]
    _, compiled = recognizer
    sources = [task.schedule for task in compiled.report.tasks]
    assert any(s.startswith("default (W=100)") for s in sources), sources
    for source in sources:  # a fallback always gives its reason
        assert source.startswith("default (W=100)") or "did not replay" in source, source


# ---------------------------------------------------------------- errors


def test_fixed_dimension_mismatch_names_input_and_dimension(classifier):  # type: ignore[no-untyped-def]
    _, compiled = classifier
    with pytest.raises(ValueError, match=r"input 'x' has shape \(2, 3, 15, 16\).*dimension 2 must be 16"):
        compiled.run({"x": _rand(2, 3, 15, 16)})
    with pytest.raises(ValueError, match=r"input 'x' dimension 0 \(N\) is 0"):
        compiled.run({"x": np.zeros((0, 3, 16, 16), np.float32)})
    with pytest.raises(ValueError, match="rank 4"):
        compiled.run({"x": _rand(3, 16, 16)})


def _two_inputs() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "y"], ["z"])],
        "two",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4]),
            helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4]),
        ],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", 4])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=10)


def test_inputs_that_disagree_on_a_symbolic_dimension():  # type: ignore[no-untyped-def]
    compiled = msm.compile(_two_inputs(), symbolic={"N": 8})
    x, y = _rand(3, 4), _rand(3, 4)
    np.testing.assert_allclose(compiled.run({"x": x, "y": y})["z"], x + y)
    with pytest.raises(ValueError, match=r"input 'y' dimension 0 \(N\) is 5, but input 'x' gives N = 3"):
        compiled.run({"x": x, "y": _rand(5, 4)})


def test_too_small_for_the_model(recognizer):  # type: ignore[no-untyped-def]
    _, compiled = recognizer
    with pytest.raises(ValueError, match="W=1 is too small for this model"):
        compiled.run({"img": _rand(1, 1, 32, 1)})


def test_bad_symbolic_options():  # type: ignore[no-untyped-def]
    with pytest.raises(msm.ModelImportError, match="'B', which is no dim_param.*'N'"):
        msm.from_onnx(cnn_classifier(), symbolic={"B": 4})
    with pytest.raises(msm.ModelImportError, match="representative size"):
        msm.from_onnx(cnn_classifier(), symbolic={"N": 0})
    with pytest.raises(msm.ModelImportError, match="dimension 0 is the symbolic 'N'"):
        msm.from_onnx(cnn_classifier(), input_shapes={"x": (2, 3, 16, 16)}, symbolic={"N": 4})
    graph = msm.from_onnx(cnn_classifier(), input_shapes={"x": ("N", 3, 16, 16)}, symbolic={"N": 4})
    with pytest.raises(ValueError, match="pass symbolic to from_onnx"):
        msm.compile(graph, symbolic={"N": 8})


def test_shape_computation_on_a_symbolic_dimension_is_refused():  # type: ignore[no-untyped-def]
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Reshape", ["x", "s"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "shape",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=10)
    with pytest.raises(msm.ModelImportError, match=r"Shape node .* depends on the symbolic N"):
        msm.from_onnx(model, symbolic={"N": 2})


def _one_node(node, x_shape, y_shape=None, initializers=()):  # type: ignore[no-untyped-def]
    graph = helper.make_graph(
        [node],
        node.op_type,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)],
        list(initializers),
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=10)


def test_global_average_pool_over_a_symbolic_width():  # type: ignore[no-untyped-def]
    model = _one_node(helper.make_node("GlobalAveragePool", ["x"], ["y"]), [1, 2, 4, "W"], [1, 2, 1, 1])
    compiled = msm.compile(model, symbolic={"W": 16})
    for width in (3, 16, 40):
        feeds = {"x": _rand(1, 2, 4, width)}
        assert_close(compiled.run(feeds)["y"], ort_run(model, feeds)["y"], name=f"width {width}")


def test_operator_that_cannot_take_a_symbolic_dimension_is_named():  # type: ignore[no-untyped-def]
    scales = helper.make_tensor("scales", TensorProto.FLOAT, [4], [1, 1, 2, 2])
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="nearest")
    model = _one_node(node, [1, 2, 4, "W"], None, [scales])
    with pytest.raises(
        msm.ModelImportError, match=r"Resize node .*cannot take the symbolic input shape.*\(1, 2, 4, W\)"
    ):
        msm.from_onnx(model, symbolic={"W": 16})


@pytest.mark.slow
def test_light_squeezenet_with_symbolic_batch():  # type: ignore[no-untyped-def]
    model = randomize_weights(onnx.load(light_model_path("squeezenet")))
    for value in [*model.graph.input, *model.graph.output]:
        dims = value.type.tensor_type.shape.dim
        if dims:
            dims[0].Clear()
            dims[0].dim_param = "N"
    compiled = msm.compile(model, symbolic={"N": 1})
    name = compiled.plan.inputs[0]
    for n in (1, 3):
        feeds = {name: _rand(n, 3, 224, 224)}
        want = ort_run(model, feeds, threads=2)
        got = compiled.run(feeds)
        for key, value in want.items():
            assert_close(got[key], value, name=f"squeezenet batch {n}:{key}")
