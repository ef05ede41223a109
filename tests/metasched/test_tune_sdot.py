"""The tuner auto-tensorizes int8 programs with AArch64 ``sdot`` and its candidates are right.

``metasched.tune`` for ``llvm -mtriple=aarch64-linux-gnu -mattr=+neon,+dotprod`` on a small int8
matmul and a small int8 conv2d NHWC (padded, so tensorized through its im2col ReIndex copy): the
candidates are cross-compiled and run under qemu, every measured one is tensorized with ``sdot``
(the default schedule is not measured: the space of a block that ``sdot`` fits holds only
tensorized sketches), and the best one, rebuilt here, has ``sdot`` instructions in its AArch64
assembly and equals the unscheduled program (interpreted) exactly under qemu.

Kept short: a few trials with the replay strategy and the random cost model, one measuring
process for both tunes (each candidate is linked with the cross gcc and run in its own qemu
process). Skipped without qemu or the cross
toolchain.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import metasched
import tir
import tir.script as T
from tir.intrin import TensorIntrin
from tir.target import Target

# qemu_aarch64 (tests/conftest.py), session-scoped, is set up before the module's measurer: a
# machine without the tools skips these tests instead of failing to start the measurer.
pytestmark = [pytest.mark.aarch64, pytest.mark.usefixtures("qemu_aarch64")]

AARCH64 = "llvm -mtriple=aarch64-linux-gnu -mattr=+neon,+dotprod"
#: Fewer candidates per batch than the search ships to its worker processes: made here.
TRIALS = 3


@T.script
def int8_matmul(A: T.Buffer((16, 32), "int8"), B: T.Buffer((32, 24), "int8"), C: T.Buffer((16, 24), "int32")):
    for i, j, r in T.grid(16, 24, 32):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, r)
            with T.init():
                C[vi, vj] = 0
            C[vi, vj] = C[vi, vj] + T.cast(A[vi, vk], "int32") * T.cast(B[vk, vj], "int32")


@T.script
def int8_conv2d_nhwc(
    data: T.Buffer((1, 6, 6, 8), "int8"), weight: T.Buffer((3, 3, 8, 16), "int8"), out: T.Buffer((1, 6, 6, 16), "int32")
):
    padded = T.alloc_buffer((1, 8, 8, 8), "int8")
    for n, h, w, c in T.grid(1, 8, 8, 8):
        with T.block("pad"):
            vn, vh, vw, vc = T.remap("SSSS", n, h, w, c)
            padded[vn, vh, vw, vc] = T.if_then_else(
                1 <= vh and vh < 7 and 1 <= vw and vw < 7, data[vn, vh - 1, vw - 1, vc], T.cast(0, "int8")
            )
    for n, h, w, co, rh, rw, ci in T.grid(1, 6, 6, 16, 3, 3, 8):
        with T.block("conv"):
            vn, vh, vw, vco, vrh, vrw, vci = T.remap("SSSSRRR", n, h, w, co, rh, rw, ci)
            with T.init():
                out[vn, vh, vw, vco] = 0
            out[vn, vh, vw, vco] = out[vn, vh, vw, vco] + T.cast(padded[vn, vh + vrh, vw + vrw, vci], "int32") * T.cast(
                weight[vrh, vrw, vci, vco], "int32"
            )


@pytest.fixture(scope="module")
def measurer() -> Iterator[object]:
    """One measuring process for the module's tunes (a process start costs seconds here)."""
    from metasched.measure import Measurer

    made = Measurer(AARCH64, num_threads=1, workers=1, repeat=2)
    try:
        yield made
    finally:
        made.close()


def _sdot_intrinsics() -> set[str]:
    """The AArch64 intrinsics whose implementation calls the ``sdot`` instruction."""
    return {
        name
        for name in TensorIntrin.list(target=Target.parse(AARCH64))
        if "llvm.aarch64.neon.sdot" in TensorIntrin.get(name).impl.script()
    }


def _full_range_arguments(func: tir.PrimFunc, rng: np.random.Generator) -> list[np.ndarray]:
    arrays = []
    for buffer in func.buffer_params:
        shape = tuple(int(s.value) for s in buffer.shape)
        if str(buffer.dtype) == "int8":
            arrays.append(rng.integers(-128, 128, shape).astype(np.int8))
        else:
            arrays.append(np.zeros(shape, np.dtype(str(buffer.dtype))))
    arrays[0].reshape(-1)[:8] = -128  # the extreme products
    return arrays


def _quiet(line: str) -> None:
    pass


@pytest.mark.parametrize("func", [int8_matmul, int8_conv2d_nhwc], ids=["matmul", "conv2d_nhwc"])
def test_tuned_sdot_candidates_are_correct_under_qemu(func: tir.PrimFunc, measurer: object, tmp_path: Path) -> None:
    sdot = _sdot_intrinsics()
    assert sdot, "no sdot intrinsic registered for AArch64"
    result = metasched.tune(
        func,
        AARCH64,
        trials=TRIALS,
        batch_size=TRIALS,
        work_dir=str(tmp_path),
        seed=0,
        measurer=measurer,
        cost_model="random",
        strategy="replay",
        measure_default=False,
        log=_quiet,
    )
    task = result.tasks[0]
    assert task.best_func is not None and task.emulated, result.summary()
    used = {
        arg for i in task.best_trace.instructions if i.kind == "tensorize" for arg in i.args if isinstance(arg, str)
    }
    assert used & sdot, task.best_trace
    # Every measured candidate came from the tensorized space.
    records = [r for r in result.database.records(func, Target.parse(AARCH64).text) if r.is_valid]
    assert len(records) >= 2
    for record in records:
        assert any(name in record.trace_json for name in sdot), record.trace_json

    module = tir.build(task.best_func, AARCH64)
    asm = module.get_source("asm")
    assert any(line.split()[:1] == ["sdot"] for line in asm.splitlines()), asm[:2000]
    args = _full_range_arguments(func, np.random.default_rng(0))
    expected = [a.copy() for a in args]
    tir.interpret(func, *expected)
    got = [a.copy() for a in args]
    module(*got)  # under qemu
    np.testing.assert_array_equal(got[-1], expected[-1])
