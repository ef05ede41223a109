"""The reference interpreter: run any PrimFunc on numpy arrays.

``tir.interpret(f, *args)`` checks the arguments against ``f.params``, translates ``f`` into a
Python function (``to_python(f)`` shows its source), and runs it; outputs are written into the
argument arrays in place. It is the test oracle of the project, so it is written to be plainly
right first and fast second.

Semantics, in short (the details are in the docstrings of ``tir.interp.runtime``):

- Every arithmetic result has its dtype: float16/float32/float64 round each operation (numpy
  scalars of that type), bfloat16 rounds the float32 result to nearest even, integers wrap
  around at their bit width (two's complement). ``Div`` on integers truncates toward zero,
  ``FloorDiv`` / ``FloorMod`` round toward negative infinity; an integer division or modulo by
  zero gives 0 and ``MIN // -1`` wraps to ``MIN`` (numpy's convention, as the LLVM backend;
  docs/dialect.md "Integer division"). Float division follows IEEE (``1.0 / 0.0`` is inf).
- ``Cast`` float -> int truncates toward zero and saturates at the integer range; NaN becomes 0
  (as ``llvm.fptosi.sat``, docs/lowering.md). int -> narrower int wraps; anything -> bool is ``!= 0``.
- Math calls are computed in float64 and rounded once to the call's dtype; ``T.round`` is
  LLVM's ``llvm.round`` (halfway cases away from zero); float ``Min(a, b)`` is
  ``a if a < b else b`` (so a NaN operand gives ``b``), ``Max`` likewise.
- ``Select`` and ``And`` / ``Or`` evaluate all operands; ``if_then_else`` only the taken one
  (with a vector condition: each side only if some lane takes it).
- Loops of every kind (parallel, vectorized, thread-bound...) run serially, in order.
- A block instance binds its iterators, is skipped when its predicate is false, must bind
  every iterator inside its domain (else ``InterpretError``), gets fresh ``alloc_buffer``
  storage (poisoned: NaN for floats, bytes 0x5B for integers, True for bool, unless
  ``poison=False``, which gives zeros), binds ``match_buffer`` s to numpy views of their
  regions, runs ``init`` when every reduction iterator is at its domain minimum, then its body.
- Out-of-bounds accesses raise ``IndexError`` naming the buffer, the indices and the shape.

Speed: a loop nest around one block (a matrix product, an elementwise op, a convolution) runs
as numpy array operations over its spatial loops (``tir.interp.batched``), with results bit for
bit those of the instance-by-instance order; a 1024^3 matrix product takes seconds. What the
batched path cannot prove safe runs instance by instance (``TIR_INTERP_BATCH=0``: always).

A lowered function (one with ``attrs["param_shapes"]``, see ``tir.transform.flatten_buffers``)
takes either flat arrays or arrays of its parameters' original shapes (passed as flat views,
which binds the original shapes' variables).

Limitations: buffers of vector dtypes, ``handle`` parameters, and ``call_extern`` /
``call_llvm_intrin`` beyond a small table of math functions (``NotImplementedError``).
Thread-bound loops run one thread after another, so a kernel that needs a barrier between
threads of one loop (write shared memory, sync, read what other threads wrote) is not
modelled. A vector ``if_then_else`` whose lanes disagree evaluates both sides.
"""

from __future__ import annotations

import linecache
import numbers
from typing import Any

import numpy as np

from tir.analysis.written import written_params
from tir.interp.runtime import FLOAT_ROUNDERS, STORAGE_TYPES, InterpretError
from tir.interp.translate import Translator
from tir.ir import Buffer, IntImm, IRModule, PrimExpr, PrimFunc, Var

__all__ = ["InterpretError", "interpret", "to_python"]


def to_python(func: PrimFunc, poison: bool = True) -> str:
    """The Python source the interpreter runs for ``func`` (for reading and debugging)."""
    return Translator(_as_prim_func(func), poison).translate()


def interpret(func: PrimFunc | IRModule, *args: Any, poison: bool = True) -> None:
    """Run ``func`` on numpy arrays (buffer parameters) and scalars (scalar parameters).

    Arguments follow ``func.params``. Buffer arguments must be ``numpy.ndarray`` s of exactly
    the buffer's dtype (bfloat16: a ``uint16`` array of the raw bits, or an ``ml_dtypes``
    bfloat16 array) and shape, C-contiguous unless the buffer declares strides. Shape variables
    that are not parameters are bound from the arrays' shapes. Outputs are written in place.

    Raises ``TypeError`` / ``ValueError`` naming the parameter for a bad argument (a read-only
    array for a buffer the function writes included), ``IndexError``
    for an out-of-bounds access, ``InterpretError`` for other invalid executions.
    """
    prim_func = _as_prim_func(func)
    outlined = _outlined_bodies(func)
    with np.errstate(all="ignore"):
        _compile(prim_func, poison, outlined)(*args)


def _compile(func: PrimFunc, poison: bool, outlined: dict[str, PrimFunc]) -> Any:
    """A Python callable running ``func`` on its positional arguments (checked)."""
    translator = Translator(func, poison)
    source = translator.translate()
    filename = f"<tir.interp {func.name}>"
    # Let tracebacks through the generated code show its lines (one entry per function name).
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    code = compile(source, filename, "exec")
    translator.namespace["_parallel_launch"] = lambda name, begin, end, *captured: _launch(
        outlined, poison, name, begin, end, captured
    )
    exec(code, translator.namespace)
    entry = translator.namespace[translator.entry_name]

    def run(*args: Any) -> None:
        entry(**_bind_arguments(func, translator, args))

    return run


def _launch(outlined: dict[str, PrimFunc], poison: bool, name: str, begin: int, end: int, captured: tuple) -> None:
    """A parallel launch (``tir.parallel_launch``): the outlined body over [begin, end), in order."""
    body = outlined.get(name)
    if body is None:
        raise InterpretError(f"parallel launch of {name!r}: no such outlined function in the module")
    if end > begin:
        _compile(body, poison, outlined)(begin, end, *captured)


def _outlined_bodies(func: Any) -> dict[str, PrimFunc]:
    if not isinstance(func, IRModule):
        return {}
    from tir.transform.lower_parallel import OUTLINED_ATTR

    return {name: f for name, f in func.functions.items() if OUTLINED_ATTR in f.attrs}


def _as_prim_func(func: Any) -> PrimFunc:
    if isinstance(func, IRModule):
        from tir.transform.lower_parallel import OUTLINED_ATTR

        entries = [f for f in func.functions.values() if OUTLINED_ATTR not in f.attrs]
        if len(entries) != 1:
            raise TypeError(
                f"interpret() needs a PrimFunc or a module with one entry function; the IRModule has "
                f"{len(entries)}: {[f.name for f in entries]}"
            )
        func = entries[0]
    if not isinstance(func, PrimFunc):
        raise TypeError(f"interpret() needs a PrimFunc, got {type(func).__name__}")
    return func


# ---------------------------------------------------------------- argument binding


def _bind_arguments(func: PrimFunc, translator: Translator, args: tuple[Any, ...]) -> dict[str, Any]:
    """Check ``args`` against ``func.params``; returns the generated function's keyword arguments."""
    # Shape variables a lowering made parameters (tir.transform.bind_shape_vars) bind from the arrays.
    shape_vars = set(func.attrs.get("shape_vars") or ())
    given = [p for p in func.params if not (isinstance(p, Var) and p.name in shape_vars)]
    names = ", ".join(param.name for param in given)
    if len(args) != len(given):
        raise TypeError(f"{func.name}() takes {len(given)} arguments ({names}), {len(args)} given")
    values: dict[Var, Any] = {}  # scalar parameters and shape / stride variables
    arrays: dict[Buffer, np.ndarray] = {}
    # Scalar parameters first: buffer shapes may refer to them.
    for param, arg in zip(given, args):
        if isinstance(param, Var):
            values[param] = _scalar_argument(func, param, arg)
    original_shapes = func.attrs.get("param_shapes") or (None,) * len(func.params)
    for param, arg, original in zip(given, args, original_shapes):
        if isinstance(param, Buffer):
            if original is not None and _takes_original_shape(param, original, arg):
                # A lowered (flattened) function also takes arrays of the original shapes.
                for extent, actual in zip(original, arg.shape):
                    if isinstance(extent, Var) and extent not in values:
                        values[extent] = actual
                if not arg.flags.c_contiguous:
                    raise ValueError(f"{func.name}() parameter {param.name}: the array must be C-contiguous")
                arg = arg.reshape(-1)
            arrays[param] = _array_argument(func, param, arg)
    # Bare shape / stride variables take their values from the arrays (first use wins) ...
    for buffer, array in arrays.items():
        for extent, actual in zip(buffer.shape, array.shape):
            if isinstance(extent, Var) and extent not in values:
                values[extent] = actual
        if buffer.strides:
            for stride, actual in zip(buffer.strides, _element_strides(func, buffer, array)):
                if isinstance(stride, Var) and stride not in values:
                    values[stride] = actual
        if isinstance(buffer.elem_offset, Var) and buffer.elem_offset not in values:
            values[buffer.elem_offset] = 0  # an array's data starts at element 0 of its buffer
    # ... and then every shape and stride is checked against the arrays.
    for buffer, array in arrays.items():
        expected = tuple(_evaluate(func, translator, buffer, extent, values) for extent in buffer.shape)
        if expected != array.shape:
            raise ValueError(
                f"{func.name}() parameter {buffer.name}: expected shape {_shape_text(buffer.shape, expected)}, "
                f"got {tuple(array.shape)}"
            )
        if buffer.strides:
            actual = _element_strides(func, buffer, array)
            want = tuple(_evaluate(func, translator, buffer, stride, values) for stride in buffer.strides)
            if any(w != a and n != 1 for w, a, n in zip(want, actual, array.shape)):
                raise ValueError(
                    f"{func.name}() parameter {buffer.name}: expected strides {want} (elements), "
                    f"got {actual}"
                )
        elif not array.flags.c_contiguous:
            raise ValueError(
                f"{func.name}() parameter {buffer.name}: the array must be C-contiguous "
                f"(the buffer declares no strides); got strides {array.strides} bytes"
            )
    written = written_params(func)
    for buffer, array in arrays.items():
        if buffer.name in written and not array.flags.writeable:
            raise ValueError(
                f"{func.name}() parameter {buffer.name}: the array is read-only (flags.writeable is False: "
                f"a read-only view, memmap or buffer), but {func.name} writes {buffer.name}; pass a writable "
                "array (numpy.array(x) copies it)"
            )
    env = {translator.var_names[var]: values[var] for var in translator.entry_vars}
    env.update({translator.buffer_names[buffer]: array for buffer, array in arrays.items()})
    return env


def _takes_original_shape(buffer: Buffer, original: Any, arg: Any) -> bool:
    """Whether ``arg`` is an array of a flattened parameter's original (multi-dimensional) shape."""
    return (
        isinstance(arg, np.ndarray)
        and buffer.ndim == 1
        and isinstance(original, tuple)
        and len(original) != 1
        and arg.ndim == len(original)
    )


def _scalar_argument(func: PrimFunc, param: Var, arg: Any) -> Any:
    dtype = param.dtype
    where = f"{func.name}() parameter {param.name}"
    if dtype.is_bool:
        if not isinstance(arg, (bool, np.bool_)):
            raise TypeError(f"{where}: expected a bool, got {type(arg).__name__}")
        return bool(arg)
    if dtype.is_integer:
        if isinstance(arg, (bool, np.bool_)) or not isinstance(arg, numbers.Integral):
            raise TypeError(f"{where}: expected an integer for {dtype}, got {type(arg).__name__}")
        value = int(arg)
        if not dtype.min_value() <= value <= dtype.max_value():
            raise ValueError(f"{where}: {value} does not fit in {dtype}")
        return value
    if dtype.is_float:
        if isinstance(arg, (bool, np.bool_)) or not isinstance(arg, numbers.Real):
            raise TypeError(f"{where}: expected a number for {dtype}, got {type(arg).__name__}")
        return FLOAT_ROUNDERS[str(dtype)](float(arg))
    raise TypeError(f"{where}: parameters of dtype {dtype} are not supported")


def _array_argument(func: PrimFunc, buffer: Buffer, arg: Any) -> np.ndarray:
    where = f"{func.name}() parameter {buffer.name}"
    dtype = str(buffer.dtype)
    if dtype not in STORAGE_TYPES:
        raise TypeError(f"{where}: buffers of dtype {dtype} are not supported by the interpreter")
    shape_text = _shape_text(buffer.shape, None)
    if not isinstance(arg, np.ndarray):
        raise TypeError(
            f"{where}: expected a numpy.ndarray of dtype {dtype} and shape {shape_text}, got {type(arg).__name__}"
        )
    if dtype == "bfloat16" and arg.dtype.name == "bfloat16":
        arg = arg.view(np.uint16)  # an ml_dtypes bfloat16 array: the same bits
    storage = np.dtype(STORAGE_TYPES[dtype])
    if arg.dtype != storage:
        hint = " (bfloat16 buffers take a uint16 array of the raw bits)" if dtype == "bfloat16" else ""
        raise TypeError(f"{where}: expected dtype {dtype}{hint}, got {arg.dtype}")
    if arg.ndim != len(buffer.shape):
        raise ValueError(f"{where}: expected shape {shape_text} ({len(buffer.shape)} dimensions), got {arg.shape}")
    return arg


def _element_strides(func: PrimFunc, buffer: Buffer, array: np.ndarray) -> tuple[int, ...]:
    if any(stride % array.itemsize for stride in array.strides):
        raise ValueError(f"{func.name}() parameter {buffer.name}: strides {array.strides} are not whole elements")
    return tuple(stride // array.itemsize for stride in array.strides)


def _evaluate(func: PrimFunc, translator: Translator, buffer: Buffer, expr: PrimExpr, values: dict[Var, Any]) -> Any:
    """Value of a shape / stride expression, with the semantics of the generated code."""
    if isinstance(expr, IntImm):
        return expr.value
    if isinstance(expr, Var) and expr in values:
        return values[expr]
    text = translator.expr(expr).text
    env = {translator.var_names[var]: value for var, value in values.items() if var in translator.var_names}
    try:
        return eval(text, translator.namespace, env)
    except NameError:
        raise ValueError(
            f"{func.name}() parameter {buffer.name}: cannot determine {expr} from the arguments "
            "(give it as a scalar parameter or as a whole dimension of some buffer)"
        ) from None


def _shape_text(shape: tuple[PrimExpr, ...], values: tuple[Any, ...] | None) -> str:
    symbolic = tuple(extent.value if isinstance(extent, IntImm) else _expr_text(extent) for extent in shape)
    text = _tuple_text(symbolic)
    if values is not None and any(not isinstance(extent, IntImm) for extent in shape):
        text += f" = {_tuple_text(values)}"
    return text


def _tuple_text(items: tuple[Any, ...]) -> str:
    return f"({items[0]},)" if len(items) == 1 else "(" + ", ".join(str(item) for item in items) + ")"


def _expr_text(expr: PrimExpr) -> str:
    if isinstance(expr, Var):
        return expr.name
    try:
        return str(expr)
    except Exception:  # the printer may not know every node; never fail an error message
        return repr(expr)

