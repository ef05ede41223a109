"""A BERT-style encoder built with onnx.helper (model tests and benchmarks): embeddings are left out;
each layer is self-attention (MatMul + bias, reshape to heads, scaled dot product, Softmax),
Add + LayerNormalization, a GELU (through Erf) feed-forward, Add + LayerNormalization."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["bert_encoder"]


def bert_encoder(
    seq: int = 128,
    hidden: int = 768,
    heads: int = 12,
    layers: int = 2,
    ffn: int | None = None,
    batch: int = 1,
    seed: int = 0,
    opset: int = 17,
) -> Any:
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    ffn = ffn or 4 * hidden
    head = hidden // heads
    nodes: list[Any] = []
    inits: dict[str, np.ndarray] = {}

    def weight(name: str, *shape: int, std: float | None = None) -> str:
        std = std if std is not None else 1.0 / np.sqrt(shape[0])
        inits[name] = (rng.standard_normal(shape) * std).astype(np.float32)
        return name

    def const(name: str, value: Any, dtype: Any = np.int64) -> str:
        inits[name] = np.asarray(value, dtype=dtype)
        return name

    def node(op: str, inputs: list[str], output: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [output], name=output, **attrs))
        return output

    def add_and_norm(value: str, residual: str, prefix: str, tag: str) -> str:
        """LayerNormalization(value + residual) with unit scale and zero bias."""
        return node(
            "LayerNormalization",
            [
                node("Add", [value, residual], prefix + "res" + tag),
                const(prefix + "g" + tag, np.ones(hidden), np.float32),
                const(prefix + "b" + tag, np.zeros(hidden), np.float32),
            ],
            prefix + "ln" + tag,
            axis=-1,
            epsilon=1e-12,
        )

    split_shape = const("split_shape", [batch, seq, heads, head])
    merge_shape = const("merge_shape", [batch, seq, hidden])
    scale = const("scale", 1.0 / np.sqrt(head), np.float32)
    half, one, rsqrt2 = (
        const("half", 0.5, np.float32),
        const("one", 1.0, np.float32),
        const("rsqrt2", 1 / np.sqrt(2), np.float32),
    )
    x = "x"
    for layer in range(layers):
        p = f"l{layer}_"

        def proj(name: str, src: str, n_in: int, n_out: int, p: str = p) -> str:
            mm = node("MatMul", [src, weight(p + name + "_w", n_in, n_out)], p + name + "_mm")
            return node("Add", [mm, weight(p + name + "_b", n_out, std=0.02)], p + name)

        q, k, v = (proj(n, x, hidden, hidden) for n in ("q", "k", "v"))
        qh = node("Transpose", [node("Reshape", [q, split_shape], p + "qr")], p + "qh", perm=[0, 2, 1, 3])
        kh = node("Transpose", [node("Reshape", [k, split_shape], p + "kr")], p + "kh", perm=[0, 2, 3, 1])
        vh = node("Transpose", [node("Reshape", [v, split_shape], p + "vr")], p + "vh", perm=[0, 2, 1, 3])
        scores = node("Mul", [node("MatMul", [qh, kh], p + "qk"), scale], p + "scores")
        probs = node("Softmax", [scores], p + "probs", axis=-1)
        ctx = node("Transpose", [node("MatMul", [probs, vh], p + "ctx")], p + "ctx_t", perm=[0, 2, 1, 3])
        merged = node("Reshape", [ctx, merge_shape], p + "merged")
        attn = proj("o", merged, hidden, hidden)
        ln1 = add_and_norm(attn, x, p, "1")
        up = proj("up", ln1, hidden, ffn)
        erf = node("Erf", [node("Mul", [up, rsqrt2], p + "up_s")], p + "erf")
        gelu = node("Mul", [node("Mul", [up, half], p + "up_h"), node("Add", [erf, one], p + "erf1")], p + "gelu")
        down = proj("down", gelu, ffn, hidden)
        x = add_and_norm(down, ln1, p, "2")
    nodes.append(helper.make_node("Identity", [x], ["y"]))
    graph = helper.make_graph(
        nodes,
        "bert_encoder",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, seq, hidden])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, seq, hidden])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
