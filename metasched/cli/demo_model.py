"""The demo model's making: the onnx wheel ships light_* models (``light_model_path``) whose
weights are zeros; ``randomize_weights`` draws random ones (``metasched tune`` without a model,
the tests and the benchmarks use it)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

__all__ = ["light_model_path", "randomize_weights"]


def light_model_path(name: str) -> str:
    """Where the onnx wheel keeps ``light_<name>.onnx`` (``squeezenet``, ``resnet50``, ...)."""
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
