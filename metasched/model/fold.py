"""Constant folding with numpy: one kernel per ONNX operator that shape computations and constant
subgraphs use, with ONNX's semantics per opset (each checked against onnxruntime in
``tests/metasched/model/test_fold.py``).

    outputs = evaluate("Slice", [x, starts, ends], attrs={}, opset=17)

An operator without a kernel here, or a case a kernel does not cover (a ``Cast`` to bfloat16,
int4 quantization), is tried with ``onnx.reference``; what neither can compute raises
``FoldError`` with the reason, and the importer leaves the node in the graph (as a kernel, when
the operator library has it). ``limit`` caps the elements of a folded result: a kernel whose
output size follows from its inputs' shapes (``Expand``, ``Tile``, ``ConstantOfShape``...)
refuses before allocating.

Semantics worth knowing (onnxruntime's): integer ``Div`` truncates toward zero (C), ``Mod``
follows the divisor's sign unless ``fmod=1``, ``Round`` and ``QuantizeLinear`` round half to
even, ``Range`` accumulates ``start + delta + delta ...`` in the input type, a float-to-int
``Cast`` truncates.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import reduce
from typing import Any

import numpy as np

__all__ = ["KERNELS", "FoldContext", "FoldError", "FoldTooLarge", "NotCovered", "evaluate", "has_kernel"]


class FoldError(Exception):
    """A node that cannot be folded; the message says why."""


class FoldTooLarge(FoldError):
    """A result over the folding limit (tried with no other evaluator)."""


class NotCovered(FoldError):
    """A case a kernel has no numpy code for (a dtype numpy lacks): onnx.reference tries it."""


@dataclass(frozen=True)
class FoldContext:
    """What a kernel sees besides its inputs."""

    op_type: str
    attrs: Mapping[str, Any]
    opset: int
    num_outputs: int = 1
    limit: int | None = None

    def attr(self, key: str, default: Any = None) -> Any:
        return self.attrs.get(key, default)

    def check_size(self, shape: Sequence[int]) -> None:
        """Refuse a result of ``shape`` over the limit, before computing it."""
        size = math.prod(int(d) for d in shape)
        if self.limit is not None and size > self.limit:
            raise FoldTooLarge(f"its result would have {size} elements, more than the folding limit {self.limit}")


Inputs = Sequence[np.ndarray | None]
Kernel = Callable[[FoldContext, Inputs], list[np.ndarray]]

#: op_type -> numpy kernel
KERNELS: dict[str, Kernel] = {}


def kernel(*op_types: str) -> Callable[[Kernel], Kernel]:
    def wrap(fn: Kernel) -> Kernel:
        for op_type in op_types:
            KERNELS[op_type] = fn
        return fn

    return wrap


def has_kernel(op_type: str) -> bool:
    """Whether ``op_type`` folds with a kernel of this module (not only with onnx.reference)."""
    return op_type in KERNELS


def evaluate(
    op_type: str,
    inputs: Inputs,
    attrs: Mapping[str, Any],
    opset: int,
    *,
    num_outputs: int = 1,
    limit: int | None = None,
    source: Any = None,
) -> list[np.ndarray]:
    """The outputs of an ONNX node on constant ``inputs`` (None for an absent optional input).

    ``attrs`` are the node's attributes as Python values (tensors as arrays), ``num_outputs``
    the node's output count (``Split``), ``source`` its ``NodeProto`` for the onnx.reference
    fallback. Raises ``FoldError`` (``FoldTooLarge`` over ``limit`` elements)."""
    ctx = FoldContext(op_type, attrs, opset, num_outputs, limit)
    fn = KERNELS.get(op_type)
    if fn is None:
        outputs = _reference(ctx, inputs, source)
    else:
        try:
            with np.errstate(all="ignore"):
                outputs = fn(ctx, inputs)
        except FoldError as error:
            if not isinstance(error, NotCovered):
                raise  # inputs the operator refuses, or too large: no other evaluator does better
            outputs = _reference_or(ctx, inputs, source, str(error))
        except Exception as error:  # noqa: BLE001 - numpy refusing a case: onnx.reference may cover it
            outputs = _reference_or(ctx, inputs, source, f"{type(error).__name__}: {error}")
    arrays = [np.asarray(o) for o in outputs]
    for array in arrays:
        ctx.check_size(array.shape)
    return arrays


def _reference_or(ctx: FoldContext, inputs: Inputs, source: Any, reason: str) -> list[np.ndarray]:
    """onnx.reference where a kernel gave up; its failure reports the kernel's ``reason``."""
    try:
        return _reference(ctx, inputs, source)
    except FoldError:
        raise FoldError(reason) from None


def _reference(ctx: FoldContext, inputs: Inputs, source: Any) -> list[np.ndarray]:
    """onnx.reference on the one node; every failure (it lacks the operator or the opset, or
    refuses the inputs) is a ``FoldError``."""
    try:
        from onnx import TensorProto, helper, numpy_helper
        from onnx.reference import ReferenceEvaluator

        names = [f"in{k}" if value is not None else "" for k, value in enumerate(inputs)]
        outputs = [f"out{k}" for k in range(ctx.num_outputs)]
        if source is not None:
            proto = helper.make_node(ctx.op_type, names, outputs, domain=source.domain)
            proto.attribute.extend(source.attribute)
        else:
            attrs = {k: numpy_helper.from_array(v) if isinstance(v, np.ndarray) else v for k, v in ctx.attrs.items()}
            proto = helper.make_node(ctx.op_type, names, outputs, **attrs)
        feeds = {n: v for n, v in zip(names, inputs, strict=True) if n and v is not None}
        graph = helper.make_graph(
            [proto],
            "fold",
            [
                helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), None)
                for n, v in feeds.items()
            ],
            [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outputs],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", ctx.opset)], ir_version=10)
        with np.errstate(all="ignore"):
            return [np.asarray(r) for r in ReferenceEvaluator(model).run(None, feeds)]
    except Exception as error:  # noqa: BLE001 - onnx.reference raises anything (RuntimeError, KeyError...)
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        raise FoldError(
            f"no numpy kernel, and onnx.reference cannot evaluate it ({type(error).__name__}: {first})"
        ) from None


# ---------------------------------------------------------------- helpers


def _opt(inputs: Inputs, position: int) -> np.ndarray | None:
    return inputs[position] if len(inputs) > position else None


def _ints(value: Any) -> list[int]:
    return [int(v) for v in np.asarray(value).reshape(-1)]


def _axis(axis: int, ndim: int) -> int:
    if not -ndim <= axis < max(ndim, 1):
        raise FoldError(f"axis {axis} out of range for rank {ndim}")
    return axis % ndim if ndim else 0


def _same(value: Any, dtype: np.dtype[Any]) -> np.ndarray:
    return np.asarray(value).astype(dtype, copy=False)


#: TensorProto element types numpy represents (the others: onnx.reference, through ml_dtypes)
_DTYPES: dict[int, Any] = {
    1: np.float32,
    2: np.uint8,
    3: np.int8,
    4: np.uint16,
    5: np.int16,
    6: np.int32,
    7: np.int64,
    9: np.bool_,
    10: np.float16,
    11: np.float64,
    12: np.uint32,
    13: np.uint64,
}


def _dtype(to: int) -> np.dtype[Any]:
    if to not in _DTYPES:
        raise NotCovered(f"element type {to} has no numpy kernel")
    return np.dtype(_DTYPES[to])


# ---------------------------------------------------------------- elementwise

_UNARY: dict[str, Callable[[np.ndarray], Any]] = {
    "Identity": lambda x: x,
    "Neg": np.negative,
    "Abs": np.abs,
    "Sqrt": np.sqrt,
    "Exp": np.exp,
    "Log": np.log,
    "Floor": np.floor,
    "Ceil": np.ceil,
    "Round": np.round,  # half to even, as ONNX
    "Reciprocal": np.reciprocal,
    "Sign": np.sign,
    "Sin": np.sin,
    "Cos": np.cos,
    "Tanh": np.tanh,
    "Relu": lambda x: np.maximum(x, np.zeros((), x.dtype)),
    "Sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "Not": np.logical_not,
}


@kernel(*_UNARY)
def _unary(ctx: FoldContext, inputs: Inputs) -> list[np.ndarray]:
    x = np.asarray(inputs[0])
    return [_same(_UNARY[ctx.op_type](x), x.dtype)]


@kernel("IsNaN", "IsInf")
def _is(ctx: FoldContext, inputs: Inputs) -> list[np.ndarray]:
    x = np.asarray(inputs[0])
    if ctx.op_type == "IsNaN":
        return [np.isnan(x)]
    positive, negative = ctx.attr("detect_positive", 1), ctx.attr("detect_negative", 1)
    return [np.isinf(x) & (((x > 0) & bool(positive)) | ((x < 0) & bool(negative)))]


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C's integer division (toward zero), as onnxruntime."""
    if np.any(b == 0):
        raise FoldError("integer division by zero")
    quotient = np.floor_divide(a, b)
    return quotient + ((np.mod(a, b) != 0) & ((a < 0) != (b < 0))).astype(quotient.dtype)


def _div(a: np.ndarray, b: np.ndarray) -> Any:
    return _int_div(a, b) if a.dtype.kind in "iu" else np.divide(a, b)


def _mod(ctx: FoldContext, a: np.ndarray, b: np.ndarray) -> Any:
    if a.dtype.kind in "iu" and np.any(b == 0):
        raise FoldError("integer modulo by zero")
    if ctx.attr("fmod", 0) or a.dtype.kind == "f":
        return np.fmod(a, b)  # the dividend's sign (C's fmod)
    return np.mod(a, b)  # the divisor's sign (Python's %)


def _pow(a: np.ndarray, b: np.ndarray) -> Any:
    if a.dtype.kind in "iu" and b.dtype.kind in "iu" and np.all(b >= 0):
        return np.power(a, b.astype(a.dtype))
    if a.dtype.kind == "f":
        return np.power(a, b.astype(a.dtype))
    return np.power(a.astype(np.float64), b.astype(np.float64))


_BINARY: dict[str, Callable[[FoldContext, np.ndarray, np.ndarray], Any]] = {
    "Add": lambda ctx, a, b: np.add(a, b),
    "Sub": lambda ctx, a, b: np.subtract(a, b),
    "Mul": lambda ctx, a, b: np.multiply(a, b),
    "Div": lambda ctx, a, b: _div(a, b),
    "Mod": _mod,
    "Pow": lambda ctx, a, b: _pow(a, b),
    "BitShift": lambda ctx, a, b: np.left_shift(a, b) if ctx.attr("direction") == "LEFT" else np.right_shift(a, b),
}

_COMPARE: dict[str, Callable[[np.ndarray, np.ndarray], Any]] = {
    "Equal": np.equal,
    "Less": np.less,
    "Greater": np.greater,
    "LessOrEqual": np.less_equal,
    "GreaterOrEqual": np.greater_equal,
    "And": np.logical_and,
    "Or": np.logical_or,
    "Xor": np.logical_xor,
}


@kernel(*_BINARY)
def _binary(ctx: FoldContext, inputs: Inputs) -> list[np.ndarray]:
    a, b = np.asarray(inputs[0]), np.asarray(inputs[1])
    ctx.check_size(np.broadcast_shapes(a.shape, b.shape))
    if ctx.op_type != "Pow" and a.dtype != b.dtype:
        raise FoldError(f"its inputs have different types ({a.dtype}, {b.dtype})")
    return [_same(_BINARY[ctx.op_type](ctx, a, b), a.dtype)]


@kernel(*_COMPARE)
def _compare(ctx: FoldContext, inputs: Inputs) -> list[np.ndarray]:
    a, b = np.asarray(inputs[0]), np.asarray(inputs[1])
    ctx.check_size(np.broadcast_shapes(a.shape, b.shape))
    return [np.asarray(_COMPARE[ctx.op_type](a, b), dtype=np.bool_)]


@kernel("Where")
def _where(ctx: FoldContext, inputs: Inputs) -> list[np.ndarray]:
    cond, x, y = (np.asarray(v) for v in inputs[:3])
    ctx.check_size(np.broadcast_shapes(cond.shape, x.shape, y.shape))
    return [_same(np.where(cond.astype(np.bool_), x, y), x.dtype)]


@kernel("Min", "Max", "Sum", "Mean")
def _variadic(ctx: FoldContext, inputs: Inputs) -> list[np.ndarray]:
    arrays = [np.asarray(v) for v in inputs if v is not None]
    ctx.check_size(np.broadcast_shapes(*(a.shape for a in arrays)))
    dtype = arrays[0].dtype
    fn = {"Min": np.minimum, "Max": np.maximum, "Sum": np.add, "Mean": np.add}[ctx.op_type]
    out = reduce(fn, arrays)
    if ctx.op_type == "Mean":
        out = out / np.asarray(len(arrays), dtype)
    return [_same(out, dtype)]


@kernel("Clip")
def _clip(ctx: FoldContext, inputs: Inputs) -> list[np.ndarray]:
    x = np.asarray(inputs[0])
    if ctx.opset < 11:
        low, high = ctx.attr("min"), ctx.attr("max")
    else:
        low, high = _opt(inputs, 1), _opt(inputs, 2)
    out = x
    if low is not None:
        out = np.maximum(out, np.asarray(low).astype(x.dtype))
    if high is not None:
        out = np.minimum(out, np.asarray(high).astype(x.dtype))
    return [_same(out, x.dtype)]


@kernel("MatMul")
def _matmul(ctx: FoldContext, inputs: Inputs) -> list[np.ndarray]:
    a, b = np.asarray(inputs[0]), np.asarray(inputs[1])
    return [_same(np.matmul(a, b), a.dtype)]


# ---------------------------------------------------------------- types


@kernel("Cast", "CastLike")
def _cast(ctx: FoldContext, inputs: Inputs) -> list[np.ndarray]:
    x = np.asarray(inputs[0])
    dtype = np.asarray(inputs[1]).dtype if ctx.op_type == "CastLike" else _dtype(int(ctx.attr("to")))
    if x.dtype.kind not in "biuf" or dtype.kind not in "biuf":
        raise NotCovered(f"a cast from {x.dtype} to {dtype} has no numpy kernel")
    return [x.astype(dtype)]  # floats to integers truncate toward zero, as C


# ---------------------------------------------------------------- shapes and indexing


@kernel("Shape")
def _shape(ctx: FoldContext, inputs: Inputs) -> list[np.ndarray]:
    shape = np.asarray(inputs[0]).shape
    start, end = ctx.attr("start", 0), ctx.attr("end")
    return [np.array(shape[start:end], dtype=np.int64)]  # Python's slice clamps as ONNX does


@kernel("Size")
def _size(ctx: FoldContext, inputs: Inputs) -> list[np.ndarray]:
    return [np.array(np.asarray(inputs[0]).size, dtype=np.int64)]


@kernel("Gather")
def _gather(ctx: FoldContext, inputs: Inputs) -> list[np.ndarray]:
    data, indices = np.asarray(inputs[0]), np.asarray(inputs[1]).astype(np.int64)
    axis = _axis(int(ctx.attr("axis", 0)), data.ndim)
    extent = data.shape[axis]
    if np.any((indices < -extent) | (indices >= extent)):
        raise FoldError(f"an index is out of range for axis {axis} of extent {extent}")
    ctx.check_size(data.shape[:axis] + indices.shape + data.shape[axis + 1 :])
    return [np.take(data, np.where(indices < 0, indices + extent, indices), axis=axis)]


@kernel("GatherElements")
def _gather_elements(ctx: FoldContext, inputs: Inputs) -> list[np.ndarray]:
    data, indices = np.asarray(inputs[0]), np.asarray(inputs[1]).astype(np.int64)
    axis = _axis(int(ctx.attr("axis", 0)), data.ndim)
    extent = data.shape[axis]
    if np.any((indices < -extent) | (indices >= extent)):
        raise FoldError(f"an index is out of range for axis {axis} of extent {extent}")
    grid: list[np.ndarray] = list(np.indices(indices.shape, sparse=True))  # the output's coordinates
    grid[axis] = np.where(indices < 0, indices + extent, indices)
    return [data[tuple(grid)]]


@kernel("Concat")
def _concat(ctx: FoldContext, inputs: Inputs) -> list[np.ndarray]:
    arrays = [np.asarray(v) for v in inputs if v is not None]
    axis = _axis(int(ctx.attr("axis")), arrays[0].ndim)
    return [np.concatenate(arrays, axis=axis)]


def _axes_input(ctx: FoldContext, inputs: Inputs, since: int) -> list[int] | None:
    """``axes``: an attribute before opset ``since``, the optional input 1 from it on."""
    if ctx.opset < since:
        axes = ctx.attr("axes")
        return None if axes is None else [int(a) for a in axes]
    value = _opt(inputs, 1)
    return None if value is None else _ints(value)


@kernel("Unsqueeze")
def _unsqueeze(ctx: FoldContext, inputs: Inputs) -> list[np.ndarray]:
    x = np.asarray(inputs[0])
    axes = _axes_input(ctx, inputs, 13)
    if not axes:
        raise FoldError("Unsqueeze needs axes")
    rank = x.ndim + len(axes)
    normalized = sorted(_axis(a, rank) for a in axes)
    if len(set(normalized)) != len(normalized):
        raise FoldError(f"repeated axes {axes}")
    shape = list(x.shape)
    for a in normalized:
        shape.insert(a, 1)
    return [x.reshape(shape)]


@kernel("Squeeze")
def _squeeze(ctx: FoldContext, inputs: Inputs) -> list[np.ndarray]:
    x = np.asarray(inputs[0])
    axes = _axes_input(ctx, inputs, 13)
    if axes is None:
        return [x.reshape([d for d in x.shape if d != 1])]
    normalized = {_axis(a, x.ndim) for a in axes}
    if any(x.shape[a] != 1 for a in normalized):
        raise FoldError(f"cannot squeeze axes {axes} of shape {x.shape}: not all are 1")
    return [x.reshape([d for k, d in enumerate(x.shape) if k not in normalized])]


@kernel("Flatten")
def _flatten(ctx: FoldContext, inputs: Inputs) -> list[np.ndarray]:
    x = np.asarray(inputs[0])
    axis = int(ctx.attr("axis", 1))
    axis = axis + x.ndim if axis < 0 else axis
    if not 0 <= axis <= x.ndim:
        raise FoldError(f"axis {ctx.attr('axis')} out of range for rank {x.ndim}")
    return [x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:]))]


@kernel("Reshape")
def _reshape(ctx: FoldContext, inputs: Inputs) -> list[np.ndarray]:
    x = np.asarray(inputs[0])
    requested = _ints(inputs[1])
    allowzero = int(ctx.attr("allowzero", 0)) if ctx.opset >= 14 else 0
    shape = []
    for k, extent in enumerate(requested):
        if extent == 0 and not allowzero:
            if k >= x.ndim:
                raise FoldError(f"shape {requested} copies dimension {k} (a 0) of a rank-{x.ndim} input")
            shape.append(x.shape[k])
        elif extent < -1:
            raise FoldError(f"shape {requested} has a negative extent")
        else:
            shape.append(extent)
    if shape.count(-1) > 1:
        raise FoldError(f"shape {requested} has more than one -1")
    if -1 in shape:
        known = math.prod(d for d in shape if d != -1)
        if known == 0 or x.size % known:
            raise FoldError(f"cannot reshape {x.shape} to {requested}")
        shape[shape.index(-1)] = x.size // known
    if math.prod(shape) != x.size:
        raise FoldError(f"cannot reshape {x.shape} ({x.size} elements) to {requested}")
    return [x.reshape(shape)]


@kernel("Expand")
def _expand(ctx: FoldContext, inputs: Inputs) -> list[np.ndarray]:
    x = np.asarray(inputs[0])
    shape = np.broadcast_shapes(x.shape, tuple(_ints(inputs[1])))
    ctx.check_size(shape)
    return [np.array(np.broadcast_to(x, shape))]


@kernel("Tile")
def _tile(ctx: FoldContext, inputs: Inputs) -> list[np.ndarray]:
    x = np.asarray(inputs[0])
    repeats = _ints(inputs[1])
    if len(repeats) != x.ndim or any(r < 0 for r in repeats):
        raise FoldError(f"repeats {repeats} do not fit a rank-{x.ndim} input")
    ctx.check_size([d * r for d, r in zip(x.shape, repeats, strict=True)])
    return [np.tile(x, repeats)]


@kernel("Transpose")
def _transpose(ctx: FoldContext, inputs: Inputs) -> list[np.ndarray]:
    x = np.asarray(inputs[0])
    perm = ctx.attr("perm")
    perm = list(range(x.ndim))[::-1] if perm is None else [int(p) for p in perm]
    return [np.ascontiguousarray(np.transpose(x, perm))]


@kernel("Slice")
def _slice(ctx: FoldContext, inputs: Inputs) -> list[np.ndarray]:
    x = np.asarray(inputs[0])
    if ctx.opset < 10:
        starts, ends = list(ctx.attr("starts")), list(ctx.attr("ends"))
        axes, steps = ctx.attr("axes"), None
    else:
        starts, ends = _ints(inputs[1]), _ints(inputs[2])
        axes_value, steps_value = _opt(inputs, 3), _opt(inputs, 4)
        axes = None if axes_value is None else _ints(axes_value)
        steps = None if steps_value is None else _ints(steps_value)
    axes = list(range(len(starts))) if axes is None else [_axis(int(a), x.ndim) for a in axes]
    steps = [1] * len(starts) if steps is None else steps
    if not len(starts) == len(ends) == len(axes) == len(steps) or len(set(axes)) != len(axes):
        raise FoldError(f"starts {starts}, ends {ends}, axes {axes} and steps {steps} do not match")
    index: list[slice] = [slice(None)] * x.ndim
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        extent = x.shape[axis]
        if step == 0:
            raise FoldError("a step of 0")
        start = int(start) + extent if start < 0 else int(start)
        end = int(end) + extent if end < 0 else int(end)
        if step > 0:
            start, end = min(max(start, 0), extent), min(max(end, 0), extent)
        else:
            start, end = min(max(start, 0), extent - 1), min(max(end, -1), extent - 1)
        index[axis] = slice(start, end if end >= 0 else None, step)
    return [np.ascontiguousarray(x[tuple(index)])]


@kernel("Split")
def _split(ctx: FoldContext, inputs: Inputs) -> list[np.ndarray]:
    x = np.asarray(inputs[0])
    axis = _axis(int(ctx.attr("axis", 0)), x.ndim)
    extent = x.shape[axis]
    if ctx.opset < 13:
        split = ctx.attr("split")
    else:
        split = None if _opt(inputs, 1) is None else _ints(inputs[1])
    if not split:
        parts = int(ctx.attr("num_outputs", ctx.num_outputs))
        if ctx.opset < 18 and extent % parts:
            raise FoldError(f"axis {axis} of extent {extent} does not split into {parts} equal parts")
        chunk = -(-extent // parts)
        split = [max(min(chunk, extent - k * chunk), 0) for k in range(parts)]
    split = [int(s) for s in split]
    if sum(split) != extent or len(split) != ctx.num_outputs:
        raise FoldError(f"split {split} does not cut extent {extent} into {ctx.num_outputs} outputs")
    return list(np.split(x, np.cumsum(split)[:-1], axis=axis))


@kernel("Trilu")
def _trilu(ctx: FoldContext, inputs: Inputs) -> list[np.ndarray]:
    x = np.asarray(inputs[0])
    k = 0 if _opt(inputs, 1) is None else int(np.asarray(inputs[1]).reshape(-1)[0])
    return [np.triu(x, k) if ctx.attr("upper", 1) else np.tril(x, k)]


@kernel("CumSum")
def _cumsum(ctx: FoldContext, inputs: Inputs) -> list[np.ndarray]:
    x = np.asarray(inputs[0])
    axis = _axis(int(np.asarray(inputs[1]).reshape(-1)[0]), x.ndim)
    reverse, exclusive = ctx.attr("reverse", 0), ctx.attr("exclusive", 0)
    y = np.flip(x, axis) if reverse else x
    out = np.cumsum(y, axis=axis, dtype=x.dtype)
    if exclusive:  # shifted by one (not out - y: exact in floating point too)
        zeros = np.zeros_like(np.take(out, [0], axis=axis))
        out = np.concatenate([zeros, np.take(out, range(x.shape[axis] - 1), axis=axis)], axis=axis)
    return [np.ascontiguousarray(np.flip(out, axis) if reverse else out)]


@kernel("NonZero")
def _nonzero(ctx: FoldContext, inputs: Inputs) -> list[np.ndarray]:
    x = np.asarray(inputs[0])
    if x.ndim == 0:  # onnxruntime: a scalar is one index row
        return [np.zeros((1, int(bool(x))), dtype=np.int64)]
    return [np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1)]


# ---------------------------------------------------------------- generators


@kernel("ConstantOfShape")
def _constant_of_shape(ctx: FoldContext, inputs: Inputs) -> list[np.ndarray]:
    shape = _ints(inputs[0])
    if any(d < 0 for d in shape):
        raise FoldError(f"negative extent in shape {shape}")
    ctx.check_size(shape)
    value = ctx.attr("value")
    value = np.zeros(1, np.float32) if value is None else np.asarray(value)
    return [np.full(shape, value.reshape(-1)[0], dtype=value.dtype)]


@kernel("Range")
def _range(ctx: FoldContext, inputs: Inputs) -> list[np.ndarray]:
    start, limit, delta = (np.asarray(v).reshape(()) for v in inputs[:3])
    dtype = start.dtype
    if delta == 0:
        raise FoldError("delta is 0")
    # onnxruntime: n = ceil(double(limit - start) / delta), the difference in the input type
    count = max(int(math.ceil(float(np.subtract(limit, start, dtype=dtype)) / float(delta))), 0)
    ctx.check_size([count])
    if count == 0:
        return [np.zeros(0, dtype)]
    steps = np.full(count, delta, dtype)
    steps[0] = start
    return [np.add.accumulate(steps, dtype=dtype)]  # start, start + delta, ... accumulated as onnxruntime


@kernel("EyeLike")
def _eye_like(ctx: FoldContext, inputs: Inputs) -> list[np.ndarray]:
    x = np.asarray(inputs[0])
    dtype = x.dtype if ctx.attr("dtype") is None else _dtype(int(ctx.attr("dtype")))
    if x.ndim != 2:
        raise FoldError(f"EyeLike needs a 2-D input, got rank {x.ndim}")
    return [np.eye(x.shape[0], x.shape[1], int(ctx.attr("k", 0)), dtype=dtype)]


# ---------------------------------------------------------------- reductions

#: the opset from which a reduction takes ``axes`` as input 1 instead of an attribute
_AXES_INPUT_SINCE = {"ReduceSum": 13}

_REDUCE: dict[str, Callable[[np.ndarray, tuple[int, ...], bool], Any]] = {
    "ReduceSum": lambda x, axes, keep: np.sum(x, axis=axes, keepdims=keep, dtype=x.dtype),
    "ReduceProd": lambda x, axes, keep: np.prod(x, axis=axes, keepdims=keep, dtype=x.dtype),
    "ReduceMax": lambda x, axes, keep: np.max(x, axis=axes, keepdims=keep),
    "ReduceMin": lambda x, axes, keep: np.min(x, axis=axes, keepdims=keep),
    "ReduceMean": lambda x, axes, keep: np.mean(x, axis=axes, keepdims=keep),
    "ReduceL1": lambda x, axes, keep: np.sum(np.abs(x), axis=axes, keepdims=keep, dtype=x.dtype),
    "ReduceL2": lambda x, axes, keep: np.sqrt(np.sum(np.square(x), axis=axes, keepdims=keep, dtype=x.dtype)),
    "ReduceSumSquare": lambda x, axes, keep: np.sum(np.square(x), axis=axes, keepdims=keep, dtype=x.dtype),
}


@kernel(*_REDUCE)
def _reduce(ctx: FoldContext, inputs: Inputs) -> list[np.ndarray]:
    x = np.asarray(inputs[0])
    axes = _axes_input(ctx, inputs, _AXES_INPUT_SINCE.get(ctx.op_type, 18))
    if not axes:
        if ctx.attr("noop_with_empty_axes", 0):
            return [x]
        axes = list(range(x.ndim))
    normalized = tuple(sorted({_axis(a, x.ndim) for a in axes}))
    return [_same(_REDUCE[ctx.op_type](x, normalized, bool(ctx.attr("keepdims", 1))), x.dtype)]


# ---------------------------------------------------------------- quantization

_QUANTIZED = {np.dtype(t) for t in (np.int8, np.uint8, np.int16, np.uint16)}


def _per_axis(param: np.ndarray, x: np.ndarray, ctx: FoldContext) -> np.ndarray:
    """A scale or zero point shaped to broadcast against ``x``: per tensor (one element), per
    axis (1-D along ``axis``) or blocked (opset 21: ``block_size`` elements per value)."""
    param = np.asarray(param)
    if param.size == 1 and param.ndim <= 1:
        return param.reshape(())
    axis = _axis(int(ctx.attr("axis", 1)), x.ndim)
    block = int(ctx.attr("block_size", 0) or 0)
    if block > 0:
        if param.ndim != x.ndim:
            raise FoldError(f"blocked scale of shape {param.shape} for an input of shape {x.shape}")
        return np.repeat(param, block, axis=axis).take(range(x.shape[axis]), axis=axis)
    if param.ndim != 1 or param.shape[0] != x.shape[axis]:
        raise FoldError(f"a per-axis parameter of shape {param.shape} does not fit axis {axis} of {x.shape}")
    shape = [1] * x.ndim
    shape[axis] = param.shape[0]
    return param.reshape(shape)


@kernel("DequantizeLinear")
def _dequantize(ctx: FoldContext, inputs: Inputs) -> list[np.ndarray]:
    x, scale, zero = np.asarray(inputs[0]), np.asarray(inputs[1]), _opt(inputs, 2)
    if x.dtype not in _QUANTIZED | {np.dtype(np.int32)} or scale.dtype.kind != "f":
        raise NotCovered(f"dequantizing {x.dtype} with a {scale.dtype} scale has no numpy kernel")
    shifted = x.astype(np.int64)
    if zero is not None:
        shifted = shifted - _per_axis(zero, x, ctx).astype(np.int64)
    dtype = scale.dtype if ctx.attr("output_dtype") in (None, 0) else _dtype(int(ctx.attr("output_dtype")))
    # onnxruntime: float(x - zero) * scale, in float32 for a float16 scale
    compute = np.float32 if scale.dtype == np.float16 else scale.dtype
    out = shifted.astype(compute) * _per_axis(scale, x, ctx).astype(compute)
    return [out.astype(dtype)]


@kernel("QuantizeLinear")
def _quantize(ctx: FoldContext, inputs: Inputs) -> list[np.ndarray]:
    x, scale, zero = np.asarray(inputs[0]), np.asarray(inputs[1]), _opt(inputs, 2)
    if zero is not None:
        dtype = np.asarray(zero).dtype
    elif ctx.attr("output_dtype") not in (None, 0):
        dtype = _dtype(int(ctx.attr("output_dtype")))
    else:
        dtype = np.dtype(np.uint8)
    if dtype not in _QUANTIZED or x.dtype.kind != "f":
        raise NotCovered(f"quantizing {x.dtype} to {dtype} has no numpy kernel")
    compute = np.float32 if x.dtype == np.float16 else x.dtype
    # onnxruntime: saturate(nearbyint(x / scale) + zero), rounding half to even
    out = np.rint(x.astype(compute) / _per_axis(scale, x, ctx).astype(compute))
    if zero is not None:
        out = out + _per_axis(zero, x, ctx).astype(compute)
    info = np.iinfo(dtype)
    return [np.clip(out, info.min, info.max).astype(dtype)]
