"""Rewrite-unbound-block: give every block a GPU program leaves outside a kernel one of its own.

On a CUDA target each block must run in a kernel. A block that no rule bound (the copy of a
reindexed convolution output back to its NHWC tensor, an elementwise epilogue) and that sits
under no thread-bound loop has its loops fused, split by ``threads`` (the largest of 256, 128,
64 or 32 that divides the work; 256 with a predicate otherwise) and bound to ``blockIdx.x`` /
``threadIdx.x``. A reduction block left unbound is refused with the reason (binding its
reduction loops to threads would race).

Before::

    for ax0, ax1 in T.grid(50176, 64):
        with T.block("Y_reindex"): ...

After::

    for ax0_ax1_fused_0 in T.thread_binding(12544, thread="blockIdx.x"):
        for ax0_ax1_fused_1 in T.thread_binding(256, thread="threadIdx.x"):
            with T.block("Y_reindex"): ...
"""

from __future__ import annotations

from typing import cast

from metasched.space.postproc import Postproc, PostprocError
from metasched.space.postproc.rewrite_cooperative_fetch import copy_loops
from tir.ir import IntImm, IterKind
from tir.schedule import Schedule

__all__ = ["RewriteUnboundBlock"]


class RewriteUnboundBlock(Postproc):
    name = "rewrite_unbound_block"

    def __init__(self, max_threads: int = 256) -> None:
        self.max_threads = max_threads

    def apply(self, sch: Schedule) -> None:
        root = sch.func.body
        for name in list(sch.index.blocks):
            realize = sch.index.blocks[name]
            if realize is root or realize.block.name == "root":
                continue
            nest = sch.index.loops_above(realize)
            if any(loop.thread_tag is not None for loop in nest):
                continue
            if _has_child_blocks(realize):
                continue  # a block holding others (the root, a blockized block's parent)
            if any(iv.kind is not IterKind.SPATIAL for iv in realize.block.iter_vars):
                raise PostprocError(
                    self.name,
                    f"block {name!r} is a reduction outside every kernel: no CUDA rule scheduled it (the "
                    "Tensor Core tiling takes float16 GEMM-like blocks whose extents are multiples of the "
                    "intrinsic's; a plain GPU tiling is not there yet)",
                )
            own = copy_loops(sch.index, nest, realize)
            if not own or len(own) != len(nest) or not all(isinstance(loop.extent, IntImm) for loop in own):
                raise PostprocError(self.name, f"block {name!r} is outside every kernel and not a plain loop nest")
            total = 1
            for loop in own:
                total *= cast(IntImm, loop.extent).value  # constant: checked above
            threads = next((t for t in (256, 128, 64, 32) if t <= self.max_threads and total % t == 0), 256)
            threads = min(threads, total)
            handles = sch.get_loops(sch.get_block(name))
            fused = sch.fuse(*handles) if len(handles) > 1 else handles[0]
            outer, inner = sch.split(fused, [None, threads])
            sch.bind(outer, "blockIdx.x")
            sch.bind(inner, "threadIdx.x")


def _has_child_blocks(realize: object) -> bool:
    from tir.ir import BlockRealize, post_order_visit

    found = []
    post_order_visit(realize.block.body, lambda n: found.append(n) if isinstance(n, BlockRealize) else None)  # type: ignore[attr-defined]
    return bool(found)
