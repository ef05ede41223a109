"""A GPT-2-like model (what ``torch.onnx.export`` writes for transformers' ``GPT2LMHeadModel``,
made small and built with ``onnx.helper``) imports, matches onnxruntime, has complete features
for every task, and tunes: the embedding lookup's index (torch's wrap of negative ids, our
Gather's clamp: Select, Cast and a load inside an index) once stopped ``metasched tune`` in its
first second with ``AttributeError: 'Select' object has no attribute 'a'`` from the cost
model's features."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from model_testing import assert_close, ort_run  # noqa: E402

import metasched  # noqa: E402
from metasched import model as msm  # noqa: E402
from metasched.cost import FEATURE_NAMES, NUM_FEATURES, extract_features  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
VOCAB, HIDDEN, SEQ, HEADS = 64, 32, 8, 2
#: Token ids, negative ones included (torch's Gather wraps them: -1 is the last token).
IDS = np.array([[3, -1, 17, 63, -64, 0, 42, 5]], np.int64)


def gpt2_like(seed: int = 0) -> onnx.ModelProto:
    """One GPT-2 block and the LM head, at vocab 64, hidden 32, sequence 8, 2 heads:
    token and position embeddings, LayerNormalization (and its decomposition, as older
    exports write it), causal self-attention (MatMul, a constant lower-triangular mask through
    Where, Softmax), gelu_new (the tanh form), residual adds, the head's MatMul."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)

    def weight(*shape: int, scale: float | None = None) -> np.ndarray:
        std = scale if scale is not None else 1.0 / np.sqrt(shape[0])
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def scalar(value: float) -> np.ndarray:
        return np.array(value, np.float32)

    head_size = HIDDEN // HEADS
    inits = {
        "wte": weight(VOCAB, HIDDEN, scale=0.5),
        "wpe": weight(SEQ, HIDDEN, scale=0.5),
        "vocab": np.array(VOCAB, np.int64),
        "zero": np.array(0, np.int64),
        "positions": np.arange(SEQ, dtype=np.int64).reshape(1, SEQ),
        "ln1_g": (1 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32),
        "ln1_b": weight(HIDDEN, scale=0.1),
        "ln2_g": (1 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32),
        "ln2_b": weight(HIDDEN, scale=0.1),
        "w_qkv": weight(HIDDEN, 3 * HIDDEN),
        "b_qkv": weight(3 * HIDDEN, scale=0.1),
        "w_proj": weight(HIDDEN, HIDDEN),
        "b_proj": weight(HIDDEN, scale=0.1),
        "w_fc": weight(HIDDEN, 4 * HIDDEN),
        "b_fc": weight(4 * HIDDEN, scale=0.1),
        "w_out": weight(4 * HIDDEN, HIDDEN),
        "b_out": weight(HIDDEN, scale=0.1),
        "lnf_g": np.ones(HIDDEN, np.float32),
        "lnf_b": np.zeros(HIDDEN, np.float32),
        "w_head": weight(HIDDEN, VOCAB),
        "split": np.array([HIDDEN] * 3, np.int64),
        "heads_shape": np.array([1, SEQ, HEADS, head_size], np.int64),
        "hidden_shape": np.array([1, SEQ, HIDDEN], np.int64),
        "scale": scalar(1.0 / np.sqrt(head_size)),
        "causal": np.tril(np.ones((SEQ, SEQ), bool)).reshape(1, 1, SEQ, SEQ),
        "masked": scalar(np.finfo(np.float32).min),
        "eps": scalar(1e-5),
        "half": scalar(0.5),
        "one": scalar(1.0),
        "three": scalar(3.0),
        "gelu_a": scalar(np.sqrt(2 / np.pi)),
        "gelu_b": scalar(0.044715),
    }
    node = helper.make_node
    nodes = [
        # torch's index normalisation of an embedding lookup: negative ids count from the end
        node("Less", ["ids", "zero"], ["ids_negative"]),
        node("Add", ["ids", "vocab"], ["ids_wrapped"]),
        node("Where", ["ids_negative", "ids_wrapped", "ids"], ["ids_normal"]),
        node("Gather", ["wte", "ids_normal"], ["tokens"], axis=0),
        node("Gather", ["wpe", "positions"], ["places"], axis=0),
        node("Add", ["tokens", "places"], ["h0"]),
        # attention
        node("LayerNormalization", ["h0", "ln1_g", "ln1_b"], ["x1"], axis=-1, epsilon=1e-5),
        node("MatMul", ["x1", "w_qkv"], ["qkv0"]),
        node("Add", ["qkv0", "b_qkv"], ["qkv"]),
        node("Split", ["qkv", "split"], ["q0", "k0", "v0"], axis=2),
        node("Reshape", ["q0", "heads_shape"], ["q1"]),
        node("Transpose", ["q1"], ["q"], perm=[0, 2, 1, 3]),
        node("Reshape", ["k0", "heads_shape"], ["k1"]),
        node("Transpose", ["k1"], ["kt"], perm=[0, 2, 3, 1]),
        node("Reshape", ["v0", "heads_shape"], ["v1"]),
        node("Transpose", ["v1"], ["v"], perm=[0, 2, 1, 3]),
        node("MatMul", ["q", "kt"], ["s0"]),
        node("Mul", ["s0", "scale"], ["s1"]),
        node("Where", ["causal", "s1", "masked"], ["s2"]),
        node("Softmax", ["s2"], ["p"], axis=-1),
        node("MatMul", ["p", "v"], ["a0"]),
        node("Transpose", ["a0"], ["a1"], perm=[0, 2, 1, 3]),
        node("Reshape", ["a1", "hidden_shape"], ["a2"]),
        node("MatMul", ["a2", "w_proj"], ["a3"]),
        node("Add", ["a3", "b_proj"], ["a4"]),
        node("Add", ["h0", "a4"], ["h1"]),
        # LayerNormalization decomposed
        node("ReduceMean", ["h1"], ["mean"], axes=[-1]),
        node("Sub", ["h1", "mean"], ["centred"]),
        node("Mul", ["centred", "centred"], ["squares"]),
        node("ReduceMean", ["squares"], ["variance"], axes=[-1]),
        node("Add", ["variance", "eps"], ["variance_eps"]),
        node("Sqrt", ["variance_eps"], ["deviation"]),
        node("Div", ["centred", "deviation"], ["normal"]),
        node("Mul", ["normal", "ln2_g"], ["scaled"]),
        node("Add", ["scaled", "ln2_b"], ["x2"]),
        # MLP with gelu_new: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
        node("MatMul", ["x2", "w_fc"], ["f0"]),
        node("Add", ["f0", "b_fc"], ["f1"]),
        node("Pow", ["f1", "three"], ["f3"]),
        node("Mul", ["f3", "gelu_b"], ["f4"]),
        node("Add", ["f1", "f4"], ["f5"]),
        node("Mul", ["f5", "gelu_a"], ["f6"]),
        node("Tanh", ["f6"], ["f7"]),
        node("Add", ["f7", "one"], ["f8"]),
        node("Mul", ["f1", "f8"], ["f9"]),
        node("Mul", ["f9", "half"], ["gelu"]),
        node("MatMul", ["gelu", "w_out"], ["m0"]),
        node("Add", ["m0", "b_out"], ["m1"]),
        node("Add", ["h1", "m1"], ["h2"]),
        # the LM head
        node("LayerNormalization", ["h2", "lnf_g", "lnf_b"], ["hf"], axis=-1, epsilon=1e-5),
        node("MatMul", ["hf", "w_head"], ["logits"]),
    ]
    graph = helper.make_graph(
        nodes,
        "gpt2_like",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, SEQ])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, SEQ, VOCAB])],
        [numpy_helper.from_array(value, name) for name, value in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    onnx.checker.check_model(model)
    return model


@pytest.fixture(scope="module")
def model() -> onnx.ModelProto:
    return gpt2_like()


@pytest.fixture(scope="module")
def graph(model: onnx.ModelProto) -> msm.Graph:
    return msm.from_onnx(model)


@pytest.fixture(scope="module")
def want(model: onnx.ModelProto) -> np.ndarray:
    return ort_run(model, {"ids": IDS})["logits"]


def test_default_schedules_match_onnxruntime(graph: msm.Graph, want: np.ndarray) -> None:
    got = msm.compile(graph, threads=1).run({"ids": IDS})["logits"]
    assert got.shape == (1, SEQ, VOCAB)
    assert_close(got, want)


def test_every_task_has_complete_features(graph: msm.Graph) -> None:
    tasks = msm.extract_tasks(graph)
    lookup = [task for task in tasks if "gather" in task.name]
    assert lookup, [task.name for task in tasks]
    incomplete = FEATURE_NAMES.index("misc.features_incomplete")
    for task in tasks:
        rows = extract_features(task.func, "llvm")
        assert rows.shape[1] == NUM_FEATURES and np.all(np.isfinite(rows)), task.name
        assert not rows[:, incomplete].any(), task.name
    # The lookup reads the ids (inside its index), the token table and the position embedding.
    (rows,) = [extract_features(task.func, "llvm") for task in lookup]
    assert rows[:, FEATURE_NAMES.index("misc.num_accesses")].max() >= 3


def test_a_few_trials_tune_and_the_tuned_model_matches_onnxruntime(
    graph: msm.Graph, want: np.ndarray, tmp_path: Path
) -> None:
    tasks = msm.extract_tasks(graph)
    result = metasched.tune(
        tasks, "llvm", trials=8, work_dir=str(tmp_path), seed=0, num_threads=1, log=lambda line: None
    )
    assert result.trials == 8
    assert all(not task.errors for task in result.tasks), [(t.name, t.errors) for t in result.tasks]
    (lookup,) = [task for task in result.tasks if "gather" in task.name]
    assert lookup.trials >= 1 and lookup.best_seconds is not None
    tuned = msm.compile(graph, database=str(tmp_path), threads=1)
    assert any(task.schedule == "database" for task in tuned.report.tasks)
    assert_close(tuned.run({"ids": IDS})["logits"], want)


@pytest.mark.slow
def test_metasched_tune_command_on_the_model(model: onnx.ModelProto, tmp_path: Path) -> None:
    """The issue's command: ``metasched tune model.onnx --trials 8``, to the comparison with
    onnxruntime at its end."""
    onnx.save(model, str(tmp_path / "gpt2_like.onnx"))
    done = subprocess.run(
        [sys.executable, "-m", "metasched", "tune", "gpt2_like.onnx", "--trials", "8", "--work-dir", "w"]
        + ["--threads", "1", "--repeat", "3"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")},
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "internal error" not in output
    assert "tuning finished: 8 trials" in output
    assert "output 'logits' vs onnxruntime" in output and "(ok)" in output
