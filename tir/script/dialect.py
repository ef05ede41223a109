"""The marker objects of the script dialect.

Inside a ``@T.script`` function, ``T.grid``, ``T.block``, ``T.exp`` ... are never called by
Python: the parser reads the function's source and recognises these objects *by identity*
(after resolving a name through the function's closure, its module and builtins). Each
marker therefore only has to be a unique object with a name and a kind. Calling one at
Python run time raises a ``RuntimeError`` that says so, except:

- ``T.Buffer(...)`` / ``T.Buffer[...]`` return an inert ``BufferAnnotation`` (parameter
  annotations are evaluated when the ``def`` runs);
- dtype markers (``T.int32``, ``T.float16`` ...) used as constructors build IR constants and
  casts, which is harmless and handy in a REPL.
"""

from __future__ import annotations

from typing import Any

from tir.ir.dtype import SCALAR_DTYPES, DataType, as_dtype
from tir.ir.expr import Cast, PrimExpr, const
from tir.ir.ops import all_ops, get_op

#: Marker kinds, and how the parser accepts each.
EXPR = "expr"  # a value: T.cast, T.min, T.exp, ...
LOOP = "loop"  # the iterable of a for loop: T.grid, T.serial, ...
WITH = "with"  # a with-statement context: T.block, T.init
STMT = "stmt"  # a statement of its own: T.reads, T.where, T.evaluate, ...
ASSIGN = "assign"  # the right side of an assignment: T.alloc_buffer, T.remap, ...
ANNOTATION = "annotation"  # a parameter annotation: T.Buffer, T.handle
DTYPE = "dtype"  # T.int32 ...: annotation, typed constant, cast, variable declaration


class Marker:
    """A name of the dialect. The parser dispatches on ``name``; ``kind`` says where it may appear."""

    __slots__ = ("name", "kind")

    def __init__(self, name: str, kind: str) -> None:
        self.name = name
        self.kind = kind

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(
            f"T.{self.name}(...) only has a meaning inside a @T.script function, which is parsed, "
            "not run; decorate the function with @T.script (or pass its text to tir.parse)"
        )

    def __repr__(self) -> str:
        return f"<tir.script.{self.name}>"


class BufferAnnotation:
    """What ``T.Buffer(shape, dtype, ...)`` evaluates to at def time: inert, never used by the parser."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args = args
        self.kwargs = kwargs

    def __repr__(self) -> str:
        parts = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"T.Buffer({', '.join(parts)})"


class BufferMarker(Marker):
    """``T.Buffer``: a parameter annotation. Evaluates harmlessly when the def runs."""

    __slots__ = ()

    def __call__(self, *args: Any, **kwargs: Any) -> BufferAnnotation:
        return BufferAnnotation(*args, **kwargs)

    def __getitem__(self, item: Any) -> BufferAnnotation:
        return BufferAnnotation(*(item if isinstance(item, tuple) else (item,)))


class DTypeMarker(Marker):
    """``T.int32``, ``T.float16`` ...: an annotation, and outside scripts a constant/cast builder."""

    __slots__ = ("dtype",)

    def __init__(self, name: str) -> None:
        super().__init__(name, DTYPE)
        self.dtype: DataType = as_dtype(name)

    def __call__(self, *args: Any, **kwargs: Any) -> PrimExpr:
        if len(args) != 1 or kwargs:
            raise RuntimeError(
                f"T.{self.name}(value) takes one value outside a script; declarations such as "
                f"`n = T.{self.name}()` only have a meaning inside a @T.script function"
            )
        value = args[0]
        if isinstance(value, PrimExpr):
            return Cast(self.dtype, value)
        if isinstance(value, str) and self.dtype.is_float:
            return const(float(value), self.dtype)
        return const(value, self.dtype)


class AxisNamespace:
    """``T.axis.spatial`` / ``T.axis.reduce`` / ``T.axis.opaque`` / ``T.axis.remap`` (TVM spelling)."""

    def __init__(self, spatial: Marker, reduce: Marker, opaque: Marker, remap: Marker) -> None:
        self.spatial = self.S = spatial
        self.reduce = self.R = reduce
        self.opaque = self.O = opaque
        self.remap = remap

    def __repr__(self) -> str:
        return "<tir.script.axis>"


def _markers(kind: str, *names: str) -> dict[str, Marker]:
    return {name: Marker(name, kind) for name in names}


#: Every fixed marker by name; ``tir.script`` exports each under that name.
MARKERS: dict[str, Marker] = {}
MARKERS.update(_markers(LOOP, "grid", "serial", "parallel", "vectorized", "unroll", "thread_binding"))
MARKERS.update(_markers(WITH, "block", "init"))
MARKERS.update(_markers(STMT, "reads", "writes", "where", "block_attr", "func_attr", "evaluate"))
MARKERS.update(
    _markers(
        ASSIGN,
        "alloc_buffer",
        "allocate_const",
        "decl_buffer",
        "match_buffer",
        "spatial_axis",
        "reduce_axis",
        "opaque_axis",
        "remap",
    )
)
MARKERS.update(
    _markers(
        EXPR,
        "cast",
        "min",
        "max",
        "select",
        "truncdiv",
        "floordiv",
        "floormod",
        "ramp",
        "broadcast",
        "allocate",
        "let",
        "Cast",
        "min_value",
        "max_value",
        "shift_left",
        "shift_right",
        "ceildiv",
        "likely",
    )
)
MARKERS["Buffer"] = BufferMarker("Buffer", ANNOTATION)
MARKERS["handle"] = Marker("handle", ANNOTATION)
for _dtype_name in SCALAR_DTYPES:
    MARKERS[_dtype_name] = DTypeMarker(_dtype_name)

#: The names TVM 0.27 prints for blocks (``s_tir``): the same markers under a second name.
TVM_ALIASES = {
    "sblock": "block",
    "sblock_alloc_buffer": "alloc_buffer",
    "sblock_attr": "block_attr",
    "Select": "select",
}
for _alias, _name in TVM_ALIASES.items():
    MARKERS[_alias] = MARKERS[_name]

#: Markers of registered operations (``tir.ir.ops``), created on first use so that ops
#: registered later (target intrinsics) are reachable as ``T.<op>`` too.
_OP_MARKERS: dict[str, Marker] = {}
#: Markers of vector dtypes (``T.float32x8``), created on first use.
_VECTOR_DTYPE_MARKERS: dict[str, DTypeMarker] = {}


def op_marker(name: str) -> Marker | None:
    """The marker of the registered operation ``name`` (one object per name), or None."""
    marker = _OP_MARKERS.get(name)
    if marker is None and get_op(name) is not None and name not in MARKERS:
        marker = _OP_MARKERS[name] = Marker(name, EXPR)
    return marker


def dynamic_marker(name: str) -> Marker | None:
    """Markers not fixed at import: registered ops and vector dtypes such as ``float32x8``."""
    marker = op_marker(name)
    if marker is not None:
        return marker
    if name in _VECTOR_DTYPE_MARKERS:
        return _VECTOR_DTYPE_MARKERS[name]
    try:
        dtype = as_dtype(name)
    except (ValueError, TypeError):
        return None
    if dtype.is_vector and str(dtype) == name:
        _VECTOR_DTYPE_MARKERS[name] = DTypeMarker(name)
        return _VECTOR_DTYPE_MARKERS[name]
    return None


for _op_name in all_ops():
    op_marker(_op_name)

axis = AxisNamespace(MARKERS["spatial_axis"], MARKERS["reduce_axis"], MARKERS["opaque_axis"], MARKERS["remap"])


def public_markers() -> dict[str, Any]:
    """Every name the dialect exports (fixed markers, op markers known now, ``axis``)."""
    names: dict[str, Any] = dict(MARKERS)
    names.update(_OP_MARKERS)
    names["axis"] = axis
    return names


def float_from_text(text: str) -> float | None:
    """``"inf"``, ``"-inf"``, ``"nan"``, ``"1.5"`` as a float, or None when the text is no number."""
    try:
        return float(text)
    except ValueError:
        return None
