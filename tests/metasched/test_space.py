"""The design space: sketches of many workloads, sampled and checked against the original.

Every sample is a sketch replayed with fresh decisions and post-processed; it is either refused
with a reason (counted) or verifies and computes what the unscheduled program computes (both
built with LLVM, compared on small random inputs).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import tir
import tir.script as T
from metasched.space import PostprocError, SpaceGenerator, default_postprocs, default_rules
from metasched.space.analysis import TILED, block_info, vars_of
from metasched.space.rules.add_rfactor import LANES_STRUCTURE, AddRFactor
from metasched.space.rules.auto_inline import AutoInline
from metasched.space.rules.multi_level_tiling import TAIL_FACTORS, TAIL_SUFFIX, MultiLevelTiling
from tir.analysis import verify
from tir.ir import ForKind
from tir.schedule import Schedule, ScheduleError, Trace
from tir.target import Target

# ---------------------------------------------------------------- workloads (small sizes)


def matmul(n: int = 64) -> tir.PrimFunc:
    @T.script
    def func(A: T.Buffer((n, n), "float32"), B: T.Buffer((n, n), "float32"), C: T.Buffer((n, n), "float32")):
        for i, j, k in T.grid(n, n, n):
            with T.block("C"):
                vi, vj, vk = T.remap("SSR", i, j, k)
                with T.init():
                    C[vi, vj] = 0.0
                C[vi, vj] += A[vi, vk] * B[vk, vj]

    return func


@T.script
def batch_matmul(
    A: T.Buffer((2, 32, 16), "float32"), B: T.Buffer((2, 16, 32), "float32"), C: T.Buffer((2, 32, 32), "float32")
):
    for b, i, j, k in T.grid(2, 32, 32, 16):
        with T.block("C"):
            vb, vi, vj, vk = T.remap("SSSR", b, i, j, k)
            with T.init():
                C[vb, vi, vj] = 0.0
            C[vb, vi, vj] += A[vb, vi, vk] * B[vb, vk, vj]


@T.script
def conv2d_nhwc(
    data: T.Buffer((1, 8, 8, 8), "float32"),
    weight: T.Buffer((3, 3, 8, 16), "float32"),
    conv: T.Buffer((1, 8, 8, 16), "float32"),
):
    padded = T.alloc_buffer((1, 10, 10, 8), "float32")
    for n, h, w, c in T.grid(1, 10, 10, 8):
        with T.block("pad"):
            vn, vh, vw, vc = T.remap("SSSS", n, h, w, c)
            padded[vn, vh, vw, vc] = T.if_then_else(1 <= vh < 9 and 1 <= vw < 9, data[vn, vh - 1, vw - 1, vc], 0.0)
    for n, h, w, co, rh, rw, ci in T.grid(1, 8, 8, 16, 3, 3, 8):
        with T.block("conv"):
            vn, vh, vw, vco, vrh, vrw, vci = T.remap("SSSSRRR", n, h, w, co, rh, rw, ci)
            with T.init():
                conv[vn, vh, vw, vco] = 0.0
            conv[vn, vh, vw, vco] += padded[vn, vh + vrh, vw + vrw, vci] * weight[vrh, vrw, vci, vco]


@T.script
def conv2d_nchw_strided(
    data: T.Buffer((1, 4, 11, 11), "float32"),
    weight: T.Buffer((8, 4, 3, 3), "float32"),
    out: T.Buffer((1, 8, 4, 4), "float32"),
):
    # stride 2, dilation 2: out[h] reads data[2h + 2 rh]
    for n, co, h, w, ci, rh, rw in T.grid(1, 8, 4, 4, 4, 3, 3):
        with T.block("conv"):
            vn, vco, vh, vw, vci, vrh, vrw = T.remap("SSSSRRR", n, co, h, w, ci, rh, rw)
            with T.init():
                out[vn, vco, vh, vw] = 0.0
            out[vn, vco, vh, vw] += data[vn, vci, vh * 2 + vrh * 2, vw * 2 + vrw * 2] * weight[vco, vci, vrh, vrw]


@T.script
def depthwise_conv2d(
    data: T.Buffer((1, 10, 10, 16), "float32"),
    weight: T.Buffer((3, 3, 16), "float32"),
    out: T.Buffer((1, 8, 8, 16), "float32"),
):
    for n, h, w, c, rh, rw in T.grid(1, 8, 8, 16, 3, 3):
        with T.block("dw"):
            vn, vh, vw, vc, vrh, vrw = T.remap("SSSSRR", n, h, w, c, rh, rw)
            with T.init():
                out[vn, vh, vw, vc] = 0.0
            out[vn, vh, vw, vc] += data[vn, vh + vrh, vw + vrw, vc] * weight[vrh, vrw, vc]


@T.script
def dense_bias_relu(
    A: T.Buffer((16, 32), "float32"),
    W: T.Buffer((64, 32), "float32"),
    bias: T.Buffer((64,), "float32"),
    E: T.Buffer((16, 64), "float32"),
):
    C = T.alloc_buffer((16, 64), "float32")
    D = T.alloc_buffer((16, 64), "float32")
    for i, j, k in T.grid(16, 64, 32):
        with T.block("dense"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * W[vj, vk]
    for i, j in T.grid(16, 64):
        with T.block("bias"):
            vi, vj = T.remap("SS", i, j)
            D[vi, vj] = C[vi, vj] + bias[vj]
    for i, j in T.grid(16, 64):
        with T.block("relu"):
            vi, vj = T.remap("SS", i, j)
            E[vi, vj] = T.max(D[vi, vj], 0.0)


@T.script
def max_pool2d(data: T.Buffer((1, 8, 8, 16), "float32"), out: T.Buffer((1, 4, 4, 16), "float32")):
    for n, h, w, c, rh, rw in T.grid(1, 4, 4, 16, 2, 2):
        with T.block("pool"):
            vn, vh, vw, vc, vrh, vrw = T.remap("SSSSRR", n, h, w, c, rh, rw)
            with T.init():
                out[vn, vh, vw, vc] = T.min_value("float32")
            out[vn, vh, vw, vc] = T.max(out[vn, vh, vw, vc], data[vn, vh * 2 + vrh, vw * 2 + vrw, vc])


@T.script
def row_sum(A: T.Buffer((4, 4096), "float32"), B: T.Buffer((4,), "float32")):
    for i, k in T.grid(4, 4096):
        with T.block("sum"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                B[vi] = 0.0
            B[vi] += A[vi, vk]


@T.script
def softmax(A: T.Buffer((4, 256), "float32"), out: T.Buffer((4, 256), "float32")):
    row_max = T.alloc_buffer((4,), "float32")
    e = T.alloc_buffer((4, 256), "float32")
    row_sum = T.alloc_buffer((4,), "float32")
    for i, k in T.grid(4, 256):
        with T.block("max"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                row_max[vi] = T.min_value("float32")
            row_max[vi] = T.max(row_max[vi], A[vi, vk])
    for i, j in T.grid(4, 256):
        with T.block("exp"):
            vi, vj = T.remap("SS", i, j)
            e[vi, vj] = T.exp(A[vi, vj] - row_max[vi])
    for i, k in T.grid(4, 256):
        with T.block("sum"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                row_sum[vi] = 0.0
            row_sum[vi] += e[vi, vk]
    for i, j in T.grid(4, 256):
        with T.block("norm"):
            vi, vj = T.remap("SS", i, j)
            out[vi, vj] = e[vi, vj] / row_sum[vi]


@T.script
def layer_norm(
    A: T.Buffer((8, 128), "float32"),
    gamma: T.Buffer((128,), "float32"),
    beta: T.Buffer((128,), "float32"),
    out: T.Buffer((8, 128), "float32"),
):
    total = T.alloc_buffer((8,), "float32")
    total_sq = T.alloc_buffer((8,), "float32")
    for i, k in T.grid(8, 128):
        with T.block("sums"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                total[vi] = 0.0
            total[vi] += A[vi, vk]
    for i, k in T.grid(8, 128):
        with T.block("squares"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                total_sq[vi] = 0.0
            total_sq[vi] += A[vi, vk] * A[vi, vk]
    for i, j in T.grid(8, 128):
        with T.block("norm"):
            vi, vj = T.remap("SS", i, j)
            out[vi, vj] = (A[vi, vj] - total[vi] / 128.0) * T.rsqrt(
                total_sq[vi] / 128.0 - total[vi] / 128.0 * (total[vi] / 128.0) + 1e-5
            ) * gamma[vj] + beta[vj]


@T.script
def elementwise_chain(A: T.Buffer((16, 256), "float32"), D: T.Buffer((16, 256), "float32")):
    B = T.alloc_buffer((16, 256), "float32")
    C = T.alloc_buffer((16, 256), "float32")
    for i, j in T.grid(16, 256):
        with T.block("scale"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(16, 256):
        with T.block("shift"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = B[vi, vj] + 1.0
    for i, j in T.grid(16, 256):
        with T.block("relu"):
            vi, vj = T.remap("SS", i, j)
            D[vi, vj] = T.max(C[vi, vj], 0.0)


WORKLOADS = {
    "matmul": matmul(),
    "batch_matmul": batch_matmul,
    "conv2d_nhwc": conv2d_nhwc,
    "conv2d_nchw_strided": conv2d_nchw_strided,
    "depthwise_conv2d": depthwise_conv2d,
    "dense_bias_relu": dense_bias_relu,
    "max_pool2d": max_pool2d,
    "row_sum": row_sum,
    "softmax": softmax,
    "layer_norm": layer_norm,
    "elementwise_chain": elementwise_chain,
}

SAMPLES = 20
TARGET = Target.parse("llvm")

# ---------------------------------------------------------------- helpers


def _arguments(func: tir.PrimFunc, rng: np.random.Generator) -> list[np.ndarray]:
    args = []
    for param in func.params:
        shape = tuple(int(s.value) for s in param.shape)  # type: ignore[union-attr]
        args.append(rng.standard_normal(shape).astype(np.float32))
    return args


def _outputs(func: tir.PrimFunc, inputs: list[np.ndarray]) -> list[np.ndarray]:
    args = [a.copy() for a in inputs]
    tir.build(func, TARGET)(*args)
    return args


def _sample(func: tir.PrimFunc, sketch: Trace, seed: int) -> Schedule:
    """The sketch replayed with fresh decisions, then post-processed (raises when refused)."""
    sch = Schedule(func, seed=seed)
    sketch.apply_to(sch, {position: None for position in sketch.decisions})
    for postproc in default_postprocs(TARGET):
        postproc.apply(sch)
    return sch


def check_space(
    func: tir.PrimFunc, samples: int = SAMPLES, space: SpaceGenerator | None = None
) -> tuple[list[Trace], Counter[str], int]:
    sketches = (space or SpaceGenerator()).generate(func, TARGET)
    assert sketches, "no sketch"
    rng = np.random.default_rng(0)
    inputs = _arguments(func, rng)
    expected = _outputs(func, inputs)
    rejects: Counter[str] = Counter()
    valid = 0
    for seed in range(samples):
        sketch = sketches[seed % len(sketches)]
        try:
            sch = _sample(func, sketch, seed)
        except (ScheduleError, PostprocError) as error:
            reason = str(error).strip().splitlines()[0]
            assert reason, "a refusal must say why"
            rejects[reason[:120]] += 1
            continue
        assert verify(sch.func) == [], sch.func.script()
        got = _outputs(sch.func, inputs)
        for g, e in zip(got, expected):
            np.testing.assert_allclose(
                g, e, rtol=1e-4, atol=1e-4, err_msg=f"sketch {seed % len(sketches)}, seed {seed}"
            )
        valid += 1
        if seed < len(sketches):
            # The full trace (postprocessors included) replays to the same program.
            again = Schedule(func)
            sch.trace.apply_to(again)
            tir.assert_structural_equal(again.func, sch.func)
    return sketches, rejects, valid


# ---------------------------------------------------------------- tests


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_samples_verify_and_compute_the_same(name: str) -> None:
    sketches, rejects, valid = check_space(WORKLOADS[name])
    # Most of the space must be valid; the rest is refused with a reason (counted above).
    assert valid >= SAMPLES // 2, f"{name}: {valid} valid of {SAMPLES}; rejects: {dict(rejects)}"


def test_sketches_have_decisions_and_json_roundtrip() -> None:
    sketches = SpaceGenerator().generate(matmul(), TARGET)
    assert len(sketches) >= 4  # cache-write levels x packing
    for sketch in sketches:
        kinds = {inst.kind for inst in sketch.instructions}
        assert "sample_perfect_tile" in kinds and "sample_categorical" in kinds
        again = Trace.from_json(sketch.to_json())
        assert again.to_json() == sketch.to_json()


def test_rules_select_blocks_by_signature() -> None:
    mlt = MultiLevelTiling(TARGET)
    sch = Schedule(dense_bias_relu)
    assert mlt.fits(block_info(sch, sch.get_block("dense")))
    assert not mlt.fits(block_info(sch, sch.get_block("bias")))
    sch = Schedule(max_pool2d)
    assert not mlt.fits(block_info(sch, sch.get_block("pool")))  # no reuse
    # A renamed matmul is tiled all the same.
    renamed = Schedule(matmul())
    assert len(mlt.apply(renamed, renamed.get_block("C"))) > 1


def test_auto_inline_folds_elementwise_chain() -> None:
    sketches = SpaceGenerator().generate(elementwise_chain, TARGET)
    sch = Schedule(elementwise_chain)
    sketches[0].apply_to(sch)
    # relu folded into shift, then shift into scale (reverse_compute_inline, consumers first)
    assert len(sch.index.blocks) == 2, sch.func.script()
    rule = AutoInline()
    sch = Schedule(dense_bias_relu)
    (folded,) = rule.apply(sch, sch.get_block("relu"))
    assert "relu" not in folded.index.blocks  # relu folded into bias (reverse_compute_inline)


def test_add_rfactor_branches_on_small_spatial_extent() -> None:
    sch = Schedule(row_sum, seed=0)
    made = AddRFactor(TARGET).apply(sch, sch.get_block("sum"))
    assert len(made) == 4  # unchanged, rfactor of either split loop, the rows in vector lanes
    assert any(len(s.index.blocks) == 3 for s in made[1:])  # partial sums + final sum
    lanes = made[-1]
    assert any(realize.block.annotations.get(TILED) == LANES_STRUCTURE for realize in lanes.index.blocks.values()), (
        lanes.func.script()
    )
    sch = Schedule(matmul())
    assert len(AddRFactor(TARGET).apply(sch, sch.get_block("C"))) == 1


def test_dense_epilogue_fused_at_tile() -> None:
    sketches = SpaceGenerator().generate(dense_bias_relu, TARGET)
    fused = [s for s in sketches if any(inst.kind == "reverse_compute_at" for inst in s.instructions)]
    assert fused
    sch = Schedule(dense_bias_relu, seed=3)
    fused[0].apply_to(sch)
    bias = sch.index.blocks["bias"]
    dense = sch.index.blocks["dense"]
    shared = set(map(id, sch.index.loops_above(bias))) & set(map(id, sch.index.loops_above(dense)))
    assert shared  # the epilogue runs inside the dense's tile loops


def test_dense_epilogue_at_register_tile() -> None:
    """The "SSSRS" sketch: the reduction loop whole, under every spatial tile loop but the
    register tile's, and the epilogue computed right after it, on that register tile."""
    sketches = SpaceGenerator().generate(dense_bias_relu, TARGET)
    at_registers = [
        s
        for s in sketches
        if any(inst.kind == "annotate" and inst.kwargs.get("ann_val") == "SSSRS" for inst in s.instructions)
    ]
    assert at_registers
    for seed in range(4):
        sch = _sample(dense_bias_relu, at_registers[seed % len(at_registers)], seed)
        dense = sch.index.blocks["dense"]
        dense_loops = sch.index.loops_above(dense)
        (k_binding,) = [v for v, iv in zip(dense.iter_values, dense.block.iter_vars) if iv.kind.name == "REDUCE"]
        (reduction,) = [loop for loop in dense_loops if loop.loop_var in vars_of(k_binding)]
        assert reduction.extent.value == 32  # type: ignore[union-attr]  # whole, not split
        (epilogue,) = [name for name in sch.index.blocks if name in ("bias", "relu")]  # one, the other inlined
        epilogue_loops = set(map(id, sch.index.loops_above(sch.index.blocks[epilogue])))
        # Every loop above the reduction loop encloses the epilogue too; none below it does.
        position = next(i for i, loop in enumerate(dense_loops) if loop is reduction)
        assert all(id(loop) in epilogue_loops for loop in dense_loops[:position])
        assert not any(id(loop) in epilogue_loops for loop in dense_loops[position:])
        inputs = _arguments(dense_bias_relu, np.random.default_rng(seed))
        np.testing.assert_allclose(
            _outputs(sch.func, inputs)[-1], _outputs(dense_bias_relu, inputs)[-1], rtol=1e-5, atol=1e-5
        )


def _tail_sketches(func: tir.PrimFunc) -> list[Trace]:
    return [
        s
        for s in SpaceGenerator().generate(func, TARGET)
        if any(
            inst.kind == "annotate" and str(inst.kwargs.get("ann_val", "")).endswith(TAIL_SUFFIX)
            for inst in s.instructions
        )
    ]


def _guarded_stores(stmt: object, guarded: bool = False) -> list[bool]:
    """For each store of a lowered program, whether an ``if`` encloses it."""
    from tir.ir import BufferStore, IfThenElse, Node

    if isinstance(stmt, BufferStore):
        return [guarded]
    if isinstance(stmt, IfThenElse):
        found = _guarded_stores(stmt.then_case, True)
        return found + (_guarded_stores(stmt.else_case, True) if stmt.else_case is not None else [])
    found = []
    if isinstance(stmt, Node):
        for name in type(stmt).child_fields():
            value = getattr(stmt, name)
            for item in value if isinstance(value, (list, tuple)) else (value,):
                found += _guarded_stores(item, guarded)
    return found


@pytest.mark.parametrize("name", ["conv2d_nhwc", "dense_bias_relu"])
def test_register_tiles_that_do_not_divide_the_pixels(name: str) -> None:
    """Tail sketches: the pixels (64 of the conv, 16 rows of the dense) in register tiles of a
    sampled size that leaves a partial last tile (3, 5 or 6); outputs equal the unscheduled
    program's, and once lowered the full tiles store unguarded (partition_tails)."""
    from tir.transform import lower

    func = WORKLOADS[name]
    sketches = _tail_sketches(func)
    assert sketches
    inputs = _arguments(func, np.random.default_rng(0))
    want = _outputs(func, inputs)[-1]
    for seed in range(6):
        sketch = sketches[seed % len(sketches)]
        sch = _sample(func, sketch, seed)
        (factor,) = [
            inst.args[0][inst.decision]
            for inst in sch.trace.instructions
            if inst.kind == "sample_categorical" and set(inst.args[0]) <= set(TAIL_FACTORS)
        ]
        assert factor in (3, 5, 6)  # divides neither 64 pixels nor 16 rows
        np.testing.assert_allclose(_outputs(sch.func, inputs)[-1], want, rtol=1e-5, atol=1e-5)
        lowered = lower(sch.func, TARGET)
        stores = [g for f in lowered.functions.values() for g in _guarded_stores(f.body)]
        assert False in stores, f"every store of seed {seed} is still guarded (factor {factor})"


def _panel_width() -> int:
    """One float32 vector of the host (16 lanes with AVX-512, else 8): the packing rule's panel."""
    from metasched.space.default import _vector_lanes

    return _vector_lanes(TARGET)


def _hand_decisions(sketch: Trace, n: int, row_block: int, depth: int, unroll: int = 16) -> dict[int, object]:
    """Decisions giving examples/matmul_schedule.py's shape on the packed, no-cache-write sketch."""
    decisions: dict[int, object] = {}
    spatial = 0
    for position, inst in enumerate(sketch.instructions):
        if inst.kind == "sample_perfect_tile":
            if inst.kwargs["n"] == 4 and spatial == 0:  # i: row blocks, 4-row groups, 4 rows
                decisions[position] = [n // row_block, 1, row_block // 4, 4]
                spatial += 1
            elif inst.kwargs["n"] == 4:  # j, counted in panels: all in S1, one panel in the tile
                decisions[position] = [1, n // _panel_width(), 1, 1]
            else:  # k
                decisions[position] = [n // depth, depth]
        elif inst.kind == "sample_categorical":
            decisions[position] = [0, 16, 64, 512].index(unroll)
    return decisions


def packed_sketch(sketches: list[Trace]) -> Trace:
    return next(
        s
        for s in sketches
        if any(inst.kind == "transform_layout" for inst in s.instructions)
        and not any(inst.kind in ("cache_write", "compute_at") for inst in s.instructions)
    )


def _hand_scheduled(n: int) -> Schedule:
    """matmul(n) on the packed sketch with examples/matmul_schedule.py's decisions, postprocessed."""
    func = matmul(n)
    sketch = packed_sketch(SpaceGenerator().generate(func, TARGET))
    sch = Schedule(func)
    sketch.apply_to(sch, _hand_decisions(sketch, n, row_block=32, depth=64))
    for postproc in default_postprocs(TARGET):
        postproc.apply(sch)
    return sch


def test_hand_schedule_is_reachable() -> None:
    n = 64
    func = matmul(n)
    sch = _hand_scheduled(n)
    text = sch.func.script()
    width = _panel_width()
    packed = [
        b for b in sch.func.body.block.alloc_buffers if tuple(int(s.value) for s in b.shape) == (n // width, n, width)
    ]
    assert packed, text  # B packed into one-vector panels, contiguous in k
    update = sch.index.blocks["C"]
    # Loops of one iteration (the tile's single panel) are dropped by lowering.
    loops = [loop for loop in sch.index.loops_above(update) if loop.extent.value != 1]
    assert loops[0].kind is ForKind.PARALLEL, text
    assert loops[-1].kind is ForKind.VECTORIZED and loops[-1].extent.value == width, text
    assert loops[-2].kind is ForKind.UNROLLED and loops[-2].extent.value == 4, text  # the 4 x vector register tile
    assert any(r.buffer is packed[0] for r in update.block.reads)
    assert "C_init" in sch.index.blocks  # decompose_reduction
    rng = np.random.default_rng(1)
    inputs = _arguments(func, rng)
    np.testing.assert_allclose(_outputs(sch.func, inputs)[2], inputs[0] @ inputs[1], rtol=1e-4, atol=1e-4)


def test_packing_copy_runs_in_panel_order_and_is_vectorized() -> None:
    sch = _hand_scheduled(64)
    (copy,) = [name for name in sch.index.blocks if name.endswith("_global")]
    loops = sch.index.loops_above(sch.index.blocks[copy])
    # panel, k, then the panel's lanes: whole vectors written, one vector read from a row of B
    assert loops[-1].kind is ForKind.VECTORIZED and loops[-1].extent.value == _panel_width(), sch.func.script()


def test_packing_per_tile_option() -> None:
    rules = [
        MultiLevelTiling(TARGET, pack_levels=(2,), tails=False) if isinstance(rule, MultiLevelTiling) else rule
        for rule in default_rules(TARGET)
    ]
    space = SpaceGenerator(rules=rules)
    sketches, rejects, valid = check_space(matmul(), samples=9, space=space)
    assert len(sketches) == 9  # (no packing, packing at the root, packing per tile) x 3 output tiles
    assert sum("compute_at" in (i.kind for i in s.instructions) for s in sketches) == 3
    assert valid == 9, dict(rejects)


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_200_samples_are_valid_or_refused_with_a_reason(name: str) -> None:
    """The issue's bar: 200 samples of each space, each either a program that verifies (the
    candidate maker runs the validator) or a refusal that names its stage and reason."""
    from metasched.search.candidate import Rejected, make_candidate

    func = WORKLOADS[name]
    space = SpaceGenerator()
    sketches = space.generate(func, TARGET)
    postprocs = space.postprocs_for(TARGET)
    made = 0
    for seed in range(200):
        index = seed % len(sketches)
        try:
            make_candidate(func, sketches[index], index, None, postprocs, seed=seed)
        except Rejected as rejected:
            assert rejected.stage and rejected.reason, "a refusal must say where and why"
            continue
        made += 1
    assert made >= 100, f"{name}: only {made} of 200 samples valid"


@T.script
def unit_outer_copy(A: T.Buffer((1, 4096), "float32"), B: T.Buffer((1, 4096), "float32")):
    for i, j in T.grid(1, 4096):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] + 1.0


def test_parallel_reaches_past_unit_outer_loops() -> None:
    """An outer loop of extent 1 gives no parallelism: the loop under it (longer than the
    parallel maximum) is the one to parallelize."""
    from metasched.space.analysis import PARALLEL
    from metasched.space.postproc.rewrite_parallel_vectorize_unroll import RewriteParallelVectorizeUnroll

    sch = Schedule(unit_outer_copy)
    sch.annotate(sch.get_block("root"), PARALLEL, 32)
    RewriteParallelVectorizeUnroll().apply(sch)
    kinds = [sch.get_loop_node(loop).kind for loop in sch.get_loops(sch.get_block("B"))]
    assert ForKind.PARALLEL in kinds, sch.func.script()
    assert verify(sch.func) == []


@T.script
def two_blocks_under_one_loop(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4, 8), "float32")):
    C = T.alloc_buffer((4, 8), "float32")
    for i in range(4):
        for j in range(8):
            with T.block("C"):
                vi, vj = T.remap("SS", i, j)
                C[vi, vj] = A[vi, vj] * 2.0
        for j in range(8):
            with T.block("B"):
                vi, vj = T.remap("SS", i, j)
                B[vi, vj] = C[vi, vj] + 1.0


@T.script
def copy_then_scale(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
    C = T.alloc_buffer((8, 8), "float32")
    for i, j in T.grid(8, 8):
        with T.block("copy"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = T.if_then_else(vi < 7, A[vi, vj], 0.0)
    for i, j in T.grid(8, 8):
        with T.block("scale"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = C[vi, vj] * 2.0


def test_copies_unroll_at_most_16_deep() -> None:
    """A copy unrolled 64 deep runs no faster than at 16 and takes longer to build; the
    computing block takes the whole depth."""
    from metasched.space.analysis import UNROLL, is_copy
    from metasched.space.postproc.rewrite_parallel_vectorize_unroll import RewriteParallelVectorizeUnroll

    sch = Schedule(copy_then_scale)
    assert is_copy(sch.get(sch.get_block("copy"))) and not is_copy(sch.get(sch.get_block("scale")))
    sch.annotate(sch.get_block("root"), UNROLL, 64)
    RewriteParallelVectorizeUnroll().apply(sch)
    kinds = {
        name: [sch.get_loop_node(loop).kind for loop in sch.get_loops(sch.get_block(name))]
        for name in ("copy", "scale")
    }
    assert kinds["copy"] == [ForKind.SERIAL, ForKind.UNROLLED], sch.func.script()
    assert kinds["scale"] == [ForKind.UNROLLED, ForKind.UNROLLED], sch.func.script()


def test_unroll_stops_at_loops_around_other_blocks() -> None:
    """Unrolling ``i`` for B's sake would copy C's nest too (a candidate unrolling loops around
    a whole convolution tile took minutes to build): only each block's own loops unroll."""
    from metasched.space.analysis import UNROLL
    from metasched.space.postproc.rewrite_parallel_vectorize_unroll import RewriteParallelVectorizeUnroll

    sch = Schedule(two_blocks_under_one_loop)
    sch.annotate(sch.get_block("root"), UNROLL, 64)
    RewriteParallelVectorizeUnroll().apply(sch)
    for name in ("C", "B"):
        outer, inner = (sch.get_loop_node(loop) for loop in sch.get_loops(sch.get_block(name)))
        assert outer.kind is ForKind.SERIAL and inner.kind is ForKind.UNROLLED, sch.func.script()


@T.script
def softmax_like_rows(A: T.Buffer((3, 50), "float32"), B: T.Buffer((3, 50), "float32")):
    for i, j in T.grid(3, 50):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = T.exp(A[vi, vj]) * 0.5


def test_a_row_no_power_of_two_divides_is_vectorized_with_a_partial_last_vector() -> None:
    """50 columns (ViT-B/32's tokens): vectors of 16, the last one partial, instead of scalar
    code; lowering takes the guard out of the full vectors and the result is exact."""
    from metasched.space.analysis import VECTORIZE
    from metasched.space.postproc.rewrite_parallel_vectorize_unroll import TAIL_WIDTH, RewriteParallelVectorizeUnroll

    sch = Schedule(softmax_like_rows)
    sch.annotate(sch.get_block("root"), VECTORIZE, 32)
    RewriteParallelVectorizeUnroll().apply(sch)
    loops = [sch.get_loop_node(loop) for loop in sch.get_loops(sch.get_block("B"))]
    assert loops[-1].kind is ForKind.VECTORIZED and loops[-1].extent.value == TAIL_WIDTH, sch.func.script()
    assert verify(sch.func) == []
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 50)).astype(np.float32)
    b = np.zeros((3, 50), np.float32)
    tir.build(sch.func, "llvm")(a, b)
    np.testing.assert_allclose(b, np.exp(a) * 0.5, rtol=2e-6)
    ir = tir.build(sch.func, "llvm").get_source("ll")
    assert "<16 x float>" in ir


@T.script
def rows_of_24(A: T.Buffer((5, 24), "float32"), B: T.Buffer((5, 24), "float32")):
    for i, j in T.grid(5, 24):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0 + 1.0


def test_a_short_innermost_loop_no_power_of_two_fits_is_vectorized_by_8() -> None:
    """24 channels (a register tile of 120 = 5 x 24 channels at 16 lanes): 3 vectors of 8 lanes,
    not scalar code."""
    from metasched.space.analysis import VECTORIZE
    from metasched.space.postproc.rewrite_parallel_vectorize_unroll import RewriteParallelVectorizeUnroll

    sch = Schedule(rows_of_24)
    sch.annotate(sch.get_block("root"), VECTORIZE, 32)
    RewriteParallelVectorizeUnroll().apply(sch)
    loops = [sch.get_loop_node(loop) for loop in sch.get_loops(sch.get_block("B"))]
    assert loops[-1].kind is ForKind.VECTORIZED and loops[-1].extent.value == 8, sch.func.script()
    assert loops[-2].extent.value == 3
    a = np.random.default_rng(0).standard_normal((5, 24)).astype(np.float32)
    b = np.zeros((5, 24), np.float32)
    tir.build(sch.func, "llvm")(a, b)
    np.testing.assert_allclose(b, a * 2.0 + 1.0, rtol=1e-6)


@T.script
def exp_read_twice(A: T.Buffer((4, 64), "float32"), B: T.Buffer((4, 64), "float32")):
    E = T.alloc_buffer((4, 64), "float32")
    S = T.alloc_buffer((4,), "float32")
    for i, j in T.grid(4, 64):
        with T.block("E"):
            vi, vj = T.remap("SS", i, j)
            E[vi, vj] = T.exp(A[vi, vj])
    for i, j in T.grid(4, 64):
        with T.block("S"):
            vi, vj = T.remap("SR", i, j)
            with T.init():
                S[vi] = 0.0
            S[vi] = S[vi] + E[vi, vj]
    for i, j in T.grid(4, 64):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = E[vi, vj] / S[vi]


def test_auto_inline_keeps_a_transcendental_stage_that_several_blocks_read() -> None:
    """A softmax's exponentials: inlined, the sum and the quotient would each compute them."""
    sch = Schedule(exp_read_twice)
    (kept,) = AutoInline().apply(sch, sch.get_block("E"))
    assert "E" in kept.index.blocks
    # one reader: inlined as before
    one_reader = Schedule(elementwise_exp_then_scale)
    (inlined,) = AutoInline().apply(one_reader, one_reader.get_block("E"))
    assert "E" not in inlined.index.blocks


@T.script
def elementwise_exp_then_scale(A: T.Buffer((4, 64), "float32"), B: T.Buffer((4, 64), "float32")):
    E = T.alloc_buffer((4, 64), "float32")
    for i, j in T.grid(4, 64):
        with T.block("E"):
            vi, vj = T.remap("SS", i, j)
            E[vi, vj] = T.exp(A[vi, vj])
    for i, j in T.grid(4, 64):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = E[vi, vj] * 2.0


@T.script
def dense_transposed_weight(
    A: T.Buffer((64, 128), "float32"), W: T.Buffer((96, 128), "float32"), C: T.Buffer((64, 96), "float32")
):
    for i, j, k in T.grid(64, 96, 128):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] = C[vi, vj] + A[vi, vk] * W[vj, vk]


def test_no_lanes_for_a_matrix_product_that_walks_its_reduction_contiguously() -> None:
    """Both operands of A @ W.T walk k contiguously, but each is reused across the other's
    rows: that is the multi-level tiling's register tile, not lane partials (a ViT's output
    projection ran 2.75 ms in lanes against 0.45 ms tiled)."""
    sch = Schedule(dense_transposed_weight)
    made = AddRFactor(TARGET).apply(sch, sch.get_block("C"))
    assert all(
        realize.block.annotations.get(TILED) != LANES_STRUCTURE for s in made for realize in s.index.blocks.values()
    )
    from metasched.space.default import default_candidate

    candidate = default_candidate(dense_transposed_weight, TARGET)
    assert candidate is not None and "rfactor" not in {inst.kind for inst in candidate.trace.instructions}
