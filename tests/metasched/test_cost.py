"""metasched.cost: features of scheduled programs, the XGBoost model and the random model.

The ranking test uses real timings: 200 candidates of a 256^3 float32 matmul (tile sizes,
vectorize, unroll, parallel) built with ``tir.build`` and timed on this project's 2-core test
host, stored in ``data/cost_matmul256.json``. The test re-creates each candidate with
``schedule_candidate`` (milliseconds each), extracts its features, trains on 60 and ranks the
other 140. Regenerate the timings with ``python tests/metasched/test_cost.py record``.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import tir
import tir.script as T
from metasched.cost import (
    FEATURE_NAMES,
    NUM_FEATURES,
    CostModel,
    RandomModel,
    XGBModel,
    extract_features,
    normalized_throughput,
)

DATA = Path(__file__).parent / "data" / "cost_matmul256.json"


def make_matmul(m: int, n: int, k: int) -> tir.PrimFunc:
    @T.script
    def matmul(A: T.Buffer((m, k), "float32"), B: T.Buffer((k, n), "float32"), C: T.Buffer((m, n), "float32")):
        for i, j, r in T.grid(m, n, k):
            with T.block("C"):
                vi, vj, vk = T.remap("SSR", i, j, r)
                with T.init():
                    C[vi, vj] = 0.0
                C[vi, vj] += A[vi, vk] * B[vk, vj]

    return matmul


def schedule_candidate(func: tir.PrimFunc, params: dict) -> tir.PrimFunc:
    """A point of the "SSRSRS" matmul space: i and j in four tiles, k in two, the register tile
    innermost, optionally vectorized (j), unrolled (i) and parallel (outer i)."""
    sch = tir.Schedule(func)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    i0, i1, i2, i3 = sch.split(i, params["i"])
    j0, j1, j2, j3 = sch.split(j, params["j"])
    k0, k1 = sch.split(k, params["k"])
    sch.reorder(i0, j0, i1, j1, k0, i2, j2, k1, i3, j3)
    if params["vec"] or params["unroll"]:
        init = sch.decompose_reduction(block, k0)
        if params["vec"]:
            sch.vectorize(j3)
            sch.vectorize(sch.get_loops(init)[-1])
        if params["unroll"]:
            sch.unroll(i3)
    if params["par"]:
        sch.parallel(i0)
    return sch.func


def column(name: str) -> int:
    return FEATURE_NAMES.index(name)


def row_of(features: np.ndarray, name: str, value: float) -> np.ndarray:
    """The row whose column ``name`` equals ``value`` (exactly one)."""
    rows = [row for row in features if row[column(name)] == value]
    assert len(rows) == 1, f"{len(rows)} rows with {name} == {value}"
    return rows[0]


def update_row(features: np.ndarray) -> np.ndarray:
    """The matmul's update (the one row with multiplications)."""
    rows = [row for row in features if row[column("arith.float_mul")] > 0]
    assert len(rows) == 1
    return rows[0]


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    def ranks(x: np.ndarray) -> np.ndarray:
        order = np.argsort(x, kind="stable")
        result = np.empty(len(x))
        result[order] = np.arange(len(x))
        return result

    return float(np.corrcoef(ranks(np.asarray(a)), ranks(np.asarray(b)))[0, 1])


# ---------------------------------------------------------------- features


def test_features_have_fixed_width_and_are_deterministic() -> None:
    naive = make_matmul(64, 64, 64)
    tiled = schedule_candidate(
        naive, {"i": [2, 2, 4, 4], "j": [1, 2, 2, 16], "k": [4, 16], "vec": True, "unroll": True, "par": True}
    )
    assert len(FEATURE_NAMES) == NUM_FEATURES == len(set(FEATURE_NAMES))
    for func in (naive, tiled):
        features = extract_features(func, "llvm")
        assert features.dtype == np.float32
        assert features.shape[1] == NUM_FEATURES
        assert np.all(np.isfinite(features))
        assert not features[:, column("misc.features_incomplete")].any()
        np.testing.assert_array_equal(features, extract_features(func, "llvm"))
    # The naive program has one store (init and update in one block: two rows); the
    # decomposed one has the same two stores in separate blocks.
    assert extract_features(naive, "llvm").shape[0] == 2
    assert extract_features(tiled, "llvm").shape[0] == 2
    # A re-made schedule (new variable objects) gives the same numbers.
    again = schedule_candidate(
        make_matmul(64, 64, 64),
        {"i": [2, 2, 4, 4], "j": [1, 2, 2, 16], "k": [4, 16], "vec": True, "unroll": True, "par": True},
    )
    np.testing.assert_array_equal(extract_features(tiled, "llvm"), extract_features(again, "llvm"))


def test_vectorized_parallel_schedule_differs_in_the_expected_columns() -> None:
    naive = make_matmul(64, 64, 64)
    sch = tir.Schedule(naive)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    j0, j1 = sch.split(j, [None, 16])
    sch.reorder(i, j0, k, j1)
    sch.decompose_reduction(block, i)
    sch.vectorize(j1)
    sch.parallel(i)
    update_naive = update_row(extract_features(naive, "llvm"))
    update_vec = update_row(extract_features(sch.func, "llvm"))
    for name, expected in (
        ("loop.vec_num", 1.0),
        ("loop.log_vec_extent", math.log2(17)),
        ("loop.vec_is_innermost", 1.0),
        ("loop.parallel_num", 1.0),
        ("loop.log_parallel_extent", math.log2(65)),
        ("loop.parallel_depth", 0.0),
    ):
        assert update_vec[column(name)] == pytest.approx(expected), name
    for name in ("loop.vec_num", "loop.log_vec_extent", "loop.parallel_num", "loop.log_parallel_extent"):
        assert update_naive[column(name)] == 0.0, name
    # The same arithmetic and the same trip count either way.
    for name in ("arith.float_addsub", "arith.float_mul", "arith.float_fma", "loop.log_trip_count"):
        assert update_vec[column(name)] == pytest.approx(update_naive[column(name)]), name
    assert update_naive[column("loop.log_trip_count")] == pytest.approx(math.log2(1 + 64**3))
    assert update_naive[column("arith.float_fma")] == pytest.approx(math.log2(1 + 64**3))


def test_strides_footprints_and_reuse_of_the_naive_matmul() -> None:
    # Innermost loop k: C does not move (stride 0), A moves by 1, B by a row (other).
    update = update_row(extract_features(make_matmul(64, 32, 128), "llvm"))
    # Sorted by bytes touched: C (read and written) first, then A and B (equal bytes).
    assert update[column("access0.is_write")] == 1.0 and update[column("access0.is_read")] == 1.0
    assert update[column("access0.stride_zero")] == 1.0
    strides = sorted(
        (update[column(f"access{s}.stride_one")], update[column(f"access{s}.stride_other")]) for s in (1, 2)
    )
    assert strides == [(0.0, 1.0), (1.0, 0.0)]
    # Unique bytes: A is 64 x 128, B 128 x 32 floats, C 64 x 32.
    unique = sorted(2 ** update[column(f"access{s}.log_unique_bytes")] - 1 for s in range(3))
    assert unique == pytest.approx(sorted([64 * 128 * 4, 128 * 32 * 4, 64 * 32 * 4]))
    # C is reused across the k loop (128 iterations, one element apart).
    assert update[column("access0.log_reuse_count")] == pytest.approx(math.log2(129))
    # The init row runs once per element of C: the k loop does not count.
    init = row_of(extract_features(make_matmul(64, 32, 128), "llvm"), "misc.is_init", 1.0)
    assert init[column("loop.log_trip_count")] == pytest.approx(math.log2(1 + 64 * 32))


def test_packed_layout_footprint_and_intrinsic_use() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    try:
        import matmul_schedule
    finally:
        sys.path.pop(0)
    func = matmul_schedule.schedule_matmul(matmul_schedule.make_matmul(1024)).func
    features = extract_features(func, "llvm")
    assert features.shape == (3, NUM_FEATURES)
    update = update_row(features)
    # B_global[vj // 16, vk, vj % 16] (non-affine: interval arithmetic): the whole packed B.
    packed = [s for s in range(3) if update[column(f"access{s}.is_allocated")] == 1.0]
    assert len(packed) == 1
    assert update[column(f"access{packed[0]}.log_unique_bytes")] == pytest.approx(math.log2(1 + 1024 * 1024 * 4))
    assert update[column(f"access{packed[0]}.stride_one")] == 1.0
    assert update[column("loop.log_unroll_extent")] == pytest.approx(math.log2(5))

    @T.script
    def fma_vec(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32"), C: T.Buffer((64,), "float32")):
        for i in range(8):
            with T.block("C"):
                vi = T.spatial_axis(8, i)
                C[T.ramp(vi * 8, 1, 8)] = T.call_llvm_pure_intrin(
                    "float32x8",
                    "llvm.fma.v8f32",
                    A[T.ramp(vi * 8, 1, 8)],
                    B[T.ramp(vi * 8, 1, 8)],
                    C[T.ramp(vi * 8, 1, 8)],
                )

    (row,) = extract_features(fma_vec, "llvm")
    assert row[column("misc.uses_intrinsic")] == 1.0
    assert row[column("arith.float_fma")] == pytest.approx(math.log2(1 + 64))
    assert row[column("loop.log_expr_lanes")] == pytest.approx(math.log2(8))
    assert row[column("access0.log_unique_bytes")] == pytest.approx(math.log2(1 + 256))


def test_match_buffer_views_and_intrinsic_statements() -> None:
    @T.script
    def blocked(A: T.Buffer((64, 64), "float32"), C: T.Buffer((64, 64), "float32")):
        for i_0, j_0 in T.grid(16, 16):
            with T.block("C_o"):
                vi, vj = T.remap("SS", i_0, j_0)
                A_1 = T.match_buffer(A[vi * 4 : vi * 4 + 4, vj * 4 : vj * 4 + 4], (4, 4), "float32")
                C_1 = T.match_buffer(C[vi * 4 : vi * 4 + 4, vj * 4 : vj * 4 + 4], (4, 4), "float32")
                for i, j in T.grid(4, 4):
                    C_1[i, j] = A_1[i, j] * 2.0

    rows = extract_features(blocked, "llvm")
    assert rows.shape[0] == 1
    # Accesses through the views are accesses of A and C: the whole 64 x 64 of each, stride 1.
    for slot in (0, 1):
        assert rows[0][column(f"access{slot}.log_unique_bytes")] == pytest.approx(math.log2(1 + 64 * 64 * 4))
        assert rows[0][column(f"access{slot}.is_allocated")] == 0.0
        assert rows[0][column(f"access{slot}.stride_one")] == 1.0

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    try:
        import matmul_tensorcore
    finally:
        sys.path.pop(0)
    # WMMA calls (statements writing through pointers to fragment regions) are rows that use
    # an intrinsic; the accumulator's footprint is the whole 128 x 128 float32 fragment buffer.
    rows = extract_features(matmul_tensorcore.KERNEL, "cuda -arch=sm_80")
    intrinsic = rows[rows[:, column("misc.uses_intrinsic")] == 1.0]
    assert len(intrinsic) >= 4
    assert np.isclose(intrinsic[:, column("access0.log_unique_bytes")], math.log2(1 + 128 * 128 * 4)).any()
    assert np.all(rows[:, column("loop.thread_num")] > 0)


def test_extraction_is_fast() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    try:
        import matmul_schedule
    finally:
        sys.path.pop(0)
    func = matmul_schedule.schedule_matmul(matmul_schedule.make_matmul(1024)).func
    best = math.inf
    for _ in range(10):
        start = time.perf_counter()
        extract_features(func, "llvm")
        best = min(best, time.perf_counter() - start)
    assert best < 0.005, f"feature extraction took {best * 1e3:.2f} ms (budget 5 ms)"


# ---------------------------------------------------------------- every kind of index


@T.script
def clamped(A: T.Buffer((16,), "float32"), B: T.Buffer((20,), "float32")):
    for i in range(20):
        with T.block("B"):
            vi = T.spatial_axis(20, i)
            B[vi] = A[T.min(T.max(vi - 2, 0), 15)]


@T.script
def selected(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("B"):
            vi = T.spatial_axis(16, i)
            B[vi] = A[T.select(vi < 8, vi * 2, vi - 8)]


@T.script
def if_then_else_index(A: T.Buffer((8,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("B"):
            vi = T.spatial_axis(16, i)
            B[vi] = A[T.if_then_else(vi < 8, 7 - vi, vi % 8)]


@T.script
def packed(A: T.Buffer((4, 4), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("B"):
            vi = T.spatial_axis(16, i)
            B[vi] = A[vi // 4, vi % 4]


@T.script
def cast_index(A: T.Buffer((64,), "float32"), B: T.Buffer((32,), "float32")):
    for i in range(32):
        with T.block("B"):
            vi = T.spatial_axis(32, i)
            B[vi] = A[T.cast(T.cast(vi, "int64") * T.int64(2), "int32")]


@T.script
def gather(table: T.Buffer((64, 32), "float32"), ids: T.Buffer((8,), "int64"), out: T.Buffer((8, 32), "float32")):
    # An embedding lookup as torch exports it: negative ids count from the end.
    for i, j in T.grid(8, 32):
        with T.block("out"):
            vi, vj = T.remap("SS", i, j)
            out[vi, vj] = table[T.cast(T.select(ids[vi] < T.int64(0), ids[vi] + T.int64(64), ids[vi]), "int32"), vj]


def read_slot(row: np.ndarray, unique_bytes: float) -> int:
    """The slot of the read-only access touching ``unique_bytes`` bytes (exactly one)."""
    slots = [
        slot
        for slot in range(5)
        if row[column(f"access{slot}.is_read")] == 1.0
        and row[column(f"access{slot}.is_write")] == 0.0
        and row[column(f"access{slot}.log_unique_bytes")] == pytest.approx(math.log2(1 + unique_bytes))
    ]
    assert len(slots) == 1, f"{len(slots)} read accesses of {unique_bytes} unique bytes"
    return slots[0]


@pytest.mark.parametrize(
    ("func", "unique_bytes", "stride"),
    [
        # The clamp's interval is the whole of A; at the origin the clamp holds it still.
        pytest.param(clamped, 16 * 4, 0, id="min_max"),
        # Bounds of a select: the union of both branches (cut to the buffer); its stride, the
        # value the select takes at the point (the true branch).
        pytest.param(selected, 16 * 4, 2, id="select"),
        pytest.param(if_then_else_index, 8 * 4, -1, id="if_then_else"),
        pytest.param(packed, 16 * 4, 1, id="floordiv_floormod"),
        pytest.param(cast_index, 63 * 4, 2, id="cast"),
        # A data-dependent row: the whole table may be read; along the inner loop, stride 1.
        pytest.param(gather, 64 * 32 * 4, 1, id="buffer_load"),
    ],
)
def test_indices_of_every_expression_kind(func: tir.PrimFunc, unique_bytes: int, stride: int) -> None:
    (row,) = extract_features(func, "llvm")
    assert np.all(np.isfinite(row)) and row[column("misc.features_incomplete")] == 0.0
    slot = read_slot(row, unique_bytes)
    assert row[column(f"access{slot}.log_stride")] == pytest.approx(math.log2(1 + abs(stride)))
    kind = "stride_zero" if stride == 0 else "stride_one" if abs(stride) == 1 else "stride_other"
    assert row[column(f"access{slot}.{kind}")] == 1.0
    # Every operation of the index counts (the select, its comparison, the cast...).
    assert row[column("arith.index_op")] > 0


def test_a_gather_index_is_an_access_of_its_own() -> None:
    (row,) = extract_features(gather, "llvm")
    assert row[column("misc.num_accesses")] == 3.0
    # ids[vi]: 8 int64 ids, read three times per element of out.
    ids = read_slot(row, 8 * 8)
    assert row[column(f"access{ids}.log_bytes")] == pytest.approx(math.log2(1 + 3 * 8 * 32 * 8))
    assert row[column(f"access{ids}.log_reuse_count")] == pytest.approx(math.log2(1 + 32))


@T.script
def cancelling(A: T.Buffer((8,), "float32"), B: T.Buffer((64,), "float32")):
    for i, j in T.grid(8, 8):
        with T.block("B"):
            vi = T.spatial_axis(64, i * 8 + j)
            vo = T.spatial_axis(8, i)
            B[vi] = A[vi - vo * 8]


def test_an_affine_index_whose_terms_cancel_is_exact() -> None:
    # A[vi - vo * 8] is A[j]: 8 floats, not moving with i, which carries its reuse.
    (row,) = extract_features(cancelling, "llvm")
    slot = read_slot(row, 8 * 4)
    assert row[column(f"access{slot}.stride_one")] == 1.0
    assert row[column(f"access{slot}.log_reuse_count")] == pytest.approx(math.log2(1 + 8))


class Broken(RuntimeError):
    pass


def _raise(*args: object, **kwargs: object) -> None:
    raise Broken("an analysis that fails")


class _FailingBounds:
    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    bound = _raise


@pytest.mark.parametrize(
    "target",
    [
        "BoundEvaluator",  # tir.arith's bounds (every footprint needs them)
        "_analyse_access",  # one access at a time
        "_ExprStats.visit",  # one statement at a time
        "_Walker.block",  # one block at a time (no rows left: one zero row)
    ],
)
def test_a_failing_analysis_flags_the_features_instead_of_raising(monkeypatch: pytest.MonkeyPatch, target: str) -> None:
    from metasched.cost import features as module

    owner, _, name = target.rpartition(".")
    replacement = _FailingBounds if target == "BoundEvaluator" else _raise
    monkeypatch.setattr(getattr(module, owner) if owner else module, name, replacement)
    for func in (gather, make_matmul(16, 16, 16)):
        rows = extract_features(func, "llvm")
        assert rows.shape[1] == NUM_FEATURES and rows.dtype == np.float32
        assert np.all(np.isfinite(rows))
        assert rows[:, column("misc.features_incomplete")].all()
    if target == "BoundEvaluator":
        # Each access is degraded to its whole buffer: the table's and the ids'.
        (row,) = extract_features(gather, "llvm")
        read_slot(row, 8 * 8)
        read_slot(row, 64 * 32 * 4)


def test_a_failing_block_keeps_the_rows_of_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    from metasched.cost import features as module

    sch = tir.Schedule(make_matmul(16, 16, 16))
    sch.decompose_reduction(sch.get_block("C"), sch.get_loops(sch.get_block("C"))[2])
    assert extract_features(sch.func, "llvm").shape[0] == 2
    describe_block = module._Walker.block

    def failing_update(walker: object, block: tir.ir.Block, iter_values: tuple[object, ...]) -> None:
        if block.name == "C":
            raise Broken("the update block")
        describe_block(walker, block, iter_values)  # type: ignore[arg-type]

    monkeypatch.setattr(module._Walker, "block", failing_update)
    rows = extract_features(sch.func, "llvm")
    # The init block's row is kept; every row says the program was not fully described.
    assert rows.shape == (1, NUM_FEATURES)
    assert rows[0, column("arith.float_mul")] == 0.0 and rows[0, column("loop.num_loops")] == 2.0
    assert rows[:, column("misc.features_incomplete")].all()


# ---------------------------------------------------------------- models


def test_normalized_throughput() -> None:
    np.testing.assert_allclose(normalized_throughput([2.0, None, 1.0, 4.0, 0.0]), [0.5, 0.0, 1.0, 0.25, 0.0])
    np.testing.assert_array_equal(normalized_throughput([None, None]), [0.0, 0.0])


def test_untrained_models_give_deterministic_scores() -> None:
    features = [np.zeros((2, NUM_FEATURES), np.float32)] * 5
    for make in (lambda: XGBModel(seed=3), lambda: RandomModel(seed=3)):
        first, second = make(), make()
        assert isinstance(first, CostModel)
        np.testing.assert_array_equal(first.predict("t", features), second.predict("t", features))
        assert first.predict("t", features).shape == (5,)
    assert not np.array_equal(XGBModel(seed=3).predict("t", features), XGBModel(seed=4).predict("t", features))
    # Only failures: nothing to learn, still random scores.
    model = XGBModel(seed=0)
    model.update("t", features[:3], [None, None, None])
    assert not model.trained


def _dataset() -> tuple[list[np.ndarray], list[float | None]]:
    data = json.loads(DATA.read_text())
    func = make_matmul(*data["shape"])
    features = [extract_features(schedule_candidate(func, r["params"]), "llvm") for r in data["records"]]
    return features, [r["seconds"] for r in data["records"]]


@pytest.fixture(scope="module")
def dataset() -> tuple[list[np.ndarray], list[float | None]]:
    return _dataset()


def test_xgb_ranks_held_out_candidates_better_than_random(dataset) -> None:  # noqa: ANN001
    features, seconds = dataset
    throughput = normalized_throughput(seconds)
    spearmans, random_spearmans, top8, random_top8 = [], [], [], []
    for split in range(3):
        order = np.random.default_rng(split).permutation(len(features))
        train, test = order[:60], order[60:]
        model = XGBModel(seed=split)
        # Records arrive in batches, as in tuning.
        for batch in np.array_split(train, 4):
            model.update("matmul", [features[i] for i in batch], [seconds[i] for i in batch])
        assert model.trained and model.num_samples == 60
        truth = throughput[test]
        for scorer, corr, best in ((model, spearmans, top8), (RandomModel(split), random_spearmans, random_top8)):
            scores = scorer.predict("matmul", [features[i] for i in test])
            corr.append(spearman(scores, truth))
            best.append(truth[np.argsort(-scores)[:8]].max() / truth.max())
    # Measured: Spearman about 0.6, the best of the top 8 within a few % of the held-out best;
    # random: Spearman about 0, top 8 about 0.75.
    assert np.mean(spearmans) > 0.4, spearmans
    assert np.mean(spearmans) > np.mean(random_spearmans) + 0.3
    assert np.mean(top8) > 0.9, top8
    assert np.mean(top8) > np.mean(random_top8)


def test_packsum_and_aggregate_modes_both_learn(dataset) -> None:  # noqa: ANN001
    features, seconds = dataset
    throughput = normalized_throughput(seconds)
    for mode in ("packsum", "aggregate"):
        model = XGBModel(mode=mode)
        model.update("matmul", features[:60], seconds[:60])
        assert spearman(model.predict("matmul", features[60:]), throughput[60:]) > 0.3, mode
    with pytest.raises(ValueError, match="mode"):
        XGBModel(mode="mean")


def test_save_and_load_round_trip(dataset, tmp_path: Path) -> None:  # noqa: ANN001
    features, seconds = dataset
    model = XGBModel(seed=5, num_rounds=20)
    model.update("matmul", features[:40], seconds[:40])
    path = tmp_path / "model.npz"
    model.save(path)
    loaded = XGBModel()
    loaded.load(path)
    assert loaded.num_rounds == 20 and loaded.seed == 5 and loaded.num_samples == 40
    np.testing.assert_allclose(loaded.predict("matmul", features[40:]), model.predict("matmul", features[40:]))
    # The loaded model keeps its training data: an update retrains on old and new records.
    loaded.update("matmul", features[40:50], seconds[40:50])
    assert loaded.num_samples == 50

    # A model saved with another number of features is refused, before it changes anything.
    narrow = XGBModel(num_rounds=2)
    narrow.update(
        "t", [np.ones((1, NUM_FEATURES - 1), np.float32), np.zeros((1, NUM_FEATURES - 1), np.float32)], [1.0, 2.0]
    )
    narrow.save(tmp_path / "narrow.npz")
    with pytest.raises(ValueError, match=f"holds {NUM_FEATURES - 1} features per row; this version extracts"):
        loaded.load(tmp_path / "narrow.npz")
    assert loaded.num_samples == 50

    random_model = RandomModel(seed=1)
    random_model.predict("t", features[:3])
    random_model.save(tmp_path / "random.json")
    other = RandomModel()
    other.load(tmp_path / "random.json")
    np.testing.assert_array_equal(other.predict("t", features[:4]), random_model.predict("t", features[:4]))


# ---------------------------------------------------------------- regenerating the timings


def record(count: int = 200, seed: int = 1) -> None:
    """Build and time ``count`` random candidates; write ``data/cost_matmul256.json``."""
    rng = np.random.default_rng(seed)
    shape = (256, 256, 256)
    func = make_matmul(*shape)
    m, n, k = shape
    a = rng.random((m, k), dtype=np.float32)
    b = rng.random((k, n), dtype=np.float32)
    c = np.zeros((m, n), np.float32)

    def tile(extent: int, parts: int, limit: int) -> list[int]:
        while True:
            factors, rest = [], extent
            for _ in range(parts - 1):
                factor = int(rng.choice([d for d in range(1, rest + 1) if rest % d == 0]))
                factors.append(factor)
                rest //= factor
            factors = [*reversed([*factors, rest])]  # the remainder outermost
            if factors[-1] <= limit:
                return factors

    records = []
    for _ in range(count):
        params = {
            "i": tile(m, 4, 16),
            "j": tile(n, 4, 64),
            "k": tile(k, 2, k),
            "vec": bool(rng.random() < 0.6),
            "unroll": bool(rng.random() < 0.5),
            "par": bool(rng.random() < 0.6),
        }
        module = tir.build(schedule_candidate(func, params), "llvm")
        module(a, b, c)
        seconds = module.time(a, b, c, repeat=5) if np.allclose(c, a @ b, rtol=1e-3, atol=1e-3) else None
        records.append(json.dumps({"params": params, "seconds": seconds}))
        print(records[-1], flush=True)
    note = (
        "float32 matmul candidates (tests/metasched/test_cost.py: schedule_candidate), built with "
        'tir.build(..., \\"llvm\\") and timed with .time(repeat=5); regenerate with '
        "python tests/metasched/test_cost.py record"
    )
    DATA.write_text(f'{{"shape": {list(shape)}, "note": "{note}", "records": [\n' + ",\n".join(records) + "\n]}\n")


if __name__ == "__main__":
    if sys.argv[1:] == ["record"]:
        record()
