"""Softmax / LogSoftmax (opset < 13: the flattened trailing axes; from 13: one axis),
LayerNormalization, RMSNormalization, InstanceNormalization, GroupNormalization,
MeanVarianceNormalization, LpNormalization and LRN."""

from __future__ import annotations

from typing import Any

from metasched.model.ops import OpContext, normalize_axis, register, select
from metasched.model.ops.conv import channels_last
from metasched.model.ops.elementwise import call
from metasched.model.ops.reduction import lower_reduce
from metasched.model.te import Tensor, lazy
from tir.ir import PrimExpr, const
from tir.ir.expr import And


def _gather_reduced(y: Tensor, axes: list[int], i: tuple[PrimExpr, ...]) -> PrimExpr:
    return y[tuple(const(0) if d in axes else v for d, v in enumerate(i))]


def _softmax(ctx: OpContext, inputs: list[Any], log: bool) -> list[Tensor]:
    x = inputs[0]
    default = -1 if ctx.opset >= 13 else 1
    axis = normalize_axis(int(ctx.attr("axis", default)), x.ndim, ctx)
    axes = [axis] if ctx.opset >= 13 else list(range(axis, x.ndim))
    m = lower_reduce(ctx, x, axes, "max", True, name=ctx.stage + "_max")
    if not log:
        # The exponentials once, as a stage of their own (elementwise: vectorized), read by the
        # sum and by the quotient; inlined, each element's exp ran twice, in scalar code inside
        # the row reduction (Whisper's 4 x 750 x 750 attention softmax: 30 ms a call at 1 thread).
        e = ctx.builder.compute(
            ctx.stage + "_exp", x.shape, lambda *i: call("exp", x[i] - _gather_reduced(m, axes, i)), x.dtype
        )
        s = lower_reduce(ctx, e, axes, "sum", True, name=ctx.stage + "_sum")
        # Times the reciprocal of the row's sum, which LLVM hoists out of the row's loop: a
        # vector division costs a multiply's time 16 to 30 times over (Whisper's 2.25 M
        # quotients). It rounds twice: within 1 ulp of the quotient's 0.5.
        return [lazy(x.shape, x.dtype, lambda *i: e[i] * (const(1.0, x.dtype) / _gather_reduced(s, axes, i)))]
    s = lower_reduce(
        ctx,
        lazy(x.shape, x.dtype, lambda *i: call("exp", x[i] - _gather_reduced(m, axes, i))),
        axes,
        "sum",
        True,
        name=ctx.stage + "_sum",
    )
    if log:
        return [
            lazy(
                x.shape,
                x.dtype,
                lambda *i: x[i] - _gather_reduced(m, axes, i) - call("log", _gather_reduced(s, axes, i)),
            )
        ]
    return [
        lazy(x.shape, x.dtype, lambda *i: call("exp", x[i] - _gather_reduced(m, axes, i)) / _gather_reduced(s, axes, i))
    ]


@register("Softmax", kind="complex")
def _softmax_op(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    return _softmax(ctx, inputs, log=False)


@register("LogSoftmax", kind="complex")
def _log_softmax_op(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    return _softmax(ctx, inputs, log=True)


def _moments(ctx: OpContext, x: Tensor, axes: list[int]) -> tuple[Tensor, Tensor, PrimExpr]:
    """The sums over ``axes`` of ``x`` and of its squared deviations (two reduction stages),
    and 1 / their element count: mean = sum * inv, variance = squares * inv."""
    count = 1
    for d in axes:
        count *= x.shape[d]  # type: ignore[assignment]  # static extents only: const() below refuses a symbolic count
    inv = const(1.0 / count, x.dtype)
    mean = lower_reduce(ctx, x, axes, "sum", True, name=ctx.stage + "_mean")
    var = lower_reduce(
        ctx,
        lazy(x.shape, x.dtype, lambda *i: _sq(x[i] - _gather_reduced(mean, axes, i) * inv)),
        axes,
        "sum",
        True,
        name=ctx.stage + "_var",
    )
    return mean, var, inv


def _normalize(
    ctx: OpContext, x: Tensor, axes: list[int], eps: float, scale: Any, bias: Any, param_index: Any
) -> Tensor:
    mean, var, inv = _moments(ctx, x, axes)

    def element(*i: PrimExpr) -> PrimExpr:
        mu = _gather_reduced(mean, axes, i) * inv
        v = (x[i] - mu) / call("sqrt", _gather_reduced(var, axes, i) * inv + const(eps, x.dtype))
        if scale is not None:
            v = v * scale[param_index(i)]
        if bias is not None:
            v = v + bias[param_index(i)]
        return v

    return lazy(x.shape, x.dtype, element)


def _sq(v: PrimExpr) -> PrimExpr:
    return v * v


@register("LayerNormalization", kind="complex")
def _layer_norm(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    if ctx.num_outputs > 1:
        raise ctx.fail("the Mean and InvStdDev outputs are not supported")
    x = inputs[0]
    scale = inputs[1] if len(inputs) > 1 else None
    bias = inputs[2] if len(inputs) > 2 else None
    axis = normalize_axis(int(ctx.attr("axis", -1)), x.ndim, ctx)
    axes = list(range(axis, x.ndim))

    def param_index(i: tuple[PrimExpr, ...], t: Tensor) -> tuple[PrimExpr, ...]:
        # scale and bias broadcast against the normalized axes
        tail = i[len(i) - t.ndim :]
        return tuple(const(0) if e == 1 else v for e, v in zip(t.shape, tail, strict=True))

    scale_t = scale
    bias_t = bias

    class _Bound:
        def __init__(self, t: Tensor) -> None:
            self.t = t

        def __getitem__(self, i: tuple[PrimExpr, ...]) -> PrimExpr:
            return self.t[param_index(i, self.t)]

    return [
        _normalize(
            ctx,
            x,
            axes,
            float(ctx.attr("epsilon", 1e-5)),
            None if scale_t is None else _Bound(scale_t),
            None if bias_t is None else _Bound(bias_t),
            lambda i: i,
        )
    ]


@register("InstanceNormalization", kind="complex")
def _instance_norm(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    """Normalized over the spatial axes, per sample and channel; channels-last (N, spatial...,
    C) when the layout pass marked the node (``metasched.model.ops.conv.LAYOUT_ATTR``)."""
    x, scale, bias = inputs[:3]
    channel = x.ndim - 1 if channels_last(ctx) else 1
    axes = [d for d in range(1, x.ndim) if d != channel]
    return [_normalize(ctx, x, axes, float(ctx.attr("epsilon", 1e-5)), scale, bias, lambda i: (i[channel],))]


@register("LRN", kind="complex")
def _lrn(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    x = inputs[0]
    size = int(ctx.attr("size"))
    alpha, beta, bias = float(ctx.attr("alpha", 1e-4)), float(ctx.attr("beta", 0.75)), float(ctx.attr("bias", 1.0))
    channels = x.shape[1]
    lo = (size - 1) // 2

    def element(s: tuple[PrimExpr, ...], r: tuple[PrimExpr, ...]) -> PrimExpr:
        c = s[1] - lo + r[0]
        inside = And(c >= 0, c < channels)
        from metasched.model.ops import clamp

        v = x[(s[0], clamp(c, channels), *s[2:])]
        return select(inside, v * v, const(0.0, x.dtype))

    sq = ctx.builder.reduce(ctx.stage + "_sq", x.shape, (size,), element, "sum", dtype=x.dtype)

    def out(*i: PrimExpr) -> PrimExpr:
        base = const(bias, x.dtype) + const(alpha / size, x.dtype) * sq[i]
        return x[i] / call("pow", base, const(beta, x.dtype))

    return [lazy(x.shape, x.dtype, out)]


def _trailing_param(t: Tensor, i: tuple[PrimExpr, ...]) -> PrimExpr:
    """``t`` (a scale or bias) read at the output index ``i``, broadcast from the right."""
    tail = i[len(i) - t.ndim :]
    return t[tuple(const(0) if e == 1 else v for e, v in zip(t.shape, tail, strict=True))] if t.ndim else t.load(())


@register("RMSNormalization", kind="complex")
def _rms_norm(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    x, scale = inputs[0], inputs[1]
    axis = normalize_axis(int(ctx.attr("axis", -1)), x.ndim, ctx)
    eps = float(ctx.attr("epsilon", 1e-5))
    axes = list(range(axis, x.ndim))
    count = 1
    for d in axes:
        count *= x.shape[d]
    squares = lower_reduce(ctx, lazy(x.shape, x.dtype, lambda *i: _sq(x[i])), axes, "sum", True)

    def element(*i: PrimExpr) -> PrimExpr:
        mean = _gather_reduced(squares, axes, i) * const(1.0 / count, x.dtype)
        return x[i] / call("sqrt", mean + const(eps, x.dtype)) * _trailing_param(scale, i)

    return [lazy(x.shape, x.dtype, element)]


@register("GroupNormalization", kind="complex")
def _group_norm(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    x, scale, bias = inputs[:3]
    groups = int(ctx.attr("num_groups"))
    eps = float(ctx.attr("epsilon", 1e-5))
    channels = x.shape[1]
    if channels % groups:
        raise ctx.fail(f"{channels} channels do not split into num_groups={groups}")
    per_group = channels // groups
    spatial = list(x.shape[2:])
    count = per_group
    for e in spatial:
        count *= e
    inv = const(1.0 / count, x.dtype)
    # Before opset 21 scale and bias hold one value per group, from 21 one per channel.
    per_channel = scale.shape[0] == channels and (ctx.opset >= 21 or groups == channels)

    def member(s: tuple[PrimExpr, ...], r: tuple[PrimExpr, ...]) -> tuple[PrimExpr, ...]:
        return (s[0], s[1] * per_group + r[0], *r[1:])

    rshape = [per_group, *spatial]
    b = ctx.builder
    mean = b.reduce(ctx.stage + "_mean", (x.shape[0], groups), rshape, lambda s, r: x[member(s, r)], "sum")
    var = b.reduce(
        ctx.stage + "_var",
        (x.shape[0], groups),
        rshape,
        lambda s, r: _sq(x[member(s, r)] - mean[s] * inv),
        "sum",
    )

    def element(*i: PrimExpr) -> PrimExpr:
        g = (i[0], i[1] // per_group)
        param = (i[1],) if per_channel else (i[1] // per_group,)
        v = (x[i] - mean[g] * inv) / call("sqrt", var[g] * inv + const(eps, x.dtype))
        return v * scale[param] + bias[param]

    return [lazy(x.shape, x.dtype, element)]


@register("MeanVarianceNormalization", kind="complex")
def _mean_variance_norm(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    x = inputs[0]
    axes = sorted({normalize_axis(int(a), x.ndim, ctx) for a in ctx.attr("axes", [0, 2, 3])})
    mean, var, inv = _moments(ctx, x, axes)

    def element(*i: PrimExpr) -> PrimExpr:
        # ONNX's definition: (x - mean) / (sqrt(variance) + 1e-9)
        std = call("sqrt", _gather_reduced(var, axes, i) * inv)
        return (x[i] - _gather_reduced(mean, axes, i) * inv) / (std + const(1e-9, x.dtype))

    return [lazy(x.shape, x.dtype, element)]


@register("LpNormalization", kind="complex")
def _lp_norm(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    x = inputs[0]
    axis = normalize_axis(int(ctx.attr("axis", -1)), x.ndim, ctx)
    p = int(ctx.attr("p", 2))
    if p not in (1, 2):
        raise ctx.fail(f"p={p} (ONNX allows 1 and 2)")
    pre = (lambda v: call("abs", v)) if p == 1 else _sq
    total = lower_reduce(ctx, lazy(x.shape, x.dtype, lambda *i: pre(x[i])), [axis], "sum", True)

    def element(*i: PrimExpr) -> PrimExpr:
        norm = _gather_reduced(total, [axis], i)
        if p == 2:
            norm = call("sqrt", norm)
        # a zero vector stays zero (onnxruntime does not divide by a zero norm)
        return select(norm.equal(const(0.0, x.dtype)), const(0.0, x.dtype), x[i] / norm)

    return [lazy(x.shape, x.dtype, element)]
