"""Multi-level tiling with a tensor intrinsic: auto-tensorization in the design space.

Fits a block for which ``metasched.space.tensorize.tensorize_candidates`` finds an intrinsic of
the target (the analysis that ran the whole application on a copy and verified it). Per
candidate, and per output-cache choice, one sketch:

1. ``apply_candidate`` (without the last step): operands copied into fused form (``reindex``),
   iterators fused by characteristic vector, padding to the intrinsic's extents, the operands'
   copies stored in the layout the intrinsic reads, and the intrinsic-sized loops blockized --
   the block ``<name>_o`` whose loops are the work left outside the intrinsic;
2. those loops tiled "SSRSRS" by ``MultiLevelTiling.tile`` (sampled tile sizes; optionally an
   output cache or the epilogue at tile level 1 or 2), so the search chooses the register tile
   of intrinsic calls and the cache tiles around it;
3. AutoCopy-style packing: each copy that stores an operand in a new layout (the packed
   ``B[n // 8, k // 4, n % 8 * 4 + k % 4]`` of the x86 int8 dot products) iterates in the
   order of that layout (``transform_block_layout``), so its innermost loop writes contiguously
   and the postprocessor vectorizes it; chained copies of one operand (a convolution's im2col
   copy, then its padded copy; unpadding, then the copy back) are merged into one
   (``compute_inline`` / ``reverse_compute_inline``); each copy is made once, at the root;
4. ``tensorize`` of the blockized block, last, so every candidate is tensorized (a variant a
   primitive refuses is dropped).

Which intrinsics: those named (``intrinsics=``, from ``metasched.tune(..., intrinsics=[...])``);
by default every intrinsic the target can run that is registered for its instruction set
(``isa``), built-in or a user's, except the float32 FMA tiles of tir/intrin (the plain
multi-level tiling vectorizes float32 as well, with its tuned operand packing). An intrinsic
registered without an ``isa`` runs anywhere and is often a test or tutorial intrinsic: it is
used when named. A block with candidates gets only tensorized sketches (as TVM's
``MultiLevelTilingWithIntrin`` does); the other blocks are left to the next rules.

Before (uint8 x int8 -> int32 matmul, AVX2, A declared below 128)::

    for i, j, k in T.grid(64, 64, 64):
        with T.block("C"): ...

After (one sketch; tile sizes are sampled)::

    for j, k in T.grid(...):                          # B packed, contiguous writes
        with T.block("B_reindex"): ...
    for i_0, j_0, i_1, j_1, k_0, i_2, j_2, k_1, i_3, j_3 in T.grid(...):
        with T.block("C_o"):                          # one vpmaddubsw + vpmaddwd step
            ...
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from metasched.space.analysis import TILED
from metasched.space.rules import SketchRule, try_on_copy
from metasched.space.rules.multi_level_tiling import MultiLevelTiling
from metasched.space.tensorize import TensorizeCandidate, apply_candidate, index_text, tensorize_candidates
from tir.intrin import TensorIntrin
from tir.ir import Block, BlockRealize, BufferStore, IterKind, PrimExpr, Var, substitute
from tir.schedule import Schedule
from tir.schedule.handles import BlockRV
from tir.target import Target

__all__ = ["TENSORIZED", "MultiLevelTilingWithIntrin", "default_intrinsics", "pack_in_layout_order"]

#: Annotation on a tensorized block: the intrinsic's name.
TENSORIZED = "meta_schedule.auto_tensorize"


def default_intrinsics(target: Target) -> list[str]:
    """The intrinsics the rule uses when none are named (see the module docstring)."""
    from tir.intrin.arm import NEON_FMA_F32
    from tir.intrin.x86 import AVX2_FMA_F32

    plain_float = {AVX2_FMA_F32, NEON_FMA_F32}
    return [
        name
        for name in TensorIntrin.list(target=target)
        if TensorIntrin.get(name).isa == target.isa and name not in plain_float
    ]


class MultiLevelTilingWithIntrin(SketchRule):
    name = "multi_level_tiling_intrin"
    structure = "SSRSRS"

    def __init__(
        self,
        target: Target,
        intrinsics: Sequence[str] | None = None,
        max_innermost_factor: int = 8,
        write_levels: tuple[int, ...] = (1, 2),
    ) -> None:
        self.target = target
        self.intrinsics = list(intrinsics) if intrinsics is not None else None
        self.write_levels = write_levels
        self.tiling = MultiLevelTiling(self.target, max_innermost_factor=max_innermost_factor)

    def names(self) -> list[str]:
        return self.intrinsics if self.intrinsics is not None else default_intrinsics(self.target)

    def candidates(self, sch: Schedule, block: BlockRV) -> list[TensorizeCandidate]:
        realize = sch.resolve_block(block, self.name)
        if TILED in realize.block.annotations or not _looks_like_an_update(realize):
            return []
        names = self.names()
        if not names:
            return []
        report = tensorize_candidates(sch.func, self.target, names, blocks=[realize.block.name])
        return report[realize.block.name].fits

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        results = []
        for candidate in self.candidates(sch, block):
            for level in (None, *self.write_levels):
                # mypy cannot infer a lambda with default arguments (a checker limitation)
                made = try_on_copy(sch, lambda s, c=candidate, level=level: self._sketch(s, block, c, level))  # type: ignore[misc]
                if made is not None:
                    results.append(made)
        return results or [sch]

    def _sketch(self, sch: Schedule, block: BlockRV, candidate: TensorizeCandidate, level: int | None) -> None:
        before = set(sch.index.blocks)
        outer = apply_candidate(sch, block, candidate, tensorize=False)
        self.tiling.tile(sch, outer, level)  # annotates it as tiled
        made = [n for n in sch.index.blocks if n not in before and n != cast(Block, sch.get(outer)).name]
        for name in made:
            pack_in_layout_order(sch, name)
        _merge_copies(sch, made)
        sch.tensorize(outer, candidate.intrin)
        sch.annotate(outer, TENSORIZED, candidate.intrin)


def _looks_like_an_update(realize: BlockRealize) -> bool:
    """Cheap filter before the analysis: one store, plain iterators."""
    block = realize.block
    return isinstance(block.body, BufferStore) and all(
        iv.kind in (IterKind.SPATIAL, IterKind.REDUCE) for iv in block.iter_vars
    )


def _merge_copies(sch: Schedule, made: list[str]) -> None:
    """Chained copies made by the application become one: a copy read only by another new copy
    (the operand's reindexed copy, then its padded copy) is inlined into it, and a copy that
    only writes back what another new copy wrote (unpadding, then the reindexed output's copy
    back) is inlined into that one. Best effort: a refused step leaves both copies."""
    new = set(made)
    for name in made:
        if name not in sch.index.blocks:
            continue
        block = sch.get_block(name)
        consumers = [cast(Block, sch.get(c)).name for c in sch.get_consumers(block)]
        producers = [cast(Block, sch.get(p)).name for p in sch.get_producers(block)]
        if consumers and all(c in new for c in consumers):
            step = try_on_copy(sch, lambda s, name=name: s.compute_inline(s.get_block(name)))  # type: ignore[misc]  # as above
        elif len(producers) == 1 and producers[0] in new:
            step = try_on_copy(sch, lambda s, name=name: s.reverse_compute_inline(s.get_block(name)))  # type: ignore[misc]  # as above
        else:
            continue
        if step is not None:
            sch.__dict__.update(step.__dict__)


def pack_in_layout_order(sch: Schedule, name: str) -> None:
    """A copy block ``X[f(v)] = Y[...]`` whose store is not in iterator order gets its loops in
    the order of ``X``'s layout, so consecutive iterations write consecutive elements (best
    effort: left alone when the primitive refuses)."""
    realize = sch.index.blocks.get(name)
    if realize is None:
        return
    block = realize.block
    store = block.body
    if block.init is not None or not isinstance(store, BufferStore) or not block.iter_vars:
        return
    if any(iv.kind is not IterKind.SPATIAL for iv in block.iter_vars):
        return
    iters = [iv.var for iv in block.iter_vars]
    if len(store.indices) == len(iters) and all(a is b for a, b in zip(store.indices, iters)):
        return  # already in order
    params = [f"v{k}" for k in range(len(iters))]
    renamed: dict[Var, PrimExpr] = {var: Var(p, var.dtype) for var, p in zip(iters, params)}
    try:
        results = [index_text(substitute(index, renamed)) for index in store.indices]
    except ValueError:  # an index a map cannot state: leave the copy as it is
        return
    text = f"lambda {', '.join(params)}: ({', '.join(results)},)"
    try_step = try_on_copy(sch, lambda s: s.transform_block_layout(s.get_block(name), text))
    if try_step is not None:
        sch.__dict__.update(try_step.__dict__)
