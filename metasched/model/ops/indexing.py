"""Indexing operators: GatherElements, GatherND, ScatterElements (and the older Scatter),
ScatterND, OneHot, Trilu, ReverseSequence. (NonZero, Unique, Compress and NonMaxSuppression,
whose output shape depends on the data, have no kernel here: the importer computes them on
constants and refuses them otherwise, ``metasched.model.onnx.DATA_DEPENDENT``.)

Gathers and index remapping are lazy (injective): each output element reads the input element
its index names. Indices read from tensors may be negative (counted from the end) and are
clamped into range: onnxruntime raises on an out-of-range index, a kernel must not read or
write outside its buffers.

A scatter is a copy of ``data`` followed by an opaque block (no iterators) whose serial loop
nest applies the updates in order: with duplicate indices the last update wins under
``reduction="none"`` (ONNX leaves that order unspecified; onnxruntime applies them in order too)
and accumulating reductions never race.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from metasched.model.ops import (
    OpContext,
    cast,
    clamp,
    normalize_axis,
    normalize_index,
    opaque_stage,
    register,
    select,
)
from metasched.model.te import Tensor, lazy
from tir.ir import PrimExpr, const
from tir.ir.expr import max_expr, min_expr


@register("GatherElements", kind="injective")
def _gather_elements(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    data, indices = inputs
    if indices.ndim != data.ndim:
        raise ctx.fail(f"indices of rank {indices.ndim} for data of rank {data.ndim} (the ranks must be equal)")
    axis = normalize_axis(int(ctx.attr("axis", 0)), data.ndim, ctx)
    extent = data.shape[axis]

    def element(*i: PrimExpr) -> PrimExpr:
        k = normalize_index(indices[i], extent)
        return data[tuple(k if d == axis else v for d, v in enumerate(i))]

    return [lazy(indices.shape, data.dtype, element)]


@register("GatherND", kind="injective")
def _gather_nd(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    data, indices = inputs
    batch = int(ctx.attr("batch_dims", 0))
    depth = indices.shape[-1] if indices.ndim else 0
    if indices.ndim < 1 or not isinstance(depth, int) or batch + depth > data.ndim:
        raise ctx.fail(
            f"indices of shape {indices.shape} cannot index data of rank {data.ndim} with batch_dims={batch}"
        )
    lead_rank = indices.ndim - 1
    shape = tuple(indices.shape[:-1]) + tuple(data.shape[batch + depth :])

    def element(*i: PrimExpr) -> PrimExpr:
        lead, tail = i[:lead_rank], i[lead_rank:]
        picked = tuple(normalize_index(indices[(*lead, const(d))], data.shape[batch + d]) for d in range(depth))
        return data[(*lead[:batch], *picked, *tail)]

    return [lazy(shape, data.dtype, element)]


_SCATTER_COMBINE: dict[str, Callable[[PrimExpr, PrimExpr], PrimExpr]] = {
    "none": lambda old, new: new,
    "add": lambda old, new: old + new,
    "mul": lambda old, new: old * new,
    "max": max_expr,
    "min": min_expr,
}


def _scatter_combine(ctx: OpContext) -> Callable[[PrimExpr, PrimExpr], PrimExpr]:
    reduction = ctx.attr("reduction", "none")
    if reduction not in _SCATTER_COMBINE:
        raise ctx.fail(f"reduction={reduction!r} is not one of {sorted(_SCATTER_COMBINE)}")
    return _SCATTER_COMBINE[reduction]


def _static_extents(ctx: OpContext, shape: tuple[Any, ...]) -> list[int]:
    if not all(isinstance(e, int) for e in shape):
        raise ctx.fail(f"the updates' shape {shape} must be static (the update loop nest runs over it)")
    return [int(e) for e in shape]


@register("ScatterElements", "Scatter", kind="opaque")
def _scatter_elements(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    data, indices, updates = inputs
    if not indices.ndim == updates.ndim == data.ndim:
        raise ctx.fail(f"data, indices and updates must have one rank, got {data.ndim}, {indices.ndim}, {updates.ndim}")
    axis = normalize_axis(int(ctx.attr("axis", 0)), data.ndim, ctx)
    combine = _scatter_combine(ctx)
    out = ctx.builder.compute(ctx.stage, data.shape, lambda *i: data[i], data.dtype)
    extent = data.shape[axis]

    def update(*j: PrimExpr) -> tuple[tuple[PrimExpr, ...], PrimExpr]:
        k = normalize_index(indices[j], extent)
        target = tuple(k if d == axis else v for d, v in enumerate(j))
        return target, combine(out[target], cast(updates[j], data.dtype))

    return [opaque_stage(ctx.builder, ctx.stage + "_update", out, _static_extents(ctx, indices.shape), update)]


@register("ScatterND", kind="opaque")
def _scatter_nd(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    data, indices, updates = inputs
    depth = indices.shape[-1] if indices.ndim else 0
    if indices.ndim < 1 or not isinstance(depth, int) or depth > data.ndim:
        raise ctx.fail(f"indices of shape {indices.shape} cannot index data of rank {data.ndim}")
    rows = tuple(indices.shape[:-1])
    expected = rows + tuple(data.shape[depth:])
    if tuple(updates.shape) != expected:
        raise ctx.fail(f"updates of shape {updates.shape}; expected {expected}")
    combine = _scatter_combine(ctx)
    out = ctx.builder.compute(ctx.stage, data.shape, lambda *i: data[i], data.dtype)

    def update(*j: PrimExpr) -> tuple[tuple[PrimExpr, ...], PrimExpr]:
        lead, tail = j[: len(rows)], j[len(rows) :]
        picked = tuple(normalize_index(indices[(*lead, const(d))], data.shape[d]) for d in range(depth))
        target = (*picked, *tail)
        return target, combine(out[target], cast(updates[j], data.dtype))

    return [opaque_stage(ctx.builder, ctx.stage + "_update", out, _static_extents(ctx, expected), update)]


@register("OneHot", kind="injective", value_inputs=(1,))
def _one_hot(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    indices, values = inputs[0], inputs[2]
    depth = int(ctx.constant_input(1, "depth").reshape(-1)[0])
    axis = normalize_axis(int(ctx.attr("axis", -1)), indices.ndim + 1, ctx)
    shape = tuple(indices.shape[:axis]) + (depth,) + tuple(indices.shape[axis:])
    off, on = (values[(const(k),)] if values.ndim else values.load(()) for k in (0, 1))

    def element(*i: PrimExpr) -> PrimExpr:
        rest = i[:axis] + i[axis + 1 :]
        k = cast(indices[rest] if rest else indices.load(()), "int32")  # floats truncate, as onnxruntime
        k = select(k < 0, k + depth, k)  # out of [-depth, depth): no position is "on"
        return select(k.equal(i[axis]), on, off)

    return [lazy(shape, values.dtype, element)]


@register("Trilu", kind="injective")
def _trilu(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    x = inputs[0]
    k_tensor = inputs[1] if len(inputs) > 1 else None
    upper = bool(ctx.attr("upper", 1))
    if x.ndim < 2:
        raise ctx.fail(f"the input must have rank >= 2, got {x.ndim}")

    def element(*i: PrimExpr) -> PrimExpr:
        offset = i[-1] - i[-2]
        if k_tensor is not None:
            k = cast(k_tensor.load(()) if k_tensor.ndim == 0 else k_tensor[(const(0),)], "int32")
            keep = offset >= k if upper else offset <= k
        else:
            keep = offset >= 0 if upper else offset <= 0
        return select(keep, x[i], const(0, x.dtype))

    return [lazy(x.shape, x.dtype, element)]


@register("ReverseSequence", kind="injective")
def _reverse_sequence(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    x, lengths = inputs
    batch_axis = normalize_axis(int(ctx.attr("batch_axis", 1)), x.ndim, ctx)
    time_axis = normalize_axis(int(ctx.attr("time_axis", 0)), x.ndim, ctx)
    steps = x.shape[time_axis]

    def element(*i: PrimExpr) -> PrimExpr:
        n = cast(lengths[(i[batch_axis],)], "int32")
        t = i[time_axis]
        source = clamp(select(t < n, n - 1 - t, t), steps)
        return x[tuple(source if d == time_axis else v for d, v in enumerate(i))]

    return [lazy(x.shape, x.dtype, element)]
