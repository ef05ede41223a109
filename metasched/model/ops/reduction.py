"""Reductions over axes: ReduceMean/Sum/Max/Min/Prod/SumSquare/L1/L2/LogSum/LogSumExp (axes as
attribute or, from opset 13/18, as a constant input; keepdims; noop_with_empty_axes), and
CumSum (a reduction over the prefix of each element: O(n^2) along the axis, exclusive /
reverse)."""

from __future__ import annotations

from typing import Any

import numpy as np

from metasched.model.ops import OpContext, normalize_axis, reduce_stage, register, select
from metasched.model.ops.elementwise import call
from metasched.model.te import Tensor, lazy
from tir.ir import PrimExpr, const


def reduce_axes(ctx: OpContext, x: Tensor) -> list[int] | None:
    axes = ctx.attr("axes")
    if axes is None:
        value = ctx.value(1)
        axes = None if value is None else [int(a) for a in value.reshape(-1)]
    if not axes:
        if ctx.attr("noop_with_empty_axes", 0):
            return None
        return list(range(x.ndim))
    return sorted({normalize_axis(int(a), x.ndim, ctx) for a in axes})


def lower_reduce(
    ctx: OpContext, x: Tensor, axes: list[int], combiner: str, keepdims: bool, pre: Any = None, name: str | None = None
) -> Tensor:
    kept = [d for d in range(x.ndim) if d not in axes]
    rshape = [x.shape[d] for d in axes]
    shape = [1 if d in axes else x.shape[d] for d in range(x.ndim)] if keepdims else [x.shape[d] for d in kept]

    def element(s: tuple[PrimExpr, ...], r: tuple[PrimExpr, ...]) -> PrimExpr:
        idx: list[PrimExpr] = [const(0)] * x.ndim
        for k, d in enumerate(axes):
            idx[d] = r[k]
        for k, d in enumerate(kept):
            idx[d] = s[d] if keepdims else s[k]
        v = x[tuple(idx)] if idx else x.load(())
        return pre(v) if pre is not None else v

    if combiner == "prod":
        return reduce_stage(ctx.builder, name or ctx.stage, shape, rshape, element, lambda a, b: a * b, 1, x.dtype)
    return ctx.builder.reduce(name or ctx.stage, shape, rshape, element, combiner, dtype=x.dtype)


_KINDS = {
    "ReduceSum": ("sum", None, None),
    "ReduceMean": ("sum", None, "mean"),
    "ReduceMax": ("max", None, None),
    "ReduceMin": ("min", None, None),
    "ReduceProd": ("prod", None, None),
    "ReduceSumSquare": ("sum", lambda v: v * v, None),
    "ReduceL1": ("sum", lambda v: call("abs", v), None),
    "ReduceL2": ("sum", lambda v: v * v, "sqrt"),
    "ReduceLogSum": ("sum", None, "log"),
}


def _make(op_type: str):  # type: ignore[no-untyped-def]
    combiner, pre, post = _KINDS[op_type]

    def lower(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
        x = inputs[0]
        axes = reduce_axes(ctx, x)
        if axes is None:
            # noop_with_empty_axes: a reduction over no axis, each element alone -- still
            # squared, made absolute or logged (onnxruntime: ReduceSumSquare gives x * x).
            def alone(*i: PrimExpr) -> PrimExpr:
                v = x[i] if i else x.load(())
                v = pre(v) if pre is not None else v
                return call(post, v) if post in ("sqrt", "log") else v

            return [lazy(x.shape, x.dtype, alone)]
        keepdims = bool(ctx.attr("keepdims", 1))
        y = lower_reduce(ctx, x, axes, combiner, keepdims, pre)
        if post is None:
            return [y]
        count = 1
        for d in axes:
            count *= x.shape[d]
        if post == "mean":
            return [lazy(y.shape, y.dtype, lambda *i: y[i] * const(1.0 / count, y.dtype))]
        return [lazy(y.shape, y.dtype, lambda *i: call(post, y[i]))]

    return lower


for _op in _KINDS:
    register(_op, kind="complex", value_inputs=(1,))(_make(_op))


@register("ReduceLogSumExp", kind="complex", value_inputs=(1,))
def _reduce_log_sum_exp(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    # log(sum(exp(x - m))) + m with m the maximum: exp never overflows (onnxruntime shifts too;
    # a row whose maximum is infinite is not shifted).
    x = inputs[0]
    axes = reduce_axes(ctx, x)
    if axes is None:
        return [lazy(x.shape, x.dtype, lambda *i: x[i])]
    keepdims = bool(ctx.attr("keepdims", 1))
    top = lower_reduce(ctx, x, axes, "max", True, name=ctx.stage + "_max")
    finite = float(np.finfo(x.dtype).max)

    def shift(i: tuple[PrimExpr, ...]) -> PrimExpr:
        m = top[tuple(const(0) if d in axes else v for d, v in enumerate(i))]
        return select(call("abs", m) > const(finite, x.dtype), const(0.0, x.dtype), m)

    total = lower_reduce(ctx, lazy(x.shape, x.dtype, lambda *i: call("exp", x[i] - shift(i))), axes, "sum", keepdims)

    def element(*i: PrimExpr) -> PrimExpr:
        full = i if keepdims else _reinsert(i, axes, x.ndim)
        return call("log", total[i] if i else total.load(())) + shift(full)

    return [lazy(total.shape, x.dtype, element)]


def _reinsert(i: tuple[PrimExpr, ...], axes: list[int], ndim: int) -> tuple[PrimExpr, ...]:
    """The index of the kept-dims shape from one of the reduced shape (zeros on ``axes``)."""
    rest = iter(i)
    return tuple(const(0) if d in axes else next(rest) for d in range(ndim))


@register("CumSum", kind="complex", value_inputs=(1,))
def _cumsum(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    x = inputs[0]
    axis = normalize_axis(int(ctx.constant_input(1, "axis").reshape(-1)[0]), x.ndim, ctx)
    exclusive = bool(ctx.attr("exclusive", 0))
    reverse = bool(ctx.attr("reverse", 0))

    def element(s: tuple[PrimExpr, ...], r: tuple[PrimExpr, ...]) -> PrimExpr:
        j, i = r[0], s[axis]
        if reverse:
            inside = j > i if exclusive else j >= i
        else:
            inside = j < i if exclusive else j <= i
        return select(inside, x[tuple(j if d == axis else v for d, v in enumerate(s))], const(0, x.dtype))

    return [ctx.builder.reduce(ctx.stage, x.shape, (x.shape[axis],), element, "sum", dtype=x.dtype)]
