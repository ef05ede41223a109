"""Helpers for tests and benchmarks: random weights for ONNX models, onnxruntime references."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["LIGHT_MODELS", "light_model_path", "make_model", "ort_run", "randomize_weights"]

LIGHT_MODELS = (
    "bvlc_alexnet",
    "densenet121",
    "inception_v1",
    "inception_v2",
    "resnet50",
    "shufflenet",
    "squeezenet",
    "vgg19",
    "zfnet512",
)


def light_model_path(name: str) -> str:
    import onnx

    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light", f"light_{name}.onnx")


def randomize_weights(model: Any, keep_inputs: int = 1, seed: int = 0, scale: str = "fan_in") -> Any:
    """A copy of ``model`` whose weights are random: ConstantOfShape weights and graph inputs
    beyond the first ``keep_inputs`` become random initializers, existing float initializers are
    redrawn (shapes kept). Scaled by 1/sqrt(fan-in) so activations stay in range."""
    import onnx
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(seed)
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph

    def draw(shape: tuple[int, ...], dtype: Any = np.float32) -> np.ndarray:
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
        std = 1.0 / np.sqrt(max(fan_in, 1)) if scale == "fan_in" else 1.0
        if len(shape) == 1:
            return (rng.standard_normal(shape) * 0.1 + (0.0 if np.prod(shape) > 0 else 0)).astype(dtype)
        return (rng.standard_normal(shape) * std).astype(dtype)

    variances = {n.input[4] for n in graph.node if n.op_type == "BatchNormalization" and len(n.input) > 4}
    new_inits = []
    kept_nodes = []
    const_shapes = {}
    for init in graph.initializer:
        const_shapes[init.name] = numpy_helper.to_array(init)
    for node in graph.node:
        if node.op_type == "ConstantOfShape" and node.input[0] in const_shapes:
            shape = tuple(int(s) for s in const_shapes[node.input[0]])
            array = draw(shape)
            if node.output[0] in variances:
                array = np.abs(array) + 0.5
            new_inits.append(numpy_helper.from_array(array, node.output[0]))
            continue
        kept_nodes.append(node)
    del graph.node[:]
    graph.node.extend(kept_nodes)
    variances = {n.input[4] for n in graph.node if n.op_type == "BatchNormalization" and len(n.input) > 4}
    redrawn = []
    for init in graph.initializer:
        array = numpy_helper.to_array(init)
        if array.dtype == np.float32 and array.size > 1:
            array = draw(array.shape)
            if init.name in variances:
                array = np.abs(array) + 0.5
        redrawn.append(numpy_helper.from_array(array, init.name))
    del graph.initializer[:]
    graph.initializer.extend(redrawn + new_inits)
    existing = {i.name for i in graph.initializer}
    inputs = [i for i in graph.input if i.name not in existing]
    keep = inputs[:keep_inputs]
    for value in inputs[keep_inputs:]:
        dims = tuple(d.dim_value for d in value.type.tensor_type.shape.dim)
        array = draw(dims)
        if value.name in variances:
            array = np.abs(array) + 0.5
        graph.initializer.append(numpy_helper.from_array(array, value.name))
    del graph.input[:]
    graph.input.extend(keep)
    used = {n for node in graph.node for n in node.input} | {o.name for o in graph.output}
    live = [i for i in graph.initializer if i.name in used]
    del graph.initializer[:]
    graph.initializer.extend(live)
    out.ir_version = min(out.ir_version or 10, 10) if out.ir_version else 10
    del helper
    return out


def ort_run(model: Any, inputs: Mapping[str, np.ndarray], threads: int = 1) -> dict[str, np.ndarray]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, dict(inputs)), strict=True))


def assert_close(got: np.ndarray, want: np.ndarray, rtol: float = 1e-4, atol: float = 1e-5, name: str = "") -> None:
    """float32 comparison with ``atol`` relative to the output's scale (max |want|)."""
    scale = float(np.max(np.abs(want))) if want.size else 1.0
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol * max(scale, 1.0), err_msg=name)


def make_model(nodes: Any, inputs: Mapping[str, np.ndarray], outputs: Any, inits: Any = (), opset: int = 17) -> Any:
    """An ONNX model of ``nodes`` (opset ``opset``, ``ir_version=10``) reading the named
    ``inputs`` (their arrays give shapes and dtypes), with constant ``inits`` and its outputs
    typed by onnx's shape inference (onnxruntime refuses untyped outputs)."""
    import onnx
    from onnx import helper, numpy_helper

    graph = helper.make_graph(
        nodes,
        "t",
        [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
            for n, a in inputs.items()
        ],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in dict(inits).items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
    inferred = onnx.shape_inference.infer_shapes(model)
    types = {v.name: v.type for v in inferred.graph.value_info}
    for out in model.graph.output:
        if out.name in types:
            out.type.CopyFrom(types[out.name])
    return model
