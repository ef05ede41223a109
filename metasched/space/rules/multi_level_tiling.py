"""Multi-level tiling, CPU structure "SSRSRS", with a cache-write stage and operand packing.

Fits a reduction block (one store, an init, reduction iterators) with data reuse (some operand
misses a spatial iterator, so one loaded value serves many outputs: matmul, batch matmul, dense,
convolutions of any layout, stride, dilation or groups, depthwise) whose iterators are bound
1:1 to a perfect loop nest.

Each spatial loop is split into 4 sampled tiles (``sample_perfect_tile``), each reduction loop
into 2, and the tiles are ordered ``S0 S1 R0 S2 R1 S3``: S3 x R1 is the register tile (its
innermost spatial loop is the one vectorized later), S2 / R0 the cache tile, S0 the parallel
part. Within S0 the iterators keep their order, unless one input is more than twice the
size of every other: then the iterators indexing it go first (``_outer_first``: weights
larger than the pixels are loaded once and split between threads). Sketch choices, one copy
each:

- the output tile: accumulated in place; or, at tile level 1 or 2 (the innermost loop of S0
  or of S1), a ``global`` cache (``cache_write``) written back once per tile
  (``reverse_compute_at``) -- or, when the block's only consumer is injective (bias, relu),
  that consumer computed there instead, so the epilogue runs on the tile while it is hot;
  or, for such a consumer, at the register tile (level 3, ``EPILOGUE_AT_REGISTERS``): the
  reduction loops are left whole ("SSSRS"), so each register tile is finished, passed through
  the epilogue and stored while it is in registers, as hand-written kernels do (a 1x1
  convolution with a residual add otherwise writes its tile and reads it back: ResNet-50's
  64 -> 256 layers ran at 0.8x onnxruntime's speed);
- operand packing: an operand indexed by the vectorized iterator and by a reduction iterator
  (B in ``A @ B``, the weights of an NHWC convolution, a transposed dense weight) is copied
  (``cache_read``) into panels one vector register wide, contiguous along the reduction
  (``transform_layout``: ``(k, j) -> (j // P, k, j % P)``); that loop is split by the panel
  width P first, its four tiles count panels, and the P lanes of one panel are the innermost
  loop, under the register tile (rows x panels x lanes). The copy is made once at the root,
  its loops in the packed buffer's order; ``pack_levels=(2,)`` adds packing per tile (``compute_at`` at tile level 2: each tile packs the panels it reads). That
  option is off by default: ``parallel`` refuses a loop whose iterations repack the same panels
  into the (iteration-local) packed buffer, so such candidates run on one core;
- whole rows (``ROWS_SUFFIX``), when the later stages of the program follow from the block and
  one reduces its rows (a softmax after attention's scores, ``_row_stages``): the vectorized
  iterator's outer tile is fixed to 1, so an outer tile holds whole rows, and every later
  stage is computed there (``reverse_compute_at`` at the innermost outer tile loop, in program
  order). The scores are normalized while the tile's rows are in cache, never written out
  whole and read back (Whisper's 4 x 750 x 750 per layer: 9 MB each way).

Awkward extents are padded (``pad_einsum``) in sketches of their own, which default schedules
prefer: a vectorized extent that the panel width does not divide (a vocabulary of 50257, 72 or
120 channels), or whose panels split into no even parallel share (50272 = 16 x 2 x 1571), is
padded to whole panels and a multiple of 4 or 8 of them; a row extent with no register-tile
divisor (197 tokens, prime) to a multiple of 8. Only the block is padded: a constant operand's
padded copy is made once with its packing (``split_prepack`` takes both), and the output's
unpadding copy is the tile's epilogue. A GPT-2 LM head (64 x 768 x 50257) ran 309 ms
unpadded (scalar code: 29 columns per tile); the exact figures are in the issue notes.

For a 1024^3 matmul, the decisions ``i: [8, 1, 32, 4]``, ``j: [1, 64, 1, 1] + 16`` (packed),
``k: [1, 1024]`` give the hand schedule of examples/matmul_schedule.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

from metasched.space.analysis import (
    TILED,
    BlockInfo,
    block_info,
    blocks_post_order,
    input_regions,
    is_output,
    loads_of,
    readers_of,
    region_vars,
    vars_of,
)
from metasched.space.registers import best_rows, row_limit
from metasched.space.rules import SketchRule, try_on_copy
from tir.ir import Block, BufferLoad, BufferStore, IntImm, IterKind, Var
from tir.ir.structural import structural_equal
from tir.schedule import Schedule, ScheduleError
from tir.schedule.handles import BlockRV, LoopRV
from tir.target import Target
from tir.transform.split_prepack import layout_free_names

__all__ = [
    "EPILOGUE_AT_REGISTERS",
    "EPILOGUE_AT_REGISTERS_STRUCTURE",
    "TAIL_FACTORS",
    "TAIL_MAX_PIXELS",
    "AWKWARD_SUFFIX",
    "ROWS_SUFFIX",
    "TAIL_SUFFIX",
    "awkward_pixels",
    "MultiLevelTiling",
    "PackChoice",
    "tail_factors",
]

#: Panel counts of a vectorized extent at least this large are padded to a multiple of
#: ``PANEL_STEP`` panels unless they already split evenly (by 4 or 6); smaller ones that the
#: panel width does not divide, to a multiple of 4 panels at 16 panels or more.
MANY_PANELS = 64
PANEL_STEP = 8
#: A row extent at least this large whose largest divisor up to 8 is below 4 is padded to a
#: multiple of 8 (register tiles take up to 8 rows).
PAD_ROWS_FROM = 16
#: A vectorized extent of one panel and a part is left unpadded when the block reduces this
#: many elements per output or fewer: the padded sketch's extra passes (the padded output
#: stored, then copied back unpadded) cost more than the tail they save. ShuffleNet v2's
#: 24-channel convolutions (1 thread, AVX-512 Xeon): the stem, 3x3x3 -> 24 at 112 x 112, 0.46 ms
#: padded to 32 against 0.27 ms unpadded; 1x1, 24 -> 24 at 28 x 28, 22 against 11 us; while
#: MobileNet v3's 1x1 72 -> 24 (reducing 72) ran 0.14 ms padded against 0.21 ms unpadded.
SHORT_REDUCTION = 32


#: The ``level`` of an epilogue computed per register tile, under whole reduction loops.
EPILOGUE_AT_REGISTERS = 3
#: The tiling structure (the ``TILED`` annotation) of that sketch.
EPILOGUE_AT_REGISTERS_STRUCTURE = "SSSRS"
#: Appended to the structure of a sketch whose pixel register tile may not divide the pixels.
TAIL_SUFFIX = "+tail"
#: Marks (before ``TAIL_SUFFIX``) a tail sketch of a pixel count no perfect register tile fits
#: (``awkward_pixels``): preferred by default schedules.
AWKWARD_SUFFIX = "+awkward"
#: Appended to the structure of a sketch whose outer tile computes whole rows (the vectorized
#: iterator untiled at S0) and runs every later stage of the program per tile: a row
#: reduction's input (attention's scores before their softmax) is then never written out whole.
ROWS_SUFFIX = "+rows"
#: Pixel counts a register tile may take when they do not divide the pixels (hand-written
#: kernels use 3 or 6 rows of 8-lane accumulators: 12 of the 16 vector registers).
TAIL_FACTORS = (3, 4, 5, 6, 8)
#: Tail sketches only for this many pixels or fewer. ResNet-50's 7 x 7 layers (49 pixels, 7 = the
#: only divisor for a register tile) gain: a 1x1 2048 -> 512 convolution tuned for 160 trials ran
#: 1.264 ms with them against 1.446 ms without (2 threads, Zen 1). On 28 x 28 and 14 x 14 outputs
#: the candidates tried were slower than the perfectly tiled ones (the fused pixel count divided
#: by the tile is often prime, leaving nothing to tile above it).
TAIL_MAX_PIXELS = 64


def tail_factors(pixels: int | None, lanes: int = 16) -> list[int]:
    """Register-tile pixel counts that leave a partial last tile over ``pixels`` pixels (those
    that divide it are the perfectly tiled sketches' business); none past ``TAIL_MAX_PIXELS``
    unless no perfect tile of 4 pixels or more exists (``awkward_pixels``)."""
    if pixels is None or (pixels > TAIL_MAX_PIXELS and not awkward_pixels(pixels, lanes)):
        return []
    return [factor for factor in TAIL_FACTORS if factor < pixels and pixels % factor]


def awkward_pixels(pixels: int | None, lanes: int = 16) -> bool:
    """Whether a pixel count past ``TAIL_MAX_PIXELS`` has no register-tile divisor, from 4
    up to the rows a tile of two vectors may take (``row_limit``: 12 with AVX-512, 6 with AVX2,
    whose 7 to 12 rows leave one vector: a broadcast per FMA): Inception v3's 71 x 71 and
    17 x 17 outputs, 73 x 73 (squares of primes), and with AVX2 also wav2vec2's 399 and 99 (3-tap
    convolutions 512 -> 512 on a Zen 3, 1 thread: 8.4 and 1.7 ms as tail sketches of 6 x 2
    against 10.1 and 3.3 ms perfectly tiled, one vector wide). The perfectly tiled sketches keep few
    accumulators (or one pixel per register tile and few parallel chunks: a 3x3 convolution
    73 x 73, 80 -> 192 at 2 threads, 15 ms; with 72 x 72 outputs 5.5 ms), so tail sketches are
    made for them (``AWKWARD_SUFFIX``), default schedules included, and preferred. A count with
    such a divisor tiles perfectly: SqueezeNet's 111 x 111 stem (9 = 3 x 3 pixels a tile) ran
    0.67 ms as a tail sketch against 0.25-0.35 ms perfectly tiled (AVX-512); its short reduction
    (``SHORT_REDUCTION``) keeps it perfectly tiled with AVX2 too (``_awkward_lanes``)."""
    top = row_limit(2, lanes)
    return pixels is not None and pixels > TAIL_MAX_PIXELS and not any(pixels % d == 0 for d in range(4, top + 1))


def padded_vector_extent(extent: int, width: int) -> int:
    """The vectorized extent a padded sketch uses: whole panels of ``width``, and a panel count
    that splits evenly over threads; ``extent`` itself when it needs no padding."""
    panels = -(-extent // width)
    if extent <= width:
        return extent  # less than a vector: padding would cost more than the scalar tail
    # One panel and a part (24 or 40 channels of a MobileNet at 16 lanes) is padded too: a 1x1
    # convolution 56 x 56, 72 -> 24 ran 0.21-0.32 ms unpadded, 0.07 ms padded to 32 (2 threads,
    # AVX-512 Xeon).
    # From two panels up padded vectors win even with a third of them wasted: the unpadded
    # tiling vectorizes only power-of-two divisors (50 columns: none), so it runs scalar code
    # (ViT-B/32's 50 x 50 attention scores, 12 heads: 279 us unpadded, 166 padded to 64, 101 with
    # the heads out of the register tile: ``batch_vars``; 1 thread, AVX-512 Xeon).
    if panels >= MANY_PANELS:
        if extent % width == 0 and (panels % 4 == 0 or panels % 6 == 0):
            return extent
        return -(-panels // PANEL_STEP) * PANEL_STEP * width
    if extent % width == 0:
        return extent
    step = 4 if panels >= 16 else 1
    return -(-panels // step) * step * width


def padded_row_extent(extent: int) -> int:
    """A row extent with a register-tile divisor (4 to 8): 197 -> 200; others unchanged."""
    if extent < PAD_ROWS_FROM or max(d for d in range(1, 9) if extent % d == 0) >= 4:
        return extent
    return -(-extent // 8) * 8


def _outer_first(info: BlockInfo, covered: list[set[Var]]) -> list[int]:
    """The order of the spatial tiles (``covered``: the iterators each tiles) at the outer
    level, S0: as the iterators come, except that when one input is more than twice the size
    of every other, the tiles of the iterators that index it go first. Each of its slices is
    then loaded once, while the smaller inputs are swept under it: a 1 x 1 convolution over
    8 x 8 pixels with 2.4 MiB of weights (EfficientNet's last blocks) otherwise streamed the
    weights once per outer pixel tile, and on two threads (a static schedule over the fused
    outer loops) each thread read all of them instead of half. The levels below keep the
    iterators' order (S1 reordered too made RegNetX's 14 x 14 x 288 -> 672 convolution 35%
    slower at 2 threads)."""
    sizes = []
    for region in input_regions(info.block):
        shape = region.buffer.shape
        if not all(isinstance(extent, IntImm) for extent in shape):
            return list(range(len(covered)))
        sizes.append((math.prod(cast(IntImm, extent).value for extent in shape) * region.buffer.dtype.bits, region))
    sizes.sort(key=lambda item: -item[0])
    if len(sizes) < 2 or sizes[0][0] <= 2 * sizes[1][0]:
        return list(range(len(covered)))
    indexing = region_vars(sizes[0][1])
    return sorted(range(len(covered)), key=lambda k: not (covered[k] & indexing))


def _computed_from(sch: Schedule, prepacked: frozenset[str]) -> frozenset[str]:
    """``prepacked`` and the buffers that blocks reading only those write (the padded copy of a
    layout-free weight: ``split_prepack`` moves its computation before the runs with its packing)."""
    names = set(prepacked)
    for name, realize in sch.index.blocks.items():
        block = realize.block
        if name != "root" and block.reads and all(region.buffer.name in names for region in block.reads):
            names.update(region.buffer.name for region in block.writes)
    return frozenset(names)


def _reduced(info: BlockInfo) -> int:
    """Products summed per output: the reduction extents' product, an extent that is not
    constant counted as past ``SHORT_REDUCTION``."""
    return math.prod(info.extents.get(var, SHORT_REDUCTION + 1) for var in info.reduce)


def _pixel_count(info: BlockInfo) -> int | None:
    """The number of pixels: the product of the extents of every spatial iterator but the
    vectorized (last) one; None when there are none or an extent is not constant."""
    if len(info.spatial) < 2:
        return None
    count = 1
    for var in info.spatial[:-1]:
        extent = info.extents.get(var)
        if not isinstance(extent, int):
            return None
        count *= extent
    return count


@dataclass(frozen=True)
class PackChoice:
    """Pack read region ``read_index`` (buffer dimension ``dim`` indexed by the vectorized
    iterator) into panels ``width`` elements wide."""

    read_index: int
    dim: int
    ndim: int
    width: int

    def index_map(self) -> str:
        params = [f"d{i}" for i in range(self.ndim)]
        rest = [p for i, p in enumerate(params) if i != self.dim]
        moved = params[self.dim]
        results = [f"{moved} // {self.width}", *rest, f"{moved} % {self.width}"]
        return f"lambda {', '.join(params)}: ({', '.join(results)})"


class MultiLevelTiling(SketchRule):
    name = "multi_level_tiling"
    structure = "SSRSRS"

    def __init__(
        self,
        target: Target,
        max_innermost_factor: int = 64,
        max_reduce_innermost: int = 1024,
        write_levels: tuple[int, ...] = (1, 2),
        pack: bool = True,
        pack_levels: tuple[int, ...] = (),
        tails: bool = True,
        awkward_tails: bool = True,
    ) -> None:
        self.target = target
        self.max_innermost_factor = max_innermost_factor
        self.max_reduce_innermost = max_reduce_innermost
        self.write_levels = write_levels
        self.pack = pack
        self.pack_levels = pack_levels
        self.tails = tails  # tail sketches wherever tail_factors offers some
        self.awkward_tails = awkward_tails  # ... or only for awkward pixel counts

    def fits(self, info: BlockInfo) -> bool:
        return (
            info.is_reduction
            and info.has_reuse
            and info.loops is not None
            and bool(info.spatial)
            and TILED not in info.block.annotations
        )

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        info = block_info(sch, block)
        if not self.fits(info):
            return [sch]
        try:
            prepacked = frozenset(layout_free_names(sch.func))
        except ValueError:
            prepacked = frozenset()  # a malformed attribute: the build names it
        results = self._sketches(sch, block, info, prepacked)
        padding = self.padding(info, prepacked)
        if padding is not None:
            padded = try_on_copy(sch, lambda s: s.pad_einsum(block, padding))
            if padded is not None:
                padded_info = block_info(padded, block)
                if self.fits(padded_info):
                    padded_prepacked = _computed_from(padded, prepacked)
                    sketches = self._sketches(padded, block, padded_info, padded_prepacked)
                    results += [s for s in sketches if s is not padded]
        return results or [sch]

    def _float_lanes(self) -> int:
        """float32 lanes of one of the target's vectors."""
        return max(1, self.target.vector_bytes // 4)

    def _awkward_lanes(self, info: BlockInfo) -> int:
        """The lanes ``awkward_pixels`` judges this block's pixels by: the target's, except that a
        short reduction (``SHORT_REDUCTION``) is judged as with AVX-512: its tile's fused-pixel
        indexing costs more than the accumulators it gains (SqueezeNet's 111 x 111 stem, 27
        products per output, Zen 3: 1.01 ms as a 6 x 2 tail sketch, 0.73 ms as 9 x 1)."""
        lanes = self._float_lanes()
        return lanes if _reduced(info) > SHORT_REDUCTION else max(lanes, 16)

    def padding(self, info: BlockInfo, prepacked: frozenset[str] = frozenset()) -> list[int] | None:
        """``pad_einsum``'s multiples for the block's iterators when some extent is awkward
        (``padded_vector_extent``, ``padded_row_extent``); None when none is. Only iterators
        that index every written buffer are padded (else the extra instances would overwrite
        kept outputs)."""
        written_vars = [region_vars(region) for region in info.block.writes]
        if not self._padded_operands_reused(info, prepacked):
            return None
        multiples: list[int] = []
        changed = False
        vector_var = info.spatial[-1]
        width = self._float_lanes()
        reduced = _reduced(info)
        for iv in info.block.iter_vars:
            var = iv.var
            extent = info.extents.get(var)
            multiple = 1
            if var in info.spatial and isinstance(extent, int) and all(var in used for used in written_vars):
                padded = padded_vector_extent(extent, width) if var is vector_var else padded_row_extent(extent)
                if var is vector_var and padded == 2 * width and info.reduce and reduced <= SHORT_REDUCTION:
                    padded = extent  # one panel and a part over a short reduction: see SHORT_REDUCTION
                if padded != extent:
                    multiple = padded  # pad_einsum pads to a multiple: the padded extent is one
                    changed = True
            multiples.append(multiple)
        return multiples if changed else None

    @staticmethod
    def _padded_operands_reused(info: BlockInfo, prepacked: frozenset[str]) -> bool:
        """Whether every input the padded (vectorized) iterator indexes is reused across another
        spatial iterator, or is a layout-free parameter (``prepacked``: padded once, before the
        runs): the padded copy of an operand read once costs as much as the block (a global
        average pool over 13 x 13 x 1000 took 0.05 ms padded against 0.007 ms)."""
        vector_var = info.spatial[-1]
        others = [var for var in info.spatial[:-1] if info.extents.get(var, 2) != 1]
        for region in input_regions(info.block):
            used = region_vars(region)
            if region.buffer.name not in prepacked and vector_var in used and all(var in used for var in others):
                return False
        return True

    def _sketches(
        self, sch: Schedule, block: BlockRV, info: BlockInfo, prepacked: frozenset[str] = frozenset()
    ) -> list[Schedule]:
        packs: list[tuple[PackChoice, int | None] | None] = [None]
        if self.pack:
            choices = self.pack_choices(info, prepacked)
            packs += [(choice, at) for choice in choices for at in (None, *self.pack_levels)]
        fuse_consumer = self._fusible_consumer(sch, info)
        levels = (None, *self.write_levels, *((EPILOGUE_AT_REGISTERS,) if fuse_consumer else ()))
        results = []
        for pack in packs:
            for level in levels:
                # mypy cannot infer a lambda with default arguments (a checker limitation)
                tiled = try_on_copy(
                    sch,
                    lambda s, pack=pack, level=level: self._tile(s, block, info, pack, level, fuse_consumer),  # type: ignore[misc]
                )
                if tiled is not None:
                    results.append(tiled)
        row_stages = self._row_stages(sch, info)
        if row_stages:
            for pack in packs:
                tiled = try_on_copy(
                    sch,
                    lambda s, pack=pack: self._tile(s, block, info, pack, None, False, row_stages=row_stages),  # type: ignore[misc]  # as above
                )
                if tiled is not None:
                    results.append(tiled)
        pixels = _pixel_count(info)
        lanes = self._awkward_lanes(info)
        if (self.tails or (self.awkward_tails and awkward_pixels(pixels, lanes))) and tail_factors(pixels, lanes):
            # Last, so that default schedules (which keep the first of equally preferred
            # sketches) never start from an unmeasured tile shape.
            for pack in packs[1:]:
                tiled = try_on_copy(
                    sch,
                    lambda s, pack=pack: self._tile(s, block, info, pack, None, fuse_consumer, tail=True),  # type: ignore[misc]  # as above
                )
                if tiled is not None:
                    results.append(tiled)
        return results

    # ---------------------------------------------------------------- choices

    def pack_choices(self, info: BlockInfo, prepacked: frozenset[str] = frozenset()) -> list[PackChoice]:
        """Operands worth packing into panels: indexed by the vectorized (last spatial) iterator
        in exactly one dimension, by that iterator alone, and by a reduction iterator elsewhere
        (so consecutive steps of the reduction jump a whole row), and either reused across another
        spatial iterator of extent > 1 (the weights, not the data, of a depthwise convolution) or
        layout-free (``prepacked``: packed once, before the runs; a dense layer's weights at batch 1)."""
        vector_var = info.spatial[-1]
        extent = info.extents.get(vector_var)
        choices = []
        block = info.block
        written = {id(region.buffer) for region in block.writes}
        loads = loads_of(block)
        for index, region in enumerate(block.reads):
            buffer = region.buffer
            if id(buffer) in written:
                continue
            accesses = {tuple(load.indices) for load in loads if load.buffer is buffer}
            if len(accesses) != 1:
                continue
            (indices,) = accesses
            dims = [d for d, e in enumerate(indices) if vector_var in vars_of(e)]
            if len(dims) != 1 or not (isinstance(indices[dims[0]], Var) and indices[dims[0]] is vector_var):
                continue
            others = vars_of(tuple(e for d, e in enumerate(indices) if d != dims[0]))
            if not any(var in others for var in info.reduce):
                continue
            varying = {var for var in info.spatial if info.extents.get(var, 2) != 1}
            if buffer.name not in prepacked and varying <= vars_of(indices):
                # Read once per output (a depthwise input, a pool's input beside unit output
                # dimensions): nothing reused to pack for, and the copy costs more than the block
                # (a global average pool over 60 x 60 x 144: 0.23 ms packed, 0.04 ms in place).
                continue
            width = max(1, self.target.vector_bytes // max(1, buffer.dtype.bits // 8))
            shape = buffer.shape[dims[0]]
            if extent is None or not isinstance(shape, IntImm) or extent % width or shape.value % width:
                continue
            choices.append(PackChoice(index, dims[0], len(indices), width))
        return choices

    @staticmethod
    def batch_vars(info: BlockInfo) -> set[Var]:
        """Spatial iterators (but the vectorized one) that index every operand the block reads."""
        used = [region_vars(region) for region in input_regions(info.block)]
        if not used:
            return set()
        return {var for var in info.spatial[:-1] if all(var in u for u in used)}

    @staticmethod
    def _row_stages(sch: Schedule, info: BlockInfo) -> list[str]:
        """The blocks after this one, in program order, when each of them reads what an earlier
        one of them (or this block) writes and nothing else computed in the program, one of them
        reduces such a result along its last dimension, and this block's result is not a
        parameter: the stages a ``ROWS_SUFFIX`` sketch runs per tile (a softmax after
        attention's scores). Empty otherwise."""
        if info.reduce == () or is_output(sch.func, info.block.writes[0].buffer):
            return []
        order = list(reversed(blocks_post_order(sch.func)))
        position = order.index(info.name)
        later = order[position + 1 :]
        earlier = {id(r.buffer) for name in order[:position] for r in sch.index.blocks[name].block.writes}
        produced = {id(info.block.writes[0].buffer)}
        row_reduction = False
        for name in later:
            block = sch.index.blocks[name].block
            reads = {id(region.buffer) for region in block.reads}
            if not reads & produced or reads & (earlier - produced):
                return []  # a stage that does not follow from this block, or reads an earlier result
            # A reduction along the rows of this block's result or of a stage's (a softmax's
            # maximum of the scores, or of their unpadded copy).
            reduced = {iv.var for iv in block.iter_vars if iv.kind is IterKind.REDUCE}
            row_reduction = row_reduction or any(
                id(load.buffer) in produced and vars_of(load.indices[-1]) & reduced for load in loads_of(block)
            )
            produced.update(id(region.buffer) for region in block.writes)
        return later if row_reduction else []

    def _fusible_consumer(self, sch: Schedule, info: BlockInfo) -> bool:
        """Whether the block's result feeds exactly one injective block (an epilogue to compute
        per tile) and nothing outside the program."""
        buffer = info.block.writes[0].buffer
        if is_output(sch.func, buffer):
            return False
        readers = [name for name in readers_of(sch, buffer) if name != info.name]
        if len(readers) != 1:
            return False
        return block_info(sch, readers[0]).is_injective

    @staticmethod
    def _copy_in_panel_order(sch: Schedule, packed: BlockRV, pack: PackChoice) -> None:
        """Loops of the packing copy in the packed buffer's order: panel, the other dimensions,
        then the lanes of one panel, which the vectorize postprocessor takes (the copy writes
        whole vectors). In the source's order each write jumps a panel: a scalar loop with
        divisions that LLVM spent about 50 ms of a conv candidate's build vectorizing."""
        loops = sch.get_loops(packed)
        if len(loops) != pack.ndim:
            return  # not a plain copy of the whole operand: leave it
        panel, lanes = sch.split(loops[pack.dim], [None, pack.width])
        rest = [loop for dim, loop in enumerate(loops) if dim != pack.dim]
        sch.reorder(panel, *rest, lanes)

    # ---------------------------------------------------------------- the sketch

    def tile(self, sch: Schedule, block: BlockRV, level: int | None = None) -> None:
        """Tile ``block`` (iterators bound 1:1 to a perfect loop nest) "SSRSRS" without packing;
        ``level`` 1 or 2: an output cache (or the only injective consumer) at that tile level;
        ``EPILOGUE_AT_REGISTERS``: the only injective consumer per register tile. Other rules
        tile a block they made this way (the multi-level tiling with an intrinsic tiles the
        loops outside the intrinsic)."""
        info = block_info(sch, block)
        if info.loops is None:
            # A blockized block whose extent-1 iterator is bound to a constant, say: the rule
            # that asked falls back to its other sketches.
            raise ScheduleError(
                "multi_level_tiling",
                f"block {cast(Block, sch.get(block)).name!r}",
                "its iterators are not bound 1:1 to loops",
            )
        self._tile(sch, block, info, None, level, level is not None and self._fusible_consumer(sch, info))

    def _tile(
        self,
        sch: Schedule,
        block: BlockRV,
        info: BlockInfo,
        packing: tuple[PackChoice, int | None] | None,
        level: int | None,
        fuse_consumer: bool,
        tail: bool = False,
        row_stages: list[str] | None = None,
    ) -> None:
        """``row_stages``: a ``ROWS_SUFFIX`` sketch, those blocks (``_row_stages``) computed at
        its outer tile."""
        assert info.loops is not None
        rows = bool(row_stages)
        pack, pack_level = packing if packing is not None else (None, None)
        nest = sch.index.loops_above(info.realize)
        handles = sch.get_loops(block)
        handle_of = {var: handles[next(i for i, f in enumerate(nest) if f is loop)] for var, loop in info.loops.items()}
        spatial_tiles: list[list[LoopRV]] = []
        spatial = list(info.spatial)
        batch_vars = self.batch_vars(info)
        # Names reused below: ``lanes`` a count, then the vector loop; ``outer`` a loop, then an order.
        lanes: int | LoopRV
        outer: LoopRV | list[int]
        if tail:
            # The pixels as one loop, in register tiles that need not divide it: the last tile
            # is cut short (a predicate, which lowering's partition_tails takes out of the full
            # tiles). No output stage: an epilogue's region per tile would not be a box.
            factors = tail_factors(_pixel_count(info), self._awkward_lanes(info))
            pixels = [handle_of[var] for var in spatial[:-1]]
            fused = sch.fuse(*pixels) if len(pixels) > 1 else pixels[0]
            # The tile that fills the register file best first (the default schedule's; the
            # search mutates it): 6 pixels x 2 vectors with AVX2, 8 x 3 with AVX-512.
            lanes = self._float_lanes()
            vector_extent = info.extents.get(info.spatial[-1])
            first = best_rows(
                factors, vector_extent if isinstance(vector_extent, int) else lanes, lanes, 4 if pack else 2
            )
            factor = sch.sample_categorical(factors, [1.0] * len(factors), decision=first)
            outer, inner = sch.split(fused, [None, factor])
            sizes = sch.sample_perfect_tile(outer, n=3, max_innermost_factor=self.max_innermost_factor)
            tiled_pixels = [*sch.split(outer, sizes), inner]
            spatial = spatial[-1:]
        for var in spatial:
            loop = handle_of[var]
            if pack is not None and var is info.spatial[-1]:
                # Split by the panel width first: the tiles count panels, and the vector loop
                # under the register tile walks one panel (the innermost loop of all).
                outer, lanes = sch.split(loop, [None, pack.width])
                sizes = sch.sample_perfect_tile(
                    outer, n=3 if rows else 4, max_innermost_factor=max(1, self.max_innermost_factor // pack.width)
                )
                spatial_tiles.append([*sch.split(outer, [1, *sizes] if rows else sizes), lanes])
            else:
                # A batch iterator (every operand reads a different slice per value: the heads
                # of attention's batched matmuls) has no reuse to gain in the register tile.
                innermost = 1 if var in batch_vars else self.max_innermost_factor
                whole_rows = rows and var is info.spatial[-1]  # each outer tile holds whole rows
                sizes = sch.sample_perfect_tile(loop, n=3 if whole_rows else 4, max_innermost_factor=innermost)
                spatial_tiles.append(sch.split(loop, [1, *sizes] if whole_rows else sizes))
        at_registers = level == EPILOGUE_AT_REGISTERS
        if at_registers and not fuse_consumer:
            raise ValueError("an epilogue at the register tile needs a fusible consumer")
        reduce_tiles: list[list[LoopRV]] = []
        for var in info.reduce:
            if at_registers:
                reduce_tiles.append([handle_of[var]])  # whole: the tile is final after it
                continue
            sizes = sch.sample_perfect_tile(handle_of[var], n=2, max_innermost_factor=self.max_reduce_innermost)
            reduce_tiles.append(sch.split(handle_of[var], sizes))
        if tail:
            spatial_tiles.insert(len(spatial_tiles) - 1, tiled_pixels)  # before the vectorized loop
            covered = [set(info.spatial[:-1]), {info.spatial[-1]}]
        else:
            covered = [{var} for var in spatial]
        outer = _outer_first(info, covered)
        levels = [[spatial_tiles[k][0] for k in outer]]
        levels += [[t[level] for t in spatial_tiles] for level in (1, 2)]  # in the iterators' order
        order = levels[0] + levels[1]
        if at_registers:
            order += levels[2] + [t[0] for t in reduce_tiles]
        else:
            order += [t[0] for t in reduce_tiles] + levels[2] + [t[1] for t in reduce_tiles]
        order += [t[3] for t in spatial_tiles]
        order += [t[4] for t in spatial_tiles if len(t) > 4]  # a packed loop's lanes
        sch.reorder(*order)
        structure = EPILOGUE_AT_REGISTERS_STRUCTURE if at_registers else self.structure
        lanes = self._awkward_lanes(info)
        suffix = (AWKWARD_SUFFIX if awkward_pixels(_pixel_count(info), lanes) else "") + TAIL_SUFFIX if tail else ""
        sch.annotate(block, TILED, structure + suffix + (ROWS_SUFFIX if rows else ""))
        for name in row_stages or ():
            # In program order: each stage's producers are at the tile already.
            sch.reverse_compute_at(sch.get_block(name), levels[0][-1])
        if level is not None:
            anchor = levels[level - 1][-1]  # the innermost loop of that level
            if fuse_consumer:
                (consumer,) = sch.get_consumers(block)
                sch.reverse_compute_at(consumer, anchor)
            else:
                written = sch.cache_write(block, 0, "global")
                sch.reverse_compute_at(written, anchor)
        if pack is not None:
            packed = sch.cache_read(block, pack.read_index, "global")
            if pack_level is not None:
                # Pack per tile, before the layout change (compute_at wants plain write indices).
                sch.compute_at(packed, levels[pack_level - 1][-1])
            sch.transform_layout(packed, ("write", 0), pack.index_map())
            if pack_level is None:
                self._copy_in_panel_order(sch, packed, pack)
        if tail and fuse_consumer:
            _inline_unpadding(sch, block)


def _inline_unpadding(sch: Schedule, block: BlockRV) -> None:
    """A tail sketch computes no epilogue per tile (its region per tile is not a box), so a
    padded block's unpadding copy would stay a pass of its own over the output, then read
    again by its reader: the copy is inlined into its readers, which read the padded result in
    place (SqueezeNet's last 1x1 convolution, 169 pixels, 512 -> 1000 padded to 1024, with its
    bias and relu: 1.52 -> 1.29 ms at 2 threads on a Zen 3, 2.67 -> 2.58 at 1, built side by
    side). Nothing happens when the consumer is not a plain copy or cannot be inlined (the
    program's output)."""
    (consumer,) = sch.get_consumers(block)
    node = sch.get(consumer)
    assert isinstance(node, Block)
    body = node.body
    if not (
        node.init is None
        and isinstance(body, BufferStore)
        and isinstance(body.value, BufferLoad)
        and len(body.value.indices) == len(body.indices)
        and all(structural_equal(a, b) for a, b in zip(body.value.indices, body.indices))
    ):
        return
    try:
        sch.compute_inline(consumer)
    except ScheduleError:
        return
