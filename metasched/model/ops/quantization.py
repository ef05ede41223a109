"""Quantization: QuantizeLinear / DequantizeLinear (per-tensor and per-axis), MatMulInteger and
ConvInteger (int32 accumulation of zero-point-shifted 8-bit operands), and the internal operators
the QDQ patterns become (``metasched.model.qdq``): QConv / QMatMul (an int8 reduction the int8
dot-product intrinsics match, requantized in its epilogue; with ``int16_pairs``, the products
summed in saturated int16 pairs as onnxruntime's ``vpmaddubsw`` kernels sum them on x86-64
without VNNI) and QAdd (onnxruntime's QLinearAdd)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, overload

import numpy as np

from metasched.model.ops import (
    OpContext,
    broadcast_load,
    broadcast_shapes,
    cast,
    constant_tensor,
    mul,
    normalize_axis,
    register,
    select,
)
from metasched.model.ops.conv import conv_output_size, lower_conv, pad_tensor, resolve_pads
from metasched.model.ops.elementwise import _round_half_even
from metasched.model.ops.matmul import lower_matmul
from metasched.model.te import Tensor, lazy
from tir.ir import Call, PrimExpr, as_dtype, const
from tir.ir.expr import max_expr, min_expr


@overload
def _param(t: Tensor, axis: int, i: tuple[PrimExpr, ...]) -> PrimExpr: ...
@overload
def _param(t: Tensor | None, axis: int, i: tuple[PrimExpr, ...]) -> PrimExpr | None: ...
def _param(t: Tensor | None, axis: int, i: tuple[PrimExpr, ...]) -> PrimExpr | None:
    if t is None:
        return None
    if t.ndim == 0 or t.size == 1:
        return t.load(()) if t.ndim == 0 else t[tuple(const(0) for _ in t.shape)]
    return t[(i[axis],)]


@register("QuantizeLinear", kind="injective")
def _quantize(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    x, scale = inputs[0], inputs[1]
    zero = inputs[2] if len(inputs) > 2 else None
    axis = normalize_axis(int(ctx.attr("axis", 1)), max(x.ndim, 1), ctx)
    out = zero.dtype if zero is not None else "uint8"
    lo, hi = (0, 255) if out == "uint8" else (-128, 127)

    def element(*i: PrimExpr) -> PrimExpr:
        v = _round_half_even(x[i] / _param(scale, axis, i))
        z = _param(zero, axis, i)
        if z is not None:
            v = v + cast(z, x.dtype)
        v = min_expr(max_expr(v, const(float(lo), x.dtype)), const(float(hi), x.dtype))
        return cast(v, out)

    return [lazy(x.shape, out, element)]


@register("DequantizeLinear", kind="injective")
def _dequantize(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    x, scale = inputs[0], inputs[1]
    zero = inputs[2] if len(inputs) > 2 else None
    axis = normalize_axis(int(ctx.attr("axis", 1)), max(x.ndim, 1), ctx)
    dtype = scale.dtype

    def element(*i: PrimExpr) -> PrimExpr:
        # the zero point subtracted in int32, as onnxruntime does (exact for int32 biases)
        v = cast(x[i], "int32")
        z = _param(zero, axis, i)
        if z is not None:
            v = v - cast(z, "int32")
        return cast(v, dtype) * _param(scale, axis, i)

    return [lazy(x.shape, dtype, element)]


@register("MatMulInteger", kind="complex")
def _matmul_integer(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    a, b = inputs[0], inputs[1]
    az = inputs[2] if len(inputs) > 2 else None
    bz = inputs[3] if len(inputs) > 3 else None
    return [lower_matmul(ctx, a, b, "int32", az, bz)]


@register("ConvInteger", kind="complex")
def _conv_integer(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    x, w = inputs[0], inputs[1]
    xz = inputs[2] if len(inputs) > 2 else None
    wz = inputs[3] if len(inputs) > 3 else None
    if wz is not None and wz.size > 1:
        raise ctx.fail("per-channel weight zero points are not supported")
    xz_e = None if xz is None else (xz.load(()) if xz.ndim == 0 else xz[tuple(const(0) for _ in xz.shape)])
    wz_e = None if wz is None else (wz.load(()) if wz.ndim == 0 else wz[tuple(const(0) for _ in wz.shape)])
    return [lower_conv(ctx, x, w, "int32", xz_e, wz_e)]


# ---------------------------------------------------------------- QDQ patterns (metasched.model.qdq)


def _per_channel(t: Tensor, channel: PrimExpr) -> PrimExpr:
    if t.ndim == 0:
        return t.load(())
    if t.size == 1:
        return t[tuple(const(0) for _ in t.shape)]
    return t[(channel,)]


def requantize(ctx: OpContext, acc: Tensor, bias: Tensor, scale: Tensor, channel_axis: int) -> Tensor:
    """``saturate(round_half_even(float32(acc + bias[c]) * scale[c]) + y_zero_point)`` into
    ``y_dtype`` within [``y_min``, ``y_max``]: onnxruntime's requantization (MlasRequantizeOutput),
    an epilogue of the reduction (lazy: fused, not stored)."""
    out = str(ctx.attr("y_dtype", "uint8"))
    zero = float(ctx.attr("y_zero_point", 0))
    lo, hi = float(ctx.attr("y_min")), float(ctx.attr("y_max"))

    def element(*i: PrimExpr) -> PrimExpr:
        c = i[channel_axis]
        v = cast(acc[i] + _per_channel(bias, c), "float32") * _per_channel(scale, c)
        v = _round_half_even(v) + const(zero, "float32")
        return cast(min_expr(max_expr(v, const(lo, "float32")), const(hi, "float32")), out)

    return lazy(acc.shape, out, element)


def _pair_sum(p0: PrimExpr, p1: PrimExpr) -> PrimExpr:
    """``saturate_int16(p0 + p1)`` in int32: one lane of ``vpmaddubsw``."""
    return min_expr(max_expr(p0 + p1, const(-32768, "int32")), const(32767, "int32"))


def _pair_indices(size: int, r: PrimExpr) -> tuple[PrimExpr, PrimExpr, PrimExpr | None]:
    """The two flat indices of pair ``r`` of ``size`` values and, for an odd ``size``, the
    condition under which the second exists (its index clamped to stay in bounds)."""
    first = r * 2
    if size % 2 == 0:
        return first, first + 1, None
    second = first + 1
    return first, min_expr(second, const(size - 1, "int32")), second < const(size, "int32")


def _as_uint8(value: PrimExpr, dtype: str) -> PrimExpr:
    """An activation as onnxruntime's ``vpmaddubsw`` kernels read it, in int32: int8 ones are
    converted to uint8 by adding 128 (their zero point too: ``fuse_qdq`` folds ``zx + 128``)."""
    widened = cast(value, "int32")
    return widened + const(128, "int32") if str(dtype) == "int8" else widened


def _pairs_reduce(ctx: OpContext, shape: tuple[Any, ...], size: int, product: Any) -> Tensor:
    """``out[s] = sum over pairs of saturate_int16(product(s, 2j) + product(s, 2j + 1))`` for
    ``size`` products (flat index; an odd last one paired with zero), summed in int32."""

    def element(s: tuple[PrimExpr, ...], r: tuple[PrimExpr, ...]) -> PrimExpr:
        first, second, exists = _pair_indices(size, r[0])
        p1 = product(s, second)
        if exists is not None:
            p1 = select(exists, p1, const(0, "int32"))
        return _pair_sum(product(s, first), p1)

    return ctx.builder.reduce(ctx.stage, shape, ((size + 1) // 2,), element, "sum", dtype="int32")


def _conv_int16_pairs(ctx: OpContext, padded: Tensor, w: Tensor) -> Tensor:
    """The raw ``sum x_q * w_q`` of an (already padded) NCHW convolution as onnxruntime's
    ``vpmaddubsw`` kernels sum it (``metasched.model.qdq``): products in MLAS's K order
    ((kernel position, input channel) of each group, flattened) summed in pairs into int16 with
    saturation, the pairs in int32. With an even channel count per group a pair is two
    adjacent channels at one kernel position: the reduction runs over (channel pair, kernel...)."""
    n_sp = padded.ndim - 2
    m, cpg = w.shape[0], w.shape[1]
    kernel = [int(k) for k in w.shape[2:]]  # type: ignore[arg-type]  # static extents only: int() refuses a symbolic one
    strides = list(ctx.attr("strides", [1] * n_sp))
    dilations = list(ctx.attr("dilations", [1] * n_sp))
    group = int(ctx.attr("group", 1))
    mpg = m // group
    out_sp = [conv_output_size(padded.shape[2 + d], kernel[d], strides[d], dilations[d], 0, 0) for d in range(n_sp)]
    shape = (padded.shape[0], m, *out_sp)

    def product(s: tuple[PrimExpr, ...], ic: PrimExpr, window: list[PrimExpr]) -> PrimExpr:
        nn, oc, out_pos = s[0], s[1], s[2:]
        in_c = ic if group == 1 else (oc // mpg) * cpg + ic
        pos = [mul(out_pos[d], strides[d]) + mul(window[d], dilations[d]) for d in range(n_sp)]
        return _as_uint8(padded[(nn, in_c, *pos)], padded.dtype) * cast(w[(oc, ic, *window)], "int32")

    if cpg % 2 == 0:

        def element(s: tuple[PrimExpr, ...], r: tuple[PrimExpr, ...]) -> PrimExpr:
            window = list(r[1:])
            return _pair_sum(product(s, r[0] * 2, window), product(s, r[0] * 2 + 1, window))

        return ctx.builder.reduce(ctx.stage, shape, (cpg // 2, *kernel), element, "sum", dtype="int32")

    def flat(s: tuple[PrimExpr, ...], t: PrimExpr) -> PrimExpr:
        window: list[PrimExpr]
        ic, rest, window = t % cpg, t // cpg, []
        for k in reversed(kernel):
            window.insert(0, rest % k)
            rest = rest // k
        return product(s, ic, window)

    size = cpg * int(np.prod(kernel))
    return _pairs_reduce(ctx, shape, size, flat)  # type: ignore[arg-type]  # static extents only, as above


@register("QConv", kind="complex")
def _qconv(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    """Internal: x_q (N, C, spatial...) uint8/int8, w_q (M, C / group, k...) int8/uint8, bias
    (M,) int32 with the input zero point folded in, scale (M,) or (1,) float32; Conv's attributes
    and ``x_zero_point``, ``w_zero_point``, ``y_zero_point``, ``y_min``, ``y_max``, ``y_dtype``;
    ``int16_pairs``: the products summed as onnxruntime's ``vpmaddubsw`` kernels sum them."""
    x, w, bias, scale = inputs[:4]
    x_zero, w_zero = int(ctx.attr("x_zero_point", 0)), int(ctx.attr("w_zero_point", 0))
    if ctx.attr("int16_pairs", 0):
        if w_zero:
            raise ctx.fail("int16_pairs needs a zero weight zero point")
        n_sp = x.ndim - 2
        kernel = list(ctx.attr("kernel_shape", w.shape[2:]))
        strides = list(ctx.attr("strides", [1] * n_sp))
        dilations = list(ctx.attr("dilations", [1] * n_sp))
        begin, end = resolve_pads(ctx, x.shape[2:], kernel, strides, dilations)
        acc = _conv_int16_pairs(ctx, pad_tensor(ctx, x, begin, end, x_zero), w)
    elif w_zero:
        # both zero points subtracted inside the reduction (exact; no dot-product intrinsic fits)
        acc = lower_conv(ctx, x, w, "int32", const(x_zero, "int32"), const(w_zero, "int32"))
    else:
        # acc += int32(x) * int32(w), the padding reading the zero point: the bias corrects it
        n_sp = x.ndim - 2
        kernel = list(ctx.attr("kernel_shape", w.shape[2:]))
        strides = list(ctx.attr("strides", [1] * n_sp))
        dilations = list(ctx.attr("dilations", [1] * n_sp))
        begin, end = resolve_pads(ctx, x.shape[2:], kernel, strides, dilations)
        padded = pad_tensor(ctx, x, begin, end, x_zero)
        unpadded = replace(ctx, attrs={**ctx.attrs, "pads": [0] * (2 * n_sp), "auto_pad": "NOTSET"})
        acc = lower_conv(unpadded, padded, w, "int32")
    return [requantize(ctx, acc, bias, scale, 1)]


@register("QMatMul", kind="complex")
def _qmatmul(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    """Internal: a_q (..., K) uint8/int8, b_q (K, N) int8/uint8, bias (N,) int32 with the
    input zero point folded in, scale (N,) or (1,) float32; ``x_zero_point``, ``w_zero_point``
    and the output attributes of ``QConv``."""
    a, b, bias, scale = inputs[:4]
    a_zero, b_zero = int(ctx.attr("x_zero_point", 0)), int(ctx.attr("w_zero_point", 0))
    if ctx.attr("int16_pairs", 0):
        if b_zero:
            raise ctx.fail("int16_pairs needs a zero weight zero point")
        acc = _matmul_int16_pairs(ctx, a, b)
    elif b_zero:
        zeros = (constant_tensor(np.array(a_zero, np.int32)), constant_tensor(np.array(b_zero, np.int32)))
        acc = lower_matmul(ctx, a, b, "int32", *zeros)
    else:
        acc = lower_matmul(ctx, a, b, "int32")
    return [requantize(ctx, acc, bias, scale, -1)]


def _matmul_int16_pairs(ctx: OpContext, a: Tensor, b: Tensor) -> Tensor:
    """``a @ b`` (a (..., M, K) or (K,), b (K, N)) as onnxruntime's ``vpmaddubsw`` kernels sum
    it: adjacent products along K summed in pairs into int16 with saturation, the pairs in int32."""
    a2 = a if a.ndim >= 2 else lazy((1, a.shape[0]), a.dtype, lambda i, k: a[(k,)])
    size = int(a2.shape[-1])  # type: ignore[arg-type]  # static extents only: int() refuses a symbolic one
    if b.ndim != 2 or int(b.shape[0]) != size:  # type: ignore[arg-type]  # as above
        raise ctx.fail(f"inner dimensions differ: {a.shape} @ {b.shape}")
    shape = (*a2.shape[:-1], b.shape[1])

    def product(s: tuple[PrimExpr, ...], k: PrimExpr) -> PrimExpr:
        return _as_uint8(a2[(*s[:-1], k)], a2.dtype) * cast(b[(k, s[-1])], "int32")

    y = _pairs_reduce(ctx, shape, size, product)
    if a.ndim == 1:
        return lazy((b.shape[1],), "int32", lambda j: y[(const(0), j)])
    return y


def _add_ratios(ctx: OpContext) -> tuple[float, float, float]:
    """onnxruntime's QLinearAdd constants, in float32 as MLAS computes them: the scale ratios
    ``sa / sy``, ``sb / sy`` and ``zy - (ra * za + rb * zb)``."""
    f32 = np.float32
    ra = f32(ctx.attr("a_scale")) / f32(ctx.attr("y_scale"))
    rb = f32(ctx.attr("b_scale")) / f32(ctx.attr("y_scale"))
    za, zb, zy = (f32(int(ctx.attr(k, 0))) for k in ("a_zero_point", "b_zero_point", "y_zero_point"))
    return float(ra), float(rb), float(zy - (ra * za + rb * zb))


def _broadcast_inner(shape: tuple[Any, ...], out: tuple[Any, ...]) -> bool:
    """Whether an operand of ``shape`` is one value along the innermost axis of ``out`` that is
    not 1: onnxruntime's broadcasting then hands MLAS that operand as a scalar per span."""
    for k in range(1, len(out) + 1):
        if out[-k] != 1:
            return k > len(shape) or shape[-k] == 1
    return False


@register("QAdd", kind="injective")
def _qadd(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    """Internal: ``QuantizeLinear(DequantizeLinear(a) + DequantizeLinear(b))`` on quantized a, b
    (per-tensor parameters as attributes ``a_scale``, ``a_zero_point``, ``b_...``, ``y_...``,
    ``y_dtype``), with onnxruntime's QLinearAdd arithmetic (MLAS, AVX2):
    ``saturate(round_half_even(fma(a, ra, fma(b, rb, fixed))))``."""
    a, b = inputs[0], inputs[1]
    out = str(ctx.attr("y_dtype", "uint8"))
    lo, hi = (0.0, 255.0) if out == "uint8" else (-128.0, 127.0)
    ra, rb, fixed = _add_ratios(ctx)
    shape = broadcast_shapes(a.shape, b.shape)
    f32 = "float32"

    a_scalar, b_scalar = _broadcast_inner(a.shape, shape), _broadcast_inner(b.shape, shape)

    def element(*i: PrimExpr) -> PrimExpr:
        av, bv = cast(broadcast_load(a, i), f32), cast(broadcast_load(b, i), f32)
        if a_scalar and not b_scalar:  # MLAS folds an operand constant along a span into the fixed part
            v: PrimExpr = Call(as_dtype(f32), "fma", (bv, const(rb, f32), const(fixed, f32) + av * const(ra, f32)))
        elif b_scalar and not a_scalar:
            v = Call(as_dtype(f32), "fma", (av, const(ra, f32), const(fixed, f32) + bv * const(rb, f32)))
        else:
            inner = Call(as_dtype(f32), "fma", (bv, const(rb, f32), const(fixed, f32)))
            v = Call(as_dtype(f32), "fma", (av, const(ra, f32), inner))
        v = _round_half_even(v)
        return cast(min_expr(max_expr(v, const(lo, f32)), const(hi, f32)), out)

    return [lazy(shape, out, element)]
