"""An LLVM IR builder that emits each pure integer computation once per dominating region.

Scheduled programs repeat the same index arithmetic in every statement of an unrolled register
tile: ``fused // 4 * 28672 + h_2 * 14336 + ...`` (a fused parallel loop decomposed by division
and modulo, then multiplied by strides) appears once per access, and an unrolled 4 x 4 tile has
dozens of accesses. The code generator emitted it each time and left LLVM's instcombine, GVN and
induction-variable passes to merge the copies: most of a candidate's LLVM time went into undoing
repetition (a conv2d candidate: ~3,100 lines of IR, ~180 ``udiv``).

``NumberingBuilder`` is ``llvmlite.ir.IRBuilder`` with local value numbering: an integer,
pointer or integer-vector instruction without side effects (arithmetic, comparisons, casts,
``getelementptr``, ``select``, vector element operations) whose operation, operands and flags
match one emitted before is not emitted again -- the earlier one is returned, if its block
dominates the insertion point. The code generator says which blocks do: it keeps the
builder's list of dominating blocks up to date at the constructs it generates (a loop's header
and body while inside it, its header and exit after it; an ``if``'s branch while inside it,
the merge block after it) through ``mark``, ``entered`` and ``restore``. A construct that
does not declare its blocks only loses reuse: values made in an undeclared block are never
reused, and the blocks on the list still dominate everything nested in it.

Floating-point operations are not numbered (their flags, ``contract`` say, are part of what
the code means), nor are loads, stores, calls or phis.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llvmlite import ir

__all__ = ["NumberingBuilder"]

_PURE_OPERATIONS = (
    "add",
    "sub",
    "mul",
    "sdiv",
    "udiv",
    "srem",
    "urem",
    "shl",
    "lshr",
    "ashr",
    "and_",
    "or_",
    "xor",
    "not_",
    "neg",
    "icmp_signed",
    "icmp_unsigned",
    "sext",
    "zext",
    "trunc",
    "ptrtoint",
    "inttoptr",
    "gep",
    "select",
    "extract_element",
    "insert_element",
    "shuffle_vector",
)


def _numbered_result(type_: ir.Type) -> bool:
    """Integer, pointer and integer-vector results are numbered; floating point is not."""
    if isinstance(type_, ir.VectorType):
        type_ = type_.element
    return isinstance(type_, (ir.IntType, ir.PointerType))


class NumberingBuilder(ir.IRBuilder):
    """``ir.IRBuilder`` that reuses an equal pure integer instruction from a dominating block."""

    def __init__(self, block: ir.Block) -> None:
        super().__init__(block)
        self._dominating: list[ir.Block] = [block]
        self._dominating_ids: set[int] = {id(block)}
        self._numbered: dict[tuple[Any, ...], ir.Instruction] = {}

    # ------------------------------------------------------------ dominance, as the caller declares it

    def mark(self) -> int:
        """A point to ``restore`` the list of dominating blocks to when a construct is left."""
        return len(self._dominating)

    def entered(self, block: ir.Block | None = None) -> None:
        """``block`` (default: the insertion block) is dominated by every block declared so far,
        and the code emitted from now on is dominated by it."""
        block = self.block if block is None else block
        if id(block) not in self._dominating_ids:
            self._dominating.append(block)
            self._dominating_ids.add(id(block))

    def restore(self, mark: int) -> None:
        """Forget the blocks declared since ``mark``: the code emitted next is not inside them."""
        for block in self._dominating[mark:]:
            self._dominating_ids.discard(id(block))
        del self._dominating[mark:]

    # ------------------------------------------------------------ numbering

    def _available(self, instruction: ir.Instruction) -> bool:
        parent = instruction.parent
        if id(parent) not in self._dominating_ids:
            return False
        # In the insertion block, only an instruction before the insertion point dominates it.
        return parent is not self.block or self._anchor == len(self.block.instructions)


def _type_key(type_: ir.Type) -> Any:
    if isinstance(type_, ir.IntType):
        return type_.width
    if isinstance(type_, ir.VectorType):
        return ("vector", type_.count, _type_key(type_.element))
    return str(type_)


def _constant_key(constant: Any) -> Any:
    if isinstance(constant, (list, tuple)):
        return tuple(_constant_key(item) for item in constant)
    if isinstance(constant, ir.Constant):
        return (_type_key(constant.type), _constant_key(constant.constant))
    if isinstance(constant, float):
        return ("float", constant.hex())  # -0.0 and 0.0 differ, a NaN equals itself
    if isinstance(constant, int):
        return (type(constant), constant)  # 1 and True hash alike
    return str(constant)  # undef, and anything else llvmlite may hold


def _operand_key(value: Any) -> Any:
    # Keys are built for every pure instruction the code generator asks for: formatting each
    # constant as LLVM text was a fifth of the code generator's time.
    if isinstance(value, ir.Constant):
        return ("constant", _type_key(value.type), _constant_key(value.constant))
    if isinstance(value, ir.Type):
        return ("type", _type_key(value))
    if isinstance(value, (list, tuple)):
        return tuple(_operand_key(item) for item in value)
    if isinstance(value, (str, int, bool, type(None))):
        return value
    return ("value", id(value))  # an instruction or argument: the builder keeps it alive


def _numbering(operation: str) -> Callable[..., Any]:
    emit = getattr(ir.IRBuilder, operation)

    def numbered(self: NumberingBuilder, *args: Any, **kwargs: Any) -> Any:
        options = tuple(sorted((k, _operand_key(v)) for k, v in kwargs.items() if k != "name"))
        key = (operation, _operand_key(args), options)
        found = self._numbered.get(key)
        if found is not None and self._available(found):
            return found
        result = emit(self, *args, **kwargs)
        if isinstance(result, ir.Instruction) and _numbered_result(result.type):
            self._numbered[key] = result
        return result

    numbered.__name__ = operation
    numbered.__doc__ = emit.__doc__
    return numbered


for _operation in _PURE_OPERATIONS:
    setattr(NumberingBuilder, _operation, _numbering(_operation))
