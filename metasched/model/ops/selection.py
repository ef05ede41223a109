"""Selection along an axis: ArgMax / ArgMin (keepdims, select_last_index), Hardmax and TopK
(constant K; largest / smallest; int64 indices).

Each is built from ordinary reductions: the extreme value first, then the first (or last)
index holding it. Ties resolve as onnxruntime's do: the lower index first.

TopK ranks every element (how many elements come before it: better, or equal at a lower
index) in one reduction and picks the element of each rank < K in another: O(n^2) work along
the axis (a top-50 of 50257 logits: about 0.9 s a row on one core), but two stages however
large K. For K = 1 or 2, and a small K on a long axis, it takes K passes instead, each two
reductions (the next value in the order, then the lowest index holding it among the elements
after the previous pick): O(Kn) work in 2K stages (the default schedules' search grows faster
than linearly with the stages of a kernel, so the passes stay few).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from metasched.model.ops import OpContext, cast, normalize_axis, register, select
from metasched.model.ops.reduction import lower_reduce
from metasched.model.te import Tensor, lazy
from tir.ir import PrimExpr, const
from tir.ir.expr import And, Or

#: TopK takes K passes up to this K, or up to ``TOPK_LONG_AXIS_PASSES`` on an axis longer
#: than ``TOPK_LONG_AXIS``; it ranks the elements otherwise.
TOPK_PASSES_LIMIT = 2
TOPK_LONG_AXIS = 4096
TOPK_LONG_AXIS_PASSES = 8


def _with_axis(s: tuple[PrimExpr, ...], axis: int, value: PrimExpr) -> tuple[PrimExpr, ...]:
    """The full index of the element ``value`` along ``axis`` at the reduced position ``s``."""
    return (*s[:axis], value, *s[axis:])


def _worst(dtype: str, largest: bool) -> float | int:
    """A value no element beats the other way: the init of the selecting reduction."""
    if dtype.startswith("float"):
        return float("-inf") if largest else float("inf")
    info = np.iinfo(dtype)
    return int(info.min) if largest else int(info.max)


def _arg(ctx: OpContext, inputs: list[Any], largest: bool) -> list[Tensor]:
    x = inputs[0]
    axis = normalize_axis(int(ctx.attr("axis", 0)), x.ndim, ctx)
    keepdims = bool(ctx.attr("keepdims", 1))
    last = bool(ctx.attr("select_last_index", 0))
    extent = x.shape[axis]
    best = lower_reduce(ctx, x, [axis], "max" if largest else "min", False, name=ctx.stage + "_value")
    rows = tuple(e for d, e in enumerate(x.shape) if d != axis)

    def position(s: tuple[PrimExpr, ...], r: tuple[PrimExpr, ...]) -> PrimExpr:
        hit = x[_with_axis(s, axis, r[0])].equal(best[s] if s else best.load(()))
        return select(hit, r[0], const(-1 if last else extent))

    index = ctx.builder.reduce(ctx.stage, rows, (extent,), position, "max" if last else "min", dtype="int64")
    if not keepdims:
        return [index]
    shape = tuple(1 if d == axis else e for d, e in enumerate(x.shape))
    return [lazy(shape, "int64", lambda *i: index[i[:axis] + i[axis + 1 :]] if rows else index.load(()))]


@register("ArgMax", kind="complex")
def _argmax(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    return _arg(ctx, inputs, largest=True)


@register("ArgMin", kind="complex")
def _argmin(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    return _arg(ctx, inputs, largest=False)


@register("Hardmax", kind="complex")
def _hardmax(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    x = inputs[0]
    default = -1 if ctx.opset >= 13 else 1
    axis = normalize_axis(int(ctx.attr("axis", default)), x.ndim, ctx)
    # Before opset 13 the input is coerced to 2-D: the hardmax runs over the trailing axes together.
    axes = [axis] if ctx.opset >= 13 else list(range(axis, x.ndim))
    strides = [int(np.prod(x.shape[d + 1 : axes[-1] + 1], dtype=np.int64)) for d in axes]
    count = int(np.prod([x.shape[d] for d in axes], dtype=np.int64))
    best = lower_reduce(ctx, x, axes, "max", True, name=ctx.stage + "_value")

    def linear(idx: tuple[PrimExpr, ...]) -> PrimExpr:
        total: PrimExpr = const(0)
        for d, stride in zip(axes, strides, strict=True):
            total = total + idx[d] * stride
        return total

    def position(s: tuple[PrimExpr, ...], r: tuple[PrimExpr, ...]) -> PrimExpr:
        idx = list(s)
        for k, d in enumerate(axes):
            idx[d] = r[k]
        return select(x[tuple(idx)].equal(best[s]), linear(tuple(idx)), const(count))

    reduced = tuple(1 if d in axes else e for d, e in enumerate(x.shape))
    first = ctx.builder.reduce(ctx.stage, reduced, [x.shape[d] for d in axes], position, "min", dtype="int32")

    def element(*i: PrimExpr) -> PrimExpr:
        at = first[tuple(const(0) if d in axes else v for d, v in enumerate(i))]
        return select(linear(i).equal(at), const(1, x.dtype), const(0, x.dtype))

    return [lazy(x.shape, x.dtype, element)]


@register("TopK", kind="complex", value_inputs=(1,))
def _topk(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    x = inputs[0]
    if ctx.opset < 10:
        k = int(ctx.attr("k"))
    else:
        k = int(ctx.constant_input(1, "K").reshape(-1)[0])
    axis = normalize_axis(int(ctx.attr("axis", -1)), x.ndim, ctx)
    largest = bool(ctx.attr("largest", 1))
    extent = x.shape[axis]
    if not isinstance(extent, int) or not 0 <= k <= extent:
        raise ctx.fail(f"K={k} for an axis of extent {extent}")
    out_shape = tuple(k if d == axis else e for d, e in enumerate(x.shape))

    def beats(a: PrimExpr, b: PrimExpr) -> PrimExpr:
        return a > b if largest else a < b

    if k == 0:
        empty: list[Tensor] = [
            lazy(out_shape, x.dtype, lambda *i: const(0, x.dtype)),
            lazy(out_shape, "int64", lambda *i: const(0, "int64")),
        ]
        return empty
    if k <= TOPK_PASSES_LIMIT or (k <= TOPK_LONG_AXIS_PASSES and extent > TOPK_LONG_AXIS):
        values, indices = _topk_passes(ctx, x, axis, k, largest, beats)

        def pick(tensors: list[Tensor], i: tuple[PrimExpr, ...]) -> PrimExpr:
            rest = i[:axis] + i[axis + 1 :]
            value = tensors[-1][rest] if rest else tensors[-1].load(())
            for t in range(len(tensors) - 2, -1, -1):
                value = select(i[axis].equal(t), tensors[t][rest] if rest else tensors[t].load(()), value)
            return value

        return [
            lazy(out_shape, x.dtype, lambda *i: pick(values, i)),
            lazy(out_shape, "int64", lambda *i: cast(pick(indices, i), "int64")),
        ]
    index = _topk_ranked(ctx, x, axis, k, beats, out_shape)
    return [
        lazy(out_shape, x.dtype, lambda *i: x[tuple(index[i] if d == axis else v for d, v in enumerate(i))]),
        lazy(out_shape, "int64", lambda *i: cast(index[i], "int64")),
    ]


def _topk_passes(ctx: OpContext, x: Tensor, axis: int, k: int, largest: bool, beats: Any) -> tuple[list, list]:
    """K passes: pass t picks the best element after the one pass t - 1 picked (in the order
    value first, then index)."""
    rows = tuple(e for d, e in enumerate(x.shape) if d != axis)
    extent = x.shape[axis]
    assert isinstance(extent, int)  # _topk refuses a symbolic extent
    worst = _worst(x.dtype, largest)
    values: list[Tensor] = []
    indices: list[Tensor] = []
    for t in range(k):
        previous = (values[-1], indices[-1]) if t else None

        def after(s: tuple[PrimExpr, ...], j: PrimExpr, v: PrimExpr, previous: Any = previous) -> PrimExpr | None:
            if previous is None:
                return None
            pv, pi = (p[s] if s else p.load(()) for p in previous)
            return Or(beats(pv, v), And(v.equal(pv), j > pi))

        def candidate(s: tuple[PrimExpr, ...], r: tuple[PrimExpr, ...], after: Any = after) -> PrimExpr:
            v = x[_with_axis(s, axis, r[0])]
            ok = after(s, r[0], v)
            return v if ok is None else select(ok, v, const(worst, x.dtype))

        value = ctx.builder.reduce(
            f"{ctx.stage}_value{t}", rows, (extent,), candidate, "max" if largest else "min", init=worst, dtype=x.dtype
        )

        def position(
            s: tuple[PrimExpr, ...], r: tuple[PrimExpr, ...], after: Any = after, value: Tensor = value
        ) -> PrimExpr:
            v = x[_with_axis(s, axis, r[0])]
            hit = v.equal(value[s] if s else value.load(()))
            ok = after(s, r[0], v)
            return select(hit if ok is None else And(hit, ok), r[0], const(extent))

        index = ctx.builder.reduce(f"{ctx.stage}_index{t}", rows, (extent,), position, "min", dtype="int32")
        values.append(value)
        indices.append(index)
    return values, indices


def _topk_ranked(ctx: OpContext, x: Tensor, axis: int, k: int, beats: Any, out_shape: tuple) -> Tensor:
    """The index of the element of each rank < K, from every element's rank (how many elements
    come before it: better, or equal at a lower index)."""
    extent = x.shape[axis]
    assert isinstance(extent, int)  # _topk refuses a symbolic extent

    def before(s: tuple[PrimExpr, ...], r: tuple[PrimExpr, ...]) -> PrimExpr:
        other = x[tuple(r[0] if d == axis else v for d, v in enumerate(s))]
        mine = x[s]
        first = Or(beats(other, mine), And(other.equal(mine), r[0] < s[axis]))
        return select(first, const(1), const(0))

    rank = ctx.builder.reduce(f"{ctx.stage}_rank", x.shape, (extent,), before, "sum", dtype="int32")

    def position(s: tuple[PrimExpr, ...], r: tuple[PrimExpr, ...]) -> PrimExpr:
        at = tuple(r[0] if d == axis else v for d, v in enumerate(s))
        return select(rank[at].equal(s[axis]), r[0], const(extent))

    return ctx.builder.reduce(ctx.stage, out_shape, (extent,), position, "min", dtype="int32")
