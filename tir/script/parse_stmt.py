"""Statements of the script dialect: statement lists, loops, stores, branches, scalar bindings
and buffer declarations. Blocks are ``tir.script.parse_block``; ``tir.script.parser`` adds the
function level on top of both.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass, field
from typing import Any, NoReturn

from tir.ir.buffer import KNOWN_SCOPES, Buffer, IterVar, MatchBufferRegion, Range, axis_separators_problem
from tir.ir.constant import constant_values
from tir.ir.dtype import BOOL, as_dtype
from tir.ir.expr import IntImm, PrimExpr, Var
from tir.ir.node import Span
from tir.ir.stmt import (
    THREAD_TAGS,
    BlockRealize,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    Stmt,
    seq,
)
from tir.script import dialect
from tir.script.diagnostics import ScriptError, Source, script_error
from tir.script.parse_expr import ExprParser
from tir.script.rules import a_dtype, describe, is_number, zero
from tir.script.scope import MISSING, Env, Scope

_LOOP_KINDS = {
    "serial": ForKind.SERIAL,
    "parallel": ForKind.PARALLEL,
    "vectorized": ForKind.VECTORIZED,
    "unroll": ForKind.UNROLLED,
    "thread_binding": ForKind.THREAD_BINDING,
}
BUFFER_PARAMS = [
    "shape", "dtype", "scope", "strides", "elem_offset", "align", "offset_factor", "dim_align", "axis_separators"
]  # fmt: skip

#: Statements the dialect rejects: (keyword to underline, what it is, what to write instead).
_UNSUPPORTED_STMTS: dict[str, tuple[str, str, str]] = {
    "While": ("while", "while loops", "for i in range(n): with an extent known before the loop"),
    "Try": ("try", "try statements", "straight-line code; errors are not part of the IR"),
    "TryStar": ("try", "try statements", "straight-line code; errors are not part of the IR"),
    "Raise": ("raise", "raise statements", "straight-line code; errors are not part of the IR"),
    "Assert": ("assert", "assert statements", "an if statement, or T.where(...) for a block predicate"),
    "Delete": ("del", "del statements", "nothing: names end with their block"),
    "Global": ("global", "global declarations", "a constant defined in the module"),
    "Nonlocal": ("nonlocal", "nonlocal declarations", "a constant defined in the enclosing function"),
    "ClassDef": ("class", "class definitions", "a separate @T.script function"),
    "FunctionDef": ("def", "nested function definitions", "a separate @T.script function"),
    "AsyncFunctionDef": ("async", "nested function definitions", "a separate @T.script function"),
    "Import": ("import", "import statements inside a script", "the import at module level"),
    "ImportFrom": ("from", "import statements inside a script", "the import at module level"),
    "Break": ("break", "break statements", "a loop over exactly the iterations needed"),
    "Continue": ("continue", "continue statements", "an if statement around the loop body"),
    "Return": ("return", "return statements", "writing results into an output buffer"),
    "AsyncFor": ("async", "async for loops", "for i in range(n):"),
    "AsyncWith": ("async", "async with statements", 'with T.block("name"):'),
    "Match": ("match", "match statements", "if / elif / else"),
}


@dataclass
class BlockFrame:
    """What a ``with T.block(...)`` collects while its body is parsed."""

    name: str
    is_root: bool = False
    explicit: bool = False  # the root block written as `with T.block("root"):`
    iter_vars: list[IterVar] = field(default_factory=list)
    bindings: list[PrimExpr] = field(default_factory=list)
    iter_names: set[str] = field(default_factory=set)
    read_nodes: list[ast.expr] | None = None
    write_nodes: list[ast.expr] | None = None
    predicate: PrimExpr | None = None
    annotations: dict[str, Any] = field(default_factory=dict)
    alloc_buffers: list[Buffer] = field(default_factory=list)
    match_buffers: list[MatchBufferRegion] = field(default_factory=list)
    init: Stmt | None = None


def _keyword_span(source: Source, node: ast.stmt, keyword: str) -> Span:
    return Span(source.filename, node.lineno, node.col_offset, node.lineno, node.col_offset + len(keyword))


def true_const(span: Span | None = None) -> PrimExpr:
    return IntImm(1, BOOL, span=span)


def _empty_body() -> Stmt:
    return Evaluate(IntImm(0))


class StmtParser:
    """Parses statements: loops, blocks, stores, branches, bindings (one function's worth of state)."""

    def __init__(self, source: Source, env: Env) -> None:
        self.source = source
        self.env = env
        self.scope = Scope()
        self.exprs = ExprParser(source, env, self.scope)
        self.blocks: list[BlockFrame] = []
        self.constants: list[tuple[Buffer, tuple[int | float, ...]]] = []  # T.allocate_const, in order

    # ------------------------------------------------------------------ helpers

    def fail(self, node: ast.AST | Span, message: str, expected: str) -> NoReturn:
        raise script_error(self.source, node, message, expected)

    def span(self, node: ast.AST) -> Span:
        return self.source.span(node)

    def marker_of(self, node: ast.expr) -> Any:
        """The dialect marker a call's callee names, or None (never raises for unknown names)."""
        if not isinstance(node, (ast.Name, ast.Attribute)):
            return None
        try:
            value = self.exprs.eval(node)
        except ScriptError:
            return None
        return value

    def call_marker(self, node: ast.AST | None) -> tuple[ast.Call, Any] | None:
        if isinstance(node, ast.Call):
            return node, self.marker_of(node.func)
        return None

    def current_block(self, node: ast.AST, what: str, block_level: bool) -> BlockFrame:
        if not self.blocks:
            self.fail(node, f"{what} must be inside a block", f'{what} directly inside `with T.block("name"):`')
        if not block_level:
            where = "the function" if self.blocks[-1].is_root else "a block"
            self.fail(
                node,
                f"{what} must be at the top level of {where}, not inside a loop or branch",
                f"{what} directly in the block's body",
            )
        return self.blocks[-1]

    # ------------------------------------------------------------------ buffers

    def make_buffer(self, call: ast.Call, name: str, marker: str, params: list[str], usage: str, span: Span) -> Buffer:
        bound, _ = self.exprs.bind(call, marker, params, 1, usage)
        shape = self.extents(bound["shape"], "buffer dimension")
        for dim, node in zip(shape, _shape_nodes(bound["shape"], len(shape))):
            if isinstance(dim, IntImm) and dim.value < 0:
                self.fail(node, f"a buffer dimension must not be negative, got {dim.value}", "sizes >= 0")
        dtype = self.exprs.dtype_arg(bound["dtype"]) if "dtype" in bound else as_dtype("float32")
        scope = "global"
        if "scope" in bound:
            scope = self.exprs.string(bound["scope"], "a storage scope") or "global"  # "": the default, as in TVM
            if scope not in KNOWN_SCOPES:
                self.fail(bound["scope"], f"unknown storage scope {scope!r}", f"one of {', '.join(KNOWN_SCOPES)}")
        strides: tuple[PrimExpr, ...] = ()
        if "strides" in bound and self.exprs.eval(bound["strides"]) is not None:
            strides = self.extents(bound["strides"], "buffer stride")
            if len(strides) != len(shape):
                self.fail(
                    bound["strides"],
                    f"{len(strides)} strides for {len(shape)} dimension{'s' if len(shape) != 1 else ''}",
                    "one stride per dimension",
                )
        elem_offset = None
        if "elem_offset" in bound and self.exprs.eval(bound["elem_offset"]) is not None:
            elem_offset = self.exprs.integer(bound["elem_offset"], "element offset")
        align = self.exprs.python_int(bound["align"], "align") if "align" in bound else 0
        offset_factor = (
            self.exprs.python_int(bound["offset_factor"], "offset_factor") if "offset_factor" in bound else 1
        )
        dim_align = self.dim_align(bound["dim_align"], len(shape)) if "dim_align" in bound else ()
        separators = self.axis_separators(bound["axis_separators"], len(shape)) if "axis_separators" in bound else ()
        return Buffer(
            name,
            shape,
            dtype,
            scope,
            strides,
            elem_offset,
            align,
            offset_factor,
            dim_align=dim_align,
            axis_separators=separators,
            span=span,
        )

    def axis_separators(self, node: ast.expr, ndim: int) -> tuple[int, ...]:
        """``axis_separators=[1]`` (or a tuple): where the logical dimensions split into the
        dimensions of a multi-dimensional physical buffer (TVM's; a layout request only)."""
        expected = "literal integers in [0, ndim], non-decreasing, e.g. axis_separators=[1]"
        try:
            value = ast.literal_eval(node)
        except ValueError:
            self.fail(node, "axis_separators must be written out as literal integers", expected)
        if not isinstance(value, (tuple, list)):
            self.fail(node, f"axis_separators must be a list of integers, got {value!r}", expected)
        problem = axis_separators_problem(value, ndim)
        if problem is not None:
            self.fail(node, problem, expected)
        return tuple(value)

    def parse_allocate_const(self, target: ast.Name, call: ast.Call, block_level: bool) -> None:
        """``B = T.allocate_const(data, dtype, extents)``: a function-level buffer whose contents
        are the literal ``data`` (nested lists of numbers, row-major); nothing may write it."""
        usage = 'T.allocate_const([0.0, 0.5, 1.0, 1.5], "float32", [4])'
        frame = self.current_block(call, "T.allocate_const", block_level)
        if not frame.is_root:
            self.fail(call, "T.allocate_const belongs at the function level, not inside a block", usage)
        bound, _ = self.exprs.bind(call, "allocate_const", ["data", "dtype", "extents"], 3, usage)
        dtype = self.exprs.dtype_arg(bound["dtype"])
        try:
            extents = ast.literal_eval(bound["extents"])
        except ValueError:
            self.fail(bound["extents"], "the extents of a constant must be literal integers", usage)
        if isinstance(extents, int):
            extents = [extents]
        if not isinstance(extents, (list, tuple)) or any(
            isinstance(e, bool) or not isinstance(e, int) or e < 0 for e in extents
        ):
            self.fail(bound["extents"], f"the extents of a constant must be integers >= 0, got {extents!r}", usage)
        try:
            values = constant_values(ast.literal_eval(bound["data"]), dtype, extents)
        except ValueError as error:
            message = str(error) if "malformed" not in str(error) else "the data of a constant must be literal numbers"
            self.fail(bound["data"], message, usage)
        shape = tuple(IntImm(int(extent), "int32") for extent in extents)
        buffer = Buffer(target.id, shape, dtype, span=self.span(target))
        self.define_block_name(frame, target, buffer)
        frame.alloc_buffers.append(buffer)
        self.constants.append((buffer, values))

    def parse_constant_name(self, target: ast.Name, call: ast.Call, what: str) -> None:
        """``view = T.decl_buffer(shape, dtype, data=table)`` (or ``T.Buffer``), TVM's way of
        reading a ``T.allocate_const``: here another name for the constant buffer itself, so the
        shape and dtype must be the constant's."""
        usage = f'{what}((4,), "float32", data=table) where table = T.allocate_const(...)'
        bound, _ = self.exprs.bind(call, what[2:], ["shape", "dtype"], 1, usage, keywords=["data"])
        if "data" not in bound:
            self.fail(call, f"{what} in a function body declares a view of a T.allocate_const: give data=", usage)
        source = self.exprs.eval(bound["data"])
        constant = next((buffer for buffer, _ in self.constants if buffer is source), None)
        if constant is None:
            self.fail(bound["data"], f"data= must name a T.allocate_const buffer, not {describe(source)}", usage)
        shape = self.extents(bound["shape"], "buffer dimension")
        dtype = self.exprs.dtype_arg(bound["dtype"]) if "dtype" in bound else as_dtype("float32")
        same_shape = len(shape) == len(constant.shape) and all(
            isinstance(a, IntImm) and isinstance(b, IntImm) and a.value == b.value
            for a, b in zip(shape, constant.shape)
        )
        if dtype != constant.dtype or not same_shape:
            self.fail(
                call,
                f"{what} of {constant.name} must have its shape and dtype "
                f"({tuple(int(d) for d in constant.const_shape() or ())}, {constant.dtype})",
                "the constant's own shape and dtype (reshaped views are not supported)",
            )
        self.scope.define(target.id, constant)

    def dim_align(self, node: ast.expr, ndim: int) -> tuple[tuple[int, int, int], ...]:
        """``dim_align=((axis, factor, offset), ...)``: the storage_align rules of a buffer
        (compaction pads the strides of the shrunk buffer by them again)."""
        expected = "a tuple of (axis, factor, offset) integer triples, e.g. ((0, 32, 8),)"
        try:
            value = ast.literal_eval(node)
        except ValueError:
            self.fail(node, "dim_align must be written out as literal integers", expected)
        rules = []
        for rule in value if isinstance(value, (tuple, list)) else [None]:
            if not (isinstance(rule, (tuple, list)) and len(rule) == 3 and all(type(v) is int for v in rule)):
                self.fail(node, f"not a dim_align rule: {rule!r}", expected)
            axis, factor, offset = rule
            if not 0 <= axis < ndim or factor < 1 or not 0 <= offset < factor:
                self.fail(
                    node,
                    f"dim_align rule {tuple(rule)} is out of range for {ndim} dimensions",
                    "0 <= axis < ndim, factor >= 1, 0 <= offset < factor",
                )
            rules.append((axis, factor, offset))
        return tuple(rules)

    def extents(self, node: ast.expr, what: str) -> tuple[PrimExpr, ...]:
        """A shape: a tuple (or list) of integers, or a single integer."""
        if isinstance(node, (ast.Tuple, ast.List)):
            return tuple(self.exprs.integer(elt, what) for elt in node.elts)
        value = self.exprs.eval(node)
        if isinstance(value, (tuple, list)):
            out = []
            for item in value:
                if isinstance(item, PrimExpr) and item.dtype.is_integer:
                    out.append(item)
                elif isinstance(item, int) and not isinstance(item, bool):
                    out.append(self.exprs.default_const(item, node))
                else:
                    self.fail(node, f"a {what} must be an integer, got {describe(item)}", f"integer {what}s")
            return tuple(out)
        return (self.exprs.integer(node, what),)

    # ------------------------------------------------------------------ statement lists

    def parse_stmts(self, stmts: list[ast.stmt], block_level: bool) -> Stmt:
        """A statement list; ``x = value`` binds ``x`` for the rest of the list (a LetStmt)."""
        out: list[Stmt] = []
        for index, node in enumerate(stmts):
            let = self.let_binding(node)
            if let is not None:
                var, value = let
                self.scope.push()
                self.scope.define(var.name, var)
                rest = self.parse_stmts(stmts[index + 1 :], block_level)
                self.scope.pop()
                out.append(LetStmt(var, value, rest, span=self.span(node)))
                break
            stmt = self.parse_stmt(node, block_level)
            if stmt is not None:
                out.append(stmt)
        return seq(*out) if out else _empty_body()

    def let_binding(self, node: ast.stmt) -> tuple[Var, PrimExpr] | None:
        if isinstance(node, ast.AnnAssign):
            if not isinstance(node.target, ast.Name):
                self.fail(node.target, "an annotated assignment must bind a name", "x: T.int32 = value")
            if node.value is None:
                self.fail(node, f"'{node.target.id}' is declared without a value", f"{node.target.id}: T.int32 = value")
            annotation_node = node.annotation
            if isinstance(annotation_node, ast.Subscript):
                # TVM prints a let binding as `v: T.let[T.int32] = value`.
                callee = self.marker_of(annotation_node.value)
                if isinstance(callee, dialect.Marker) and callee.name == "let":
                    annotation_node = annotation_node.slice
            annotation = self.exprs.eval(annotation_node)
            if not isinstance(annotation, dialect.DTypeMarker):
                self.fail(
                    node.annotation,
                    f"a variable annotation must be a dtype, got {describe(annotation)}",
                    "x: T.int32 = value",
                )
            self.check_assignable(node.target)
            value = self.exprs.prim(node.value, annotation.dtype)
            return Var(node.target.id, annotation.dtype, span=self.span(node.target)), value
        if not isinstance(node, ast.Assign) or len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            return None
        found = self.call_marker(node.value)
        if (
            found is not None
            and isinstance(found[1], dialect.Marker)
            and found[1].kind in (dialect.ASSIGN, dialect.DTYPE)
        ):
            if found[1].kind == dialect.ASSIGN or not (found[0].args or found[0].keywords):
                return None
        if found is not None and found[1] is dialect.MARKERS["Buffer"]:
            if any(keyword.arg == "data" for keyword in found[0].keywords):
                return None  # view = T.Buffer(shape, dtype, data=table): a name for a T.allocate_const
        target = node.targets[0]
        self.check_assignable(target)
        value = self.exprs.prim(node.value, what="a value to bind")
        return Var(target.id, value.dtype, span=self.span(target)), value

    def check_assignable(self, target: ast.Name) -> None:
        existing = self.scope.lookup(target.id)
        if isinstance(existing, Var) and existing in self.scope.loop_ranges:
            self.fail(target, f"cannot assign to the loop variable '{target.id}'", "a new name")
        if isinstance(existing, Buffer):
            self.fail(
                target,
                f"'{target.id}' is a buffer and cannot be rebound",
                f"{target.id}[i] = value to store, or a new name",
            )

    def parse_stmt(self, node: ast.stmt, block_level: bool) -> Stmt | None:
        kind = type(node).__name__
        if kind in _UNSUPPORTED_STMTS:
            keyword, what, expected = _UNSUPPORTED_STMTS[kind]
            self.fail(
                _keyword_span(self.source, node, keyword), f"{what} are not supported in the script dialect", expected
            )
        if isinstance(node, ast.Pass):
            return None
        if isinstance(node, ast.For):
            return self.parse_for(node)
        if isinstance(node, ast.If):
            return self.parse_if(node)
        if isinstance(node, ast.With):
            return self.parse_with(node, block_level)
        if isinstance(node, ast.Assign):
            return self.parse_assign(node, block_level)
        if isinstance(node, ast.AugAssign):
            return self.parse_aug_assign(node)
        if isinstance(node, ast.Expr):
            return self.parse_expr_stmt(node, block_level)
        self.fail(
            node, f"'{kind}' statements are not supported in the script dialect", "loops, blocks, stores, if statements"
        )

    # ------------------------------------------------------------------ expression statements

    def parse_expr_stmt(self, node: ast.Expr, block_level: bool) -> Stmt | None:
        value_node = node.value
        if isinstance(value_node, ast.Constant) and isinstance(value_node.value, str):
            return None  # a string on its own line is a comment
        found = self.call_marker(value_node)
        if found is not None and isinstance(found[1], dialect.Marker) and found[1].kind == dialect.STMT:
            call, marker = found
            if marker.name == "evaluate":
                bound, _ = self.exprs.bind(call, "evaluate", ["value"], 1, "T.evaluate(value)")
                return Evaluate(self.exprs.prim(bound["value"]), span=self.span(node))
            if marker.name == "func_attr":
                self.fail(
                    call,
                    "T.func_attr must be at the top level of the function",
                    'T.func_attr({"key": value}) in the function body',
                )
            self.block_header(call, marker.name, block_level)
            return None
        if isinstance(value_node, ast.Call):
            callee = self.marker_of(value_node.func)
            if not isinstance(callee, dialect.Marker):  # never run a Python function for its effect
                self.fail(
                    value_node,
                    "only dialect calls can be statements",
                    "a T.* call such as T.call_extern(...), or T.evaluate(expr)",
                )
            value = self.exprs.eval(value_node)
            if isinstance(value, PrimExpr):
                return Evaluate(value, span=self.span(node))
            self.fail(
                value_node,
                f"the result of this call ({describe(value)}) is not used",
                "T.evaluate(expr) for a call made for its effect",
            )
        self.fail(
            value_node, "an expression on its own has no effect", "a store such as A[i] = value, or T.evaluate(expr)"
        )

    # ------------------------------------------------------------------ assignments

    def parse_assign(self, node: ast.Assign, block_level: bool) -> Stmt | None:
        if len(node.targets) != 1:
            self.fail(node.targets[1], "chained assignment (a = b = ...) is not supported", "one target per assignment")
        target = node.targets[0]
        if isinstance(target, ast.Subscript):
            return self.parse_store(target, node.value, None, node)
        found = self.call_marker(node.value)
        marker = found[1] if found is not None else None
        if isinstance(target, ast.Tuple):
            if marker is not dialect.MARKERS["remap"]:
                self.fail(target, "tuple assignment is only supported with T.remap", 'vi, vj = T.remap("SS", i, j)')
            assert found is not None
            self.parse_remap(target.elts, found[0], block_level, target)
            return None
        if not isinstance(target, ast.Name):
            self.fail(target, "only names and buffer elements can be assigned", "x = value or A[i] = value")
        assert found is not None and isinstance(marker, dialect.Marker)  # anything else was a let binding
        call = found[0]
        if marker.name in ("decl_buffer", "Buffer"):
            self.parse_constant_name(target, call, f"T.{marker.name}")
            return None
        if isinstance(marker, dialect.DTypeMarker):  # n = T.int32(): a symbolic variable
            self.scope.define(target.id, Var(target.id, marker.dtype, span=self.span(target)))
            return None
        if marker.name == "remap":
            self.parse_remap([target], call, block_level, target)
        elif marker.name in ("spatial_axis", "reduce_axis", "opaque_axis"):
            self.parse_axis(target, call, marker.name, block_level)
        elif marker.name == "alloc_buffer":
            frame = self.current_block(call, "T.alloc_buffer", block_level)
            buffer = self.make_buffer(
                call,
                target.id,
                "alloc_buffer",
                BUFFER_PARAMS,
                'T.alloc_buffer((128, 128), "float32")',
                span=self.span(target),
            )
            self.define_block_name(frame, target, buffer)
            frame.alloc_buffers.append(buffer)
        elif marker.name == "allocate_const":
            self.parse_allocate_const(target, call, block_level)
        elif marker.name == "match_buffer":
            self.parse_match_buffer(target, call, block_level)
        else:
            self.exprs.reject_marker(call, marker)
        return None

    def parse_store(self, target: ast.Subscript, value_node: ast.expr, op: ast.operator | None, node: ast.stmt) -> Stmt:
        buffer = self.exprs.eval(target.value)
        if not isinstance(buffer, Buffer):
            self.fail(target.value, f"only buffer elements can be assigned, not {describe(buffer)}", "A[i, j] = value")
        items = self.exprs.subscript_items(target)
        self.exprs.check_ndim(target, buffer, len(items))
        indices = tuple(self.exprs.index(item) for item in items)
        lanes = 1
        for index in indices:
            lanes *= index.dtype.lanes
        dtype = buffer.dtype.with_lanes(buffer.dtype.lanes * lanes)
        if op is not None:
            load = ast.Subscript(value=target.value, slice=target.slice, ctx=ast.Load())
            combined = ast.BinOp(left=load, op=op, right=value_node)
            ast.copy_location(load, target)
            ast.copy_location(combined, value_node)
            value = self.exprs.eval(combined)
        else:
            value = self.exprs.value(value_node, f"{a_dtype(dtype)} value")
        if is_number(value):
            if isinstance(value, float) and not dtype.is_float:
                self.fail(
                    value_node,
                    f"the float literal {value!r} cannot be stored in the {dtype} buffer '{buffer.name}'",
                    f'an integer value, or T.cast(x, "{dtype}")',
                )
            value = self.exprs.literal(value, dtype, value_node)
        assert isinstance(value, PrimExpr)
        if value.dtype != dtype:
            self.fail(
                value_node,
                f"cannot store {a_dtype(value.dtype)} value in the {dtype} buffer '{buffer.name}'",
                f'{a_dtype(dtype)} value; convert with T.cast(value, "{dtype}")',
            )
        return BufferStore(buffer, value, indices, span=self.span(node))

    def parse_aug_assign(self, node: ast.AugAssign) -> Stmt:
        if not isinstance(node.target, ast.Subscript):
            self.fail(
                node.target,
                "augmented assignment is only supported on buffer elements",
                "A[i] += value, or y = x + value",
            )
        return self.parse_store(node.target, node.value, node.op, node)

    # ------------------------------------------------------------------ control flow

    def parse_if(self, node: ast.If) -> Stmt:
        cond = self.exprs.prim(node.test, BOOL, "a bool condition")
        if not cond.dtype.is_bool:
            self.fail(node.test, f"an if condition must be bool, got {cond.dtype}", "a comparison such as i < n")
        self.scope.push()
        then_case = self.parse_stmts(node.body, block_level=False)
        self.scope.pop()
        else_case = None
        if node.orelse and not all(isinstance(stmt, ast.Pass) for stmt in node.orelse):
            self.scope.push()
            else_case = self.parse_stmts(node.orelse, block_level=False)
            self.scope.pop()
        return IfThenElse(cond, then_case, else_case, span=self.span(node))

    def loop_targets(self, node: ast.For) -> list[ast.Name]:
        targets = node.target.elts if isinstance(node.target, ast.Tuple) else [node.target]
        for target in targets:
            if not isinstance(target, ast.Name):
                self.fail(target, "a loop variable must be a name", "for i in range(n):")
        return targets  # type: ignore[return-value]

    def parse_for(self, node: ast.For) -> Stmt:
        usage = "range(n), T.grid(n, m), T.serial(n), T.parallel(n), T.vectorized(n), T.unroll(n) or T.thread_binding(n, thread=...)"
        if node.orelse:
            self.fail(
                _keyword_span(self.source, node, "for"),
                "for ... else is not supported in the script dialect",
                "a for loop without else",
            )
        targets = self.loop_targets(node)
        call = node.iter
        if not isinstance(call, ast.Call):
            self.fail(call, "a for loop must iterate over a loop range", usage)
        callee = self.exprs.eval(call.func)
        if callee is builtins.range:
            kind_name = "range"
        elif isinstance(callee, dialect.Marker) and callee.kind == dialect.LOOP:
            kind_name = callee.name
        else:
            self.fail(call, f"a for loop cannot iterate over {describe(callee)}(...)", usage)
        if kind_name == "grid":
            return self.parse_grid(node, call, targets)
        if len(targets) != 1:
            self.fail(
                node.target,
                f"{'range' if kind_name == 'range' else 'T.' + kind_name}(...) binds one loop variable, not {len(targets)}",
                "for i, j in T.grid(n, m): for several",
            )
        lo, hi, lo_node, hi_node, thread, annotations = self.loop_args(call, kind_name)
        if hi is MISSING:
            ext = self.exprs.integer(lo_node, "loop extent")
            low = zero(ext.dtype)
        else:
            low, ext = self.exprs.bounds(lo, hi, lo_node, hi_node, "loop bound", call)
        kind = ForKind.SERIAL if kind_name == "range" else _LOOP_KINDS[kind_name]
        target = targets[0]
        var = Var(target.id, ext.dtype, span=self.span(target))
        self.scope.push()
        self.scope.define_loop_var(target.id, var, Range(low, ext))
        body = self.parse_stmts(node.body, block_level=False)
        self.scope.pop()
        return For(var, low, ext, kind, body, thread, annotations, span=self.span(node))

    def loop_args(
        self, call: ast.Call, kind_name: str
    ) -> tuple[Any, Any, ast.expr, ast.expr, str | None, dict[str, Any]]:
        display = "range" if kind_name == "range" else f"T.{kind_name}"
        self.exprs.check_plain_call(call)
        positional = list(call.args)
        keywords = {k.arg: k for k in call.keywords}
        thread: str | None = None
        if kind_name == "thread_binding":
            if positional and isinstance(self.exprs.eval(positional[-1]), str):
                thread_node = positional.pop()
                if "thread" in keywords:
                    self.fail(
                        keywords["thread"],
                        "T.thread_binding got two thread tags",
                        'T.thread_binding(n, thread="threadIdx.x")',
                    )
            elif "thread" in keywords:
                thread_node = keywords.pop("thread").value
            else:
                self.fail(call, "T.thread_binding needs a thread tag", 'T.thread_binding(n, thread="threadIdx.x")')
            thread = self.exprs.string(thread_node, "a thread tag")
            if thread not in THREAD_TAGS:
                self.fail(thread_node, f"unknown thread tag {thread!r}", f"one of {', '.join(THREAD_TAGS)}")
        annotations: dict[str, Any] = {}
        if "annotations" in keywords and kind_name != "range":
            node = keywords.pop("annotations").value
            value = self.exprs.eval(node)
            if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
                self.fail(
                    node,
                    f"loop annotations must be a dict with string keys, got {describe(value)}",
                    'annotations={"pragma_unroll": 1}',
                )
            annotations = value
        for name, keyword in keywords.items():
            self.fail(
                keyword,
                f"{display} has no argument '{name}'",
                "annotations=" if kind_name != "range" else "range(n) or range(lo, hi)",
            )
        if not positional or len(positional) > 2:
            step = " (a step is not supported)" if kind_name == "range" and len(positional) == 3 else ""
            self.fail(
                call,
                f"{display} takes 1 or 2 bounds but {len(positional)} were given{step}",
                f"{display}(n) or {display}(lo, hi)",
            )
        lo_node = positional[0]
        if len(positional) == 1:
            return MISSING, MISSING, lo_node, lo_node, thread, annotations
        hi_node = positional[1]
        lo = self.exprs.value(lo_node, "an integer loop bound")
        hi = self.exprs.value(hi_node, "an integer loop bound")
        return lo, hi, lo_node, hi_node, thread, annotations

    def parse_grid(self, node: ast.For, call: ast.Call, targets: list[ast.Name]) -> Stmt:
        usage = "for i, j in T.grid(n, m):"
        self.exprs.check_plain_call(call)
        if call.keywords:
            self.fail(call.keywords[0], "T.grid takes no keyword arguments", usage)
        if not call.args:
            self.fail(call, "T.grid takes at least 1 argument but 0 were given", usage)
        if len(call.args) != len(targets):
            self.fail(
                node.target,
                f"T.grid has {len(call.args)} extent{'s' if len(call.args) != 1 else ''} but the loop binds {len(targets)} names",
                usage,
            )
        extents = [self.exprs.integer(arg, "loop extent") for arg in call.args]
        self.scope.push()
        loop_vars = []
        for target, ext in zip(targets, extents):
            var = Var(target.id, ext.dtype, span=self.span(target))
            self.scope.define_loop_var(target.id, var, Range(zero(ext.dtype), ext))
            loop_vars.append(var)
        body = self.parse_stmts(node.body, block_level=False)
        self.scope.pop()
        for var, ext in reversed(list(zip(loop_vars, extents))):
            body = For(var, zero(ext.dtype), ext, ForKind.SERIAL, body, span=self.span(node))
        return body

    # ------------------------------------------------------------------ with statements

    def parse_with(self, node: ast.With, block_level: bool) -> Stmt | None:
        usage = 'with T.block("name"): or with T.init():'
        if len(node.items) != 1:
            self.fail(node.items[1].context_expr, "a with statement takes one context", usage)
        item = node.items[0]
        if item.optional_vars is not None:
            self.fail(item.optional_vars, "`with ... as name` is not supported", usage)
        found = self.call_marker(item.context_expr)
        if found is None or not isinstance(found[1], dialect.Marker) or found[1].kind != dialect.WITH:
            self.fail(item.context_expr, "only blocks and init sections can be used in a with statement", usage)
        call, marker = found
        if marker.name == "init":
            self.parse_init(node, call, block_level)
            return None
        return self.parse_block(node, call, is_root=False)

    # ------------------------------------------------------------------ block hooks (tir.script.parse_block)

    def block_header(self, call: ast.Call, name: str, block_level: bool) -> None:
        raise NotImplementedError

    def define_block_name(self, frame: BlockFrame, target: ast.Name, value: Any) -> None:
        raise NotImplementedError

    def parse_match_buffer(self, target: ast.Name, call: ast.Call, block_level: bool) -> None:
        raise NotImplementedError

    def parse_axis(self, target: ast.Name, call: ast.Call, name: str, block_level: bool) -> None:
        raise NotImplementedError

    def parse_remap(self, targets: list[ast.expr], call: ast.Call, block_level: bool, target_node: ast.expr) -> None:
        raise NotImplementedError

    def parse_init(self, node: ast.With, call: ast.Call, block_level: bool) -> None:
        raise NotImplementedError

    def parse_block(self, node: ast.With, call: ast.Call, is_root: bool) -> BlockRealize:
        raise NotImplementedError


def _shape_nodes(node: ast.expr, count: int) -> list[ast.expr]:
    """The syntax node of each dimension of a shape, for error positions (the whole shape when
    it is not written out as a tuple)."""
    if isinstance(node, (ast.Tuple, ast.List)) and len(node.elts) == count:
        return list(node.elts)
    return [node] * count
