"""The validator: a corpus of invalid programs (one broken rule each), valid programs of
every shape scheduling produces (no false positives), the examples and the scheduled goldens,
the API, and the schedule's debug mode."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from verify_corpus import CASES, Case

import tir
import tir.script as T
from tir.analysis import (
    RULES,
    VerificationError,
    Violation,
    infer_block_access,
    is_warp_level_op,
    register_warp_level_op,
    verify,
    verify_or_raise,
)
from tir.ir import (
    And,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferStore,
    For,
    ForKind,
    IntImm,
    IterKind,
    IterVar,
    PrimExpr,
    Range,
    SeqStmt,
    Stmt,
    Var,
    const,
)
from tir.ir.functor import substitute
from tir.schedule import Schedule, ScheduleError

ROOT = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------- the corpus


def test_corpus_is_large_and_covers_every_rule() -> None:
    assert len(CASES) >= 30
    assert len({case.name for case in CASES}) == len(CASES)
    assert {case.rule for case in CASES} == set(RULES)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_invalid_program_is_rejected_with_its_rule_only(case: Case) -> None:
    func = case.build()
    violations = verify(func, case.target)
    assert violations, f"{case.name}: no violation found"
    assert {v.rule for v in violations} == {case.rule}, "\n".join(map(str, violations))
    for violation in violations:
        assert violation.target and violation.message
        assert str(violation).startswith(f"[{case.rule}] {violation.target}: ")


# ---------------------------------------------------------------- valid programs


def parse(text: str) -> tir.PrimFunc:
    func = tir.parse(text)
    assert isinstance(func, tir.PrimFunc)
    return func


VALID: dict[str, tuple[str, str | None]] = {
    "split_with_predicate": (
        """
@T.script
def f(A: T.Buffer((100, 8), "float32"), B: T.Buffer((100, 8), "float32")):
    for i_0, i_1, j in T.grid(4, 32, 8):
        with T.block("B"):
            vi = T.spatial_axis(100, i_0 * 32 + i_1)
            vj = T.spatial_axis(8, j)
            T.where(i_0 * 32 + i_1 < 100)
            B[vi, vj] = A[vi, vj] * 2.0
""",
        None,
    ),
    "fused_then_split_with_predicate": (
        """
@T.script
def f(A: T.Buffer((10, 12), "float32"), B: T.Buffer((10, 12), "float32")):
    for f0, f1 in T.grid(8, 16):
        with T.block("B"):
            vi = T.spatial_axis(10, (f0 * 16 + f1) // 12)
            vj = T.spatial_axis(12, (f0 * 16 + f1) % 12)
            T.where(f0 * 16 + f1 < 120)
            B[vi, vj] = A[vi, vj] + 1.0
""",
        None,
    ),
    "fused_bindings": (
        """
@T.script
def f(A: T.Buffer((8, 4), "float32"), B: T.Buffer((8, 4), "float32")):
    for fused in range(32):
        with T.block("B"):
            vi = T.spatial_axis(8, fused // 4)
            vj = T.spatial_axis(4, fused % 4)
            B[vi, vj] = A[vi, vj]
""",
        None,
    ),
    "compute_at_conv_pad": (
        """
@T.script
def f(data: T.Buffer((1, 6, 6, 3), "float32"), weight: T.Buffer((3, 3, 3, 4), "float32"),
      conv: T.Buffer((1, 6, 6, 4), "float32")):
    padded = T.alloc_buffer((1, 8, 8, 3), "float32")
    for n, h, w in T.grid(1, 6, 6):
        for ax0, ax1, ax2 in T.grid(3, 3, 3):
            with T.block("pad"):
                vn = T.spatial_axis(1, 0)
                vh = T.spatial_axis(8, h + ax0)
                vw = T.spatial_axis(8, w + ax1)
                vc = T.spatial_axis(3, ax2)
                padded[vn, vh, vw, vc] = T.if_then_else(
                    1 <= vh and vh < 7 and (1 <= vw and vw < 7), data[vn, vh - 1, vw - 1, vc], 0.0)
        for co, rh, rw, ci in T.grid(4, 3, 3, 3):
            with T.block("conv"):
                vn, vh, vw, vco, vrh, vrw, vci = T.remap("SSSSRRR", n, h, w, co, rh, rw, ci)
                with T.init():
                    conv[vn, vh, vw, vco] = 0.0
                conv[vn, vh, vw, vco] = conv[vn, vh, vw, vco] + padded[vn, vh + vrh, vw + vrw, vci] * weight[vrh, vrw, vci, vco]
""",
        None,
    ),
    "compute_at_tile_with_predicate": (
        """
@T.script
def f(A: T.Buffer((10,), "float32"), C: T.Buffer((10,), "float32")):
    B = T.alloc_buffer((10,), "float32")
    for i_0 in range(3):
        for ax0 in range(4):
            with T.block("B"):
                vi = T.spatial_axis(10, i_0 * 4 + ax0)
                T.where(i_0 * 4 + ax0 < 10)
                B[vi] = A[vi] * 2.0
        for i_1 in range(4):
            with T.block("C"):
                vi = T.spatial_axis(10, i_0 * 4 + i_1)
                T.where(i_0 * 4 + i_1 < 10)
                C[vi] = B[vi] + 1.0
""",
        None,
    ),
    "cache_read_window_and_cache_write": (
        """
@T.script
def f(A: T.Buffer((16, 20), "float32"), B: T.Buffer((16, 16), "float32")):
    A_global = T.alloc_buffer((16, 20), "float32")
    B_local = T.alloc_buffer((16, 16), "float32", scope="local")
    for ax0, ax1 in T.grid(16, 18):
        with T.block("A_global"):
            v0 = T.spatial_axis(16, ax0)
            v1 = T.spatial_axis(20, ax1 + 2)
            A_global[v0, v1] = A[v0, v1]
    for i, j in T.grid(16, 16):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            T.reads(A_global[vi, vj + 2:vj + 2 + 3])
            T.writes(B_local[vi, vj])
            B_local[vi, vj] = A_global[vi, vj + 2] + A_global[vi, vj + 4]
    for ax0, ax1 in T.grid(16, 16):
        with T.block("B_local"):
            v0, v1 = T.remap("SS", ax0, ax1)
            B[v0, v1] = B_local[v0, v1]
""",
        None,
    ),
    "decompose_reduction_tiled": (
        """
@T.script
def f(A: T.Buffer((10, 12), "float32"), B: T.Buffer((10,), "float32")):
    for i_0 in range(3):
        for i_1_init in range(4):
            with T.block("B_init"):
                vi_init = T.spatial_axis(10, i_0 * 4 + i_1_init)
                T.where(i_0 * 4 + i_1_init < 10)
                T.reads()
                T.writes(B[vi_init])
                B[vi_init] = 0.0
        for k_0, i_1, k_1 in T.grid(3, 4, 5):
            with T.block("B"):
                vi = T.spatial_axis(10, i_0 * 4 + i_1)
                vk = T.reduce_axis(12, k_0 * 5 + k_1)
                T.where(i_0 * 4 + i_1 < 10 and k_0 * 5 + k_1 < 12)
                B[vi] = B[vi] + A[vi, vk]
""",
        None,
    ),
    "rfactor_unsplit_and_split": (
        """
@T.script
def f(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    B_rf = T.alloc_buffer((16, 8), "float32")
    C_rf = T.alloc_buffer((4, 8), "float32")
    for i, k in T.grid(8, 16):
        with T.block("B_rf"):
            vi, vk = T.remap("SS", i, k)
            with T.init():
                B_rf[vk, vi] = 0.0
            B_rf[vk, vi] = B_rf[vk, vi] + A[vi, vk]
    for i, k in T.grid(8, 16):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] + B_rf[vk, vi]
    for k_0, k_1, i in T.grid(4, 4, 8):
        with T.block("C_rf"):
            vi, vk_0, vk_1 = T.remap("SSR", i, k_0, k_1)
            with T.init():
                C_rf[vk_0, vi] = 0.0
            C_rf[vk_0, vi] = C_rf[vk_0, vi] + A[vi, vk_0 * 4 + vk_1]
    for k_0, i in T.grid(4, 8):
        with T.block("C"):
            vi, vk_0 = T.remap("SR", i, k_0)
            with T.init():
                C[vi] = 0.0
            C[vi] = C[vi] + C_rf[vk_0, vi]
""",
        None,
    ),
    "reduction_recomputed_outside_is_fine": (
        """
@T.script
def f(A: T.Buffer((4, 8), "float32"), C: T.Buffer((4, 4), "float32")):
    B = T.alloc_buffer((4,), "float32")
    for i, j in T.grid(4, 4):
        for k in range(8):
            with T.block("B"):
                vi = T.spatial_axis(4, i)
                vk = T.reduce_axis(8, k)
                with T.init():
                    B[vi] = 0.0
                B[vi] = B[vi] + A[vi, vk]
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = B[vi]
""",
        None,
    ),
    "nested_blocks_with_outer_iterators": (
        """
@T.script
def f(A: T.Buffer((16, 16), "float32"), C: T.Buffer((16,), "float32")):
    for io, ko in T.grid(4, 4):
        with T.block("outer"):
            vio = T.spatial_axis(4, io)
            vko = T.reduce_axis(4, ko)
            T.reads(C[vio * 4:vio * 4 + 4], A[vio * 4:vio * 4 + 4, vko * 4:vko * 4 + 4])
            T.writes(C[vio * 4:vio * 4 + 4])
            with T.init():
                for ii in range(4):
                    with T.block("init"):
                        vi = T.spatial_axis(16, vio * 4 + ii)
                        C[vi] = 0.0
            for ii, ki in T.grid(4, 4):
                with T.block("C"):
                    vi = T.spatial_axis(16, vio * 4 + ii)
                    vk = T.reduce_axis(16, vko * 4 + ki)
                    C[vi] = C[vi] + A[vi, vk]
""",
        None,
    ),
    "symbolic_split_and_fuse": (
        """
@T.script
def f(a: T.handle, b: T.handle, n: T.int32, m: T.int32):
    A = T.match_buffer(a, (n, m), "float32")
    B = T.match_buffer(b, (n, m), "float32")
    for f in range(n * m):
        with T.block("B"):
            vi = T.spatial_axis(n, f // m)
            vj = T.spatial_axis(m, f % m)
            B[vi, vj] = A[vi, vj] * 2.0
""",
        None,
    ),
    "predicate_pins_an_iterator": (
        """
@T.script
def f(A: T.Buffer((16, 4), "float32"), C: T.Buffer((16,), "float32")):
    for i, j in T.grid(16, 4):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            T.where(j == 2)
            C[vi] = A[vi, vj] * 2.0
""",
        None,
    ),
    "gpu_matmul_shared_cooperative_fetch": (
        """
@T.script
def f(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32"), C: T.Buffer((64, 64), "float32")):
    A_shared = T.alloc_buffer((64, 64), "float32", scope="shared")
    B_shared = T.alloc_buffer((64, 64), "float32", scope="shared")
    C_local = T.alloc_buffer((64, 64), "float32", scope="local")
    for bx in T.thread_binding(4, thread="blockIdx.x"):
        for by in T.thread_binding(4, thread="blockIdx.y"):
            for ty in T.thread_binding(4, thread="threadIdx.y"):
                for tx in T.thread_binding(4, thread="threadIdx.x"):
                    for ii, jj in T.grid(4, 4):
                        with T.block("C_init"):
                            vi = T.spatial_axis(64, bx * 16 + ty * 4 + ii)
                            vj = T.spatial_axis(64, by * 16 + tx * 4 + jj)
                            C_local[vi, vj] = 0.0
            for ko in range(4):
                for ty in T.thread_binding(4, thread="threadIdx.y"):
                    for tx in T.thread_binding(4, thread="threadIdx.x"):
                        for ax in range(16):
                            with T.block("A_shared"):
                                v0 = T.spatial_axis(64, bx * 16 + (ty * 4 + tx))
                                v1 = T.spatial_axis(64, ko * 16 + ax)
                                A_shared[v0, v1] = A[v0, v1]
                for ty in T.thread_binding(4, thread="threadIdx.y"):
                    for tx in T.thread_binding(4, thread="threadIdx.x"):
                        for ax in range(16):
                            with T.block("B_shared"):
                                v0 = T.spatial_axis(64, ko * 16 + ax)
                                v1 = T.spatial_axis(64, by * 16 + (ty * 4 + tx))
                                B_shared[v0, v1] = B[v0, v1]
                for ty in T.thread_binding(4, thread="threadIdx.y"):
                    for tx in T.thread_binding(4, thread="threadIdx.x"):
                        for ki, ii, jj in T.grid(16, 4, 4):
                            with T.block("C"):
                                vi = T.spatial_axis(64, bx * 16 + ty * 4 + ii)
                                vj = T.spatial_axis(64, by * 16 + tx * 4 + jj)
                                vk = T.reduce_axis(64, ko * 16 + ki)
                                C_local[vi, vj] = C_local[vi, vj] + A_shared[vi, vk] * B_shared[vk, vj]
            for ty in T.thread_binding(4, thread="threadIdx.y"):
                for tx in T.thread_binding(4, thread="threadIdx.x"):
                    for ii, jj in T.grid(4, 4):
                        with T.block("C_local"):
                            vi = T.spatial_axis(64, bx * 16 + ty * 4 + ii)
                            vj = T.spatial_axis(64, by * 16 + tx * 4 + jj)
                            C[vi, vj] = C_local[vi, vj]
""",
        "cuda -arch=sm_80",
    ),
    "metaschedule_style_cooperative_fetch": (
        """
@T.script
def f(A: T.Buffer((128, 128), "float32"), B: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
    A_shared = T.alloc_buffer((128, 128), "float32", scope="shared")
    C_local = T.alloc_buffer((128, 128), "float32", scope="local")
    for bx in T.thread_binding(16, thread="blockIdx.x"):
        for tx in T.thread_binding(64, thread="threadIdx.x"):
            for ko in range(16):
                for ax_0 in range(4):
                    for ax_1 in T.thread_binding(64, thread="threadIdx.x"):
                        with T.block("A_shared"):
                            v0 = T.spatial_axis(128, bx // 4 * 32 + (ax_0 * 64 + ax_1) // 8)
                            v1 = T.spatial_axis(128, ko * 8 + (ax_0 * 64 + ax_1) % 8)
                            A_shared[v0, v1] = A[v0, v1]
                for ki, ii, jj in T.grid(8, 4, 4):
                    with T.block("C"):
                        vi = T.spatial_axis(128, bx // 4 * 32 + tx // 8 * 4 + ii)
                        vj = T.spatial_axis(128, bx % 4 * 32 + tx % 8 * 4 + jj)
                        vk = T.reduce_axis(128, ko * 8 + ki)
                        with T.init():
                            C_local[vi, vj] = 0.0
                        C_local[vi, vj] = C_local[vi, vj] + A_shared[vi, vk] * B[vk, vj]
            for ii, jj in T.grid(4, 4):
                with T.block("C_local"):
                    vi = T.spatial_axis(128, bx // 4 * 32 + tx // 8 * 4 + ii)
                    vj = T.spatial_axis(128, bx % 4 * 32 + tx % 8 * 4 + jj)
                    C[vi, vj] = C_local[vi, vj]
""",
        "cuda -arch=sm_80",
    ),
    "cross_thread_reduction_annotated": (
        """
@T.script
def f(A: T.Buffer((8, 32), "float32"), B: T.Buffer((8,), "float32")):
    for i in T.thread_binding(8, thread="blockIdx.x"):
        for k in T.thread_binding(32, thread="threadIdx.x"):
            with T.block("B"):
                vi = T.spatial_axis(8, i)
                vk = T.reduce_axis(32, k)
                T.block_attr({"cross_thread_reduction": True})
                with T.init():
                    B[vi] = 0.0
                B[vi] = B[vi] + A[vi, vk]
""",
        "cuda -arch=sm_80",
    ),
    "warp_ops_under_warps": (
        """
@T.script
def f(A: T.Buffer((16,), "float32")):
    for bx in T.thread_binding(2, thread="blockIdx.x"):
        for ty in T.thread_binding(4, thread="threadIdx.y"):
            for tx in T.thread_binding(32, thread="threadIdx.x"):
                T.evaluate(T.call_extern("int32", "wmma.mma_sync", ty, tx))
                T.evaluate(T.call_extern("int32", "ldmatrix.x4", ty))
""",
        "cuda -arch=sm_80",
    ),
    "gpu_shared_in_a_tile_block": (
        """
@T.script
def f(A: T.Buffer((64, 64), "float16"), C: T.Buffer((64, 64), "float32")):
    for bx in T.thread_binding(4, thread="blockIdx.x"):
        for tx in T.thread_binding(16, thread="threadIdx.x"):
            with T.block("tile"):
                vb, vt = T.remap("SS", bx, tx)
                T.reads(A[vb * 16 + vt, 0:64])
                T.writes(C[vb * 16 + vt, 0:64])
                S = T.alloc_buffer((16, 64), "float16", scope="shared")
                for k in range(64):
                    with T.block("load"):
                        vk = T.remap("S", k)
                        S[vt, vk] = A[vb * 16 + vt, vk]
                for k in T.unroll(64):
                    C[vb * 16 + vt, k] = T.cast(S[vt, k], "float32")
""",
        "cuda -arch=sm_80",
    ),
    "reverse_loop_and_shifted_loop": (
        """
@T.script
def f(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("B"):
            vi = T.spatial_axis(16, 15 - i)
            B[vi] = A[vi]
    for i in range(4, 12):
        with T.block("C"):
            vi = T.spatial_axis((4, 12), i)
            B[vi] = A[vi] + 1.0
""",
        None,
    ),
}


@pytest.mark.parametrize("name", sorted(VALID))
def test_valid_program_passes(name: str) -> None:
    text, target = VALID[name]
    func = parse(text)
    assert verify(func, target) == [], "\n".join(map(str, verify(func, target)))
    verify_or_raise(func, target)


def _load_example(name: str):  # type: ignore[no-untyped-def]
    examples = ROOT / "examples"
    if str(examples) not in sys.path:
        sys.path.insert(0, str(examples))
    spec = importlib.util.spec_from_file_location(f"verify_example_{name}", examples / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


EXAMPLES = sorted(p.stem for p in (ROOT / "examples").glob("*.py") if not p.stem.startswith("_"))


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_example_kernel_passes(name: str) -> None:
    kernel = _load_example(name).KERNEL
    assert verify(kernel) == [], "\n".join(map(str, verify(kernel)))


SCHEDULE_GOLDENS = sorted((ROOT / "tests" / "golden" / "schedule").glob("*.txt"))
#: Goldens of TVM cases whose own input program breaks a rule (their tests run without debug).
INVALID_INPUTS = {
    # TVM's test_upscale computes the producer at overlapping windows h_0 * 5 // 2 + ax0: a
    # binding that is not quasi-affine; rolling_buffer keeps it (and the result is exact).
    "rolling_buffer_upscale": "binding",
}

#: Goldens whose input is a schedule state, not yet a program to build: a shared copy still
#: outside the kernel that reads it (valid as ``verify(func, staged=True)``, which
#: ``Schedule(debug=True)`` checks), moved into the kernel by the step recorded.
STAGED_INPUTS = {"compute_at_shared_under_threads"}


@pytest.mark.parametrize("path", SCHEDULE_GOLDENS, ids=[p.stem for p in SCHEDULE_GOLDENS])
def test_every_scheduled_golden_program_passes(path: Path) -> None:
    """Every program the schedule tests record (before and after scheduling) is valid."""
    if path.stem in INVALID_INPUTS:
        rule = INVALID_INPUTS[path.stem]
        problems = verify(tir.parse(path.read_text().split("# before\n")[1].split("\n# after")[0]))
        assert problems and {v.rule for v in problems} == {rule}  # exactly the known defect
        return
    text = path.read_text()
    for part in ("before", "after"):
        found = re.search(rf"# {part}\n(.*?)(?=\n# (?:before|after|trace)\b|\Z)", text, re.S)
        if found is None:
            continue
        func = tir.parse(found.group(1))
        funcs = func.functions.values() if isinstance(func, tir.IRModule) else [func]
        staged = part == "before" and path.stem in STAGED_INPUTS
        for one in funcs:
            problems = verify(one, staged=staged)
            assert problems == [], f"{path.name} ({part}):\n" + "\n".join(map(str, problems))


# ---------------------------------------------------------------- finer points of the rules


def test_valid_program_checked_against_several_targets() -> None:
    func = parse(VALID["gpu_matmul_shared_cooperative_fetch"][0])
    assert verify(func) == []
    assert verify(func, "cuda -arch=sm_70") == []
    cpu = verify(func, "llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64")
    assert cpu and {v.rule for v in cpu} == {"thread-binding"}


def test_shared_memory_counts_only_one_launch_blocks_tile() -> None:
    """A root-allocated shared cache counts the tile one launch block touches, not its whole size."""
    text = VALID["gpu_matmul_shared_cooperative_fetch"][0].replace("(64, 64)", "(8192, 64)")
    func = parse(text)
    assert [v for v in verify(func, "cuda -arch=sm_80") if v.rule == "shared-memory"] == []


def test_local_buffers_are_per_thread_in_region_cover() -> None:
    func = parse(
        """
@T.script
def f(A: T.Buffer((32,), "float32"), B: T.Buffer((32,), "float32")):
    L = T.alloc_buffer((32,), "float32", scope="local")
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        with T.block("L"):
            vt = T.spatial_axis(32, tx)
            L[vt] = A[vt]
        with T.block("B"):
            vt = T.spatial_axis(31, tx)
            T.where(tx < 31)
            B[vt] = L[vt + 1]
"""
    )
    problems = verify(func)
    # the next thread's local element: this thread never wrote it (a shared buffer is fine)
    assert {v.rule for v in problems} == {"region-cover"}
    shared = parse(str(func.script()).replace('scope="local"', 'scope="shared"'))
    assert verify(shared) == []


def test_unjudgeable_regions_are_not_reported() -> None:
    func = parse(
        """
@T.script
def f(A: T.Buffer((16,), "int32"), B: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    T_ = T.alloc_buffer((16,), "float32")
    for i in range(8):
        with T.block("T"):
            vi = T.spatial_axis(16, i)
            T_[vi] = B[vi]
    for i in range(16):
        with T.block("C"):
            vi = T.spatial_axis(16, i)
            C[vi] = T_[A[vi]]
"""
    )
    # the gather's read region is the whole buffer as a fallback, not a known region
    assert [v for v in verify(func) if v.rule == "region-cover"] == []


def test_reduction_binding_allows_serial_and_unrolled_loops() -> None:
    func = parse(
        """
@T.script
def f(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8,), "float32")):
    for i in T.parallel(8):
        for k in T.unroll(16):
            with T.block("B"):
                vi = T.spatial_axis(8, i)
                vk = T.reduce_axis(16, k)
                with T.init():
                    B[vi] = 0.0
                B[vi] = B[vi] + A[vi, vk]
"""
    )
    assert verify(func) == []


def test_register_warp_level_op() -> None:
    assert is_warp_level_op("wmma.load_matrix_sync") and is_warp_level_op("mma.sync")
    assert not is_warp_level_op("my_tensor_core_op")
    register_warp_level_op("my_tensor_core_op")
    assert is_warp_level_op("my_tensor_core_op")
    func = parse(
        """
@T.script
def f(A: T.Buffer((16,), "float32")):
    for i in range(4):
        T.evaluate(T.call_extern("int32", "my_tensor_core_op", i))
"""
    )
    assert {v.rule for v in verify(func)} == {"intrinsic-scope"}
    register_warp_level_op("custom_warp.", prefix=True)
    assert is_warp_level_op("custom_warp.anything")


# ---------------------------------------------------------------- API


def test_violation_is_a_readable_frozen_dataclass() -> None:
    violation = Violation("binding", "block 'B'", "the bindings overlap", "with T.block(\"B\"):\n    pass")
    assert str(violation) == "[binding] block 'B': the bindings overlap\n    | with T.block(\"B\"):\n    |     pass"
    with pytest.raises(AttributeError):
        violation.rule = "other"  # type: ignore[misc]
    assert str(Violation("x", "y", "z")) == "[x] y: z"


def test_verify_or_raise_lists_violations() -> None:
    case = next(c for c in CASES if c.name == "dependent_bindings_paper")
    func = case.build()
    with pytest.raises(VerificationError) as info:
        verify_or_raise(func)
    assert info.value.violations == verify(func)
    assert "fails validation" in str(info.value) and "[binding] block 'B'" in str(info.value)


def test_verify_accepts_modules_and_rejects_other_things() -> None:
    good = parse(VALID["fused_bindings"][0])
    bad = next(c for c in CASES if c.name == "producer_writes_half").build()
    module = tir.IRModule({"good": good, "bad": bad.replace(name="bad")})
    assert {v.rule for v in verify(module)} == {"region-cover"}
    with pytest.raises(TypeError, match="PrimFunc or an IRModule"):
        verify("not a function")  # type: ignore[arg-type]


def test_analysis_exports() -> None:
    import tir.analysis as analysis

    for name in ("verify", "verify_or_raise", "Violation", "VerificationError", "infer_block_access"):
        assert name in analysis.__all__
    assert callable(infer_block_access)


def test_violations_are_sorted_by_rule_order() -> None:
    func = parse(
        """
@T.script
def f(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    T_ = T.alloc_buffer((16,), "float32")
    for i in T.thread_binding(16, thread="threadIdx.x"):
        with T.block("B"):
            vi = T.spatial_axis(8, i)
            B[vi] = T_[vi]
"""
    )
    rules = [v.rule for v in verify(func, "llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64")]
    assert rules == sorted(rules, key=RULES.index) and {"binding", "region-cover", "thread-binding"} <= set(rules)


# ---------------------------------------------------------------- the schedule's debug mode


@T.script
def _scale(A: T.Buffer((100, 8), "float32"), B: T.Buffer((100, 8), "float32")):
    for i, j in T.grid(100, 8):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0


def test_schedule_debug_mode_validates_each_primitive() -> None:
    sch = Schedule(_scale, debug=True)
    i, j = sch.get_loops(sch.get_block("B"))
    sch.split(i, [None, 32])  # a predicate appears: still valid
    assert verify(sch.func) == []


def test_schedule_debug_mode_raises_on_invalid_result() -> None:
    bad = next(c for c in CASES if c.name == "dependent_bindings_paper").build()
    sch = Schedule(bad)
    with pytest.raises(ScheduleError, match=r"fails validation: \[binding\] block 'B'"):
        sch._verify(sch.func, "split")


def test_schedule_debug_mode_reports_an_invalid_input_as_such() -> None:
    # Checked when the schedule is created: no later step is blamed for it (issue 17 C).
    bad = next(c for c in CASES if c.name == "dependent_bindings_paper").build()
    with pytest.raises(
        ScheduleError, match=r"^Schedule: .*the input program fails validation before any step: \[binding\] block 'B'"
    ):
        Schedule(bad, debug=True)
    Schedule(bad)  # without debug nothing is checked


def test_schedule_debug_mode_keeps_the_program_when_a_result_fails_validation() -> None:
    good = tir.parse(
        """
@T.script
def double(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B"):
            vi = T.spatial_axis(8, i)
            B[vi] = A[vi] * 2.0
"""
    )
    assert verify(good) == []
    sch = Schedule(good, debug=True)
    bad = next(c for c in CASES if c.name == "dependent_bindings_paper").build()
    with pytest.raises(ScheduleError, match="fails validation"):
        sch._set_func(bad, "split")
    assert sch.func is good


# ---------------------------------------------------------------- random loop transformations


@st.composite
def transformed_nests(draw: st.DrawFn) -> dict[str, Any]:
    """A 1-3 dimensional iteration space after random splits, fuses and a reorder: the loops,
    the bindings of the original iterators, and the predicates padded splits need."""
    extents = [draw(st.integers(1, 12)) for _ in range(draw(st.integers(1, 3)))]
    loops: list[tuple[Var, int]] = [(Var(f"l{k}"), e) for k, e in enumerate(extents)]
    bindings: list[PrimExpr] = [var for var, _ in loops]
    predicates: list[PrimExpr] = []
    fresh = iter(range(1000))
    for _ in range(draw(st.integers(0, 4))):
        if draw(st.booleans()) or len(loops) < 2:
            index = draw(st.integers(0, len(loops) - 1))
            var, extent = loops[index]
            factor = draw(st.integers(1, 8))
            outer, inner = Var(f"s{next(fresh)}"), Var(f"s{next(fresh)}")
            value = outer * factor + inner
            bindings = [substitute(b, {var: value}) for b in bindings]
            predicates = [substitute(p, {var: value}) for p in predicates]
            if -(-extent // factor) * factor != extent:
                predicates.append(value < extent)
            loops[index : index + 1] = [(outer, -(-extent // factor)), (inner, factor)]
        else:
            index = draw(st.integers(0, len(loops) - 2))
            (a, ea), (b, eb) = loops[index], loops[index + 1]
            fused = Var(f"f{next(fresh)}")
            bindings = [substitute(x, {a: fused // eb, b: fused % eb}) for x in bindings]
            predicates = [substitute(p, {a: fused // eb, b: fused % eb}) for p in predicates]
            loops[index : index + 2] = [(fused, ea * eb)]
    loops = draw(st.permutations(loops))
    return {"extents": extents, "loops": loops, "bindings": bindings, "predicates": predicates}


def _program(case: dict[str, Any], with_predicate: bool = True) -> tir.PrimFunc:
    extents = case["extents"]
    shape = tuple(const(e) for e in extents)
    a, b = Buffer("A", shape, "float32"), Buffer("B", shape, "float32")
    cache = Buffer("T", shape, "float32")
    iters = [IterVar(Var(f"v{k}"), Range.from_extent(e), IterKind.SPATIAL) for k, e in enumerate(extents)]
    index = tuple(iv.var for iv in iters)
    body = BufferStore(cache, BufferLoad(a, index) * 2.0, index)
    producer = Block("T", tuple(iters), (), (), body)
    reads, writes = infer_block_access(producer)
    producer = producer.replace(reads=reads, writes=writes)
    predicate: PrimExpr = const(True)
    if with_predicate:
        for p in case["predicates"]:
            predicate = p if predicate is None or isinstance(predicate, IntImm) else And(predicate, p)
    stmt: Stmt = BlockRealize(tuple(case["bindings"]), predicate, producer)
    for var, extent in reversed(case["loops"]):
        stmt = For(var, const(0), const(extent), ForKind.SERIAL, stmt)
    # the consumer reads T over plain loops
    citers = [IterVar(Var(f"w{k}"), Range.from_extent(e), IterKind.SPATIAL) for k, e in enumerate(extents)]
    cindex = tuple(iv.var for iv in citers)
    consumer = Block("B", tuple(citers), (), (), BufferStore(b, BufferLoad(cache, cindex) + 1.0, cindex))
    creads, cwrites = infer_block_access(consumer)
    consumer = consumer.replace(reads=creads, writes=cwrites)
    cloops = [Var(f"c{k}") for k in range(len(extents))]
    cstmt: Stmt = BlockRealize(tuple(cloops), const(True), consumer)
    for var, extent in reversed(list(zip(cloops, extents))):
        cstmt = For(var, const(0), const(extent), ForKind.SERIAL, cstmt)
    root = Block("root", (), (), (), SeqStmt((stmt, cstmt)), alloc_buffers=(cache,))
    return tir.PrimFunc("f", (a, b), BlockRealize((), const(True), root))


@settings(max_examples=150, deadline=None)
@given(transformed_nests())
def test_random_split_fuse_reorder_nests_verify_clean(case: dict[str, Any]) -> None:
    func = _program(case)
    problems = verify(func)
    assert problems == [], func.script() + "\n" + "\n".join(map(str, problems))
    if case["predicates"]:
        # without the predicate a padded split runs past the domain
        unguarded = verify(_program(case, with_predicate=False))
        assert unguarded and {v.rule for v in unguarded} == {"binding"}, func.script()


def test_predicate_in_another_form_is_settled_by_enumeration() -> None:
    """The binding was simplified, the predicate was not: iter-map cannot relate them, so the
    suspected excursion is settled by enumerating the nest."""
    text = """
@T.script
def f(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for s1, s2 in T.grid(2, 4):
        with T.block("B"):
            vi = T.spatial_axis(DOM, s1 * 2 + s2 // 2)
            T.where(s1 * 4 + s2 < 6)
            B[vi] = A[vi]
"""
    assert verify(parse(text.replace("DOM", "3"))) == []
    problems = verify(parse(text.replace("DOM", "2")))
    assert [v.rule for v in problems] == ["binding"] and "outside its domain" in problems[0].message


def test_non_rectangular_nest_is_not_judged() -> None:
    func = parse(
        """
@T.script
def f(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32")):
    for i in range(4):
        for j in range(i + 1):
            with T.block("B"):
                vi = T.spatial_axis(4, i)
                vj = T.spatial_axis(4, j)
                B[vi, vj] = A[vi, vj]
"""
    )
    assert verify(func) == []


SHARED_COPY_AT_TOP = """
@T.script
def f(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    S = T.alloc_buffer((64,), "float32", scope="shared")
    for i in range(64):
        with T.block("S"):
            vi = T.spatial_axis(64, i)
            S[vi] = A[vi]
    for bx in T.thread_binding(2, thread="blockIdx.x"):
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            with T.block("B"):
                vi = T.spatial_axis(64, bx * 32 + tx)
                B[vi] = S[vi] * 2.0
"""


def test_a_shared_copy_still_outside_its_kernel_is_a_valid_schedule_state_not_a_buildable_program() -> None:
    """TVM's compute_at tests on CUDA matmuls start from cache_read's shared copies at the top
    level; the schedule moves them into the kernel. Between the steps the program computes the
    right thing (region-cover judges the read); only a program to be built must have its shared
    memory written inside the kernel (cooperative-access)."""
    func = parse(SHARED_COPY_AT_TOP)
    assert [v.rule for v in verify(func)] == ["cooperative-access"]
    assert verify(func, staged=True) == []
    sch = Schedule(func, debug=True)  # accepted as a schedule's starting state
    bx, _ = sch.get_loops(sch.get_block("B"))
    sch.compute_at(sch.get_block("S"), bx)
    assert verify(sch.func, "cuda -arch=sm_80") == []
    # A staged state is still held to coverage: drop the copy and the read has no writer.
    uncovered = parse(SHARED_COPY_AT_TOP.replace("S[vi] = A[vi]", "B[vi] = A[vi]"))
    assert [v.rule for v in verify(uncovered, staged=True)] == ["region-cover"]
    with pytest.raises(ScheduleError, match="region-cover"):
        Schedule(uncovered, debug=True)


# ---------------------------------------------------------------- data guards in T.where


@T.script
def guard_declared(A: T.Buffer((8, 8), "float32"), M: T.Buffer((8, 8), "float32"), C: T.Buffer((8, 8), "float32")):
    for i, j in T.grid(8, 8):
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            T.where(M[i, j] > 0.0)
            T.reads(A[vi, vj], M[vi, vj])
            T.writes(C[vi, vj])
            C[vi, vj] = A[vi, vj] + 1.0


@T.script
def guard_undeclared(A: T.Buffer((8, 8), "float32"), M: T.Buffer((8, 8), "float32"), C: T.Buffer((8, 8), "float32")):
    for i, j in T.grid(8, 8):
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            T.where(M[j, i] > 0.0)
            T.reads(A[vi, vj], M[vi, vj])
            T.writes(C[vi, vj])
            C[vi, vj] = A[vi, vj] + 1.0


def test_a_data_guard_is_judged_apart_from_the_bindings() -> None:
    # T.where(M[i, j] > 0.0) skips instances at run time: the bindings stay quasi-affine, and
    # the guard's loads must lie in the block's declared reads (M[j, i] does not).
    assert verify(guard_declared) == []
    violations = verify(guard_undeclared)
    assert [v.rule for v in violations] == ["binding"]
    assert "the predicate loads M[j, i], which no read region the block declares covers" in violations[0].message
