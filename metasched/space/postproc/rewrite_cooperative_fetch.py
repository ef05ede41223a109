"""Rewrite-cooperative-fetch: spread each annotated shared-memory copy over its thread block.

A copy block annotated ``meta_schedule.cooperative_fetch`` (by the Tensor Core tiling rule, with
the widest vector in elements) has its own loops fused into one, split by the kernel's thread
counts -- ``threadIdx.y`` (the warps, as the kernel's compute binds it) and 32 lanes of
``threadIdx.x`` -- and a vector of the widest width up to the annotation that divides the copy
evenly (8 float16 = 16 bytes: one ``cp.async`` or one 128-bit load). The warp count is known only
once the tile sizes are, hence a postprocessor (the rule's trace holds them as samples).

Before (a 64 x 32 tile of A, 4 warps)::

    for ko in range(...):
        for ax0, ax1 in T.grid(64, 32):
            with T.block("A_shared"):
                T.block_attr({"meta_schedule.cooperative_fetch": 8})
                ...

After::

    for ko in range(...):
        for ax0_ax1_fused_0 in range(2):
            for ax0_ax1_fused_1 in T.thread_binding(4, thread="threadIdx.y"):
                for ax0_ax1_fused_2 in T.thread_binding(32, thread="threadIdx.x"):
                    for ax0_ax1_fused_3 in T.vectorized(8):
                        with T.block("A_shared"): ...
"""

from __future__ import annotations

from typing import cast

from metasched.space.postproc import Postproc, PostprocError
from tir.analysis.tree import TreeIndex
from tir.ir import For, IntImm, post_order_visit
from tir.schedule import Schedule

__all__ = [
    "COOPERATIVE_FETCH",
    "COOPERATIVE_FETCH_ROWS",
    "RewriteCooperativeFetch",
    "copy_loops",
    "kernel_thread_extent",
]

#: The annotation the rule leaves on a copy block: the widest vector (elements) it may use.
COOPERATIVE_FETCH = "meta_schedule.cooperative_fetch"
#: With it, ``r``: consecutive lanes take the same vector of ``r`` consecutive rows before the
#: next vector (rows shorter than the 128 bytes a phase of 16-byte accesses covers). Into rows
#: padded to an odd number of 16-byte units, the 8 lanes of a phase then hit 8 different bank
#: groups, where walking along the rows put two rows in a phase, 2-way conflicting; a warp still
#: covers the same rows and bytes of global memory.
COOPERATIVE_FETCH_ROWS = "meta_schedule.cooperative_fetch_rows"
WARP_SIZE = 32


def kernel_thread_extent(index: TreeIndex, loops: list[For], tag: str) -> int:
    """The extent of the loops bound to ``tag`` in the kernel around ``loops`` (1 when none)."""
    kernel = next((loop for loop in loops if loop.thread_tag is not None), None)
    if kernel is None:
        return 1
    found: list[int] = []

    def visit(node: object) -> None:
        if isinstance(node, For) and node.thread_tag == tag and isinstance(node.extent, IntImm):
            found.append(node.extent.value)

    post_order_visit(kernel, visit)
    return max(found, default=1)


def copy_loops(index: TreeIndex, loops: list[For], realize: object) -> list[For]:
    """The innermost loops around ``realize`` that hold nothing else (its own loop nest)."""
    own: list[For] = []
    child: object = realize
    for loop in reversed(loops):
        if loop.body is not child or loop.thread_tag is not None:
            break
        own.append(loop)
        child = loop
    return own[::-1]


class RewriteCooperativeFetch(Postproc):
    name = "rewrite_cooperative_fetch"

    def apply(self, sch: Schedule) -> None:
        names = [n for n, r in sch.index.blocks.items() if COOPERATIVE_FETCH in r.block.annotations]
        for name in names:
            realize = sch.index.blocks[name]
            widest = int(realize.block.annotations[COOPERATIVE_FETCH])
            nest = sch.index.loops_above(realize)
            own = copy_loops(sch.index, nest, realize)
            if not own or not all(isinstance(loop.extent, IntImm) for loop in own):
                raise PostprocError(self.name, f"block {name!r}: the copy has no loop nest of constant extent")
            total = 1
            for loop in own:
                total *= cast(IntImm, loop.extent).value  # constant: checked above
            warps = kernel_thread_extent(sch.index, nest, "threadIdx.y")
            threads = warps * WARP_SIZE
            vector = next((v for v in (widest, 8, 4, 2, 1) if v <= widest and total % (threads * v) == 0), 1)
            block = sch.get_block(name)
            handles = sch.get_loops(block)[len(nest) - len(own) :]
            rows = int(realize.block.annotations.get(COOPERATIVE_FETCH_ROWS, 0))
            if rows > 1 and _interleavable(own, vector, rows):
                # [..., rows, cols] -> [..., row groups, vectors, rows of a group] + the vector.
                row_groups, row = sch.split(handles[-2], [None, rows])
                column, lanes = sch.split(handles[-1], [None, vector])
                sch.reorder(row_groups, column, row, lanes)
                fused = sch.fuse(*handles[:-2], row_groups, column, row)
                parts = [*sch.split(fused, [None, warps, WARP_SIZE]), lanes]
            else:
                fused = sch.fuse(*handles) if len(handles) > 1 else handles[0]
                factors: list[int | None] = [None, warps, WARP_SIZE] + ([vector] if vector > 1 else [])
                parts = sch.split(fused, factors)
            sch.bind(parts[1], "threadIdx.y")
            sch.bind(parts[2], "threadIdx.x")
            if vector > 1:
                sch.vectorize(parts[3])
            sch.unannotate(sch.get_block(name), COOPERATIVE_FETCH)
            if rows:
                sch.unannotate(sch.get_block(name), COOPERATIVE_FETCH_ROWS)


def _interleavable(own: list[For], vector: int, rows: int) -> bool:
    """Whether a copy nest's last two loops (rows, columns) split into ``rows`` rows and vectors
    of ``vector``, with fewer than 8 vectors to a row (else a phase stays within one row)."""
    if len(own) < 2 or vector < 2:
        return False
    row_extent = cast(IntImm, own[-2].extent).value
    column_extent = cast(IntImm, own[-1].extent).value
    return row_extent % rows == 0 and column_extent % vector == 0 and column_extent // vector < 8
