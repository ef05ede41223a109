"""Quantization: QuantizeLinear / DequantizeLinear (per-tensor and per-axis), MatMulInteger and
ConvInteger (int32 accumulation of zero-point-shifted 8-bit operands)."""

from __future__ import annotations

from typing import Any

from metasched.model.ops import OpContext, cast, normalize_axis, register
from metasched.model.ops.conv import lower_conv
from metasched.model.ops.elementwise import _round_half_even
from metasched.model.ops.matmul import lower_matmul
from metasched.model.te import Tensor, lazy
from tir.ir import PrimExpr, const
from tir.ir.expr import max_expr, min_expr


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
        v = cast(cast(x[i], "int32"), dtype)
        z = _param(zero, axis, i)
        if z is not None:
            v = v - cast(cast(z, "int32"), dtype)
        return v * _param(scale, axis, i)

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
