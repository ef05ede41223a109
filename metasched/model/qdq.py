"""QDQ models: quantized convolutions and matrix products as integer kernels.

A QDQ model (onnxruntime's ``quantize_static(..., quant_format=QuantFormat.QDQ)``) keeps its float
operators and marks where values are quantized with DequantizeLinear / QuantizeLinear pairs:

    x_q -> DequantizeLinear(sx, zx) --+
    W_q -> DequantizeLinear(sw, zw) --+--> Conv | MatMul | Gemm [-> Relu | Clip]... -> QuantizeLinear(sy, zy) -> y_q
    b_q -> DequantizeLinear(sx * sw) -+

``fuse_qdq(graph)`` rewrites each such pattern into one integer operator of this library,
``QConv`` or ``QMatMul`` (``metasched.model.ops.quantization``), computing what onnxruntime's
QLinearConv / QLinearMatMul / QGemm compute (its QDQ fusion runs these patterns as those):

    acc[..., c] = sum x_q * w_q                              uint8/int8 x int8 -> int32
    y_q[..., c] = saturate(round_half_even(float32(acc + bias[c]) * scale[c]) + zy)
    scale[c]    = float32(sx * sw[c]) / sy                   (Gemm: alpha * sx * sw[c] / sy)
    bias[c]     = b_q[c] - zx * sum_k w_q[c, k]

The reduction is the plain ``acc += int32(x_q) * int32(w_q)`` the int8 dot-product intrinsics
match (``metasched.tensorize_candidates``; on x86-64 without VNNI the pairs below): the
activation zero point is folded into the bias, here, once (a convolution's padding reads
``zx``, so the correction holds at the borders too); the requantization is the epilogue of the
same kernel. Weights with a nonzero zero point (uint8 weights) subtract both zero points inside
the reduction instead: exact, not tensorized.
A Relu or a Clip between the product and the QuantizeLinear becomes saturation bounds
(quantization is monotone: ``Q(clip(v, a, b)) = clip(Q(v), Q(a), Q(b))``).

``DequantizeLinear(a), DequantizeLinear(b) -> Add -> QuantizeLinear`` (a residual connection)
becomes ``QAdd`` on the quantized values, with onnxruntime's QLinearAdd arithmetic (MLAS:
``fma(a, sa / sy, fma(b, sb / sy, zy - (sa / sy * za + sb / sy * zb)))`` rounded half to even).
Matching it matters: computed in float from the dequantized values instead, one value in 1e5
of a random-weight ResNet-50's layer4 came out one step off, and the difference grew through
the following layers (4 steps in places, 11% of the logits one step off); with QAdd every
quantized tensor of ResNet-50 and MobileNet v3 equals onnxruntime's (on a CPU without VNNI, with
the int16 pairs below).

How the products accumulate depends on the CPU onnxruntime runs on, and so does ours. With
VNNI (``vpdpbusd``: AVX512-VNNI, AVX-VNNI) or on AArch64 its uint8 x int8 kernels sum exactly in
int32. On x86-64 with AVX2 and without VNNI (Zen 1 to 3, Haswell to Coffee Lake, Skylake-SP)
every one of them -- MlasConvSym for the convolutions, MLAS's QGEMM after im2col for the
others (a stem's three channels, an output channel count not a multiple of 8, groups), QGemm,
QLinearMatMul -- multiplies with ``vpmaddubsw``, which sums each pair of adjacent products into
int16 WITH SATURATION before widening them:

    acc = sum_j saturate_int16(x[2j] * w[2j] + x[2j+1] * w[2j+1])      (raw uint8 x, int8 w)

the pairs taken along K in MLAS's order: (kernel position, input channel) of each group,
flattened (NHWC im2col order; with an even channel count a pair is two adjacent channels at
one kernel position), the last element of an odd K paired with zero; a MatMul's or a Gemm's K
as it is. Two products of 255 * 127 already overflow int16 (64770 > 32767), and activations
after a Relu reach 255: under ``qemu-x86_64 -cpu max`` (AVX2, no VNNI) onnxruntime's QDQ
ResNet-50 of ``benchmarks/model_zoo.py`` has 0.6% of its stem's outputs off the exact sums by
up to 23 steps, its last residual block by up to 19, and 4.5% of its logits more than one
step away (MobileNet v3: 3% of the logits one step away). int8 activations (what
``quantize_static`` gives by default) go the same way: onnxruntime adds 128 to them (and to their
zero point) and runs the uint8 kernels, so the pairs are ``(x + 128) * w``; on an AVX2 Zen 3
a 3 x 3 convolution of 3 and of 16 channels and a MatMul with K = 64 had 5.8%, 0.4% and 0.2%
of their outputs more than a step off the exact sums, none in this form. That holds where
onnxruntime makes them uint8 (its QDQS8ToU8Transformer): an activation from a QuantizeLinear ->
DequantizeLinear pair, the output going to such a pair; an int8 graph input stays int8 and its
S8S8 kernels sum exactly. And onnxruntime runs a pattern in its integer kernels only when the
product goes straight to the QuantizeLinear, a Relu or Clip dropped only where the output's
range already implies it; one that clips leaves the pattern in float (exact sums). Depthwise
convolutions (one input and one output channel per group) and uint8 weights stay exact on every
CPU. So ``fuse_qdq`` marks the uint8 / int8 x int8 patterns onnxruntime would saturate with
``int16_pairs=1``, and ``QConv`` / ``QMatMul`` then reduce over the pairs, saturating each:
both models then equal onnxruntime's outputs there bit for bit. That is opt-in
(``fuse_qdq(graph, int16_pairs=True)`` or ``METASCHED_QDQ_INT16_PAIRS=1``): by default the sums
are exact, as ONNX defines them (onnxruntime's own quantization guide advises ``reduce_range``
on such CPUs for this reason), and stay tensorizable; the pair form matches none of the int8
dot-product intrinsics (their descs are the exact sum), so such kernels are not tensorized.
``onnxruntime_saturates_pairs()`` says whether a comparison with onnxruntime on this machine
needs it (``benchmarks/model_zoo.py`` turns it on there, and says so).

Everything else stays as it is: a pattern that does not fit (per-axis activation scales,
non-constant weights, per-channel weight zero points that differ, a bias not quantized with
``sx * sw``, an output that is not quantized) runs in float between its DequantizeLinear and
QuantizeLinear nodes, as onnxruntime runs it; those and every other DequantizeLinear /
QuantizeLinear are elementwise operators, fused into their neighbours, or folded where their
inputs are constant (``metasched.model.fold``: the weights of an unfused pattern).
``DequantizeLinear -> Reshape | Flatten | Transpose | MaxPool ... -> QuantizeLinear`` with one
quantization on both sides runs the operator on the quantized values, as onnxruntime does.

``from_onnx`` runs this pass on the nodes as imported, before shape propagation and folding,
so the int8 weights a fused kernel reads are never folded to float.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, TypeGuard

import numpy as np

from metasched.model.graph import Graph, Node
from tir.target import Target

__all__ = ["INT16_PAIRS_ENV", "QADD", "QCONV", "QMATMUL", "fuse_qdq", "onnxruntime_saturates_pairs"]

#: The internal operators a fused pattern becomes (``metasched.model.ops.quantization``).
QCONV, QMATMUL, QADD = "QConv", "QMatMul", "QAdd"

_PRODUCTS = ("Conv", "MatMul", "Gemm")
#: Operators that commute with quantization: ``DequantizeLinear -> op -> QuantizeLinear`` with
#: one scale and zero point on both sides runs ``op`` on the quantized values (exactly: the
#: round trip gives back every integer, and max is monotone); onnxruntime drops such pairs too.
_TRANSPARENT = ("Flatten", "Identity", "MaxPool", "Reshape", "Squeeze", "Transpose", "Unsqueeze")
_CONV_ATTRS = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")
_INT_RANGES = {"uint8": (0, 255), "int8": (-128, 127)}
#: ``1``: the uint8 x int8 products of the fused patterns saturate in int16 pairs as onnxruntime's
#: do on x86-64 without VNNI (unset or ``0``: exact sums).
INT16_PAIRS_ENV = "METASCHED_QDQ_INT16_PAIRS"


def onnxruntime_saturates_pairs(target: str | Target | None = None) -> bool:
    """Whether onnxruntime's uint8 x int8 kernels sum adjacent products in int16 with saturation
    (``vpmaddubsw``) on ``target`` (default: this machine): x86-64 with AVX2 and without VNNI.
    MLAS picks its kernels so (``MlasPlatform``): AVX512-VNNI or AVX-VNNI gives ``vpdpbusd``
    (exact), AVX2 or AVX512 without them ``vpmaddubsw``; without AVX2 it widens (exact)."""
    t = Target.parse(target)  # None: this machine
    if not t.is_cpu or t.isa != "x86_64" or not t.has("avx2"):
        return False
    return not (t.has("avx512vnni") or t.has("avxvnni"))


def _int16_pairs_default() -> bool:
    forced = os.environ.get(INT16_PAIRS_ENV, "").strip().lower()
    if forced in ("1", "true", "yes", "on"):
        return True
    if forced in ("0", "false", "no", "off"):
        return False
    if forced not in ("", "auto"):
        raise ValueError(f"{INT16_PAIRS_ENV}={forced!r}: expected 1 or 0")
    return False


def _quantize(x: float, scale: np.ndarray, zero: np.ndarray | np.generic) -> int:
    """ONNX QuantizeLinear of one float32 value: ``saturate(round_half_even(x / scale) + zero)``."""
    lo, hi = _INT_RANGES[str(zero.dtype)]
    value = np.rint(np.float32(x) / np.float32(_item(scale))) + np.float32(_item(zero))
    return int(np.clip(value, lo, hi))


# ---------------------------------------------------------------- the pass


@dataclass
class _Pattern:
    """One matched ``DequantizeLinear -> product [-> Relu | Clip] -> QuantizeLinear``."""

    product: Node
    quantize: Node
    removed: list[Node]  # the product, the chain and the QuantizeLinear
    dequantized: list[Node]  # the DequantizeLinear nodes read (dropped once nothing else reads them)


def fuse_qdq(graph: Graph, int16_pairs: bool | None = None) -> int:
    """Rewrite the QDQ patterns of ``graph`` (its nodes as imported: before shape propagation
    and folding) into ``QConv`` / ``QMatMul`` / ``QAdd`` nodes, in place. Returns the number
    fused. ``int16_pairs``: sum uint8 x int8 products in saturated int16 pairs as onnxruntime
    does on x86-64 without VNNI (default: ``METASCHED_QDQ_INT16_PAIRS``, else exact sums)."""
    if not any(node.op_type in ("DequantizeLinear", "QuantizeLinear") for node in graph.nodes):
        return 0
    if int16_pairs is None:
        int16_pairs = _int16_pairs_default()
    values = _known_values(graph)
    _run_quantized(graph, values)
    producers = graph.producers()
    consumers = graph.consumers()
    replacement: dict[int, Node] = {}  # id(QuantizeLinear) -> its fused node
    dropped: set[int] = set()
    readers: list[Node] = []
    for node in graph.nodes:
        if id(node) in dropped:
            continue
        if node.op_type in _PRODUCTS:
            fused = _fuse(graph, node, values, producers, consumers, int16_pairs)
        elif node.op_type == "Add":
            fused = _fuse_add(graph, node, values, producers, consumers)
        else:
            continue
        if fused is None:
            continue
        new_node, pattern, constants = fused
        for name, value in constants.items():
            graph.constants[name] = value
            values[name] = value
        replacement[id(pattern.quantize)] = new_node
        dropped.update(id(n) for n in pattern.removed if n is not pattern.quantize)
        readers.extend(pattern.dequantized)
    nodes = []
    for node in graph.nodes:
        if id(node) in replacement:
            nodes.append(replacement[id(node)])
        elif id(node) not in dropped:
            nodes.append(node)
    graph.nodes = _drop_unread(graph, nodes, readers)
    return len(replacement)


def _run_quantized(graph: Graph, values: dict[str, np.ndarray]) -> None:
    """``DequantizeLinear -> op -> QuantizeLinear`` (``op`` in ``_TRANSPARENT``, the same
    quantization on both sides) -> ``op`` on the quantized values."""
    producers = graph.producers()
    consumers = graph.consumers()
    dropped: set[int] = set()
    readers = []
    for node in graph.nodes:
        if node.op_type not in _TRANSPARENT or len([o for o in node.outputs if o]) != 1 or not node.inputs:
            continue
        dq = producers.get(node.inputs[0])
        users = consumers.get(node.outputs[0], [])
        if not _dequantize_node(dq) or len(users) != 1 or users[0].op_type != "QuantizeLinear":
            continue
        assert dq is not None
        q = users[0]
        if node.outputs[0] in graph.outputs or q.inputs[0] != node.outputs[0] or "output_dtype" in q.attrs:
            continue
        scales = [_params(n, values) for n in (dq, q)]
        if not all(known and _scalar(scale) and _scalar(zero) for scale, zero, known in scales):
            continue
        (sx, zx, _), (sy, zy, _) = scales
        assert sx is not None and zx is not None and sy is not None and zy is not None
        if _item(sx) != _item(sy) or _item(zx) != _item(zy) or zx.dtype != zy.dtype or dq.inputs[0] in values:
            continue
        node.inputs = [dq.inputs[0], *node.inputs[1:]]
        node.outputs = [q.outputs[0]]
        dropped.add(id(q))
        readers.append(dq)
    if dropped:
        graph.nodes = _drop_unread(graph, [n for n in graph.nodes if id(n) not in dropped], readers)


def _known_values(graph: Graph) -> dict[str, np.ndarray]:
    """The initializers and the values of Constant nodes (not folded yet at this point)."""
    values = dict(graph.constants)
    for node in graph.nodes:
        if node.op_type == "Constant" and node.outputs and isinstance(node.attrs.get("value"), np.ndarray):
            values[node.outputs[0]] = node.attrs["value"]
    return values


def _drop_unread(graph: Graph, nodes: list[Node], candidates: list[Node]) -> list[Node]:
    """``nodes`` without the ``candidates`` whose outputs nothing reads any more."""
    read = {name for node in nodes for name in node.inputs if name} | set(graph.outputs)
    gone = {id(n) for n in candidates if not any(o in read for o in n.outputs if o)}
    return [n for n in nodes if id(n) not in gone]


# ---------------------------------------------------------------- matching one pattern


def _scalar(value: np.ndarray | None) -> TypeGuard[np.ndarray]:
    return value is not None and np.asarray(value).size == 1


def _item(value: np.ndarray | np.generic) -> Any:
    return np.asarray(value).reshape(-1)[0].item()


def _dequantize_node(node: Node | None) -> bool:
    return node is not None and node.op_type == "DequantizeLinear" and not node.attrs.get("block_size")


def _params(node: Node, values: dict[str, np.ndarray]) -> tuple[np.ndarray | None, np.ndarray | None, bool]:
    """(scale, zero point or None, whether every parameter given is a known constant)."""
    scale = values.get(node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] else None
    has_zero = len(node.inputs) > 2 and bool(node.inputs[2])
    zero = values.get(node.inputs[2]) if has_zero else None
    return scale, zero, scale is not None and (zero is not None or not has_zero)


def _value_dtype(graph: Graph, name: str, zero: np.ndarray | None, producers: dict[str, Node], values: Any) -> str:
    """The integer type of the quantized value ``name``: its zero point's, else what makes it."""
    if zero is not None:
        return str(np.asarray(zero).dtype)
    if name in graph.infos:
        return graph.infos[name].dtype
    source = producers.get(name)
    if source is not None and source.op_type == "QuantizeLinear":
        _, source_zero, _ = _params(source, values)
        return str(np.asarray(source_zero).dtype) if source_zero is not None else "uint8"
    return ""


def _becomes_uint8(
    graph: Graph, x_q: str, quantize: Node, producers: dict[str, Node], consumers: dict[str, list[Node]]
) -> bool:
    """Whether onnxruntime turns an int8 pattern (activation ``x_q``, output ``quantize``) into a
    uint8 one on a CPU without VNNI (its QDQS8ToU8Transformer rewrites every int8
    ``QuantizeLinear -> DequantizeLinear`` pair whose QuantizeLinear has that one reader): the
    activation must come from such a pair (an int8 graph input stays int8) and the output must
    go to one (else the two ends' types differ and onnxruntime runs the pattern in float)."""
    source = producers.get(x_q)
    if source is None or x_q in graph.inputs:
        return False
    if source.op_type == "QuantizeLinear" and len(consumers.get(x_q, [])) != 1:
        return False
    readers = consumers.get(quantize.outputs[0], [])
    return len(readers) == 1 and readers[0].op_type == "DequantizeLinear"


def _chain_bounds(
    chain: list[Node],
    values: dict[str, np.ndarray],
    opset: int,
    sy: np.ndarray,
    zy: np.ndarray | np.generic,
    dtype: str,
) -> tuple[int, int] | None:
    """Saturation bounds of the quantized output with the Relu / Clip chain folded in, or None."""
    lo, hi = _INT_RANGES[dtype]
    for node in chain:
        if node.op_type == "Relu":
            bounds: list[Any] = [0.0, None]
        elif opset < 11:
            bounds = [node.attrs.get("min"), node.attrs.get("max")]
        else:
            bounds = []
            for position in (1, 2):
                name = node.inputs[position] if len(node.inputs) > position else ""
                if name and (name not in values or np.asarray(values[name]).size != 1):
                    return None
                bounds.append(_item(values[name]) if name else None)
        if bounds[0] is not None:
            lo = max(lo, _quantize(bounds[0], sy, zy))
        if bounds[1] is not None:
            hi = min(hi, _quantize(bounds[1], sy, zy))
    return (lo, hi) if lo <= hi else None


def _fuse(
    graph: Graph,
    product: Node,
    values: dict[str, np.ndarray],
    producers: dict[str, Node],
    consumers: dict[str, list[Node]],
    int16_pairs: bool = False,
) -> tuple[Node, _Pattern, dict[str, np.ndarray]] | None:
    """The fused node, the pattern and the new constants for ``product``, or None."""
    if len(product.inputs) < 2 or product.outputs[0] in graph.outputs:
        return None
    attrs = product.attrs
    if product.op_type == "Gemm" and (
        attrs.get("transA", 0) or (len(product.inputs) > 2 and product.inputs[2] and attrs.get("beta", 1.0) != 1.0)
    ):
        return None
    x_dq, w_dq = producers.get(product.inputs[0]), producers.get(product.inputs[1])
    if not (_dequantize_node(x_dq) and _dequantize_node(w_dq)):
        return None
    assert x_dq is not None and w_dq is not None
    # the activation: per tensor, not a constant (folding handles constant products)
    x_q = x_dq.inputs[0]
    sx, zx, known = _params(x_dq, values)
    if x_q in values or not known or not _scalar(sx) or (zx is not None and not _scalar(zx)):
        return None
    x_dtype = _value_dtype(graph, x_q, zx, producers, values)
    if x_dtype not in _INT_RANGES:
        return None
    # the weights: constant int8 / uint8, per tensor or per output channel
    w_q = values.get(w_dq.inputs[0])
    sw, zw, known = _params(w_dq, values)
    if w_q is None or not known or str(w_q.dtype) not in _INT_RANGES:
        return None
    assert sw is not None
    transposed = product.op_type == "Gemm" and bool(attrs.get("transB", 0))
    if product.op_type == "Conv":
        if w_q.ndim < 3:
            return None
        channel_axis, channels = 0, w_q.shape[0]
    else:
        if w_q.ndim != 2:
            return None
        channel_axis = 0 if transposed else 1
        channels = w_q.shape[channel_axis]
    axis = int(w_dq.attrs.get("axis", 1)) % w_q.ndim
    if sw.size != 1 and (sw.ndim != 1 or sw.size != channels or axis != channel_axis):
        return None
    w_zero = 0
    if zw is not None:
        if zw.size != 1 and (zw.ndim != 1 or zw.size != channels or axis != channel_axis):
            return None
        if len(np.unique(zw)) != 1:
            return None  # zero points that differ per channel: left in float
        w_zero = int(_item(zw))
    x_zero = int(_item(zx)) if zx is not None else 0
    # the output: through Relu / Clip to one QuantizeLinear, nothing else reading on the way
    chain: list[Node] = []
    value = product.outputs[0]
    while True:
        users = consumers.get(value, [])
        if len(users) != 1 or value in graph.outputs or users[0].inputs[0] != value:
            return None
        user = users[0]
        if user.op_type == "QuantizeLinear":
            break
        if user.op_type not in ("Relu", "Clip"):
            return None
        chain.append(user)
        value = user.outputs[0]
    q = user
    zy: np.ndarray | np.generic | None  # a missing zero point becomes the scalar np.uint8(0) below
    sy, zy, known = _params(q, values)
    if not known or not _scalar(sy) or (zy is not None and not _scalar(zy)) or "output_dtype" in q.attrs:
        return None
    assert sy is not None
    zy = np.asarray(zy) if zy is not None else np.uint8(0)
    y_dtype = str(zy.dtype)
    if y_dtype not in _INT_RANGES:
        return None
    bounds = _chain_bounds(chain, values, graph.opset, sy, zy, y_dtype)
    if bounds is None:
        return None
    # weights as the kernel reads them: Conv (M, C / group, k...), products (K, N)
    weight_name = w_dq.inputs[0]
    weight = w_q
    new_constants: dict[str, np.ndarray] = {}
    if transposed:
        weight = np.ascontiguousarray(w_q.T)
        weight_name = f"{weight_name}.kn"
        new_constants[weight_name] = weight
    # the scale, in float32 as onnxruntime computes it
    scale_x = np.float32(_item(sx))
    if product.op_type == "Gemm":
        scale_x = np.float32(np.float32(attrs.get("alpha", 1.0)) * scale_x)
    scale = ((scale_x * sw.astype(np.float32).reshape(-1)) / np.float32(_item(sy))).astype(np.float32)
    # the bias: int32, quantized with sx * sw; the activation zero point folded in
    bias = np.zeros(channels, np.int64)
    bias_dq = None
    bias_input = product.inputs[2] if product.op_type != "MatMul" and len(product.inputs) > 2 else ""
    if bias_input:
        bias_dq = producers.get(bias_input)
        if not _dequantize_node(bias_dq):
            return None
        assert bias_dq is not None
        b_q = values.get(bias_dq.inputs[0])
        sb, zb, known = _params(bias_dq, values)
        if b_q is None or not known or b_q.dtype != np.int32 or (zb is not None and np.any(zb != 0)):
            return None
        if b_q.size not in (1, channels) or (b_q.ndim > 1 and b_q.shape[-1] != b_q.size):
            return None
        expected = (np.float32(_item(sx)) * sw.astype(np.float32).reshape(-1)).astype(np.float32)
        assert sb is not None
        if not np.allclose(sb.astype(np.float32).reshape(-1), expected, rtol=1e-5, atol=0):
            return None
        bias = bias + b_q.astype(np.int64).reshape(-1)
    if product.op_type == "Conv":
        depthwise = w_q.shape[1] == 1 and channels == int(attrs.get("group", 1))
    else:
        depthwise = False
    pairs = int16_pairs and str(w_q.dtype) == "int8" and w_zero == 0 and not depthwise
    if x_dtype == "int8":
        pairs = pairs and _becomes_uint8(graph, x_q, q, producers, consumers)
    # a Relu / Clip that clips quantized values keeps onnxruntime from fusing the pattern into
    # its integer kernel (it drops one only where the output's range already implies it): float
    pairs = pairs and bounds == _INT_RANGES[y_dtype]
    # int8 activations in pairs: the products read x + 128 (module docstring), the zero point too
    folded_zero = x_zero + 128 if pairs and x_dtype == "int8" else x_zero
    if w_zero == 0 and folded_zero != 0:
        sums = weight.astype(np.int64).reshape(channels, -1).sum(axis=1) if product.op_type == "Conv" else None
        if sums is None:
            sums = weight.astype(np.int64).sum(axis=0)
        bias = bias - folded_zero * sums
    if np.any(bias < np.iinfo(np.int32).min) or np.any(bias > np.iinfo(np.int32).max):
        return None
    stem = q.outputs[0]
    new_constants[f"{stem}.qbias"] = bias.astype(np.int32)
    new_constants[f"{stem}.qscale"] = scale if scale.size > 1 else scale.reshape(1)
    if product.op_type == "Conv":
        op_type = QCONV
        new_attrs = {k: v for k, v in attrs.items() if k in _CONV_ATTRS}
    else:
        op_type = QMATMUL
        new_attrs = {}
    if pairs:
        new_attrs["int16_pairs"] = 1  # onnxruntime's vpmaddubsw kernels (module docstring)
    new_attrs.update(
        x_zero_point=x_zero,
        w_zero_point=w_zero,
        y_zero_point=int(_item(zy)),
        y_min=bounds[0],
        y_max=bounds[1],
        y_dtype=y_dtype,
    )
    node = Node(
        op_type,
        product.name,
        [x_q, weight_name, f"{stem}.qbias", f"{stem}.qscale"],
        [q.outputs[0]],
        new_attrs,
    )
    dequantized = [x_dq, w_dq] + ([bias_dq] if bias_dq is not None else [])
    return node, _Pattern(product, q, [product, *chain, q], dequantized), new_constants


def _fuse_add(
    graph: Graph,
    add: Node,
    values: dict[str, np.ndarray],
    producers: dict[str, Node],
    consumers: dict[str, list[Node]],
) -> tuple[Node, _Pattern, dict[str, np.ndarray]] | None:
    """``DequantizeLinear(a), DequantizeLinear(b) -> Add -> QuantizeLinear``, every quantization
    per tensor and of one type -> ``QAdd`` (onnxruntime's QLinearAdd), or None."""
    sources = [producers.get(name) for name in add.inputs[:2]]
    users = consumers.get(add.outputs[0], [])
    if len(add.inputs) != 2 or add.outputs[0] in graph.outputs or len(users) != 1:
        return None
    q = users[0]
    if q.op_type != "QuantizeLinear" or "output_dtype" in q.attrs or not all(_dequantize_node(n) for n in sources):
        return None
    attrs: dict[str, Any] = {}
    dtypes = set()
    for role, node in (("a", sources[0]), ("b", sources[1]), ("y", q)):
        assert node is not None
        scale, zero, known = _params(node, values)
        if not known or not _scalar(scale) or (zero is not None and not _scalar(zero)):
            return None
        name = node.outputs[0] if role == "y" else node.inputs[0]
        dtypes.add(_value_dtype(graph, name, zero, producers, values) if role != "y" else _zero_dtype(zero))
        attrs[f"{role}_scale"] = float(_item(scale))
        attrs[f"{role}_zero_point"] = int(_item(zero)) if zero is not None else 0
    if len(dtypes) != 1 or not dtypes <= set(_INT_RANGES):
        return None
    attrs["y_dtype"] = dtypes.pop()
    inputs = [n.inputs[0] for n in sources if n is not None]
    node = Node(QADD, add.name, inputs, [q.outputs[0]], attrs)
    return node, _Pattern(add, q, [add, q], [n for n in sources if n is not None]), {}


def _zero_dtype(zero: np.ndarray | None) -> str:
    return str(np.asarray(zero).dtype) if zero is not None else "uint8"
