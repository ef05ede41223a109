"""Auto-tensorization: candidates (characteristic vectors), their application, the sketch rule
and the tuner with intrinsics.

Every applied candidate is tensorized, verifies, and computes exactly what the unscheduled
program computes (x86-64 built with LLVM here; AArch64 ``sdot`` programs run under qemu, skipped
when the tools are missing). The x86 int8 intrinsics are found by listing: whatever is
registered for this host's features.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from examples_testing import load_example

import metasched
import tir
import tir.script as T
from metasched.space import SpaceGenerator
from metasched.space.tensorize import (
    VALUE_RANGES_ATTR,
    TensorizeCandidate,
    apply_candidate,
    match_intrin,
    operand_position,
    tensorize_candidates,
    to_fused_form,
)
from tir.analysis import verify
from tir.intrin import TensorIntrin
from tir.runtime.aarch64 import toolchain_missing_reason
from tir.schedule import Schedule
from tir.target import Target

HOST = Target.host().text
ARM = "llvm -mtriple=aarch64-linux-gnu -mattr=+neon,+dotprod"
_QEMU_MISSING = toolchain_missing_reason()


def _int8_intrinsics(target: str) -> list[str]:
    """The intrinsics of ``target``'s instruction set that accumulate int8 products in int32."""
    parsed = Target.parse(target)
    found = []
    for name in TensorIntrin.list(target=parsed):
        intrin = TensorIntrin.get(name)
        params = intrin.desc.buffer_params
        if intrin.isa == parsed.isa and str(params[-1].dtype) == "int32" and str(params[0].dtype) in ("int8", "uint8"):
            found.append(name)
    return found


X86_INT8 = _int8_intrinsics(HOST) if Target.host().isa == "x86_64" else []
needs_x86_int8 = pytest.mark.skipif(not X86_INT8, reason="this host has no x86 int8 dot-product intrinsic (AVX2)")
needs_qemu = pytest.mark.skipif(_QEMU_MISSING is not None, reason=f"AArch64 tools missing: {_QEMU_MISSING}")


def _declare(func: tir.PrimFunc, **ranges: tuple[int, int]) -> tir.PrimFunc:
    return func.replace(attrs={**func.attrs, VALUE_RANGES_ATTR: {k: list(v) for k, v in ranges.items()}})


# ---------------------------------------------------------------- workloads (small, int8)


def matmul(m: int, n: int, k: int, a: str = "uint8", b: str = "int8") -> tir.PrimFunc:
    @T.script
    def func(A: T.Buffer((m, k), a), B: T.Buffer((k, n), b), C: T.Buffer((m, n), "int32")):
        for i, j, r in T.grid(m, n, k):
            with T.block("C"):
                vi, vj, vk = T.remap("SSR", i, j, r)
                with T.init():
                    C[vi, vj] = 0
                C[vi, vj] = C[vi, vj] + T.cast(A[vi, vk], "int32") * T.cast(B[vk, vj], "int32")

    return func


def batch_matmul(a: str = "uint8") -> tir.PrimFunc:
    @T.script
    def func(A: T.Buffer((2, 8, 12), a), B: T.Buffer((2, 12, 16), "int8"), C: T.Buffer((2, 8, 16), "int32")):
        for b, i, j, r in T.grid(2, 8, 16, 12):
            with T.block("C"):
                vb, vi, vj, vk = T.remap("SSSR", b, i, j, r)
                with T.init():
                    C[vb, vi, vj] = 0
                C[vb, vi, vj] = C[vb, vi, vj] + T.cast(A[vb, vi, vk], "int32") * T.cast(B[vb, vk, vj], "int32")

    return func


def dense(a: str = "uint8") -> tir.PrimFunc:
    """``Y = X @ W.T``: the weight indexed (output, reduction), so it is transposed when packed."""

    @T.script
    def func(X: T.Buffer((6, 20), a), W: T.Buffer((16, 20), "int8"), Y: T.Buffer((6, 16), "int32")):
        for i, j, r in T.grid(6, 16, 20):
            with T.block("Y"):
                vi, vj, vk = T.remap("SSR", i, j, r)
                with T.init():
                    Y[vi, vj] = 0
                Y[vi, vj] = Y[vi, vj] + T.cast(X[vi, vk], "int32") * T.cast(W[vj, vk], "int32")

    return func


def conv1d_nwc_stride2(a: str = "uint8") -> tir.PrimFunc:
    @T.script
    def func(D: T.Buffer((1, 17, 8), a), W: T.Buffer((3, 8, 8), "int8"), Out: T.Buffer((1, 8, 8), "int32")):
        for n, w, co, rw, ci in T.grid(1, 8, 8, 3, 8):
            with T.block("conv"):
                vn, vw, vco, vrw, vci = T.remap("SSSRR", n, w, co, rw, ci)
                with T.init():
                    Out[vn, vw, vco] = 0
                Out[vn, vw, vco] = Out[vn, vw, vco] + T.cast(D[vn, vw * 2 + vrw, vci], "int32") * T.cast(
                    W[vrw, vci, vco], "int32"
                )

    return func


def conv2d_nhwc(a: str = "uint8") -> tir.PrimFunc:
    """3 input channels (27-long reduction, padded to a multiple of 4), 12 output channels
    (padded to the intrinsic's lanes)."""

    @T.script
    def func(D: T.Buffer((1, 6, 6, 3), a), W: T.Buffer((3, 3, 3, 12), "int8"), Out: T.Buffer((1, 4, 4, 12), "int32")):
        for n, h, w, co, rh, rw, ci in T.grid(1, 4, 4, 12, 3, 3, 3):
            with T.block("conv"):
                vn, vh, vw, vco, vrh, vrw, vci = T.remap("SSSSRRR", n, h, w, co, rh, rw, ci)
                with T.init():
                    Out[vn, vh, vw, vco] = 0
                Out[vn, vh, vw, vco] = Out[vn, vh, vw, vco] + T.cast(D[vn, vh + vrh, vw + vrw, vci], "int32") * T.cast(
                    W[vrh, vrw, vci, vco], "int32"
                )

    return func


def conv2d_nchw_stride2_dilation2(a: str = "uint8") -> tir.PrimFunc:
    @T.script
    def func(D: T.Buffer((1, 4, 11, 11), a), W: T.Buffer((8, 4, 3, 3), "int8"), Out: T.Buffer((1, 8, 4, 4), "int32")):
        for n, co, h, w, ci, rh, rw in T.grid(1, 8, 4, 4, 4, 3, 3):
            with T.block("conv"):
                vn, vco, vh, vw, vci, vrh, vrw = T.remap("SSSSRRR", n, co, h, w, ci, rh, rw)
                with T.init():
                    Out[vn, vco, vh, vw] = 0
                Out[vn, vco, vh, vw] = Out[vn, vco, vh, vw] + T.cast(
                    D[vn, vci, vh * 2 + vrh * 2, vw * 2 + vrw * 2], "int32"
                ) * T.cast(W[vco, vci, vrh, vrw], "int32")

    return func


def depthwise_conv2d() -> tir.PrimFunc:
    @T.script
    def func(D: T.Buffer((1, 6, 6, 8), "uint8"), W: T.Buffer((3, 3, 8), "int8"), Out: T.Buffer((1, 4, 4, 8), "int32")):
        for n, h, w, c, rh, rw in T.grid(1, 4, 4, 8, 3, 3):
            with T.block("conv"):
                vn, vh, vw, vc, vrh, vrw = T.remap("SSSSRR", n, h, w, c, rh, rw)
                with T.init():
                    Out[vn, vh, vw, vc] = 0
                Out[vn, vh, vw, vc] = Out[vn, vh, vw, vc] + T.cast(D[vn, vh + vrh, vw + vrw, vc], "int32") * T.cast(
                    W[vrh, vrw, vc], "int32"
                )

    return _declare(func, D=(0, 127))


def _workloads(a: str) -> dict[str, tuple[tir.PrimFunc, str]]:
    """name -> (program, its block); operand ``a`` declared in [0, 127] (the u7 intrinsic's contract)."""
    made = {
        "matmul": (matmul(16, 32, 16, a), "C"),
        "matmul_padded": (matmul(5, 12, 10, a), "C"),
        "batch_matmul": (batch_matmul(a), "C"),
        "dense": (dense(a), "Y"),
        "conv1d_nwc_stride2": (conv1d_nwc_stride2(a), "conv"),
        "conv2d_nhwc": (conv2d_nhwc(a), "conv"),
        "conv2d_nchw_stride2_dilation2": (conv2d_nchw_stride2_dilation2(a), "conv"),
    }
    if a == "uint8":
        made = {k: (_declare(f, **{f.buffer_params[0].name: (0, 127)}), b) for k, (f, b) in made.items()}
    return made


X86_WORKLOADS = _workloads("uint8")
ARM_WORKLOADS = _workloads("int8")


# ---------------------------------------------------------------- helpers


def _arguments(func: tir.PrimFunc, rng: np.random.Generator) -> list[np.ndarray]:
    arrays = []
    for buffer in func.buffer_params:
        shape = tuple(int(s.value) for s in buffer.shape)
        dtype = str(buffer.dtype)
        if dtype == "uint8":
            arrays.append(rng.integers(0, 128, shape).astype(np.uint8))
        elif dtype == "int8":
            arrays.append(rng.integers(-128, 128, shape).astype(np.int8))
        else:
            arrays.append(np.zeros(shape, np.dtype(dtype)))
    return arrays


def _run(func: tir.PrimFunc, target: str | None, args: list[np.ndarray]) -> np.ndarray:
    copies = [a.copy() for a in args]
    if target is None:
        tir.interpret(func, *copies)
    else:
        tir.build(func, target)(*copies)
    return copies[-1]


def _check_tensorized(original: tir.PrimFunc, tensorized: tir.PrimFunc, run_target: str | None) -> None:
    """Verifies, and equals the unscheduled program exactly (the reference interpreted)."""
    assert verify(tensorized) == [], tensorized.script()
    args = _arguments(original, np.random.default_rng(0))
    expected = _run(original, None, args)
    np.testing.assert_array_equal(_run(tensorized, run_target, args), expected)


def _uses(func: tir.PrimFunc, intrin: str) -> bool:
    """Whether ``func`` holds the implementation of ``intrin`` (its LLVM intrinsic calls or, for
    an intrinsic without any, its match_buffer views)."""
    text = func.script()
    impl = TensorIntrin.get(intrin).impl.script()
    calls = [part.split('"')[3] for part in impl.split("call_llvm_pure_intrin(")[1:]]  # (dtype, name, ...)
    if calls:
        return all(call in text for call in calls)
    return "T.match_buffer" in text


# ---------------------------------------------------------------- candidates (x86)


@needs_x86_int8
@pytest.mark.parametrize("name", sorted(X86_WORKLOADS))
def test_int8_workloads_match_x86_dot_and_compute_exactly(name: str) -> None:
    func, block = X86_WORKLOADS[name]
    report = tensorize_candidates(func, HOST)
    fits = report[block].fits
    assert fits, str(report)
    assert {c.intrin for c in fits} <= set(X86_INT8) | set(TensorIntrin.list(HOST)), str(report)
    assert any(c.intrin in X86_INT8 for c in fits), str(report)
    for candidate in fits:
        if candidate.intrin not in X86_INT8:
            continue
        # the characteristic vectors: one group per intrinsic iterator, the rest outside
        mapped = [g for g in candidate.groups if g.intrin_iter is not None]
        assert len(mapped) == 2 and {g.kind for g in mapped} == {"S", "R"}, str(candidate)
        assert all(g.intrin_iter is None for g in candidate.groups[: len(candidate.groups) - 2])
        sch = Schedule(func)
        apply_candidate(sch, block, candidate)
        assert _uses(sch.func, candidate.intrin), sch.func.script()
        _check_tensorized(func, sch.func, HOST)
        # the schedule is a trace that replays
        again = Schedule(func)
        sch.trace.apply_to(again)
        tir.assert_structural_equal(again.func, sch.func)


@needs_x86_int8
def test_candidate_reports_mapping_and_padding() -> None:
    func, block = X86_WORKLOADS["conv2d_nhwc"]
    candidate = next(c for c in tensorize_candidates(func, HOST)[block].fits if c.intrin in X86_INT8)
    groups = {g.iters: g for g in candidate.groups}
    assert groups[("vn", "vh", "vw")].intrin_iter is None  # output pixels: outside the 1-row dot product
    assert groups[("vrh", "vrw", "vci")].extent == 27 and groups[("vrh", "vrw", "vci")].padded_extent == 28
    assert groups[("vco",)].padded_extent == 16  # 12 output channels padded to 2 x 8 lanes
    assert candidate.padded
    assert dict(candidate.operands) == {"A": "D", "B": "W", "C": "Out"}
    assert "fits" in str(candidate) and "padded to 28" in str(candidate)


def test_interpreter_agrees_on_a_tensorized_program() -> None:
    func, block = X86_WORKLOADS["matmul_padded"]
    avx2 = "llvm -mtriple=x86_64-linux-gnu -mattr=+avx2"
    report = tensorize_candidates(func, avx2, intrinsics=_int8_intrinsics(avx2))
    candidate = report[block].fits[0]
    sch = Schedule(func)
    apply_candidate(sch, block, candidate)
    _check_tensorized(func, sch.func, None)


def test_fused_form_is_the_application_up_to_the_split() -> None:
    """``to_fused_form`` makes apply_candidate's first steps (what the Tensor Core rule tiles
    itself) and returns the groups' loops; ``operand_position`` finds the operands' copies."""
    from tir.intrin.cuda import WMMA_SYNC_F16F16F32

    @T.script
    def dense_f16(X: T.Buffer((64, 64), "float16"), W: T.Buffer((64, 64), "float16"), Y: T.Buffer((64, 64), "float32")):
        for i, j, k in T.grid(64, 64, 64):
            with T.block("Y"):
                vi, vj, vk = T.remap("SSR", i, j, k)
                with T.init():
                    Y[vi, vj] = T.cast(0, "float32")
                Y[vi, vj] = Y[vi, vj] + T.cast(X[vi, vk], "float32") * T.cast(W[vj, vk], "float32")

    candidate = match_intrin(dense_f16, "Y", TensorIntrin.get(WMMA_SYNC_F16F16F32))
    assert isinstance(candidate, TensorizeCandidate), str(candidate)
    sch = Schedule(dense_f16)
    block = sch.get_block("Y")
    loops = to_fused_form(sch, block, candidate)
    assert [g.intrin_iter for g in candidate.groups] == ["vi", "vj", "vk"]
    assert [sch.get(loop).loop_var.name for loop in loops] == ["i", "j", "k"]
    assert "W_reindex[vk, vj] = W[vj, vk]" in sch.func.script()  # the [k, n] matrix the intrinsic reads
    positions = {p: operand_position(sch, block, WMMA_SYNC_F16F16F32, p) for p in ("A", "B", "C")}
    assert positions == {"A": 1, "B": 2, "C": 0}
    assert sch.get(block).reads[positions["B"]].buffer.name == "W_reindex"
    # apply_candidate goes on from exactly there: split, reorder, blockize
    full = Schedule(dense_f16)
    apply_candidate(full, "Y", candidate, tensorize=False)
    assert full.trace.as_python().startswith(sch.trace.as_python())
    assert [i.kind for i in full.trace.instructions[len(sch.trace.instructions) :]][-2:] == ["reorder", "blockize"]


# ---------------------------------------------------------------- mismatches, with reasons


def test_depthwise_conv_does_not_match() -> None:
    names = [n for n in TensorIntrin.list() if TensorIntrin.get(n).isa in ("x86_64", "aarch64")]
    report = tensorize_candidates(depthwise_conv2d(), HOST, intrinsics=names, blocks=["conv"])
    entry = report["conv"]
    assert not entry.fits
    # the uint8 x int8 dot products of this host: the dtypes fit, the iterators do not
    uint8 = [
        m
        for m in entry.misses
        if m.intrin in _int8_intrinsics(HOST) and str(TensorIntrin.get(m.intrin).desc.buffer_params[0].dtype) == "uint8"
    ]
    if not uint8:
        pytest.skip("no uint8 x int8 dot product for this host")
    for miss in uint8:
        assert miss.kind == "iterators", str(miss)
        # the output channel indexes all three operands; nothing indexes only the output and W
        assert "no iterator of the block indexes exactly those" in miss.reason, miss.reason
        assert "vc index" in miss.reason, miss.reason


def test_mismatched_dtype_is_reported() -> None:
    wide = matmul(8, 16, 8, a="int16", b="int16")
    for target in (HOST, ARM):
        names = _int8_intrinsics(target)
        if not names:
            continue
        entry = tensorize_candidates(wide, target, intrinsics=names)["C"]
        assert not entry.fits
        assert all(m.kind == "dtype" for m in entry.misses), str(entry)
        assert any("int16" in m.reason for m in entry.misses), str(entry)
    # float32 against an int8 dot product: the accumulator's dtype
    f32 = tir.parse(matmul(8, 8, 8).script().replace('"uint8"', '"float32"').replace('"int8"', '"float32"'))
    names = _int8_intrinsics(ARM)
    entry = tensorize_candidates(f32, ARM, intrinsics=names)["C"]
    assert entry.misses and all(m.kind == "dtype" for m in entry.misses), str(entry)


@needs_x86_int8
def test_u7_intrinsic_needs_a_declared_range() -> None:
    from tir.intrin.x86 import AVX2_U7S8_DOT

    if AVX2_U7S8_DOT not in X86_INT8:
        pytest.skip(f"{AVX2_U7S8_DOT} is not available here")
    undeclared = matmul(16, 32, 16)
    entry = tensorize_candidates(undeclared, HOST, intrinsics=[AVX2_U7S8_DOT])["C"]
    assert not entry.fits and entry.misses[0].kind == "range", str(entry)
    assert "[0, 127]" in entry.misses[0].reason
    wide = _declare(undeclared, A=(0, 255))
    entry = tensorize_candidates(wide, HOST, intrinsics=[AVX2_U7S8_DOT])["C"]
    assert not entry.fits and entry.misses[0].kind == "range", str(entry)


def test_target_and_unknown_names_are_misses() -> None:
    func, block = ARM_WORKLOADS["matmul"]
    entry = tensorize_candidates(
        func, "llvm -mtriple=aarch64-linux-gnu -mattr=+neon", intrinsics=_int8_intrinsics(ARM) + ["no_such"]
    )[block]
    kinds = {m.intrin: m.kind for m in entry.misses}
    assert kinds["no_such"] == "target"
    assert all(kind == "target" for kind in kinds.values()), str(entry)  # sdot needs +dotprod


def test_metasched_exports_tensorize_candidates() -> None:
    assert metasched.tensorize_candidates is tensorize_candidates
    func, _ = ARM_WORKLOADS["matmul"]
    assert "block C:" in str(metasched.tensorize_candidates(func, ARM))


# ---------------------------------------------------------------- AArch64 sdot


@pytest.mark.parametrize("name", ["matmul", "conv2d_nhwc", "dense"])
def test_sdot_candidates_build_and_run_under_qemu(name: str) -> None:
    func, block = ARM_WORKLOADS[name]
    fits = tensorize_candidates(func, ARM)[block].fits
    sdot = [c for c in fits if c.intrin in _int8_intrinsics(ARM)]
    assert sdot, str(tensorize_candidates(func, ARM))
    sch = Schedule(func)
    apply_candidate(sch, block, sdot[0])
    assert verify(sch.func) == []
    module = tir.build(sch.func, ARM)
    assert any(line.split()[:1] == ["sdot"] for line in module.get_source("asm").splitlines())
    if _QEMU_MISSING is not None:
        pytest.skip(f"AArch64 tools missing: {_QEMU_MISSING}")
    args = _arguments(func, np.random.default_rng(1))
    expected = _run(func, None, args)
    copies = [a.copy() for a in args]
    module(*copies)
    np.testing.assert_array_equal(copies[-1], expected)


# ---------------------------------------------------------------- the sketch rule


def _sample(func: tir.PrimFunc, space: SpaceGenerator, target: str, seeds: int) -> Iterator[tir.PrimFunc]:
    from metasched.search.candidate import Rejected, make_candidate

    sketches = space.generate(func, target)
    postprocs = space.postprocs_for(target)
    for seed in range(seeds):
        index = seed % len(sketches)
        try:
            yield make_candidate(func, sketches[index], index, None, postprocs, seed=seed).func
        except Rejected:
            continue


@needs_x86_int8
def test_rule_sketches_are_tensorized_and_exact() -> None:
    func, _ = X86_WORKLOADS["matmul"]
    space = SpaceGenerator()
    sketches = space.generate(func, HOST)
    assert sketches and all(any(i.kind == "tensorize" for i in s.instructions) for s in sketches)
    made = list(_sample(func, space, HOST, 6))
    assert len(made) >= 3
    for candidate in made:
        assert any(_uses(candidate, name) for name in X86_INT8), candidate.script()
        _check_tensorized(func, candidate, HOST)


@needs_x86_int8
def test_rule_tensorizes_a_padded_convolution() -> None:
    func, _ = X86_WORKLOADS["conv2d_nhwc"]
    made = list(_sample(func, SpaceGenerator(), HOST, 4))
    assert made
    for candidate in made:
        _check_tensorized(func, candidate, HOST)
        # one copy per operand (im2col + padding + packing merged), the packing vectorized
        assert len(candidate.body.block.alloc_buffers) == 3, candidate.script()
        assert "T.vectorized" in candidate.script()


@pytest.mark.parametrize("name", ["matmul", "conv2d_nhwc"])
def test_rule_sdot_candidates_under_qemu(name: str) -> None:
    """The AArch64 design space of an int8 matmul and convolution: sampled candidates use
    ``sdot`` and compute exactly what the program does (run under qemu)."""
    func, _ = ARM_WORKLOADS[name]
    made = list(_sample(func, SpaceGenerator(), ARM, 2))
    assert made
    module = tir.build(made[0], ARM)
    assert any(line.split()[:1] == ["sdot"] for line in module.get_source("asm").splitlines())
    if _QEMU_MISSING is not None:
        pytest.skip(f"AArch64 tools missing: {_QEMU_MISSING}")
    args = _arguments(func, np.random.default_rng(2))
    copies = [a.copy() for a in args]
    module(*copies)
    np.testing.assert_array_equal(copies[-1], _run(func, None, args))


def test_float_programs_keep_their_plain_sketches() -> None:
    """Built-in float32 FMA tiles and portable (isa-less) intrinsics are not used unless named."""
    f32 = tir.parse(matmul(64, 64, 64).script().replace('"uint8"', '"float32"').replace('"int8"', '"float32"'))
    sketches = SpaceGenerator().generate(f32, HOST)
    assert not any(i.kind == "tensorize" for s in sketches for i in s.instructions)


# ---------------------------------------------------------------- the tuner


PAPER = "test_tensorize_paper_4x4x4"
#: The TensorIR paper's 4x4x4 matmul, as examples/tensorize_custom.py defines it.
PAPER_4X4X4 = load_example("tensorize_custom")


@pytest.fixture
def paper_intrinsic() -> Iterator[str]:
    """The TensorIR paper's 4x4x4 matmul, registered for this test only (for the host's
    instruction set, so the default rules use it), removed afterwards."""
    from tir.intrin import _REGISTRY

    TensorIntrin.register(
        PAPER, PAPER_4X4X4.dot_4x4x4_desc, PAPER_4X4X4.dot_4x4x4_impl, isa=Target.host().isa, override=True
    )
    try:
        yield PAPER
    finally:
        _REGISTRY.pop(PAPER, None)


def _float_matmul(n: int) -> tir.PrimFunc:
    @T.script
    def func(A: T.Buffer((n, n), "float32"), B: T.Buffer((n, n), "float32"), C: T.Buffer((n, n), "float32")):
        for i, j, k in T.grid(n, n, n):
            with T.block("C"):
                vi, vj, vk = T.remap("SSR", i, j, k)
                with T.init():
                    C[vi, vj] = 0.0
                C[vi, vj] += A[vi, vk] * B[vk, vj]

    return func


def _quiet(line: str) -> None:
    pass


#: A short tune: a small search population; one thread per candidate (thread start-up would
#: swamp these tiny kernels on a shared machine), through one measuring pool for the module.
TUNE_OPTIONS = {"trials": 5, "batch_size": 5, "search_options": {"population": 8, "generations": 1}, "log": _quiet}


@pytest.fixture(scope="module")
def measurer() -> Iterator[object]:
    from metasched.measure import Measurer

    made = Measurer(HOST, num_threads=1, workers=2)
    try:
        yield made
    finally:
        made.close()


def test_user_intrinsic_is_used_by_the_tuner(paper_intrinsic: str, measurer: object, tmp_path) -> None:
    func = _float_matmul(32)
    # registered for this machine: the default space tensorizes with it, no other change
    sketches = SpaceGenerator().generate(func, HOST)
    assert sketches and all(
        any(i.kind == "tensorize" and paper_intrinsic in i.args for i in s.instructions) for s in sketches
    )
    result = metasched.tune(
        func, HOST, intrinsics=[paper_intrinsic], work_dir=str(tmp_path), measurer=measurer, **TUNE_OPTIONS
    )
    best = result.best_func
    assert best is not None
    assert any(i.kind == "tensorize" and paper_intrinsic in i.args for i in result.tasks[0].best_trace.instructions)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 32, 32), dtype=np.float32)
    c = np.zeros((32, 32), np.float32)
    tir.build(best, HOST)(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@needs_x86_int8
def test_int8_tune_picks_a_tensorized_exact_program(measurer: object, tmp_path) -> None:
    func = _declare(matmul(32, 32, 32), A=(0, 127))
    result = metasched.tune(func, HOST, work_dir=str(tmp_path), measurer=measurer, **TUNE_OPTIONS)
    task = result.tasks[0]
    assert task.best_func is not None, result.summary()
    assert any(i.kind == "tensorize" for i in task.best_trace.instructions)
    assert any(_uses(task.best_func, name) for name in X86_INT8)
    _check_tensorized(func, task.best_func, HOST)


def test_tune_refuses_unknown_intrinsics() -> None:
    with pytest.raises(Exception, match="no tensor intrinsic named"):
        metasched.tune(_float_matmul(8), HOST, trials=1, intrinsics=["no_such_intrinsic"], log=_quiet)


def test_candidate_type_is_exported() -> None:
    assert TensorizeCandidate.__name__ == "TensorizeCandidate"


@needs_x86_int8
def test_layout_free_weights_are_packed_once() -> None:
    """A tensorized program reads its operands through match_buffer views; the packing of a
    layout-free weight still splits off (a view only read does not write its source), so the
    zero-trial default schedule of such a program is tensorized."""
    from metasched.space.default import default_schedule
    from tir.transform.split_prepack import split_prepack

    func = matmul(32, 32, 32, a="uint8").replace(
        attrs={"layout_free_buffers": ["B"], VALUE_RANGES_ATTR: {"A": [0, 127]}}
    )
    tuned = default_schedule(func, HOST)
    assert tuned is not func and any(_uses(tuned, name) for name in X86_INT8), tuned.script()
    split = split_prepack(tuned)
    assert split.prepack is not None and "B" in split.inputs
    _check_tensorized(func, tuned, HOST)


@needs_x86_int8
def test_default_schedule_of_a_program_without_layout_free_weights_is_tensorized() -> None:
    """Every sketch of a tensorized block packs an operand; with nothing declared layout-free
    the default schedule still takes one (packing per call) rather than none."""
    from metasched.space.default import default_schedule

    func = matmul(32, 32, 32, a="int8")
    tuned = default_schedule(func, HOST)
    assert tuned is not func and any(_uses(tuned, name) for name in X86_INT8), tuned.script()
    _check_tensorized(func, tuned, HOST)


@T.script
def _one_row_int8_gemm(
    A: T.Buffer((1, 576), "uint8"), B: T.Buffer((576, 32), "int8"), C: T.Buffer((1, 32), "int32")
):
    for i, j, k in T.grid(1, 32, 576):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0
            C[vi, vj] += T.cast(A[vi, vk], "int32") * T.cast(B[vk, vj], "int32")


def test_an_int8_gemm_of_one_row_has_a_design_space() -> None:
    """A classifier's last layer (M = 1): the application binds the extent-1 iterator to a
    constant, which the multi-level tiling refuses; the rule falls back instead of stopping
    the tune with an AssertionError."""
    from metasched.space import SpaceGenerator

    assert SpaceGenerator().generate(_one_row_int8_gemm, "llvm")
