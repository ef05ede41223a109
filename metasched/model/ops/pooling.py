"""Pooling: MaxPool, AveragePool (count_include_pad, ceil_mode, auto_pad), LpPool, GlobalAveragePool,
GlobalMaxPool, GlobalLpPool. Layout NCHW, any number of spatial axes; channels-last (N, spatial..., C) for a
node the layout pass marked (see ``metasched.model.ops.conv.LAYOUT_ATTR``)."""

from __future__ import annotations

from typing import Any, cast

from metasched.model.ops import OpContext, mul, register
from metasched.model.ops.conv import channels_last, join_channels, pad_tensor, resolve_pads, split_channels
from metasched.model.ops.elementwise import call
from metasched.model.symbolic import Dim, dim_max, is_symbolic
from metasched.model.te import Tensor, _lowest, lazy
from tir.ir import Cast, PrimExpr, as_dtype, const
from tir.ir.expr import max_expr, min_expr


def _out_size(size: int, k: int, s: int, d: int, pb: int, pe: int, ceil_mode: bool) -> int:
    span = size + pb + pe - ((k - 1) * d + 1)
    out = (-(-span // s) if ceil_mode else span // s) + 1
    # ceil mode: the last window must start inside the input or the begin padding
    if ceil_mode and (out - 1) * s >= size + pb:
        out -= 1
    return out


def _lp_power(ctx: OpContext, x: Tensor) -> tuple[Tensor, Any]:
    """|x| ** p as a lazy tensor (zero padding stays zero), and the root that ends the pool."""
    p = int(ctx.attr("p", 2))
    if p < 1:
        raise ctx.fail(f"p={p} (p >= 1)")
    if p == 1:
        powered = lazy(x.shape, x.dtype, lambda *i: call("abs", x[i]))
        return powered, lambda v: v
    if p == 2:
        return lazy(x.shape, x.dtype, lambda *i: x[i] * x[i]), lambda v: call("sqrt", v)
    exponent, root = const(float(p), x.dtype), const(1.0 / p, x.dtype)
    powered = lazy(x.shape, x.dtype, lambda *i: call("pow", call("abs", x[i]), exponent))
    return powered, lambda v: call("pow", v, root)


def _pool(ctx: OpContext, x: Tensor, kind: str) -> Tensor:
    root = None
    if kind == "lp":
        x, root = _lp_power(ctx, x)
    last = channels_last(ctx)
    outer, x_sp = split_channels(x.shape, last)
    n_sp = x.ndim - 2
    kernel = list(ctx.attr("kernel_shape"))
    strides = list(ctx.attr("strides", [1] * n_sp))
    dilations = list(ctx.attr("dilations", [1] * n_sp))
    ceil_mode = bool(ctx.attr("ceil_mode", 0))
    begin, end = resolve_pads(ctx, x_sp, kernel, strides, dilations)
    out_sp = [_out_size(x_sp[d], kernel[d], strides[d], dilations[d], begin[d], end[d], ceil_mode) for d in range(n_sp)]
    # The padded input must cover every window, ceil mode's last partial one included.
    end_full = [
        dim_max(end[d], (out_sp[d] - 1) * strides[d] + (kernel[d] - 1) * dilations[d] + 1 - x_sp[d] - begin[d])
        for d in range(n_sp)
    ]
    fill = _lowest(x.dtype) if kind == "max" else 0.0
    padded = pad_tensor(ctx, x, begin, end_full, fill, lead=1 if last else 2, trail=1 if last else 0)
    shape = join_channels(outer, out_sp, last)

    def element(s: tuple[PrimExpr, ...], r: tuple[PrimExpr, ...]) -> PrimExpr:
        s_outer, s_sp = split_channels(s, last)
        pos = [mul(s_sp[d], strides[d]) + mul(r[d], dilations[d]) for d in range(n_sp)]
        return padded[join_channels(s_outer, pos, last)]

    y = ctx.builder.reduce(ctx.stage, shape, kernel, element, "max" if kind == "max" else "sum", dtype=x.dtype)
    if kind == "max":
        return y
    if root is not None:
        return lazy(shape, x.dtype, lambda *i: root(y[i]))
    count_pad = bool(ctx.attr("count_include_pad", 0))

    def average(*i: PrimExpr) -> PrimExpr:
        count: PrimExpr | None = None
        i_sp = split_channels(i, last)[1]
        for d in range(n_sp):
            start = i_sp[d] * strides[d] - begin[d]
            stop = start + (kernel[d] - 1) * dilations[d] + 1
            if count_pad:
                # padded positions count, the ceil-mode overhang beyond the end padding does not
                lo, hi = max_expr(start, -begin[d]), min_expr(stop, x_sp[d] + end[d])
            else:
                lo, hi = max_expr(start, 0), min_expr(stop, x_sp[d])
            extent = (hi - lo + dilations[d] - 1) // dilations[d] if dilations[d] > 1 else hi - lo
            count = extent if count is None else count * extent
        assert count is not None
        return y[i] / Cast(as_dtype(x.dtype), count)

    return lazy(shape, x.dtype, average)


@register("MaxPool", kind="complex")
def _max_pool(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    if ctx.num_outputs > 1:
        raise ctx.fail("the Indices output of MaxPool is not supported")
    if ctx.attr("storage_order", 0):
        raise ctx.fail("storage_order=1 is not supported")
    return [_pool(ctx, inputs[0], "max")]


@register("AveragePool", kind="complex")
def _avg_pool(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    return [_pool(ctx, inputs[0], "avg")]


@register("LpPool", kind="complex")
def _lp_pool(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    return [_pool(ctx, inputs[0], "lp")]


def _global(ctx: OpContext, x: Tensor, kind: str) -> Tensor:
    root = None
    if kind == "lp":
        x, root = _lp_power(ctx, x)
    last = channels_last(ctx)
    outer, sp = split_channels(x.shape, last)
    shape = join_channels(outer, [1] * len(sp), last)

    def element(s: tuple[PrimExpr, ...], r: tuple[PrimExpr, ...]) -> PrimExpr:
        return x[join_channels(split_channels(s, last)[0], r, last)]

    y = ctx.builder.reduce(ctx.stage, shape, sp, element, "max" if kind == "max" else "sum", dtype=x.dtype)
    if kind == "max":
        return y
    if root is not None:
        return lazy(shape, x.dtype, lambda *i: root(y[i]))
    total: Dim = 1
    for e in sp:
        total *= e
    if is_symbolic(total):  # a symbolic window: divide by its size at run time
        return lazy(shape, x.dtype, lambda *i: y[i] / Cast(as_dtype(x.dtype), cast(PrimExpr, total)))
    return lazy(shape, x.dtype, lambda *i: y[i] * const(1.0 / cast(int, total), x.dtype))


@register("GlobalAveragePool", kind="complex")
def _global_avg(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    return [_global(ctx, inputs[0], "avg")]


@register("GlobalMaxPool", kind="complex")
def _global_max(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    return [_global(ctx, inputs[0], "max")]


@register("GlobalLpPool", kind="complex")
def _global_lp(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    return [_global(ctx, inputs[0], "lp")]
