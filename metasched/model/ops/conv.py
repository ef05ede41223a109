"""Convolutions: Conv (groups, depthwise, strides, dilations, pads, auto_pad; 1-D to 3-D) and
ConvTranspose. Layout NCHW (N, C, spatial...), weights (M, C / group, kernel...); a Conv whose
attribute ``LAYOUT_ATTR`` is ``"NHWC"`` (set by ``metasched.model.layout``, never by ONNX) is
channels-last: data (N, spatial..., C), weights (kernel..., C / group, M), output (N, spatial..., M).
A channels-last 1-D convolution with an awkward frame count computes a few frames more
(``padded_frames``) and keeps the ones asked for in its epilogue."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from metasched.model.ops import OpContext, cast, clamp, mul, register, select
from metasched.model.symbolic import Dim, is_symbolic
from metasched.model.te import Tensor, lazy
from tir.ir import PrimExpr, const
from tir.ir.expr import And, conjunction

#: The internal node attribute that marks an operator as channels-last ("NHWC").
LAYOUT_ATTR = "metasched.layout"
#: Channels-last 1-D convolutions of this many output frames or more may compute a few more
#: (``padded_frames``).
PAD_FRAMES_FROM = 16


def channels_last(ctx: OpContext) -> bool:
    """Whether the node was rewritten to channels-last by the layout pass."""
    return ctx.attr(LAYOUT_ATTR) == "NHWC"


def split_channels(shape: Sequence[Any], last: bool) -> tuple[tuple[Any, Any], tuple[Any, ...]]:
    """((N, C), spatial axes) of a shape -- or of an index tuple -- in either layout."""
    if last:
        return (shape[0], shape[-1]), tuple(shape[1:-1])
    return (shape[0], shape[1]), tuple(shape[2:])


def join_channels(outer: Sequence[Any], spatial: Sequence[Any], last: bool) -> tuple[Any, ...]:
    """The inverse of ``split_channels``."""
    return (outer[0], *spatial, outer[1]) if last else (outer[0], outer[1], *spatial)


def resolve_pads(
    ctx: OpContext, spatial: Sequence[int], kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int]
) -> tuple[list[int], list[int]]:
    """Begin and end padding per spatial axis, from ``pads`` or ``auto_pad``."""
    n = len(spatial)
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    if auto_pad in ("NOTSET", "VALID"):
        pads = list(ctx.attr("pads", [0] * (2 * n))) if auto_pad == "NOTSET" else [0] * (2 * n)
        return pads[:n], pads[n:]
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        raise ctx.fail(f"auto_pad {auto_pad!r} is not supported")
    begin, end = [], []
    for size, k, s, d in zip(spatial, kernel, strides, dilations, strict=True):
        out = -(-size // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
        small = total // 2
        if auto_pad == "SAME_UPPER":
            begin.append(small)
            end.append(total - small)
        else:
            begin.append(total - small)
            end.append(small)
    return begin, end


def pad_tensor(
    ctx: OpContext,
    x: Tensor,
    begin: Sequence[Dim],
    end: Sequence[Dim],
    value: float,
    lead: int = 2,
    trail: int = 0,
) -> Tensor:
    """``x`` padded with ``value`` on its spatial axes (all but the first ``lead`` and the last
    ``trail``), materialized as its own stage (the reductions then read a plain buffer)."""
    if not any(_nonzero(b) for b in begin) and not any(_nonzero(e) for e in end):
        return x
    stop = x.ndim - trail
    spatial = x.shape[lead:stop]
    shape = (
        tuple(x.shape[:lead])
        + tuple(e + b + a for e, b, a in zip(spatial, begin, end, strict=True))
        + tuple(x.shape[stop:])
    )

    def element(*i: PrimExpr) -> PrimExpr:
        conds = []
        src = list(i[:lead])
        for d, (b, extent) in enumerate(zip(begin, spatial, strict=True)):
            j = i[lead + d] - b
            if _nonzero(b) or _nonzero(end[d]):
                conds.append(And(j >= 0, j < extent))
                j = clamp(j, extent)
            src.append(j)
        src.extend(i[stop:])
        loaded = x[tuple(src)]
        if not conds:
            return loaded
        return select(conjunction(conds), loaded, const(value, x.dtype))

    return ctx.builder.compute(ctx.stage + "_pad", shape, element, x.dtype)


def _nonzero(extent: Dim) -> bool:
    """Whether a padding may be nonzero (a symbolic one may)."""
    return is_symbolic(extent) or extent != 0


def conv_output_size(size: Dim, k: int, s: int, d: int, pb: Dim, pe: Dim) -> Dim:
    return (size + pb + pe - ((k - 1) * d + 1)) // s + 1


def lower_conv(
    ctx: OpContext,
    x: Tensor,
    w: Tensor,
    acc_dtype: str = "float32",
    x_zero: PrimExpr | None = None,
    w_zero: PrimExpr | None = None,
    last: bool = False,
) -> Tensor:
    """The convolution of ``x`` by ``w`` (channels-last operands when ``last``), summed in
    ``acc_dtype``; ``x_zero`` / ``w_zero`` are ConvInteger's zero points."""
    n_sp = x.ndim - 2
    (_, channels), x_sp = split_channels(x.shape, last)
    m, cpg = (w.shape[-1], w.shape[-2]) if last else (w.shape[0], w.shape[1])
    kernel = list(ctx.attr("kernel_shape", w.shape[:-2] if last else w.shape[2:]))
    strides = list(ctx.attr("strides", [1] * n_sp))
    dilations = list(ctx.attr("dilations", [1] * n_sp))
    group = int(ctx.attr("group", 1))
    begin, end = resolve_pads(ctx, x_sp, kernel, strides, dilations)
    if channels % group or m % group or cpg * group != channels:
        raise ctx.fail(f"input channels {channels}, weight {w.shape} and group {group} do not agree")
    pad_value = 0.0 if x_zero is None else x_zero
    if x_zero is not None and hasattr(x_zero, "value"):
        pad_value = x_zero.value  # type: ignore[attr-defined]
    out_sp = [conv_output_size(x_sp[d], kernel[d], strides[d], dilations[d], begin[d], end[d]) for d in range(n_sp)]
    true_shape = join_channels((x.shape[0], m), out_sp, last)
    frames = out_sp[0] if last and n_sp == 1 and isinstance(out_sp[0], int) else None
    extra = 0 if frames is None else padded_frames(frames) - frames
    if extra:
        # the extra frames read past the input's end: padded further (with the padding value)
        reach = (frames + extra - 1) * strides[0] + (kernel[0] - 1) * dilations[0] + 1  # type: ignore[operator]
        end = [end[0] + max(0, reach - (x_sp[0] + begin[0] + end[0]))]
        out_sp = [frames + extra]  # type: ignore[operator]
    padded = pad_tensor(ctx, x, begin, end, pad_value, lead=1 if last else 2, trail=1 if last else 0)  # type: ignore[arg-type]
    mpg = m // group
    shape = join_channels((x.shape[0], m), out_sp, last)

    def element(s: tuple[PrimExpr, ...], r: tuple[PrimExpr, ...]) -> PrimExpr:
        # channels-last reduces (kernel..., ic): the input channel innermost, contiguous in
        # the data and the weights; NCHW reduces (ic, kernel...)
        (nn, oc), out_pos = split_channels(s, last)
        ic, window = (r[-1], r[:-1]) if last else (r[0], r[1:])
        in_c = ic if group == 1 else (oc // mpg) * cpg + ic
        pos = [mul(out_pos[d], strides[d]) + mul(window[d], dilations[d]) for d in range(n_sp)]
        a = padded[join_channels((nn, in_c), pos, last)]
        b = w[(*window, ic, oc) if last else (oc, ic, *window)]
        if acc_dtype != x.dtype:
            a = cast(a, acc_dtype)
            b = cast(b, acc_dtype)
            if x_zero is not None:
                a = a - cast(x_zero, acc_dtype)
            if w_zero is not None:
                b = b - cast(w_zero, acc_dtype)
        return a * b

    axes = (*kernel, cpg) if last else (cpg, *kernel)
    y = ctx.builder.reduce(ctx.stage, shape, axes, element, "sum", dtype=acc_dtype)
    if not extra:
        return y
    return lazy(true_shape, y.dtype, lambda *i: y[i])  # the frames asked for: an epilogue


def padded_frames(frames: int) -> int:
    """The output frames a channels-last 1-D convolution computes for ``frames``: a multiple of
    8 when ``frames`` has no register-tile divisor from 3 to 8 (``PAD_FRAMES_FROM`` or more),
    else ``frames``. A CPU tile holds up to 8 frames of a few vectors of output channels, and
    multi-level tiling's own padding (``pad_einsum``) takes no strided index; a wav2vec2
    feature extractor's 199 and 799 frames (prime, 17 x 47) ran in tiles of one frame or of 17
    frames and one vector. Measured at 512 -> 512 channels, kernel 3, stride 2, one thread of
    an AVX-512 Xeon (default schedules): 199 frames 9.7 -> 2.8 ms, 799 frames 22.5 -> 14.6 ms,
    194 frames 3.2 -> 2.4 ms; 99 frames (tiles of 3) lost 15 % padded to 104, so it is not."""
    if frames < PAD_FRAMES_FROM or any(frames % d == 0 for d in range(3, 9)):
        return frames
    return -(-frames // 8) * 8


def _add_bias(y: Tensor, bias: Tensor, channel: int) -> Tensor:
    """``y`` plus the per-channel ``bias`` along axis ``channel`` (an epilogue: fused, not stored)."""
    return lazy(y.shape, y.dtype, lambda *i: y[i] + bias[(i[channel],)])


@register("Conv", kind="complex")
def _conv(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    x, w = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    last = channels_last(ctx)
    y = lower_conv(ctx, x, w, x.dtype, last=last)
    if bias is None:
        return [y]
    return [_add_bias(y, bias, -1 if last else 1)]


@register("WinogradConv", kind="complex")
def _winograd_conv(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    """A 3x3, stride 1, padding 1 channels-last convolution as Winograd F(2x2, 3x3) (made by
    ``metasched.model.layout`` from a ``Conv``; inputs: data (N, H, W, C), transformed weights
    U (4, 4, C, M), the transforms Bt (4, 4) and At (2, 4), optional bias (M,)). Three stages:
    each 4x4 input tile transformed, V = Bt d Bt^T (the padding read as zeros); sixteen
    matrix products M[e, n] = V[e, n] @ U[e, n] over the channels; each 2x2 output tile
    At M At^T. 2.25 times fewer multiplications than the direct convolution in the products."""
    x, u, bt, at = inputs[:4]
    bias = inputs[4] if len(inputs) > 4 else None
    batch, height, width, channels = x.shape
    outputs = u.shape[3]
    rows, cols = height // 2, width // 2
    tiles = batch * rows * cols

    def tile_origin(p: PrimExpr) -> tuple[PrimExpr, PrimExpr, PrimExpr]:
        n = p // (rows * cols)
        rest = p % (rows * cols)
        return n, (rest // cols) * 2, (rest % cols) * 2

    def transformed_input(s: tuple[PrimExpr, ...], r: tuple[PrimExpr, ...]) -> PrimExpr:
        e, nu, p, c = s
        a, b = r
        n, top, left = tile_origin(p)
        h, w = top + a - 1, left + b - 1
        inside = And(And(h >= 0, h < height), And(w >= 0, w < width))
        value = select(inside, x[n, clamp(h, height), clamp(w, width), c], const(0.0, x.dtype))
        return bt[e, a] * bt[nu, b] * value

    v = ctx.builder.reduce(
        ctx.stage + "_input", (4, 4, tiles, channels), (4, 4), transformed_input, "sum", dtype=x.dtype
    )
    products = ctx.builder.reduce(
        ctx.stage + "_products",
        (4, 4, tiles, outputs),
        (channels,),
        lambda s, r: v[s[0], s[1], s[2], r[0]] * u[s[0], s[1], r[0], s[3]],
        "sum",
        dtype=x.dtype,
    )

    def output_tile(s: tuple[PrimExpr, ...], r: tuple[PrimExpr, ...]) -> PrimExpr:
        n, h, w, m = s
        e, nu = r
        p = (n * rows + h // 2) * cols + w // 2
        return at[h % 2, e] * at[w % 2, nu] * products[e, nu, p, m]

    y = ctx.builder.reduce(ctx.stage, (batch, height, width, outputs), (4, 4), output_tile, "sum", dtype=x.dtype)
    return [y if bias is None else _add_bias(y, bias, -1)]


@register("ConvTranspose", kind="complex")
def _conv_transpose(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    x, w = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    n_sp = x.ndim - 2
    kernel = list(ctx.attr("kernel_shape", w.shape[2:]))
    strides = list(ctx.attr("strides", [1] * n_sp))
    dilations = list(ctx.attr("dilations", [1] * n_sp))
    group = int(ctx.attr("group", 1))
    out_pad = list(ctx.attr("output_padding", [0] * n_sp))
    in_sp = x.shape[2:]
    cpg, mpg = x.shape[1] // group, w.shape[1]
    pads = list(ctx.attr("pads", [0] * (2 * n_sp)))
    out_shape_attr = ctx.attr("output_shape")
    auto_pad = ctx.attr("auto_pad", "NOTSET")
    full = [strides[d] * (in_sp[d] - 1) + out_pad[d] + (kernel[d] - 1) * dilations[d] + 1 for d in range(n_sp)]
    if out_shape_attr is not None or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        target = (
            list(out_shape_attr)[-n_sp:] if out_shape_attr is not None else [in_sp[d] * strides[d] for d in range(n_sp)]
        )
        pads = [0] * (2 * n_sp)
        for d in range(n_sp):
            total = full[d] - target[d]
            if auto_pad == "SAME_UPPER":
                pads[d], pads[n_sp + d] = total // 2, total - total // 2
            else:
                pads[d], pads[n_sp + d] = total - total // 2, total // 2
    out_sp = [full[d] - pads[d] - pads[n_sp + d] for d in range(n_sp)]
    shape = (x.shape[0], mpg * group, *out_sp)

    def element(s: tuple[PrimExpr, ...], r: tuple[PrimExpr, ...]) -> PrimExpr:
        nn, oc = s[0], s[1]
        g = oc // mpg if group > 1 else const(0)
        ic = g * cpg + r[0] if group > 1 else r[0]
        conds = []
        idx: list[PrimExpr] = [nn, ic]
        for d in range(n_sp):
            t = s[2 + d] + pads[d] - r[1 + d] * dilations[d]
            q = t // strides[d]
            cond = And(t >= 0, q < in_sp[d])
            if strides[d] > 1:
                cond = And(cond, (t % strides[d]).equal(0))
            conds.append(cond)
            idx.append(clamp(q, in_sp[d]))
        oc_in = oc % mpg if group > 1 else oc
        value = x[tuple(idx)] * w[(ic, oc_in, *r[1:])]
        return select(conjunction(conds), value, const(0.0, x.dtype))

    y = ctx.builder.reduce(ctx.stage, shape, (cpg, *kernel), element, "sum", dtype=x.dtype)
    return [y if bias is None else _add_bias(y, bias, 1)]
