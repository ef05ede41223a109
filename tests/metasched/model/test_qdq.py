"""QDQ models (onnxruntime's ``quantize_static``, QDQ format, uint8 activations, int8 weights):
import, integer kernels (``metasched.model.qdq``), outputs within one quantization step of
onnxruntime's, tensorization candidates of the integer tasks, a few tuning trials."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
quantization = pytest.importorskip("onnxruntime.quantization")

from model_testing import make_model, ort_run  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

import metasched  # noqa: E402
from metasched import model as msm  # noqa: E402
from metasched.model.qdq import QADD, QCONV, QMATMUL, onnxruntime_saturates_pairs  # noqa: E402

RNG = np.random.default_rng(0)
#: The share of outputs within one quantization step of onnxruntime's that the issue asks for.
SHARE = 0.999


# ---------------------------------------------------------------- building QDQ models


class _Reader(quantization.CalibrationDataReader):  # type: ignore[misc,name-defined]
    def __init__(self, shapes: dict[str, tuple[int, ...]], batches: int = 4) -> None:
        rng = np.random.default_rng(7)
        self.batches = iter(
            [{k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()} for _ in range(batches)]
        )

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self.batches, None)


def _quantize_static(model, shapes, tmp_path, per_channel=True, weight_type="QInt8", **extra):  # type: ignore[no-untyped-def]
    """onnxruntime's QDQ quantization of ``model`` (uint8 activations) calibrated on random inputs."""
    src, dst = tmp_path / "float.onnx", tmp_path / "qdq.onnx"
    onnx.save(model, str(src))
    quantization.quantize_static(
        str(src),
        str(dst),
        _Reader(shapes),
        quant_format=quantization.QuantFormat.QDQ,
        activation_type=quantization.QuantType.QUInt8,
        weight_type=getattr(quantization.QuantType, weight_type),
        per_channel=per_channel,
        extra_options=extra or None,
    )
    return onnx.load(str(dst))


def _w(*shape: int) -> np.ndarray:
    fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    return (RNG.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32)


def _b(n: int) -> np.ndarray:
    return (RNG.standard_normal(n) * 0.1).astype(np.float32)


def _residual_net():  # type: ignore[no-untyped-def]
    """Conv + Relu, Conv + residual Add + Relu, strided Conv, MaxPool, Flatten, Gemm."""
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c2", "r1"], ["a2"]),
        helper.make_node("Relu", ["a2"], ["r2"]),
        helper.make_node("Conv", ["r2", "w3", "b3"], ["c3"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("MaxPool", ["c3"], ["p3"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p3"], ["f"]),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["y"], transB=1),
    ]
    inits = {"w1": _w(16, 3, 3, 3), "b1": _b(16), "w2": _w(16, 16, 3, 3), "b2": _b(16), "w3": _w(24, 16, 3, 3)}
    inits |= {"b3": _b(24), "wf": _w(10, 24 * 4 * 4), "bf": _b(10)}
    x = np.zeros((1, 3, 16, 16), np.float32)
    return make_model(nodes, {"x": x}, ["y"], inits), {"x": x.shape}


def _depthwise_net():  # type: ignore[no-untyped-def]
    """Pointwise Conv, depthwise 3x3 Conv (stride 2), pointwise Conv: a MobileNet block."""
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "wd", "bd"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2], group=32),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Conv", ["r2", "w3"], ["y"]),
    ]
    inits = {"w1": _w(32, 8, 1, 1), "b1": _b(32), "wd": _w(32, 1, 3, 3), "bd": _b(32), "w3": _w(16, 32, 1, 1)}
    x = np.zeros((1, 8, 14, 14), np.float32)
    return make_model(nodes, {"x": x}, ["y"], inits), {"x": x.shape}


def _matmul_net():  # type: ignore[no-untyped-def]
    """A transformer-style feed-forward: MatMul (3-D activations) + bias Add, Relu, MatMul."""
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["m1"]),
        helper.make_node("Add", ["m1", "b1"], ["a1"]),
        helper.make_node("Relu", ["a1"], ["r1"]),
        helper.make_node("MatMul", ["r1", "w2"], ["y"]),
    ]
    inits = {"w1": _w(64, 32).T.copy(), "b1": _b(64), "w2": _w(24, 64).T.copy()}
    x = np.zeros((2, 12, 32), np.float32)
    return make_model(nodes, {"x": x}, ["y"], inits), {"x": x.shape}


def _compare(model, shapes, seed: int = 1):  # type: ignore[no-untyped-def]
    """Compile ``model`` with default schedules and compare with onnxruntime: per output, the
    share of values within one quantization step and the largest difference in steps."""
    graph = msm.from_onnx(model)
    compiled = msm.compile(graph, threads=2)
    rng = np.random.default_rng(seed)
    feeds = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in shapes.items()}
    want = ort_run(model, feeds, threads=2)
    got = compiled.run(feeds)
    constants = {init.name: numpy_helper.to_array(init) for init in model.graph.initializer}
    producers = {out: node for node in model.graph.node for out in node.output}
    results = {}
    for name, value in want.items():
        step = float(constants[producers[name].input[1]])
        diff = np.abs(got[name].astype(np.float64) - value.astype(np.float64))
        results[name] = (float(np.mean(diff <= step * 1.0001)), float(diff.max() / step))
    return graph, results


def _op_types(graph) -> set[str]:  # type: ignore[no-untyped-def]
    return {node.op_type for node in graph.nodes}


# ---------------------------------------------------------------- the failure


def test_qdq_conv_imports_instead_of_failing_in_folding(tmp_path):  # type: ignore[no-untyped-def]
    """The reported failure: onnx.reference has no DequantizeLinear for opset 17, and folding
    the constant weights' DequantizeLinear raised its raw RuntimeError."""
    model, shapes = _depthwise_net()
    qdq = _quantize_static(model, shapes, tmp_path)
    assert qdq.opset_import[0].version == 17
    graph = msm.from_onnx(qdq)
    assert _op_types(graph) >= {QCONV}
    assert not _op_types(graph) & {"Conv", "MatMul", "Gemm"}


# ---------------------------------------------------------------- whole small models


@pytest.mark.parametrize("per_channel", [True, False], ids=["per_channel", "per_tensor"])
def test_residual_conv_gemm_match_onnxruntime(tmp_path, per_channel, like_onnxruntime):  # type: ignore[no-untyped-def]
    model, shapes = _residual_net()
    qdq = _quantize_static(model, shapes, tmp_path, per_channel=per_channel)
    graph, results = _compare(qdq, shapes)
    assert {QCONV, QMATMUL, QADD} <= _op_types(graph)
    assert not _op_types(graph) & {"Conv", "Gemm", "Add"}
    for name, (share, steps) in results.items():
        assert share >= SHARE and steps <= 1.0001, (name, share, steps)


def test_depthwise_conv_matches_onnxruntime(tmp_path, like_onnxruntime):  # type: ignore[no-untyped-def]
    model, shapes = _depthwise_net()
    qdq = _quantize_static(model, shapes, tmp_path)
    graph, results = _compare(qdq, shapes)
    assert [n.op_type for n in graph.nodes].count(QCONV) == 3
    for name, (share, steps) in results.items():
        assert share >= SHARE and steps <= 1.0001, (name, share, steps)


def test_matmul_matches_onnxruntime(tmp_path, like_onnxruntime):  # type: ignore[no-untyped-def]
    model, shapes = _matmul_net()
    qdq = _quantize_static(model, shapes, tmp_path)
    graph, results = _compare(qdq, shapes)
    assert [n.op_type for n in graph.nodes].count(QMATMUL) == 2
    for name, (share, steps) in results.items():
        assert share >= SHARE and steps <= 1.0001, (name, share, steps)


def test_uint8_weights_subtract_zero_points_inside(tmp_path, like_onnxruntime):  # type: ignore[no-untyped-def]
    """uint8 weights have a nonzero zero point: subtracted in the reduction (still exact)."""
    model, shapes = _depthwise_net()
    qdq = _quantize_static(model, shapes, tmp_path, per_channel=False, weight_type="QUInt8")
    graph, results = _compare(qdq, shapes)
    fused = [n for n in graph.nodes if n.op_type == QCONV]
    assert fused and any(n.attrs["w_zero_point"] != 0 for n in fused)
    for name, (share, steps) in results.items():
        assert share >= SHARE and steps <= 1.0001, (name, share, steps)


# ---------------------------------------------------------------- hand-made QDQ patterns


def _qdq_conv_model(between: list, x_zero: int = 128, y_zero: int = 100):  # type: ignore[no-untyped-def]
    """x (uint8 input) -> DQ -> Conv(DQ(W int8 per channel), DQ(b int32)) -> between... -> Q -> DQ -> y."""
    w = RNG.integers(-127, 128, (6, 4, 3, 3)).astype(np.int8)
    sw = (RNG.random(6) * 0.01 + 0.002).astype(np.float32)
    sx = np.float32(0.02)
    inits = {
        "sx": sx,
        "zx": np.uint8(x_zero),
        "w": w,
        "sw": sw,
        "zw": np.zeros(6, np.int8),
        "b": RNG.integers(-2000, 2000, 6).astype(np.int32),
        "sb": (sx * sw).astype(np.float32),
        "zb": np.zeros(6, np.int32),
        "sy": np.float32(0.05),
        "zy": np.uint8(y_zero),
    }
    nodes = [
        helper.make_node("DequantizeLinear", ["x", "sx", "zx"], ["xf"]),
        helper.make_node("DequantizeLinear", ["w", "sw", "zw"], ["wf"], axis=0),
        helper.make_node("DequantizeLinear", ["b", "sb", "zb"], ["bf"], axis=0),
        helper.make_node("Conv", ["xf", "wf", "bf"], ["c0"], pads=[1, 0, 1, 2], strides=[1, 2]),
    ]
    value = "c0"
    for k, (op, extra) in enumerate(between):
        nodes.append(helper.make_node(op, [value, *extra], [f"e{k}"]))
        value = f"e{k}"
    nodes += [
        helper.make_node("QuantizeLinear", [value, "sy", "zy"], ["yq"]),
        helper.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["y"]),
    ]
    x = RNG.integers(0, 256, (1, 4, 9, 9)).astype(np.uint8)
    return make_model(nodes, {"x": x}, ["y", "yq"], inits), {"x": x}


@pytest.mark.parametrize(
    "between",
    [[], [("Relu", [])], [("Clip", ["lo", "hi"])], [("Relu", []), ("Clip", ["", "hi"])]],
    ids=["plain", "relu", "clip", "relu_clip"],
)
def test_hand_made_pattern_folds_relu_and_clip_exactly(between, like_onnxruntime):  # type: ignore[no-untyped-def]
    model, feeds = _qdq_conv_model(between)
    bounds = {"lo": np.float32(-0.7), "hi": np.float32(1.1)}
    for name, value in bounds.items():
        model.graph.initializer.append(numpy_helper.from_array(value, name))
    graph = msm.from_onnx(model)
    (fused,) = [n for n in graph.nodes if n.op_type == QCONV]
    assert not _op_types(graph) & {"Conv", "Relu", "Clip"}
    # a Relu or Clip that clips (y_zero 100) keeps onnxruntime in float: no pairs to match there
    assert bool(fused.attrs.get("int16_pairs")) == (onnxruntime_saturates_pairs() and not between)
    got = msm.compile(graph, threads=1).run(feeds)
    want = ort_run(model, feeds)
    np.testing.assert_array_equal(got["yq"], want["yq"])
    np.testing.assert_array_equal(got["y"], want["y"])


@pytest.mark.parametrize(
    "a_shape, b_shape",
    [((1, 16, 8, 8), (1, 16, 8, 8)), ((1, 16, 8, 8), (1,)), ((1,), (1, 16, 8, 8)), ((1, 16, 8, 8), (1, 16, 1, 1))],
    ids=["same", "scalar_b", "scalar_a", "per_channel_b"],
)
def test_quantized_add_is_onnxruntimes_qlinear_add(a_shape, b_shape):  # type: ignore[no-untyped-def]
    """DQ(a) + DQ(b) -> Q becomes QAdd with MLAS's arithmetic: equal bit for bit, ties and
    broadcasting (an operand constant along the innermost axis) included."""
    rng = np.random.default_rng(5)
    inits = {}
    for role in "aby":
        inits[f"s{role}"] = np.float32(rng.random() * 0.05 + 0.001)
        inits[f"z{role}"] = np.uint8(rng.integers(0, 256))
    nodes = [
        helper.make_node("DequantizeLinear", ["a", "sa", "za"], ["af"]),
        helper.make_node("DequantizeLinear", ["b", "sb", "zb"], ["bf"]),
        helper.make_node("Add", ["af", "bf"], ["s"]),
        helper.make_node("QuantizeLinear", ["s", "sy", "zy"], ["y"]),
    ]
    feeds = {"a": rng.integers(0, 256, a_shape).astype(np.uint8), "b": rng.integers(0, 256, b_shape).astype(np.uint8)}
    model = make_model(nodes, feeds, ["y"], inits)
    graph = msm.from_onnx(model)
    assert _op_types(graph) == {QADD}
    got = msm.compile(graph, threads=1).run(feeds)["y"]
    np.testing.assert_array_equal(got, ort_run(model, feeds)["y"])


def test_unquantized_output_stays_float():  # type: ignore[no-untyped-def]
    """A product whose output is not quantized is not a pattern: it runs in float on the
    dequantized values (folded here with numpy), as onnxruntime runs it."""
    quantized, feeds = _qdq_conv_model([])
    nodes = [n for n in quantized.graph.node if n.output[0] not in ("yq", "y")]
    inits = {i.name: numpy_helper.to_array(i) for i in quantized.graph.initializer if i.name not in ("sy", "zy")}
    model = make_model(nodes, feeds, ["c0"], inits)
    graph = msm.from_onnx(model)
    assert "Conv" in _op_types(graph) and QCONV not in _op_types(graph)
    got = msm.compile(graph, threads=1).run(feeds)["c0"]
    want = ort_run(model, feeds)["c0"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_standalone_quantize_dequantize_per_axis_saturation_and_ties():  # type: ignore[no-untyped-def]
    """QuantizeLinear / DequantizeLinear outside any pattern: per axis, int8 and uint8,
    saturation, ties rounded to even, int32 dequantization; equal to onnxruntime bit for bit."""
    scale = np.array([0.5, 0.25, 2.0], np.float32)
    x = np.array([[-1000, -1.25, -0.75, -0.25, 0.25, 0.75, 1.25, 1000]] * 3, np.float32).T.reshape(2, 4, 3)
    x = np.ascontiguousarray(x.transpose(0, 2, 1))  # (2, 3, 4): axis 1 has the three scales
    inits = {
        "s": scale,
        "zi": np.array([0, -3, 5], np.int8),
        "zu": np.array([0, 3, 250], np.uint8),
        "b": np.array([2**30, -(2**30) + 7, 123456789], np.int32),
        "sb": np.array([1e-3, 2e-3, 3e-3], np.float32),
        "zb": np.array([5, -5, 0], np.int32),
    }
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "zi"], ["qi"], axis=1),
        helper.make_node("QuantizeLinear", ["x", "s", "zu"], ["qu"], axis=1),
        helper.make_node("DequantizeLinear", ["qi", "s", "zi"], ["di"], axis=1),
        helper.make_node("DequantizeLinear", ["qu", "s", "zu"], ["du"], axis=1),
        helper.make_node("DequantizeLinear", ["bi", "sb", "zb"], ["db"], axis=0),
    ]
    feeds = {"x": x, "bi": inits.pop("b")}
    model = make_model(nodes, feeds, ["qi", "qu", "di", "du", "db"], inits)
    got = msm.compile(msm.from_onnx(model), threads=1).run(feeds)
    want = ort_run(model, feeds)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


# ---------------------------------------------------------------- the integer tasks


def _small_conv_matmul_qdq(tmp_path):  # type: ignore[no-untyped-def]
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Flatten", ["r1"], ["f"]),
        helper.make_node("MatMul", ["f", "wm"], ["y"]),
    ]
    inits = {"w1": _w(16, 8, 3, 3), "b1": _b(16), "wm": _w(32, 16 * 6 * 6).T.copy()}
    x = np.zeros((1, 8, 6, 6), np.float32)
    model = make_model(nodes, {"x": x}, ["y"], inits)
    return _quantize_static(model, {"x": x.shape}, tmp_path), {"x": x.shape}


def test_integer_tasks_fit_the_int8_dot_product_intrinsics(tmp_path):  # type: ignore[no-untyped-def]
    qdq, _ = _small_conv_matmul_qdq(tmp_path)
    tasks = msm.extract_tasks(msm.from_onnx(qdq), "llvm -mcpu=x86-64-v3")
    seen = set()
    for task in tasks:
        report = metasched.tensorize_candidates(task.func, "llvm -mcpu=x86-64-v3")
        for block in ("qconv", "qmatmul"):
            if block in report:
                fits = {c.intrin for c in report[block].fits}
                assert "x86_avx2_u8s8s32_dot_8x4" in fits, str(report[block])
                seen.add(block)
    assert seen == {"qconv", "qmatmul"}


def test_depthwise_task_says_why_no_intrinsic_fits(tmp_path):  # type: ignore[no-untyped-def]
    model, shapes = _depthwise_net()
    tasks = msm.extract_tasks(msm.from_onnx(_quantize_static(model, shapes, tmp_path)), "llvm -mcpu=x86-64-v3")
    reports = [metasched.tensorize_candidates(t.func, "llvm -mcpu=x86-64-v3") for t in tasks]
    depthwise = [r["qconv"] for r in reports if "qconv" in r and not r["qconv"].fits]
    assert len(depthwise) == 1
    assert any(m.kind == "iterators" for m in depthwise[0].misses)


def test_integer_task_tunes_and_compiles_from_the_database(tmp_path):  # type: ignore[no-untyped-def]
    qdq, shapes = _small_conv_matmul_qdq(tmp_path)
    graph = msm.from_onnx(qdq)
    tasks = [t for t in msm.extract_tasks(graph, "llvm") if "qconv" in t.name]
    result = metasched.tune(tasks, target="llvm", trials=4, work_dir=str(tmp_path / "tune"), seed=0)
    (tuned,) = result.tasks
    assert tuned.best_seconds is not None
    # the tuner's candidates use the int8 dot product (the reduction is in its form)
    records = result.database.records(tuned.func)
    assert any("u8s8s32_dot" in r.trace_json and r.seconds is not None for r in records)
    compiled = msm.compile(graph, threads=1, database=result.database)
    feeds = {"x": np.random.default_rng(3).standard_normal(shapes["x"]).astype(np.float32)}
    got = compiled.run(feeds)
    reference = msm.compile(graph, schedule="none", threads=1).run(feeds)
    np.testing.assert_array_equal(got["y"], reference["y"])
    if not onnxruntime_saturates_pairs():  # else onnxruntime's sums are not the exact ones tuned here
        want = ort_run(qdq, feeds)
        step = float(numpy_helper.to_array(next(i for i in qdq.graph.initializer if i.name == "y_scale")))
        assert np.mean(np.abs(got["y"] - want["y"]) <= step * 1.0001) >= SHARE


# ---------------------------------------------------------------- torchvision models (slow)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mobilenet_v3_small", "resnet18"])
def test_torchvision_qdq_models(tmp_path, monkeypatch, name, like_onnxruntime):  # type: ignore[no-untyped-def]
    """torchvision models as benchmarks/model_zoo.py builds them (random weights, legacy export,
    opset 17), quantized by onnxruntime; the zoo checks ResNet-50 and MobileNet v3 large."""
    import importlib.util
    import sys
    from pathlib import Path

    torch = pytest.importorskip("torch")
    zoo_path = Path(__file__).resolve().parents[3] / "benchmarks" / "model_zoo.py"
    spec = importlib.util.spec_from_file_location("model_zoo", zoo_path)
    if spec is None or spec.loader is None:
        pytest.skip("benchmarks/model_zoo.py not found")
    zoo = importlib.util.module_from_spec(spec)
    monkeypatch.syspath_prepend(str(zoo_path.parent))
    monkeypatch.setitem(sys.modules, "model_zoo", zoo)
    spec.loader.exec_module(zoo)
    try:
        torchvision = zoo.import_torchvision()
    except ImportError as error:
        pytest.skip(f"torchvision: {error}")
    module = zoo._randomize(getattr(torchvision.models, name)(weights=None), 0)
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.onnx.export(module, (x,), str(tmp_path / "m.onnx"), dynamo=False, opset_version=17, input_names=["x"])
    qdq = _quantize_static(onnx.load(str(tmp_path / "m.onnx")), {"x": tuple(x.shape)}, tmp_path)
    graph, results = _compare(qdq, {"x": tuple(x.shape)})
    assert QCONV in _op_types(graph) and "Conv" not in _op_types(graph)
    for output, (share, steps) in results.items():
        assert share >= SHARE, (output, share, steps)
