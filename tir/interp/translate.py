"""Translate a PrimFunc into the source of one Python function.

The generated code is plain Python: nested ``for ... in range(...)`` loops, ``if`` statements,
numpy element accesses with tuple indices, and calls of the helpers in
``tir.interp.runtime`` where a dtype rule needs one. ``tir.interp.to_python(f)`` shows it.

Integer values are Python ints; an operation's result is wrapped to its bit width unless the
value ranges of the operands prove it fits. The same ranges prove most buffer indices in
bounds; the other accesses are checked at run time (see ``runtime.check_index``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tir.interp import batched, distribute, runtime
from tir.ir import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    Allocate,
    And,
    Block,
    BlockRealize,
    Broadcast,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    Call,
    Cast,
    CmpOp,
    DataType,
    Div,
    Evaluate,
    FloatImm,
    FloorDiv,
    FloorMod,
    For,
    ForKind,
    IfThenElse,
    IntImm,
    IterKind,
    Let,
    LetStmt,
    Max,
    Min,
    Mul,
    Not,
    Or,
    PrimExpr,
    PrimFunc,
    Ramp,
    Select,
    SeqStmt,
    Stmt,
    StringImm,
    Sub,
    Var,
    free_vars,
)
from tir.ir.constant import constant_array
from tir.ir.ops import is_tile_op, tile_accesses

#: CPython refuses more than 20 nested loops in one function; deeper loops move into a
#: nested function (``def _partN(): ...; _partN()``), which starts a fresh count.
_MAX_LOOP_DEPTH = 16
#: Indentation from which statements go to a module-level function (Python allows 100 levels).
_MAX_INDENT = 80


def _free_names(source: str, known_globals: set[str]) -> list[str]:
    """Names a function's source reads but binds nowhere and that are not globals or builtins."""
    import ast
    import builtins

    tree = ast.parse(source)
    loaded: set[str] = set()
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.arg)):
            bound.add(node.name if isinstance(node, ast.FunctionDef) else node.arg)
    return sorted(loaded - bound - known_globals - set(dir(builtins)))


_ARITH_OPS = {Add: "+", Sub: "-", Mul: "*"}
_COMPARE_OPS = {EQ: "==", NE: "!=", LT: "<", LE: "<=", GT: ">", GE: ">="}

#: LLVM intrinsics (``llvm.<name>.<type>``) and C math functions the interpreter can run,
#: mapped to the math op they compute.
_LLVM_INTRINSICS = {
    "fma": "fma",
    "fmuladd": "fma",
    "sqrt": "sqrt",
    "exp": "exp",
    "exp2": "exp2",
    "log": "log",
    "log2": "log2",
    "log10": "log10",
    "sin": "sin",
    "cos": "cos",
    "floor": "floor",
    "ceil": "ceil",
    "trunc": "trunc",
    "round": "round",
    "fabs": "fabs",
    "pow": "pow",
    "maxnum": "maxnum",
    "minnum": "minnum",
}
#: Overload suffixes of an intrinsic name (``llvm.aarch64.neon.sdot.v4i32.v16i8``): dropped to
#: look the name up in ``runtime.SIMD_INTRINSICS``.
_OVERLOAD_SUFFIX = re.compile(r"(\.v\d+i\d+)+$")
_EXTERN_FUNCTIONS = {
    name: name
    for name in ("exp", "exp2", "log", "log2", "log10", "sqrt", "tanh", "erf", "sin", "cos", "floor", "ceil", "trunc")
} | {"round": "round", "fabs": "fabs", "pow": "pow", "fma": "fma", "fmax": "maxnum", "fmin": "minnum"}


_BITWISE_OPS = {"bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^", "bitwise_not": "~"}


@dataclass(frozen=True)
class Code:
    """Python source of an expression; ``lo``/``hi`` bound its (integer) value, else None."""

    text: str
    lo: int | None = None
    hi: int | None = None


def _ranges(*codes: Code) -> list[tuple[int, int]] | None:
    """The ``(lo, hi)`` of every code, or None when some value range is unknown."""
    out = []
    for code in codes:
        if code.lo is None or code.hi is None:
            return None
        out.append((code.lo, code.hi))
    return out


def _int_range(dtype: DataType) -> tuple[int, int]:
    return int(dtype.min_value()), int(dtype.max_value())


def _is_int(dtype: DataType) -> bool:
    return dtype.is_integer


def _sanitize(name: str) -> str:
    text = re.sub(r"\W", "_", name) or "v"
    return "v" + text if text[0].isdigit() else text


class Translator:
    """Turns one PrimFunc into Python source; see the module docstring.

    After ``translate()``: ``source`` is the code, ``entry_name`` the function to call,
    ``entry_vars`` / ``entry_buffers`` its parameters, ``namespace`` its globals.
    """

    def __init__(self, func: PrimFunc, poison: bool = True) -> None:
        self.func = func
        self.poison = poison
        self.lines: list[str] = []
        #: Module-level functions for statements nested too deeply to emit in place.
        self.outlined: list[str] = []
        self.indent = 0
        self.loop_depth = 0
        self.counter = 0
        self.var_names: dict[Var, str] = {}
        self.var_bounds: dict[Var, tuple[int, int]] = {}
        self.buffer_names: dict[Buffer, str] = {}
        #: For buffers with a run-time elem_offset: the identifier holding it.
        self.buffer_offsets: dict[Buffer, str] = {}
        self.namespace: dict[str, Any] = dict(runtime.HELPERS)
        self.namespace["_run_batch"] = batched.run_tuples
        self.func_constants = func.constants
        self._constants: dict[tuple[str, str], str] = {}
        self.entry_name = "_entry"
        self.entry_vars: list[Var] = []
        self.entry_buffers: list[Buffer] = []
        self.source = ""
        #: What loop distribution needs to know about the function (computed when first asked).
        self._facts: distribute.Facts | None = None
        #: Lane indices (threadIdx.x minus its start) of the enclosing threadIdx.x loops.
        self.lane_vars: list[str] = []

    # ------------------------------------------------------------ names and scopes

    def fresh(self, name: str) -> str:
        # Every identifier for an IR object ends in _<number>; helpers and constants never do.
        self.counter += 1
        return f"{_sanitize(name)}_{self.counter}"

    def define_var(self, var: Var, bounds: tuple[int | None, int | None] | None = None) -> str:
        name = self.fresh(var.name)
        self.var_names[var] = name
        if _is_int(var.dtype) and var.dtype.is_scalar:
            full_lo, full_hi = _int_range(var.dtype)
            lo = full_lo if bounds is None or bounds[0] is None else max(bounds[0], full_lo)
            hi = full_hi if bounds is None or bounds[1] is None else min(bounds[1], full_hi)
            self.var_bounds[var] = (lo, hi)
        return name

    def undefine_var(self, var: Var) -> None:
        self.var_names.pop(var, None)
        self.var_bounds.pop(var, None)

    def define_buffer(self, buffer: Buffer) -> str:
        if buffer.dtype.lanes != 1:
            raise NotImplementedError(f"buffer {buffer.name}: buffers of vector dtype {buffer.dtype} are not supported")
        name = self.fresh(buffer.name)
        self.buffer_names[buffer] = name
        return name

    def buffer_name(self, buffer: Buffer) -> str:
        name = self.buffer_names.get(buffer)
        if name is None:
            raise ValueError(
                f"function {self.func.name}: buffer {buffer.name} is used where it is not defined "
                "(not a parameter, nor allocated or matched by an enclosing block)"
            )
        return name

    def constant(self, value: Any, dtype: DataType) -> str:
        key = (str(dtype), repr(value))
        name = self._constants.get(key)
        if name is None:
            name = f"_k{len(self._constants)}"
            self._constants[key] = name
            self.namespace[name] = value
        return name

    # ------------------------------------------------------------ emission

    def line(self, text: str) -> None:
        self.lines.append("    " * self.indent + text)

    def body(self, stmt: Stmt) -> None:
        """Emit ``stmt`` one level deeper; an empty body becomes ``pass``."""
        if self.indent >= _MAX_INDENT:
            self.indent += 1
            self._outline(stmt)
            self.indent -= 1
            return
        self.indent += 1
        start = len(self.lines)
        self.stmt(stmt)
        if len(self.lines) == start:
            self.line("pass")
        self.indent -= 1

    def translate(self) -> str:
        func = self.func
        params = []
        for param in func.params:
            if isinstance(param, Buffer):
                params.append(self.define_buffer(param))
                self.entry_buffers.append(param)
            else:
                if param.dtype.is_handle:
                    raise NotImplementedError(
                        f"function {func.name}: handle parameter {param.name} is not supported; "
                        "declare it as a T.Buffer"
                    )
                params.append(self.define_var(param))
                self.entry_vars.append(param)
        # Variables of buffer shapes, strides and offsets that are not parameters are bound
        # from the arrays passed in: they are parameters of the generated function too.
        for buffer in self.entry_buffers:
            exprs = [*buffer.shape, *buffer.strides]
            if buffer.elem_offset is not None:
                exprs.append(buffer.elem_offset)
            for var in free_vars(tuple(exprs)):
                if var not in self.var_names:
                    params.append(self.define_var(var))
                    self.entry_vars.append(var)
            if isinstance(buffer.elem_offset, Var):
                self.buffer_offsets[buffer] = self.var_names[buffer.elem_offset]
        self.line(f"def {self.entry_name}({', '.join(params)}):")
        self.line(f"    # PrimFunc {func.name!r}, translated by tir.interp")
        self.body(func.body)
        self.source = "\n".join(self.outlined + self.lines) + "\n"
        return self.source

    # ------------------------------------------------------------ statements

    def stmt(self, stmt: Stmt) -> None:
        method = getattr(self, "_stmt_" + type(stmt).__name__, None)
        if method is None:
            raise NotImplementedError(f"the interpreter does not support the statement {type(stmt).__name__}")
        method(stmt)

    def _stmt_SeqStmt(self, stmt: SeqStmt) -> None:
        for item in stmt.stmts:
            self.stmt(item)

    def _stmt_Evaluate(self, stmt: Evaluate) -> None:
        if isinstance(stmt.value, (IntImm, FloatImm, StringImm)):
            return  # T.evaluate(0) is a no-op
        self.line(self.expr(stmt.value).text)

    def _stmt_LetStmt(self, stmt: LetStmt) -> None:
        value = self.expr(stmt.value)
        name = self.define_var(stmt.var, (value.lo, value.hi))
        self.line(f"{name} = {value.text}")
        self.stmt(stmt.body)
        self.undefine_var(stmt.var)

    def _stmt_IfThenElse(self, stmt: IfThenElse) -> None:
        self.line(f"if {self.expr(stmt.condition).text}:")
        self.body(stmt.then_case)
        if stmt.else_case is not None:
            self.line("else:")
            self.body(stmt.else_case)

    def _stmt_For(self, stmt: For) -> None:
        if self.loop_depth >= _MAX_LOOP_DEPTH:
            self._in_nested_function(stmt)
            return
        parts = self._distributed(stmt)
        if parts is not None:
            # Copies moved out of the nest (tir.interp.distribute: hoisted, sunk or run once),
            # so that what remains is nests the batched evaluator can take.
            for part in parts:
                self.stmt(part)
            return
        call = self._batched_call(stmt)
        if call is not None:
            # A nest around one block runs as numpy array operations (tir.interp.batched);
            # when a run-time check fails there, the scalar loops below run instead.
            self.line(f"if not {call}:")
            self.indent += 1
            self._serial_for(stmt)
            self.indent -= 1
            return
        self._serial_for(stmt)

    def _distributed(self, stmt: For) -> list[Stmt] | None:
        if not batched.enabled():
            return None
        if self._facts is None:
            self._facts = distribute.function_facts(self.func)
        return distribute.distribute(stmt, self._facts)

    def _batched_call(self, stmt: For) -> str | None:
        if not batched.enabled() or self.lane_vars:
            return None
        found = batched.plan(stmt)
        if found is None:
            return None
        if any(var not in self.var_names for var in found.free_vars):
            return None
        if any(buffer not in self.buffer_names or buffer in self.buffer_offsets for buffer in found.buffers):
            return None
        name = f"_batch{len([k for k in self.namespace if k.startswith('_batch') and k[6:].isdigit()])}"
        self.namespace[name] = found
        values = self.tuple_text(self.var_names[var] for var in found.free_vars)
        arrays = self.tuple_text(self.buffer_names[buffer] for buffer in found.buffers)
        return f"_run_batch({name}, {values}, {arrays})"

    def _serial_for(self, stmt: For) -> None:
        start, extent = self.expr(stmt.min), self.expr(stmt.extent)
        if isinstance(stmt.min, IntImm) and stmt.min.value == 0:
            domain = f"range({extent.text})"
        else:
            domain = f"range({start.text}, {start.text} + {extent.text})"
        bounds = None
        if start.lo is not None and extent.hi is not None and start.hi is not None:
            bounds = (start.lo, start.hi + max(extent.hi, 1) - 1)
        name = self.define_var(stmt.loop_var, bounds)
        # Every loop kind runs as a serial loop, in order (thread-bound ones included).
        comment = "" if stmt.kind is ForKind.SERIAL else f"  # {stmt.thread_tag or stmt.kind.value!r}"
        self.line(f"for {name} in {domain}:{comment}")
        self.loop_depth += 1
        is_lane = stmt.thread_tag == "threadIdx.x"
        if is_lane:
            self.lane_vars.append(f"({name} - {start.text})")
        self.body(stmt.body)
        if is_lane:
            self.lane_vars.pop()
        self.loop_depth -= 1
        self.undefine_var(stmt.loop_var)

    def _in_nested_function(self, stmt: Stmt) -> None:
        name = f"_part{self.counter + 1}x"
        self.counter += 1
        saved_depth, self.loop_depth = self.loop_depth, 0
        self.line(f"def {name}():")
        self.body(stmt)
        self.line(f"{name}()")
        self.loop_depth = saved_depth

    def _outline(self, stmt: Stmt) -> None:
        """Emit ``stmt`` as a module-level function called from here: Python's tokenizer allows
        only 100 levels of indentation, and a nested ``def`` still counts its enclosing ones.
        The function takes the enclosing locals it reads as parameters (found by parsing it:
        identifiers are unique, so a name it reads but never binds comes from outside)."""
        name = f"_part{self.counter + 1}x"
        self.counter += 1
        saved = self.lines, self.indent, self.loop_depth
        self.lines, self.indent, self.loop_depth = [], 0, 0
        self.line(f"def {name}():")
        self.body(stmt)
        inner, (self.lines, self.indent, self.loop_depth) = self.lines, saved
        free = _free_names("\n".join(inner), set(self.namespace) | {name})
        inner[0] = f"def {name}({', '.join(free)}):"
        self.outlined.extend(inner)
        self.line(f"{name}({', '.join(free)})")

    def _stmt_BufferStore(self, stmt: BufferStore) -> None:
        buffer = stmt.buffer
        value = self.expr(stmt.value)
        if stmt.value.dtype.element != buffer.dtype:
            raise TypeError(f"store of a {stmt.value.dtype} value into buffer {buffer.name} of dtype {buffer.dtype}")
        text = value.text
        if buffer.dtype.kind == "bfloat":
            text = f"_bf16_to_bits({text})"
        array = self.buffer_name(buffer)
        index, vector_axes = self.index(buffer, stmt.indices)
        if vector_axes > 1:
            self.line(f"_vstore({array}, {index}, {text})")
        else:
            self.line(f"{array}[{index}] = {text}")

    def _stmt_Allocate(self, stmt: Allocate) -> None:
        self.line(f"{self.define_buffer(stmt.buffer)} = {self.allocation(stmt.buffer, stmt.data)}")
        self.stmt(stmt.body)
        self.buffer_names.pop(stmt.buffer, None)

    def _stmt_Block(self, block: Block) -> None:
        if block.iter_vars:
            raise ValueError(f"block {block.name!r} has iterators but no BlockRealize binding them")
        self._block(block, [])

    def _stmt_BlockRealize(self, realize: BlockRealize) -> None:
        block = realize.block
        self.line(f"# block {block.name!r}")
        names = []
        for iter_var, value in zip(block.iter_vars, realize.iter_values):
            code = self.expr(value)
            names.append(self.define_var(iter_var.var, (code.lo, code.hi)))
            self.line(f"{names[-1]} = {code.text}")
        predicate = realize.predicate
        guarded = not (isinstance(predicate, IntImm) and predicate.value)
        if guarded:
            # A false predicate skips the block instance entirely.
            self.line(f"if {self.expr(predicate).text}:")
            self.indent += 1
        self._block(block, names)
        if guarded:
            self.indent -= 1

    def _block(self, block: Block, names: list[str]) -> None:
        start = len(self.lines)
        init_conditions = []
        for iter_var, name in zip(block.iter_vars, names):
            dom_min, dom_extent = self.expr(iter_var.dom.min), self.expr(iter_var.dom.extent)
            ranges = _ranges(self._expr_Var(iter_var.var), dom_min, dom_extent)
            proven = False
            if ranges is not None:
                (lo, hi), (min_lo, min_hi), (extent_lo, extent_hi) = ranges
                proven = lo >= min_hi and hi <= min_lo + extent_lo - 1
            if not proven:
                # An executed block instance must bind each iterator inside its domain.
                end = dom_extent.text if dom_min.text == "0" else f"{dom_min.text} + {dom_extent.text}"
                self.line(f"if not {dom_min.text} <= {name} < {end}:")
                self.line(
                    f"    _iter_error({block.name!r}, {iter_var.var.name!r}, {name}, {dom_min.text}, {dom_extent.text})"
                )
                if ranges is not None:  # past the check, the iterator is inside its domain
                    self.var_bounds[iter_var.var] = (max(lo, min_lo), min(hi, min_hi + extent_hi - 1))
            if iter_var.kind is IterKind.REDUCE:
                init_conditions.append(f"{name} == {dom_min.text}")
        for buffer in block.alloc_buffers:
            self.line(f"{self.define_buffer(buffer)} = {self.allocation(buffer)}")
        match_vars = []
        for match in block.match_buffers:
            match_vars += self.match_buffer(match.buffer, match.source)
        if block.init is not None:
            if init_conditions:
                # T.init runs when every reduction iterator is at the start of its domain.
                self.line(f"if {' and '.join(init_conditions)}:")
                self.body(block.init)
            else:
                self.stmt(block.init)
        self.stmt(block.body)
        if len(self.lines) == start:
            self.line("pass")
        for buffer in block.alloc_buffers:
            self.buffer_names.pop(buffer, None)
        for match in block.match_buffers:
            self.buffer_names.pop(match.buffer, None)
        for var in [iter_var.var for iter_var in block.iter_vars] + match_vars:
            self.undefine_var(var)

    def allocation(self, buffer: Buffer, data: tuple[int | float, ...] | None = None) -> str:
        values = data if data is not None else self.func_constants.get(buffer)
        if values is not None:  # T.allocate_const: a fresh copy of its values
            name = f"_const_{sum(1 for key in self.namespace if key.startswith('_const_'))}"
            shape = buffer.const_shape()
            if shape is None:
                raise ValueError(f"constant buffer {buffer.name} has a symbolic shape")
            self.namespace[name] = constant_array(values, buffer.dtype, shape)
            return f"{name}.copy()"
        shape = self.tuple_text(self.expr(extent).text for extent in buffer.shape)
        args = f"{shape}, {str(buffer.dtype)!r}, {self.poison}"
        if buffer.strides:
            args += ", " + self.tuple_text(self.expr(stride).text for stride in buffer.strides)
        return f"_alloc({args})"

    def match_buffer(self, buffer: Buffer, source_region: BufferRegion) -> list[Var]:
        """Bind ``buffer`` to a view of ``source_region``; returns the variables it defines."""
        source = source_region.buffer
        defined: list[Var] = []
        if source.dtype != buffer.dtype:
            raise TypeError(
                f"match_buffer {buffer.name} of dtype {buffer.dtype} views {source.name} of dtype {source.dtype}"
            )
        source_name = self.buffer_name(source)
        region = self.tuple_text(f"({self.expr(r.min).text}, {self.expr(r.extent).text})" for r in source_region.region)
        # Shape variables not bound yet are defined by the match: they take the region's extents.
        unbound = [var for var in free_vars(buffer.shape) if var not in self.var_names]
        name = self.define_buffer(buffer)
        if unbound:
            if len(buffer.shape) != len(source_region.region):
                raise NotImplementedError(
                    f"match_buffer {buffer.name}: a symbolic shape needs as many dimensions as the region"
                )
            self.line(f"{name} = _match({source_name}, {region}, None, {buffer.name!r}, {source.name!r})")
            for axis, extent in enumerate(buffer.shape):
                if isinstance(extent, Var) and extent not in self.var_names:
                    self.line(f"{self.define_var(extent)} = {name}.shape[{axis}]")
                    defined.append(extent)
            shape = self.tuple_text(self.expr(extent).text for extent in buffer.shape)
            self.line(f"if {name}.shape != {shape}:")
            self.line(f"    _unsupported('match_buffer {buffer.name} with shape ' + str({shape}))")
        else:
            shape = self.tuple_text(self.expr(extent).text for extent in buffer.shape)
            self.line(f"{name} = _match({source_name}, {region}, {shape}, {buffer.name!r}, {source.name!r})")
        if buffer.strides:
            # Stride variables take the view's strides; given strides must agree with them.
            expected = []
            for axis, stride in enumerate(buffer.strides):
                if isinstance(stride, Var) and stride not in self.var_names:
                    self.line(f"{self.define_var(stride)} = _estrides({name})[{axis}]")
                    defined.append(stride)
                    expected.append("None")
                else:
                    expected.append(self.expr(stride).text)
            self.line(f"_check_strides({name}, {self.tuple_text(expected)}, {buffer.name!r})")
        offset = buffer.elem_offset
        if isinstance(offset, Var) and offset not in self.var_names:
            source_offset = self.buffer_offsets.get(source, "0")
            offset_name = self.define_var(offset)
            self.line(f"{offset_name} = _eoffset({name}, {source_name}, {source_offset})")
            self.buffer_offsets[buffer] = offset_name
            defined.append(offset)
        return defined

    @staticmethod
    def tuple_text(items: Any) -> str:
        items = list(items)
        return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"  # () when empty

    # ------------------------------------------------------------ buffer access

    def index(self, buffer: Buffer, indices: tuple[PrimExpr, ...]) -> tuple[str, int]:
        """Index text for ``buffer[indices]`` and the number of vector axes."""
        if len(indices) != len(buffer.shape):
            raise ValueError(
                f"buffer {buffer.name} has {len(buffer.shape)} dimensions, accessed with {len(indices)} indices"
            )
        codes = [self.expr(index) for index in indices]
        vector_axes = sum(1 for index in indices if index.dtype.lanes > 1)
        in_bounds = True
        for code, extent in zip(codes, buffer.shape):
            size = extent.value if isinstance(extent, IntImm) else None
            if code.lo is None or code.hi is None or size is None or code.lo < 0 or code.hi >= size:
                in_bounds = False
        if not codes:
            text = "()"
        elif vector_axes > 1:
            text = self.tuple_text(code.text for code in codes)
        else:
            text = ", ".join(code.text for code in codes)
        if not in_bounds:
            text = f"_chk({self.buffer_name(buffer)}, {self.tuple_text(code.text for code in codes)}, {buffer.name!r})"
        return text, vector_axes

    def _expr_BufferLoad(self, load: BufferLoad) -> Code:
        buffer = load.buffer
        array = self.buffer_name(buffer)
        index, vector_axes = self.index(buffer, load.indices)
        if vector_axes > 1:
            text = f"_vload({array}, {index})"
        elif vector_axes == 0 and (buffer.dtype.is_integer or buffer.dtype.is_bool):
            # .item() gives a Python int / bool, the representation of integer scalars.
            text = f"{array}.item({'' if index == '()' else index})"
        else:
            text = f"{array}[{index}]"
        if buffer.dtype.kind == "bfloat":
            text = f"_bf16_from_bits({text})"
        return self.full(load.dtype, text)

    # ------------------------------------------------------------ expressions

    def expr(self, expr: PrimExpr) -> Code:
        for cls, op in _ARITH_OPS.items():
            if type(expr) is cls:
                return self.arith(expr, op)
        if isinstance(expr, CmpOp):
            a, b = self.expr(expr.a), self.expr(expr.b)
            return Code(f"({a.text} {_COMPARE_OPS[type(expr)]} {b.text})")
        method = getattr(self, "_expr_" + type(expr).__name__, None)
        if method is None:
            raise NotImplementedError(f"the interpreter does not support the expression {type(expr).__name__}")
        return method(expr)  # type: ignore[no-any-return]

    def full(self, dtype: DataType, text: str) -> Code:
        """Code whose value may be anything of ``dtype``."""
        if _is_int(dtype):
            return Code(text, *_int_range(dtype))
        return Code(text)

    def fitted(self, dtype: DataType, text: str, lo: int | None, hi: int | None) -> Code:
        """Integer result with the mathematical range [lo, hi]: wrapped unless it surely fits."""
        full_lo, full_hi = _int_range(dtype)
        if lo is not None and hi is not None and full_lo <= lo and hi <= full_hi:
            return Code(text, lo, hi)
        if dtype.is_vector:
            return Code(text, full_lo, full_hi)  # numpy integer arrays wrap by themselves
        return Code(f"_wrap_{dtype.element}({text})", full_lo, full_hi)

    def float_result(self, dtype: DataType, text: str) -> Code:
        """A float operation on float operands; numpy scalars round to their own type."""
        if dtype.kind == "bfloat":
            return Code(f"_bf16_round({text})")
        return Code(text)

    def _expr_Var(self, var: Var) -> Code:
        name = self.var_names.get(var)
        if name is None:
            raise ValueError(f"function {self.func.name}: variable {var.name} is used where it is not defined")
        lo, hi = self.var_bounds.get(var, (None, None))
        return Code(name, lo, hi)

    def _expr_IntImm(self, imm: IntImm) -> Code:
        if imm.dtype.is_bool:
            return Code(repr(bool(imm.value)))
        return Code(str(imm.value) if imm.value >= 0 else f"({imm.value})", imm.value, imm.value)

    def _expr_FloatImm(self, imm: FloatImm) -> Code:
        value = runtime.FLOAT_ROUNDERS[str(imm.dtype)](imm.value)
        return Code(self.constant(value, imm.dtype))

    def _expr_StringImm(self, imm: StringImm) -> Code:
        return Code(repr(imm.value))

    def arith(self, expr: Any, op: str) -> Code:
        a, b = self.expr(expr.a), self.expr(expr.b)
        text = f"({a.text} {op} {b.text})"
        if not _is_int(expr.dtype):
            return self.float_result(expr.dtype, text)
        ranges = _ranges(a, b)
        if ranges is None:
            return self.fitted(expr.dtype, text, None, None)
        (a_lo, a_hi), (b_lo, b_hi) = ranges
        if op == "+":
            return self.fitted(expr.dtype, text, a_lo + b_lo, a_hi + b_hi)
        if op == "-":
            return self.fitted(expr.dtype, text, a_lo - b_hi, a_hi - b_lo)
        corners = [x * y for x in (a_lo, a_hi) for y in (b_lo, b_hi)]
        return self.fitted(expr.dtype, text, min(corners), max(corners))

    def _division(self, expr: Any, int_text: str, a: Code, b: Code, rounding: Any) -> Code:
        ranges = _ranges(a, b)
        if ranges is None:
            return self.fitted(expr.dtype, int_text, None, None)
        (a_lo, a_hi), (b_lo, b_hi) = ranges
        if b_lo > 0 or b_hi < 0:
            corners = [rounding(x, y) for x in (a_lo, a_hi) for y in (b_lo, b_hi)]
            return self.fitted(expr.dtype, int_text, min(corners), max(corners))
        # The divisor may be zero (which gives 0) or +-1: |a / b| <= |a| for any other b.
        largest = max(abs(a_lo), abs(a_hi))
        return self.fitted(expr.dtype, int_text, -largest, largest)

    @staticmethod
    def _may_be_zero(b: Code) -> bool:
        ranges = _ranges(b)
        return ranges is None or ranges[0][0] <= 0 <= ranges[0][1]

    # Integer division by zero gives 0 and ``MIN // -1`` wraps to ``MIN`` (numpy's convention,
    # docs/dialect.md "Integer division"; the LLVM backend emits the same). numpy arrays (vector
    # lanes) behave so by themselves; Python ints go through a helper when the divisor may be 0.
    def _expr_FloorDiv(self, expr: FloorDiv) -> Code:
        a, b = self.expr(expr.a), self.expr(expr.b)
        if not _is_int(expr.dtype):
            return self.float_result(expr.dtype, f"_ffloordiv({a.text}, {b.text})")
        if expr.dtype.is_vector or not self._may_be_zero(b):
            text = f"({a.text} // {b.text})"
        else:
            text = f"_floordiv0({a.text}, {b.text})"
        return self._division(expr, text, a, b, lambda x, y: x // y)

    def _expr_Div(self, expr: Div) -> Code:
        a, b = self.expr(expr.a), self.expr(expr.b)
        if not _is_int(expr.dtype):
            return self.float_result(expr.dtype, f"({a.text} / {b.text})")
        # Integer Div truncates toward zero, as in C.
        return self._division(expr, f"_tdiv({a.text}, {b.text})", a, b, runtime.trunc_div)

    def _expr_FloorMod(self, expr: FloorMod) -> Code:
        a, b = self.expr(expr.a), self.expr(expr.b)
        if not _is_int(expr.dtype):
            return self.float_result(expr.dtype, f"_ffloormod({a.text}, {b.text})")
        if expr.dtype.is_vector or not self._may_be_zero(b):
            text = f"({a.text} % {b.text})"  # Python's % has the sign of the divisor: floor modulo
        else:
            text = f"_floormod0({a.text}, {b.text})"
        ranges = _ranges(b)
        if ranges is None:
            return self.full(expr.dtype, text)
        ((b_lo, b_hi),) = ranges
        if b_lo > 0:
            return Code(text, 0, b_hi - 1)
        if b_hi < 0:
            return Code(text, b_lo + 1, 0)
        largest = max(abs(b_lo), abs(b_hi), 1) - 1
        return Code(text, -largest, largest)

    def _min_max(self, expr: Any, name: str) -> Code:
        a, b = self.expr(expr.a), self.expr(expr.b)
        if expr.dtype.is_vector:
            text = f"_v{name}({a.text}, {b.text})"
        elif _is_int(expr.dtype) or expr.dtype.is_bool:
            text = f"{name}({a.text}, {b.text})"
        else:
            text = f"_f{name}({a.text}, {b.text})"
        ranges = _ranges(a, b)
        if _is_int(expr.dtype) and ranges is not None:
            pick = min if name == "min" else max
            (a_lo, a_hi), (b_lo, b_hi) = ranges
            return Code(text, pick(a_lo, b_lo), pick(a_hi, b_hi))
        return self.full(expr.dtype, text)

    def _expr_Min(self, expr: Min) -> Code:
        return self._min_max(expr, "min")

    def _expr_Max(self, expr: Max) -> Code:
        return self._min_max(expr, "max")

    # And / Or evaluate both operands (no short circuit), like Select.
    def _expr_And(self, expr: And) -> Code:
        return Code(f"({self.expr(expr.a).text} & {self.expr(expr.b).text})")

    def _expr_Or(self, expr: Or) -> Code:
        return Code(f"({self.expr(expr.a).text} | {self.expr(expr.b).text})")

    def _expr_Not(self, expr: Not) -> Code:
        a = self.expr(expr.a)
        return Code(f"np.logical_not({a.text})" if expr.dtype.is_vector else f"(not {a.text})")

    def _expr_Select(self, expr: Select) -> Code:
        c, t, f = self.expr(expr.condition), self.expr(expr.true_value), self.expr(expr.false_value)
        return self.union(expr.dtype, f"_select({c.text}, {t.text}, {f.text})", t, f)

    def union(self, dtype: DataType, text: str, t: Code, f: Code) -> Code:
        ranges = _ranges(t, f)
        if _is_int(dtype) and ranges is not None:
            (t_lo, t_hi), (f_lo, f_hi) = ranges
            return Code(text, min(t_lo, f_lo), max(t_hi, f_hi))
        return self.full(dtype, text)

    def _expr_Let(self, expr: Let) -> Code:
        value = self.expr(expr.value)
        name = self.define_var(expr.var, (value.lo, value.hi))
        body = self.expr(expr.body)
        self.undefine_var(expr.var)
        return Code(f"({name} := {value.text}, {body.text})[1]", body.lo, body.hi)

    def _expr_Ramp(self, expr: Ramp) -> Code:
        base, stride = self.expr(expr.base), self.expr(expr.stride)
        text = f"_ramp({base.text}, {stride.text}, {expr.lanes}, {str(expr.dtype.element)!r})"
        ranges = _ranges(base, stride)
        if not _is_int(expr.dtype) or ranges is None:
            return self.full(expr.dtype, text)
        (base_lo, base_hi), (stride_lo, stride_hi) = ranges
        last = expr.lanes - 1
        return self.fitted(expr.dtype, text, base_lo + min(0, stride_lo * last), base_hi + max(0, stride_hi * last))

    def _expr_Broadcast(self, expr: Broadcast) -> Code:
        value = self.expr(expr.value)
        return Code(f"_broadcast({value.text}, {expr.lanes}, {str(expr.dtype.element)!r})", value.lo, value.hi)

    def _expr_Cast(self, expr: Cast) -> Code:
        value = self.expr(expr.value)
        source, target = expr.value.dtype, expr.dtype
        vector = target.is_vector
        name = str(target.element)
        if source.element == target.element:
            return value
        if target.is_bool:
            return Code(f"({value.text} != 0)")  # anything -> bool is "!= 0"
        if _is_int(target):
            if source.is_float:
                return self.full(target, f"_float_to_int({value.text}, {name!r})")
            if source.is_bool:
                text = f"{value.text}.astype(np.{name})" if vector else f"int({value.text})"
                return Code(text, 0, 1)
            # int -> int keeps the value when it fits, else wraps to the narrower width.
            text = f"{value.text}.astype(np.{name})" if vector else value.text
            return self.fitted(target, text, value.lo, value.hi)
        # -> float. bfloat16 from float32 / float16 (exact in float32) rounds the float32 bits;
        # from anything wider goes through the careful float64 path.
        if target.kind == "bfloat" and source.is_float and source.bits <= 32:
            return Code(f"_bf16_round(_to_float32({value.text}))")
        return Code(f"_to_{name}({value.text})")

    # ------------------------------------------------------------ calls

    def _expr_Call(self, call: Call) -> Code:
        op = call.op
        if is_tile_op(op):
            return self.tile_op(call)
        if op == "cuda_syncthreads":
            return Code("None")  # thread-bound loops run in order: nothing to wait for
        if op in ("ptx_cp_async_commit_group", "ptx_cp_async_wait_group"):
            return Code("None")  # cp.async copies complete at once here
        if op == "ptx_cp_async":
            return self.cp_async(call)
        if op == "if_then_else":
            return self.if_then_else(call)
        if op in ("call_llvm_intrin", "call_llvm_pure_intrin", "call_extern"):
            return self.external_call(call)
        if op == "tir.parallel_launch":
            # An outlined parallel loop (lower_parallel): its iterations run in order.
            name = call.args[0]
            assert isinstance(name, StringImm)
            start, extent = (self.expr(arg).text for arg in call.args[1:3])
            captured = [self.expr(arg).text for arg in call.args[3:]]
            return Code(f"_parallel_launch({name.value!r}, {start}, {start} + {extent}, {', '.join(captured)})")
        if op == "tir.address_of":
            # A captured buffer, passed by its first element's address: here, the array itself.
            load = call.args[0]
            assert isinstance(load, BufferLoad)
            return Code(self.buffer_name(load.buffer))
        args = [self.expr(arg) for arg in call.args]
        texts = [arg.text for arg in args]
        if op == "abs":
            if _is_int(call.dtype):
                a = args[0]
                if a.lo is None or a.hi is None:
                    return self.fitted(call.dtype, f"abs({texts[0]})", None, None)
                low = 0 if a.lo <= 0 <= a.hi else min(abs(a.lo), abs(a.hi))
                return self.fitted(call.dtype, f"abs({texts[0]})", low, max(abs(a.lo), abs(a.hi)))
            return Code(f"abs({texts[0]})")  # exact for floats
        if op == "isnan":
            return Code(f"np.isnan({texts[0]})")
        if op in _BITWISE_OPS and _is_int(call.dtype):
            # Python ints and numpy integer arrays are two's complement: &, |, ^ of values in
            # range stay in range; ~ of an unsigned value wraps.
            text = f"(~{texts[0]})" if op == "bitwise_not" else f"({texts[0]} {_BITWISE_OPS[op]} {texts[1]})"
            if op == "bitwise_not" and not call.dtype.is_int:
                return self.fitted(call.dtype, text, None, None)
            return self.full(call.dtype, text)
        return self.math(call.dtype, op, texts, f"T.{op}")

    def math(self, dtype: DataType, op: str, texts: list[str], what: str) -> Code:
        """A float math op: computed in float64, then rounded once to ``dtype``."""
        if not dtype.is_float:
            return Code(f"_unsupported({(what + ' on ' + str(dtype))!r})")
        name = str(dtype.element)
        if op == "fma":
            return Code(f"_fma({', '.join(texts)}, {name!r})")
        if op in runtime.MATH_F64:
            args = ", ".join(f"_f64({text})" for text in texts)
            return Code(f"_to_{name}(_m_{op}({args}))")
        return Code(f"_unsupported({what!r})")

    def tile_op(self, call: Call) -> Code:
        """A CUDA warp-level tile op (``runtime.tile_op``): its buffer loads are references to
        tiles, passed as (array, first element, tile shape), not evaluated. It runs once per
        warp: under a ``threadIdx.x`` loop (the warp's lanes) only lane 0 runs it."""
        tiles = dict(tile_accesses(call))
        refs, values = [], []
        for position, arg in enumerate(call.args):
            if position in tiles and isinstance(arg, BufferLoad):
                index = self.tuple_text(self.expr(i).text for i in arg.indices)
                refs.append(f"({self.buffer_name(arg.buffer)}, {index}, {tiles[position]})")
                values.append("None")
            else:
                refs.append("None")
                values.append(self.expr(arg).text)
        text = f"_tile_op({call.op!r}, [{', '.join(refs)}], [{', '.join(values)}])"
        if self.lane_vars:
            text = f"({text} if {self.lane_vars[-1]} == 0 else None)"
        return Code(text)

    def cp_async(self, call: Call) -> Code:
        """``ptx_cp_async(dst[..], src[..], bytes)``: a plain copy of the contiguous elements."""
        dst, src, nbytes = call.args
        assert isinstance(dst, BufferLoad) and isinstance(src, BufferLoad) and isinstance(nbytes, IntImm)
        count = nbytes.value * 8 // dst.buffer.dtype.bits
        refs = []
        for ref in (dst, src):
            index = self.tuple_text(self.expr(i).text for i in ref.indices)
            refs.append(f"{self.buffer_name(ref.buffer)}, {index}")
        return Code(f"_cp_async({refs[0]}, {refs[1]}, {count})")

    def if_then_else(self, call: Call) -> Code:
        c, t, f = (self.expr(arg) for arg in call.args)
        if call.args[0].dtype.is_vector:
            text = f"_vif({c.text}, lambda: {t.text}, lambda: {f.text})"
        else:
            # Only the taken branch is evaluated: a Python conditional expression.
            text = f"({t.text} if {c.text} else {f.text})"
        return self.union(call.dtype, text, t, f)

    def external_call(self, call: Call) -> Code:
        if not call.args or not isinstance(call.args[0], StringImm):
            raise ValueError(f"{call.op} needs the callee name as its first argument")
        callee = call.args[0].value
        what = f"{call.op} {callee!r}"
        texts = [self.expr(arg).text for arg in call.args[1:]]
        op = None
        parts = callee.split(".")
        if call.op == "call_extern":
            base = callee[:-1] if callee.endswith("f") and callee[:-1] in _EXTERN_FUNCTIONS else callee
            op = _EXTERN_FUNCTIONS.get(base)
        elif len(parts) >= 2 and parts[0] == "llvm":
            simd = runtime.SIMD_INTRINSICS.get(_OVERLOAD_SUFFIX.sub("", callee))
            if simd is not None:
                return self.simd_call(call, simd, texts, what)
            op = _LLVM_INTRINSICS.get(parts[1])
        if op is None:
            return Code(f"_unsupported({what!r})")
        return self.math(call.dtype, op, texts, what)

    def simd_call(
        self, call: Call, spec: tuple[str, str, tuple[tuple[int, int], ...]], texts: list[str], what: str
    ) -> Code:
        """A target-specific integer SIMD intrinsic (``runtime.SIMD_INTRINSICS``).

        Its operand dtypes are checked here, once, so that a mistyped call fails with the
        intrinsic's name rather than with a numpy shape error deep in a run.
        """
        helper, result, operands = spec
        lanes = call.dtype.lanes
        args = call.args[1:]
        shapes_ok = str(call.dtype.element) == result and lanes > 1 and len(args) == len(operands)
        if shapes_ok:
            for arg, (per_lane, bits) in zip(args, operands):
                shapes_ok = shapes_ok and arg.dtype.lanes == per_lane * lanes and arg.dtype.bits == bits
        if not shapes_ok:
            wanted = ", ".join(f"{bits}-bit x {per_lane} lanes per result lane" for per_lane, bits in operands)
            got = ", ".join(str(arg.dtype) for arg in args)
            raise TypeError(f"{what}: returns {result} vectors from ({wanted}); the call has {call.dtype} from ({got})")
        return self.full(call.dtype, f"{helper}({', '.join(texts)})")
