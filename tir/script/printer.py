"""The script printer: IR -> script text that ``tir.parse`` reads back to an equal program.

Conventions (docs/dialect.md): four-space indentation, ``@T.script`` header, nested serial
loops as ``T.grid``, blocks with ``T.remap`` where every iterator is a plain loop variable,
``T.reads`` / ``T.writes`` always, minimal parentheses by Python precedence. Variables and
buffers that share a name but are different objects get distinct names (``i_1``, ``i_2``)
while both are in scope; a name is free again once its owner's scope ends.
"""

from __future__ import annotations

import json
import keyword
import math
import re
from typing import Any

from tir.ir.buffer import Buffer, BufferRegion, IterVar, MatchBufferRegion, Range
from tir.ir.constant import constant_text
from tir.ir.dtype import DataType, as_dtype
from tir.ir.expr import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    BinaryOp,
    Broadcast,
    BufferLoad,
    Call,
    Cast,
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    IterKind,
    Let,
    Max,
    Min,
    Mul,
    Not,
    Or,
    PrimExpr,
    Ramp,
    Select,
    StringImm,
    Sub,
    Var,
)
from tir.ir.function import CONSTANTS_ATTR, IRModule, PrimFunc
from tir.ir.functor import IRVisitor, post_order_visit
from tir.ir.node import Node
from tir.ir.ops import get_op
from tir.ir.stmt import (
    Allocate,
    Block,
    BlockRealize,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    SeqStmt,
    Stmt,
)
from tir.ir.structural import structural_equal
from tir.script.rules import extent_of

INDENT = "    "

# Python operator precedence (higher binds tighter).
PREC_ATOM = 100
PREC_UNARY = 12
PREC_MUL = 11
PREC_ADD = 10
PREC_CMP = 5
PREC_NOT = 4
PREC_AND = 3
PREC_OR = 2

_BINARY: dict[type, tuple[str, int]] = {
    Add: ("+", PREC_ADD),
    Sub: ("-", PREC_ADD),
    Mul: ("*", PREC_MUL),
    FloorDiv: ("//", PREC_MUL),
    FloorMod: ("%", PREC_MUL),
    EQ: ("==", PREC_CMP),
    NE: ("!=", PREC_CMP),
    LT: ("<", PREC_CMP),
    LE: ("<=", PREC_CMP),
    GT: (">", PREC_CMP),
    GE: (">=", PREC_CMP),
    And: ("and", PREC_AND),
    Or: ("or", PREC_OR),
}
_FOR_KIND_NAMES = {
    ForKind.SERIAL: "serial",
    ForKind.PARALLEL: "parallel",
    ForKind.VECTORIZED: "vectorized",
    ForKind.UNROLLED: "unroll",
    ForKind.THREAD_BINDING: "thread_binding",
}
_AXIS_NAMES = {IterKind.SPATIAL: "spatial_axis", IterKind.REDUCE: "reduce_axis", IterKind.OPAQUE: "opaque_axis"}
_RESERVED = {"T", "range", "True", "False", "None"}
_DEFAULT_DTYPES = {"int32", "float32", "bool"}


def _string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _sanitize(name: str) -> str:
    name = re.sub(r"\W", "_", name) or "v"
    if name[0].isdigit():
        name = "v" + name
    if keyword.iskeyword(name) or name in _RESERVED:
        name += "_"
    return name


def _is_const(expr: PrimExpr) -> bool:
    return isinstance(expr, (IntImm, FloatImm))


def _is_zero(expr: PrimExpr, dtype: DataType | None = None) -> bool:
    return isinstance(expr, IntImm) and expr.value == 0 and (dtype is None or expr.dtype == dtype)


def _is_true(expr: PrimExpr) -> bool:
    return isinstance(expr, IntImm) and expr.dtype.is_bool and expr.value == 1


class _Namer:
    """Printed names: unique among the names in scope; released when a scope ends."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self.taken: set[str] = set()
        self.frames: list[list[int]] = [[]]
        self.keep: list[Any] = []

    def push(self) -> None:
        self.frames.append([])

    def pop(self) -> None:
        for key in self.frames.pop():
            name = self.names.pop(key, None)
            if name is not None:
                self.taken.discard(name)

    def define(self, obj: Var | Buffer) -> str:
        base = _sanitize(obj.name)
        name, count = base, 0
        while name in self.taken:
            count += 1
            name = f"{base}_{count}"
        old = self.names.get(id(obj))
        if old is not None:
            self.taken.discard(old)
        self.names[id(obj)] = name
        self.taken.add(name)
        self.frames[-1].append(id(obj))
        self.keep.append(obj)
        return name

    def define_global(self, obj: Var | Buffer) -> str:
        frames, self.frames = self.frames, self.frames[:1]
        try:
            return self.define(obj)
        finally:
            frames[0] = self.frames[0]
            self.frames = frames

    def name(self, obj: Var | Buffer) -> str:
        found = self.names.get(id(obj))
        return found if found is not None else self.define_global(obj)


class _Definitions(IRVisitor):
    """Variables a function defines (loops, iterators, lets) and all variables it uses."""

    def __init__(self) -> None:
        self.defined: set[int] = set()
        self.used: list[Var] = []
        self.seen: set[int] = set()

    def visit_Var(self, var: Var) -> None:
        if id(var) not in self.seen:
            self.seen.add(id(var))
            self.used.append(var)

    def visit_For(self, node: For) -> None:
        self.defined.add(id(node.loop_var))
        self.generic_visit(node)

    def visit_IterVar(self, node: IterVar) -> None:
        self.defined.add(id(node.var))
        self.generic_visit(node)

    def visit_LetStmt(self, node: LetStmt) -> None:
        self.defined.add(id(node.var))
        self.generic_visit(node)

    def visit_Let(self, node: Let) -> None:
        self.defined.add(id(node.var))
        self.generic_visit(node)


class ScriptPrinter:
    """Prints functions, statements and expressions; one instance per printed unit."""

    def __init__(self) -> None:
        self.namer = _Namer()
        self.lines: list[str] = []
        self.depth = 0
        self.loops: dict[int, For] = {}  # enclosing loops by id(loop_var), for T.remap
        self.constants: dict[Buffer, tuple[int | float, ...]] = {}  # T.allocate_const of the function

    # ------------------------------------------------------------------ output

    def line(self, text: str) -> None:
        self.lines.append(INDENT * self.depth + text)

    def text(self) -> str:
        return "\n".join(self.lines)

    # ------------------------------------------------------------------ constants

    def const(self, expr: IntImm | FloatImm, bare: bool = False) -> tuple[str, int]:
        """A constant: a bare literal for int32/float32/bool (or when ``bare``), else typed."""
        dtype = str(expr.dtype)
        if isinstance(expr, IntImm):
            if expr.dtype.is_bool:
                return ("True" if expr.value else "False"), PREC_ATOM
            text = str(expr.value)
            if bare or dtype == "int32":
                return text, (PREC_UNARY if expr.value < 0 else PREC_ATOM)
            return f"T.{dtype}({text})", PREC_ATOM
        value = expr.value
        if not math.isfinite(value):
            word = "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
            return f'T.{dtype}("{word}")', PREC_ATOM
        text = repr(value)
        if bare or dtype == "float32":
            return text, (PREC_UNARY if text.startswith("-") else PREC_ATOM)
        return f"T.{dtype}({text})", PREC_ATOM

    def explicit_const(self, expr: IntImm | FloatImm) -> str:
        dtype = str(expr.dtype)
        text, _ = self.const(expr)
        return text if text.startswith("T.") else f"T.{dtype}({text})"

    # ------------------------------------------------------------------ expressions

    def expr(self, expr: PrimExpr) -> str:
        return self.expr_prec(expr)[0]

    def operand(self, expr: PrimExpr, other: PrimExpr) -> tuple[str, int]:
        """An operand next to ``other`` in a dtype-unifying position (literals adopt other's dtype)."""
        if _is_const(expr):
            if _is_const(other):
                return self.explicit_const(expr), PREC_ATOM  # type: ignore[arg-type]
            return self.const(expr, bare=other.dtype == expr.dtype)  # type: ignore[arg-type]
        return self.expr_prec(expr)

    def pair(self, a: PrimExpr, b: PrimExpr) -> tuple[str, str]:
        first, second = self.unified(a, b)
        return first, second

    def unified(self, *args: PrimExpr) -> list[str]:
        """Arguments the parser unifies (``T.min``, ``T.select``, math calls): a literal takes the
        dtype of the first typed argument, so constants of that dtype print bare."""
        others = [a for a in args if not _is_const(a)]
        target = others[0].dtype if others else None
        out = []
        for arg in args:
            if not _is_const(arg):
                out.append(self.expr(arg))
            elif target is None:  # all literals: the first keeps its dtype, the rest adopt it
                out.append(self.const(arg)[0])  # type: ignore[arg-type]
                target = arg.dtype
            else:
                out.append(self.const(arg, bare=arg.dtype == target)[0])  # type: ignore[arg-type]
        return out

    def binary(self, a: PrimExpr, b: PrimExpr, op: str, prec: int) -> tuple[str, int]:
        if _is_const(a) and _is_const(b):
            left, left_prec = self.explicit_const(a), PREC_ATOM  # type: ignore[arg-type]
            right, right_prec = self.const(b, bare=a.dtype == b.dtype)  # type: ignore[arg-type]
        else:
            left, left_prec = self.operand(a, b)
            right, right_prec = self.operand(b, a)
        if left_prec < prec or (prec == PREC_CMP and left_prec == prec):
            left = f"({left})"
        if right_prec <= prec:
            right = f"({right})"
        return f"{left} {op} {right}", prec

    def call(self, name: str, *args: str) -> tuple[str, int]:
        return f"T.{name}({', '.join(args)})", PREC_ATOM

    def expr_prec(self, expr: PrimExpr) -> tuple[str, int]:
        if isinstance(expr, Var):
            return self.namer.name(expr), PREC_ATOM
        if isinstance(expr, (IntImm, FloatImm)):
            return self.const(expr)
        if isinstance(expr, StringImm):
            return _string(expr.value), PREC_ATOM
        if isinstance(expr, Sub) and not _is_const(expr.b) and self.is_negation_zero(expr.a, expr.b.dtype):
            text, prec = self.expr_prec(expr.b)
            return f"-({text})" if prec < PREC_UNARY else f"-{text}", PREC_UNARY
        if isinstance(expr, Div):
            if expr.dtype.is_float:
                return self.binary(expr.a, expr.b, "/", PREC_MUL)
            return self.call("truncdiv", *self.pair(expr.a, expr.b))
        if isinstance(expr, (Min, Max)):
            return self.call("min" if isinstance(expr, Min) else "max", *self.pair(expr.a, expr.b))
        entry = _BINARY.get(type(expr))
        if entry is not None:
            assert isinstance(expr, BinaryOp)
            return self.binary(expr.a, expr.b, *entry)
        if isinstance(expr, Not):
            if _is_const(expr.a):  # `not True` would fold in Python
                return f"not {self.explicit_const(expr.a)}", PREC_NOT  # type: ignore[arg-type]
            text, prec = self.expr_prec(expr.a)
            return f"not ({text})" if prec < PREC_NOT else f"not {text}", PREC_NOT
        if isinstance(expr, Select):
            return self.call("select", self.expr(expr.condition), *self.pair(expr.true_value, expr.false_value))
        if isinstance(expr, Cast):
            return self.call("cast", self.expr(expr.value), _string(str(expr.dtype)))
        if isinstance(expr, BufferLoad):
            return self.load(expr.buffer, expr.indices), PREC_ATOM
        if isinstance(expr, Call):
            return self.call_expr(expr)
        if isinstance(expr, Ramp):
            return self.call("ramp", *self.pair(expr.base, expr.stride), str(expr.lanes))
        if isinstance(expr, Broadcast):
            return self.call("broadcast", self.expr(expr.value), str(expr.lanes))
        if isinstance(expr, Let):
            value = self.expr(expr.value)
            self.namer.push()
            name = self.namer.define(expr.var)
            body = self.expr(expr.body)
            self.namer.pop()
            return self.call("let", name, value, body)
        return repr(expr), PREC_ATOM

    def is_negation_zero(self, expr: PrimExpr, dtype: DataType) -> bool:
        """``expr`` is the zero that ``-x`` subtracts from (what the parser builds for ``-x``)."""
        if isinstance(expr, Broadcast):
            return dtype.lanes == expr.lanes and self.is_negation_zero(expr.value, dtype.element)
        if isinstance(expr, IntImm):
            return expr.value == 0 and expr.dtype == dtype
        if isinstance(expr, FloatImm):
            return expr.value == 0.0 and math.copysign(1.0, expr.value) > 0 and expr.dtype == dtype
        return False

    def call_expr(self, expr: Call) -> tuple[str, int]:
        info = get_op(expr.op)
        if info is not None and info.dtype_rule == "explicit":
            return self.call(expr.op, _string(str(expr.dtype)), *(self.expr(a) for a in expr.args))
        if info is not None and info.dtype_rule == "branch" and len(expr.args) == 3:
            return self.call(expr.op, self.expr(expr.args[0]), *self.pair(expr.args[1], expr.args[2]))
        args = self.unified(*expr.args)
        return self.call(expr.op, *args)

    def load(self, buffer: Buffer, indices: tuple[PrimExpr, ...]) -> str:
        name = self.namer.name(buffer)
        if not indices:
            return f"{name}[()]"
        return f"{name}[{', '.join(self.expr(i) for i in indices)}]"

    def bounds(self, lo: PrimExpr, extent: PrimExpr) -> tuple[str, str]:
        """``lo`` and ``lo + extent`` as the parser reads them back to exactly (lo, extent)."""
        if isinstance(lo, IntImm) and isinstance(extent, IntImm) and lo.dtype == extent.dtype:
            high = IntImm(lo.value + extent.value, lo.dtype)
            return self.const(lo)[0], self.const(high)[0]
        if (
            isinstance(extent, Sub)
            and structural_equal(extent.b, lo)
            and structural_equal(extent_of(lo, extent.a), extent)
        ):
            return self.expr(lo), self.expr(extent.a)  # range(1, n) rather than range(1, 1 + (n - 1))
        return self.expr(lo), self.binary(lo, extent, "+", PREC_ADD)[0]

    def range_text(self, dom: Range) -> str:
        """An extent when the range starts at 0, else ``(lo, hi)``."""
        if _is_zero(dom.min, dom.extent.dtype):
            return self.expr(dom.extent)
        lo, hi = self.bounds(dom.min, dom.extent)
        return f"({lo}, {hi})"

    def region(self, region: BufferRegion) -> str:
        parts = []
        for rng in region.region:
            if isinstance(rng.extent, IntImm) and rng.extent.value == 1 and rng.extent.dtype == rng.min.dtype:
                parts.append(self.expr(rng.min))
            elif _is_zero(rng.min, rng.extent.dtype):
                parts.append(f"0:{self.expr(rng.extent)}")
            else:
                lo, hi = self.bounds(rng.min, rng.extent)
                parts.append(f"{lo}:{hi}")
        name = self.namer.name(region.buffer)
        return f"{name}[{', '.join(parts)}]" if parts else f"{name}[()]"

    def value(self, value: Any) -> str:
        """An annotation value: Python data as Python, IR constants typed (so they stay IR)."""
        if isinstance(value, (IntImm, FloatImm)):
            return self.explicit_const(value)
        if isinstance(value, PrimExpr):
            return self.expr(value)
        if isinstance(value, Buffer):
            return self.namer.name(value)
        if isinstance(value, float) and not math.isfinite(value):
            return f'float("{value}")'
        if isinstance(value, str):
            return _string(value)
        if isinstance(value, dict):
            return "{" + ", ".join(f"{self.value(k)}: {self.value(v)}" for k, v in value.items()) + "}"
        if isinstance(value, list):
            return "[" + ", ".join(self.value(v) for v in value) + "]"
        if isinstance(value, tuple):
            items = [self.value(v) for v in value]
            return "(" + items[0] + ",)" if len(items) == 1 else "(" + ", ".join(items) + ")"
        return repr(value)

    # ------------------------------------------------------------------ buffers

    def shape(self, dims: tuple[PrimExpr, ...]) -> str:
        items = [self.expr(d) for d in dims]
        return "(" + items[0] + ",)" if len(items) == 1 else "(" + ", ".join(items) + ")"

    def buffer_args(self, buffer: Buffer, param: bool = False) -> str:
        """The arguments of ``T.Buffer`` (``param``), ``T.alloc_buffer``, ``T.match_buffer``."""
        parts = [self.shape(buffer.shape), _string(str(buffer.dtype))]
        if buffer.scope != "global":
            parts.append(f"scope={_string(buffer.scope)}")
        if buffer.strides:
            parts.append(f"strides={self.shape(buffer.strides)}")
        if buffer.elem_offset is not None:
            parts.append(f"elem_offset={self.expr(buffer.elem_offset)}")
        if buffer.align != 0:
            parts.append(f"align={buffer.align}")
        if buffer.offset_factor != 1:
            parts.append(f"offset_factor={buffer.offset_factor}")
        if buffer.dim_align:
            parts.append(f"dim_align={buffer.dim_align!r}")
        if buffer.axis_separators:
            # TVM's spelling: a tuple in a parameter's T.Buffer, a list in an allocation.
            separators = list(buffer.axis_separators)
            parts.append(f"axis_separators={tuple(separators) if param else separators}")
        return ", ".join(parts)

    # ------------------------------------------------------------------ functions

    def print_function(self, func: PrimFunc, name: str | None = None) -> None:
        for param in func.params:
            if isinstance(param, Var):
                self.namer.define(param)
        definitions = _Definitions()
        definitions.visit(func.params)
        definitions.visit(func.body)
        param_ids = {id(p) for p in func.params}
        free = [v for v in definitions.used if id(v) not in definitions.defined and id(v) not in param_ids]
        for var in free:
            self.namer.define(var)
        for param in func.params:
            if isinstance(param, Buffer):
                self.namer.define(param)
        params = []
        for param in func.params:
            if isinstance(param, Buffer):
                params.append(f"{self.namer.name(param)}: T.Buffer({self.buffer_args(param, param=True)})")
            else:
                params.append(
                    f"{self.namer.name(param)}: {'T.handle' if param.dtype.is_handle else 'T.' + str(param.dtype)}"
                )
        head = f"def {_sanitize(name or func.name)}("
        one_line = head + ", ".join(params) + "):"
        self.line("@T.script")
        if len(one_line) <= 100:
            self.line(one_line)
        else:
            self.line(head + (",\n" + " " * len(head)).join(params) + "):")
        self.depth += 1
        self.constants = func.constants
        attrs = {key: value for key, value in func.attrs.items() if key != CONSTANTS_ATTR}
        if attrs:
            self.line(f"T.func_attr({self.value(attrs)})")
        for var in free:
            self.line(f"{self.namer.name(var)} = T.{'handle' if var.dtype.is_handle else var.dtype}()")
        body = func.body
        if isinstance(body, BlockRealize) and self.is_plain_root(body):
            for buffer in body.block.alloc_buffers:
                self.alloc_line(buffer)
            self.stmt(body.block.body)
        else:
            self.stmt(body)
        self.depth -= 1

    @staticmethod
    def is_plain_root(realize: BlockRealize) -> bool:
        block = realize.block
        return (
            block.name == "root"
            and not block.iter_vars
            and not realize.iter_values
            and _is_true(realize.predicate)
            and not block.reads
            and not block.writes
            and not block.annotations
            and block.init is None
            and not block.match_buffers
        )

    def alloc_line(self, buffer: Buffer) -> None:
        name = self.namer.define(buffer)
        self.line(f"{name} = {self.allocation(buffer)}")

    def allocation(self, buffer: Buffer) -> str:
        values = self.constants.get(buffer)
        if values is None:
            return f"T.alloc_buffer({self.buffer_args(buffer)})"
        shape = ", ".join(self.expr(extent) for extent in buffer.shape)
        data = ", ".join(constant_text(value, buffer.dtype) for value in values)
        return f'T.allocate_const([{data}], "{buffer.dtype}", [{shape}])'

    # ------------------------------------------------------------------ statements

    def body(self, stmt: Stmt) -> None:
        """An indented statement in its own name scope."""
        self.depth += 1
        self.namer.push()
        self.stmt(stmt)
        self.namer.pop()
        self.depth -= 1

    def stmt(self, stmt: Stmt) -> None:
        if isinstance(stmt, SeqStmt):
            for item in stmt.stmts:
                self.stmt(item)
        elif isinstance(stmt, For):
            self.print_for(stmt)
        elif isinstance(stmt, BlockRealize):
            self.print_block(stmt)
        elif isinstance(stmt, BufferStore):
            self.print_store(stmt)
        elif isinstance(stmt, IfThenElse):
            self.print_if(stmt)
        elif isinstance(stmt, LetStmt):
            value = self.expr(stmt.value)
            name = self.namer.define(stmt.var)
            if stmt.var.dtype == stmt.value.dtype:
                self.line(f"{name} = {value}")
            else:
                self.line(f"{name}: T.{stmt.var.dtype} = {value}")
            self.stmt(stmt.body)
        elif isinstance(stmt, Evaluate):
            if isinstance(stmt.value, Call):
                self.line(self.expr(stmt.value))
            else:
                self.line(f"T.evaluate({self.expr(stmt.value)})")
        elif isinstance(stmt, Allocate):
            name = self.namer.define(stmt.buffer)
            if stmt.data is not None:
                self.constants[stmt.buffer] = stmt.data
                self.line(f"{name} = {self.allocation(stmt.buffer)}")
            else:
                storage = ', storage="heap"' if stmt.storage == "heap" else ""
                self.line(f"{name} = T.allocate({self.buffer_args(stmt.buffer)}{storage})")
            self.stmt(stmt.body)
        elif isinstance(stmt, Block):
            self.print_block(
                BlockRealize(tuple(iv.var for iv in stmt.iter_vars), IntImm(1, as_dtype("bool")), stmt), bare=True
            )
        else:
            self.line(f"# {stmt!r}")

    def print_store(self, stmt: BufferStore) -> None:
        target = self.load(stmt.buffer, stmt.indices)
        value = stmt.value
        if _is_const(value):
            lanes = 1
            for index in stmt.indices:
                lanes *= index.dtype.lanes
            text = self.const(value, bare=value.dtype == stmt.buffer.dtype.with_lanes(lanes))[0]  # type: ignore[arg-type]
        else:
            text = self.expr(value)
        self.line(f"{target} = {text}")

    def print_if(self, stmt: IfThenElse, keyword_text: str = "if") -> None:
        self.line(f"{keyword_text} {self.expr(stmt.condition)}:")
        self.body(stmt.then_case)
        else_case = stmt.else_case
        if isinstance(else_case, IfThenElse):
            self.print_if(else_case, "elif")
        elif else_case is not None:
            self.line("else:")
            self.body(else_case)

    @staticmethod
    def is_grid_loop(stmt: Stmt) -> bool:
        return (
            isinstance(stmt, For)
            and stmt.kind is ForKind.SERIAL
            and not stmt.annotations
            and stmt.thread_tag is None
            and _is_zero(stmt.min, stmt.extent.dtype)
            and stmt.loop_var.dtype == stmt.extent.dtype
        )

    def print_for(self, stmt: For) -> None:
        loops = [stmt]
        while self.is_grid_loop(loops[-1]) and self.is_grid_loop(loops[-1].body):
            inner: For = loops[-1].body  # type: ignore[assignment]
            if _uses_loop_var(inner.extent, loops):
                break  # T.grid extents cannot name the grid's own variables
            loops.append(inner)
        if len(loops) > 1:
            extents = ", ".join(self.expr(loop.extent) for loop in loops)
            self.namer.push()
            names = [self.namer.define(loop.loop_var) for loop in loops]
            self.line(f"for {', '.join(names)} in T.grid({extents}):")
        else:
            if _is_zero(stmt.min, stmt.extent.dtype):
                args = [self.expr(stmt.extent)]
            else:
                args = list(self.bounds(stmt.min, stmt.extent))
            if stmt.thread_tag is not None:
                args.append(f"thread={_string(stmt.thread_tag)}")
            if stmt.annotations:
                args.append(f"annotations={self.value(stmt.annotations)}")
            func = "range" if self.is_grid_loop(stmt) else f"T.{_FOR_KIND_NAMES[stmt.kind]}"
            self.namer.push()
            name = self.namer.define(stmt.loop_var)
            self.line(f"for {name} in {func}({', '.join(args)}):")
        for loop in loops:
            self.loops[id(loop.loop_var)] = loop
        self.depth += 1
        self.stmt(loops[-1].body)
        self.depth -= 1
        for loop in loops:
            self.loops.pop(id(loop.loop_var), None)
        self.namer.pop()

    def remap_loops(self, realize: BlockRealize) -> list[For] | None:
        """The loops of a block whose iterators are all plain loop variables over the loop range."""
        block = realize.block
        if not block.iter_vars:
            return None
        loops = []
        for iter_var, value in zip(block.iter_vars, realize.iter_values):
            loop = self.loops.get(id(value)) if isinstance(value, Var) else None
            if (
                loop is None
                or loop.loop_var is not value
                or iter_var.var.dtype != value.dtype
                or not structural_equal(iter_var.dom.min, loop.min)
                or not structural_equal(iter_var.dom.extent, loop.extent)
            ):
                return None
            loops.append(loop)
        return loops

    def print_block(self, realize: BlockRealize, bare: bool = False) -> None:
        block = realize.block
        self.line(f"with T.block({_string(block.name)}):")
        self.depth += 1
        self.namer.push()
        loops = None if bare else self.remap_loops(realize)
        if loops is not None:
            bindings = [self.namer.name(loop.loop_var) for loop in loops]
            names = [self.namer.define(iv.var) for iv in block.iter_vars]
            kinds = "".join(iv.kind.value for iv in block.iter_vars)
            self.line(f'{", ".join(names)} = T.remap("{kinds}", {", ".join(bindings)})')
        else:
            for iter_var, value in zip(block.iter_vars, realize.iter_values):
                dom = self.range_text(iter_var.dom)
                binding = self.expr(value)
                name = self.namer.define(iter_var.var)
                self.line(f"{name} = T.{_AXIS_NAMES[iter_var.kind]}({dom}, {binding})")
        if not _is_true(realize.predicate):
            self.line(f"T.where({self.expr(realize.predicate)})")
        for buffer in block.alloc_buffers:
            self.namer.define(buffer)
        matched_sources = [self.region(m.source) for m in block.match_buffers]
        for match in block.match_buffers:
            self.namer.define(match.buffer)
        self.line(f"T.reads({', '.join(self.region(r) for r in block.reads)})")
        self.line(f"T.writes({', '.join(self.region(r) for r in block.writes)})")
        if block.annotations:
            self.line(f"T.block_attr({self.value(block.annotations)})")
        for buffer in block.alloc_buffers:
            self.line(f"{self.namer.name(buffer)} = {self.allocation(buffer)}")
        for match, source in zip(block.match_buffers, matched_sources):
            self.print_match(match, source)
        if block.init is not None:
            self.line("with T.init():")
            self.body(block.init)
        self.stmt(block.body)
        self.namer.pop()
        self.depth -= 1

    def print_match(self, match: MatchBufferRegion, source: str) -> None:
        self.line(f"{self.namer.name(match.buffer)} = T.match_buffer({source}, {self.buffer_args(match.buffer)})")


# ---------------------------------------------------------------------- entry points


def to_script(node: Node) -> str:
    """Script text of a function, module, statement or expression."""
    printer = ScriptPrinter()
    if isinstance(node, PrimFunc):
        printer.print_function(node)
        return printer.text()
    if isinstance(node, IRModule):
        texts = []
        for name, func in node.functions.items():
            one = ScriptPrinter()
            one.print_function(func, name)
            texts.append(one.text())
        return "\n\n\n".join(texts)
    if isinstance(node, Stmt):
        printer.stmt(node)
        return printer.text()
    if isinstance(node, PrimExpr):
        return printer.expr(node)
    if isinstance(node, BufferRegion):
        return printer.region(node)
    if isinstance(node, Buffer):
        return f"{printer.namer.name(node)}: T.Buffer({printer.buffer_args(node, param=True)})"
    if isinstance(node, Range):
        return f"range({printer.range_text(node)})" if _is_zero(node.min) else f"range{printer.range_text(node)}"
    return repr(node)


def expr_to_str(expr: PrimExpr) -> str:
    """An expression as script text (``str(expr)``)."""
    return ScriptPrinter().expr(expr)


def stmt_to_str(stmt: Stmt) -> str:
    """A statement as script text, unindented (``str(stmt)``)."""
    printer = ScriptPrinter()
    printer.stmt(stmt)
    return printer.text()


def _uses_loop_var(expr: PrimExpr, loops: list[For]) -> bool:
    wanted = {id(loop.loop_var) for loop in loops}
    found = False

    def visit(node: Any) -> None:
        nonlocal found
        if isinstance(node, Var) and id(node) in wanted:
            found = True

    post_order_visit(expr, visit)
    return found
