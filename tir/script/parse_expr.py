"""Script expressions: Python ``ast`` expressions -> IR expressions, with the dialect's type rules.

Evaluation keeps two worlds apart. Python values (numbers, strings, tuples, dialect markers,
anything found in the environment) compute as in Python: ``2 * 64`` is ``128``. As soon as an
IR expression takes part, the result is IR: ``i * 2`` is ``Mul(i, IntImm(2))``. A Python
literal next to an IR expression takes that expression's dtype; two IR expressions of
different dtypes never mix implicitly.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from tir.ir.buffer import Buffer, BufferRegion, Range
from tir.ir.dtype import BOOL, INT32, INT64, SCALAR_DTYPES, DataType, as_dtype
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
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Mul,
    Not,
    Or,
    PrimExpr,
    Select,
    Sub,
    Var,
)
from tir.script import dialect
from tir.script.diagnostics import Source, script_error
from tir.script.parse_call import CallMixin
from tir.script.rules import Number, a_dtype, describe, extent_of, is_number, one, zero
from tir.script.scope import MISSING, Env, Scope

_ARITH: dict[type, type[BinaryOp]] = {
    ast.Add: Add,
    ast.Sub: Sub,
    ast.Mult: Mul,
    ast.Div: Div,
    ast.FloorDiv: FloorDiv,
    ast.Mod: FloorMod,
}
#: Bitwise operators on integer expressions: calls of the bitwise ops (tir.ir.ops.BITWISE).
_BITWISE: dict[type, str] = {ast.BitAnd: "bitwise_and", ast.BitOr: "bitwise_or", ast.BitXor: "bitwise_xor"}
_OP_TEXT: dict[type, str] = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.FloorDiv: "//",
    ast.Mod: "%",
    ast.Pow: "**",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.BitOr: "|",
    ast.BitXor: "^",
    ast.BitAnd: "&",
    ast.MatMult: "@",
}
_PY_BINOP: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
    ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
    ast.BitAnd: operator.and_,
}
_COMPARE: dict[type, tuple[type[BinaryOp], Callable[[Any, Any], Any], str]] = {
    ast.Eq: (EQ, operator.eq, "=="),
    ast.NotEq: (NE, operator.ne, "!="),
    ast.Lt: (LT, operator.lt, "<"),
    ast.LtE: (LE, operator.le, "<="),
    ast.Gt: (GT, operator.gt, ">"),
    ast.GtE: (GE, operator.ge, ">="),
}

#: Python constructs the dialect rejects, named for the error message.
UNSUPPORTED_CONSTRUCTS: dict[str, str] = {
    "Lambda": "lambda expressions",
    "ListComp": "list comprehensions",
    "SetComp": "set comprehensions",
    "DictComp": "dict comprehensions",
    "GeneratorExp": "generator expressions",
    "Set": "set literals",
    "Await": "await expressions",
    "Yield": "yield expressions",
    "YieldFrom": "yield expressions",
    "NamedExpr": "assignment expressions (:=)",
    "Starred": "starred expressions (*x)",
    "JoinedStr": "f-strings",
    "FormattedValue": "f-strings",
}

_DTYPE_LIST = ", ".join(SCALAR_DTYPES)


class ExprParser(CallMixin):
    """Evaluates ``ast`` expressions in a scope; raises ``ScriptError`` at the offending node."""

    def __init__(self, source: Source, env: Env, scope: Scope) -> None:
        self.source = source
        self.env = env
        self.scope = scope

    # ------------------------------------------------------------------ errors and spans

    def fail(self, node: ast.AST, message: str, expected: str) -> NoReturn:
        raise script_error(self.source, node, message, expected)

    def spanned(self, expr: Any, node: ast.AST) -> Any:
        """Attach ``node``'s span to a freshly built expression (never to variables)."""
        if isinstance(expr, PrimExpr) and not isinstance(expr, Var) and expr.span is None:
            return expr.with_span(self.source.span(node))
        return expr

    # ------------------------------------------------------------------ entry points

    def eval(self, node: ast.expr) -> Any:
        """Evaluate ``node`` to a Python value or IR (expression, buffer, marker ...)."""
        method = getattr(self, f"visit_{type(node).__name__}", None)
        if method is None:
            construct = UNSUPPORTED_CONSTRUCTS.get(type(node).__name__, f"'{type(node).__name__}' expressions")
            self.fail(
                node,
                f"{construct} are not supported in the script dialect",
                "an expression over numbers, buffers and T.* calls",
            )
        try:
            result = method(node)
        except (TypeError, ValueError, ZeroDivisionError, OverflowError) as exc:
            self.fail(node, str(exc), "a well-typed expression")
        return self.spanned(result, node)

    def value(self, node: ast.expr, what: str = "a value") -> PrimExpr | Number:
        """An IR expression or a Python number; anything else is an error."""
        if isinstance(node, ast.Slice):
            self.fail(
                node,
                "a slice where a value is expected",
                "one index per dimension; slices only appear in T.reads, T.writes and T.match_buffer regions",
            )
        result = self.eval(node)
        if isinstance(result, PrimExpr) or is_number(result):
            return result
        self.reject_as_value(node, result, what)

    def reject_as_value(self, node: ast.AST, result: Any, what: str) -> NoReturn:
        if isinstance(result, Buffer):
            self.fail(
                node,
                f"the buffer '{result.name}' is used as a value",
                f"{what}; index the buffer, e.g. {result.name}[i]",
            )
        if isinstance(result, dialect.Marker):
            self.reject_marker(node, result)
        self.fail(node, f"{describe(result)} is used where {what} is expected", what)

    def reject_marker(self, node: ast.AST, marker: dialect.Marker) -> NoReturn:
        name = f"T.{marker.name}"
        if marker.kind == dialect.LOOP:
            self.fail(node, f"{name}(...) is only valid as the iterable of a for loop", f"for i in {name}(...):")
        if marker.kind == dialect.WITH:
            self.fail(node, f"{name}(...) is only valid in a with statement", f"with {name}(...):")
        if marker.kind == dialect.STMT:
            self.fail(node, f"{name}(...) is a statement, not a value", f"{name}(...) on a line of its own")
        if marker.kind == dialect.ASSIGN:
            self.fail(node, f"{name}(...) must be assigned to a name", f"x = {name}(...)")
        if marker.kind in (dialect.ANNOTATION, dialect.DTYPE):
            self.fail(node, f"{name} is a type, not a value", f"{name} as a parameter annotation, or {name}(value)")
        self.fail(node, f"{name} is a function, not a value", f"{name}(...)")

    def prim(self, node: ast.expr, dtype: DataType | None = None, what: str = "a value") -> PrimExpr:
        """An IR expression; a Python literal takes ``dtype`` (or its default dtype)."""
        return self.to_prim(self.value(node, what), node, dtype)

    def to_prim(self, value: PrimExpr | Number, node: ast.AST, dtype: DataType | None = None) -> PrimExpr:
        if isinstance(value, PrimExpr):
            return value
        return self.literal(value, dtype, node) if dtype is not None else self.default_const(value, node)

    def condition(self, node: ast.expr, what: str) -> PrimExpr:
        cond = self.prim(node, BOOL, "a bool condition")
        if not cond.dtype.element.is_bool:
            self.fail(node, f"{what} needs a bool condition, got {cond.dtype}", "a comparison such as i < n")
        return cond

    def integer(self, node: ast.expr, what: str, dtype: DataType | None = None) -> PrimExpr:
        """An integer IR expression (a Python int becomes ``dtype``, default int32)."""
        value = self.value(node, f"an integer {what}")
        if isinstance(value, bool) or isinstance(value, float):
            self.fail(node, f"{what} must be an integer, got {value!r}", f"an integer {what}")
        if isinstance(value, int):
            return self.literal(value, dtype, node) if dtype is not None else self.default_const(value, node)
        if not value.dtype.is_integer:
            self.fail(
                node,
                f"{what} must be an integer expression, got {value.dtype}",
                f'an integer {what}; use T.cast(x, "int32")',
            )
        return value

    def python_int(self, node: ast.expr, what: str) -> int:
        value = self.eval(node)
        if isinstance(value, IntImm) and value.dtype.is_integer:
            return value.value
        if not isinstance(value, int) or isinstance(value, bool):
            self.fail(
                node, f"{what} must be a Python integer constant, got {describe(value)}", f"an integer constant {what}"
            )
        return value

    def string(self, node: ast.expr, what: str) -> str:
        value = self.eval(node)
        if not isinstance(value, str):
            self.fail(node, f"{what} must be a string, got {describe(value)}", f"a string for {what}")
        return value

    def dtype_arg(self, node: ast.expr) -> DataType:
        value = self.eval(node)
        if isinstance(value, dialect.DTypeMarker):
            return value.dtype
        if not isinstance(value, str):
            self.fail(
                node,
                f"a dtype must be a string, got {describe(value)}",
                f'a dtype such as "float32": one of {_DTYPE_LIST}',
            )
        try:
            return as_dtype(value)
        except (ValueError, TypeError):
            self.fail(
                node, f"unknown dtype {value!r}", f"one of {_DTYPE_LIST} (optionally with xLANES, e.g. float32x8)"
            )

    # ------------------------------------------------------------------ literals and dtypes

    def default_const(self, value: Number, node: ast.AST) -> PrimExpr:
        """A literal on its own: bool -> bool, int -> int32 (int64 when too large), float -> float32."""
        span = self.source.span(node)
        if isinstance(value, bool):
            return IntImm(int(value), BOOL, span=span)
        if isinstance(value, int):
            for dtype in (INT32, INT64):
                if dtype.min_value() <= value <= dtype.max_value():
                    return IntImm(value, dtype, span=span)
            self.fail(node, f"the integer {value} does not fit in int64", "an integer in the int64 range")
        return FloatImm(float(value), as_dtype("float32"), span=span)

    def literal(self, value: Number, dtype: DataType, node: ast.AST) -> PrimExpr:
        """A Python literal as a constant of ``dtype`` (broadcast for vector dtypes)."""
        elem = dtype.element
        span = self.source.span(node)
        result: PrimExpr
        if isinstance(value, bool):
            if not elem.is_bool:
                self.fail(
                    node,
                    f"the bool literal {value} cannot be used with {a_dtype(dtype)} expression",
                    f"{a_dtype(elem)} value",
                )
            result = IntImm(int(value), BOOL, span=span)
        elif isinstance(value, int):
            if elem.is_bool or elem.is_handle:
                self.fail(
                    node,
                    f"the integer literal {value} cannot be used with {a_dtype(dtype)} expression",
                    f"{a_dtype(elem)} value such as True",
                )
            if elem.is_float:
                result = FloatImm(float(value), elem, span=span)
            else:
                lo, hi = elem.min_value(), elem.max_value()
                if not lo <= value <= hi:
                    self.fail(node, f"the constant {value} does not fit in {elem}", f"a value in [{lo}, {hi}]")
                result = IntImm(value, elem, span=span)
        else:
            if not elem.is_float:
                self.fail(
                    node,
                    f"the float literal {value!r} cannot be used with {a_dtype(dtype)} expression",
                    'an integer, or T.cast(x, "float32") to compute in floats',
                )
            result = FloatImm(value, elem, span=span)
        return Broadcast(result, dtype.lanes, span=span) if dtype.lanes > 1 else result

    def unify(
        self, left: Any, lnode: ast.AST, right: Any, rnode: ast.AST, what: str, node: ast.AST
    ) -> tuple[PrimExpr, PrimExpr]:
        """Two operands of one dtype: literals adopt the other side's dtype; scalars broadcast to vectors."""
        if isinstance(left, PrimExpr) and isinstance(right, PrimExpr):
            if left.dtype != right.dtype:
                if left.dtype.element == right.dtype.element and 1 in (left.dtype.lanes, right.dtype.lanes):
                    if left.dtype.lanes == 1:
                        return Broadcast(left, right.dtype.lanes, span=left.span), right
                    return left, Broadcast(right, left.dtype.lanes, span=right.span)
                self.fail(
                    node,
                    f"{what} have different dtypes: {left.dtype} and {right.dtype}",
                    f'operands of one dtype; convert one side with T.cast(x, "{left.dtype}")',
                )
            return left, right
        if isinstance(left, PrimExpr):
            return left, self.literal(right, left.dtype, rnode)
        if isinstance(right, PrimExpr):
            return self.literal(left, right.dtype, lnode), right
        return self.default_const(left, lnode), self.default_const(right, rnode)

    def unify_all(
        self, values: Sequence[Any], nodes: Sequence[ast.AST], what: str, node: ast.AST, float_default: bool = False
    ) -> list[PrimExpr]:
        """Several operands of one dtype (the first IR operand's); literals adopt it."""
        dtype = next((v.dtype for v in values if isinstance(v, PrimExpr)), None)
        if dtype is None:
            if float_default and all(not isinstance(v, bool) for v in values):
                dtype = as_dtype("float32")
            else:
                dtype = self.default_const(values[0], nodes[0]).dtype
        out = []
        for value, sub in zip(values, nodes):
            if isinstance(value, PrimExpr):
                if value.dtype != dtype:
                    if value.dtype.lanes == 1 and dtype.lanes > 1 and value.dtype == dtype.element:
                        value = Broadcast(value, dtype.lanes)
                    else:
                        self.fail(
                            sub,
                            f"{what} have different dtypes: {dtype} and {value.dtype}",
                            f'arguments of one dtype; convert with T.cast(x, "{dtype}")',
                        )
                out.append(value)
            else:
                out.append(self.literal(value, dtype, sub))
        return out

    # ------------------------------------------------------------------ leaves

    def visit_Constant(self, node: ast.Constant) -> Any:
        if node.value is Ellipsis or isinstance(node.value, (bytes, complex)):
            self.fail(node, f"the constant {node.value!r} is not supported", "a number, bool or string")
        return node.value

    def visit_Name(self, node: ast.Name) -> Any:
        name = node.id
        value = self.scope.lookup(name)
        if value is not MISSING:
            return value
        value = self.env.lookup(name)
        if value is not MISSING:
            return value
        if name in self.scope.exited_loop_vars:
            self.fail(
                node,
                f"loop variable '{name}' is used outside its loop",
                f"'{name}' only inside the body of its for loop",
            )
        self.fail(node, f"unknown name '{name}'", "a name defined in the function, its module, or tir.script")

    def visit_Attribute(self, node: ast.Attribute) -> Any:
        base = self.eval(node.value)
        attr = node.attr
        if isinstance(base, Buffer):
            if attr in ("shape", "strides"):
                return tuple(getattr(base, attr))
            if attr == "dtype":
                return str(base.dtype)
            if attr in ("name", "ndim", "scope", "elem_offset", "align", "offset_factor"):
                return getattr(base, attr)
            self.fail(node, f"buffers have no attribute '{attr}'", "A.shape, A.dtype, A.ndim, A.scope or A.name")
        if isinstance(base, PrimExpr):
            if attr == "dtype":
                return str(base.dtype)
            self.fail(node, f"expressions have no attribute '{attr}'", "x.dtype")
        try:
            return getattr(base, attr)
        except AttributeError:
            owner = "tir.script" if getattr(base, "__name__", None) == "tir.script" else describe(base)
            self.fail(
                node,
                f"{owner} has no attribute '{attr}'",
                "a name of the dialect, e.g. T.grid, T.block, T.exp"
                if owner == "tir.script"
                else "an existing attribute",
            )

    def visit_Tuple(self, node: ast.Tuple) -> tuple[Any, ...]:
        return tuple(self.eval(elt) for elt in node.elts)

    def visit_List(self, node: ast.List) -> list[Any]:
        return [self.eval(elt) for elt in node.elts]

    def visit_Dict(self, node: ast.Dict) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        for key_node, value_node in zip(node.keys, node.values):
            if key_node is None:
                self.fail(value_node, "dict unpacking (**d) is not supported", "key: value pairs")
            key = self.eval(key_node)
            if not isinstance(key, (str, int, bool, float)):
                self.fail(
                    key_node, f"a dict key must be a constant, got {describe(key)}", 'a string key such as "pragma"'
                )
            out[key] = self.eval(value_node)
        return out

    def visit_Slice(self, node: ast.Slice) -> NoReturn:
        self.fail(
            node,
            "a slice where a value is expected",
            "one index per dimension; slices only appear in T.reads, T.writes and T.match_buffer regions",
        )

    # ------------------------------------------------------------------ operators

    def visit_BinOp(self, node: ast.BinOp) -> Any:
        left = self.value(node.left)
        right = self.value(node.right)
        op_type = type(node.op)
        text = _OP_TEXT.get(op_type, "?")
        if is_number(left) and is_number(right):
            if op_type not in _PY_BINOP:
                self.fail(node, f"operator '{text}' is not supported", "+, -, *, /, //, %")
            return _PY_BINOP[op_type](left, right)
        if op_type in _BITWISE:
            a, b = self.unify(left, node.left, right, node.right, f"operands of '{text}'", node)
            if not a.dtype.element.is_integer:
                self.fail(node, f"'{text}' on {a.dtype} values", "integers (and / or for bool conditions)")
            return Call(a.dtype, _BITWISE[op_type], (a, b))
        if op_type not in _ARITH:
            hint = (
                "T.pow(x, y) for floats"
                if op_type is ast.Pow
                else "and / or / not for conditions; +, -, *, //, % for arithmetic"
            )
            self.fail(node, f"operator '{text}' is not supported on IR expressions", hint)
        a, b = self.unify(left, node.left, right, node.right, f"operands of '{text}'", node)
        if a.dtype.element.is_bool or a.dtype.element.is_handle:
            self.fail(
                node, f"arithmetic '{text}' on {a.dtype} values", "numbers; use and / or / not on bool conditions"
            )
        if op_type is ast.Div and not a.dtype.is_float:
            self.fail(
                node, f"'/' on integers ({a.dtype})", "`//` for floor division (or T.truncdiv(a, b) for C division)"
            )
        return _ARITH[op_type](a, b)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Any:
        operand = self.value(node.operand)
        if not isinstance(operand, PrimExpr):  # Python numbers compute as in Python
            if isinstance(node.op, ast.Not):
                return not operand
            if isinstance(node.op, ast.USub):
                return -operand
            if isinstance(node.op, ast.UAdd):
                return +operand
            if isinstance(operand, int):
                return ~operand
            self.fail(node, "'~' needs an integer", "an integer")
        if isinstance(node.op, ast.Not):
            if not operand.dtype.element.is_bool:
                self.fail(node, f"'not' needs a bool operand, got {operand.dtype}", "a comparison such as i < n")
            return Not(operand)
        if isinstance(node.op, ast.UAdd):
            return operand
        if isinstance(node.op, ast.Invert):
            if not operand.dtype.element.is_integer:
                self.fail(node, f"'~' on a {operand.dtype} value", "an integer (not for bool conditions)")
            return Call(operand.dtype, "bitwise_not", (operand,))
        if operand.dtype.element.is_bool:
            self.fail(node, f"'-' on a {operand.dtype} value", "a number")
        return Sub(zero(operand.dtype), operand)

    def visit_BoolOp(self, node: ast.BoolOp) -> Any:
        values = [self.value(v) for v in node.values]
        is_and = isinstance(node.op, ast.And)
        word = "and" if is_and else "or"
        if all(is_number(v) for v in values):
            result = values[0]
            for v in values[1:]:
                result = (result and v) if is_and else (result or v)
            return result
        exprs = []
        for value, sub in zip(values, node.values):
            if isinstance(value, PrimExpr):
                if not value.dtype.element.is_bool:
                    self.fail(sub, f"'{word}' needs bool operands, got {value.dtype}", "a comparison such as i < n")
                exprs.append(value)
            elif isinstance(value, bool):
                exprs.append(IntImm(int(value), BOOL, span=self.source.span(sub)))
            else:
                self.fail(sub, f"'{word}' needs bool operands, got {value!r}", "True, False, or a comparison")
        result_expr = exprs[0]
        for expr in exprs[1:]:
            result_expr = And(result_expr, expr) if is_and else Or(result_expr, expr)
        return result_expr

    def visit_Compare(self, node: ast.Compare) -> Any:
        nodes = [node.left, *node.comparators]
        values = [self.value(n) for n in nodes]
        results: list[Any] = []
        for index, op in enumerate(node.ops):
            entry = _COMPARE.get(type(op))
            if entry is None:
                self.fail(node, f"the comparison '{type(op).__name__}' is not supported", "==, !=, <, <=, >, >=")
            cls, py_op, text = entry
            left, right = values[index], values[index + 1]
            if is_number(left) and is_number(right):
                results.append(py_op(left, right))
                continue
            a, b = self.unify(left, nodes[index], right, nodes[index + 1], f"operands of '{text}'", node)
            results.append(self.spanned(cls(a, b), node))
        if all(is_number(r) for r in results):
            return all(results)
        exprs = [r if isinstance(r, PrimExpr) else IntImm(int(bool(r)), BOOL) for r in results]
        out = exprs[0]
        for expr in exprs[1:]:
            out = And(out, expr)
        return out

    def visit_IfExp(self, node: ast.IfExp) -> Any:
        test = self.value(node.test, "a condition")
        if is_number(test):
            return self.eval(node.body) if test else self.eval(node.orelse)
        cond = self.condition(node.test, "a conditional expression")
        a, b = self.unify(
            self.value(node.body), node.body, self.value(node.orelse), node.orelse, "branches of 'if'", node
        )
        return Select(cond, a, b)

    # ------------------------------------------------------------------ subscripts

    def subscript_items(self, node: ast.Subscript) -> list[ast.expr]:
        index = node.slice
        return list(index.elts) if isinstance(index, ast.Tuple) else [index]

    def check_ndim(self, node: ast.Subscript, buffer: Buffer, count: int) -> None:
        if count != buffer.ndim:
            dims = f"{buffer.ndim} dimension{'s' if buffer.ndim != 1 else ''}"
            self.fail(
                node,
                f"buffer '{buffer.name}' has {dims} but is indexed with {count} {'index' if count == 1 else 'indices'}",
                f"{buffer.ndim} {'index' if buffer.ndim == 1 else 'indices'}, one per dimension",
            )

    def index(self, node: ast.expr) -> PrimExpr:
        if isinstance(node, ast.Slice):
            self.visit_Slice(node)
        value = self.value(node, "an integer index")
        if isinstance(value, bool) or isinstance(value, float):
            self.fail(node, f"a buffer index must be an integer, got {value!r}", "an integer index")
        if isinstance(value, int):
            return self.default_const(value, node)
        if not value.dtype.element.is_integer:
            self.fail(
                node,
                f"a buffer index must be an integer expression, got {value.dtype}",
                'an integer index; use T.cast(x, "int32")',
            )
        return value

    def visit_Subscript(self, node: ast.Subscript) -> Any:
        base = self.eval(node.value)
        if isinstance(base, Buffer):
            items = self.subscript_items(node)
            self.check_ndim(node, base, len(items))
            return BufferLoad(base, tuple(self.index(item) for item in items))
        if isinstance(base, (tuple, list, dict, str)):
            key = self.eval(node.slice) if not isinstance(node.slice, ast.Slice) else self.python_slice(node.slice)
            try:
                return base[key]
            except (IndexError, KeyError, TypeError) as exc:
                self.fail(node, f"cannot index {describe(base)}: {exc}", "a valid index")
        if isinstance(base, dialect.Marker):
            self.reject_marker(node, base)
        self.fail(node.value, f"{describe(base)} cannot be indexed", "a buffer, e.g. A[i, j]")

    def python_slice(self, node: ast.Slice) -> slice:
        parts = [None if part is None else self.eval(part) for part in (node.lower, node.upper, node.step)]
        return slice(*parts)

    def bounds(
        self, lo: Any, hi: Any, lo_node: ast.AST, hi_node: ast.AST, what: str, node: ast.AST
    ) -> tuple[PrimExpr, PrimExpr]:
        """``[lo, hi)`` as (min, extent); see ``extent_of``."""
        for value, sub in ((lo, lo_node), (hi, hi_node)):
            if isinstance(value, (bool, float)) or (isinstance(value, PrimExpr) and not value.dtype.is_integer):
                shown = repr(value) if not isinstance(value, PrimExpr) else f"expression of type {value.dtype}"
                self.fail(
                    sub,
                    f"{what} must be an integer, got {'a float ' if isinstance(value, PrimExpr) else ''}{shown}",
                    f"an integer {what}",
                )
        if isinstance(lo, int) and isinstance(hi, int):
            return self.default_const(lo, lo_node), self.default_const(hi - lo, hi_node)
        lo_e, hi_e = self.unify(lo, lo_node, hi, hi_node, f"bounds of {what}", node)
        return lo_e, self.spanned(extent_of(lo_e, hi_e), node)

    def region(self, node: ast.expr, what: str) -> BufferRegion:
        """``A[vi, 0:128]`` (an index is one element, ``lo:hi`` a range) or ``A`` (all of it)."""
        if isinstance(node, ast.Subscript):
            base = self.eval(node.value)
            if not isinstance(base, Buffer):
                self.fail(
                    node.value, f"{what} needs a buffer region, got {describe(base)}", "a region such as A[vi, 0:128]"
                )
            items = self.subscript_items(node)
            self.check_ndim(node, base, len(items))
            ranges = []
            for item, extent in zip(items, base.shape):
                if isinstance(item, ast.Slice):
                    if item.step is not None:
                        self.fail(item.step, "a region slice cannot have a step", "lo:hi")
                    lo = self.value(item.lower, "an integer bound") if item.lower is not None else 0
                    hi = self.value(item.upper, "an integer bound") if item.upper is not None else extent
                    if isinstance(lo, int) and not isinstance(lo, bool) and isinstance(hi, PrimExpr) and lo == 0:
                        lo = IntImm(0, hi.dtype)
                    lo_e, ext = self.bounds(lo, hi, item.lower or item, item.upper or item, "a region bound", item)
                    ranges.append(Range(lo_e, ext, span=self.source.span(item)))
                else:
                    index = self.index(item)
                    ranges.append(Range(index, one(index.dtype), span=self.source.span(item)))
            return BufferRegion(base, tuple(ranges), span=self.source.span(node))
        value = self.eval(node)
        if isinstance(value, Buffer):
            return BufferRegion.full(value).with_span(self.source.span(node))
        if isinstance(value, BufferRegion):
            return value
        self.fail(node, f"{what} needs a buffer region, got {describe(value)}", "a region such as A[vi, 0:128]")

    # ------------------------------------------------------------------ calls

    def check_plain_call(self, node: ast.Call) -> None:
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                self.fail(arg, "starred arguments (*args) are not supported", "arguments written out one by one")
        for keyword in node.keywords:
            if keyword.arg is None:
                self.fail(keyword, "keyword unpacking (**kwargs) is not supported", "keyword arguments written out")

    def bind(
        self,
        node: ast.Call,
        name: str,
        params: Sequence[str],
        required: int,
        usage: str,
        keywords: Sequence[str] = (),
        variadic: bool = False,
    ) -> tuple[dict[str, ast.expr], list[ast.expr]]:
        """Match a call's arguments to parameter names; arity errors point at the call."""
        self.check_plain_call(node)
        positional = list(node.args)
        if variadic:
            count = f"at least {required} argument{'s' if required != 1 else ''}"
        elif required == len(params):
            count = f"{required} argument{'s' if required != 1 else ''}"
        else:
            count = f"{required} to {len(params)} arguments"
        given = len(positional)
        arity_message = f"T.{name} takes {count} but {given} {'was' if given == 1 else 'were'} given"
        if len(positional) > len(params) and not variadic:
            self.fail(node, arity_message, usage)
        bound = dict(zip(params, positional))
        extra = positional[len(params) :]
        for keyword in node.keywords:
            assert keyword.arg is not None
            if keyword.arg in bound:
                self.fail(keyword, f"T.{name} got two values for '{keyword.arg}'", usage)
            if keyword.arg not in params and keyword.arg not in keywords:
                allowed = ", ".join(list(params) + list(keywords)) or "none"
                self.fail(keyword, f"T.{name} has no argument '{keyword.arg}'", f"one of: {allowed}")
            bound[keyword.arg] = keyword.value
        missing = [p for p in params[:required] if p not in bound]
        if missing:
            if not node.keywords:
                self.fail(node, arity_message, usage)
            self.fail(node, f"T.{name} is missing the argument '{missing[0]}'", usage)
        return bound, extra
