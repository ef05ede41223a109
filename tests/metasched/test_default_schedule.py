"""Default schedules (metasched/space/default.py): the design space replayed with fixed
decisions. The decisions must give a register tile that fits the register file, at the innermost
tile level, and the program must still compute what the unscheduled one does."""

from __future__ import annotations

import numpy as np

import tir.script as T
from metasched.search.candidate import sampling_positions
from metasched.space import SpaceGenerator
from metasched.space.default import _vector_lanes, default_candidate, default_decisions
from metasched.space.rules.multi_level_tiling import TAIL_SUFFIX
from tir.interp import interpret
from tir.target import Target

TARGET = Target.parse("llvm")  # this machine: 8 float32 lanes with AVX2, 16 with AVX-512
LANES = _vector_lanes(TARGET)
# Vector accumulators the register tile may keep: 3/4 of the register file (32 with AVX-512, else 16).
ACCUMULATORS = 24 if LANES >= 16 else 12


def _dense(rows: int, depth: int, cols: int):  # type: ignore[no-untyped-def]
    """Y = X @ W, W layout-free (a dense layer's weights)."""

    @T.script
    def matmul(
        X: T.Buffer((rows, depth), "float32"),
        W: T.Buffer((depth, cols), "float32"),
        Y: T.Buffer((rows, cols), "float32"),
    ):
        T.func_attr({"layout_free_buffers": ["W"]})
        for i, j, k in T.grid(rows, cols, depth):
            with T.block("matmul"):
                vi, vj, vk = T.remap("SSR", i, j, k)
                with T.init():
                    Y[vi, vj] = 0.0
                Y[vi, vj] += X[vi, vk] * W[vk, vj]

    return matmul


def _average_pool(pixels: int, channels: int):  # type: ignore[no-untyped-def]
    """A global average pool's sum, NHWC, its output 1 x 1 x 1 x channels."""

    @T.script
    def pool(X: T.Buffer((1, pixels, pixels, channels), "float32"), Y: T.Buffer((1, 1, 1, channels), "float32")):
        for n, a, b, c, rh, rw in T.grid(1, 1, 1, channels, pixels, pixels):
            with T.block("pool"):
                vn, va, vb, vc, vrh, vrw = T.remap("SSSSRR", n, a, b, c, rh, rw)
                with T.init():
                    Y[vn, va, vb, vc] = 0.0
                Y[vn, va, vb, vc] += X[vn, vrh, vrw, vc]

    return pool


dense = _dense(64, 96, 384)


def _tile_decisions(sketch):  # type: ignore[no-untyped-def]
    decisions = default_decisions(sketch, TARGET)
    return [
        (sketch.instructions[pos].kwargs.get("n"), decisions[pos])
        for pos in sampling_positions(sketch)
        if sketch.instructions[pos].kind == "sample_perfect_tile"
    ]


def _sketches():  # type: ignore[no-untyped-def]
    return SpaceGenerator().generate(dense, TARGET)


def _is_packed(sketch) -> bool:  # type: ignore[no-untyped-def]
    return any(inst.kind == "transform_layout" for inst in sketch.instructions)


def _is_tail(sketch) -> bool:  # type: ignore[no-untyped-def]
    """A sketch whose register tile need not divide the rows (tested in test_space.py)."""
    return any(str(inst.kwargs.get("ann_val", "")).endswith(TAIL_SUFFIX) for inst in sketch.instructions)


def test_packed_sketch_keeps_a_register_tile_of_rows_by_panels() -> None:
    packed = [s for s in _sketches() if _is_packed(s) and not _is_tail(s)]
    assert packed, "the dense space has packing sketches"
    for sketch in packed:
        (n_rows, rows), (n_cols, panels), (n_k, k) = _tile_decisions(sketch)
        # One block's samples, though the packed column loop is split by the panel first;
        # the column tiles count panels.
        assert (n_rows, n_cols, n_k) == (4, 4, 2)
        assert np.prod(rows) == 64 and np.prod(panels) * LANES == 384 and np.prod(k) == 96
        # The register tile is the last level (rows x panels), the reduction slice above it.
        accumulators = rows[3] * panels[3]
        assert panels[3] > 1 and 4 <= accumulators <= ACCUMULATORS, (rows, panels)
        assert k[1] > 1


def test_plain_sketch_keeps_its_register_tile_innermost() -> None:
    plain = [s for s in _sketches() if not _is_packed(s)]
    assert plain
    for sketch in plain:
        (_, rows), (_, cols), (_, k) = _tile_decisions(sketch)
        accumulators = rows[3] * (cols[3] // LANES)
        assert cols[3] % LANES == 0 and 4 <= accumulators <= ACCUMULATORS, (rows, cols)
        assert k[1] > 1  # a reduction slice below the row tiles


def test_default_schedule_prefers_packing_and_computes_the_product() -> None:
    candidate = default_candidate(dense, TARGET)
    assert candidate is not None
    kinds = {inst.kind for inst in candidate.trace.instructions}
    assert "transform_layout" in kinds
    from metasched.measure.builder import build_program

    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 96), dtype=np.float32)
    w = rng.standard_normal((96, 384), dtype=np.float32)
    y = np.zeros((64, 384), np.float32)
    built = build_program(candidate.func, TARGET)
    built.module(*built.arguments([x, w, y]))
    np.testing.assert_allclose(y, x @ w, rtol=1e-4, atol=1e-4)


awkward_dense = _dense(17, 32, 150)


def test_awkward_extents_are_padded() -> None:
    # 150 columns: no whole panels (8 or 16 lanes), and 17 rows (prime) leave the unpadded
    # tiling one row and 2 to 10 scalar columns per register tile.
    from metasched.space.rules.multi_level_tiling import padded_row_extent, padded_vector_extent

    assert padded_vector_extent(150, 16) == 160 and padded_vector_extent(150, 8) == 160  # 19 panels -> 20
    assert padded_vector_extent(50257, 16) == 50304  # 3144 panels: a multiple of 8
    assert padded_vector_extent(50272, 16) == 50304  # 3142 = 2 x 1571 panels split badly
    assert padded_vector_extent(3072, 16) == 3072 and padded_vector_extent(768, 8) == 768
    assert padded_vector_extent(1000, 16) == 1024  # 63 panels -> 64
    assert padded_vector_extent(40, 16) == 48 and padded_vector_extent(50, 16) == 64
    assert padded_vector_extent(12, 16) == 12  # less than a vector: the tail stays
    assert padded_vector_extent(24, 16) == 32  # MobileNet's 24 channels: 3-4x faster in two whole panels
    assert padded_row_extent(17) == 24 and padded_row_extent(197) == 200
    assert padded_row_extent(196) == 196 and padded_row_extent(7) == 7 and padded_row_extent(50) == 50


def test_default_schedule_of_awkward_extents_pads_packs_and_computes_the_product() -> None:
    candidate = default_candidate(awkward_dense, TARGET)
    assert candidate is not None
    kinds = {inst.kind for inst in candidate.trace.instructions}
    assert {"pad_einsum", "transform_layout"} <= kinds, kinds
    # the register tile's rows and panels unrolled whole: every unroll depth covers them
    text = candidate.func.script()
    assert "T.vectorized" in text and "T.unroll" in text
    from metasched.measure.builder import build_program

    rng = np.random.default_rng(0)
    x = rng.standard_normal((17, 32), dtype=np.float32)
    w = rng.standard_normal((32, 150), dtype=np.float32)
    y = np.zeros((17, 150), np.float32)
    built = build_program(candidate.func, TARGET)
    assert built.prepack is not None  # the padded weight is made once, with its packing
    built.module(*built.arguments([x, w, y]))
    np.testing.assert_allclose(y, x @ w, rtol=1e-4, atol=1e-4)
    interpreted = np.zeros((17, 150), np.float32)
    interpret(candidate.func, x, w, interpreted)
    np.testing.assert_allclose(interpreted, x @ w, rtol=1e-4, atol=1e-4)


def _conv1x1(channels_in: int, channels_out: int, pixels: int = 28):  # type: ignore[no-untyped-def]
    import tir

    return tir.parse(
        f"""
import tir.script as T
@T.script
def conv(X: T.Buffer((1, {pixels}, {pixels}, {channels_in}), "float32"), W: T.Buffer((1, 1, {channels_in}, {channels_out}), "float32"),
         Y: T.Buffer((1, {pixels}, {pixels}, {channels_out}), "float32")):
    T.func_attr({{"layout_free_buffers": ["W"]}})
    for n, h, w, co, rh, rw, ci in T.grid(1, {pixels}, {pixels}, {channels_out}, 1, 1, {channels_in}):
        with T.block("conv"):
            vn, vh, vw, vco, vrh, vrw, vci = T.remap("SSSSRRR", n, h, w, co, rh, rw, ci)
            with T.init():
                Y[vn, vh, vw, vco] = 0.0
            Y[vn, vh, vw, vco] += X[vn, vh + vrh, vw + vrw, vci] * W[vrh, vrw, vci, vco]
"""
    )


def test_one_panel_and_a_part_is_padded_only_over_a_long_enough_reduction() -> None:
    # 24 output channels at 16 lanes: padded to 32 when each output reduces 72 inputs
    # (MobileNet), left alone when it reduces 24 (ShuffleNet, 2x faster unpadded).
    from metasched.space.analysis import block_info
    from metasched.space.rules.multi_level_tiling import SHORT_REDUCTION, MultiLevelTiling
    from tir import Schedule

    rule = MultiLevelTiling(Target.parse("llvm -mcpu=x86-64-v4"))  # 16 float32 lanes, whatever this machine has
    for channels_in, padded in [(72, True), (SHORT_REDUCTION, False), (24, False)]:
        sch = Schedule(_conv1x1(channels_in, 24))
        info = block_info(sch, sch.get_block("conv"))
        assert (rule.padding(info, frozenset({"W"})) is not None) == padded, channels_in


conv1x1_1000 = _conv1x1(32, 1000, pixels=5)
average_pool_1000 = _average_pool(5, 1000)


def test_a_convolution_pads_its_awkward_channels_but_a_pool_reading_each_input_once_does_not() -> None:
    """1000 output channels (SqueezeNet's last convolution): the weights, reused over every
    pixel and packed once, are padded to whole panels (onnxruntime pads to 1008); the input of a
    global average pool, read once, is not (its padded copy cost 7x the pool)."""
    from metasched.measure.builder import build_program

    conv = default_candidate(conv1x1_1000, TARGET)
    assert conv is not None
    if LANES >= 16:  # 1000 = 125 whole 8-lane panels: AVX2 needs no padding
        assert "pad_einsum" in {inst.kind for inst in conv.trace.instructions}
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 5, 5, 32), dtype=np.float32)
    w = rng.standard_normal((1, 1, 32, 1000), dtype=np.float32)
    y = np.zeros((1, 5, 5, 1000), np.float32)
    built = build_program(conv.func, TARGET)
    built.module(*built.arguments([x, w, y]))
    np.testing.assert_allclose(y[0], x[0] @ w[0, 0], rtol=1e-4, atol=1e-4)
    pool = default_candidate(average_pool_1000, TARGET)
    assert pool is not None
    assert "pad_einsum" not in {inst.kind for inst in pool.trace.instructions}
    x = rng.standard_normal((1, 5, 5, 1000), dtype=np.float32)
    y = np.zeros((1, 1, 1, 1000), np.float32)
    build_program(pool.func, TARGET).module(x, y)
    np.testing.assert_allclose(y.reshape(1000), x.sum(axis=(0, 1, 2)), rtol=1e-4, atol=1e-4)


average_pool_144 = _average_pool(12, 144)
dense_batch_1 = _dense(1, 96, 144)


def test_an_operand_read_once_per_output_is_packed_only_when_layout_free() -> None:
    """A global average pool (EfficientNet's squeeze-and-excitation) reads each input once:
    its unit output dimensions do not make the input reused, so it is not copied into panels
    (the copy took 10x the pool: 0.24 against 0.02 ms). A batch-1 dense layer reads each weight
    once too, but the weight is packed before the runs, so its panels stay."""
    pool = SpaceGenerator().generate(average_pool_144, TARGET)
    assert pool and not any(_is_packed(s) for s in pool)
    candidate = default_candidate(average_pool_144, TARGET)
    assert candidate is not None
    x = np.random.default_rng(0).standard_normal((1, 12, 12, 144), dtype=np.float32)
    y = np.zeros((1, 1, 1, 144), np.float32)
    interpret(candidate.func, x, y)
    np.testing.assert_allclose(y.reshape(144), x.sum(axis=(0, 1, 2)), rtol=1e-4, atol=1e-4)
    assert any(_is_packed(s) for s in SpaceGenerator().generate(dense_batch_1, TARGET))


@T.script
def row_sums(A: T.Buffer((6, 750), "float32"), S: T.Buffer((6,), "float32")):
    for i, k in T.grid(6, 750):
        with T.block("S"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                S[vi] = 0.0
            S[vi] = S[vi] + A[vi, vk]


def test_row_reduction_runs_in_vector_lanes() -> None:
    # A softmax's 750-wide rows: lane partials (rfactor of a split by the vector width, the
    # last vector partial), vectorized, then a reduction of the partials.
    candidate = default_candidate(row_sums, TARGET)
    assert candidate is not None
    assert "rfactor" in {inst.kind for inst in candidate.trace.instructions}
    text = candidate.func.script()
    assert f"T.vectorized({LANES})" in text, text
    from metasched.measure.builder import build_program

    a = np.random.default_rng(0).standard_normal((6, 750)).astype(np.float32)
    s = np.zeros(6, np.float32)
    built = build_program(candidate.func, TARGET)
    built.module(*built.arguments([a, s]))
    np.testing.assert_allclose(s, a.sum(axis=1), rtol=1e-5, atol=1e-4)
    interpreted = np.zeros(6, np.float32)
    interpret(candidate.func, a, interpreted)
    np.testing.assert_allclose(interpreted, a.sum(axis=1), rtol=1e-5, atol=1e-4)


@T.script
def conv3x3_13x13(
    X: T.Buffer((1, 15, 15, 16), "float32"),
    W: T.Buffer((3, 3, 16, 32), "float32"),
    Y: T.Buffer((1, 13, 13, 32), "float32"),
):
    T.func_attr({"layout_free_buffers": ["W"]})
    for n, h, w, co, rh, rw, ci in T.grid(1, 13, 13, 32, 3, 3, 16):
        with T.block("conv"):
            vn, vh, vw, vco, vrh, vrw, vci = T.remap("SSSSRRR", n, h, w, co, rh, rw, ci)
            with T.init():
                Y[vn, vh, vw, vco] = 0.0
            Y[vn, vh, vw, vco] += X[vn, vh + vrh, vw + vrw, vci] * W[vrh, vrw, vci, vco]


def test_awkward_pixel_counts_get_a_register_tile_with_a_partial_last_tile() -> None:
    """169 output pixels (13 x 13, like Inception v3's 71 x 71 and 17 x 17) have no divisor from
    4 to 12: the perfectly tiled sketches keep one pixel per register tile, so the default takes
    a tail sketch (8 pixels a tile, the last one partial) and still computes the convolution."""
    from metasched.measure.builder import build_program
    from metasched.space.rules.multi_level_tiling import AWKWARD_SUFFIX, awkward_pixels

    assert awkward_pixels(169) and awkward_pixels(71 * 71) and not awkward_pixels(56 * 56)
    assert not awkward_pixels(111 * 111)  # 3 x 3 pixels a tile: SqueezeNet's stem tiles perfectly
    assert not awkward_pixels(49)  # small counts are tiled whole or by the ordinary tail sketches
    # With AVX2 (8 lanes) 7 to 12 rows leave one vector per tile: 399 = 3 x 7 x 19 is awkward
    # there, not with AVX-512; 56 x 56 (4 rows x 2 vectors) is fine on both.
    assert awkward_pixels(399, 8) and not awkward_pixels(399, 16) and not awkward_pixels(56 * 56, 8)
    candidate = default_candidate(conv3x3_13x13, TARGET)
    assert candidate is not None
    structures = [str(inst.kwargs.get("ann_val")) for inst in candidate.trace.instructions if inst.kind == "annotate"]
    assert any(structure.endswith(AWKWARD_SUFFIX + TAIL_SUFFIX) for structure in structures), structures
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 15, 15, 16), dtype=np.float32)
    w = rng.standard_normal((3, 3, 16, 32), dtype=np.float32)
    expected = np.zeros((1, 13, 13, 32), np.float32)
    for rh in range(3):
        for rw in range(3):
            expected += x[:, rh : rh + 13, rw : rw + 13, :] @ w[rh, rw]
    y = np.zeros((1, 13, 13, 32), np.float32)
    built = build_program(candidate.func, TARGET)
    built.module(*built.arguments([x, w, y]))
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4)
    interpreted = np.zeros((1, 13, 13, 32), np.float32)
    interpret(candidate.func, x, w, interpreted)
    np.testing.assert_allclose(interpreted, expected, rtol=1e-4, atol=1e-4)


class _Sample:
    def __init__(self, n: int, max_innermost: int = 64) -> None:
        self.kwargs = {"n": n, "max_innermost_factor": max_innermost}


def test_pixels_with_small_divisors_each_way_tile_in_two_dimensions() -> None:
    """111 x 111 pixels (3 x 37 each way; SqueezeNet's stem): 3 x 3 pixels by 2 vectors (18
    accumulators), where one row loop could hold only 3; 56 x 56 keeps its one row loop."""
    from metasched.space.default import _register_tile

    spatial = [(3, _Sample(4)), (5, _Sample(4)), (7, _Sample(4)), (10, _Sample(4, 4))]
    assert _register_tile(spatial, {3: 1, 5: 111, 7: 111, 10: 64}, 16, max_vectors=4, panel=16) == {
        10: 32,
        5: 3,
        7: 3,
    }
    assert _register_tile(spatial, {3: 1, 5: 56, 7: 56, 10: 64}, 16, max_vectors=4, panel=16) == {10: 32, 5: 8}


def test_register_tiles_fit_the_avx2_register_file_with_their_operands() -> None:
    """With 16 vector registers a tile's accumulators, its weight vectors and a broadcast
    register must all fit: 3 rows x 4 vectors (17) spilled an accumulator (Inception v3's
    147 x 147 convolution ran at half speed). Equal accumulators, AVX2 takes two vectors over
    one (a broadcast per FMA otherwise): 56 x 56 x 64 is 4 rows x 2 vectors, not 8 x 1."""
    from metasched.space.default import _register_tile
    from metasched.space.registers import best_rows, row_limit

    spatial = [(3, _Sample(4)), (5, _Sample(4)), (7, _Sample(4)), (10, _Sample(4, 8))]
    for pixels in (147, 56, 17, 73, 7, 14):
        tile = _register_tile(spatial, {3: 1, 5: pixels, 7: pixels, 10: 64}, 8, max_vectors=4, panel=8)
        vectors = tile[10] // 8
        rows = int(np.prod([size for pos, size in tile.items() if pos != 10]))
        assert rows * vectors + vectors + 1 <= 16, (pixels, tile)
    assert _register_tile(spatial, {3: 1, 5: 56, 7: 56, 10: 64}, 8, max_vectors=4, panel=8) == {10: 16, 5: 4}
    # Rows take the largest divisor that fits, not a multiple of 4: 800 pixels (wav2vec2's
    # 799, padded) as 5 rows x 2 vectors, 10 accumulators against 8 for 4 x 2.
    one_loop = [(5, _Sample(4)), (10, _Sample(4, 8))]
    assert _register_tile(one_loop, {5: 800, 10: 64}, 8, max_vectors=4, panel=8) == {10: 16, 5: 5}
    assert [row_limit(v, 8) for v in (1, 2, 3, 4)] == [12, 6, 4, 2]
    assert [row_limit(v, 16) for v in (1, 2, 3, 4)] == [24, 12, 8, 6]
    # A tail sketch's pixels per tile: 6 x 2 vectors with AVX2, 8 x 3 with AVX-512; one vector
    # of channels leaves 8 x 1 either way.
    choices = [3, 4, 5, 6, 8]
    assert choices[best_rows(choices, 80, 8, 4)] == 6
    assert choices[best_rows(choices, 80, 16, 4)] == 8
    assert choices[best_rows(choices, 8, 8, 4)] == 8


@T.script
def stem_conv(X: T.Buffer((1, 9, 9, 3), "float32"), W: T.Buffer((3, 3, 3, 16), "float32"),
              Y: T.Buffer((1, 7, 7, 16), "float32")):  # fmt: skip
    for n, h, w, co, rh, rw, ci in T.grid(1, 7, 7, 16, 3, 3, 3):
        with T.block("conv"):
            vn, vh, vw, vco, vrh, vrw, vci = T.remap("SSSSRRR", n, h, w, co, rh, rw, ci)
            with T.init():
                Y[vn, vh, vw, vco] = 0.0
            Y[vn, vh, vw, vco] += X[vn, vh + vrh, vw + vrw, vci] * W[vrh, vrw, vci, vco]


@T.script
def depthwise_conv(X: T.Buffer((1, 9, 9, 16), "float32"), W: T.Buffer((3, 3, 16), "float32"),
                   Y: T.Buffer((1, 7, 7, 16), "float32")):  # fmt: skip
    for n, h, w, c, rh, rw in T.grid(1, 7, 7, 16, 3, 3):
        with T.block("conv"):
            vn, vh, vw, vc, vrh, vrw = T.remap("SSSSRR", n, h, w, c, rh, rw)
            with T.init():
                Y[vn, vh, vw, vc] = 0.0
            Y[vn, vh, vw, vc] += X[vn, vh + vrh, vw + vrw, vc] * W[vrh, vrw, vc]


def test_light_reductions_are_depthwise_windows_not_small_stems() -> None:
    from metasched.space.default import light_reduction

    assert light_reduction(depthwise_conv)  # 9 elements per output, every load at its channel
    assert not light_reduction(stem_conv)  # 27 elements, but a loaded pixel serves 16 channels
    assert not light_reduction(dense)


@T.script
def softmax_rows(A: T.Buffer((48, 750), "float32"), out: T.Buffer((48, 750), "float32")):
    M = T.alloc_buffer((48,), "float32")
    E = T.alloc_buffer((48, 750), "float32")
    S = T.alloc_buffer((48,), "float32")
    for i, k in T.grid(48, 750):
        with T.block("max"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                M[vi] = T.float32(-3.4028234663852886e38)
            M[vi] = T.max(M[vi], A[vi, vk])
    for i, j in T.grid(48, 750):
        with T.block("exp"):
            vi, vj = T.remap("SS", i, j)
            E[vi, vj] = T.exp(A[vi, vj] - M[vi])
    for i, k in T.grid(48, 750):
        with T.block("sum"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                S[vi] = 0.0
            S[vi] = S[vi] + E[vi, vk]
    for i, j in T.grid(48, 750):
        with T.block("out"):
            vi, vj = T.remap("SS", i, j)
            out[vi, vj] = E[vi, vj] / S[vi]


def test_softmax_stages_are_computed_per_row() -> None:
    """The default places the max, the exponentials and the sum (with their lane partials) at
    the output's row loop, where nothing is computed twice: a row is read back from L1, not
    from whole-tensor buffers (Whisper's 4 x 750 x 750 scores: 2.3 -> 1.8 ms at 1 thread); the
    lane partials keep their lanes innermost, vectorized."""
    from metasched.measure.builder import build_program
    from tir.analysis.tree import TreeIndex

    candidate = default_candidate(softmax_rows, TARGET)
    assert candidate is not None
    index = TreeIndex(candidate.func)
    row_loop = index.loops_above(index.blocks["out"])[0]
    for name in ("max", "max_rf", "exp", "sum", "sum_rf"):
        assert index.loops_above(index.blocks[name])[0] is row_loop, (name, candidate.func.script())
    assert candidate.func.script().count(f"T.vectorized({LANES})") >= 4
    a = np.random.default_rng(0).standard_normal((48, 750)).astype(np.float32)
    expected = np.exp(a - a.max(axis=1, keepdims=True))
    expected /= expected.sum(axis=1, keepdims=True)
    out = np.zeros_like(a)
    built = build_program(candidate.func, TARGET)
    built.module(*built.arguments([a, out]))
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-7)
    interpreted = np.zeros_like(a)
    interpret(candidate.func, a, interpreted)
    np.testing.assert_allclose(interpreted, expected, rtol=1e-5, atol=1e-7)


@T.script
def stencil(A: T.Buffer((17,), "float32"), C: T.Buffer((16,), "float32")):
    B = T.alloc_buffer((17,), "float32")
    for i in range(17):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi] * 2.0
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = B[vi] + B[vi + 1]


def test_exact_location_computes_nothing_twice() -> None:
    """A stencil's producer (a convolution's padding, in one dimension) has no exact location:
    under the consumer's loop, neighbouring iterations would each compute B[i + 1]. A softmax's
    row maximum has one: the exponentials' row loop (scope loops max i, k; exp i, j)."""
    from metasched.space.rules.random_compute_location import exact_location

    assert exact_location(stencil, "B") == -1
    assert exact_location(softmax_rows, "max") == 2


def _outermost_drives_channels(sch) -> bool:  # type: ignore[no-untyped-def]
    realize = sch.index.blocks["conv"]
    outermost = sch.get(sch.get_loops(sch.get_block("conv"))[0])
    channel_binding = realize.iter_values[3]
    from metasched.space.analysis import vars_of

    return outermost.loop_var in vars_of(channel_binding)


def test_the_largest_input_decides_the_outer_tile_order() -> None:
    """Weights four times the size of the pixels (EfficientNet's last 1 x 1 convolutions):
    the channel tiles are outermost, so each weight panel is loaded once and the pixels swept
    under it (and two threads each read half of the weights). Pixels larger than the weights
    (a first layer): the pixel tiles stay outermost."""
    heavy = SpaceGenerator().generate_schedules(_conv1x1(256, 128, pixels=4), TARGET)
    assert heavy and all(_outermost_drives_channels(s) for s in heavy if "conv" in s.index.blocks)
    light = SpaceGenerator().generate_schedules(_conv1x1(16, 32, pixels=32), TARGET)
    assert light and not any(_outermost_drives_channels(s) for s in light if "conv" in s.index.blocks)
    candidate = default_candidate(_conv1x1(256, 128, pixels=4), TARGET)
    assert candidate is not None
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 4, 4, 256), dtype=np.float32)
    w = rng.standard_normal((1, 1, 256, 128), dtype=np.float32)
    y = np.zeros((1, 4, 4, 128), np.float32)
    interpret(candidate.func, x, w, y)
    np.testing.assert_allclose(y[0], x[0] @ w[0, 0], rtol=1e-4, atol=1e-3)


def _conv1x1_relu(channels_in: int, channels_out: int, pixels: int):  # type: ignore[no-untyped-def]
    import tir

    return tir.parse(
        f"""
import tir.script as T
@T.script
def conv_relu(X: T.Buffer((1, {pixels}, {pixels}, {channels_in}), "float32"),
              W: T.Buffer((1, 1, {channels_in}, {channels_out}), "float32"),
              Y: T.Buffer((1, {pixels}, {pixels}, {channels_out}), "float32")):
    T.func_attr({{"layout_free_buffers": ["W"]}})
    C = T.alloc_buffer((1, {pixels}, {pixels}, {channels_out}), "float32")
    for n, h, w, co, rh, rw, ci in T.grid(1, {pixels}, {pixels}, {channels_out}, 1, 1, {channels_in}):
        with T.block("conv"):
            vn, vh, vw, vco, vrh, vrw, vci = T.remap("SSSSRRR", n, h, w, co, rh, rw, ci)
            with T.init():
                C[vn, vh, vw, vco] = 0.0
            C[vn, vh, vw, vco] += X[vn, vh + vrh, vw + vrw, vci] * W[vrh, vrw, vci, vco]
    for n, h, w, co in T.grid(1, {pixels}, {pixels}, {channels_out}):
        with T.block("relu"):
            vn, vh, vw, vco = T.remap("SSSS", n, h, w, co)
            Y[vn, vh, vw, vco] = T.max(C[vn, vh, vw, vco], 0.0)
"""
    )


def test_a_padded_tail_sketch_inlines_its_unpadding_copy_into_the_epilogue() -> None:
    """169 pixels (13 x 13: no register tile divides them) and 150 channels (padded to whole
    panels), then a relu: the tail sketch computes no epilogue per tile, so the unpadding copy
    would be a pass of its own; it is inlined, and the relu reads the padded result in place."""
    from metasched.measure.builder import build_program

    func = _conv1x1_relu(16, 150, 13)
    candidate = default_candidate(func, TARGET)
    assert candidate is not None
    kinds = {inst.kind for inst in candidate.trace.instructions}
    assert "pad_einsum" in kinds and _is_tail(candidate.trace), kinds
    assert "_unpad" not in candidate.func.script()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 13, 13, 16), dtype=np.float32)
    w = rng.standard_normal((1, 1, 16, 150), dtype=np.float32)
    y = np.zeros((1, 13, 13, 150), np.float32)
    built = build_program(candidate.func, TARGET)
    built.module(*built.arguments([x, w, y]))
    np.testing.assert_allclose(y[0], np.maximum(x[0] @ w[0, 0], 0.0), rtol=1e-4, atol=1e-4)
