"""What the sketch rules look at: a block's signature, read from the program.

Rules decide which blocks they fit from the block signature only (iterator kinds, the buffers
and indices it reads and writes, whether its body is a reduction or injective), never from a
block's name. ``block_info`` gathers that in one place:

    info = block_info(sch, block)       # BlockInfo
    info.is_reduction, info.is_injective, info.has_reuse, info.loops
"""

from __future__ import annotations

from dataclasses import dataclass

from tir.analysis.tree import child_stmts
from tir.ir import (
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    Call,
    Cast,
    FloatImm,
    For,
    IfThenElse,
    IntImm,
    IterKind,
    PrimFunc,
    Select,
    Stmt,
    Var,
    free_vars,
    post_order_visit,
)
from tir.schedule import Schedule
from tir.schedule.handles import BlockRV

__all__ = [
    "BlockInfo",
    "block_info",
    "blocks_post_order",
    "input_regions",
    "is_copy",
    "is_output",
    "kinds_driven",
    "loads_of",
    "readers_of",
    "region_vars",
    "vars_of",
]

#: Annotation a tiling rule leaves on the blocks it tiled (other rules then leave them alone).
TILED = "meta_schedule.tiling_structure"
#: Root-block annotations the parallel-vectorize-unroll rule sets and its postprocessor reads.
PARALLEL = "meta_schedule.parallel"
VECTORIZE = "meta_schedule.vectorize"
UNROLL = "meta_schedule.unroll_explicit"


def vars_of(expr: object) -> set[Var]:
    """The variables an expression (or index tuple) mentions."""
    return set(free_vars(expr))


def region_vars(region: BufferRegion) -> set[Var]:
    """The variables a buffer region's starts mention (the iterators that move it)."""
    return vars_of(tuple(r.min for r in region.region))


def input_regions(block: Block) -> list[BufferRegion]:
    """The regions the block reads of buffers it does not write (an update's own output left out)."""
    written = {id(region.buffer) for region in block.writes}
    return [region for region in block.reads if id(region.buffer) not in written]


def readers_of(sch: Schedule, buffer: Buffer) -> list[str]:
    """Names of the blocks (the root left out) that read ``buffer``."""
    return [
        name
        for name, realize in sch.index.blocks.items()
        if name != "root" and any(region.buffer is buffer for region in realize.block.reads)
    ]


def kinds_driven(loop: For, realize: BlockRealize) -> set[IterKind]:
    """The kinds of the block's iterators whose bindings use ``loop``'s variable."""
    return {
        iv.kind for iv, value in zip(realize.block.iter_vars, realize.iter_values) if loop.loop_var in vars_of(value)
    }


def loads_of(block: Block) -> list[BufferLoad]:
    """Every buffer load in the block's body (the init excluded)."""
    loads: list[BufferLoad] = []
    post_order_visit(block.body, lambda n: loads.append(n) if isinstance(n, BufferLoad) else None)
    return loads


def _has_conditional(block: Block) -> bool:
    found = []

    def note(node: object) -> None:
        if isinstance(node, (Select, IfThenElse)) or (
            isinstance(node, Call) and getattr(node, "op", "") in ("if_then_else", "tir.if_then_else")
        ):
            found.append(node)

    post_order_visit(block.body, note)
    return bool(found)


def is_copy(block: Block) -> bool:
    """Whether the block only moves data: one store of a loaded value, maybe cast or chosen by
    a condition against a constant (a padding copy), and no arithmetic on the values."""
    if block.init is not None or not isinstance(block.body, BufferStore):
        return False

    def moved(value: object) -> bool:
        if isinstance(value, (BufferLoad, IntImm, FloatImm)):
            return True
        if isinstance(value, Cast):
            return moved(value.value)
        if isinstance(value, Select):
            return moved(value.true_value) and moved(value.false_value)
        if isinstance(value, Call) and value.op in ("if_then_else", "tir.if_then_else"):
            return moved(value.args[1]) and moved(value.args[2])
        return False

    return moved(block.body.value)


@dataclass(frozen=True)
class BlockInfo:
    """A block's signature as the rules see it."""

    name: str
    realize: BlockRealize
    spatial: tuple[Var, ...]  # spatial iterator variables, in block order
    reduce: tuple[Var, ...]  # reduction iterator variables, in block order
    opaque: bool  # some iterator is opaque
    is_reduction: bool  # one store, an init, reduction iterators
    is_injective: bool  # spatial only, no init, one store
    has_conditional: bool  # Select / if_then_else / if in the body (padding)
    has_reuse: bool  # some read misses a spatial iterator (the same data serves many outputs)
    loops: dict[Var, For] | None  # iterator -> the loop bound to it, when the nest is a perfect 1:1 nest
    extents: dict[Var, int]  # constant iterator extents

    @property
    def block(self) -> Block:
        return self.realize.block

    @property
    def spatial_extent(self) -> int:
        product = 1
        for var in self.spatial:
            product *= self.extents.get(var, 1)
        return product

    @property
    def reduce_extent(self) -> int:
        product = 1
        for var in self.reduce:
            product *= self.extents.get(var, 1)
        return product


def _perfect_loops(sch: Schedule, realize: BlockRealize) -> dict[Var, For] | None:
    """Iterator -> loop when every iterator is bound to its own loop variable, the loops above
    the block (inside its scope) are exactly those loops, and each loop holds only the next loop
    or the block (no sibling statements to be dragged along by a split or reorder)."""
    loops = sch.index.loops_above(realize)
    by_var = {loop.loop_var: loop for loop in loops}
    mapping: dict[Var, For] = {}
    for iv, value in zip(realize.block.iter_vars, realize.iter_values):
        if not isinstance(value, Var) or value not in by_var or by_var[value] in mapping.values():
            return None
        mapping[iv.var] = by_var[value]
    if len(mapping) != len(loops):
        return None
    for outer, inner in zip(loops, [*loops[1:], realize]):
        if outer.body is not inner:
            return None
    for loop in loops:
        if not (isinstance(loop.extent, IntImm) and isinstance(loop.min, IntImm) and loop.min.value == 0):
            return None
    return mapping


def block_info(sch: Schedule, block: BlockRV | str) -> BlockInfo:
    realize = sch.resolve_block(block, "block_info")
    b = realize.block
    spatial = tuple(iv.var for iv in b.iter_vars if iv.kind is IterKind.SPATIAL)
    reduce = tuple(iv.var for iv in b.iter_vars if iv.kind is IterKind.REDUCE)
    opaque = any(iv.kind is IterKind.OPAQUE for iv in b.iter_vars)
    extents = {
        iv.var: iv.dom.extent.value
        for iv in b.iter_vars
        if isinstance(iv.dom.extent, IntImm) and isinstance(iv.dom.min, IntImm)
    }
    single_store = isinstance(b.body, BufferStore) and len(b.writes) == 1
    is_reduction = single_store and b.init is not None and bool(reduce) and not opaque
    is_injective = single_store and b.init is None and not reduce and not opaque
    has_reuse = False
    if spatial:
        wanted = set(spatial)
        for load in loads_of(b):
            if b.writes and load.buffer is b.writes[0].buffer:
                continue
            if not wanted <= vars_of(tuple(load.indices)):
                has_reuse = True
    return BlockInfo(
        name=b.name,
        realize=realize,
        spatial=spatial,
        reduce=reduce,
        opaque=opaque,
        is_reduction=is_reduction,
        is_injective=is_injective,
        has_conditional=_has_conditional(b),
        has_reuse=has_reuse,
        loops=_perfect_loops(sch, realize),
        extents=extents,
    )


def blocks_post_order(func: PrimFunc) -> list[str]:
    """Block names, consumers before producers and children before parents (the root last):
    the reverse of program order, the order TVM's rules visit blocks in."""
    pre: list[str] = []
    _pre_order(func.body, pre)
    return list(reversed(pre))


def _pre_order(stmt: Stmt, names: list[str]) -> None:
    if isinstance(stmt, BlockRealize):
        names.append(stmt.block.name)
        if stmt.block.init is not None:
            _pre_order(stmt.block.init, names)
        _pre_order(stmt.block.body, names)
        return
    for child in child_stmts(stmt):
        _pre_order(child, names)


def is_output(func: PrimFunc, buffer: object) -> bool:
    """Whether ``buffer`` is a parameter of the function (its value leaves the program)."""
    return any(param is buffer for param in func.params)
