"""Elementwise and broadcasting operators: arithmetic (Mod, BitShift included), math functions
(the inverse trigonometric and hyperbolic ones from exp / log / sqrt and a rational arctangent,
in float64), activations, comparisons, IsNaN / IsInf, Where, Clip, Cast / CastLike, Identity,
and inference-mode BatchNormalization. All return lazy tensors."""

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
from tir.ir import Call, Not, PrimExpr, as_dtype, const
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


@register("Mod", kind="injective")
def _mod(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    a, b = inputs[0], inputs[1]
    fmod = bool(ctx.attr("fmod", 0))
    if a.dtype.startswith("float") and not fmod:
        raise ctx.fail("fmod=0 on floating-point inputs (ONNX requires fmod=1 for them)")

    def element(x: PrimExpr, y: PrimExpr) -> PrimExpr:
        if x.dtype.is_float:
            # C's fmod: the sign of the dividend. In float64, x - trunc(x / y) * y is exact for
            # float32 operands whose quotient has fewer than 29 bits.
            wide = "float64"
            xw, yw = cast(x, wide), cast(y, wide)
            return cast(xw - call("trunc", xw / yw) * yw, str(x.dtype))
        floor = x % y  # the sign of the divisor (Python's %)
        if not fmod:
            return floor
        differ = _xor(x < 0, y < 0)
        return select(And(floor.not_equal(0), differ), floor - y, floor)

    return [_map([a, b], element)]


@register("BitShift", kind="injective")
def _bit_shift(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    a, b = inputs[0], inputs[1]
    direction = ctx.attr("direction")
    if direction not in ("LEFT", "RIGHT"):
        raise ctx.fail(f"direction={direction!r} (LEFT or RIGHT)")
    if not a.dtype.startswith("uint"):
        raise ctx.fail(f"BitShift takes unsigned integers, got {a.dtype}")
    bits = np.dtype(a.dtype).itemsize * 8

    def element(x: PrimExpr, y: PrimExpr) -> PrimExpr:
        # 2 ** y from y's binary digits (the IR has no shifts); unsigned products wrap.
        dtype = str(x.dtype)
        power: PrimExpr = const(1, dtype)
        for bit in range(bits.bit_length() - 1):
            digit = (y // (1 << bit)) % 2
            power = power * select(digit.equal(1), const(1 << (1 << bit), dtype), const(1, dtype))
        return x * power if direction == "LEFT" else x // power

    return [_map([a, b], element)]


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


# ---------------------------------------------------------------- functions built from others
# The IR's math calls stop at exp / log / sqrt / sin / cos / tanh / erf; the inverse
# trigonometric and hyperbolic functions are composed from them in float64 (where the
# cancellations of the compositions cost float32 nothing) and rounded back.

_WIDE = "float64"


def _f64(v: float) -> PrimExpr:
    return const(v, _WIDE)


def _in_float64(fn: Callable[[PrimExpr], PrimExpr]) -> Callable[..., PrimExpr]:
    def lower(ctx: OpContext, x: PrimExpr) -> PrimExpr:
        return cast(fn(cast(x, _WIDE)), str(x.dtype))

    return lower


def _polynomial(z: PrimExpr, coefficients: tuple[float, ...], monic: bool = False) -> PrimExpr:
    """Horner's rule, highest power first (a leading 1 when ``monic``)."""
    value = z + _f64(coefficients[0]) if monic else _f64(coefficients[0])
    for c in coefficients[1:]:
        value = value * z + _f64(c)
    return value


# Cephes' atan (double precision): a rational approximation on [0, 0.66] after reducing the
# argument with atan(x) = pi/2 - atan(1/x) above tan(3 pi / 8) and pi/4 + atan((x-1)/(x+1)) above 0.66.
_ATAN_P = (
    -8.750608600031904122785e-1,
    -1.615753718733365076637e1,
    -7.500855792314704667340e1,
    -1.228866684490136173410e2,
    -6.485021904942025371773e1,
)
_ATAN_Q = (
    2.485846490142306297962e1,
    1.650270098316988542046e2,
    4.328810604912902668951e2,
    4.853903996359136964868e2,
    1.945506571482613964425e2,
)
_MOREBITS = 6.123233995736765886130e-17


def _atan64(x: PrimExpr) -> PrimExpr:
    ax = call("abs", x)
    big = ax > _f64(2.41421356237309504880)
    mid = ax > _f64(0.66)
    reduced = select(big, _f64(-1.0) / ax, select(mid, (ax - _f64(1.0)) / (ax + _f64(1.0)), ax))
    base = select(big, _f64(np.pi / 2), select(mid, _f64(np.pi / 4), _f64(0.0)))
    extra = select(big, _f64(_MOREBITS), select(mid, _f64(0.5 * _MOREBITS), _f64(0.0)))
    z = reduced * reduced
    ratio = z * _polynomial(z, _ATAN_P) / _polynomial(z, _ATAN_Q, monic=True)
    value = base + (reduced * ratio + reduced) + extra
    return select(x < _f64(0.0), -value, value)


def _small(x: PrimExpr, series: PrimExpr, general: PrimExpr) -> PrimExpr:
    """``series`` (a Taylor polynomial) where |x| < 1e-4, where ``general`` cancels."""
    return select(call("abs", x) < _f64(1e-4), series, general)


def _sinh64(x: PrimExpr) -> PrimExpr:
    e = call("exp", x)
    return _small(x, x + x * x * x * _f64(1.0 / 6.0), (e - _f64(1.0) / e) * _f64(0.5))


def _cosh64(x: PrimExpr) -> PrimExpr:
    e = call("exp", x)
    return (e + _f64(1.0) / e) * _f64(0.5)


def _asinh64(x: PrimExpr) -> PrimExpr:
    ax = call("abs", x)
    value = call("log", ax + call("sqrt", ax * ax + _f64(1.0)))
    return _small(x, x - x * x * x * _f64(1.0 / 6.0), select(x < _f64(0.0), -value, value))


def _acosh64(x: PrimExpr) -> PrimExpr:
    return call("log", x + call("sqrt", (x - _f64(1.0)) * (x + _f64(1.0))))


def _atanh64(x: PrimExpr) -> PrimExpr:
    one = _f64(1.0)
    general = _f64(0.5) * call("log", (one + x) / (one - x))
    return _small(x, x + x * x * x * _f64(1.0 / 3.0), general)


def _asin64(x: PrimExpr) -> PrimExpr:
    one = _f64(1.0)
    return _atan64(x / call("sqrt", (one - x) * (one + x)))


def _acos64(x: PrimExpr) -> PrimExpr:
    one = _f64(1.0)
    return _f64(2.0) * _atan64(call("sqrt", (one - x) / (one + x)))


def _shrink(ctx: OpContext, x: PrimExpr) -> PrimExpr:
    bias, lambd = float(ctx.attr("bias", 0.0)), float(ctx.attr("lambd", 0.5))
    dtype = str(x.dtype)
    # Integer inputs compare and shift in floating point, as onnxruntime does, then truncate.
    v = x if x.dtype.is_float else cast(x, _WIDE)
    wide = str(v.dtype)
    out = select(
        v < const(-lambd, wide),
        v + const(bias, wide),
        select(v > const(lambd, wide), v - const(bias, wide), const(0.0, wide)),
    )
    return cast(out, dtype)


def _celu(ctx: OpContext, x: PrimExpr) -> PrimExpr:
    alpha = float(ctx.attr("alpha", 1.0))
    zero = _float(x, 0.0)
    negative = _float(x, alpha) * (call("exp", x * _float(x, 1.0 / alpha)) - _float(x, 1.0))
    return max_expr(x, zero) + min_expr(negative, zero)


def _mish(ctx: OpContext, x: PrimExpr) -> PrimExpr:
    return x * call("tanh", call("log", call("exp", x) + _float(x, 1.0)))


def _is_inf(ctx: OpContext, x: PrimExpr) -> PrimExpr:
    positive, negative = bool(ctx.attr("detect_positive", 1)), bool(ctx.attr("detect_negative", 1))
    tests = []
    if positive:
        tests.append(x.equal(_float(x, float("inf"))))
    if negative:
        tests.append(x.equal(_float(x, float("-inf"))))
    if not tests:
        return const(False, "bool")
    return tests[0] if len(tests) == 1 else Or(tests[0], tests[1])


UNARY.update(
    {
        "Tan": _in_float64(lambda w: call("sin", w) / call("cos", w)),
        "Asin": _in_float64(_asin64),
        "Acos": _in_float64(_acos64),
        "Atan": _in_float64(_atan64),
        "Sinh": _in_float64(_sinh64),
        "Cosh": _in_float64(_cosh64),
        "Asinh": _in_float64(_asinh64),
        "Acosh": _in_float64(_acosh64),
        "Atanh": _in_float64(_atanh64),
        "Shrink": _shrink,
        "Celu": _celu,
        "Mish": _mish,
    }
)


def _gelu(ctx: OpContext, x: PrimExpr) -> PrimExpr:
    if ctx.attr("approximate", "none") == "tanh":
        inner = _float(x, 0.7978845608028654) * (x + _float(x, 0.044715) * x * x * x)
        return _float(x, 0.5) * x * (_float(x, 1.0) + call("tanh", inner))
    return _float(x, 0.5) * x * (_float(x, 1.0) + call("erf", x * _float(x, 0.7071067811865476)))


for _name, _fn in UNARY.items():
    register(_name, kind="injective")(_unary(_fn))

register("Not", kind="injective")(_unary(lambda c, x: Not(x), "bool"))
register("IsNaN", kind="injective")(_unary(lambda c, x: Call(as_dtype("bool"), "isnan", (x,)), "bool"))
register("IsInf", kind="injective")(_unary(_is_inf, "bool"))


@register("Identity", "Dropout", kind="view")
def _identity(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    x = inputs[0]
    return [lazy(x.shape, x.dtype, lambda *i: x[i] if i else x.load(()))]


@register("Cast", "CastLike", kind="injective")
def _cast(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    x = inputs[0]
    if ctx.op_type == "CastLike":
        to: str | None = inputs[1].dtype
    else:
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
