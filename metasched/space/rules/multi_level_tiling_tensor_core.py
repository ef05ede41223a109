"""Multi-level tiling with Tensor Core intrinsics: the GPU sketch rule, "SSSRRSRS".

Fits a float16 GEMM-like block (``C += cast(A) * cast(B)``: matmul, dense, conv2d NHWC through
ReIndex) that ``metasched.space.tensorize.match_intrin`` maps onto a registered Tensor Core
``*_sync`` intrinsic of the target with every block iterator inside the intrinsic (no batch
class) and no padding needed. Per intrinsic group (WMMA float32 / float16 accumulate,
``mma.sync`` m16n8k16 with ``ldmatrix`` on sm_80+) and per pipeline depth, one sketch: the
hand schedule of examples/matmul_tensorcore.py with its constants sampled.

1. GEMM form, by the tensorization analysis' own steps (``to_fused_form``): operands not
   indexed one plain index per fused iterator are copied (``reindex``: a convolution's input
   becomes its im2col copy, the weights a ``[k, n]`` matrix), the iterators fused by
   characteristic vector (``transform_block_layout``): ``C'[m, n] += A'[m, k] * B'[k, n]``;
2. data movement (AutoCopy): the accumulator in the intrinsic's fragment scope
   (``cache_write``), A' and B' staged in ``shared`` memory and from there in the fragment
   scopes the intrinsic reads (``cache_read`` twice); the operand copies of step 1 are inlined
   into the shared-memory copies, so the im2col matrix is never stored. A reindexed output
   (a convolution's ``C'``) goes fragment -> shared -> the output tensor itself (the copy back
   is inlined into the shared tile's writer), since a kernel cannot allocate a global ``C'``;
3. tiling: ``m`` split into [blockIdx.y, warps, tiles per warp, 16], ``n`` into [blockIdx.x,
   warps, tiles per warp, 16 or 8], ``k`` into [ko, ki, 16]; the order is
   ``bm bn ko (wm wn) ki tm tn | m16 n16 k16`` (S S R S R S, the two warp loops fused and bound
   to ``threadIdx.y``; a warp's 32 lanes are ``threadIdx.x``). The sizes are decisions:
   tiles per warp and warps per axis are ``sample_categorical`` among the divisors that fit
   (a warp's tile at most 64 rows, 32 through shared memory, and 64 columns: 4 tiles of 16, or
   8 of mma.sync's 8; warps at most 2), each safe to change alone, so the search's mutants
   replay; ``ki`` is a ``sample_perfect_tile`` of at most 2. Every sample fits the thread
   limits; tiles with their pipeline stages over 48 KB take dynamic shared memory
   (``tir.transform.dynamic_shared_memory``), and the verifier holds them to the GPU's limit;
4. the shared copies sit at ``ko``, their rows padded against bank conflicts
   (``storage_align``: rows of 32k + 8 halves) and annotated ``meta_schedule.cooperative_fetch``
   (``RewriteCooperativeFetch`` spreads them over the thread block, vectorized up to 16 bytes,
   once the warp count is known) with ``cooperative_fetch_rows`` 8: lanes take one 16-byte
   column of 8 rows before the next column, so with the padding neither the copies nor the
   ``ldmatrix`` loads conflict (``tir.analysis.bank_conflicts``); a staged accumulator tile
   has rows of 32k + 4 floats and is copied out the same way; the fragment loads sit at ``ki`` and the accumulator tiles
   are stored back per warp at ``bn``, all tensorized here;
5. the update annotated ``meta_schedule.tensor_core`` (``RewriteTensorCore`` decomposes the
   reduction at ``ko`` and tensorizes the fill and the update: the init's loop nest depends on
   the sampled sizes); with a pipeline depth ``d`` of 2 or more, ``ko`` software-pipelined
   (``software_pipeline_stage`` ``[0, 0, d - 1]``: the next ``d - 1`` k tiles are copied, with
   ``cp.async`` on sm_80+, into ``d`` versions of the shared tiles while this one is
   multiplied).

A step a primitive refuses drops that sketch; a block no group fits is left to the next rules.
Not done: batch classes (batch matmul), extents that need padding (``pad_einsum``'s unpadding
copy carries a predicate ``reverse_compute_at`` refuses), an epilogue fused into the store.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import tir.intrin.cuda as I
from metasched.space.analysis import TILED
from metasched.space.postproc.rewrite_cooperative_fetch import COOPERATIVE_FETCH, COOPERATIVE_FETCH_ROWS
from metasched.space.postproc.rewrite_tensor_core import TENSOR_CORE
from metasched.space.rules import SketchRule, try_on_copy
from metasched.space.rules.multi_level_tiling_intrin import pack_in_layout_order
from metasched.space.tensorize import TensorizeCandidate, match_intrin, operand_position, to_fused_form
from tir.intrin import IntrinError, TensorIntrin
from tir.ir import Block, BufferStore, IterKind
from tir.schedule import Schedule, ScheduleError
from tir.schedule.handles import BlockRV, ExprRV, LoopRV
from tir.target import Target

__all__ = ["GROUPS", "MultiLevelTilingTensorCore", "TensorCoreGroup", "default_groups"]

#: storage_align of the shared tiles: rows padded to 32k + 8 halves (off the 128-byte period).
ALIGN_FACTOR = 32
ALIGN_OFFSET = 8
#: The same for a float32 accumulator tile staged in shared memory: rows of 32k + 4 floats.
C_ALIGN_OFFSET = 4


@dataclass(frozen=True)
class TensorCoreGroup:
    """The intrinsics one Tensor Core sketch uses, and the fragment scopes they read."""

    name: str
    load_a: str
    load_b: str
    sync: str
    fill: str
    store: str
    store_shared: str
    scopes: tuple[str, str, str]  # A, B, accumulator
    n_tile: int  # columns of one accumulator / B tile


GROUPS = (
    TensorCoreGroup(
        "wmma_f32",
        I.WMMA_LOAD_A,
        I.WMMA_LOAD_B,
        I.WMMA_SYNC_F16F16F32,
        I.WMMA_FILL_F32,
        I.WMMA_STORE_F32_GLOBAL,
        I.WMMA_STORE_F32_SHARED,
        ("wmma.matrix_a", "wmma.matrix_b", "wmma.accumulator"),
        16,
    ),
    TensorCoreGroup(
        "wmma_f16",
        I.WMMA_LOAD_A,
        I.WMMA_LOAD_B,
        I.WMMA_SYNC_F16F16F16,
        I.WMMA_FILL_F16,
        I.WMMA_STORE_F16_GLOBAL,
        I.WMMA_STORE_F16_SHARED,
        ("wmma.matrix_a", "wmma.matrix_b", "wmma.accumulator"),
        16,
    ),
    TensorCoreGroup(
        "mma_f32",
        I.MMA_LDMATRIX_A,
        I.MMA_LDMATRIX_B,
        I.MMA_SYNC_F16F16F32,
        I.MMA_FILL_F32,
        I.MMA_STORE_F32_GLOBAL,
        I.MMA_STORE_F32_SHARED,
        ("m16n8k16.matrixA", "m16n8k16.matrixB", "m16n8k16.matrixC"),
        8,
    ),
)


def default_groups(target: Target) -> list[TensorCoreGroup]:
    """The groups whose every intrinsic the target can run (WMMA from sm_70, mma.sync sm_80)."""
    if not target.is_cuda:
        return []
    found = []
    for group in GROUPS:
        names = (group.load_a, group.load_b, group.sync, group.fill, group.store, group.store_shared)
        try:
            if all(TensorIntrin.get(n).available(target) for n in names):
                found.append(group)
        except IntrinError:
            continue
    return found


class MultiLevelTilingTensorCore(SketchRule):
    """The rule (module docstring). ``groups``: the intrinsic groups to try (default: those the
    target runs); ``max_warp_tiles`` / ``max_warps``: per axis, the most intrinsic tiles per
    warp (rows; columns in 16-wide tiles) and warps per thread block; ``max_k_tiles``: the most
    k tiles per shared-memory stage; ``pipeline``: the pipeline depths (shared-memory versions
    of the operand tiles; 1: not pipelined), one sketch each."""

    name = "multi_level_tiling_tensor_core"
    structure = "SSSRRSRS"

    def __init__(
        self,
        target: Target,
        groups: Sequence[TensorCoreGroup] | None = None,
        max_warp_tiles: int = 4,
        max_warps: int = 2,
        max_k_tiles: int = 2,
        pipeline: tuple[int, ...] = (3, 2, 1),
    ) -> None:
        self.target = target
        self.groups = list(groups) if groups is not None else default_groups(self.target)
        self.max_warp_tiles = max_warp_tiles
        self.max_warps = max_warps
        self.max_k_tiles = max_k_tiles
        self.pipeline = pipeline

    def candidates(self, sch: Schedule, block: BlockRV) -> list[tuple[TensorCoreGroup, TensorizeCandidate]]:
        """The groups whose update intrinsic fits ``block`` with every iterator inside it."""
        realize = sch.resolve_block(block, self.name)
        body = realize.block.body
        if TILED in realize.block.annotations or not isinstance(body, BufferStore):
            return []
        if any(iv.kind not in (IterKind.SPATIAL, IterKind.REDUCE) for iv in realize.block.iter_vars):
            return []
        fits = []
        for group in self.groups:
            found = match_intrin(sch.func, realize.block.name, TensorIntrin.get(group.sync))
            if not isinstance(found, TensorizeCandidate):
                continue
            if sorted(g.intrin_iter or "" for g in found.groups) != ["vi", "vj", "vk"]:
                continue  # a batch class stays outside: not handled
            if found.padded:
                continue  # extents not multiples of the intrinsic's: padding not handled yet
            fits.append((group, found))
        return fits

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        results = []
        for group, candidate in self.candidates(sch, block):
            for depth in self.pipeline:
                # mypy cannot infer a lambda with default arguments (a checker limitation)
                made = try_on_copy(sch, lambda s, g=group, c=candidate, d=depth: self._sketch(s, block, g, c, d))  # type: ignore[misc]
                if made is not None:
                    results.append(made)
        return results or [sch]

    # ----------------------------------------------------------------- one sketch

    def _sketch(
        self, sch: Schedule, block: BlockRV, group: TensorCoreGroup, candidate: TensorizeCandidate, depth: int
    ) -> None:
        before = set(sch.index.blocks)
        # Step 1 is tensorization's own (apply_candidate's first steps); the loops are the
        # groups', every one mapped to an iterator of the intrinsic (candidates() checked).
        loops = to_fused_form(sch, block, candidate)
        by_iter = {g.intrin_iter: loop for g, loop in zip(candidate.groups, loops)}
        m, n, k = by_iter["vi"], by_iter["vj"], by_iter["vk"]
        copies = [name for name in sch.index.blocks if name not in before]
        for name in copies:
            pack_in_layout_order(sch, name)  # copies iterate in their (fused) layout's order
        scope_a, scope_b, scope_c = group.scopes
        c_frag = sch.cache_write(block, operand_position(sch, block, group.sync, "C"), scope_c)
        a_shared = sch.cache_read(block, operand_position(sch, block, group.sync, "A"), "shared")
        b_shared = sch.cache_read(block, operand_position(sch, block, group.sync, "B"), "shared")
        a_frag = sch.cache_read(block, operand_position(sch, block, group.sync, "A"), scope_a)
        b_frag = sch.cache_read(block, operand_position(sch, block, group.sync, "B"), scope_b)
        # The operand copies of step 1 (im2col, the weights' matrix) are read only by the
        # shared-memory copies now: inline them, so the shared copies read the originals.
        for name in copies:
            if name in sch.index.blocks and sch.get_consumers(sch.get_block(name)):
                consumers = [cast(Block, sch.get(c)).name for c in sch.get_consumers(sch.get_block(name))]
                if all(
                    c in (cast(Block, sch.get(a_shared)).name, cast(Block, sch.get(b_shared)).name) for c in consumers
                ):
                    sch.compute_inline(sch.get_block(name))

        # A reindexed output (a convolution's C'[m, n]) goes back to its tensor through shared
        # memory: C' itself would be a global buffer, which a kernel cannot allocate.
        out_copy = next((b for b in copies if b in sch.index.blocks and _writes_param(sch, b, sch.func)), None)
        c_shared = None
        if out_copy is not None:
            c_shared = sch.cache_write(c_frag, 0, "shared")
            # Rows of 32k + 4 floats: a warp's accumulator stores (lane l at row l / 4, column
            # 2 * (l % 4)) fall 2-way on the banks instead of 4- to 8-way (rows of 32k floats);
            # the copy-out then reads 8 rows of one 16-byte column per phase (conflict-free).
            sch.storage_align(c_frag, 0, axis=0, factor=ALIGN_FACTOR, offset=C_ALIGN_OFFSET)
            _iterate_as_read(sch, out_copy)
            sch.reverse_compute_inline(sch.get_block(out_copy))
        m16, m_in = sch.split(m, [None, 16])
        n16, n_in = sch.split(n, [None, group.n_tile])
        k16, k_in = sch.split(k, [None, 16])
        most_m = self.max_warp_tiles if c_shared is None else min(self.max_warp_tiles, 2)
        (bm, wm, tm), wm_size = _warp_tiles(sch, m16, most_m, self.max_warps)
        most_n = self.max_warp_tiles * 16 // group.n_tile  # the same 64 columns in mma's 8-wide tiles
        (bn, wn, tn), wn_size = _warp_tiles(sch, n16, most_n, self.max_warps)
        ko, ki = sch.split(k16, sch.sample_perfect_tile(k16, n=2, max_innermost_factor=self.max_k_tiles))
        sch.reorder(bm, bn, ko, wm, wn, ki, tm, tn, m_in, n_in, k_in)
        sch.bind(bm, "blockIdx.y")
        sch.bind(bn, "blockIdx.x")
        sch.bind(sch.fuse(wm, wn), "threadIdx.y")

        # The accumulator tiles go back per warp, at the thread block's tile.
        sch.reverse_compute_at(c_frag, bn)
        ci, cj = sch.get_loops(c_frag)[-2:]
        cwi, ci0, ci1 = sch.split(ci, [wm_size, None, 16])
        cwj, cj0, cj1 = sch.split(cj, [wn_size, None, group.n_tile])
        sch.reorder(cwi, cwj, ci0, cj0, ci1, cj1)
        sch.bind(sch.fuse(cwi, cwj), "threadIdx.y")
        sch.tensorize(ci1, group.store if c_shared is None else group.store_shared)
        if c_shared is not None:
            # c_shared copies the shared tile out, to the tensor itself since the inlining.
            sch.reverse_compute_at(c_shared, bn)
            sch.annotate(c_shared, COOPERATIVE_FETCH, 4)
            sch.annotate(c_shared, COOPERATIVE_FETCH_ROWS, 8)

        sch.compute_at(a_frag, ki)
        sch.compute_at(b_frag, ki)
        sch.compute_at(a_shared, ko)
        sch.compute_at(b_shared, ko)
        for cached in (a_shared, b_shared):
            sch.storage_align(cached, 0, axis=0, factor=ALIGN_FACTOR, offset=ALIGN_OFFSET)
            sch.annotate(cached, COOPERATIVE_FETCH, 8)  # 8 halves: 16 bytes, one cp.async
            # Lanes take 8 rows of one 16-byte column before the next: the padded rows (an odd
            # number of 16-byte units) then put a phase's 8 stores in 8 bank groups.
            sch.annotate(cached, COOPERATIVE_FETCH_ROWS, 8)
        ai = sch.get_loops(a_frag)[-2]
        _, ai1 = sch.split(ai, [None, 16])
        sch.tensorize(ai1, group.load_a)
        bk, bj = sch.get_loops(b_frag)[-2:]
        bj0, _ = sch.split(bj, [None, group.n_tile])
        sch.reorder(bj0, bk)
        sch.tensorize(bk, group.load_b)

        # decompose_reduction at ko and the update's and init's tensorize wait for the
        # postprocessor: the init's loop nest drops the loops of extent 1, so its length
        # depends on the tile sizes, which a trace must not.
        sch.annotate(block, TENSOR_CORE, f"{group.sync},{group.fill}")
        if depth > 1:
            # Copy k tiles up to ko + depth - 1 (stage 0: A, B) while tile ko is multiplied.
            sch.annotate(ko, "software_pipeline_stage", [0, 0, depth - 1])
            sch.annotate(ko, "software_pipeline_order", [0, 1, 2])


def _warp_tiles(sch: Schedule, loop: LoopRV, most_tiles: int, most_warps: int) -> tuple[list[LoopRV], ExprRV]:
    """``loop`` (in intrinsic tiles) split into [thread blocks, warps, tiles per warp] by two
    sampled choices, each alone safe to mutate: tiles per warp among the divisors of the
    extent up to ``most_tiles``, warps among those up to ``most_warps`` that divide the extent
    with the most tiles per warp. Returns the loops and the warps' sample."""
    extent = sch.get(loop).extent.value  # type: ignore[union-attr]
    tiles = [d for d in range(1, most_tiles + 1) if extent % d == 0]
    warps = [w for w in range(1, most_warps + 1) if extent % (w * tiles[-1]) == 0]
    tile = sch.sample_categorical(tiles, [1.0] * len(tiles))
    warp = sch.sample_categorical(warps, [1.0] * len(warps))
    return sch.split(loop, [None, warp, tile]), warp


def _writes_param(sch: Schedule, name: str, func: object) -> bool:
    """Whether block ``name`` writes one of the function's parameters (an output copy)."""
    block = sch.index.blocks[name].block
    params = {id(b) for b in func.buffer_params}  # type: ignore[attr-defined]
    return any(id(w.buffer) in params for w in block.writes)


def _iterate_as_read(sch: Schedule, name: str) -> None:
    """An output copy ``Y[n, h, w, c] = C'[n * 3136 + h * 56 + w, c]`` iterates over ``C'``'s
    indices instead (``transform_block_layout``), so it can be inlined into the block that
    writes ``C'``."""
    from metasched.space.tensorize import index_text
    from tir.ir import BufferLoad, PrimExpr, Var, substitute

    block = sch.index.blocks[name].block
    load = block.body.value  # type: ignore[attr-defined]  # any body with a value; checked just below
    if not isinstance(load, BufferLoad):
        raise ScheduleError("multi_level_tiling_tensor_core", name, "the output copy is not a plain load")
    iters = [iv.var for iv in block.iter_vars]
    if len(load.indices) == len(iters) and all(a is b for a, b in zip(load.indices, iters)):
        return
    params = [f"v{k}" for k in range(len(iters))]
    renamed: dict[Var, PrimExpr] = {var: Var(p, var.dtype) for var, p in zip(iters, params)}
    results = [index_text(substitute(index, renamed)) for index in load.indices]
    sch.transform_block_layout(sch.get_block(name), f"lambda {', '.join(params)}: ({', '.join(results)},)")
