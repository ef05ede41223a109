"""Buffers, ranges and buffer regions."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tir.ir.dtype import DataType, as_dtype
from tir.ir.expr import ExprLike, IntImm, IterKind, PrimExpr, Var, convert
from tir.ir.node import Node

#: Storage scopes the language knows (docs/design.md section 3 and the CUDA intrinsics).
KNOWN_SCOPES = (
    "global",
    "shared",
    "shared.dyn",
    "local",
    "wmma.matrix_a",
    "wmma.matrix_b",
    "wmma.accumulator",
    "m16n8k16.matrixA",
    "m16n8k16.matrixB",
    "m16n8k16.matrixC",
)


@dataclass(frozen=True, eq=False, repr=False)
class Range(Node):
    """The half-open integer interval ``[min, min + extent)``."""

    min: PrimExpr
    extent: PrimExpr

    @staticmethod
    def from_extent(extent: ExprLike, start: ExprLike = 0) -> Range:
        extent_expr = convert(extent)
        return Range(convert(start, extent_expr.dtype), extent_expr)

    def __repr__(self) -> str:
        return f"Range({self.min!r}, {self.extent!r})"


@dataclass(frozen=True, eq=False, repr=False)
class Buffer(Node):
    """A multi-dimensional array. Identity is the object; two buffers named alike differ.

    ``strides`` empty means compact row-major. ``elem_offset`` is the offset of element 0
    in elements. ``align`` is the byte alignment of the data pointer (0: the default),
    ``offset_factor`` the factor ``elem_offset`` is a multiple of. ``dim_align`` records the
    ``(axis, factor, offset)`` padding rules ``storage_align`` gave the strides, so that
    lowering can recompute them when it shrinks the buffer.

    ``axis_separators`` (TVM's) split the logical dimensions into groups, each group one
    dimension of a multi-dimensional physical buffer: ``(1,)`` on a 2-D buffer asks for a
    ``shape[0] x shape[1]`` physical array rather than one flat run of memory. Each separator is
    in ``[0, ndim]``, non-decreasing. It is a layout request only; no backend here has
    multi-dimensional memory, so lowering flattens across separators as it does everywhere.
    """

    name: str
    shape: tuple[PrimExpr, ...]
    dtype: DataType
    scope: str = "global"
    strides: tuple[PrimExpr, ...] = ()
    elem_offset: PrimExpr | None = None
    align: int = 0
    offset_factor: int = 1
    dim_align: tuple[tuple[int, int, int], ...] = ()
    axis_separators: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.dtype, DataType):
            object.__setattr__(self, "dtype", as_dtype(self.dtype))
        if not isinstance(self.shape, tuple) or any(not isinstance(s, PrimExpr) for s in self.shape):
            object.__setattr__(self, "shape", tuple(convert(s) for s in self.shape))
        if not isinstance(self.strides, tuple) or any(not isinstance(s, PrimExpr) for s in self.strides):
            object.__setattr__(self, "strides", tuple(convert(s) for s in self.strides))
        if self.strides and len(self.strides) != len(self.shape):
            raise ValueError(f"buffer {self.name}: {len(self.strides)} strides for {len(self.shape)} dimensions")
        if self.elem_offset is not None and not isinstance(self.elem_offset, PrimExpr):
            object.__setattr__(self, "elem_offset", convert(self.elem_offset))
        if not isinstance(self.axis_separators, tuple):
            object.__setattr__(self, "axis_separators", tuple(self.axis_separators))
        problem = axis_separators_problem(self.axis_separators, len(self.shape))
        if problem is not None:
            raise ValueError(f"buffer {self.name}: {problem}")

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def const_shape(self) -> tuple[int, ...] | None:
        """The shape as Python ints, or None when a dimension is symbolic."""
        dims = []
        for extent in self.shape:
            if not isinstance(extent, IntImm):
                return None
            dims.append(extent.value)
        return tuple(dims)

    def __getitem__(self, indices: ExprLike | slice | Sequence[ExprLike | slice]) -> PrimExpr | BufferRegion:
        """``B[i, j]`` is a load; ``B[i, 0:4]`` (with a slice) is a region."""
        from tir.ir.expr import BufferLoad

        items = indices if isinstance(indices, tuple) else (indices,)
        if any(isinstance(item, slice) for item in items):
            ranges = []
            for item in items:
                if isinstance(item, slice):
                    start = convert(0 if item.start is None else item.start)
                    stop = convert(item.stop, start.dtype)
                    ranges.append(Range(start, _sub(stop, start)))
                else:
                    ranges.append(Range(convert(item), convert(1)))
            return BufferRegion(self, tuple(ranges))
        return BufferLoad(self, tuple(convert(item) for item in items))

    def __repr__(self) -> str:
        shape = ", ".join(str(s) for s in self.shape)
        return f"Buffer({self.name!r}, ({shape}), {str(self.dtype)!r}, scope={self.scope!r})"


def axis_separators_problem(separators: Sequence[object], ndim: int) -> str | None:
    """What is wrong with ``separators`` as the axis separators of an ``ndim``-D buffer, or None."""
    if any(isinstance(s, bool) or not isinstance(s, int) for s in separators):
        return f"axis separators must be integers, got {list(separators)}"
    values = [int(s) for s in separators]  # type: ignore[call-overload]
    if any(not 0 <= s <= ndim for s in values):
        return f"axis separators {values} must lie in [0, {ndim}] for {ndim} dimension{'s' if ndim != 1 else ''}"
    if values != sorted(values):
        return f"axis separators {values} must be in non-decreasing order"
    return None


def _sub(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    from tir.ir.expr import IntImm as _Int

    if isinstance(a, _Int) and isinstance(b, _Int):
        return IntImm(a.value - b.value, a.dtype)
    return a - b


@dataclass(frozen=True, eq=False, repr=False)
class BufferRegion(Node):
    """A rectangular part of a buffer: one Range per dimension."""

    buffer: Buffer
    region: tuple[Range, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.region, tuple):
            object.__setattr__(self, "region", tuple(self.region))
        if len(self.region) != len(self.buffer.shape):
            raise ValueError(
                f"region of {self.buffer.name} has {len(self.region)} ranges for {len(self.buffer.shape)} dimensions"
            )

    @staticmethod
    def full(buffer: Buffer) -> BufferRegion:
        return BufferRegion(buffer, tuple(Range(convert(0, s.dtype), s) for s in buffer.shape))

    @staticmethod
    def point(buffer: Buffer, indices: Sequence[PrimExpr]) -> BufferRegion:
        return BufferRegion(buffer, tuple(Range(i, convert(1, i.dtype)) for i in indices))

    def __repr__(self) -> str:
        return f"BufferRegion({self.buffer.name}, {list(self.region)!r})"


@dataclass(frozen=True, eq=False, repr=False)
class MatchBufferRegion(Node):
    """Inside a block, ``buffer`` is a view of the region ``source``."""

    buffer: Buffer
    source: BufferRegion

    def __repr__(self) -> str:
        return f"MatchBufferRegion({self.buffer.name}, {self.source!r})"


@dataclass(frozen=True, eq=False, repr=False)
class IterVar(Node):
    """A block iterator: its variable, its domain and its kind (spatial, reduce, opaque)."""

    var: Var
    dom: Range
    kind: IterKind = IterKind.SPATIAL

    def __repr__(self) -> str:
        return f"IterVar({self.var.name}, {self.dom!r}, {self.kind.name})"
