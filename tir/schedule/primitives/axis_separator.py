"""Schedule primitive: set_axis_separator.

Records TVM's axis separators on a buffer: where its logical dimensions split into the
dimensions of a multi-dimensional physical buffer (``axis_separators=[1]`` on a 2-D buffer asks
for a ``shape[0] x shape[1]`` physical array, as texture memory or a 2-D DMA wants, instead of
one flat run). The computation does not change; only ``Buffer.axis_separators`` does.

No backend here has multi-dimensional memory: the LLVM and the CUDA builds flatten every
buffer into one run of memory, across its separators too, exactly as without them (the
interpreter works on the logical shape, which separators do not change). The separators are kept through scheduling, printed, parsed and compared, so a program
that carries them from TVM (or to it) keeps them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tir.analysis.tree import TreeIndex
from tir.ir import Block, Buffer, IntImm, IRVisitor, PrimFunc, replace_buffers
from tir.ir.buffer import axis_separators_problem
from tir.schedule.errors import ScheduleError
from tir.schedule.handles import BlockRV
from tir.schedule.primitives._common import block_target, doc_from, find_block
from tir.schedule.primitives._layout_util import allocating_block, normalize_buffer_arg, region_buffer


def set_axis_separator(
    func: PrimFunc, block_name: str, buffer_kind: str, buffer_index: int, axis_separators: Sequence[int]
) -> PrimFunc:
    """Give a buffer of a block the axis separators ``axis_separators``.

    The buffer is the block's ``buffer_index``-th read (``buffer_kind="read"``) or write; it
    may be a function parameter (the signature's ``T.Buffer`` carries the separators) or
    allocated by a block. ``match_buffer`` views of it follow: a view with as many dimensions
    gets the same separators, any other view as many separators at 0, so that both keep one
    number of physical dimensions (TVM's rule). The separators replace any the buffer had.

    This is a layout request for backends with multi-dimensional memory; every backend here
    flattens buffers into one run of memory, across the separators as well, so the program
    computes and runs exactly as before.

    The Schedule method takes the buffer as TVM's ``("write", 0)`` / ``("read", 1)``, as an int
    (the ``buffer_index_type`` buffer, "write" unless told), as a buffer name or as a Buffer
    the block accesses.

    Preconditions: each separator is an integer in ``[0, ndim]``, in non-decreasing order; the
    buffer is not itself a ``match_buffer`` view (set the separators of the buffer it views).

    Before (``set_axis_separator(B, ("write", 0), [1])``)::

        B = T.alloc_buffer((128, 128), "float32")
        for i, j in T.grid(128, 128):
            with T.block("B"):
                vi, vj = T.remap("SS", i, j)
                B[vi, vj] = A[vi, vj] * 2.0

    After::

        B = T.alloc_buffer((128, 128), "float32", axis_separators=[1])
        for i, j in T.grid(128, 128):
            with T.block("B"):
                vi, vj = T.remap("SS", i, j)
                B[vi, vj] = A[vi, vj] * 2.0
    """
    primitive = "set_axis_separator"
    index = TreeIndex(func)
    realize = find_block(index, block_name, primitive)
    buffer = region_buffer(realize, buffer_kind, buffer_index, primitive)
    target = f"{block_target(realize)}, buffer {buffer.name}"
    separators = _separators(axis_separators, buffer, primitive, target)
    is_param = any(param is buffer for param in func.params)
    if not is_param and allocating_block(func, buffer) is None:
        source = _view_source(func, buffer)
        raise ScheduleError(
            primitive,
            target,
            f"{buffer.name} is a match_buffer view"
            + (f" of {source.name}; set the axis separators of {source.name}" if source is not None else ""),
        )
    if separators == buffer.axis_separators:
        return func
    moved = {buffer: buffer.replace(axis_separators=separators)}
    views = _match_views(func)
    pending = [buffer]
    while pending:
        source = pending.pop()
        new_source = moved[source]
        for view in views.get(source, []):
            if view in moved:
                continue
            if view.ndim == source.ndim:
                wanted = new_source.axis_separators
            else:
                wanted = (0,) * len(new_source.axis_separators)
            moved[view] = view.replace(axis_separators=wanted) if wanted != view.axis_separators else view
            pending.append(view)
    moved = {old: new for old, new in moved.items() if new is not old}
    params = tuple(moved.get(param, param) if isinstance(param, Buffer) else param for param in func.params)
    return func.replace(
        params=params, body=replace_buffers(func.body, moved), attrs=_replace_in_attrs(func.attrs, moved)
    )


def _separators(value: Any, buffer: Buffer, primitive: str, target: str) -> tuple[int, ...]:
    if value is None:
        return ()
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ScheduleError(primitive, target, f"axis_separators must be a list of integers, got {value!r}")
    items = [item.value if isinstance(item, IntImm) else item for item in value]
    problem = axis_separators_problem(items, buffer.ndim)
    if problem is not None:
        raise ScheduleError(primitive, target, f"{problem} ({buffer.name} is {buffer.ndim}-D)")
    return tuple(int(item) for item in items)


def _match_views(func: PrimFunc) -> dict[Buffer, list[Buffer]]:
    """Source buffer -> the match_buffer views of it."""
    views: dict[Buffer, list[Buffer]] = {}

    class Collect(IRVisitor):
        def visit_Block(self, block: Block) -> None:
            for match in block.match_buffers:
                views.setdefault(match.source.buffer, []).append(match.buffer)
            self.generic_visit(block)

    Collect().visit(func.body)
    return views


def _view_source(func: PrimFunc, view: Buffer) -> Buffer | None:
    for source, buffers in _match_views(func).items():
        if any(b is view for b in buffers):
            return source
    return None


def _replace_in_attrs(attrs: Mapping[str, Any], moved: Mapping[Buffer, Buffer]) -> Any:
    """Function attributes with the buffers of ``moved`` replaced (an attribute may list
    buffers, as the constants of ``T.allocate_const`` do)."""

    def walk(value: Any) -> Any:
        if isinstance(value, Buffer):
            return moved.get(value, value)
        if isinstance(value, (tuple, list)):
            items = [walk(item) for item in value]
            return value if all(a is b for a, b in zip(items, value)) else type(value)(items)
        if isinstance(value, dict):
            return {key: walk(item) for key, item in value.items()}
        return value

    new = {key: walk(value) for key, value in attrs.items()}
    return attrs if all(new[key] is attrs[key] for key in attrs) else new


class AxisSeparatorPrimitives:
    """Schedule method for set_axis_separator."""

    @doc_from(set_axis_separator)
    def set_axis_separator(  # type: ignore[misc]
        self,
        block: BlockRV | str,
        buffer_index: int | tuple[str, int] | list[Any] | str | Buffer,
        axis_separators: Sequence[int] | None,
        buffer_index_type: str = "write",
    ) -> None:
        primitive = "set_axis_separator"
        realize = self.resolve_block(block, primitive)  # type: ignore[attr-defined]
        if isinstance(buffer_index, int) and not isinstance(buffer_index, bool):
            buffer_index = (buffer_index_type, buffer_index)
        kind, position = normalize_buffer_arg(realize, buffer_index, primitive)
        target_buffer = region_buffer(realize, kind, position, primitive)
        separators = list(_separators(axis_separators, target_buffer, primitive, block_target(realize)))
        name = realize.block.name
        self._apply(  # type: ignore[attr-defined]
            primitive,
            (block, (kind, position), separators),
            {},
            lambda func: set_axis_separator(func, name, kind, position, separators),
        )


__all__ = ["AxisSeparatorPrimitives", "set_axis_separator"]
