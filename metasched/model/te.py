"""A small tensor-expression builder: programs as ``compute`` / ``reduce`` stages, built into
PrimFuncs of the dialect (blocks with iterators, init and inferred read/write regions).

    b = FuncBuilder("add_relu")
    A = b.input("A", (4, 8), "float32")
    B = b.input("B", (8,), "float32")
    C = lazy((4, 8), "float32", lambda i, j: max_expr(A[i, j] + B[j], 0.0))
    D = b.compute("D", C.shape, lambda i, j: C[i, j])     # one block, D[i, j] = max(A + B, 0)
    func = b.build([D])

A ``Tensor`` is either a buffer (``BufferTensor``: indexing loads from it) or lazy
(``LazyTensor``: indexing builds the expression); elementwise and index-remapping operators
return lazy tensors, so a chain of them becomes one block when it is materialized.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from metasched.model.symbolic import Dim, dim, prod
from tir.analysis.block_access import infer_block_access
from tir.ir import (
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferStore,
    For,
    ForKind,
    IntImm,
    IterKind,
    IterVar,
    PrimExpr,
    PrimFunc,
    Range,
    Stmt,
    Var,
    as_dtype,
    const,
)
from tir.ir.expr import max_expr, min_expr
from tir.ir.stmt import seq

__all__ = ["BufferTensor", "FuncBuilder", "LazyTensor", "Tensor", "lazy"]

#: Extents: ints, or expressions over shape variables (``metasched.model.symbolic``).
Shape = tuple[Dim, ...]


class Tensor:
    """Something indexable with one expression per dimension."""

    shape: Shape
    dtype: str

    def __getitem__(self, indices: PrimExpr | Sequence[PrimExpr]) -> PrimExpr:
        items = tuple(indices) if isinstance(indices, (tuple, list)) else (indices,)
        if len(items) != len(self.shape):
            raise ValueError(f"tensor of rank {len(self.shape)} indexed with {len(items)} indices")
        return self.load(items)

    def load(self, indices: tuple[PrimExpr, ...]) -> PrimExpr:
        raise NotImplementedError

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> Dim:
        return prod(self.shape)


@dataclass(eq=False)
class BufferTensor(Tensor):
    buffer: Buffer

    @property
    def shape(self) -> Shape:  # type: ignore[override]
        return tuple(dim(s) for s in self.buffer.shape)

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return str(self.buffer.dtype)

    def load(self, indices: tuple[PrimExpr, ...]) -> PrimExpr:
        if not self.buffer.shape:
            return BufferLoad(self.buffer, ())
        return BufferLoad(self.buffer, indices)


@dataclass(eq=False)
class LazyTensor(Tensor):
    shape: Shape  # type: ignore[misc]
    dtype: str  # type: ignore[misc]
    fn: Callable[..., PrimExpr]

    def load(self, indices: tuple[PrimExpr, ...]) -> PrimExpr:
        return self.fn(*indices)


def lazy(shape: Sequence[Dim], dtype: str, fn: Callable[..., PrimExpr]) -> LazyTensor:
    return LazyTensor(tuple(dim(s) for s in shape), str(dtype), fn)


def _buffer(name: str, shape: Sequence[Dim], dtype: str) -> Buffer:
    extents = [dim(s) for s in shape]
    return Buffer(name, tuple(IntImm(s) if isinstance(s, int) else s for s in extents), as_dtype(dtype))


COMBINERS: dict[str, Callable[[PrimExpr, PrimExpr], PrimExpr]] = {
    "sum": lambda a, b: a + b,
    "max": max_expr,
    "min": min_expr,
}


class FuncBuilder:
    """Collects stages (one block each) and turns them into a PrimFunc."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.inputs: list[Buffer] = []
        self.stages: list[tuple[Buffer, Stmt]] = []  # (written buffer, statement)
        self.allocs: list[Buffer] = []
        self._names: set[str] = set()

    def unique(self, name: str) -> str:
        base = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "t"
        if base[0].isdigit():
            base = "t" + base
        candidate, n = base, 1
        while candidate in self._names:
            candidate = f"{base}_{n}"
            n += 1
        self._names.add(candidate)
        return candidate

    def input(self, name: str, shape: Sequence[Dim], dtype: str) -> BufferTensor:
        buffer = _buffer(self.unique(name), shape, dtype)
        self.inputs.append(buffer)
        return BufferTensor(buffer)

    # ------------------------------------------------------------ stages

    def compute(
        self, name: str, shape: Sequence[Dim], fn: Callable[..., PrimExpr], dtype: str | None = None
    ) -> BufferTensor:
        """``out[i...] = fn(i...)`` as one block; a new buffer (allocated unless it is an output)."""
        name = self.unique(name)
        shape = tuple(dim(s) for s in shape)
        axes = [Var(f"v{d}") for d in range(len(shape))]
        value = fn(*axes)
        dtype = dtype or str(value.dtype)
        value = _cast(value, dtype)
        out = _buffer(name, shape, dtype)
        store = BufferStore(out, value, tuple(axes))
        self._add_stage(name, out, shape, (), axes, [], store, None)
        return BufferTensor(out)

    def reduce(
        self,
        name: str,
        shape: Sequence[Dim],
        rshape: Sequence[Dim],
        fn: Callable[[tuple[PrimExpr, ...], tuple[PrimExpr, ...]], PrimExpr],
        combiner: str = "sum",
        init: float | int | None = None,
        dtype: str | None = None,
    ) -> BufferTensor:
        """``out[i...] = combine over r... of fn(i, r)`` as one block with an init."""
        name = self.unique(name)
        shape = tuple(dim(s) for s in shape)
        rshape = tuple(dim(s) for s in rshape)
        axes = [Var(f"v{d}") for d in range(len(shape))]
        raxes = [Var(f"r{d}") for d in range(len(rshape))]
        value = fn(tuple(axes), tuple(raxes))
        dtype = dtype or str(value.dtype)
        value = _cast(value, dtype)
        out = _buffer(name, shape, dtype)
        if init is None:
            init = {"sum": 0, "max": _lowest(dtype), "min": _highest(dtype)}[combiner]
        init_store = BufferStore(out, const(init, dtype), tuple(axes))
        update = BufferStore(out, COMBINERS[combiner](BufferLoad(out, tuple(axes)), value), tuple(axes))
        self._add_stage(name, out, shape, rshape, axes, raxes, update, init_store)
        return BufferTensor(out)

    def materialize(self, name: str, tensor: Tensor) -> BufferTensor:
        if isinstance(tensor, BufferTensor) and tensor.buffer in self.allocs:
            return tensor
        return self.compute(name, tensor.shape, lambda *i: tensor[i] if i else tensor.load(()), tensor.dtype)

    def _add_stage(self, name, out, shape, rshape, axes, raxes, body, init) -> None:  # type: ignore[no-untyped-def]
        iter_vars = [IterVar(v, _extent(e), IterKind.SPATIAL) for v, e in zip(axes, shape, strict=True)]
        iter_vars += [IterVar(v, _extent(e), IterKind.REDUCE) for v, e in zip(raxes, rshape, strict=True)]
        block = Block(name, tuple(iter_vars), (), (), body, init)
        reads, writes = infer_block_access(block)
        block = Block(name, tuple(iter_vars), reads, writes, body, init)
        loop_vars = [Var(n) for n in _loop_names(len(iter_vars))]
        stmt: Stmt = BlockRealize(tuple(loop_vars), const(True), block)
        for var, iv in reversed(list(zip(loop_vars, iter_vars, strict=True))):
            stmt = For(var, const(0), iv.dom.extent, ForKind.SERIAL, stmt)
        self.allocs.append(out)
        self.stages.append((out, stmt))

    # ------------------------------------------------------------ the function

    def build(self, outputs: Sequence[Tensor], output_names: Sequence[str] | None = None) -> PrimFunc:
        """The PrimFunc: parameters are the inputs (in the order declared), then the outputs."""
        out_buffers = []
        for k, tensor in enumerate(outputs):
            name = (output_names or [f"out{k}"] * len(outputs))[k]
            if isinstance(tensor, BufferTensor) and tensor.buffer in self.allocs and tensor.buffer not in out_buffers:
                out_buffers.append(tensor.buffer)
            else:
                out_buffers.append(self.materialize(name, tensor).buffer)
        allocs = tuple(b for b in self.allocs if b not in out_buffers)
        body = seq(*[stmt for _, stmt in self.stages])
        root = Block("root", (), (), (), body, None, allocs)
        return PrimFunc(self.name, tuple(self.inputs) + tuple(out_buffers), BlockRealize((), const(True), root))


def _extent(extent: Dim) -> Range:
    return Range.from_extent(IntImm(extent) if isinstance(extent, int) else extent)


def _loop_names(n: int) -> list[str]:
    return [f"i{d}" for d in range(n)]


def _cast(value: PrimExpr, dtype: str) -> PrimExpr:
    from tir.ir import Cast

    if str(value.dtype) == dtype:
        return value
    return Cast(as_dtype(dtype), value)


def _lowest(dtype: str) -> float | int:
    import numpy as np

    if dtype.startswith("float"):
        return float("-inf") if False else float(np.finfo(dtype).min)
    if dtype == "bool":
        return 0
    return int(np.iinfo(dtype).min)


def _highest(dtype: str) -> float | int:
    import numpy as np

    if dtype.startswith("float"):
        return float(np.finfo(dtype).max)
    if dtype == "bool":
        return 1
    return int(np.iinfo(dtype).max)
