"""Small value rules shared by the parser and the printer.

How values are described in error messages, the zero and one constants of a dtype, and
``extent_of``: how ``[lo, hi)`` becomes an extent, which the printer relies on to write ranges
that parse back exactly.
"""

from __future__ import annotations

from typing import Any

from tir.ir.buffer import Buffer, BufferRegion
from tir.ir.dtype import DataType
from tir.ir.expr import Add, Broadcast, FloatImm, IntImm, PrimExpr, Sub, Var
from tir.ir.structural import structural_equal
from tir.script import dialect

Number = bool | int | float


def is_number(value: Any) -> bool:
    return isinstance(value, (bool, int, float))


def describe(value: Any) -> str:
    """A short phrase for a value in an error message."""
    if isinstance(value, Buffer):
        return f"the buffer '{value.name}'"
    if isinstance(value, dialect.Marker):
        return f"T.{value.name}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, tuple):
        return "a tuple"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a dict"
    if value is None:
        return "None"
    if isinstance(value, BufferRegion):
        return "a buffer region"
    if isinstance(value, (bool, int, float)):
        return f"the number {value!r}"
    if isinstance(value, Var):
        return f"the variable '{value.name}'"
    if isinstance(value, PrimExpr):
        return f"{a_dtype(value.dtype)} expression"
    return f"a Python {type(value).__name__}"


def a_dtype(dtype: DataType | str) -> str:
    """``"an int32"``, ``"a float32"``: the dtype with its article."""
    text = str(dtype)
    return f"an {text}" if text.startswith("int") else f"a {text}"


def zero(dtype: DataType) -> PrimExpr:
    scalar = FloatImm(0.0, dtype.element) if dtype.is_float else IntImm(0, dtype.element)
    return Broadcast(scalar, dtype.lanes) if dtype.lanes > 1 else scalar


def one(dtype: DataType) -> PrimExpr:
    return IntImm(1, dtype) if not dtype.is_float else FloatImm(1.0, dtype)


def _simplify(expr: PrimExpr) -> PrimExpr:
    """``tir.arith.simplify.simplify`` when that module exists; the expression itself otherwise."""
    try:
        from tir.arith.simplify import simplify
    except ImportError:
        return expr
    try:
        return simplify(expr)
    except Exception:  # the simplifier is an optimisation here, never a reason to fail a parse
        return expr


def extent_of(lo: PrimExpr, hi: PrimExpr) -> PrimExpr:
    """The extent of ``[lo, hi)`` for integer expressions of one dtype, exact where the text allows.

    ``hi`` written as ``lo + e`` gives ``e`` itself (that is how the printer writes ranges);
    constants fold; a zero ``lo`` gives ``hi``; otherwise ``hi - lo``, simplified. The printer
    uses this very function to decide how to write a range.
    """
    if isinstance(hi, Add) and structural_equal(hi.a, lo):
        return hi.b
    if isinstance(lo, IntImm) and isinstance(hi, IntImm):
        return IntImm(hi.value - lo.value, lo.dtype)
    if isinstance(lo, IntImm) and lo.value == 0:
        return hi
    return _simplify(Sub(hi, lo))
