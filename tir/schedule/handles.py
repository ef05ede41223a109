"""Handles (random variables, in TVM's words) that name parts of a scheduled program.

- ``BlockRV`` names a block by its name; it stays valid while a block of that name exists.
- ``LoopRV`` names a loop by its loop variable; primitives that keep a loop keep its variable,
  so the handle stays valid; a loop replaced (by ``split``, ``fuse``) invalidates its handles.
- ``ExprRV`` holds a sampled integer (a tile size, a categorical choice). It takes part in
  integer arithmetic (``j1 * j2``, ``j // j1`` in an index map) as the integer it holds: the
  result is a plain int (or an expression, with a Var), so a trace records the value that was
  used, not the handle.

Handles print as ``b0``, ``l1``, ``v2``: the names the trace uses.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tir.ir import Var


@dataclass(eq=False)
class BlockRV:
    block_name: str
    rv_name: str = field(default="b?", compare=False)
    owner: object = field(default=None, compare=False, repr=False)  # the Schedule lineage that made it

    def __repr__(self) -> str:
        return f"{self.rv_name}(block {self.block_name!r})"


@dataclass(eq=False)
class LoopRV:
    loop_var: Var
    rv_name: str = field(default="l?", compare=False)
    owner: object = field(default=None, compare=False, repr=False)

    def __repr__(self) -> str:
        return f"{self.rv_name}(loop {self.loop_var.name})"


@dataclass(eq=False)
class ExprRV:
    value: int
    rv_name: str = field(default="v?", compare=False)
    owner: object = field(default=None, compare=False, repr=False)

    def __int__(self) -> int:
        return self.value

    def __index__(self) -> int:
        return self.value

    def __repr__(self) -> str:
        return f"{self.rv_name}(= {self.value})"

    # Integer arithmetic with ints and other ExprRVs; with an expression (a Var), the
    # expression's reflected operator takes the value (``convert`` reads ``__index__``).
    def __add__(self, other: object) -> int:
        return self.value + _int_operand(other) if _is_int_operand(other) else NotImplemented

    def __radd__(self, other: object) -> int:
        return _int_operand(other) + self.value if _is_int_operand(other) else NotImplemented

    def __sub__(self, other: object) -> int:
        return self.value - _int_operand(other) if _is_int_operand(other) else NotImplemented

    def __rsub__(self, other: object) -> int:
        return _int_operand(other) - self.value if _is_int_operand(other) else NotImplemented

    def __mul__(self, other: object) -> int:
        return self.value * _int_operand(other) if _is_int_operand(other) else NotImplemented

    def __rmul__(self, other: object) -> int:
        return _int_operand(other) * self.value if _is_int_operand(other) else NotImplemented

    def __floordiv__(self, other: object) -> int:
        return self.value // _int_operand(other) if _is_int_operand(other) else NotImplemented

    def __rfloordiv__(self, other: object) -> int:
        return _int_operand(other) // self.value if _is_int_operand(other) else NotImplemented

    def __mod__(self, other: object) -> int:
        return self.value % _int_operand(other) if _is_int_operand(other) else NotImplemented

    def __rmod__(self, other: object) -> int:
        return _int_operand(other) % self.value if _is_int_operand(other) else NotImplemented

    def __neg__(self) -> int:
        return -self.value


def _is_int_operand(value: object) -> bool:
    return isinstance(value, ExprRV) or (isinstance(value, int) and not isinstance(value, bool))


def _int_operand(value: object) -> int:
    return value.value if isinstance(value, ExprRV) else int(value)  # type: ignore[call-overload]


RV = BlockRV | LoopRV | ExprRV
