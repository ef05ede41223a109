"""The check that no primitive puts a reduction's update before its init.

A block with ``T.init()`` runs the init at the instance whose reduce iterators start their
domains; that is right only when, for each output element, this instance runs first
(``tir.analysis.init_order`` has the rule and its proof). Fusing and splitting loops keep the
execution order, so they keep this property; a primitive that changes the order of the loops
a reduction runs in, or builds a new block with an init over existing loops, calls
``check_init_order`` on its result: ``reorder``, ``compute_at``, ``reverse_compute_at``,
``blockize`` (and ``tensorize`` through it), ``transform_block_layout`` and
``merge_reduction``. Only problems the step made are refused: a block whose order could not be
proved before the step either is the validator's business (``tir.analysis.verify`` reports a
shown one under the ``binding`` rule).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from tir.analysis.init_order import InitOrderProblem, init_order_problem
from tir.analysis.tree import TreeIndex
from tir.ir import Block, BlockRealize, For, IntImm, PrimFunc, Range, Var, free_vars, post_order_visit
from tir.schedule.errors import ScheduleError

#: What a refusal suggests instead.
ADVICE = (
    "keep the loops of a fused index of spatial and reduce iterators in the order of the index, or "
    "decompose_reduction before fusing them (an init block of its own runs before every update)"
)


def init_order_at(index: TreeIndex, realize: BlockRealize) -> InitOrderProblem | None:
    """The init-order problem of the block of ``realize`` in the program of ``index``, if any."""
    block = realize.block
    if block.init is None:
        return None
    chain: list[tuple[BlockRealize, list[For]]] = []
    node: BlockRealize | None = realize
    while node is not None and node is not index.func.body:
        chain.append((node, index.loops_above(node)))
        node = index.scope_block(node)
    return init_order_problem(chain, _size_ranges(index.func))


def _size_ranges(func: PrimFunc) -> dict[Var, Range]:
    """Parameter sizes are at least 1 (what the validator assumes too)."""
    sizes = free_vars(tuple(extent for buffer in func.buffer_params for extent in buffer.shape))
    return {var: Range(IntImm(1, var.dtype), IntImm(var.dtype.max_value() - 1, var.dtype)) for var in sizes}


def blocks_with_init(stmt: object) -> list[str]:
    """Names of the blocks with ``T.init()`` under ``stmt`` (nested ones included)."""
    names: list[str] = []

    def visit(node: object) -> None:
        if isinstance(node, Block) and node.init is not None:
            names.append(node.name)

    post_order_visit(stmt, visit)  # type: ignore[arg-type]
    return names


def check_init_order(
    primitive: str,
    target: str,
    before: PrimFunc,
    after: PrimFunc,
    blocks: Iterable[str] | Mapping[str, str | None],
) -> None:
    """Refuse ``after`` (the result of ``primitive`` on ``before``) when the init of one of
    ``blocks`` may run after an update of the same output element there, and did not before.

    ``blocks``: names of blocks of ``after``, or a mapping from such a name to the name the
    block had in ``before`` (None: it is new).
    """
    pairs = dict(blocks) if isinstance(blocks, Mapping) else {name: name for name in blocks}
    if not pairs:
        return
    index = TreeIndex(after)
    old_index: TreeIndex | None = None
    for name, old_name in pairs.items():
        realize = index.blocks.get(name)
        if realize is None:
            continue
        problem = init_order_at(index, realize)
        if problem is None:
            continue
        if old_name is not None:
            old_index = old_index or TreeIndex(before)
            old = old_index.blocks.get(old_name)
            if old is not None and init_order_at(old_index, old) is not None:
                continue  # not provable before this step either: not this step's doing
        raise ScheduleError(primitive, target, f"{problem.message()}; {ADVICE}", _nest_of(index, realize))


def _nest_of(index: TreeIndex, realize: BlockRealize) -> object:
    """The outermost loop around the block in its scope (the block when there is none)."""
    loops = index.loops_above(realize)
    return loops[0] if loops else realize
