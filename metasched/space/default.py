"""``default_schedule``: a schedule with zero trials -- the tuner's design space (sketch rules and
postprocessors) replayed with fixed, sensible decisions instead of sampled ones.

Decisions, per tiled block: the register tile is a vector tile on the innermost spatial loop
(up to 2 vectors) and a row tile on one other spatial loop, the pair holding the most vector
accumulators the register file allows (``_register_tile``). The outer tiles take what fits the
parallel extent (the parallel postprocessor fuses them), the vector loop's first: each thread
owns panels of the weight's columns and reads each from memory once. The rest of the vector loop
is the second tile level; the other loops' rest sits below the outer reduction tile (the second
S of SSRSRS), whose inner part is at most ``REDUCTION_SLICE``: a slice of a weight panel stays
in L1 while every row uses it (GotoBLAS's blocking). Measured on a 2-core Zen 1 against the
earlier rule (rows parallel, reductions whole): ResNet-50's kernels 583 -> 392 ms at 1 thread,
BERT's FFN down-projection 87 -> 41 ms. A sketch that packs an operand into panels counts the
vector loop's tiles in panels; its register tile may take up to 4 of them (rows x panels).
Unrolling: the second choice (16). Sampled compute locations: in place. Sketches are tried in
order of preference (no inlined padding, then packing, then epilogue fused into the tile, at the
register tile first); the first that replays and verifies wins, and the
unscheduled program is returned when none does. Measured on a 2-core Zen 1 with
``benchmarks/model_e2e.py`` (zero trials, against onnxruntime): ResNet-50 0.59x -> 0.91x and
BERT 0.63x -> 1.02x at 2 threads once packed sketches came first with a register tile of
several panels; ResNet-50 0.895x / 0.898x -> 0.919x / 0.928x (two rounds, side by side) once
the epilogue ran on the register tile.

    fast = default_schedule(func, "llvm")
"""

from __future__ import annotations

import copy
from typing import Any, cast

from metasched.space.analysis import TILED, UNROLL
from metasched.space.registers import most_vectors, row_limit, tile_key
from metasched.space.rules.add_rfactor import LANES_STRUCTURE
from metasched.space.rules.multi_level_tiling import (
    AWKWARD_SUFFIX,
    EPILOGUE_AT_REGISTERS_STRUCTURE,
    ROWS_SUFFIX,
    TAIL_SUFFIX,
    MultiLevelTiling,
)
from tir.ir import PrimFunc
from tir.schedule import Trace
from tir.schedule.primitives.layout import UNPAD_SUFFIX
from tir.target import Target

__all__ = ["default_candidate", "default_decisions", "default_schedule"]

#: An operand the vector loop's panels cover (a weight) larger than this streams from memory on
#: every run (no cache share holds it): its panels are read once (rows take no parallel share
#: beyond ``_ENOUGH_CHUNKS`` chunks) and the reduction is sliced (SSRSRS: each panel slice stays
#: in L1 while every row tile uses it, instead of in L2 with the reduction whole). A GPT-2 LM
#: head (64 x 768 x 50257, 154 MB of weight) at 1 thread on an AVX-512 Xeon: 70 GFLOP/s with 4
#: row tiles in the parallel loop, 102 with none, 118 sliced (onnxruntime 116).
STREAMED_BYTES = 32 * 2**20
_ENOUGH_CHUNKS = 4

#: The longest inner reduction tile: a weight panel's slice of this many rows (x 2 vectors of
#: floats: 16 KiB at 256 with AVX2) stays in the L1 cache while the rows of the tile use it.
REDUCTION_SLICE = 256


def _divisor_at_most(extent: int, limit: int, prefer: int = 1) -> int:
    """The divisor of ``extent`` up to ``limit`` that is a multiple of ``prefer`` (else of 8,
    else of 4), the largest such."""
    divisors = [d for d in range(1, min(extent, limit) + 1) if extent % d == 0]
    return max(divisors, key=lambda d: (d % prefer == 0, d % 8 == 0, d % 4 == 0, d))


def _vector_lanes(target: Target) -> int:
    text = " ".join(str(x) for x in (target.text, getattr(target, "llvm_features", lambda: "")()))
    if "avx512" in text:
        return 16
    return 8


def default_decisions(sketch: Trace, target: Target, light: bool = False) -> dict[int, Any]:
    """Fixed decisions for ``sketch``'s sampling instructions (see the module docstring).
    ``light``: the program's reductions are light (``light_reduction``, a depthwise
    convolution): the register tile is one pixel by up to 4 vectors of channels, its window
    unrolled whole (MobileNet v3's 3x3 stride-2 112x112x64 one: 8 rows x 2 vectors, window
    rolled, 0.116 ms; 1 x 4 vectors unrolled 0.060 ms at 2 threads)."""
    lanes = _vector_lanes(target)
    decisions: dict[int, Any] = {}
    tiles: list[tuple[int, Any]] = [
        (pos, inst) for pos, inst in enumerate(sketch.instructions) if inst.kind == "sample_perfect_tile"
    ]
    # Runs of tile samples of one block: spatial samples (n >= 3) followed by reduction ones (n == 2).
    runs: list[list[tuple[int, Any]]] = []
    previous = None
    for pos, inst in tiles:
        n = inst.kwargs.get("n", 2)
        if previous is None or pos - previous > 3 or (n > 2 and runs and runs[-1][-1][1].kwargs.get("n", 2) == 2):
            runs.append([])
        runs[-1].append((pos, inst))
        previous = pos
    max_parallel = 32
    unrolled = 1  # the largest register tile's loop iterations (rows x panels), to unroll whole
    for inst in sketch.instructions:
        if inst.kind == "annotate" and inst.kwargs.get("ann_key") == "meta_schedule.parallel":
            max_parallel = int(inst.kwargs["ann_val"])
    for run in runs:
        budget = max_parallel
        spatial = [(pos, inst) for pos, inst in run if inst.kwargs.get("n", 2) > 2]
        reduce = [(pos, inst) for pos, inst in run if inst.kwargs.get("n", 2) == 2]
        extents = {pos: _product(inst.decision) for pos, inst in run}
        packed = bool(spatial) and _counts_panels(sketch, spatial[-1][0])
        # A tail sketch's fused pixels: their register tile is the categorical factor split off
        # below the sample (the sample's own innermost stays 1), so the vectors share the
        # register file with that many rows.
        tail_rows = 1
        for pos, _inst in spatial:
            rows = _tail_rows(sketch, pos)
            if rows:
                tail_rows = rows
                spatial = [item for item in spatial if item[0] != pos]
                tail_sample = (pos, _inst)
                break
        if packed:
            # Packed operand: the vector loop was split by the panel width (one vector) first,
            # so its sample counts panels; the register tile is chosen in elements.
            vector_pos = spatial[-1][0]
            register_tile = _register_tile(
                spatial,
                {**extents, vector_pos: extents[vector_pos] * lanes},
                lanes,
                max_vectors=4,
                panel=lanes,
                fixed_rows=tail_rows,
                max_rows=1 if light else None,
            )
            register_tile[vector_pos] = max(1, register_tile[vector_pos] // lanes)
        else:
            register_tile = _register_tile(
                spatial,
                extents,
                lanes,
                max_vectors=4 if light else 2,
                fixed_rows=tail_rows,
                max_rows=1 if light else None,
            )
        if tail_rows > 1:
            spatial = [tail_sample, *spatial]  # its tiles are outer tiles: parallel, then the rest
        # The parallel postprocessor fuses outer tiles while their product fits max_parallel.
        # The vector loop's outer tile takes what fits first: each thread then owns panels of
        # the operand indexed by the vector loop (a weight's columns) and reads each panel from
        # memory once, for all its rows; row tiles first would make every thread stream the
        # whole weight (a BERT FFN's 9 MiB) once per row tile.
        # A streamed operand (``STREAMED_BYTES``) is read once per row tile of the parallel
        # loop: rows take no parallel share once the vector loop's gives the threads a few
        # chunks (a GPT-2 LM head: 4 row tiles made 616 MB of a 154 MB weight's reads).
        vector_last = spatial[-1][0] if spatial else None
        streamed = _run_streamed_bytes(sketch, run) > STREAMED_BYTES
        # A ``ROWS_SUFFIX`` sketch (its vector loop's outer tile is fixed whole: 3 samples, not
        # 4): every row tile is an outer tile, so that the stages run per tile (a softmax) find
        # the tile's rows in cache (Whisper: 6 rows x 768 scores, 18 KiB).
        whole_rows = tail_rows == 1 and bool(spatial) and spatial[-1][1].kwargs["n"] == 3
        vector_outer = 1
        for pos, inst in sorted(spatial, key=lambda item: item[0] != vector_last):
            n = inst.kwargs["n"]
            extent = extents[pos]
            inner = register_tile.get(pos, 1)
            rest = extent // inner
            if whole_rows:
                decisions[pos] = [rest, 1, inner] if pos == vector_last else [rest] + [1] * (n - 2) + [inner]
                continue
            limit = budget
            if streamed and pos != vector_last:
                limit = min(budget, max(1, -(-_ENOUGH_CHUNKS // vector_outer)))
            outer = _divisor_at_most(rest, max(limit, 1))
            if pos == vector_last:
                vector_outer = outer
            budget //= outer
            if n >= 4 and pos != vector_last:
                # Rows go below the outer reduction tile (SSRSRS: the second S level after the
                # first R), so a reduction slice of a weight panel is reused by all the rows.
                middle = [1] * (n - 2)
                middle[-1] = rest // outer
            else:
                middle = [rest // outer] + [1] * (n - 3) if n >= 3 else []
            decisions[pos] = [outer] + middle + [inner]
        for pos, inst in reduce:
            extent = extents[pos]
            limit = min(int(inst.kwargs.get("max_innermost_factor", 64)), REDUCTION_SLICE)
            inner = _divisor_at_most(extent, limit)
            decisions[pos] = [extent // inner, inner]
        unrolled = max(unrolled, tail_rows * _register_tile_loops(register_tile, vector_last, packed))
        if light:
            unrolled = max(unrolled, LIGHT_REDUCTION)  # the window too
    for pos, inst in enumerate(sketch.instructions):
        if inst.kind == "sample_categorical":
            candidates = list(inst.args[0]) if inst.args else []
            following = sketch.instructions[pos + 1] if pos + 1 < len(sketch.instructions) else None
            if following is not None and following.kwargs.get("ann_key") == UNROLL:
                decisions[pos] = _unroll_choice(candidates, unrolled)
            elif following is not None and following.kind == "split":
                # A tail sketch's pixels per register tile: the sketch's own choice (the
                # largest), which its tile samples were drawn for.
                decisions[pos] = inst.decision
            else:
                decisions[pos] = 1 if len(candidates) > 1 else 0
        elif inst.kind == "sample_compute_location":
            # The sketch's own location (``exact_location``): under the consumers' loops only
            # where nothing is computed twice, else in place (-1). A producer computed inside
            # the tile (a convolution's padding) is recomputed by neighbouring tiles, and the
            # parallel primitive then refuses the tile loops: one thread for the whole kernel.
            decisions[pos] = inst.decision if isinstance(inst.decision, int) and inst.decision >= -1 else -1
    return decisions


def _run_streamed_bytes(sketch: Trace, run: list[tuple[int, Any]]) -> int:
    """Bytes of the operand the vector loop's panels cover (float32): the reduction extents
    times the vector loop's extent (in elements: a packed sample counts panels)."""
    spatial = [(pos, inst) for pos, inst in run if inst.kwargs.get("n", 2) > 2]
    reduce = [(pos, inst) for pos, inst in run if inst.kwargs.get("n", 2) == 2]
    if not spatial or not reduce:
        return 0
    vector_pos, vector_inst = spatial[-1]
    columns = _product(vector_inst.decision) * (_panel_width(sketch, vector_pos) or 1)
    return 4 * columns * _product([_product(inst.decision) for _, inst in reduce])


def _panel_width(sketch: Trace, pos: int) -> int | None:
    """The panel width when the tile sample at ``pos`` counts panels (``_counts_panels``)."""
    if not _counts_panels(sketch, pos):
        return None
    return int(sketch.instructions[pos - 1].kwargs["factors"][1])


def _streamed(sketch: Trace) -> bool:
    """Whether some tiled block's weight-like operand exceeds ``STREAMED_BYTES``."""
    tiles = [(pos, inst) for pos, inst in enumerate(sketch.instructions) if inst.kind == "sample_perfect_tile"]
    return _run_streamed_bytes(sketch, tiles) > STREAMED_BYTES


def _register_tile_loops(register_tile: dict[int, int], vector_pos: int | None, packed: bool) -> int:
    """The register tile's iterations outside the vectorized lanes: rows x panels (packed) or
    rows x vectors of 32 lanes (the vectorize postprocessor's longest vector)."""
    count = 1
    for pos, size in register_tile.items():
        count *= size if pos != vector_pos or packed else max(1, size // 32)
    return count


def _unroll_choice(candidates: list[Any], needed: int) -> int:
    """The unroll depth: the second choice (16), or the least that unrolls a larger register
    tile whole -- a row loop left rolled keeps its accumulators in memory (a 4 x 3-panel
    tile under an unroll depth of 16 ran its rows as a loop)."""
    if len(candidates) < 2:
        return 0
    depths = [int(c) for c in candidates]
    index = 1
    while depths[index] < needed and index + 1 < len(depths) and depths[index + 1] > depths[index]:
        index += 1
    return index


def _counts_panels(sketch: Trace, pos: int) -> bool:
    """Whether the tile sample at ``pos`` splits a loop already split by a panel width (the
    multi-level tiling's packed vector loop: ``split(j, [None, P])`` right before it)."""
    if pos == 0:
        return False
    before = sketch.instructions[pos - 1]
    factors = before.kwargs.get("factors") if before.kind == "split" else None
    return factors is not None and len(factors) == 2 and factors[0] is None and isinstance(factors[1], int)


def _tail_rows(sketch: Trace, pos: int) -> int:
    """The pixels per register tile of a tail sketch when the sample at ``pos`` tiles its fused
    pixels (it follows the split by a sampled factor); 0 otherwise."""
    if pos < 2 or sketch.instructions[pos - 1].kind != "split":
        return 0
    categorical = sketch.instructions[pos - 2]
    if categorical.kind != "sample_categorical" or categorical.decision is None:
        return 0
    return int(categorical.args[0][categorical.decision])


def _register_tile(
    spatial: list[tuple[int, Any]],
    extents: dict[int, int],
    lanes: int,
    max_vectors: int = 2,
    panel: int = 1,
    fixed_rows: int = 1,
    max_rows: int | None = None,
) -> dict[int, int]:
    """Innermost tile per spatial sample: a vector tile on the last loop and a row tile on one
    other, the pair that keeps the most vector accumulators within the register file (about
    3/4 of it: the loaded operands need the rest; 32 registers with AVX-512, else 16). Small
    extents such as a 7x7 image's rows fit whole (7 rows x 1 vector) rather than 1 row x 2.
    ``fixed_rows`` rows are in the tile already (a tail sketch's pixels): the vectors fit
    beside them, and no other row tile is added; ``max_rows`` caps the row tile."""
    if not spatial:
        return {}
    if fixed_rows > 1:
        max_vectors = most_vectors(fixed_rows, lanes, max_vectors)
    vector_pos, vector_inst = spatial[-1]
    # A packed loop's sample counts panels, its limit too.
    vector_limit = int(vector_inst.kwargs.get("max_innermost_factor", 64)) * panel
    best: tuple[tuple[float | int, ...], dict[int, int]] | None = None
    for width in [vectors * lanes for vectors in range(max_vectors, 0, -1)]:
        vector = _divisor_at_most(extents[vector_pos], min(width, vector_limit), prefer=lanes)
        vectors = -(-vector // lanes)
        rows_allowed = row_limit(vectors, lanes) if fixed_rows == 1 else 1
        if max_rows is not None:
            rows_allowed = min(rows_allowed, max_rows)
        # Row tiles on one loop, or on two when that holds more rows: 111 x 111 pixels (3 x 37
        # each way) tile 3 x 3 (18 accumulators; 3 x 1 kept 6: SqueezeNet's stem 0.25-0.35 ms,
        # 0.14 ms as 3 x 3).
        candidates: list[tuple[dict[int, int], int]] = [({}, 1)]
        for k, (pos, inst) in enumerate(spatial[:-1]):
            rows = _rows_of(extents[pos], inst, rows_allowed)
            candidates.append(({pos: rows}, rows))
            if rows > 1 and max_rows is None:
                for other, other_inst in spatial[k + 1 : -1]:
                    more = _rows_of(extents[other], other_inst, rows_allowed // rows)
                    if more > 1:
                        candidates.append(({pos: rows, other: more}, rows * more))
        for row_tile, rows in candidates:
            # ``tile_key`` (AVX2: the FMA units kept busy, then accumulators, then two vectors over
            # one; AVX-512: the most accumulators), then rows on one
            # loop, then more rows (each vector of the weight panel loaded serves them all: a
            # 10 x 2-vector tile of a 50-row dense ran 143 GFLOP/s against 108 for 5 x 4 on an
            # AVX-512 Xeon, its panels streaming from L2), then wider vectors, then the longer
            # row loop (rows on two loops only for more accumulators: 16 rows of one vector load
            # more per FMA than 8 rows of two)
            longest = max((extents[pos] for pos in row_tile), default=0)
            key = (*tile_key(rows, vectors, lanes), -len(row_tile), rows, vector, longest)
            if best is None or key > best[0]:
                best = (key, {vector_pos: vector, **row_tile})
    assert best is not None
    return best[1]


def _rows_of(extent: int, inst: Any, limit: int) -> int:
    """A row tile on a loop of ``extent`` sampled by ``inst``: its largest divisor within
    ``limit`` and the sample's innermost bound, a multiple of 4 or not (wav2vec2's 3-tap
    convolution over 800 pixels, 512 -> 512, Zen 3: 12.4 ms as 5 rows x 2 vectors, 13.9 ms as
    4 x 2, the two built side by side in one process)."""
    limit = min(limit, int(inst.kwargs.get("max_innermost_factor", 64)))
    return max(d for d in range(1, min(extent, limit) + 1) if extent % d == 0)


def _product(values: Any) -> int:
    total = 1
    for v in values or [1]:
        total *= int(v)
    return total


#: A tiled block reducing over at most this many elements per output (a depthwise convolution's
#: window, 3x3 to 7x7; a pooling window) reads its padded input about once: a padding stage of
#: its own is a whole extra pass over memory, as long as the convolution itself.
LIGHT_REDUCTION = 49


def light_reduction(func: PrimFunc) -> bool:
    """Whether every reduction block of ``func`` reduces ``LIGHT_REDUCTION`` elements per output
    or fewer and reads every operand at its innermost output index (it has one such block):
    a depthwise convolution or a pooling window, where no loaded value serves several outputs
    (a stem convolution over 3 channels reduces 27 elements, but each pixel it loads serves
    every output channel: it is tiled as any convolution)."""
    from metasched.space.analysis import loads_of, vars_of
    from tir.ir import Block, BufferLoad
    from tir.ir.buffer import IterKind
    from tir.ir.functor import post_order_visit

    verdicts: list[bool] = []

    def loads(block: Block) -> list[BufferLoad]:
        written = {id(region.buffer) for region in block.writes}
        return [load for load in loads_of(block) if id(load.buffer) not in written]

    def visit(node: object) -> None:
        if not isinstance(node, Block):
            return
        extents = [iv.dom.extent for iv in node.iter_vars if iv.kind is IterKind.REDUCE]
        spatial = [iv.var for iv in node.iter_vars if iv.kind is IterKind.SPATIAL]
        if not extents or not spatial:
            return
        volume = _product([getattr(e, "value", LIGHT_REDUCTION + 1) for e in extents])
        innermost = spatial[-1]
        per_output = all(any(innermost in vars_of(index) for index in load.indices) for load in loads(node))
        verdicts.append(volume <= LIGHT_REDUCTION and per_output)

    post_order_visit(func.body, visit)
    return bool(verdicts) and all(verdicts)


def _preference(sketch: Trace, light: bool = False) -> tuple[int, ...]:
    """Sorting key, best first: padding kept as its own stage (inlined, its bounds checks land
    in the innermost loop and stop vectorization) -- except before a light reduction
    (``LIGHT_REDUCTION``: a depthwise convolution's 3x3 window, where the stage cost as much as
    the convolution: 0.20 against 0.07 ms for MobileNet v3's 112x112x64 stride-2 one; ``light``
    says so), then row reductions in vector lanes (``AddRFactor``: scalar code otherwise), then
    a tile of whole rows that runs the later stages per tile (``ROWS_SUFFIX``: Whisper's scores
    and softmax, 4 x 750 x 750 at 1 thread, 4.0 ms against 5.0 ms with the scores written out
    whole), then operand packing (the register tile reads one contiguous panel slice per
    reduction step instead of a row of a wide matrix: dense 128x3072x768 at 1 thread on a
    2-core Zen 1, 15.0 ms packed against 30 ms plain), then padding where the tiling rule
    padded an awkward extent (its unpadded sketches tile it badly: 29 scalar columns for
    50257), then the epilogue fused into the tile, at the register tile (reductions whole)
    rather than per cache tile (the tile is stored once, finished, instead of stored and read
    back) -- except for a streamed operand (``STREAMED_BYTES``), whose reduction is sliced; a
    register tile that leaves a partial last tile (its size is the tuner's to find) last --
    except over a pixel count no perfect register tile fits (``awkward_pixels``), where the
    tail sketch comes before all but the padding and lanes rules."""
    kinds = {inst.kind for inst in sketch.instructions}
    # An inlined unpadding copy (``_inline_unpadding`` of a tail sketch) is not the padding
    # stage this first key is about.
    inlined = any(
        inst.kind == "compute_inline" and UNPAD_SUFFIX not in getattr(inst.args[0], "block_name", "")
        for inst in sketch.instructions
    )
    structures = [
        str(inst.kwargs.get("ann_val"))
        for inst in sketch.instructions
        if inst.kind == "annotate" and inst.kwargs.get("ann_key") == TILED
    ]
    at_registers = EPILOGUE_AT_REGISTERS_STRUCTURE in structures
    return (
        inlined != light,
        -structures.count(LANES_STRUCTURE),
        not any(structure.endswith(ROWS_SUFFIX) for structure in structures),
        not any(AWKWARD_SUFFIX in structure for structure in structures),
        "transform_layout" not in kinds,
        "pad_einsum" not in kinds,
        "reverse_compute_at" not in kinds,
        at_registers if _streamed(sketch) else not at_registers,
        any(structure.endswith(TAIL_SUFFIX) and AWKWARD_SUFFIX not in structure for structure in structures),
    )


def _rules_without_tails(target: Target) -> list[Any]:
    """The default rules, the tiling's tail sketches left out: they rank last (``_preference``
    never prefers them), so generating them would only slow every default schedule down."""
    from metasched.space.rules import default_rules

    rules = default_rules(target)
    for index, rule in enumerate(rules):
        if isinstance(rule, MultiLevelTiling) and rule.tails:
            rules[index] = copy.copy(rule)
            cast(MultiLevelTiling, rules[index]).tails = False
    return rules


def default_candidate(func: PrimFunc, target: str | Target = "llvm", space: Any = None) -> Any:
    """The candidate (program and trace) ``default_schedule`` returns: the first sketch in order
    of preference that replays and verifies with the default decisions (for a tensorized block,
    whose every sketch packs an operand, a packing one); None when none does."""
    from metasched.search.candidate import make_candidate
    from metasched.space.generator import SpaceGenerator

    target = Target.parse(target)
    space = space or SpaceGenerator(rules=_rules_without_tails(target))
    try:
        sketches = space.generate(func, target)
    except Exception:  # noqa: BLE001 - a rule that refuses this program: run it unscheduled rather than fail
        return None
    postprocs = space.postprocs_for(target)
    light = light_reduction(func)
    for index in sorted(range(len(sketches)), key=lambda i: _preference(sketches[i], light)):
        sketch = sketches[index]
        try:
            decisions = default_decisions(sketch, target, light)
            return make_candidate(func, sketch, index, decisions, postprocs, seed=0)
        except Exception:  # noqa: BLE001 - Rejected, or a sketch that cannot take the default decisions
            continue
    return None


def default_schedule(func: PrimFunc, target: str | Target = "llvm", space: Any = None) -> PrimFunc:
    """``func`` scheduled by the default rules with fixed decisions; ``func`` itself when no
    sketch replays and verifies."""
    candidate = default_candidate(func, target, space)
    return candidate.func if candidate is not None else func
