"""Constant folding for every dtype: integers wrap to their width, floats round to theirs.

``fold_binary`` / ``fold_compare`` / ``fold_cast`` take Python values and return the folded
Python value, or None when the result is undefined (division by zero, an out-of-range
float-to-int conversion) and the expression must be kept.
"""

from __future__ import annotations

import math

from tir.ir.dtype import BOOL, DataType
from tir.ir.expr import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mul,
    PrimExpr,
    Sub,
)

INF = float("inf")


def wrap_int(value: int, dtype: DataType) -> int:
    """``value`` reduced to the range of the integer ``dtype`` (two's complement wrap)."""
    if dtype.is_bool:
        return 1 if value else 0
    bits = dtype.bits
    if dtype.is_uint:
        return value % (1 << bits)
    half = 1 << (bits - 1)
    return (value + half) % (1 << bits) - half


# (precision in bits including the implicit one, smallest normal exponent, largest finite value)
_FLOAT_FORMATS: dict[tuple[str, int], tuple[int, int, float]] = {
    ("float", 16): (11, -14, 65504.0),
    ("bfloat", 16): (8, -126, (2 - 2**-7) * 2.0**127),
    ("float", 32): (24, -126, (2 - 2**-23) * 2.0**127),
}


def fold_constant_float(value: float, dtype: DataType) -> float:
    """``value`` rounded (to nearest, ties to even) to the float ``dtype``'s precision."""
    fmt = _FLOAT_FORMATS.get((dtype.kind, dtype.bits))
    if fmt is None or value == 0 or not math.isfinite(value):
        return value
    precision, min_exponent, max_finite = fmt
    _, exponent = math.frexp(value)  # value = m * 2**exponent with 0.5 <= |m| < 1
    quantum_exponent = max(exponent - 1, min_exponent) - (precision - 1)
    rounded = math.ldexp(round(math.ldexp(value, -quantum_exponent)), quantum_exponent)
    if abs(rounded) > max_finite:
        return math.copysign(INF, value)
    return rounded


def _truncdiv(a: int, b: int) -> int:
    quotient = abs(a) // abs(b)
    return quotient if (a >= 0) == (b > 0) else -quotient


def fold_int_binary(cls: type, a: int, b: int, dtype: DataType) -> int | None:
    """The value of ``cls(a, b)`` on integer constants, wrapped to dtype; None when undefined."""
    if cls is Add:
        value = a + b
    elif cls is Sub:
        value = a - b
    elif cls is Mul:
        value = a * b
    elif cls is FloorDiv:
        if b == 0:
            return None
        value = a // b
    elif cls is FloorMod:
        if b == 0:
            return None
        value = a % b
    elif cls is Div:
        if b == 0:
            return None
        value = _truncdiv(a, b)
    elif cls is Min:
        value = min(a, b)
    elif cls is Max:
        value = max(a, b)
    else:
        return None
    return wrap_int(value, dtype)


def fold_float_binary(cls: type, a: float, b: float, dtype: DataType) -> float | None:
    a, b = fold_constant_float(a, dtype), fold_constant_float(b, dtype)
    if cls is Add:
        value = a + b
    elif cls is Sub:
        value = a - b
    elif cls is Mul:
        value = a * b
    elif cls is Div:
        if b == 0:
            return None  # keep the IEEE inf / nan of a division by zero visible
        value = a / b
    elif cls in (Min, Max):
        if math.isnan(a) or math.isnan(b):
            return None
        value = min(a, b) if cls is Min else max(a, b)
    else:
        return None
    return fold_constant_float(value, dtype)


CMP_FOLD = {
    LT: lambda a, b: a < b,
    LE: lambda a, b: a <= b,
    GT: lambda a, b: a > b,
    GE: lambda a, b: a >= b,
    EQ: lambda a, b: a == b,
    NE: lambda a, b: a != b,
}


def widens(wide: DataType, narrow: DataType) -> bool:
    """Whether every value of the integer ``narrow`` is a value of the integer ``wide``."""
    if not (wide.is_integer and narrow.is_integer):
        return False
    if wide.is_int and narrow.is_int:
        return wide.bits >= narrow.bits
    if wide.is_int and narrow.is_uint:
        return wide.bits > narrow.bits
    if wide.is_uint and narrow.is_uint:
        return wide.bits >= narrow.bits
    return False


def fold_cast(value: IntImm | FloatImm, target: DataType) -> PrimExpr | None:
    if target.is_bool:
        return IntImm(int(value.value != 0), BOOL)
    if target.is_integer:
        if isinstance(value, FloatImm):
            if not math.isfinite(value.value):
                return None
            truncated = math.trunc(value.value)
            if not target.min_value() <= truncated <= target.max_value():
                return None  # out-of-range float -> int conversion is undefined: keep it
            return IntImm(truncated, target)
        return IntImm(wrap_int(value.value, target), target)
    if target.is_float:
        try:
            return FloatImm(fold_constant_float(float(value.value), target), target)
        except OverflowError:
            return None
    return None
