"""The CUDA design space: Tensor Core sketches for fp16 GEMM and conv2d NHWC (through ReIndex).

Sampled candidates (sketch + fresh decisions + the CUDA postprocessors) verify -- thread
bindings, warp-level intrinsics on whole warps, shared memory as lowered -- and a few compile
with nvcc to SASS with HMMA instructions. No GPU is needed; measuring is refused clearly.
"""

from __future__ import annotations

import collections

import pytest

import tir
import tir.script as T
from metasched.space.generator import SpaceGenerator
from metasched.space.postproc.rewrite_cooperative_fetch import COOPERATIVE_FETCH
from metasched.space.postproc.rewrite_tensor_core import TENSOR_CORE
from metasched.space.rules import default_rules
from metasched.space.rules.multi_level_tiling_tensor_core import MultiLevelTilingTensorCore, default_groups
from tir.codegen.cuda_report import kernel_reports
from tir.schedule import Schedule
from tir.target import Target

SM80 = Target.parse("cuda -arch=sm_80")
SM90 = Target.parse("cuda -arch=sm_90")
SAMPLES = 20  # per workload: about 1 s each (most of it lowering, to size shared memory)


def make_gemm(n: int = 4096, acc: str = "float32") -> tir.PrimFunc:
    @T.script
    def gemm(A: T.Buffer((n, n), "float16"), B: T.Buffer((n, n), "float16"), C: T.Buffer((n, n), acc)):
        for i, j, k in T.grid(n, n, n):
            with T.block("C"):
                vi, vj, vk = T.remap("SSR", i, j, k)
                with T.init():
                    C[vi, vj] = T.cast(0, acc)
                C[vi, vj] = C[vi, vj] + T.cast(A[vi, vk], acc) * T.cast(B[vk, vj], acc)

    return gemm


def make_conv2d_nhwc(acc: str = "float32") -> tir.PrimFunc:
    """N=16, 56x56 output, 64 -> 64 channels, 3x3, stride 1; the input is given padded (58x58)."""

    @T.script
    def conv2d(
        X: T.Buffer((16, 58, 58, 64), "float16"),
        W: T.Buffer((3, 3, 64, 64), "float16"),
        Y: T.Buffer((16, 56, 56, 64), acc),
    ):
        for n, h, w, co, rh, rw, ci in T.grid(16, 56, 56, 64, 3, 3, 64):
            with T.block("Y"):
                vn, vh, vw, vco, vrh, vrw, vci = T.remap("SSSSRRR", n, h, w, co, rh, rw, ci)
                with T.init():
                    Y[vn, vh, vw, vco] = T.cast(0, acc)
                Y[vn, vh, vw, vco] = Y[vn, vh, vw, vco] + T.cast(X[vn, vh + vrh, vw + vrw, vci], acc) * T.cast(
                    W[vrh, vrw, vci, vco], acc
                )

    return conv2d


def _sample(func: tir.PrimFunc, target: str, count: int) -> tuple[list[Schedule], collections.Counter[str]]:
    """``count`` candidates, round-robin over the sketches, each with fresh decisions."""
    space = SpaceGenerator()
    sketches = space.generate(func, target)
    postprocs = space.postprocs_for(target)
    good: list[Schedule] = []
    rejected: collections.Counter[str] = collections.Counter()
    for seed in range(count):
        sch = Schedule(func, seed=seed)
        try:
            sketch = sketches[seed % len(sketches)]
            sketch.apply_to(sch, dict.fromkeys(sketch.decisions))  # every decision sampled anew
            for postproc in postprocs:
                postproc.apply(sch)
        except Exception as error:  # noqa: BLE001 - counted with its reason
            rejected[str(error).splitlines()[0][:160]] += 1
        else:
            good.append(sch)
    return good, rejected


def _calls(func: tir.PrimFunc) -> set[str]:
    text = func.script()
    return {name for name in ("wmma_mma_sync", "ptx_mma_sync", "wmma_load_matrix_sync", "ptx_ldmatrix") if name in text}


def test_groups_by_architecture() -> None:
    assert [g.name for g in default_groups(SM80)] == ["wmma_f32", "wmma_f16", "mma_f32"]
    assert [g.name for g in default_groups(Target.parse("cuda -arch=sm_70"))] == ["wmma_f32", "wmma_f16"]
    assert default_groups(Target.parse("llvm")) == []
    assert [type(r).__name__ for r in default_rules(SM90)] == ["MultiLevelTilingTensorCore"]


def test_sketches_cover_wmma_and_mma_at_each_pipeline_depth() -> None:
    func = make_gemm(256)
    schedules = SpaceGenerator().generate_schedules(func, SM80)
    assert len(schedules) == 6  # (WMMA, mma.sync) x (3 stages, 2 stages, not pipelined)
    texts = [s.func.script() for s in schedules]
    assert sum("wmma_load_matrix_sync" in t for t in texts) == 3
    assert sum("ptx_ldmatrix" in t for t in texts) == 3
    assert all(TENSOR_CORE in t for t in texts)  # the update is tensorized by the postprocessor
    assert sum("software_pipeline_stage" in t for t in texts) == 4
    assert sum('"software_pipeline_stage": [0, 0, 2]' in t for t in texts) == 2
    for text in texts:
        assert 'thread="blockIdx.y"' in text and 'thread="threadIdx.y"' in text
        assert COOPERATIVE_FETCH in text and 'scope="shared", strides=' in text  # storage_align


def test_float16_accumulation_uses_the_f16_wmma_intrinsic() -> None:
    rule = MultiLevelTilingTensorCore(SM80)
    sch = Schedule(make_gemm(256, acc="float16"))
    names = [group.name for group, _ in rule.candidates(sch, sch.get_block("C"))]
    assert names == ["wmma_f16"]
    good, rejected = _sample(make_gemm(256, acc="float16"), SM80, 4)
    assert len(good) == 4, rejected
    assert "wmma_fill_fragment" in good[0].func.script()
    good, rejected = _sample(make_conv2d_nhwc(acc="float16"), SM80, 2)
    assert len(good) == 2, rejected


def test_blocks_without_an_intrinsic_are_left_alone() -> None:
    func = make_gemm(256, acc="float32").replace(name="g")
    float32 = tir.parse(func.script().replace('"float16"', '"float32"'))
    rule = MultiLevelTilingTensorCore(SM80)
    sch = Schedule(float32)
    assert rule.candidates(sch, sch.get_block("C")) == []
    assert rule.apply(sch, sch.get_block("C")) == [sch]


@pytest.mark.parametrize(
    ("workload", "target"),
    [("gemm4096", SM80), ("conv2d_nhwc", SM90)],
)
def test_sampled_candidates_verify(workload: str, target: str) -> None:
    func = make_gemm(4096) if workload == "gemm4096" else make_conv2d_nhwc()
    good, rejected = _sample(func, target, SAMPLES)
    assert len(good) >= 0.95 * SAMPLES, rejected
    for sch in good:
        assert _calls(sch.func) & {"wmma_mma_sync", "ptx_mma_sync"}
        # every candidate replays from its own trace
        again = Schedule(func)
        sch.trace.apply_to(again)
        assert tir.structural_equal(again.func, sch.func)
    assert any("wmma_mma_sync" in sch.func.script() for sch in good)
    assert any("ptx_mma_sync" in sch.func.script() for sch in good)
    assert len({sch.trace.to_json() for sch in good}) > len(good) // 2  # not the same few programs


def test_each_decision_mutated_alone_still_replays_and_verifies() -> None:
    """The search mutates one decision of a candidate at a time: every such change leaves a
    program that replays and verifies (tile sizes are chosen so that any one choice fits)."""
    func = make_gemm(512)
    space = SpaceGenerator()
    sketch = space.generate(func, SM80)[0]
    postprocs = space.postprocs_for(SM80)
    base = Schedule(func, seed=3)
    sketch.apply_to(base, dict.fromkeys(sketch.decisions))
    decisions = base.trace.decisions
    for position in list(decisions)[:8]:
        for seed in range(2):
            sch = Schedule(func, seed=100 + seed)
            sketch.apply_to(sch, {**decisions, position: None})
            for postproc in postprocs:
                postproc.apply(sch)


def make_small_conv2d(out: int = 8, batch: int = 2) -> tir.PrimFunc:
    """A conv2d NHWC small enough for the interpreter (16 -> 32 channels, 3x3)."""
    size = out + 2

    @T.script
    def conv2d_small(
        X: T.Buffer((batch, size, size, 16), "float16"),
        W: T.Buffer((3, 3, 16, 32), "float16"),
        Y: T.Buffer((batch, out, out, 32), "float32"),
    ):
        for n, h, w, co, rh, rw, ci in T.grid(batch, out, out, 32, 3, 3, 16):
            with T.block("Y"):
                vn, vh, vw, vco, vrh, vrw, vci = T.remap("SSSSRRR", n, h, w, co, rh, rw, ci)
                with T.init():
                    Y[vn, vh, vw, vco] = T.float32(0)
                Y[vn, vh, vw, vco] = Y[vn, vh, vw, vco] + T.cast(X[vn, vh + vrh, vw + vrw, vci], "float32") * T.cast(
                    W[vrh, vrw, vci, vco], "float32"
                )

    return conv2d_small


@pytest.mark.parametrize("workload", ["gemm64", "conv2d_small"])
def test_sampled_candidates_compute_the_same_in_the_interpreter(workload: str) -> None:
    import numpy as np

    func = make_gemm(64) if workload == "gemm64" else make_small_conv2d()
    good, rejected = _sample(func, SM80, 4)
    assert len(good) == 4, rejected
    rng = np.random.default_rng(0)
    args = []
    for buffer in func.buffer_params:
        dtype = np.float16 if str(buffer.dtype) == "float16" else np.float32
        args.append(rng.uniform(-1, 1, buffer.const_shape()).astype(dtype))
    args[-1][:] = 0
    expected = [a.copy() for a in args]
    tir.interpret(func, *expected)
    for sch in good:
        got = [a.copy() for a in args]
        tir.interpret(sch.func, *got)
        np.testing.assert_allclose(got[-1], expected[-1], atol=1e-3)


def test_extents_off_the_intrinsic_grid_are_refused_with_a_reason() -> None:
    """A 7x7 output (m = 49) would need padding, which the CUDA rule does not do yet: the
    candidate is rejected, and the reason says so."""
    good, rejected = _sample(make_small_conv2d(out=7, batch=1), SM80, 1)
    assert good == []
    assert "no CUDA rule scheduled it" in next(iter(rejected))


def test_sampled_copies_into_shared_memory_are_conflict_free() -> None:
    """The padded operand tiles' 16-byte copies walk 8 rows per column (cooperative_fetch_rows)
    and the conv's staged accumulator rows are padded: the static count finds no conflict
    left in them but the accumulator stores' unavoidable 2 ways."""
    from tir.analysis.bank_conflicts import bank_conflicts
    from tir.transform import lower

    for func in (make_gemm(512), make_conv2d_nhwc()):
        good, rejected = _sample(func, SM80, 6)
        assert len(good) == 6, rejected
        for sch in good:
            kernels = [f for f in lower(sch.func, SM80).functions.values() if f.attrs.get("kernel")]
            for access in (a for f in kernels for a in bank_conflicts(f)):
                if access.kind == "mma store":
                    assert access.wavefronts <= 2 * access.phases, access
                elif access.width == 16 or access.kind == "ldmatrix":
                    assert access.conflicts == 0, (access, sch.trace.as_python())


@pytest.mark.slow
@pytest.mark.parametrize(
    ("workload", "target"),
    [("gemm4096", SM80), ("gemm4096", SM90), ("conv2d_nhwc", SM80)],
)
def test_compiled_candidates_have_hmma(workload: str, target: str, nvcc: str, sass_tool: str) -> None:
    func = make_gemm(4096) if workload == "gemm4096" else make_conv2d_nhwc()
    good, rejected = _sample(func, target, 2)
    assert len(good) == 2, rejected
    for sch in good:
        module = tir.build(sch.func, target)
        sass = module.get_source("sass")  # type: ignore[attr-defined]
        assert "HMMA" in sass
        if "software_pipeline_stage" in sch.func.script():
            assert "LDGSTS" in sass  # the pipelined copies are cp.async
        assert all(report.spill_bytes == 0 for report in kernel_reports(module))


@pytest.mark.slow
@pytest.mark.parametrize("workload", ["gemm4096", "conv2d_nhwc"])
def test_default_schedule_compiles_without_spills_or_fragment_load_conflicts(
    workload: str, nvcc: str, sass_tool: str
) -> None:
    """The tiles the default picks (zero trials) on sm_90: HMMA in the SASS, no register spills,
    and the fragment loads from shared memory (ldmatrix) free of bank conflicts."""
    from metasched.space.default import default_schedule
    from tir.analysis.bank_conflicts import bank_conflicts
    from tir.transform import lower

    func = make_gemm(4096) if workload == "gemm4096" else make_conv2d_nhwc()
    scheduled = default_schedule(func, SM90)
    module = tir.build(scheduled, SM90)
    assert "HMMA" in module.get_source("sass")  # type: ignore[attr-defined]
    assert [report.spill_bytes for report in kernel_reports(module)] == [0]
    kernels = [f for f in lower(scheduled, SM90).functions.values() if f.attrs.get("kernel")]
    loads = [a for f in kernels for a in bank_conflicts(f) if a.kind == "ldmatrix"]
    assert all(a.conflicts == 0 for a in loads), loads


def test_tune_without_a_gpu_fails_at_once_with_one_line() -> None:
    import metasched
    from tir.runtime.cuda import CUDADeviceError, device_missing_reason

    if device_missing_reason() is None:
        pytest.skip("this machine has a CUDA device")
    with pytest.raises(CUDADeviceError) as caught:
        metasched.tune(make_gemm(256), target=SM80, trials=2, log=lambda line: None)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("cannot measure target 'cuda -arch=sm_80' on this machine:")


@pytest.mark.cuda
@pytest.mark.parametrize("workload", ["gemm512", "conv2d_nhwc"])
def test_sampled_candidates_compute_the_right_answer_on_the_gpu(workload: str) -> None:
    """Every sketch (WMMA, mma.sync + ldmatrix, each with a 3- or 2-stage cp.async pipeline or none),
    with decisions drawn anew, run on the GPU on random inputs with a NaN-poisoned output,
    matches numpy in float32 (float16 products are exact there: only the summation order differs)."""
    import numpy as np

    from tir.runtime.cuda_driver import _driver

    target = f"cuda -arch={_driver().arch()}"
    func = make_gemm(512) if workload == "gemm512" else make_conv2d_nhwc()
    good, rejected = _sample(func, target, 12)  # two per sketch
    assert len(good) == 12, rejected
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, [e.value for e in func.params[0].shape]).astype(np.float16)
    w = rng.uniform(-1, 1, [e.value for e in func.params[1].shape]).astype(np.float16)
    if workload == "gemm512":
        want = x.astype(np.float32) @ w.astype(np.float32)
    else:
        want = sum(
            x[:, rh : rh + 56, rw : rw + 56, :].astype(np.float32) @ w[rh, rw].astype(np.float32)
            for rh in range(3)
            for rw in range(3)
        )
    for sch in good:
        out = np.full(want.shape, np.nan, np.float32)
        tir.build(sch.func, target)(x, w, out)
        error = np.linalg.norm(np.nan_to_num(out) - want) / np.linalg.norm(want)
        assert not np.isnan(out).any() and error < 1e-4, (error, sch.trace.as_python())
