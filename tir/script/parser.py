"""The script parser: Python source (``ast``) -> ``PrimFunc`` / ``IRModule``.

``script(func)`` (the ``@T.script`` decorator) reads the decorated function's source with
``inspect``; ``parse(text)`` reads printed text. The function level (parameters, root block)
is handled here, statements by ``tir.script.parse_stmt``, expressions by
``tir.script.parse_expr``. Every error goes through ``tir.script.diagnostics``.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import textwrap
from collections.abc import Callable
from typing import Any

from tir.ir.buffer import Buffer
from tir.ir.dtype import as_dtype
from tir.ir.expr import Var
from tir.ir.function import CONSTANTS_ATTR, IRModule, PrimFunc
from tir.ir.node import Span
from tir.ir.stmt import (
    Block,
    BlockRealize,
)
from tir.script import dialect
from tir.script.diagnostics import ScriptError, Source, script_error
from tir.script.parse_block import BlockParser
from tir.script.parse_expr import ExprParser
from tir.script.parse_stmt import BUFFER_PARAMS, BlockFrame, true_const
from tir.script.rules import describe
from tir.script.scope import Env, Scope


class FunctionParser(BlockParser):
    """Parses one ``def`` into a ``PrimFunc``."""

    def __init__(self, source: Source, env: Env) -> None:
        super().__init__(source, env)
        self.handles: dict[Var, int] = {}  # unmatched handle parameter -> its position
        self.params: list[Var | Buffer] = []
        self.attrs: dict[str, Any] = {}

    # ------------------------------------------------------------------ functions

    def parse_function(self, node: ast.FunctionDef, check_decorators: bool) -> PrimFunc:
        if check_decorators:
            for decorator in node.decorator_list:
                options: list[ast.keyword] = []
                if isinstance(decorator, ast.Call) and not decorator.args:
                    options = decorator.keywords
                    decorator = decorator.func
                value = self.marker_of(decorator)
                if value not in (script, prim_func):
                    self.fail(decorator, "unknown decorator", "@T.script (or @T.prim_func), or no decorator")
                for option in options:
                    if option.arg not in _PRIM_FUNC_OPTIONS:
                        self.fail(option, f"unknown @T.prim_func option {option.arg!r}", "private=, s_tir= or none")
        args = node.args
        for extra, what in ((args.vararg, "*args"), (args.kwarg, "**kwargs")):
            if extra is not None:
                self.fail(extra, f"{what} parameters are not supported", "buffer and scalar parameters")
        for arg in args.kwonlyargs + args.posonlyargs:
            self.fail(arg, "keyword-only and positional-only parameters are not supported", "plain parameters")
        if args.defaults:
            self.fail(args.defaults[0], "parameter defaults are not supported", "a parameter without a default")

        body = list(node.body)
        if (
            body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            body = body[1:]
        body = [stmt for stmt in body if not self.declaration(stmt)]
        self.parse_params(node)
        body = [stmt for stmt in body if not self.function_header(stmt)]

        root_with = self.explicit_root(body)
        if root_with is not None:
            realize = self.parse_block(root_with, root_with.items[0].context_expr, is_root=True)  # type: ignore[arg-type]
        else:
            frame = BlockFrame("root", is_root=True)
            self.blocks.append(frame)
            self.scope.push()
            stmt = self.parse_stmts(body, block_level=True)
            self.scope.pop()
            self.blocks.pop()
            block = Block(
                "root",
                (),
                (),
                (),
                stmt,
                None,
                tuple(frame.alloc_buffers),
                tuple(frame.match_buffers),
                frame.annotations,
                span=self.span(node),
            )
            realize = BlockRealize((), true_const(), block, span=self.span(node))
        attrs = dict(self.attrs)
        if self.constants:
            attrs[CONSTANTS_ATTR] = tuple(self.constants)
        return PrimFunc(node.name, tuple(self.params), realize, attrs, span=self.span(node))

    def declaration(self, stmt: ast.stmt) -> bool:
        """``n = T.int32()``: a symbolic variable (shapes may use it). True if ``stmt`` is one."""
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
            return False
        found = self.call_marker(stmt.value)
        if found is None or not isinstance(found[1], dialect.DTypeMarker) or found[0].args or found[0].keywords:
            return False
        name = stmt.targets[0].id
        self.scope.define(name, Var(name, found[1].dtype, span=self.span(stmt.targets[0])))
        return True

    def parse_params(self, node: ast.FunctionDef) -> None:
        slots: list[Var | Buffer | None] = [None] * len(node.args.args)
        buffer_args = []
        for index, arg in enumerate(node.args.args):
            if arg.annotation is None:
                self.fail(
                    arg,
                    f"parameter '{arg.arg}' has no annotation",
                    f'{arg.arg}: T.Buffer((128,), "float32") or {arg.arg}: T.int32',
                )
            annotation = arg.annotation
            target = (
                annotation.func
                if isinstance(annotation, ast.Call)
                else annotation.value
                if isinstance(annotation, ast.Subscript)
                else annotation
            )
            marker = self.exprs.eval(target)
            if isinstance(marker, dialect.BufferMarker):
                buffer_args.append((index, arg))
                continue
            if isinstance(marker, dialect.DTypeMarker) and target is annotation:
                var = Var(arg.arg, marker.dtype, span=self.span(arg))
            elif marker is dialect.MARKERS["handle"] and target is annotation:
                var = Var(arg.arg, as_dtype("handle"), span=self.span(arg))
                self.handles[var] = index
            else:
                self.fail(
                    annotation,
                    f"unsupported annotation for parameter '{arg.arg}'",
                    'T.Buffer(shape, "dtype"), a dtype such as T.int32, or T.handle',
                )
            if self.scope.defined_in_innermost(arg.arg):
                self.fail(arg, f"parameter '{arg.arg}' is defined twice", "distinct parameter names")
            self.scope.define(arg.arg, var)
            slots[index] = var
        for index, arg in buffer_args:
            buffer_annotation = arg.annotation
            assert buffer_annotation is not None
            call: ast.Call
            if isinstance(buffer_annotation, ast.Subscript):
                items = (
                    buffer_annotation.slice.elts
                    if isinstance(buffer_annotation.slice, ast.Tuple)
                    else [buffer_annotation.slice]
                )
                call = ast.Call(func=buffer_annotation.value, args=list(items), keywords=[])
                ast.copy_location(call, buffer_annotation)
            elif isinstance(buffer_annotation, ast.Call):
                call = buffer_annotation
            else:
                self.fail(buffer_annotation, "T.Buffer needs a shape", 'T.Buffer((128, 128), "float32")')
            buffer = self.make_buffer(
                call, arg.arg, "Buffer", BUFFER_PARAMS, 'T.Buffer((128, 128), "float32")', span=self.span(arg)
            )
            if self.scope.defined_in_innermost(arg.arg):
                self.fail(arg, f"parameter '{arg.arg}' is defined twice", "distinct parameter names")
            self.scope.define(arg.arg, buffer)
            slots[index] = buffer
        self.params = [slot for slot in slots if slot is not None]

    def function_header(self, stmt: ast.stmt) -> bool:
        """``T.func_attr({...})`` and ``A = T.match_buffer(a, ...)`` of a handle parameter."""
        if isinstance(stmt, ast.Expr):
            found = self.call_marker(stmt.value)
            if found is not None and found[1] is dialect.MARKERS["func_attr"]:
                bound, _ = self.exprs.bind(found[0], "func_attr", ["attrs"], 1, 'T.func_attr({"key": value})')
                attrs = self.exprs.eval(bound["attrs"])
                if not isinstance(attrs, dict) or not all(isinstance(k, str) for k in attrs):
                    self.fail(
                        bound["attrs"],
                        f"T.func_attr needs a dict with string keys, got {describe(attrs)}",
                        'T.func_attr({"key": value})',
                    )
                self.attrs.update(attrs)
                return True
            return False
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
            return False
        found = self.call_marker(stmt.value)
        if found is None or found[1] is not dialect.MARKERS["match_buffer"] or not found[0].args:
            return False
        source_value = self.marker_of(found[0].args[0])
        if not (isinstance(source_value, Var) and source_value in self.handles):
            return False
        name = stmt.targets[0].id
        call = found[0]
        rest = ast.Call(func=call.func, args=call.args[1:], keywords=call.keywords)
        ast.copy_location(rest, call)
        buffer = self.make_buffer(
            rest,
            name,
            "match_buffer",
            BUFFER_PARAMS,
            'T.match_buffer(a, (128, 128), "float32")',
            span=self.span(stmt.targets[0]),
        )
        del self.handles[source_value]
        self.params = [buffer if p is source_value else p for p in self.params]
        self.scope.define(name, buffer)
        return True

    def explicit_root(self, body: list[ast.stmt]) -> ast.With | None:
        """The body is exactly ``with T.block("root"):``: that block is the root block itself."""
        if len(body) != 1 or not isinstance(body[0], ast.With) or len(body[0].items) != 1:
            return None
        found = self.call_marker(body[0].items[0].context_expr)
        if found is None or found[1] is not dialect.MARKERS["block"] or len(found[0].args) != 1:
            return None
        name_node = found[0].args[0]
        if isinstance(name_node, ast.Constant) and name_node.value == "root":
            return body[0]
        return None


# ---------------------------------------------------------------------- entry points


def _shift_positions(tree: ast.AST, line_offset: int, col_offset: int) -> None:
    """Make positions those of the original file (the source was cut out and dedented)."""
    if line_offset:
        ast.increment_lineno(tree, line_offset)
    if col_offset:
        for node in ast.walk(tree):
            if "col_offset" in node._attributes:
                node.col_offset += col_offset  # type: ignore[attr-defined]
                if getattr(node, "end_col_offset", None) is not None:
                    node.end_col_offset += col_offset  # type: ignore[attr-defined]


def _leading_spaces(text: str) -> int:
    return len(text) - len(text.lstrip())


def script(func: Callable[..., Any]) -> PrimFunc:
    """The ``@T.script`` decorator: parse the decorated function into a ``PrimFunc``.

    Names resolve through the function's closure, the scope it is defined in, its module
    globals and builtins. Errors raise ``ScriptError`` with the true file positions.
    """
    if not inspect.isfunction(func):
        raise TypeError(f"@T.script decorates a function, got {type(func).__name__}")
    try:
        lines, start = inspect.getsourcelines(func)
    except (OSError, TypeError) as exc:
        raise OSError(
            f"cannot read the source of {func.__name__!r} ({exc}); pass its text to tir.parse instead"
        ) from exc
    text = "".join(lines)
    dedented = textwrap.dedent(text)
    first = next((line for line in lines if line.strip()), "")
    first_dedented = next((line for line in dedented.splitlines() if line.strip()), "")
    indent = _leading_spaces(first) - _leading_spaces(first_dedented)
    filename = inspect.getsourcefile(func) or func.__code__.co_filename
    source = Source(filename, {start + i: line.rstrip("\n") for i, line in enumerate(lines)})
    line_offset = start - 1
    if _leading_spaces(first_dedented):
        # A string in the body reaches further left than the def: nest the def in an `if`
        # (one more line) instead, which keeps its columns.
        dedented = "if True:\n" + dedented
        line_offset -= 1
    try:
        tree = ast.parse(dedented, filename=filename)
    except RecursionError:
        raise _too_deep(source, filename) from None
    _shift_positions(tree, line_offset, indent)
    fdef = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == func.__name__), None)
    if fdef is None:
        raise OSError(f"cannot find the definition of {func.__name__!r} in its source")

    closure: dict[str, Any] = {}
    for name, cell in zip(func.__code__.co_freevars, func.__closure__ or ()):
        try:
            closure[name] = cell.cell_contents
        except ValueError:  # a cell not filled yet
            pass
    frame = inspect.currentframe()
    caller_locals: dict[str, Any] = {}
    if frame is not None and frame.f_back is not None:
        caller = frame.f_back
        if caller.f_locals is not caller.f_globals:  # defined inside a function: its locals
            caller_locals = dict(caller.f_locals)
    del frame
    env = Env(closure, caller_locals, func.__globals__)
    try:
        return FunctionParser(source, env).parse_function(fdef, check_decorators=False)
    except ScriptError as error:
        # The message already points into the user's source; the parser's own frames
        # would only bury it.
        raise error.with_traceback(None) from None
    except RecursionError:
        raise _too_deep(source, filename) from None


def prim_func(
    func: Callable[..., Any] | None = None, *, private: bool = False, s_tir: bool = False, check_well_formed: bool = True
) -> Any:
    """TVM's name for ``@T.script``; also ``@T.prim_func(private=True)`` and ``(s_tir=True)``,
    whose options change nothing here (every function is one PrimFunc)."""
    if func is None:
        return script
    return script(func)


#: Keyword arguments ``@T.prim_func(...)`` accepts (TVM's; none changes the program).
_PRIM_FUNC_OPTIONS = frozenset({"private", "s_tir", "check_well_formed"})


def _dialect_env() -> dict[str, Any]:
    module = importlib.import_module("tir.script")
    names = dict(dialect.public_markers())
    names["script"] = script
    names["prim_func"] = prim_func
    names["T"] = module
    names["I"] = importlib.import_module("tir.script.ir")
    return names


def parse(text: str, filename: str = "<string>") -> PrimFunc | IRModule:
    """Script text -> ``PrimFunc`` (one ``def``) or ``IRModule`` (several, keyed by name).

    ``T`` is bound to ``tir.script`` and the dialect's names are available bare. The text may
    start with imports of ``tir`` modules and assign Python constants (``N = 128``).
    """
    try:
        return _parse_text(text, filename)
    except ScriptError as error:
        raise error.with_traceback(None) from None
    except RecursionError:
        raise _too_deep(Source.from_text(text, filename), filename) from None


def _too_deep(source: Source, filename: str) -> ScriptError:
    """Python's parser (and ours) recurse once per operator: a sum of thousands of terms
    exhausts the stack. Say so instead of a RecursionError from deep inside."""
    # The longest line is the likeliest culprit.
    line = max(source.lines, key=lambda n: len(source.lines[n])) if source.lines else 1
    return ScriptError(
        source,
        Span(filename, line, 0, line, 1),
        "the program nests too deeply to parse (an expression of thousands of terms, or blocks nested hundreds deep)",
        "shorter expressions: accumulate a long sum over a loop or in several statements",
    )


def _parse_text(text: str, filename: str) -> PrimFunc | IRModule:
    source = Source.from_text(text, filename)
    try:
        tree = ast.parse(text, filename=filename)
    except SyntaxError as exc:
        line = exc.lineno or 1
        col = (exc.offset or 1) - 1
        raise ScriptError(source, Span(filename, line, col, line, col + 1), exc.msg, "valid Python syntax") from None
    module_names: dict[str, Any] = {}
    env = Env(module_names, _dialect_env())
    functions: dict[str, PrimFunc] = {}
    constants = ExprParser(source, env, Scope())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            if node.name in functions:
                raise script_error(source, node, f"function '{node.name}' is defined twice", "distinct function names")
            functions[node.name] = FunctionParser(source, env).parse_function(node, check_decorators=True)
        elif isinstance(node, ast.ClassDef):
            return _parse_ir_module(node, source, env)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            _run_import(node, module_names, source)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            module_names[node.targets[0].id] = constants.eval(node.value)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            continue
        else:
            raise script_error(
                source,
                node,
                "only functions, imports and constants may appear at the top level",
                "def name(...): with @T.script",
            )
    if not functions:
        raise script_error(
            source, Span(filename, 1, 0, 1, 1), "no function definition found", "def name(A: T.Buffer(...)):"
        )
    if len(functions) == 1:
        return next(iter(functions.values()))
    return IRModule(functions)


def _parse_ir_module(node: ast.ClassDef, source: Source, env: Env) -> IRModule:
    """``@I.ir_module class Module:`` holding ``@T.prim_func`` functions (TVM's form)."""
    from tir.script.ir import ir_module

    checker = FunctionParser(source, env)
    if len(node.decorator_list) != 1 or checker.marker_of(node.decorator_list[0]) is not ir_module:
        raise script_error(source, node, "a class must be decorated with @I.ir_module", "@I.ir_module class Module:")
    functions: dict[str, PrimFunc] = {}
    for item in node.body:
        if isinstance(item, ast.FunctionDef):
            if item.name in functions:
                raise script_error(source, item, f"function '{item.name}' is defined twice", "distinct function names")
            functions[item.name] = FunctionParser(source, env).parse_function(item, check_decorators=True)
        elif isinstance(item, ast.Expr) and isinstance(item.value, ast.Constant) and isinstance(item.value.value, str):
            continue
        else:
            raise script_error(source, item, "an @I.ir_module class holds only functions", "@T.prim_func def ...")
    if not functions:
        raise script_error(source, node, "the @I.ir_module class has no function", "@T.prim_func def main(...):")
    return IRModule(functions)


#: TVM's script modules, as imported in its printed programs, and what stands for them here.
_TVM_MODULES = {"tvm.script.tir": "tir.script", "tvm.script.ir": "tir.script.ir", "tvm.tir": "tir.script"}


def _run_import(node: ast.Import | ast.ImportFrom, names: dict[str, Any], source: Source) -> None:
    """Imports of ``tir`` modules (``import tir.script as T``) and of TVM's script modules
    (``from tvm.script import tir as T, ir as I``); anything else is an error."""
    if isinstance(node, ast.ImportFrom) and node.module in ("tvm.script", "tvm"):
        for alias in node.names:
            target = _TVM_MODULES.get(f"{node.module}.{alias.name}")
            if target is None:
                raise script_error(
                    source, node, f"{node.module}.{alias.name} has no counterpart here", "from tvm.script import tir as T"
                )
            names[alias.asname or alias.name] = importlib.import_module(target)
        return
    if isinstance(node, ast.Import) and all(alias.name in _TVM_MODULES and alias.asname for alias in node.names):
        for alias in node.names:
            names[alias.asname] = importlib.import_module(_TVM_MODULES[alias.name])  # type: ignore[index]
        return
    modules = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
    for module_name in modules:
        if module_name != "tir" and not module_name.startswith("tir.") and module_name != "__future__":
            raise script_error(
                source, node, f"only tir modules can be imported here, not {module_name!r}", "import tir.script as T"
            )
    if isinstance(node, ast.Import):
        for alias in node.names:
            module = importlib.import_module(alias.name)
            if alias.asname:
                names[alias.asname] = module
            else:
                names[alias.name.split(".")[0]] = importlib.import_module(alias.name.split(".")[0])
        return
    if node.module == "__future__":
        return
    module = importlib.import_module(node.module or "")
    for alias in node.names:
        try:
            names[alias.asname or alias.name] = getattr(module, alias.name)
        except AttributeError:
            raise script_error(
                source, node, f"{node.module} has no name {alias.name!r}", "a name of that module"
            ) from None


__all__ = ["ScriptError", "parse", "prim_func", "script"]
