"""Analyses shared by the reduction primitives (decompose_reduction, merge_reduction, rfactor).

A *reduction block* here is a block whose iterators are spatial or reduce (at least one
reduce), whose ``T.init()`` is one or more buffer stores, and whose output elements are picked
by the spatial iterators alone, one element per spatial point. The helpers check those facts
and the ordering facts the primitives rely on: the init of a spatial point runs at the first
instance of that point (every reduce binding is at its minimum when the loops that drive the
reductions are at their minimum), and nothing else under a loop touches the output buffers.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from tir.analysis.tree import TreeIndex
from tir.arith import Analyzer, simplify
from tir.ir import (
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferStore,
    For,
    IntImm,
    IRVisitor,
    IterKind,
    IterVar,
    Node,
    PrimExpr,
    PrimFunc,
    Range,
    SeqStmt,
    Stmt,
    Var,
    free_vars,
    post_order_visit,
    substitute,
)
from tir.ir.expr import conjuncts  # noqa: F401 - re-exported: schedule modules import it from here
from tir.schedule.errors import ScheduleError
from tir.schedule.primitives._common import block_target
from tir.schedule.primitives.loops import _detect_bindings as detect_block_bindings


def is_true(expr: PrimExpr) -> bool:
    return isinstance(expr, IntImm) and expr.value != 0


def init_stores(block: Block) -> list[BufferStore] | None:
    """The stores of ``block``'s init when it is a store or a sequence of stores, else None."""
    init = block.init
    if isinstance(init, BufferStore):
        return [init]
    if isinstance(init, SeqStmt) and all(isinstance(s, BufferStore) for s in init.stmts):
        return list(init.stmts)  # type: ignore[arg-type]
    return None


def unique_block_name(index: TreeIndex, wanted: str) -> str:
    name, k = wanted, 1
    while name in index.blocks:
        name = f"{wanted}_{k}"
        k += 1
    return name


def all_buffers(func: PrimFunc) -> list[Buffer]:
    """Every buffer of ``func``: parameters, allocations, match_buffer views."""
    found: dict[int, Buffer] = {}

    def note(n: Node) -> None:
        if isinstance(n, Buffer):
            found.setdefault(id(n), n)

    post_order_visit(func.body, note)
    for param in func.params:
        if isinstance(param, Buffer):
            found.setdefault(id(param), param)
    return list(found.values())


def unique_buffer_name(func: PrimFunc, wanted: str) -> str:
    taken = {b.name for b in all_buffers(func)}
    name, k = wanted, 1
    while name in taken:
        name = f"{wanted}_{k}"
        k += 1
    return name


class ReductionShape:
    """The facts about one reduction block realize that the reduction primitives check."""

    def __init__(self, primitive: str, index: TreeIndex, realize: BlockRealize, block: Block | None = None) -> None:
        self.primitive = primitive
        self.index = index
        self.realize = realize
        # ``block`` stands in for the realize's block when a primitive checks a block it is
        # about to build (merge_reduction checks the update block with the init put back).
        self.block = block if block is not None else realize.block
        self.loops: list[For] = index.loops_above(realize)
        self.spatial = [k for k, iv in enumerate(self.block.iter_vars) if iv.kind is IterKind.SPATIAL]
        self.reduce = [k for k, iv in enumerate(self.block.iter_vars) if iv.kind is IterKind.REDUCE]
        loop_vars = {loop.loop_var for loop in self.loops}
        self.spatial_loop_vars: set[Var] = set()
        self.reduce_loop_vars: set[Var] = set()
        for k in self.spatial:
            self.spatial_loop_vars |= set(free_vars(realize.iter_values[k])) & loop_vars
        for k in self.reduce:
            self.reduce_loop_vars |= set(free_vars(realize.iter_values[k])) & loop_vars

    def fail(self, rule: str, fragment: object = None) -> ScheduleError:
        return ScheduleError(self.primitive, block_target(self.realize), rule, fragment)

    # ------------------------------------------------------------ block form

    def check_kinds(self, need_init: bool = True) -> None:
        block = self.block
        if need_init and block.init is None:
            raise self.fail("the block has no T.init() (already decomposed? see merge_reduction)", self.realize)
        opaque = [iv.var.name for iv in block.iter_vars if iv.kind is IterKind.OPAQUE]
        if opaque:
            raise self.fail(
                f"a reduction block has only spatial and reduce iterators; {opaque} are opaque", self.realize
            )
        if not self.reduce:
            raise self.fail("the block has no reduce iterator, so it is not a reduction", self.realize)

    def check_bindings(self) -> None:
        """The bindings are quasi-affine and independent over the loops between the block and
        its scope block: the validator's ``binding`` rule, by the same detection. The primitives
        rely on it without ``debug``: each spatial point's init runs at the instance where the
        reduce iterators are at their minimum, and with ``vk = k * k // 2`` that instance comes
        twice (k = 0 and k = 1), so the original restarts the reduction where a rewrite would not.
        A nest the validator does not judge (loop bounds that use other loops) is not refused here.
        """
        result = detect_block_bindings(self.index, self.realize)
        if result is not None and not result.ok:
            raise self.fail(
                "the bindings are not quasi-affine and independent (" + "; ".join(result.errors) + "), so the "
                "reduction cannot be shown to run its init once per spatial point, before the updates",
                self.realize,
            )

    def check_init_stores(self, stores: Sequence[BufferStore] | None, what: str = "the init") -> list[BufferStore]:
        if stores is None:
            raise self.fail(f"{what} must be a buffer store (or a sequence of them)", self.block.init)
        return list(stores)

    def check_outputs(self, stores: Sequence[BufferStore]) -> None:
        """Each init store picks its element by spatial iterators only, one element per spatial
        point, and the body touches that buffer only at that element."""
        reduce_vars = {self.block.iter_vars[k].var for k in self.reduce}
        spatial_ivs = [self.block.iter_vars[k] for k in self.spatial]
        seen: set[int] = set()
        for store in stores:
            buffer = store.buffer
            if id(buffer) in seen:
                raise self.fail(f"the init stores to {buffer.name} twice", self.block.init)
            seen.add(id(buffer))
            used = set(free_vars(store.indices)) & reduce_vars
            if used:
                names = sorted(v.name for v in used)
                raise self.fail(
                    f"the output {buffer.name} is indexed by reduce iterators {names}; "
                    "a reduction writes one element per spatial point",
                    store,
                )
            if not indices_injective(store.indices, spatial_ivs):
                raise self.fail(
                    f"cannot show that the output {buffer.name}[...] is a different element for every spatial "
                    "point (each spatial iterator must appear alone, up to sign and offset, in some index)",
                    store,
                )
            for access in accesses(self.block.body, buffer):
                if not same_indices(access.indices, store.indices):
                    raise self.fail(
                        f"the body accesses the output {buffer.name} at other indices than the init stores to",
                        access if isinstance(access, BufferStore) else self.block.body,
                    )

    def check_tile_outputs(self) -> list[Buffer]:
        """For an init that is a nest of blocks (a blockized reduction: each instance starts a
        tile): the tiles of different spatial points are disjoint, and the body touches each
        output only inside its tile. Returns the output buffers."""
        from tir.analysis import infer_block_access

        block = self.block
        assert block.init is not None
        _, init_writes = infer_block_access(Block(f"{block.name}_init", block.iter_vars, (), (), block.init))
        if not init_writes:
            raise self.fail("the init writes no buffer", block.init)
        body_reads, body_writes = infer_block_access(block.replace(init=None, reads=(), writes=()))
        spatial_vars = {block.iter_vars[k].var for k in self.spatial}
        analyzer = Analyzer()
        for iv in block.iter_vars:
            analyzer.bind(iv.var, iv.dom)
        seen: set[int] = set()
        for region in init_writes:
            buffer = region.buffer
            if id(buffer) in seen:
                raise self.fail(f"the init writes {buffer.name} in two regions", block.init)
            seen.add(id(buffer))
            for iv in (block.iter_vars[k] for k in self.spatial):
                if isinstance(iv.dom.extent, IntImm) and iv.dom.extent.value == 1:
                    continue
                if not any(_tile_dim_of(rng, iv.var, spatial_vars) for rng in region.region):
                    raise self.fail(
                        f"cannot show that the init's tiles of {buffer.name} are disjoint for different spatial "
                        f"points (a dimension must start at c * {iv.var.name} plus no spatial iterator, and "
                        "be at most |c| wide)",
                        block.init,
                    )
            for access in (*body_reads, *body_writes):
                if access.buffer is not buffer:
                    continue
                for inner, outer in zip(access.region, region.region):
                    inside = analyzer.can_prove(outer.min <= inner.min) and analyzer.can_prove(
                        inner.min + inner.extent <= outer.min + outer.extent
                    )
                    if not inside:
                        raise self.fail(
                            f"the body accesses the output {buffer.name} outside the tile the init writes", block.body
                        )
        return [region.buffer for region in init_writes]

    # ------------------------------------------------------------ loops

    def mixed_loop(self, loops: Iterable[For]) -> For | None:
        for loop in loops:
            if loop.loop_var in self.spatial_loop_vars and loop.loop_var in self.reduce_loop_vars:
                return loop
        return None

    def check_first_instance_inits(self, at_min: Iterable[For]) -> None:
        """With the loops ``at_min`` at their minimum, every reduce binding is at the minimum of
        its domain: the init (which runs at the reduce minimum) runs at the first instance of
        each spatial point, before any update."""
        at_min = list(at_min)
        vmap: dict[Var, PrimExpr] = {loop.loop_var: loop.min for loop in at_min}
        analyzer = Analyzer()
        for loop in self.loops:
            analyzer.bind(loop.loop_var, Range(loop.min, loop.extent))
        for k in self.reduce:
            iv = self.block.iter_vars[k]
            start = substitute(self.realize.iter_values[k], vmap)
            if not analyzer.can_prove_equal(start, iv.dom.min):
                raise self.fail(
                    f"reduce iterator {iv.var.name} is not at its minimum {iv.dom.min} when its loops start "
                    f"(binding {self.realize.iter_values[k]}), so the init would not run first",
                    self.realize,
                )

    def check_path_is_loops(self, top: For) -> None:
        """Only loops and statement sequences lie between ``top`` and the block."""
        for node in self.index.ancestors(self.realize):
            if node is top:
                return
            if not isinstance(node, (For, SeqStmt)):
                raise self.fail(
                    f"only loops may lie between loop {top.loop_var.name} and the block, found a {type(node).__name__}",
                    node,
                )


def _tile_dim_of(rng: Range, var: Var, spatial_vars: set[Var]) -> bool:
    """Whether ``rng`` starts at ``c * var + e`` (``e`` free of spatial iterators) and is at
    most ``|c|`` wide: then different values of ``var`` get disjoint ranges."""
    if not isinstance(rng.extent, IntImm):
        return False
    start = simplify(rng.min)
    rest = simplify(substitute(start, {var: IntImm(0, var.dtype)}))
    if set(free_vars(rest)) & spatial_vars:
        return False
    step = simplify(start - rest)
    coefficient = simplify(substitute(step, {var: IntImm(1, var.dtype)}))
    if not isinstance(coefficient, IntImm) or coefficient.value == 0:
        return False
    if not Analyzer().can_prove_equal(step, coefficient * var):
        return False  # not linear in var
    return rng.extent.value <= abs(coefficient.value)


def indices_injective(indices: Sequence[PrimExpr], spatial_ivs: Sequence[IterVar]) -> bool:
    """Sufficient test: every spatial iterator with more than one value is, up to its sign and
    an added expression of no spatial iterator, one of the indices."""
    spatial_vars = {iv.var for iv in spatial_ivs}
    for iv in spatial_ivs:
        if isinstance(iv.dom.extent, IntImm) and iv.dom.extent.value == 1:
            continue
        found = False
        for index in indices:
            if index.dtype != iv.var.dtype:
                continue
            # index = +-v + (something without spatial iterators) tells v apart.
            if any(not (set(free_vars(simplify(rest))) & spatial_vars) for rest in (index - iv.var, index + iv.var)):
                found = True
                break
        if not found:
            return False
    return True


def same_indices(a: Sequence[PrimExpr], b: Sequence[PrimExpr]) -> bool:
    from tir.ir.structural import structural_equal

    return len(a) == len(b) and all(structural_equal(x, y) for x, y in zip(a, b))


def accesses(stmt: Stmt, buffer: Buffer) -> list[BufferLoad | BufferStore]:
    found: list[BufferLoad | BufferStore] = []

    def note(n: Node) -> None:
        if isinstance(n, (BufferLoad, BufferStore)) and n.buffer is buffer:
            found.append(n)

    post_order_visit(stmt, note)
    return found


class _BufferUses(IRVisitor):
    """Buffers named anywhere under a statement, except inside one block realize."""

    def __init__(self, skip: BlockRealize) -> None:
        self.skip = skip
        self.found: set[int] = set()

    def visit_BlockRealize(self, realize: BlockRealize) -> None:
        if realize is not self.skip:
            self.generic_visit(realize)

    def visit_Buffer(self, buffer: Buffer) -> None:
        self.found.add(id(buffer))


def other_user(top: Stmt, realize: BlockRealize, buffers: Iterable[Buffer]) -> Buffer | None:
    """A buffer of ``buffers`` that something under ``top`` other than ``realize`` names."""
    uses = _BufferUses(realize)
    uses.visit(top)
    for buffer in buffers:
        if id(buffer) in uses.found:
            return buffer
    return None


def loop_copy(loop: For, var: Var, body: Stmt, vmap: dict[Var, PrimExpr]) -> For:
    """A copy of ``loop`` (kind and thread binding kept, annotations dropped) over ``var``."""
    return For(
        var,
        substitute(loop.min, vmap),
        substitute(loop.extent, vmap),
        loop.kind,
        body,
        thread_tag=loop.thread_tag,
    )


def insert_next_to(index: TreeIndex, anchor: Stmt, new: Stmt, after: bool) -> PrimFunc:
    """The function of ``index`` with ``new`` placed right before (or after) ``anchor``."""
    from tir.analysis.tree import replace_stmt

    parent = index.parent_of(anchor)
    if isinstance(parent, SeqStmt):
        stmts: list[Stmt] = []
        for item in parent.stmts:
            if item is anchor:
                stmts.extend([item, new] if after else [new, item])
            else:
                stmts.append(item)
        return replace_stmt(index, parent, SeqStmt(tuple(stmts)))
    return replace_stmt(index, anchor, SeqStmt((anchor, new) if after else (new, anchor)))
