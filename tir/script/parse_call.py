"""Calls in script expressions: dialect functions (``T.cast``, ``T.min``, ``T.ramp`` ...),
registered operations (``T.exp``, ``T.call_llvm_intrin`` ...), typed constants (``T.int8(3)``),
the builtins ``min`` / ``max`` / ``abs``, and plain Python functions of constants.

``CallMixin`` is part of ``tir.script.parse_expr.ExprParser``; it uses that class's helpers
(``fail``, ``value``, ``unify``, ``bind`` ...).
"""

from __future__ import annotations

import ast
import builtins
from typing import TYPE_CHECKING, Any, NoReturn

from tir.ir.buffer import Buffer
from tir.ir.dtype import BOOL, DataType
from tir.ir.expr import (
    BinaryOp,
    Broadcast,
    Call,
    Cast,
    Div,
    FloorDiv,
    FloorMod,
    Max,
    Min,
    PrimExpr,
    Ramp,
    Select,
    StringImm,
    const,
)
from tir.ir.ops import OpInfo, get_op
from tir.script import dialect
from tir.script.rules import a_dtype, describe, is_number

if TYPE_CHECKING:
    from collections.abc import Sequence

    from tir.ir.dtype import DataType
    from tir.script.diagnostics import Source
    from tir.script.rules import Number

#: How each expression marker is called, for arity errors.
USAGE: dict[str, str] = {
    "cast": 'T.cast(x, "int64")',
    "min": "T.min(a, b)",
    "max": "T.max(a, b)",
    "select": "T.select(cond, a, b)",
    "truncdiv": "T.truncdiv(a, b)",
    "floordiv": "T.floordiv(a, b)",
    "floormod": "T.floormod(a, b)",
    "ramp": "T.ramp(base, stride, lanes)",
    "broadcast": "T.broadcast(value, lanes)",
}


#: Dialect functions that take TVM's ``dtype=`` keyword for their result type (TVM drops it).
RESULT_DTYPE_HANDLERS = frozenset(
    {"truncdiv", "floordiv", "floormod", "ceildiv", "shift_left", "shift_right", "likely"}
)


def op_usage(name: str, info: OpInfo) -> str:
    """``T.exp(x)``, ``T.pow(x, y)``, ``T.call_extern("float32", "name", ...)``."""
    if info.dtype_rule == "explicit":
        return f'T.{name}("float32", "name", args...)'
    if info.dtype_rule == "branch":
        return f"T.{name}(cond, a, b)"
    letters = ["x", "y", "z"] if info.min_args <= 2 else ["a", "b", "c", "d", "e"]
    count = info.max_args if info.max_args is not None else info.min_args
    return f"T.{name}({', '.join(letters[:count])})"


class CallMixin:
    """The ``visit_Call`` of ``ExprParser`` and the handlers it dispatches to."""

    if TYPE_CHECKING:  # provided by ExprParser (tir.script.parse_expr)
        source: Source

        def fail(self, node: ast.AST, message: str, expected: str) -> NoReturn: ...
        def value(self, node: ast.expr, what: str = "a value") -> PrimExpr | Number: ...
        def bind(
            self,
            node: ast.Call,
            name: str,
            params: Sequence[str],
            required: int,
            usage: str,
            keywords: Sequence[str] = (),
            variadic: bool = False,
        ) -> tuple[dict[str, ast.expr], list[ast.expr]]: ...
        def check_plain_call(self, node: ast.Call) -> None: ...
        def unify(
            self, left: Any, lnode: ast.AST, right: Any, rnode: ast.AST, what: str, node: ast.AST
        ) -> tuple[PrimExpr, PrimExpr]: ...
        def eval(self, node: ast.expr) -> Any: ...
        def reject_as_value(self, node: ast.AST, result: Any, what: str) -> NoReturn: ...
        def prim(self, node: ast.expr, dtype: DataType | None = None, what: str = "a value") -> PrimExpr: ...
        def literal(self, value: Number, dtype: DataType, node: ast.AST) -> PrimExpr: ...
        def dtype_arg(self, node: ast.expr) -> DataType: ...
        def condition(self, node: ast.expr, what: str) -> PrimExpr: ...
        def unify_all(
            self, values: Sequence[Any], nodes: Sequence[ast.AST], what: str, node: ast.AST, float_default: bool = False
        ) -> list[PrimExpr]: ...
        def to_prim(self, value: PrimExpr | Number, node: ast.AST, dtype: DataType | None = None) -> PrimExpr: ...
        def spanned(self, expr: Any, node: ast.AST) -> Any: ...
        def reject_marker(self, node: ast.AST, marker: dialect.Marker) -> NoReturn: ...
        def python_int(self, node: ast.expr, what: str) -> int: ...

    def visit_Call(self, node: ast.Call) -> Any:
        callee = self.eval(node.func)
        if isinstance(callee, dialect.DTypeMarker):
            return self.call_dtype(node, callee)
        if isinstance(callee, dialect.Marker):
            if callee.kind != dialect.EXPR:
                self.reject_marker(node, callee)
            handler = getattr(self, f"call_{callee.name}", None)
            info = get_op(callee.name)
            if handler is None and info is None:
                self.fail(node, f"T.{callee.name}(...) cannot be parsed", "a printable expression")
            keyword = None
            if callee.name in RESULT_DTYPE_HANDLERS or (handler is None and info and info.dtype_rule != "explicit"):
                node, keyword = self.split_result_dtype(node)
            requested = self.dtype_arg(keyword.value) if keyword is not None else None
            if handler is not None:
                result = handler(node)
            else:
                assert info is not None
                result = self.call_op(node, callee.name, info, requested)
            if keyword is not None:
                self.check_result_dtype(keyword, callee.name, requested, result)
            return result
        if callee in (builtins.min, builtins.max):
            return self.call_builtin_minmax(node, callee is builtins.min)
        if callee is builtins.abs:
            return self.call_builtin_abs(node)
        if callee is builtins.range:
            self.fail(node, "range(...) is only valid as the iterable of a for loop", "for i in range(n):")
        if callable(callee) and not isinstance(callee, (Buffer, PrimExpr)):
            return self.call_python(node, callee)
        self.fail(node.func, f"{describe(callee)} is not callable", "a T.* function")

    def split_result_dtype(self, node: ast.Call) -> tuple[ast.Call, ast.keyword | None]:
        """TVM's ``T.exp(x, dtype="float32")``: the call without its ``dtype=`` keyword, and the keyword."""
        keyword = next((k for k in node.keywords if k.arg == "dtype"), None)
        if keyword is None:
            return node, None
        rest = [k for k in node.keywords if k is not keyword]
        return ast.copy_location(ast.Call(func=node.func, args=node.args, keywords=rest), node), keyword

    def check_result_dtype(self, keyword: ast.keyword, name: str, requested: DataType | None, result: Any) -> None:
        # TVM drops this keyword; here it is a checked claim about the call's type.
        if isinstance(result, PrimExpr) and result.dtype != requested:
            self.fail(
                keyword,
                f"T.{name} computes {result.dtype} here, but its dtype keyword says {requested}",
                f'dtype="{result.dtype}", or no dtype keyword; T.cast the operands to compute in {requested}',
            )

    def call_python(self, node: ast.Call, func: Any) -> Any:
        """A plain Python function of constants (``float("inf")``, a helper computing a size)."""
        self.check_plain_call(node)
        args = [self.eval(a) for a in node.args]
        kwargs = {str(k.arg): self.eval(k.value) for k in node.keywords}
        for value, sub in zip(args + list(kwargs.values()), list(node.args) + [k.value for k in node.keywords]):
            if isinstance(value, (PrimExpr, Buffer)):
                name = getattr(func, "__name__", "a Python function")
                self.fail(
                    sub,
                    f"the Python function '{name}' is called with IR values",
                    "constant arguments; inside scripts use T.* functions on IR values",
                )
        return func(*args, **kwargs)

    def call_builtin_minmax(self, node: ast.Call, is_min: bool) -> Any:
        self.check_plain_call(node)
        values = [self.value(a) for a in node.args]
        if values and all(is_number(v) for v in values) and not node.keywords:
            return min(values) if is_min else max(values)
        return self.fold_minmax(node, values, is_min)

    def call_builtin_abs(self, node: ast.Call) -> Any:
        self.check_plain_call(node)
        if len(node.args) != 1:
            self.fail(node, f"abs takes 1 argument but {len(node.args)} were given", "abs(x)")
        value = self.value(node.args[0])
        if not isinstance(value, PrimExpr):
            return abs(value)
        info = get_op("abs")
        assert info is not None
        return self.call_op(node, "abs", info)

    def fold_minmax(self, node: ast.Call, values: list[Any], is_min: bool) -> PrimExpr:
        name = "min" if is_min else "max"
        if len(values) < 2 or node.keywords:
            self.fail(
                node,
                f"T.{name} takes at least 2 arguments but {len(values)} {'was' if len(values) == 1 else 'were'} given",
                USAGE[name],
            )
        cls = Min if is_min else Max
        result, result_node = values[0], node.args[0]
        for value, sub in zip(values[1:], node.args[1:]):
            a, b = self.unify(result, result_node, value, sub, f"arguments of T.{name}", node)
            result, result_node = self.spanned(cls(a, b), node), node
        return result

    def call_min(self, node: ast.Call) -> PrimExpr:
        self.check_plain_call(node)
        return self.fold_minmax(node, [self.value(a) for a in node.args], True)

    def call_max(self, node: ast.Call) -> PrimExpr:
        self.check_plain_call(node)
        return self.fold_minmax(node, [self.value(a) for a in node.args], False)

    def call_cast(self, node: ast.Call) -> PrimExpr:
        bound, _ = self.bind(node, "cast", ["value", "dtype"], 2, USAGE["cast"])
        dtype = self.dtype_arg(bound["dtype"])
        value = self.prim(bound["value"])
        if value.dtype.lanes != dtype.lanes:
            self.fail(
                node, f"T.cast from {value.dtype} to {dtype} changes the number of lanes", "a dtype with the same lanes"
            )
        return Cast(dtype, value)

    def call_Cast(self, node: ast.Call) -> PrimExpr:
        """TVM's ``T.Cast(dtype, value)``: ``T.cast`` with the arguments the other way round."""
        bound, _ = self.bind(node, "Cast", ["dtype", "value"], 2, 'T.Cast("int64", x)')
        dtype = self.dtype_arg(bound["dtype"])
        value = self.prim(bound["value"])
        if value.dtype.lanes != dtype.lanes:
            self.fail(
                node, f"T.Cast from {value.dtype} to {dtype} changes the number of lanes", "a dtype with the same lanes"
            )
        return Cast(dtype, value)

    def call_min_value(self, node: ast.Call) -> PrimExpr:
        bound, _ = self.bind(node, "min_value", ["dtype"], 1, 'T.min_value("float32")')
        dtype = self.dtype_arg(bound["dtype"])
        return const(_lowest(dtype), dtype)

    def call_max_value(self, node: ast.Call) -> PrimExpr:
        bound, _ = self.bind(node, "max_value", ["dtype"], 1, 'T.max_value("int8")')
        dtype = self.dtype_arg(bound["dtype"])
        return const(_highest(dtype), dtype)

    def call_select(self, node: ast.Call) -> PrimExpr:
        bound, _ = self.bind(node, "select", ["cond", "true_value", "false_value"], 3, USAGE["select"])
        cond = self.condition(bound["cond"], "T.select")
        a, b = self.unify(
            self.value(bound["true_value"]),
            bound["true_value"],
            self.value(bound["false_value"]),
            bound["false_value"],
            "branches of T.select",
            node,
        )
        return Select(cond, a, b)

    def _int_binary(self, node: ast.Call, name: str, cls: type[BinaryOp], ints_only: bool) -> PrimExpr:
        bound, _ = self.bind(node, name, ["a", "b"], 2, USAGE[name])
        a, b = self.unify(
            self.value(bound["a"]), bound["a"], self.value(bound["b"]), bound["b"], f"arguments of T.{name}", node
        )
        if ints_only and not a.dtype.element.is_integer:
            self.fail(node, f"T.{name} needs integer operands, got {a.dtype}", "integers; use '/' for floats")
        return cls(a, b)

    def call_truncdiv(self, node: ast.Call) -> PrimExpr:
        return self._int_binary(node, "truncdiv", Div, True)

    def call_floordiv(self, node: ast.Call) -> PrimExpr:
        return self._int_binary(node, "floordiv", FloorDiv, False)

    def call_floormod(self, node: ast.Call) -> PrimExpr:
        return self._int_binary(node, "floormod", FloorMod, False)

    def _shift(self, node: ast.Call, name: str) -> tuple[PrimExpr, int]:
        bound, _ = self.bind(node, name, ["a", "b"], 2, f"T.{name}(x, 2)")
        value = self.prim(bound["a"])
        if not value.dtype.element.is_integer:
            self.fail(node, f"T.{name} needs an integer operand, got {value.dtype}", "an integer")
        amount = self.python_int(bound["b"], "the shift amount")
        if not 0 <= amount < value.dtype.bits:
            self.fail(bound["b"], f"shift by {amount} of a {value.dtype}", f"a constant in [0, {value.dtype.bits})")
        return value, amount

    def call_shift_left(self, node: ast.Call) -> PrimExpr:
        """TVM's ``T.shift_left(x, c)`` with a constant ``c``: ``x * 2**c`` (the same bits)."""
        value, amount = self._shift(node, "shift_left")
        return value * const(1 << amount, value.dtype) if amount else value

    def call_shift_right(self, node: ast.Call) -> PrimExpr:
        """``T.shift_right(x, c)``, arithmetic for signed integers: ``floordiv(x, 2**c)``."""
        value, amount = self._shift(node, "shift_right")
        return FloorDiv(value, const(1 << amount, value.dtype)) if amount else value

    def call_ceildiv(self, node: ast.Call) -> PrimExpr:
        bound, _ = self.bind(node, "ceildiv", ["a", "b"], 2, "T.ceildiv(n, 4)")
        a, b = self.unify(self.value(bound["a"]), bound["a"], self.value(bound["b"]), bound["b"], "T.ceildiv", node)
        if not a.dtype.element.is_integer:
            self.fail(node, f"T.ceildiv needs integer operands, got {a.dtype}", "integers")
        return FloorDiv(a + b - const(1, b.dtype), b)

    def call_likely(self, node: ast.Call) -> PrimExpr:
        """TVM's branch hint ``T.likely(cond)``: the condition itself."""
        bound, _ = self.bind(node, "likely", ["cond"], 1, "T.likely(i < n)")
        return self.condition(bound["cond"], "T.likely")

    def lanes(self, node: ast.expr) -> int:
        lanes = self.python_int(node, "the number of lanes")
        if lanes < 2:
            self.fail(node, f"a vector needs at least 2 lanes, got {lanes}", "lanes >= 2")
        return lanes

    def call_ramp(self, node: ast.Call) -> PrimExpr:
        bound, _ = self.bind(node, "ramp", ["base", "stride", "lanes"], 3, USAGE["ramp"])
        base, stride = self.unify(
            self.value(bound["base"]),
            bound["base"],
            self.value(bound["stride"]),
            bound["stride"],
            "base and stride of T.ramp",
            node,
        )
        if base.dtype.lanes != 1:
            self.fail(bound["base"], f"T.ramp needs a scalar base, got {base.dtype}", "a scalar base and stride")
        return Ramp(base, stride, self.lanes(bound["lanes"]))

    def call_broadcast(self, node: ast.Call) -> PrimExpr:
        bound, _ = self.bind(node, "broadcast", ["value", "lanes"], 2, USAGE["broadcast"])
        value = self.prim(bound["value"])
        if value.dtype.lanes != 1:
            self.fail(bound["value"], f"T.broadcast needs a scalar value, got {value.dtype}", "a scalar value")
        return Broadcast(value, self.lanes(bound["lanes"]))

    def call_allocate(self, node: ast.Call) -> NoReturn:
        self.fail(
            node,
            "T.allocate is printed for lowered programs and cannot be parsed",
            "T.alloc_buffer(shape, dtype) in a block",
        )

    def call_let(self, node: ast.Call) -> NoReturn:
        self.fail(node, "T.let is printed for lowered programs and cannot be parsed", "x = value as a statement")

    def call_dtype(self, node: ast.Call, marker: dialect.DTypeMarker) -> PrimExpr:
        name = marker.name
        if not node.args and not node.keywords:
            self.fail(node, f"T.{name}() declares a variable and must be assigned to a name", f"n = T.{name}()")
        bound, _ = self.bind(node, name, ["value"], 1, f"T.{name}(value)")
        arg = bound["value"]
        value = self.eval(arg)
        dtype = marker.dtype
        elem = dtype.element
        if isinstance(value, str):
            number = dialect.float_from_text(value)
            if number is None or not elem.is_float:
                self.fail(
                    arg,
                    f"T.{name} cannot be made from the string {value!r}",
                    'a number, or "inf" / "-inf" / "nan" for float types',
                )
            value = number
        if isinstance(value, PrimExpr):
            if value.dtype.lanes != dtype.lanes:
                self.fail(
                    node,
                    f"T.{name} of {a_dtype(value.dtype)} value changes the number of lanes",
                    'T.cast(x, "dtype") with the same lanes',
                )
            return Cast(dtype, value)
        if not is_number(value):
            self.reject_as_value(arg, value, f"a value for T.{name}")
        if elem.is_bool:
            if value not in (0, 1):
                self.fail(arg, f"T.bool needs True or False, got {value!r}", "True or False")
            return self.literal(bool(value), dtype, arg)
        if isinstance(value, float) and not elem.is_float:
            if not value.is_integer():
                self.fail(arg, f"T.{name} cannot hold the non-integer {value!r}", f"an integer value for {name}")
            value = int(value)
        if isinstance(value, bool):
            value = int(value)
        return self.literal(value, dtype, arg)

    def call_arg(self, node: ast.expr) -> PrimExpr:
        """An argument of an explicit-dtype call: strings become ``StringImm``."""
        value = self.eval(node)
        if isinstance(value, str):
            return StringImm(value, span=self.source.span(node))
        if isinstance(value, PrimExpr) or is_number(value):
            return self.to_prim(value, node)
        self.reject_as_value(node, value, "a call argument")

    def call_op(self, node: ast.Call, name: str, info: OpInfo, requested: DataType | None = None) -> PrimExpr:
        """A registered operation (``tir.ir.ops``): math, ``if_then_else``, target intrinsics.

        ``requested`` is the type a ``dtype=`` keyword gave (TVM's form); Python literal operands
        take it when no operand has a type of its own."""
        usage = op_usage(name, info)
        if info.dtype_rule == "explicit":
            if any(k.arg == "dtype" for k in node.keywords):
                # TVM's T.call_extern("name", args..., dtype="int32"): the keyword is the first argument.
                self.check_plain_call(node)
                for keyword in node.keywords:
                    if keyword.arg != "dtype":
                        self.fail(keyword, f"T.{name} has no argument '{keyword.arg}'", usage)
                bound = {"dtype": next(k.value for k in node.keywords if k.arg == "dtype")}
                extra = list(node.args)
            else:
                bound, extra = self.bind(node, name, ["dtype"], 1, usage, variadic=True)
            dtype = self.dtype_arg(bound["dtype"])
            if len(extra) < info.min_args or (info.max_args is not None and len(extra) > info.max_args):
                self.fail(node, f"T.{name} got {len(extra)} arguments after the dtype", usage)
            return Call(dtype, name, tuple(self.call_arg(a) for a in extra))
        self.check_plain_call(node)
        count = len(node.args)
        if node.keywords:
            self.fail(node.keywords[0], f"T.{name} takes no keyword arguments", usage)
        if count < info.min_args or (info.max_args is not None and count > info.max_args):
            if info.max_args == info.min_args:
                expected_count = f"{info.min_args} argument{'s' if info.min_args != 1 else ''}"
            elif info.max_args is None:
                expected_count = f"at least {info.min_args} arguments"
            else:
                expected_count = f"{info.min_args} to {info.max_args} arguments"
            self.fail(
                node, f"T.{name} takes {expected_count} but {count} {'was' if count == 1 else 'were'} given", usage
            )
        if info.dtype_rule == "branch":
            cond = self.condition(node.args[0], f"T.{name}")
            branches = [self.value(node.args[1]), self.value(node.args[2])]
            if requested is not None and not any(isinstance(v, PrimExpr) for v in branches):
                branches = [self.literal(v, requested, sub) for v, sub in zip(branches, node.args[1:])]
            a, b = self.unify(branches[0], node.args[1], branches[1], node.args[2], f"branches of T.{name}", node)
            return Call(a.dtype, name, (cond, a, b))
        values = [self.value(a) for a in node.args]
        if requested is not None and info.dtype_rule == "same" and not any(isinstance(v, PrimExpr) for v in values):
            values = [self.literal(v, requested, sub) for v, sub in zip(values, node.args)]
        args = self.unify_all(values, node.args, f"arguments of T.{name}", node, float_default=info.float_only)
        dtype = args[0].dtype
        if info.float_only and not dtype.is_float:
            self.fail(node.args[0], f"T.{name} needs a float argument, got {dtype}", f'T.{name}(T.cast(x, "float32"))')
        if info.int_only and not dtype.element.is_integer:
            self.fail(node.args[0], f"T.{name} needs integer arguments, got {dtype}", "integers")
        if info.dtype_rule == "bool":
            dtype = BOOL.with_lanes(dtype.lanes)
        return Call(dtype, name, tuple(args))


def _lowest(dtype: DataType) -> int | float:
    """TVM's ``min_value``: the most negative finite value (floats too, not -inf)."""
    if dtype.is_float:
        import numpy as np

        return float(np.finfo(_numpy_float(dtype)).min)
    return dtype.min_value()


def _highest(dtype: DataType) -> int | float:
    if dtype.is_float:
        import numpy as np

        return float(np.finfo(_numpy_float(dtype)).max)
    return dtype.max_value()


def _numpy_float(dtype: DataType) -> str:
    # bfloat16 has float32's range; numpy has no bfloat16.
    return {16: "float16", 32: "float32", 64: "float64"}[dtype.bits] if dtype.kind != "bfloat" else "float32"
