"""Helpers of the model tests (and benchmarks): ONNX models from nodes, onnxruntime references,
float comparisons, the names of the onnx wheel's light_* models.

    from model_testing import assert_close, make_model, ort_run   # tests/metasched is on sys.path
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["LIGHT_MODELS", "assert_close", "make_model", "ort_run"]

#: The onnx wheel's light_* models (``metasched.cli.demo_model.light_model_path``).
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


def ort_run(model: Any, inputs: Mapping[str, np.ndarray], threads: int = 1) -> dict[str, np.ndarray]:
    """onnxruntime's outputs of ``model`` by name (CPU, ``threads`` intra-op threads)."""
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
