"""Whole models against onnxruntime with default schedules: the light_* models of the onnx wheel
(random weights, 1x3x224x224), a BERT-style encoder, save/load, arena planning, tasks."""

from __future__ import annotations

import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from bert_model import bert_encoder  # noqa: E402
from model_testing import LIGHT_MODELS, assert_close, ort_run  # noqa: E402

from metasched import model as msm  # noqa: E402
from metasched.cli.demo_model import light_model_path, randomize_weights  # noqa: E402


def _check_light(name: str, tmp_path=None):  # type: ignore[no-untyped-def]
    model = randomize_weights(onnx.load(light_model_path(name)))
    graph = msm.from_onnx(model)
    compiled = msm.compile(graph, threads=2)
    x = np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float32)
    feeds = {graph.inputs[0]: x}
    want = ort_run(model, feeds, threads=2)
    got = compiled.run(feeds)
    for key, value in want.items():
        assert_close(got[key], value, name=f"{name}:{key}")
    return compiled, feeds, want


def test_squeezenet_default_schedules_save_load(tmp_path):  # type: ignore[no-untyped-def]
    compiled, feeds, want = _check_light("squeezenet")
    report = compiled.report
    assert report is not None and report.arena_bytes < report.intermediate_bytes
    assert any(t.schedule == "default" for t in report.tasks)
    compiled.save(tmp_path / "m")
    loaded = msm.load(tmp_path / "m")
    got = loaded.run(feeds)
    for key, value in want.items():
        assert_close(got[key], value)


@pytest.mark.slow
@pytest.mark.parametrize("name", [m for m in LIGHT_MODELS if m != "squeezenet"])
def test_light_models(name):  # type: ignore[no-untyped-def]
    _check_light(name)


def _check_bert(seq, hidden, heads, layers):  # type: ignore[no-untyped-def]
    model = bert_encoder(seq=seq, hidden=hidden, heads=heads, layers=layers)
    graph = msm.from_onnx(model)
    compiled = msm.compile(graph, threads=2)
    x = np.random.default_rng(2).standard_normal((1, seq, hidden)).astype(np.float32)
    want = ort_run(model, {"x": x}, threads=2)
    got = compiled.run({"x": x})
    assert_close(got["y"], want["y"])
    return compiled


def test_bert_small():  # type: ignore[no-untyped-def]
    compiled = _check_bert(seq=16, hidden=64, heads=4, layers=2)
    # the two layers are the same tasks: deduplicated with weight 2
    assert any(t.weight >= 2 for t in compiled.report.tasks)


@pytest.mark.slow
def test_bert_base_two_layers():  # type: ignore[no-untyped-def]
    _check_bert(seq=128, hidden=768, heads=12, layers=2)


def test_extract_tasks_weights_and_flops():  # type: ignore[no-untyped-def]
    graph = msm.from_onnx(randomize_weights(onnx.load(light_model_path("resnet50"))))
    tasks = msm.extract_tasks(graph)
    assert sum(t.weight for t in tasks) > len(tasks)  # repeated blocks share tasks
    assert all(t.flops > 0 for t in tasks)
    names = {t.name for t in tasks}
    assert any("conv_sum_relu" in n or "conv_relu" in n for n in names)  # epilogues fused


PYTORCH_DIRS = ("pytorch-converted", "pytorch-operator")


def _pytorch_cases() -> list[str]:
    root = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
    cases = []
    for sub in PYTORCH_DIRS:
        base = os.path.join(root, sub)
        if os.path.isdir(base):
            cases += [os.path.join(base, d) for d in sorted(os.listdir(base))]
    return cases


#: Known wrong today (opset-6 forms): PRelu's per-channel slope broadcast, old Reshape/Flatten/Tile forms.
KNOWN_FAILING = {"test_PReLU_1d_multiparam", "test_PReLU_2d_multiparam", "test_PReLU_3d_multiparam",
                 "test_operator_flatten", "test_operator_repeat", "test_operator_view"}


@pytest.mark.slow
@pytest.mark.parametrize("case", _pytorch_cases(), ids=os.path.basename)
def test_pytorch_models(case):  # type: ignore[no-untyped-def]
    from onnx import numpy_helper

    if os.path.basename(case) in KNOWN_FAILING:
        pytest.xfail("opset-6 operator form not handled yet")

    model = onnx.load(os.path.join(case, "model.onnx"))
    try:
        graph = msm.from_onnx(model)
    except msm.UnsupportedOperatorError as error:
        pytest.skip(str(error)[:120])
    data = os.path.join(case, "test_data_set_0")
    feeds = {}
    for k, name in enumerate(graph.inputs):
        tensor = onnx.TensorProto()
        with open(os.path.join(data, f"input_{k}.pb"), "rb") as f:
            tensor.ParseFromString(f.read())
        feeds[name] = numpy_helper.to_array(tensor)
    model.ir_version = min(model.ir_version, 10)
    try:
        want = ort_run(model, feeds)
    except Exception:  # onnxruntime has no kernels for some opset-6 operators: use the stored outputs
        want = {}
        for k, out in enumerate(model.graph.output):
            tensor = onnx.TensorProto()
            with open(os.path.join(data, f"output_{k}.pb"), "rb") as f:
                tensor.ParseFromString(f.read())
            want[out.name] = numpy_helper.to_array(tensor)
    got = msm.compile(graph, threads=2).run(feeds)
    for key, value in want.items():
        assert_close(got[key], value, rtol=1e-3, atol=1e-4)
