"""Rewrite-parallel-vectorize-unroll: the root block's annotations become loop kinds.

Reads (and removes) the root annotations ``meta_schedule.parallel`` (max parallel extent),
``meta_schedule.vectorize`` (max vectorized extent) and ``meta_schedule.unroll_explicit``
(unroll depth) that the parallel-vectorize-unroll rule set, then for every block:

- vectorize: the innermost loop, when it holds only the block, drives only spatial iterators,
  steps through the written buffers contiguously (no scatter stores) and its extent is a
  power of two up to the maximum (another loop is split by the largest power of two up to the
  maximum that divides it, at least 8, and the inner part vectorized; a loop longer than the
  maximum that none divides, by ``TAIL_WIDTH`` with a partial last vector);
- parallel: per loop nest under the root, the outer loops driving only spatial iterators of
  every block inside are fused while the product stays within the maximum, and the fused loop
  made ``parallel`` (fewer loops when a primitive refuses);
- unroll: inner loops (vectorized ones skipped) that hold only this block are unrolled while
  the product of their extents stays within the depth (within 16 for a block that only copies).

Before (root annotated ``parallel 32, vectorize 32, unroll 16``)::

    for i0, i1, j0, j1 in T.grid(4, 16, 8, 16):
        with T.block("B"): ...

After::

    for i0_i1_fused in T.parallel(...):   # as many outer loops as fit 32
        for j0 in range(8):
            for j1 in T.vectorized(16):
                with T.block("B"): ...
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from metasched.space.analysis import PARALLEL, UNROLL, VECTORIZE, is_copy, kinds_driven, vars_of
from metasched.space.postproc import Postproc
from tir.arith import simplify
from tir.ir import BlockRealize, For, ForKind, IntImm, IterKind, Range, SeqStmt, Stmt, substitute
from tir.schedule import Schedule, ScheduleError

__all__ = ["RewriteParallelVectorizeUnroll"]


def _attempt(sch: Schedule, step: Callable[[Schedule], Any]) -> bool:
    """Run ``step`` on a copy and keep the result only if every primitive in it succeeded (a
    refused primitive in the middle of a fuse-then-parallel must not leave the fuse behind).
    The copy continues the same schedule (same handles, trace and random state), so adopting
    its state is the same as having run the step on ``sch``, without running it twice."""
    trial = sch.copy()
    try:
        step(trial)
    except ScheduleError:
        return False
    sch.__dict__.update(trial.__dict__)
    return True


def _power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _leaf_blocks(sch: Schedule) -> list[str]:
    index = sch.index
    return [
        name
        for name, realize in index.blocks.items()
        if realize is not sch.func.body and not index.child_blocks(realize)
    ]


def _blocks_under(stmt: Stmt) -> list[BlockRealize]:
    found: list[BlockRealize] = []

    def walk(node: Stmt) -> None:
        if isinstance(node, BlockRealize):
            found.append(node)
            walk(node.block.body)
            return
        from tir.analysis.tree import child_stmts

        for child in child_stmts(node):
            walk(child)

    walk(stmt)
    return found


def _drives_only_spatial(loop: For, realizes: list[BlockRealize]) -> bool:
    """Whether ``loop`` feeds no reduction or opaque iterator of the blocks (so its iterations
    are independent as far as the blocks' signatures say)."""
    return all(kinds_driven(loop, realize) <= {IterKind.SPATIAL} for realize in realizes)


def _writes_contiguously(loop: For, realize: BlockRealize) -> bool:
    """Whether the next iteration of ``loop`` writes the next element of every buffer the block
    writes (last index up by one, the others unchanged). Vectorizing any other loop makes
    scatter stores: slow code that LLVM also takes long to compile."""
    block = realize.block
    bindings = {iv.var: value for iv, value in zip(block.iter_vars, realize.iter_values)}
    var = loop.loop_var
    # Iterations that have a next one: a packed panel's lane (j % P, in (j // P, k, j % P))
    # steps by one within the panel, and the loop is one panel.
    extent = loop.extent
    has_next = (
        {var: Range(loop.min, IntImm(extent.value - 1))} if isinstance(extent, IntImm) and extent.value > 1 else {}
    )
    for region in block.writes:
        if not region.region:
            return False
        starts = [substitute(r.min, bindings) for r in region.region]
        nexts = [substitute(start, {var: var + 1}) for start in starts]
        steps = [simplify(b - a, has_next) for a, b in zip(starts, nexts)]
        if not all(isinstance(step, IntImm) for step in steps):
            return False
        if [step.value for step in steps] != [0] * (len(steps) - 1) + [1]:  # type: ignore[attr-defined]
            return False
    return True


#: The vector of an innermost loop that no power of two of 8 or more divides (a partial last
#: vector; 16 float32 lanes: one AVX-512 register, two AVX2 ones).
TAIL_WIDTH = 16

#: The most a copy block (packing, padding, a cache stage's write-back) is unrolled at any
#: depth: copies unrolled 64 deep were as fast as at 16 and took twice as long to build (a
#: packed conv candidate 250-300 ms -> 500-840 ms, the packing copy and write-back unrolled).
COPY_UNROLL_DEPTH = 16


class RewriteParallelVectorizeUnroll(Postproc):
    name = "rewrite_parallel_vectorize_unroll"

    def apply(self, sch: Schedule) -> None:
        root = sch.func.body
        assert isinstance(root, BlockRealize)
        annotations = root.block.annotations
        keys = [key for key in (PARALLEL, VECTORIZE, UNROLL) if key in annotations]
        if not keys:
            return
        values = {key: int(annotations[key]) for key in keys}
        root_rv = sch.get_block(root.block.name)
        for key in keys:
            sch.unannotate(root_rv, key)
        if values.get(VECTORIZE, 0) > 1:
            self.vectorize(sch, values[VECTORIZE])
        if values.get(PARALLEL, 0) > 1:
            self.parallelize(sch, values[PARALLEL])
        if values.get(UNROLL, 0) > 1:
            self.unroll(sch, values[UNROLL])

    # ---------------------------------------------------------------- vectorize

    def vectorize(self, sch: Schedule, max_extent: int) -> None:
        for name in _leaf_blocks(sch):
            realize = sch.index.blocks[name]
            loops = sch.index.loops_above(realize)
            if not loops:
                continue
            loop = loops[-1]
            if loop.body is not realize or loop.kind is not ForKind.SERIAL:
                continue
            if not (isinstance(loop.extent, IntImm) and _drives_only_spatial(loop, [realize])):
                continue
            if not any(loop.loop_var in vars_of(value) for value in realize.iter_values):
                continue
            if not _writes_contiguously(loop, realize):
                continue
            extent = loop.extent.value
            if extent <= max_extent and extent >= 2 and _power_of_two(extent):
                # mypy cannot infer a lambda with default arguments (a checker limitation)
                _attempt(sch, lambda s, name=name: s.vectorize(s.get_loops(s.get_block(name))[-1]))  # type: ignore[misc]
                continue
            # Split by the largest power of two of 8 or more that divides it: 24 channels of a
            # register tile (120 = 5 x 24 at 16 lanes) as 3 vectors of 8 (they ran scalar: a 5x5
            # depthwise convolution 28x28x120 at 0.15 ms, 0.05 ms once vectorized).
            width = max_extent
            while width >= 8 and extent % width:
                width //= 2
            if width < 8:
                if extent <= max_extent or extent < TAIL_WIDTH * 2:
                    continue
                # No power of two of 8 or more divides it (a softmax over 50 or 750 tokens):
                # vectors of TAIL_WIDTH and a partial last one, whose guard lowering takes out
                # of the full ones (partition_tails); the tail runs scalar.
                width = TAIL_WIDTH

            def split_and_vectorize(s: Schedule, name: str = name, width: int = width) -> None:
                _, inner = s.split(s.get_loops(s.get_block(name))[-1], [None, width])
                s.vectorize(inner)

            _attempt(sch, split_and_vectorize)

    # ---------------------------------------------------------------- parallel

    def parallelize(self, sch: Schedule, max_extent: int) -> None:
        root = sch.func.body
        assert isinstance(root, BlockRealize)
        body = root.block.body
        tops = list(body.stmts) if isinstance(body, SeqStmt) else [body]
        plans: list[tuple[str, int]] = []
        for top in tops:
            chain: list[For] = []
            product = 1
            node: Stmt | None = top
            while isinstance(node, For):
                if node.kind is not ForKind.SERIAL or not isinstance(node.extent, IntImm):
                    break
                if not _drives_only_spatial(node, _blocks_under(node)):
                    break
                extent = node.extent.value
                # Past the maximum stop, unless the loops so far give no parallelism at all
                # (unit loops: then this loop is the first one worth running in parallel).
                if chain and product > 1 and product * extent > max_extent:
                    break
                chain.append(node)
                product *= extent
                if product >= max_extent:
                    break
                node = node.body if isinstance(node.body, For) else None
            while chain and chain[-1].extent.value == 1 and len(chain) > 1:  # type: ignore[attr-defined]
                chain.pop()
            if not chain or product <= 1:
                continue
            children = sch.index.child_blocks(chain[-1])
            if not children:
                continue
            plans.append((children[0].block.name, len(chain)))
        for name, count in plans:
            for n in range(count, 0, -1):

                def fuse_and_parallel(s: Schedule, name: str = name, n: int = n) -> None:
                    loops = s.get_loops(s.get_block(name))[:n]
                    s.parallel(s.fuse(*loops) if n > 1 else loops[0])

                if _attempt(sch, fuse_and_parallel):
                    break

    # ---------------------------------------------------------------- unroll

    def unroll(self, sch: Schedule, depth: int) -> None:
        for name in _leaf_blocks(sch):
            realize = sch.index.blocks[name]
            loops = sch.index.loops_above(realize)
            chosen: list[int] = []
            product = 1
            limit = min(depth, COPY_UNROLL_DEPTH) if is_copy(realize.block) else depth
            for position in range(len(loops) - 1, -1, -1):
                loop = loops[position]
                if loop.kind is ForKind.VECTORIZED:
                    continue
                if loop.kind not in (ForKind.SERIAL, ForKind.UNROLLED) or not isinstance(loop.extent, IntImm):
                    break
                if len(_blocks_under(loop)) > 1:
                    # A loop around other blocks too would copy all of them: the depth limits
                    # this block's unrolling only (one such candidate took minutes to build).
                    break
                product *= loop.extent.value
                if product > limit:
                    break
                if loop.kind is ForKind.SERIAL and loop.extent.value > 1:
                    chosen.append(position)
            if not chosen:
                continue
            handles = sch.get_loops(sch.get_block(name))
            for position in chosen:
                sch.unroll(handles[position])
