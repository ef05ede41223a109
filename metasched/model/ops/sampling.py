"""Sampling at computed coordinates: GridSample (2-D: nearest / bilinear / bicubic, padding
zeros / border / reflection, align_corners; opset 16's and 20's mode names) and AffineGrid
(2-D; constant size). Both are injective: each output element reads the input elements its
grid position names, so a GridSample fuses into whatever produced its input.

The arithmetic follows onnxruntime's kernel (itself torch's ``grid_sample``): grid values in
[-1, 1] are scaled to pixel coordinates, a coordinate outside the image is clipped (border) or
reflected (reflection) before the taps are taken, and each tap outside the image reads 0
(zeros), the nearest edge (border) or its reflection (reflection).
"""

from __future__ import annotations

from typing import Any

from metasched.model.ops import OpContext, cast, clamp, register, select
from metasched.model.ops.elementwise import _round_half_even, call
from metasched.model.ops.shape import _cubic_weights
from metasched.model.te import Tensor, lazy
from tir.ir import Cast, Let, PrimExpr, Var, as_dtype, const
from tir.ir.expr import And, max_expr, min_expr

_MODES = {"bilinear": "linear", "linear": "linear", "nearest": "nearest", "bicubic": "cubic", "cubic": "cubic"}


def _reflect(v: PrimExpr, low: float, high: float) -> PrimExpr:
    """``v`` folded back into [low, high] by reflections at its ends (onnxruntime's GsReflect)."""
    dtype = str(v.dtype)
    span = const(high - low, dtype)
    lo, hi = const(low, dtype), const(high, dtype)

    def fold(distance: PrimExpr, near: PrimExpr, far: PrimExpr, inward: float) -> PrimExpr:
        count = call("floor", distance / span)
        rest = (distance - count * span) * const(inward, dtype)
        even = (count - const(2.0, dtype) * call("floor", count * const(0.5, dtype))).equal(const(0.0, dtype))
        # an even number of whole spans lands measured from the near end, an odd one from the far end
        return select(even, near + rest, far - rest)

    below = fold(lo - v, lo, hi, 1.0)
    above = fold(v - hi, hi, lo, -1.0)
    return select(v < lo, below, select(v > hi, above, v))


@register("GridSample", kind="injective")
def _grid_sample(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    x, grid = inputs[0], inputs[1]
    if x.ndim != 4 or grid.ndim != 4 or grid.shape[-1] != 2:
        raise ctx.fail(f"only 2-D sampling is supported: input {x.shape}, grid {grid.shape}")
    mode = _MODES.get(ctx.attr("mode", "bilinear" if ctx.opset < 20 else "linear"))
    padding = ctx.attr("padding_mode", "zeros")
    if mode is None or padding not in ("zeros", "border", "reflection"):
        raise ctx.fail(f"mode {ctx.attr('mode')!r} / padding_mode {padding!r} is not supported")
    align = bool(ctx.attr("align_corners", 0))
    n, c, height, width = x.shape
    shape = (n, c, grid.shape[1], grid.shape[2])
    f = "float32" if grid.dtype != "float64" else "float64"
    extents = {0: width, 1: height}  # grid component 0 is x (width), 1 is y (height)
    bounds = {k: (0.0, e - 1.0) if align else (-0.5, e - 0.5) for k, e in extents.items()}

    def pixel(component: int, normalized: PrimExpr) -> PrimExpr:
        size = extents[component]
        v = cast(normalized, f)
        if align:
            return (v + const(1.0, f)) * const((size - 1) / 2.0, f)
        return ((v + const(1.0, f)) * const(float(size), f) - const(1.0, f)) * const(0.5, f)

    def adjust(component: int, v: PrimExpr) -> PrimExpr:
        """A coordinate outside the image, clipped or reflected (zeros: left for the taps)."""
        low, high = bounds[component]
        if padding == "border":
            return max_expr(min_expr(v, const(extents[component] - 1.0, f)), const(0.0, f))
        if padding == "reflection":
            return _reflect(v, low, high)
        return v

    def tap(b: PrimExpr, ch: PrimExpr, ix: PrimExpr, iy: PrimExpr) -> PrimExpr:
        """The input at integer tap (ix, iy), padded."""
        if padding == "reflection":
            ix = Cast(as_dtype("int32"), _reflect(Cast(as_dtype(f), ix), *bounds[0]))
            iy = Cast(as_dtype("int32"), _reflect(Cast(as_dtype(f), iy), *bounds[1]))
        value = x[(b, ch, clamp(iy, height), clamp(ix, width))]
        if padding != "zeros":
            return value
        inside = And(And(ix >= 0, ix < width), And(iy >= 0, iy < height))
        return select(inside, value, const(0, x.dtype))

    def element(b: PrimExpr, ch: PrimExpr, h: PrimExpr, w: PrimExpr) -> PrimExpr:
        px = pixel(0, grid[(b, h, w, const(0))])
        py = pixel(1, grid[(b, h, w, const(1))])
        if mode == "cubic":
            # torch's bicubic pads each tap, never the coordinate
            x0, y0 = call("floor", px), call("floor", py)
            wx, wy = _cubic_weights(px - x0, -0.75), _cubic_weights(py - y0, -0.75)
            ix0, iy0 = Cast(as_dtype("int32"), x0) - 1, Cast(as_dtype("int32"), y0) - 1
            total: PrimExpr | None = None
            for j in range(4):
                row: PrimExpr | None = None
                for i in range(4):
                    term = tap(b, ch, ix0 + i, iy0 + j) * cast(wx[i], x.dtype)
                    row = term if row is None else row + term
                assert row is not None
                term = row * cast(wy[j], x.dtype)
                total = term if total is None else total + term
            assert total is not None
            return total
        # Bound once: every tap reads them (the reflection of a coordinate is a long expression).
        vx, vy = Var("gx", as_dtype(f)), Var("gy", as_dtype(f))
        return Let(vx, adjust(0, px), Let(vy, adjust(1, py), interpolate(b, ch, vx, vy)))

    def interpolate(b: PrimExpr, ch: PrimExpr, px: PrimExpr, py: PrimExpr) -> PrimExpr:
        if mode == "nearest":
            return tap(
                b, ch, Cast(as_dtype("int32"), _round_half_even(px)), Cast(as_dtype("int32"), _round_half_even(py))
            )
        x1, y1 = call("floor", px), call("floor", py)
        ix, iy = Cast(as_dtype("int32"), x1), Cast(as_dtype("int32"), y1)
        dx, dy = px - x1, py - y1
        one = const(1.0, f)
        top = tap(b, ch, ix, iy) * cast(one - dx, x.dtype) + tap(b, ch, ix + 1, iy) * cast(dx, x.dtype)
        bottom = tap(b, ch, ix, iy + 1) * cast(one - dx, x.dtype) + tap(b, ch, ix + 1, iy + 1) * cast(dx, x.dtype)
        return top * cast(one - dy, x.dtype) + bottom * cast(dy, x.dtype)

    return [lazy(shape, x.dtype, element)]


@register("AffineGrid", kind="injective", value_inputs=(1,))
def _affine_grid(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    theta = inputs[0]
    size = [int(v) for v in ctx.constant_input(1, "size").reshape(-1)]
    if len(size) != 4 or theta.ndim != 3 or tuple(theta.shape[1:]) != (2, 3):
        raise ctx.fail(f"only 2-D grids are supported: size {size}, theta {theta.shape}")
    align = bool(ctx.attr("align_corners", 0))
    n, _, height, width = size
    dtype = theta.dtype

    def base(index: PrimExpr, extent: int) -> PrimExpr:
        """The normalized coordinate of pixel ``index`` along an axis of ``extent`` pixels."""
        v = Cast(dtype, index)
        if extent == 1:
            return const(0.0, dtype)
        if align:
            return v * const(2.0 / (extent - 1), dtype) - const(1.0, dtype)
        return (v * const(2.0, dtype) + const(1.0, dtype)) * const(1.0 / extent, dtype) - const(1.0, dtype)

    def element(b: PrimExpr, h: PrimExpr, w: PrimExpr, k: PrimExpr) -> PrimExpr:
        xs, ys = base(w, width), base(h, height)
        row = [theta[(b, k, const(j))] for j in range(3)]
        return row[0] * xs + row[1] * ys + row[2]

    return [lazy((n, height, width, 2), dtype, element)]
