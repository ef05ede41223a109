"""Reductions over axes: ReduceMean/Sum/Max/Min/Prod/SumSquare/L1/L2 (axes as attribute or, from
opset 13/18, as a constant input; keepdims; noop_with_empty_axes)."""

from __future__ import annotations

from typing import Any

from metasched.model.ops import OpContext, normalize_axis, register
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

    return ctx.builder.reduce(name or ctx.stage, shape, rshape, element, combiner, dtype=x.dtype)


_KINDS = {
    "ReduceSum": ("sum", None, None),
    "ReduceMean": ("sum", None, "mean"),
    "ReduceMax": ("max", None, None),
    "ReduceMin": ("min", None, None),
    "ReduceSumSquare": ("sum", lambda v: v * v, None),
    "ReduceL1": ("sum", lambda v: call("abs", v), None),
    "ReduceL2": ("sum", lambda v: v * v, "sqrt"),
    "ReduceLogSumExp": ("sum", lambda v: call("exp", v), "log"),
}


def _make(op_type: str):  # type: ignore[no-untyped-def]
    combiner, pre, post = _KINDS[op_type]

    def lower(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
        x = inputs[0]
        axes = reduce_axes(ctx, x)
        if axes is None:
            return [lazy(x.shape, x.dtype, lambda *i: x[i])]
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
