"""Elementwise and broadcasting operators: arithmetic, math functions, activations, comparisons,
Where, Clip, Cast, Identity, and inference-mode BatchNormalization. All return lazy tensors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from metasched.model.ops import (
    OpContext,
    broadcast_load,
    broadcast_shapes,
    cast,
    register,
    select,
)
from metasched.model.te import Tensor, lazy
from tir.ir import Call, Not, PrimExpr, const
from tir.ir.expr import And, Or, max_expr, min_expr

_ONNX_TO_NP = {
    1: "float32",
    2: "uint8",
    3: "int8",
    5: "int16",
    6: "int32",
    7: "int64",
    9: "bool",
    10: "float16",
    11: "float64",
}


def call(op: str, *args: PrimExpr) -> PrimExpr:
    return Call(args[0].dtype, op, tuple(args))


def _float(x: PrimExpr, v: float) -> PrimExpr:
    return const(v, str(x.dtype))


def _map(tensors: list[Tensor], fn: Callable[..., PrimExpr], dtype: str | None = None) -> Tensor:
    shape = broadcast_shapes(*(t.shape for t in tensors))
    probe_dtype = dtype

    def element(*i: PrimExpr) -> PrimExpr:
        return fn(*(broadcast_load(t, i) for t in tensors))

    if probe_dtype is None:
        probe_dtype = tensors[0].dtype
    return lazy(shape, probe_dtype, element)


def _binary(fn: Callable[[PrimExpr, PrimExpr], PrimExpr], out_dtype: str | None = None):  # type: ignore[no-untyped-def]
    def lower(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
        a, b = inputs[0], inputs[1]
        return [_map([a, b], fn, out_dtype)]

    return lower


def _div(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    if a.dtype.is_float:
        return a / b
    # ONNX integer division truncates toward zero.
    q = a // b
    return select(And((a % b).not_equal(0), _xor(a < 0, b < 0)), q + 1, q)


def _xor(p: PrimExpr, q: PrimExpr) -> PrimExpr:
    return Or(And(p, Not(q)), And(Not(p), q))


def _pow(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    if getattr(b, "value", None) == 2.0:
        return a * a
    if getattr(b, "value", None) == 0.5:
        return call("sqrt", a)
    if str(b.dtype) != str(a.dtype):
        b = cast(b, str(a.dtype))
    return call("pow", a, b)


register("Add", kind="injective")(_binary(lambda a, b: a + b))
register("Sub", kind="injective")(_binary(lambda a, b: a - b))
register("Mul", kind="injective")(_binary(lambda a, b: a * b))
register("Div", kind="injective")(_binary(_div))
register("Pow", kind="injective")(_binary(_pow))
register("Equal", kind="injective")(_binary(lambda a, b: a.equal(b), "bool"))
register("Less", kind="injective")(_binary(lambda a, b: a < b, "bool"))
register("LessOrEqual", kind="injective")(_binary(lambda a, b: a <= b, "bool"))
register("Greater", kind="injective")(_binary(lambda a, b: a > b, "bool"))
register("GreaterOrEqual", kind="injective")(_binary(lambda a, b: a >= b, "bool"))
register("And", kind="injective")(_binary(lambda a, b: And(a, b), "bool"))
register("Or", kind="injective")(_binary(lambda a, b: Or(a, b), "bool"))
register("Xor", kind="injective")(_binary(_xor, "bool"))
register("PRelu", kind="injective")(_binary(lambda x, s: select(x < _float(x, 0.0), x * s, x)))


def _variadic(fn: Callable[[PrimExpr, PrimExpr], PrimExpr]):  # type: ignore[no-untyped-def]
    def lower(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
        tensors = [t for t in inputs if t is not None]

        def combine(*values: PrimExpr) -> PrimExpr:
            result = values[0]
            for v in values[1:]:
                result = fn(result, v)
            return result

        return [_map(tensors, combine)]

    return lower


register("Sum", kind="injective")(_variadic(lambda a, b: a + b))
register("Max", kind="injective")(_variadic(max_expr))
register("Min", kind="injective")(_variadic(min_expr))
register("Mean", kind="injective")(
    lambda ctx, inputs: [
        _map(
            [t for t in inputs if t is not None],
            lambda *v: sum(v[1:], v[0]) * _float(v[0], 1.0 / len(v)),
        )
    ]
)


def _unary(fn: Callable[..., PrimExpr], out_dtype: str | None = None):  # type: ignore[no-untyped-def]
    def lower(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
        x = inputs[0]
        return [lazy(x.shape, out_dtype or x.dtype, lambda *i: fn(ctx, x[i] if i else x.load(())))]

    return lower


def _round_half_even(x: PrimExpr) -> PrimExpr:
    half = _float(x, 0.5)
    frac = x - call("floor", x)
    return select(frac.equal(half), _float(x, 2.0) * call("round", x * half), call("round", x))


def _abs(x: PrimExpr) -> PrimExpr:
    return call("abs", x)


UNARY: dict[str, Callable[..., PrimExpr]] = {
    "Relu": lambda c, x: max_expr(x, const(0, str(x.dtype))),
    "Neg": lambda c, x: -x,
    "Abs": lambda c, x: _abs(x),
    "Sqrt": lambda c, x: call("sqrt", x),
    "Reciprocal": lambda c, x: _float(x, 1.0) / x,
    "Exp": lambda c, x: call("exp", x),
    "Log": lambda c, x: call("log", x),
    "Erf": lambda c, x: call("erf", x),
    "Tanh": lambda c, x: call("tanh", x),
    "Sigmoid": lambda c, x: call("sigmoid", x),
    "Floor": lambda c, x: call("floor", x),
    "Ceil": lambda c, x: call("ceil", x),
    "Round": lambda c, x: _round_half_even(x),
    "Sin": lambda c, x: call("sin", x),
    "Cos": lambda c, x: call("cos", x),
    "Softplus": lambda c, x: call("log", call("exp", x) + _float(x, 1.0)),
    "Softsign": lambda c, x: x / (call("abs", x) + _float(x, 1.0)),
    "Sign": lambda c, x: select(x > _float(x, 0), _float(x, 1), select(x < _float(x, 0), _float(x, -1), _float(x, 0))),
    "LeakyRelu": lambda c, x: select(x < _float(x, 0.0), x * _float(x, c.attr("alpha", 0.01)), x),
    "Elu": lambda c, x: select(
        x < _float(x, 0.0), _float(x, c.attr("alpha", 1.0)) * (call("exp", x) - _float(x, 1.0)), x
    ),
    "Selu": lambda c, x: (
        _float(x, c.attr("gamma", 1.05070102214813232421875))
        * select(
            x <= _float(x, 0.0),
            _float(x, c.attr("alpha", 1.67326319217681884765625)) * (call("exp", x) - _float(x, 1.0)),
            x,
        )
    ),
    "HardSigmoid": lambda c, x: max_expr(
        min_expr(x * _float(x, c.attr("alpha", 0.2)) + _float(x, c.attr("beta", 0.5)), _float(x, 1.0)), _float(x, 0.0)
    ),
    "HardSwish": lambda c, x: (
        x * max_expr(min_expr(x * _float(x, 1.0 / 6.0) + _float(x, 0.5), _float(x, 1.0)), _float(x, 0.0))
    ),
    "ThresholdedRelu": lambda c, x: select(x > _float(x, c.attr("alpha", 1.0)), x, _float(x, 0.0)),
    "Gelu": lambda c, x: _gelu(c, x),
}


def _gelu(ctx: OpContext, x: PrimExpr) -> PrimExpr:
    if ctx.attr("approximate", "none") == "tanh":
        inner = _float(x, 0.7978845608028654) * (x + _float(x, 0.044715) * x * x * x)
        return _float(x, 0.5) * x * (_float(x, 1.0) + call("tanh", inner))
    return _float(x, 0.5) * x * (_float(x, 1.0) + call("erf", x * _float(x, 0.7071067811865476)))


for _name, _fn in UNARY.items():
    register(_name, kind="injective")(_unary(_fn))

register("Not", kind="injective")(_unary(lambda c, x: Not(x), "bool"))
register("IsNaN", kind="injective")(_unary(lambda c, x: Call("bool", "isnan", (x,)), "bool"))


@register("Identity", "Dropout", kind="view")
def _identity(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    x = inputs[0]
    return [lazy(x.shape, x.dtype, lambda *i: x[i] if i else x.load(()))]


@register("Cast", kind="injective")
def _cast(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    x = inputs[0]
    to = _ONNX_TO_NP.get(int(ctx.attr("to", 1)))
    if to is None:
        raise ctx.fail(f"Cast to ONNX type {ctx.attr('to')} is not supported")

    def element(*i: PrimExpr) -> PrimExpr:
        v = x[i] if i else x.load(())
        if to == "bool":
            return v.not_equal(const(0, str(v.dtype)))
        return cast(v, to)

    return [lazy(x.shape, to, element)]


@register("Where", kind="injective")
def _where(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    cond, a, b = inputs
    shape_tensors = [cond, a, b]
    return [
        _map(
            shape_tensors,
            lambda c, x, y: select(c if c.dtype.is_bool else c.not_equal(0), x, cast(y, str(x.dtype))),
            a.dtype,
        )
    ]


@register("Clip", kind="injective")
def _clip(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    x = inputs[0]
    if ctx.opset < 11:
        lo, hi = ctx.attr("min"), ctx.attr("max")
        bounds: list[Any] = [
            None if lo is None else lazy((), x.dtype, lambda: const(lo, x.dtype)),
            None if hi is None else lazy((), x.dtype, lambda: const(hi, x.dtype)),
        ]
    else:
        bounds = list(inputs[1:3]) + [None] * (3 - len(inputs))
        bounds = bounds[:2]
    tensors = [x] + [b for b in bounds if b is not None]

    def element(v: PrimExpr, *rest: PrimExpr) -> PrimExpr:
        k = 0
        if bounds[0] is not None:
            v = max_expr(v, rest[k])
            k += 1
        if bounds[1] is not None:
            v = min_expr(v, rest[k])
        return v

    return [_map(tensors, element)]


@register("BatchNormalization", kind="injective")
def _batch_norm(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    x, scale, bias, mean, var = inputs[:5]
    eps = float(ctx.attr("epsilon", 1e-5))
    if ctx.attr("training_mode", 0):
        raise ctx.fail("training_mode=1 is not supported (inference only)")

    def element(*i: PrimExpr) -> PrimExpr:
        c = (i[1],)
        v = x[i]
        return (v - mean[c]) * (scale[c] / call("sqrt", var[c] + _float(v, eps))) + bias[c]

    return [lazy(x.shape, x.dtype, element)]


def np_batch_norm_fold(
    weight: np.ndarray,
    bias: np.ndarray | None,
    scale: np.ndarray,
    beta: np.ndarray,
    mean: np.ndarray,
    var: np.ndarray,
    eps: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Weights and bias of ``BN(conv(x, W, b))`` as one convolution (output channels on axis 0)."""
    factor = (scale / np.sqrt(var + eps)).astype(weight.dtype)
    new_weight = weight * factor.reshape((-1,) + (1,) * (weight.ndim - 1))
    base = bias if bias is not None else np.zeros_like(mean)
    new_bias = ((base - mean) * factor + beta).astype(weight.dtype)
    return new_weight.astype(weight.dtype), new_bias
