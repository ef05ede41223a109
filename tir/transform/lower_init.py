"""``lower_init``: a block's ``T.init()`` becomes a guarded statement before its body.

The init runs on the first iteration of the reduction iterators, so the guard compares every
reduce iterator with the start of its domain (``And`` of the comparisons). A block with an
init but no reduce iterator runs the init every time, before the body. Before::

    with T.block("C"):
        vi, vj, vk = T.remap("SSR", i, j, k)
        with T.init():
            C[vi, vj] = 0.0
        C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

After (the block stays; ``convert_blocks_to_loops`` removes it)::

    with T.block("C"):
        vi, vj, vk = T.remap("SSR", i, j, k)
        if vk == 0:
            C[vi, vj] = 0.0
        C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
"""

from __future__ import annotations

from tir.ir import And, Block, IfThenElse, IRMutator, IterKind, PrimExpr, PrimFunc, Stmt
from tir.transform._common import make_seq

__all__ = ["init_guard", "lower_block_init", "lower_init"]


def init_guard(block: Block) -> PrimExpr | None:
    """The condition under which ``block``'s init runs; None when it runs every time."""
    condition: PrimExpr | None = None
    for iter_var in block.iter_vars:
        if iter_var.kind is IterKind.REDUCE:
            test = iter_var.var.equal(iter_var.dom.min)
            condition = test if condition is None else And(condition, test)
    return condition


def lower_block_init(block: Block) -> Block:
    """``block`` with its init folded into its body (the same block when it has none)."""
    if block.init is None:
        return block
    guard = init_guard(block)
    init: Stmt = block.init if guard is None else IfThenElse(guard, block.init)
    return block.replace(init=None, body=make_seq([init, block.body]))


class _LowerInit(IRMutator):
    def visit_Block(self, block: Block) -> Block:
        return lower_block_init(self.generic_visit(block))


def lower_init(func: PrimFunc) -> PrimFunc:
    """Fold every block's ``T.init()`` into its body as ``if <reduce iters at min>: init``."""
    return func.replace(body=_LowerInit().visit(func.body))
