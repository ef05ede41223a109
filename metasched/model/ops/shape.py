"""Shape operators: Reshape / Flatten / Squeeze / Unsqueeze (zero-copy views), Transpose, Concat,
Split, Slice, Gather, Expand, Tile, Pad (constant / reflect / edge / wrap; negative pads crop
first), Resize / Upsample (nearest / linear / cubic; axes; keep_aspect_ratio_policy),
DepthToSpace / SpaceToDepth, CenterCropPad, EyeLike; and Shape, Size, ConstantOfShape, Range,
Constant and the signal windows (Hann / Hamming / Blackman, MelWeightMatrix), which constant
folding must remove."""

from __future__ import annotations

from typing import Any

import numpy as np

from metasched.model.ops import (
    OpContext,
    broadcast_load,
    broadcast_shapes,
    cast,
    clamp,
    normalize_axis,
    register,
    select,
)
from metasched.model.ops.elementwise import _ONNX_TO_NP, call
from metasched.model.symbolic import Dim, dim, dims_equal, is_symbolic, prod, shape_text
from metasched.model.te import BufferTensor, Tensor, lazy
from tir.ir import Cast, PrimExpr, as_dtype, const
from tir.ir.expr import And, conjunction, max_expr, min_expr


def reshape_view(x: Tensor, shape: tuple[Dim, ...]) -> Tensor:
    """``x`` read through a row-major reshape."""
    if tuple(shape) == tuple(x.shape):
        return x
    in_shape = x.shape

    def element(*i: PrimExpr) -> PrimExpr:
        flat: PrimExpr = const(0)
        for v, extent in zip(i, shape, strict=True):
            flat = v if _is_zero(flat) else flat * extent + v
        idx = []
        for extent in reversed(in_shape):
            idx.append(flat % extent if extent != 1 else const(0))
            flat = flat // extent
        return x[tuple(reversed(idx))] if idx else x.load(())

    return lazy(shape, x.dtype, element)


def _reshape_shape(ctx: OpContext, x: Tensor, target: list[int]) -> tuple[Dim, ...]:
    allowzero = bool(ctx.attr("allowzero", 0))
    out: list[Dim] = []
    for d, t in enumerate(target):
        out.append(x.shape[d] if t == 0 and not allowzero else t)
    holes = [d for d, t in enumerate(out) if isinstance(t, int) and t == -1]
    if holes:
        known = prod(t for d, t in enumerate(out) if d != holes[0])
        if isinstance(known, int) and known == 0:
            known = 1
        out[holes[0]] = dim(x.size // known)
        if is_symbolic(out[holes[0]]) and not dims_equal(out[holes[0]] * known, x.size):
            raise ctx.fail(
                f"cannot reshape {shape_text(x.shape)} to {tuple(target)}: the -1 extent is not a whole "
                "number for every value of the symbolic dimensions"
            )
    if not dims_equal(prod(out), x.size):
        raise ctx.fail(f"cannot reshape {shape_text(x.shape)} to {tuple(target)}")
    return tuple(out)


def view_shape(ctx: OpContext, x: Tensor) -> tuple[Dim, ...]:
    """The output shape of a view operator."""
    op = ctx.op_type
    if op == "Reshape":
        target = ctx.value(1) if ctx.opset >= 5 else np.array(ctx.attr("shape"))
        if target is None:
            raise ctx.fail("the shape input must be a constant")
        return _reshape_shape(ctx, x, [int(t) for t in target.reshape(-1)])
    if op == "Flatten":
        axis = int(ctx.attr("axis", 1))
        axis = axis % x.ndim if axis < 0 else axis
        return (prod(x.shape[:axis]), prod(x.shape[axis:]))
    if op in ("Squeeze", "Unsqueeze"):
        axes = ctx.attr("axes")
        if axes is None:
            value = ctx.value(1)
            axes = None if value is None else [int(a) for a in value.reshape(-1)]
        if op == "Squeeze":
            if axes is None:
                return tuple(e for e in x.shape if e != 1)
            norm = {normalize_axis(a, x.ndim, ctx) for a in axes}
            for a in norm:
                if x.shape[a] != 1:
                    raise ctx.fail(f"cannot squeeze axis {a} of extent {x.shape[a]}")
            return tuple(e for d, e in enumerate(x.shape) if d not in norm)
        if axes is None:
            raise ctx.fail("Unsqueeze needs axes")
        ndim = x.ndim + len(axes)
        norm = {normalize_axis(a, ndim, ctx) for a in axes}
        rest = iter(x.shape)
        return tuple(1 if d in norm else next(rest) for d in range(ndim))
    return tuple(x.shape)  # Identity, Dropout


@register("Reshape", "Flatten", "Squeeze", "Unsqueeze", kind="view", value_inputs=(1,))
def _view(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    x = inputs[0]
    return [reshape_view(x, view_shape(ctx, x))]


@register("Transpose", kind="injective")
def _transpose(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    x = inputs[0]
    perm = [int(p) for p in ctx.attr("perm", list(range(x.ndim))[::-1])]
    shape = tuple(x.shape[p] for p in perm)

    def element(*i: PrimExpr) -> PrimExpr:
        idx: list[PrimExpr] = [const(0)] * x.ndim
        for k, p in enumerate(perm):
            idx[p] = i[k]
        return x[tuple(idx)]

    return [lazy(shape, x.dtype, element)]


@register("Concat", kind="opaque")
def _concat(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    tensors = [t for t in inputs if t is not None and not (isinstance(t.size, int) and t.size == 0)]
    if not tensors:
        tensors = [t for t in inputs if t is not None][:1]
    x0 = tensors[0]
    axis = normalize_axis(int(ctx.attr("axis")), x0.ndim, ctx)
    total = sum(t.shape[axis] for t in tensors)
    shape = tuple(total if d == axis else e for d, e in enumerate(x0.shape))
    offsets = np.cumsum([0] + [t.shape[axis] for t in tensors]).tolist()
    dtype = x0.dtype

    def element(*i: PrimExpr) -> PrimExpr:
        # A chain of selects, last input first; each load clamped into its own tensor.
        value: PrimExpr | None = None
        for k in range(len(tensors) - 1, -1, -1):
            t = tensors[k]
            local = i[axis] - offsets[k]
            if len(tensors) > 1:
                local = clamp(local, t.shape[axis])
            idx = tuple(local if d == axis else v for d, v in enumerate(i))
            loaded = t[idx]
            value = loaded if value is None else select(i[axis] < offsets[k + 1], loaded, value)
        assert value is not None
        return value

    return [lazy(shape, dtype, element)]


@register("Split", kind="opaque", value_inputs=(1,))
def _split(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    x = inputs[0]
    axis = normalize_axis(int(ctx.attr("axis", 0)), x.ndim, ctx)
    split = ctx.attr("split")
    if split is None and ctx.value(1) is not None:
        split = [int(s) for s in ctx.value(1).reshape(-1)]  # type: ignore[union-attr]
    if split is None:
        n = int(ctx.attr("num_outputs", ctx.num_outputs))
        extent = x.shape[axis]
        size = -(-extent // n)
        split = [min(size, extent - k * size) for k in range(n)]
    outs: list[Tensor] = []
    offset = 0
    for size in split:
        shape = tuple(size if d == axis else e for d, e in enumerate(x.shape))
        outs.append(lazy(shape, x.dtype, _shifted(x, axis, offset)))
        offset += size
    return outs


def _shifted(x: Tensor, axis: int, offset: int):  # type: ignore[no-untyped-def]
    return lambda *i: x[tuple(v + offset if d == axis else v for d, v in enumerate(i))]


@register("Slice", kind="injective", value_inputs=(1, 2, 3, 4))
def _slice(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    x = inputs[0]
    if ctx.opset < 10:
        starts, ends = ctx.attr("starts"), ctx.attr("ends")
        axes = ctx.attr("axes", list(range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts = [int(v) for v in ctx.constant_input(1, "starts").reshape(-1)]
        ends = [int(v) for v in ctx.constant_input(2, "ends").reshape(-1)]
        axes_v, steps_v = ctx.value(3), ctx.value(4)
        axes = list(range(len(starts))) if axes_v is None else [int(v) for v in axes_v.reshape(-1)]
        steps = [1] * len(starts) if steps_v is None else [int(v) for v in steps_v.reshape(-1)]
    begin = [0] * x.ndim
    step = [1] * x.ndim
    shape = list(x.shape)
    for s, e, a, st in zip(starts, ends, axes, steps, strict=True):
        a = normalize_axis(int(a), x.ndim, ctx)
        start, stop, stride = slice(int(s), int(e), int(st)).indices(x.shape[a])
        begin[a], step[a] = start, stride
        shape[a] = len(range(start, stop, stride))
    return [
        lazy(
            tuple(shape),
            x.dtype,
            lambda *i: x[tuple(_offset(v * step[d] if step[d] != 1 else v, begin[d]) for d, v in enumerate(i))],
        )
    ]


@register("Gather", kind="injective")
def _gather(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    data, indices = inputs
    axis = normalize_axis(int(ctx.attr("axis", 0)), data.ndim, ctx)
    shape = data.shape[:axis] + indices.shape + data.shape[axis + 1 :]
    extent = data.shape[axis]
    q = indices.ndim

    def element(*i: PrimExpr) -> PrimExpr:
        raw = indices[i[axis : axis + q]] if q else indices.load(())
        k = cast(raw, "int32")
        k = select(k < 0, k + extent, k)
        idx = i[:axis] + (clamp(k, extent),) + i[axis + q :]
        return data[idx]

    return [lazy(shape, data.dtype, element)]


@register("Expand", kind="injective", value_inputs=(1,))
def _expand(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    x = inputs[0]
    target = [int(v) for v in ctx.constant_input(1, "shape").reshape(-1)]
    shape = broadcast_shapes(x.shape, target)
    return [lazy(shape, x.dtype, lambda *i: broadcast_load(x, i))]


@register("Tile", kind="injective", value_inputs=(1,))
def _tile(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    x = inputs[0]
    reps = [int(v) for v in ctx.constant_input(1, "repeats").reshape(-1)]
    shape = tuple(e * r for e, r in zip(x.shape, reps, strict=True))
    return [
        lazy(
            shape,
            x.dtype,
            lambda *i: x[tuple(v % e if r != 1 else v for v, e, r in zip(i, x.shape, reps, strict=True))],
        )
    ]


@register("Pad", kind="injective", value_inputs=(1, 2, 3))
def _pad(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    x = inputs[0]
    mode = ctx.attr("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise ctx.fail(f"Pad mode {mode!r} is not supported")
    if ctx.opset < 11:
        pads = list(ctx.attr("pads"))
        value = float(ctx.attr("value", 0.0))
        axes = list(range(x.ndim))
    else:
        pads = [int(v) for v in ctx.constant_input(1, "pads").reshape(-1)]
        cv = ctx.value(2)
        value = 0.0 if cv is None or cv.size == 0 else cv.reshape(-1)[0].item()
        av = ctx.value(3)
        axes = list(range(x.ndim)) if av is None else [normalize_axis(int(a), x.ndim, ctx) for a in av.reshape(-1)]
    n = len(axes)
    begin, end = [0] * x.ndim, [0] * x.ndim
    for k, a in enumerate(axes):
        begin[a], end[a] = pads[k], pads[n + k]
    # Negative pads crop first; the positive ones then pad the cropped tensor (its edges are
    # what reflect, edge and wrap repeat), as onnxruntime does.
    low = [max(-b, 0) for b in begin]
    kept = [e - max(-b, 0) - max(-a, 0) for e, b, a in zip(x.shape, begin, end, strict=True)]
    shape = tuple(k + max(b, 0) + max(a, 0) for k, b, a in zip(kept, begin, end, strict=True))

    def element(*i: PrimExpr) -> PrimExpr:
        conds = []
        idx = []
        for d, v in enumerate(i):
            e, before = kept[d], max(begin[d], 0)
            j = v - before if before else v
            if before == 0 and end[d] <= 0:
                idx.append(_offset(j, low[d]))
                continue
            if mode == "constant":
                conds.append(And(j >= 0, j < e))
                j = clamp(j, e)
            elif mode == "edge":
                j = clamp(j, e)
            elif mode == "reflect":
                # reflect without repeating the edge: period 2 * (e - 1)
                period = max(2 * (e - 1), 1)
                m = j % period
                j = select(m < e, m, period - m) if e > 1 else const(0)
            else:  # wrap
                j = j % e
            idx.append(_offset(j, low[d]))
        loaded = x[tuple(idx)] if idx else x.load(())
        if not conds:
            return loaded
        return select(conjunction(conds), loaded, const(value, x.dtype))

    return [lazy(shape, x.dtype, element)]


def _coordinate(
    ctx: OpContext, mode: str, out: PrimExpr, scale: float, in_size: int, out_size: int, dtype: str = "float32"
) -> PrimExpr:
    # Divided by the scale, not multiplied by its reciprocal: onnxruntime divides, and a
    # coordinate that lands exactly on a half must stay there for the nearest modes.
    o = Cast(as_dtype(dtype), out)
    s = const(scale, dtype)
    if mode == "asymmetric":
        return o / s
    if mode == "half_pixel":
        return (o + const(0.5, dtype)) / s - const(0.5, dtype)
    if mode == "pytorch_half_pixel":
        if out_size == 1:
            return const(0.0, dtype)
        return (o + const(0.5, dtype)) / s - const(0.5, dtype)
    if mode == "align_corners":
        if out_size == 1:
            return const(0.0, dtype)
        return o * const(in_size - 1, dtype) / const(out_size - 1, dtype)
    if mode == "tf_half_pixel_for_nn":
        return (o + const(0.5, dtype)) / s
    raise ctx.fail(f"coordinate_transformation_mode {mode!r} is not supported")


def _cubic_weights(s: PrimExpr, a: float) -> list[PrimExpr]:
    """Keys' cubic convolution weights of the taps at floor - 1 .. floor + 2 for the fraction ``s``."""
    dtype = str(s.dtype)
    one = const(1.0, dtype)

    def near(t: PrimExpr) -> PrimExpr:  # |t| <= 1
        return (const(a + 2, dtype) * t - const(a + 3, dtype)) * t * t + one

    def far(t: PrimExpr) -> PrimExpr:  # 1 < |t| < 2
        return ((const(a, dtype) * t - const(5 * a, dtype)) * t + const(8 * a, dtype)) * t - const(4 * a, dtype)

    return [far(s + one), near(s), near(one - s), far(const(2.0, dtype) - s)]


def _nearest(mode: str, x: PrimExpr) -> PrimExpr:
    half = const(0.5, str(x.dtype))
    if mode == "floor":
        r = call("floor", x)
    elif mode == "ceil":
        r = call("ceil", x)
    elif mode == "round_prefer_ceil":
        r = call("floor", x + half)
    else:  # round_prefer_floor
        r = call("ceil", x - half)
    return Cast(as_dtype("int32"), r)


@register("Resize", "Upsample", kind="injective", value_inputs=(1, 2, 3))
def _resize(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    x = inputs[0]
    mode = ctx.attr("mode", "nearest")
    if ctx.op_type == "Upsample" or ctx.opset < 11:
        scales_v = ctx.value(1) if ctx.opset >= 9 else np.array(ctx.attr("scales"))
        sizes_v = None
        ctm = "asymmetric"
        nearest_mode = "floor" if ctx.op_type == "Upsample" or ctx.opset < 11 else "round_prefer_floor"
    else:
        scales_v, sizes_v = ctx.value(2), ctx.value(3)
        ctm = ctx.attr("coordinate_transformation_mode", "half_pixel")
        nearest_mode = ctx.attr("nearest_mode", "round_prefer_floor")
    if ctx.attr("antialias", 0):
        raise ctx.fail("antialias=1 is not supported")
    if mode not in ("nearest", "linear", "cubic"):
        raise ctx.fail(f"mode {mode!r} is not supported")
    axes = [normalize_axis(int(a), x.ndim, ctx) for a in ctx.attr("axes", range(x.ndim))]
    policy = ctx.attr("keep_aspect_ratio_policy", "stretch")
    if sizes_v is not None and sizes_v.size:
        given = dict(zip(axes, (int(v) for v in sizes_v.reshape(-1)), strict=True))
        if policy == "stretch":
            out_shape = [given.get(d, x.shape[d]) for d in range(x.ndim)]
            scales = [o / i for o, i in zip(out_shape, x.shape, strict=True)]
        elif policy in ("not_larger", "not_smaller"):
            pick = min if policy == "not_larger" else max
            common = pick(given[d] / x.shape[d] for d in axes)
            scales = [common if d in given else 1.0 for d in range(x.ndim)]
            # round half away from zero (std::round), as onnxruntime
            out_shape = [int(np.floor(x.shape[d] * common + 0.5)) if d in given else x.shape[d] for d in range(x.ndim)]
        else:
            raise ctx.fail(f"keep_aspect_ratio_policy={policy!r} is not supported")
    else:
        if scales_v is None:
            raise ctx.fail("neither scales nor sizes is given")
        given_scales = dict(zip(axes, (float(v) for v in scales_v.reshape(-1)), strict=True))
        scales = [given_scales.get(d, 1.0) for d in range(x.ndim)]
        out_shape = [int(np.floor(i * s)) for i, s in zip(x.shape, scales, strict=True)]
    cubic_a = float(ctx.attr("cubic_coeff_a", -0.75))
    exclude_outside = bool(ctx.attr("exclude_outside", 0))
    resized = [d for d in range(x.ndim) if out_shape[d] != x.shape[d] or scales[d] != 1.0]

    def axis_taps(d: int, out: PrimExpr) -> list[tuple[PrimExpr, PrimExpr]]:
        """(input index, weight) pairs interpolating output position ``out`` along axis ``d``."""
        extent = x.shape[d]
        c = _coordinate(ctx, ctm, out, scales[d], extent, out_shape[d])
        f32 = "float32"
        if mode == "linear":
            # onnxruntime clamps the linear coordinate into the input
            c = max_expr(min_expr(c, const(float(extent - 1), f32)), const(0.0, f32))
            lo = Cast(as_dtype("int32"), call("floor", c))
            frac = c - Cast(as_dtype(f32), lo)
            lo_c = clamp(lo, extent)
            return [(lo_c, const(1.0, f32) - frac), (min_expr(lo_c + 1, extent - 1), frac)]
        lo = Cast(as_dtype("int32"), call("floor", c))
        frac = c - Cast(as_dtype(f32), lo)
        weights = _cubic_weights(frac, cubic_a)
        taps = [(lo + (k - 1), w) for k, w in enumerate(weights)]
        if exclude_outside:
            inside = [select(And(p >= 0, p < extent), w, const(0.0, f32)) for p, w in taps]
            total = inside[0] + inside[1] + inside[2] + inside[3]
            taps = [(p, w / total) for (p, _), w in zip(taps, inside, strict=True)]
        return [(clamp(p, extent), w) for p, w in taps]

    def element(*i: PrimExpr) -> PrimExpr:
        if mode == "nearest":
            idx = list(i)
            for d in resized:
                c = _coordinate(ctx, ctm, i[d], scales[d], x.shape[d], out_shape[d])
                idx[d] = clamp(_nearest(nearest_mode, c), x.shape[d])
            return x[tuple(idx)]
        # linear: 2^k taps over the k resized axes; cubic: 4^k
        taps: list[tuple[list[PrimExpr], PrimExpr | None]] = [(list(i), None)]
        for d in resized:
            new: list[tuple[list[PrimExpr], PrimExpr | None]] = []
            for idx, w in taps:
                for pos, weight in axis_taps(d, i[d]):
                    nidx = list(idx)
                    nidx[d] = pos
                    new.append((nidx, weight if w is None else w * weight))
            taps = new
        total: PrimExpr | None = None
        for idx, w in taps:
            term = x[tuple(idx)] if w is None else x[tuple(idx)] * cast(w, x.dtype)
            total = term if total is None else total + term
        assert total is not None
        return total

    return [lazy(tuple(out_shape), x.dtype, element)]


@register("DepthToSpace", kind="injective")
def _depth_to_space(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    x = inputs[0]
    b = int(ctx.attr("blocksize"))
    n, c, h, w = x.shape
    crd = ctx.attr("mode", "DCR") == "CRD"
    oc = c // (b * b)

    def element(nn: PrimExpr, cc: PrimExpr, hh: PrimExpr, ww: PrimExpr) -> PrimExpr:
        bh, bw = hh % b, ww % b
        src_c = cc * (b * b) + bh * b + bw if crd else (bh * b + bw) * oc + cc
        return x[(nn, src_c, hh // b, ww // b)]

    return [lazy((n, oc, h * b, w * b), x.dtype, element)]


@register("SpaceToDepth", kind="injective")
def _space_to_depth(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    x = inputs[0]
    b = int(ctx.attr("blocksize"))
    n, c, h, w = x.shape

    def element(nn: PrimExpr, cc: PrimExpr, hh: PrimExpr, ww: PrimExpr) -> PrimExpr:
        off, ch = cc // c, cc % c
        return x[(nn, ch, hh * b + off // b, ww * b + off % b)]

    return [lazy((n, c * b * b, h // b, w // b), x.dtype, element)]


@register("CenterCropPad", kind="injective", value_inputs=(1,))
def _center_crop_pad(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    x = inputs[0]
    target = [int(v) for v in ctx.constant_input(1, "shape").reshape(-1)]
    axes = [normalize_axis(int(a), x.ndim, ctx) for a in ctx.attr("axes", range(x.ndim))]
    if len(axes) != len(target):
        raise ctx.fail(f"shape {target} for axes {axes}")
    shape = list(x.shape)
    offset = [0] * x.ndim  # input index = output index + offset (negative: padding before)
    for a, extent in zip(axes, target, strict=True):
        shape[a] = extent
        difference = x.shape[a] - extent
        offset[a] = difference // 2 if difference >= 0 else -((-difference) // 2)

    def element(*i: PrimExpr) -> PrimExpr:
        conds = []
        idx = []
        for d, v in enumerate(i):
            j = _offset(v, offset[d])
            if offset[d] < 0 or shape[d] + offset[d] > x.shape[d]:
                conds.append(And(j >= 0, j < x.shape[d]))
                j = clamp(j, x.shape[d])
            idx.append(j)
        loaded = x[tuple(idx)]
        return select(conjunction(conds), loaded, const(0, x.dtype)) if conds else loaded

    return [lazy(tuple(shape), x.dtype, element)]


@register("EyeLike", kind="injective")
def _eye_like(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    x = inputs[0]
    if x.ndim != 2:
        raise ctx.fail(f"the input must be 2-D, got rank {x.ndim}")
    code = ctx.attr("dtype")
    dtype = x.dtype if code is None else _ONNX_TO_NP.get(int(code))
    if dtype is None:
        raise ctx.fail(f"dtype {code} is not supported")
    k = int(ctx.attr("k", 0))
    return [lazy(x.shape, dtype, lambda i, j: select((j - i).equal(k), const(1, dtype), const(0, dtype)))]


# Shapes, ranges and the signal windows depend only on constants: folding computes them.
@register(
    "Shape",
    "Size",
    "ConstantOfShape",
    "Range",
    "Constant",
    "HannWindow",
    "HammingWindow",
    "BlackmanWindow",
    "MelWeightMatrix",
    kind="fold",
)
def _must_fold(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    raise ctx.fail("its inputs are not constant after folding (dynamic shapes are not supported)")


def _is_zero(e: PrimExpr) -> bool:
    return getattr(e, "value", None) == 0


def _offset(v: PrimExpr, k: int) -> PrimExpr:
    return v + k if k else v


def is_buffer(t: Tensor) -> bool:
    return isinstance(t, BufferTensor)
