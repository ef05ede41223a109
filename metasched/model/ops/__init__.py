"""The operator library: one module per operator family, each ONNX operator lowered to stages of
a ``FuncBuilder`` (``metasched.model.te``).

An operator is registered with ``register(op_type, kind, value_inputs=...)`` on its lowering
function ``lower(ctx, inputs) -> list[Tensor]``:

- ``kind`` says how fusion treats it: ``"injective"`` (elementwise, broadcast, index
  remapping: returns lazy tensors, fused into its producer), ``"complex"`` (reductions,
  convolutions, matmuls: starts a group, injective consumers fuse into it), ``"opaque"``
  (a group of its own: concat, split, scatters), ``"view"`` (reshape-like: zero-copy, no
  kernel) or ``"fold"`` (Shape, Range, ...: constant folding must remove it; the lowering
  only explains why it could not).
- ``value_inputs`` are input positions the lowering needs as constant values (a Reshape's
  shape, a Slice's starts): they must be constants after folding and never become parameters.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from metasched.model.symbolic import Dim, dim, dims_equal, shape_text
from metasched.model.te import BufferTensor, FuncBuilder, Tensor, lazy
from tir import registrations
from tir.analysis.block_access import infer_block_access
from tir.ir import (
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferStore,
    Cast,
    For,
    ForKind,
    IntImm,
    PrimExpr,
    Select,
    Var,
    as_dtype,
    const,
)
from tir.ir.expr import max_expr, min_expr

__all__ = [
    "OPS",
    "OpContext",
    "OpDef",
    "OpError",
    "broadcast_shapes",
    "broadcast_load",
    "clamp",
    "normalize_index",
    "opaque_stage",
    "reduce_stage",
    "register",
]


class OpError(ValueError):
    """An operator the library cannot lower as given (attribute values, shapes, missing inputs)."""


@dataclass
class OpContext:
    """What a lowering sees besides its input tensors."""

    builder: FuncBuilder
    op_type: str
    name: str
    attrs: dict[str, Any]
    opset: int
    values: dict[int, np.ndarray | None] = field(default_factory=dict)  # constant inputs by position
    num_outputs: int = 1

    @property
    def stage(self) -> str:
        """The name of the op's main block (the op type: equal programs print and hash alike)."""
        return self.op_type.lower()

    def attr(self, key: str, default: Any = None) -> Any:
        return self.attrs.get(key, default)

    def value(self, position: int, default: Any = None) -> np.ndarray | None:
        got = self.values.get(position)
        return default if got is None else got

    def fail(self, message: str) -> OpError:
        return OpError(f"{self.op_type} node {self.name!r} (opset {self.opset}): {message}")

    def constant_input(self, position: int, what: str) -> np.ndarray:
        """The value of input ``position`` (one of the op's ``value_inputs``); refused, naming
        ``what``, when it is absent or not a constant after folding."""
        got = self.values.get(position)
        if got is None:
            raise self.fail(
                f"the {what} input (input {position}) must be a constant after constant folding: "
                "the output's shape or the computation depends on its value"
            )
        return got


Lowering = Callable[[OpContext, list[Any]], list[Tensor]]


@dataclass(frozen=True)
class OpDef:
    op_type: str
    lower: Lowering
    kind: str
    value_inputs: frozenset[int] = frozenset()
    min_opset: int = 1


OPS: dict[str, OpDef] = {}


def register(*op_types: str, kind: str, value_inputs: Sequence[int] = ()) -> Callable[[Lowering], Lowering]:
    """Register ``fn`` as the lowering of ``op_types`` (replacing the library's, if any). One
    registered outside ``metasched`` (in a user's script) also reaches the tuner's worker
    processes (``tir.registrations``)."""

    def wrap(fn: Lowering) -> Lowering:
        for op_type in op_types:
            OPS[op_type] = OpDef(op_type, fn, kind, frozenset(value_inputs))
        registrations.changed()
        return fn

    return wrap


def runtime_registrations() -> list[tuple[str, OpDef]]:
    """The operators registered at run time: those whose lowering is not the library's own."""
    return [
        (f"ONNX operator {op_type!r}", op)
        for op_type, op in OPS.items()
        if not getattr(op.lower, "__module__", "").startswith("metasched.")
    ]


def install_registration(op: OpDef) -> None:
    OPS[op.op_type] = op
    registrations.changed()


registrations.add_provider(__name__)


# ---------------------------------------------------------------- helpers shared by the families


def broadcast_shapes(*shapes: Sequence[Dim]) -> tuple[Dim, ...]:
    """numpy's broadcasting rule; raises on a mismatch. A symbolic extent is never taken
    for 1: it must equal the other inputs' extents (or they are 1)."""
    ndim = max((len(s) for s in shapes), default=0)
    out: list[Dim] = []
    for d in range(ndim):
        extents: list[Dim] = []
        for s in shapes:
            if d - ndim + len(s) >= 0:
                extent = s[d - ndim + len(s)]
                if not (isinstance(extent, int) and extent == 1) and not any(dims_equal(extent, e) for e in extents):
                    extents.append(extent)
        if len(extents) > 1:
            raise OpError(f"shapes {[shape_text(s) for s in shapes]} do not broadcast")
        out.append(extents[0] if extents else 1)
    return tuple(out)


def broadcast_load(tensor: Tensor, indices: Sequence[PrimExpr]) -> PrimExpr:
    """``tensor`` read at the output ``indices`` of a broadcast (trailing alignment, size-1 axes at 0)."""
    offset = len(indices) - tensor.ndim
    picked = [const(0) if extent == 1 else indices[offset + d] for d, extent in enumerate(tensor.shape)]
    return tensor[tuple(picked)] if picked else tensor.load(())


def clamp(index: PrimExpr, extent: Dim) -> PrimExpr:
    return min_expr(max_expr(index, 0), extent - 1)


def normalize_index(raw: PrimExpr, extent: int) -> PrimExpr:
    """An index read from a tensor (any integer dtype) as int32 in ``[0, extent)``: a negative
    one counts from the end, one still out of range is clamped (onnxruntime raises; a kernel
    must not read or write outside its buffers)."""
    k = cast(raw, "int32")
    return clamp(Select(k < 0, k + extent, k), extent)


def reduce_stage(
    builder: FuncBuilder,
    name: str,
    shape: Sequence[Dim],
    rshape: Sequence[Dim],
    fn: Callable[[tuple[PrimExpr, ...], tuple[PrimExpr, ...]], PrimExpr],
    combine: Callable[[PrimExpr, PrimExpr], PrimExpr],
    init: float | int,
    dtype: str,
) -> BufferTensor:
    """``FuncBuilder.reduce`` with any combiner (``FuncBuilder`` knows sum / max / min; a
    product reduction needs ``a * b`` with init 1, which rfactor also recognizes)."""
    name = builder.unique(name)
    shape, rshape = tuple(dim(s) for s in shape), tuple(dim(s) for s in rshape)
    axes = [Var(f"v{d}") for d in range(len(shape))]
    raxes = [Var(f"r{d}") for d in range(len(rshape))]
    value = cast(fn(tuple(axes), tuple(raxes)), dtype)
    out = Buffer(name, tuple(IntImm(s) if isinstance(s, int) else s for s in shape), as_dtype(dtype))
    init_store = BufferStore(out, const(init, dtype), tuple(axes))
    update = BufferStore(out, combine(BufferLoad(out, tuple(axes)), value), tuple(axes))
    builder._add_stage(name, out, shape, rshape, axes, raxes, update, init_store)
    return BufferTensor(out)


def opaque_stage(
    builder: FuncBuilder,
    name: str,
    target: BufferTensor,
    extents: Sequence[int],
    body: Callable[..., tuple[tuple[PrimExpr, ...], PrimExpr]],
) -> BufferTensor:
    """A block without iterators whose body is a serial loop nest over ``extents`` storing
    ``target[index] = value`` for ``(index, value) = body(*loop_vars)``: data-dependent
    writes (scatters) in program order, which no schedule parallelizes (duplicate indices
    under an accumulating reduction would race). ``target`` must be a buffer of this builder
    written by an earlier stage (the copy the updates go into)."""
    name = builder.unique(name)
    loop_vars = [Var(f"j{d}") for d in range(len(extents))]
    index, value = body(*loop_vars)
    buffer = target.buffer
    stmt: Any = BufferStore(buffer, cast(value, str(buffer.dtype)), tuple(index))
    for var, extent in reversed(list(zip(loop_vars, extents, strict=True))):
        stmt = For(var, const(0), IntImm(int(extent)), ForKind.SERIAL, stmt)
    block = Block(name, (), (), (), stmt, None)
    reads, writes = infer_block_access(block)
    block = Block(name, (), reads, writes, stmt, None)
    builder.stages.append((buffer, BlockRealize((), const(True), block)))
    return target


def mul(value: PrimExpr, factor: int) -> PrimExpr:
    return value if factor == 1 else value * factor


def cast(value: PrimExpr, dtype: str) -> PrimExpr:
    return value if str(value.dtype) == dtype else Cast(as_dtype(dtype), value)


def select(cond: PrimExpr, a: PrimExpr, b: PrimExpr) -> PrimExpr:
    return Select(cond, a, b)


def normalize_axis(axis: int, ndim: int, ctx: OpContext | None = None) -> int:
    if not -ndim <= axis < max(ndim, 1):
        raise OpError(
            f"axis {axis} out of range for rank {ndim}"
            if ctx is None
            else str(ctx.fail(f"axis {axis} out of range for rank {ndim}"))
        )
    return axis % ndim if ndim else 0


def constant_tensor(value: np.ndarray) -> Tensor:
    """A tiny constant inlined as literals (scalars, or a few elements selected by index)."""
    array = np.asarray(value)
    dtype = str(array.dtype)
    flat = array.reshape(-1)
    if flat.size == 1:
        item = flat[0].item()
        return lazy(array.shape, dtype, lambda *i: const(item, dtype))
    raise OpError("only single-element constants are inlined")


def to_dtype_name(np_dtype: Any) -> str:
    return str(np.dtype(np_dtype))


def _load_families() -> None:
    # Importing registers the operators.
    from metasched.model.ops import (  # noqa: F401
        conv,
        einsum,
        elementwise,
        indexing,
        matmul,
        normalization,
        pooling,
        quantization,
        reduction,
        sampling,
        selection,
        shape,
    )


_load_families()
