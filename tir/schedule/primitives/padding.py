"""Schedule primitive: decompose_padding.

A padding block ``P[i] = T.if_then_else(lo <= i < hi, A[i - lo], pad)`` becomes a block that
fills ``P`` with ``pad`` and the block itself restricted to the elements in bounds, which then
copies without a condition per element (TVM's primitive of the same name).
"""

from __future__ import annotations

from tir.analysis import infer_block_access
from tir.analysis.tree import TreeIndex, replace_stmt
from tir.ir import (
    Block,
    BlockRealize,
    BufferStore,
    Call,
    For,
    IterKind,
    IterVar,
    PrimFunc,
    SeqStmt,
    Stmt,
    Var,
)
from tir.ir.expr import conjunction
from tir.ir.functor import buffer_loads
from tir.schedule.errors import ScheduleError
from tir.schedule.handles import BlockRV, LoopRV
from tir.schedule.primitives._common import block_target, doc_from, find_block
from tir.schedule.primitives._reduction_util import conjuncts, insert_next_to, is_true, loop_copy, unique_block_name


def decompose_padding(func: PrimFunc, block_name: str, loop_var: Var) -> tuple[PrimFunc, str]:
    """Split a padding block at ``loop``: a new block ``<name>_pad_const`` before ``loop``, with
    copies of the loops from ``loop`` inward, stores the pad value into every element the block
    writes there; the block keeps only the instances whose condition holds (a ``T.where``) and
    stores its value unconditionally. Returns the new block.

    Preconditions: the block is spatial, its body one store ``P[...] = T.if_then_else(c, v,
    pad)`` where ``c`` and ``pad`` read no buffer; ``loop`` is above the block in its scope with
    only loops in between, or statement lists whose other statements stay under ``loop`` (the
    fill copies only the loops on the block's path); no other block under ``loop`` writes ``P``.

    Before (``decompose_padding(P, i)``)::

        for i in range(8):
            with T.block("P"):
                vi = T.remap("S", i)
                P[vi] = T.if_then_else(1 <= vi and vi < 7, A[vi - 1], T.float32(0))

    After::

        for i_1 in range(8):
            with T.block("P_pad_const"):
                vi = T.remap("S", i_1)
                P[vi] = T.float32(0)
        for i in range(8):
            with T.block("P"):
                vi = T.remap("S", i)
                T.where(1 <= i and i < 7)
                P[vi] = A[vi - 1]
    """
    primitive = "decompose_padding"
    index = TreeIndex(func)
    realize = find_block(index, block_name, primitive)
    block = realize.block
    target = block_target(realize)
    if any(iv.kind is not IterKind.SPATIAL for iv in block.iter_vars) or block.init is not None:
        raise ScheduleError(primitive, target, "the block must be spatial (a padding block has no reduction)")
    store = block.body
    if not isinstance(store, BufferStore) or block.alloc_buffers or block.match_buffers:
        raise ScheduleError(primitive, target, "the block's body must be a single store", block)
    value = store.value
    if not (isinstance(value, Call) and value.op == "if_then_else"):
        raise ScheduleError(
            primitive, target, "the stored value must be T.if_then_else(condition, value, pad_value)", store
        )
    condition, inside, pad = value.args
    if buffer_loads(condition) or buffer_loads(pad):
        raise ScheduleError(
            primitive, target, "the condition and the pad value must read no buffer (they decide the layout)", value
        )
    loop = index.loops.get(id(loop_var))
    chain: list[For] = []
    for parent in index.ancestors(realize):
        if parent is loop:
            chain.append(parent)
            break
        if isinstance(parent, SeqStmt):  # siblings of the path stay where they are
            continue
        if not isinstance(parent, For):
            break
        chain.append(parent)
    if loop is None or not chain or chain[-1] is not loop:
        raise ScheduleError(
            primitive,
            target,
            f"loop {loop_var.name} must be above the block with only loops (and statement lists) in between",
        )
    # The fill now runs before everything under the loop: no other block there may write P, or
    # the order of its stores and the pad value's would change.
    for other in index.blocks.values():
        if other is not realize and index.is_ancestor(loop, other):
            if any(region.buffer is store.buffer for region in other.block.writes):
                raise ScheduleError(
                    primitive,
                    target,
                    f"block {other.block.name!r} under loop {loop_var.name} also writes {store.buffer.name}; the "
                    "pad values moved before the loop would change the order of their stores",
                    other,
                )
    bindings = {iv.var: v for iv, v in zip(block.iter_vars, realize.iter_values)}
    from tir.ir import substitute

    # The fill: copies of the loops from `loop` inward, the same bindings and predicate.
    loops = list(reversed(chain))  # outermost first
    copies: dict[Var, Var] = {lp.loop_var: Var(lp.loop_var.name, lp.loop_var.dtype) for lp in loops}
    fill_name = unique_block_name(index, f"{block.name}_pad_const")
    fresh = {iv.var: Var(iv.var.name, iv.var.dtype) for iv in block.iter_vars}
    fill_iters = tuple(IterVar(fresh[iv.var], iv.dom, iv.kind) for iv in block.iter_vars)
    fill_store = BufferStore(store.buffer, substitute(pad, fresh), tuple(substitute(i, fresh) for i in store.indices))
    fill_block = Block(fill_name, fill_iters, (), (), fill_store)
    reads, writes = infer_block_access(fill_block)
    fill_block = fill_block.replace(reads=tuple(reads), writes=tuple(writes))
    fill: Stmt = BlockRealize(
        tuple(substitute(v, copies) for v in realize.iter_values),
        substitute(realize.predicate, copies),
        fill_block,
    )
    for lp in reversed(loops):
        fill = loop_copy(lp, copies[lp.loop_var], fill, copies)  # type: ignore[arg-type]
    # The block: only where the condition holds, without the condition per element.
    guard = substitute(condition, bindings)
    parts = [c for c in conjuncts(realize.predicate) if not is_true(c)] + [guard]
    new_block = block.replace(body=BufferStore(store.buffer, inside, store.indices))
    reads, writes = infer_block_access(new_block)
    new_block = new_block.replace(reads=tuple(reads), writes=tuple(writes))
    new_realize = realize.replace(block=new_block, predicate=conjunction(parts))
    func = replace_stmt(index, realize, new_realize)
    index = TreeIndex(func)
    return insert_next_to(index, index.loops[id(loop_var)], fill, after=False), fill_name


class PaddingPrimitives:
    """Schedule method for decompose_padding."""

    @doc_from(decompose_padding)
    def decompose_padding(self, block: BlockRV | str, loop: LoopRV) -> BlockRV:  # type: ignore[misc]
        name = self.resolve_block(block, "decompose_padding").block.name  # type: ignore[attr-defined]
        node = self.resolve_loop(loop, "decompose_padding")  # type: ignore[attr-defined]
        return self._apply(  # type: ignore[attr-defined,no-any-return]
            "decompose_padding", (block, loop), {}, lambda func: decompose_padding(func, name, node.loop_var)
        )


__all__ = ["PaddingPrimitives", "decompose_padding"]
