"""Expressions.

Every expression has a ``dtype``. Python operators build IR: ``i * 4 + j`` is an ``Add`` of a
``Mul``; comparisons (``<``, ``<=``, ``>``, ``>=``) build comparison nodes, and ``a.equal(b)``
builds ``EQ`` because ``==`` keeps its Python meaning (identity). Python numbers mixed
with expressions take the expression's dtype.
"""

from __future__ import annotations

import enum
import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

from tir.ir.dtype import BOOL, FLOAT32, INT32, DataType, as_dtype
from tir.ir.node import Node

if TYPE_CHECKING:
    from tir.ir.buffer import Buffer

ExprLike = Union["PrimExpr", int, float, bool]


class PrimExpr(Node):
    """Base of all expressions."""

    if TYPE_CHECKING:

        @property
        def dtype(self) -> DataType: ...

    def __bool__(self) -> bool:
        raise TypeError(
            f"an IR expression ({type(self).__name__}) has no Python truth value; "
            "use tir.arith to decide it, or compare with `is` / structural_equal"
        )

    # Arithmetic builds IR nodes; see module docstring.
    def __add__(self, other: ExprLike) -> PrimExpr:
        return _binary(Add, self, other)

    def __radd__(self, other: ExprLike) -> PrimExpr:
        return _binary(Add, other, self)

    def __sub__(self, other: ExprLike) -> PrimExpr:
        return _binary(Sub, self, other)

    def __rsub__(self, other: ExprLike) -> PrimExpr:
        return _binary(Sub, other, self)

    def __mul__(self, other: ExprLike) -> PrimExpr:
        return _binary(Mul, self, other)

    def __rmul__(self, other: ExprLike) -> PrimExpr:
        return _binary(Mul, other, self)

    def __truediv__(self, other: ExprLike) -> PrimExpr:
        return _binary(Div, self, other)

    def __rtruediv__(self, other: ExprLike) -> PrimExpr:
        return _binary(Div, other, self)

    def __floordiv__(self, other: ExprLike) -> PrimExpr:
        return _binary(FloorDiv, self, other)

    def __rfloordiv__(self, other: ExprLike) -> PrimExpr:
        return _binary(FloorDiv, other, self)

    def __mod__(self, other: ExprLike) -> PrimExpr:
        return _binary(FloorMod, self, other)

    def __rmod__(self, other: ExprLike) -> PrimExpr:
        return _binary(FloorMod, other, self)

    def __neg__(self) -> PrimExpr:
        return _binary(Sub, const(0, self.dtype), self)

    def __lt__(self, other: ExprLike) -> PrimExpr:
        return _binary(LT, self, other)

    def __le__(self, other: ExprLike) -> PrimExpr:
        return _binary(LE, self, other)

    def __gt__(self, other: ExprLike) -> PrimExpr:
        return _binary(GT, self, other)

    def __ge__(self, other: ExprLike) -> PrimExpr:
        return _binary(GE, self, other)

    def equal(self, other: ExprLike) -> PrimExpr:
        return _binary(EQ, self, other)

    def not_equal(self, other: ExprLike) -> PrimExpr:
        return _binary(NE, self, other)

    def __str__(self) -> str:
        from tir.script.printer import expr_to_str

        return expr_to_str(self)


# ---------------------------------------------------------------- leaves


@dataclass(frozen=True, eq=False, repr=False)
class Var(PrimExpr):
    """A variable: loop variable, block iterator, scalar parameter. Identity is the object."""

    name: str
    dtype: DataType = INT32

    def __post_init__(self) -> None:
        if not isinstance(self.dtype, DataType):
            object.__setattr__(self, "dtype", as_dtype(self.dtype))

    def __repr__(self) -> str:
        return f"Var({self.name!r}, {str(self.dtype)!r})"


@dataclass(frozen=True, eq=False, repr=False)
class IntImm(PrimExpr):
    """An integer (or bool) constant."""

    value: int
    dtype: DataType = INT32

    def __post_init__(self) -> None:
        if not isinstance(self.dtype, DataType):
            object.__setattr__(self, "dtype", as_dtype(self.dtype))
        if not (self.dtype.is_integer or self.dtype.is_bool) or self.dtype.lanes != 1:
            raise TypeError(f"IntImm needs a scalar integer or bool dtype, got {self.dtype}")
        value = int(self.value)
        lo, hi = self.dtype.min_value(), self.dtype.max_value()
        if not lo <= value <= hi:
            raise ValueError(f"constant {value} does not fit in {self.dtype} [{lo}, {hi}]")
        object.__setattr__(self, "value", value)

    def __repr__(self) -> str:
        return f"IntImm({self.value}, {str(self.dtype)!r})"


@dataclass(frozen=True, eq=False, repr=False)
class FloatImm(PrimExpr):
    """A floating-point constant."""

    value: float
    dtype: DataType = FLOAT32

    def __post_init__(self) -> None:
        if not isinstance(self.dtype, DataType):
            object.__setattr__(self, "dtype", as_dtype(self.dtype))
        if not self.dtype.is_float or self.dtype.lanes != 1:
            raise TypeError(f"FloatImm needs a scalar float dtype, got {self.dtype}")
        object.__setattr__(self, "value", float(self.value))

    def __repr__(self) -> str:
        return f"FloatImm({self.value!r}, {str(self.dtype)!r})"


@dataclass(frozen=True, eq=False, repr=False)
class StringImm(PrimExpr):
    """A string constant (names of external functions, annotations)."""

    value: str

    @property
    def dtype(self) -> DataType:
        return as_dtype("handle")

    def __repr__(self) -> str:
        return f"StringImm({self.value!r})"


# ---------------------------------------------------------------- operators


@dataclass(frozen=True, eq=False, repr=False)
class BinaryOp(PrimExpr):
    """Base of two-operand arithmetic; both operands share one dtype."""

    a: PrimExpr
    b: PrimExpr

    def __post_init__(self) -> None:
        if self.a.dtype != self.b.dtype:
            raise TypeError(
                f"{type(self).__name__} operands have different dtypes: "
                f"{self.a.dtype} and {self.b.dtype}; insert a cast"
            )

    @property
    def dtype(self) -> DataType:
        return self.a.dtype

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.a!r}, {self.b!r})"


class Add(BinaryOp):
    pass


class Sub(BinaryOp):
    pass


class Mul(BinaryOp):
    pass


class Div(BinaryOp):
    """True division for floats; truncating division for integers (C semantics)."""


class FloorDiv(BinaryOp):
    """Integer division rounding towards negative infinity."""


class FloorMod(BinaryOp):
    """Remainder of FloorDiv; has the sign of the divisor."""


class Min(BinaryOp):
    pass


class Max(BinaryOp):
    pass


class CmpOp(BinaryOp):
    """Base of comparisons; the result is bool (with the operands' lanes)."""

    @property
    def dtype(self) -> DataType:
        return BOOL.with_lanes(self.a.dtype.lanes)


class EQ(CmpOp):
    pass


class NE(CmpOp):
    pass


class LT(CmpOp):
    pass


class LE(CmpOp):
    pass


class GT(CmpOp):
    pass


class GE(CmpOp):
    pass


class And(BinaryOp):
    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.a.dtype.is_bool:
            raise TypeError(f"And needs bool operands, got {self.a.dtype}")


class Or(BinaryOp):
    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.a.dtype.is_bool:
            raise TypeError(f"Or needs bool operands, got {self.a.dtype}")


@dataclass(frozen=True, eq=False, repr=False)
class Not(PrimExpr):
    a: PrimExpr

    def __post_init__(self) -> None:
        if not self.a.dtype.is_bool:
            raise TypeError(f"Not needs a bool operand, got {self.a.dtype}")

    @property
    def dtype(self) -> DataType:
        return self.a.dtype

    def __repr__(self) -> str:
        return f"Not({self.a!r})"


@dataclass(frozen=True, eq=False, repr=False)
class Select(PrimExpr):
    """``true_value if condition else false_value``; both sides may be evaluated."""

    condition: PrimExpr
    true_value: PrimExpr
    false_value: PrimExpr

    def __post_init__(self) -> None:
        if not self.condition.dtype.is_bool:
            raise TypeError(f"Select condition must be bool, got {self.condition.dtype}")
        if self.true_value.dtype != self.false_value.dtype:
            raise TypeError(
                f"Select branches have different dtypes: {self.true_value.dtype} and {self.false_value.dtype}"
            )

    @property
    def dtype(self) -> DataType:
        return self.true_value.dtype

    def __repr__(self) -> str:
        return f"Select({self.condition!r}, {self.true_value!r}, {self.false_value!r})"


@dataclass(frozen=True, eq=False, repr=False)
class Cast(PrimExpr):
    """Convert ``value`` to ``dtype`` (same number of lanes)."""

    dtype: DataType
    value: PrimExpr

    def __post_init__(self) -> None:
        if not isinstance(self.dtype, DataType):
            object.__setattr__(self, "dtype", as_dtype(self.dtype))
        if self.dtype.lanes != self.value.dtype.lanes:
            raise TypeError(f"Cast changes lanes: {self.value.dtype} -> {self.dtype}")

    def __repr__(self) -> str:
        return f"Cast({str(self.dtype)!r}, {self.value!r})"


@dataclass(frozen=True, eq=False, repr=False)
class BufferLoad(PrimExpr):
    """``buffer[indices]``. A ``Ramp`` index makes a vector load of its lanes."""

    buffer: Buffer
    indices: tuple[PrimExpr, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.indices, tuple):
            object.__setattr__(self, "indices", tuple(self.indices))

    @property
    def dtype(self) -> DataType:
        lanes = 1
        for index in self.indices:
            lanes *= index.dtype.lanes
        return self.buffer.dtype.with_lanes(self.buffer.dtype.lanes * lanes)

    def __repr__(self) -> str:
        return f"BufferLoad({self.buffer.name}, {list(self.indices)!r})"


@dataclass(frozen=True, eq=False, repr=False)
class Call(PrimExpr):
    """A call of a named operation: math (``exp``), ``if_then_else``, target intrinsics.

    ``op`` is the operation's name as the script writes it after ``T.``; see
    ``tir.ir.ops`` for the known operations.
    """

    dtype: DataType
    op: str
    args: tuple[PrimExpr, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.dtype, DataType):
            object.__setattr__(self, "dtype", as_dtype(self.dtype))
        if not isinstance(self.args, tuple):
            object.__setattr__(self, "args", tuple(self.args))

    def __repr__(self) -> str:
        return f"Call({str(self.dtype)!r}, {self.op!r}, {list(self.args)!r})"


@dataclass(frozen=True, eq=False, repr=False)
class Ramp(PrimExpr):
    """The vector ``[base, base + stride, ..., base + (lanes-1) * stride]``."""

    base: PrimExpr
    stride: PrimExpr
    lanes: int

    def __post_init__(self) -> None:
        if self.lanes < 2:
            raise ValueError(f"Ramp needs at least 2 lanes, got {self.lanes}")
        if self.base.dtype != self.stride.dtype or self.base.dtype.lanes != 1:
            raise TypeError(
                f"Ramp base and stride must be scalars of one dtype: {self.base.dtype}, {self.stride.dtype}"
            )

    @property
    def dtype(self) -> DataType:
        return self.base.dtype.with_lanes(self.lanes)

    def __repr__(self) -> str:
        return f"Ramp({self.base!r}, {self.stride!r}, {self.lanes})"


@dataclass(frozen=True, eq=False, repr=False)
class Broadcast(PrimExpr):
    """``value`` repeated in ``lanes`` lanes."""

    value: PrimExpr
    lanes: int

    def __post_init__(self) -> None:
        if self.lanes < 2:
            raise ValueError(f"Broadcast needs at least 2 lanes, got {self.lanes}")
        if self.value.dtype.lanes != 1:
            raise TypeError(f"Broadcast of a vector {self.value.dtype}")

    @property
    def dtype(self) -> DataType:
        return self.value.dtype.with_lanes(self.lanes)

    def __repr__(self) -> str:
        return f"Broadcast({self.value!r}, {self.lanes})"


@dataclass(frozen=True, eq=False, repr=False)
class Let(PrimExpr):
    """``body`` with ``var`` bound to ``value``."""

    var: Var
    value: PrimExpr
    body: PrimExpr

    @property
    def dtype(self) -> DataType:
        return self.body.dtype

    def __repr__(self) -> str:
        return f"Let({self.var!r}, {self.value!r}, {self.body!r})"


# ---------------------------------------------------------------- helpers


class IterKind(enum.Enum):
    """Kind of a block iterator."""

    SPATIAL = "S"
    REDUCE = "R"
    OPAQUE = "O"


def const(value: int | float | bool, dtype: str | DataType | None = None) -> PrimExpr:
    """An IR constant. Without a dtype: bool -> bool, int -> int32, float -> float32."""
    if dtype is None:
        if isinstance(value, bool):
            dtype = BOOL
        elif isinstance(value, int):
            dtype = INT32 if -(2**31) <= value < 2**31 else as_dtype("int64")
        else:
            dtype = as_dtype("float32")
    dt = as_dtype(dtype)
    if dt.lanes > 1:
        return Broadcast(const(value, dt.element), dt.lanes)
    if dt.is_float:
        return FloatImm(float(value), dt)
    if isinstance(value, float) and not float(value).is_integer():
        raise TypeError(f"cannot make a {dt} constant from the non-integer {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise TypeError(f"cannot make a {dt} constant from {value!r}")
    return IntImm(int(value), dt)


def convert(value: Any, like: DataType | None = None) -> PrimExpr:
    """Turn a Python number (or expression) into an expression, with ``like``'s dtype."""
    if isinstance(value, PrimExpr):
        return value
    if isinstance(value, (bool, int, float)):
        if like is not None and not isinstance(value, bool) and not like.is_bool and not like.is_handle:
            if like.is_integer and isinstance(value, float) and not value.is_integer():
                raise TypeError(f"cannot mix the float {value!r} with a {like} expression")
            return const(value, like)
        return const(value)
    if getattr(getattr(value, "dtype", None), "kind", None) == "b":
        return convert(bool(value), like)  # a numpy bool
    if hasattr(type(value), "__index__"):
        # An integer-like object (a schedule's sampled ExprRV, a numpy integer): its value.
        return convert(operator.index(value), like)
    raise TypeError(f"cannot convert {type(value).__name__} {value!r} to an IR expression")


def _binary(cls: type[BinaryOp], a: ExprLike, b: ExprLike) -> PrimExpr:
    if isinstance(a, PrimExpr):
        b = convert(b, a.dtype)
    elif isinstance(b, PrimExpr):
        a = convert(a, b.dtype)
    else:
        a, b = convert(a), convert(b)
    assert isinstance(a, PrimExpr) and isinstance(b, PrimExpr)
    if a.dtype.lanes != b.dtype.lanes:
        if a.dtype.lanes == 1:
            a = Broadcast(a, b.dtype.lanes)
        elif b.dtype.lanes == 1:
            b = Broadcast(b, a.dtype.lanes)
    return cls(a, b)


def is_const_int(expr: Any, value: int | None = None) -> bool:
    """Whether ``expr`` is an integer constant (equal to ``value`` when given)."""
    return isinstance(expr, IntImm) and (value is None or expr.value == value)


def as_int(expr: PrimExpr) -> int | None:
    """The value of an integer constant, or None."""
    return expr.value if isinstance(expr, IntImm) else None


def min_expr(a: ExprLike, b: ExprLike) -> PrimExpr:
    return _binary(Min, a, b)


def max_expr(a: ExprLike, b: ExprLike) -> PrimExpr:
    return _binary(Max, a, b)


def logical_and(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    return And(a, b)


def logical_or(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    return Or(a, b)


def conjuncts(condition: PrimExpr) -> list[PrimExpr]:
    """The operands of a chain of ``and`` (nested either way), in order; a constant true
    condition gives none (the inverse of ``conjunction``)."""
    if isinstance(condition, And):
        return conjuncts(condition.a) + conjuncts(condition.b)
    if isinstance(condition, IntImm) and condition.value != 0:
        return []
    return [condition]


def conjunction(conditions: Sequence[PrimExpr]) -> PrimExpr:
    """``c0 and c1 and ...`` folded from the left; ``True`` for no condition."""
    result: PrimExpr | None = None
    for condition in conditions:
        result = condition if result is None else And(result, condition)
    return const(True) if result is None else result
