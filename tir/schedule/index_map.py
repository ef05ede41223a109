"""``IndexMap``: an integer map ``(i, j, ...) -> (e0, e1, ...)`` for the layout primitives.

``transform_layout`` and ``transform_block_layout`` take the map as a Python lambda, as text,
or as an ``IndexMap``; traces store its text, so a schedule that used a lambda still saves to
JSON and replays:

    >>> m = IndexMap.from_func(lambda i, j: (i // 16, j, i % 16))
    >>> str(m)
    'lambda i, j: (i // 16, j, i % 16)'
    >>> IndexMap.parse(str(m))   # the same map (structurally)

The text is read with Python's ``ast`` and accepts integer arithmetic on the parameters only:
``+ - * // %``, unary minus, integer literals, ``min`` / ``max`` (also ``T.min`` / ``T.max``)
and typed integer constants such as ``T.int64(16)``. Nothing is evaluated with ``eval``.

A Python function may put TVM's marker ``IndexMap.AXIS_SEPARATOR`` between results
(``lambda i, j: (i, IndexMap.AXIS_SEPARATOR, j)``): the map then carries axis separators (the
number of results before each marker) that ``transform_layout`` gives the buffer; the text form
leaves them out (the trace records them as a ``set_axis_separator``).
"""

from __future__ import annotations

import ast
import inspect
import keyword
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from tir.ir import IntImm, Max, Min, PrimExpr, Var, convert, substitute
from tir.ir.dtype import INT32, DataType, as_dtype

__all__ = ["IndexMap", "IndexMapError"]

_RESERVED = {"T", "range", "True", "False", "None", "min", "max", "lambda"}


class IndexMapError(ValueError):
    """An index map that cannot be built, printed or read back."""


@dataclass(frozen=True, eq=False)
class IndexMap:
    """``lambda params: results``; ``params`` are Vars, ``results`` expressions of them;
    ``axis_separators`` where ``IndexMap.AXIS_SEPARATOR`` markers stood among the results."""

    #: TVM's marker between results: the buffer's physical dimensions split there.
    AXIS_SEPARATOR: ClassVar[str] = "axis_separator"

    params: tuple[Var, ...]
    results: tuple[PrimExpr, ...]
    axis_separators: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.params, tuple):
            object.__setattr__(self, "params", tuple(self.params))
        if not isinstance(self.results, tuple):
            object.__setattr__(self, "results", tuple(self.results))
        if not isinstance(self.axis_separators, tuple):
            object.__setattr__(self, "axis_separators", tuple(self.axis_separators))

    # ---------------------------------------------------------------- building

    @staticmethod
    def from_func(
        func: Callable[..., Any], ndim: int | None = None, dtypes: Sequence[DataType | str] | DataType | str = INT32
    ) -> IndexMap:
        """The map a Python function computes when called with one Var per parameter.

        ``dtypes`` is one dtype for every parameter or one per parameter; ``ndim`` (when given)
        is the number of parameters the function must take.
        """
        names = _parameter_names(func, ndim)
        params = tuple(Var(name, dtype) for name, dtype in zip(names, _dtypes(dtypes, len(names))))
        try:
            value = func(*params)
        except Exception as exc:  # the user's function; report what went wrong
            raise IndexMapError(f"calling the index map failed: {type(exc).__name__}: {exc}") from exc
        items = list(value) if isinstance(value, (tuple, list)) else [value]
        results: list[Any] = []
        separators: list[int] = []
        for item in items:
            if isinstance(item, str) and item == IndexMap.AXIS_SEPARATOR:
                separators.append(len(results))  # a separator before the next result
            else:
                results.append(item)
        return IndexMap(params, _results(results, params), tuple(separators))

    @staticmethod
    def parse(text: str, dtypes: Sequence[DataType | str] | DataType | str = INT32) -> IndexMap:
        """Read ``"lambda i, j: (i // 16, j, i % 16)"`` back into a map."""
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except SyntaxError as exc:
            raise IndexMapError(f"cannot read index map {text!r}: {exc.msg}") from exc
        node = tree.body
        if not isinstance(node, ast.Lambda):
            raise IndexMapError(f"an index map is written `lambda i, j: (...)`, got {text!r}")
        arguments = node.args
        if arguments.vararg or arguments.kwarg or arguments.kwonlyargs or arguments.defaults or arguments.posonlyargs:
            raise IndexMapError(f"index map {text!r}: only plain positional parameters are allowed")
        names = [arg.arg for arg in arguments.args]
        _check_names(names, text)
        params = tuple(Var(name, dtype) for name, dtype in zip(names, _dtypes(dtypes, len(names))))
        env = {param.name: param for param in params}
        body = node.body
        items = body.elts if isinstance(body, (ast.Tuple, ast.List)) else [body]
        results = tuple(_Reader(env, text).read(item) for item in items)
        return IndexMap(params, _results(results, params))

    @staticmethod
    def coerce(
        value: IndexMap | str | Callable[..., Any], ndim: int, dtypes: Sequence[DataType | str] | DataType | str = INT32
    ) -> IndexMap:
        """An ``IndexMap`` from a map, its text or a Python function, with ``ndim`` parameters
        of the given dtypes (a map of other dtypes is read again from its text)."""
        if isinstance(value, IndexMap):
            wanted = _dtypes(dtypes, len(value.params))
            if [p.dtype for p in value.params] == wanted:
                index_map = value
            else:
                index_map = IndexMap.parse(str(value), wanted)
                index_map = IndexMap(index_map.params, index_map.results, value.axis_separators)
        elif isinstance(value, str):
            index_map = IndexMap.parse(value, dtypes)
        elif callable(value):
            index_map = IndexMap.from_func(value, ndim, dtypes)
        else:
            raise IndexMapError(f"an index map is a lambda, its text or an IndexMap, got {type(value).__name__}")
        if len(index_map.params) != ndim:
            raise IndexMapError(f"the index map {index_map} takes {len(index_map.params)} indices, expected {ndim}")
        return index_map

    # ---------------------------------------------------------------- using

    @property
    def ndim_in(self) -> int:
        return len(self.params)

    @property
    def ndim_out(self) -> int:
        return len(self.results)

    def apply(self, indices: Sequence[PrimExpr]) -> list[PrimExpr]:
        """The results with the parameters replaced by ``indices`` (not simplified)."""
        if len(indices) != len(self.params):
            raise IndexMapError(f"the index map {self} takes {len(self.params)} indices, got {len(indices)}")
        vmap: dict[Var, PrimExpr] = dict(zip(self.params, indices))
        return [substitute(result, vmap) for result in self.results]

    def __str__(self) -> str:
        from tir.script.printer import expr_to_str

        params = ", ".join(param.name for param in self.params)
        results = [expr_to_str(result) for result in self.results]
        body = f"({results[0]},)" if len(results) == 1 else f"({', '.join(results)})"
        return f"lambda {params}: {body}"

    def __repr__(self) -> str:
        return f"IndexMap({str(self)!r})"


# ---------------------------------------------------------------- helpers


def _dtypes(dtypes: Sequence[DataType | str] | DataType | str, count: int) -> list[DataType]:
    if isinstance(dtypes, (str, DataType)):
        return [as_dtype(dtypes)] * count
    listed = [as_dtype(d) for d in dtypes]
    if len(listed) != count:
        raise IndexMapError(f"{len(listed)} dtypes for an index map of {count} parameters")
    return listed


def _parameter_names(func: Callable[..., Any], ndim: int | None) -> list[str]:
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError) as exc:
        raise IndexMapError(f"cannot read the parameters of the index map {func!r}") from exc
    names = []
    for param in signature.parameters.values():
        if param.kind not in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD) or param.default is not param.empty:
            raise IndexMapError(
                f"the index map must take plain positional parameters, one per index; it has {signature}"
            )
        names.append(param.name)
    if ndim is not None and len(names) != ndim:
        raise IndexMapError(f"the index map takes {len(names)} indices {names}, expected {ndim}")
    # Names must print as themselves and read back: rename the unusual ones.
    seen: set[str] = set()
    clean = []
    for k, name in enumerate(names):
        if not name.isidentifier() or keyword.iskeyword(name) or name in _RESERVED or name in seen:
            name = f"i{k}"
            while name in seen or name in names:
                name += "_"
        seen.add(name)
        clean.append(name)
    return clean


def _check_names(names: list[str], text: str) -> None:
    if len(set(names)) != len(names):
        raise IndexMapError(f"index map {text!r} repeats a parameter name")
    for name in names:
        if name in _RESERVED:
            raise IndexMapError(f"index map {text!r}: {name!r} cannot be a parameter name")


def _results(value: Any, params: Sequence[Var]) -> tuple[PrimExpr, ...]:
    items = list(value) if isinstance(value, (tuple, list)) else [value]
    if not items:
        raise IndexMapError("the index map returns no indices")
    dtype = params[0].dtype if params else INT32
    results = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (int, PrimExpr)):
            raise IndexMapError(f"the index map must return integer expressions, got {type(item).__name__} {item!r}")
        expr = convert(item, dtype)
        if not (expr.dtype.is_integer and expr.dtype.lanes == 1):
            raise IndexMapError(f"the index map must return integer expressions, got {expr} of dtype {expr.dtype}")
        results.append(expr)
    return tuple(results)


class _Reader:
    """Integer arithmetic on the parameters, from a Python expression tree."""

    def __init__(self, env: dict[str, Var], text: str) -> None:
        self.env = env
        self.text = text

    def fail(self, node: ast.AST, what: str) -> IndexMapError:
        return IndexMapError(f"index map {self.text!r}: {what} ({ast.unparse(node)!r}) is not allowed")

    def read(self, node: ast.expr) -> PrimExpr | int:
        if isinstance(node, ast.Name):
            if node.id not in self.env:
                raise self.fail(node, f"unknown name {node.id!r}")
            return self.env[node.id]
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, int):
                raise self.fail(node, "a non-integer constant")
            return node.value
        if isinstance(node, ast.UnaryOp):
            operand = self.read(node.operand)
            if isinstance(node.op, ast.USub):
                return -operand
            if isinstance(node.op, ast.UAdd):
                return operand
            raise self.fail(node, "this unary operator")
        if isinstance(node, ast.BinOp):
            a, b = self.read(node.left), self.read(node.right)
            op = node.op
            if isinstance(op, ast.Add):
                return a + b
            if isinstance(op, ast.Sub):
                return a - b
            if isinstance(op, ast.Mult):
                return a * b
            if isinstance(op, ast.FloorDiv):
                return a // b
            if isinstance(op, ast.Mod):
                return a % b
            raise self.fail(node, "this operator")
        if isinstance(node, ast.Call):
            return self.call(node)
        raise self.fail(node, "this expression")

    def call(self, node: ast.Call) -> PrimExpr | int:
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "T":
            name = func.attr
        elif isinstance(func, ast.Name):
            name = func.id
        else:
            raise self.fail(node, "this call")
        if name not in ("min", "max", "int8", "int16", "int32", "int64"):
            raise self.fail(node, f"the call {name}(...)")
        if node.keywords:
            raise self.fail(node, "a keyword argument")
        args = [self.read(arg) for arg in node.args]
        if name in ("min", "max") and len(args) == 2:
            a, b = args
            if not isinstance(a, PrimExpr) and not isinstance(b, PrimExpr):
                return min(a, b) if name == "min" else max(a, b)
            a_expr = a if isinstance(a, PrimExpr) else convert(a, b.dtype)  # type: ignore[union-attr]
            b_expr = b if isinstance(b, PrimExpr) else convert(b, a_expr.dtype)
            return (Min if name == "min" else Max)(a_expr, b_expr)
        if name in ("int8", "int16", "int32", "int64") and len(args) == 1 and isinstance(args[0], int):
            return IntImm(args[0], as_dtype(name))
        raise self.fail(node, f"the call {name}(...)")
