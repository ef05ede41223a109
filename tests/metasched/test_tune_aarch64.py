"""metasched.tune for an AArch64 target on this x86-64 machine: candidates cross-compiled, run
under qemu, checked, and their timings marked emulated (database records, results, printed
lines); old database records load as native; a machine without the tools is a one-line error.

The qemu tests are kept tiny (a 16 x 16 x 16 matmul, a handful of trials): each candidate is
linked with the cross gcc and run in its own qemu process.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

import metasched
import tir
import tir.script as T
from metasched.database import Database, TuningRecord
from metasched.measure import MeasureInput, Measurer
from metasched.measure.runner import make_arguments
from metasched.tune import EMULATED_NOTE
from tir.runtime.aarch64 import AArch64ToolchainError
from tir.target import Target

AARCH64 = "llvm -mtriple=aarch64-linux-gnu -mattr=+neon,+dotprod"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@T.script
def small_matmul(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")):
    for i, j, k in T.grid(16, 16, 16):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]


@pytest.mark.usefixtures("qemu_aarch64")
def test_tune_for_aarch64_runs_under_qemu_and_marks_timings_emulated(tmp_path: Path) -> None:
    lines: list[str] = []
    result = metasched.tune(
        small_matmul,
        AARCH64,
        trials=4,
        batch_size=4,
        work_dir=str(tmp_path),
        seed=0,
        num_threads=1,
        cost_model="random",
        strategy="replay",  # the evolutionary search's population costs more than the qemu runs
        log=lines.append,
    )
    task = result.tasks[0]
    assert result.trials == 4
    assert task.best_func is not None and task.best_seconds is not None and task.emulated
    # The best program is correct on AArch64 (under qemu) and agrees with numpy.
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 16, 16), dtype=np.float32)
    c = np.zeros((16, 16), np.float32)
    tir.build(task.best_func, AARCH64)(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    # Every valid record says it was emulated, on disk too; the best comes back from the database.
    database = Database(tmp_path)
    records = database.records(small_matmul, Target.parse(AARCH64).text)
    valid = [r for r in records if r.is_valid]
    assert len(records) >= 4 and valid and all(r.emulated for r in valid)
    lines_on_disk = [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    assert all(item.get("emulated") is True for item in lines_on_disk if item.get("seconds") is not None)
    assert database.get_top_k(small_matmul, Target.parse(AARCH64).text, 1)[0].emulated
    # What the tuner prints says so.
    assert any("run under qemu" in line for line in lines)
    assert any(EMULATED_NOTE in line for line in lines if "default schedule" in line or "best" in line)
    assert EMULATED_NOTE in result.summary()


def _sdot_example() -> ModuleType:
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    name = "tir_examples_int8_matmul_sdot"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, EXAMPLES / "int8_matmul_sdot.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@T.script
def shifted_int8_matmul(A: T.Buffer((8, 16), "int8"), B: T.Buffer((16, 16), "int8"), C: T.Buffer((8, 16), "int32")):
    for i, j, r in T.grid(8, 16, 16):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, r)
            with T.init():
                C[vi, vj] = 1  # one more than a matmul: no correct matmul matches it
            C[vi, vj] = C[vi, vj] + T.cast(A[vi, vk], "int32") * T.cast(B[vk, vj], "int32")


@pytest.mark.usefixtures("qemu_aarch64")
def test_sdot_tensorized_int8_matmul_is_measured_and_checked_under_qemu() -> None:
    example = _sdot_example()
    func = example.make_int8_matmul(8, 16, 16)
    tensorized = example.schedule_int8_matmul(func, rows=4, panels=2).func
    assert "llvm.aarch64.neon.sdot" in tensorized.script()
    with Measurer(AARCH64, num_threads=1, workers=1, repeat=2) as measurer:
        good, bad = measurer.measure(
            [
                MeasureInput(tensorized, AARCH64, reference=func),
                MeasureInput(tensorized, AARCH64, reference=shifted_int8_matmul),
            ]
        )
    assert good.error_kind is None, good.error_msg
    assert good.seconds is not None and good.seconds > 0 and good.emulated
    # The outputs are checked under qemu too: against another program, the same candidate is wrong.
    assert bad.error_kind == "wrong" and bad.seconds is None and "differs" in bad.error_msg


def test_missing_tools_are_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    if Target.host().isa == "aarch64":
        pytest.skip("this machine is AArch64: it needs no emulator")
    monkeypatch.setenv("TIR_QEMU_AARCH64", "qemu-aarch64-not-installed")
    with pytest.raises(AArch64ToolchainError) as caught:
        Measurer(AARCH64)
    message = str(caught.value)
    assert "\n" not in message
    assert "cannot measure target" in message and "qemu-aarch64-not-installed (package qemu-user)" in message
    with pytest.raises(AArch64ToolchainError, match="qemu-aarch64-not-installed"):
        metasched.tune(small_matmul, AARCH64, trials=1, log=lambda line: None)
    Measurer("llvm").close()  # the host target needs no emulator


# ---------------------------------------------------------------- the database field


def test_old_records_load_as_native_and_emulated_ones_round_trip(tmp_path: Path) -> None:
    old_line = {
        "version": 1,
        "workload_hash": "w1",
        "target": "llvm",
        "trace_json": "[]",
        "seconds": 0.5,
        "error_kind": None,
        "error_msg": "",
        "timestamp": 1.0,
    }
    (tmp_path / "records.jsonl").write_text(json.dumps(old_line) + "\n")
    database = Database(tmp_path)
    [record] = database.records("w1")
    assert record.seconds == 0.5 and record.emulated is False
    database.commit_record(TuningRecord("w1", "llvm", "[1]", 0.25, timestamp=2.0))
    database.commit_record(TuningRecord("w1", "llvm", "[2]", 0.125, timestamp=3.0, emulated=True))
    lines = [json.loads(line) for line in (tmp_path / "records.jsonl").read_text().splitlines()]
    assert "emulated" not in lines[1] and lines[2]["emulated"] is True  # native lines keep the old format
    again = Database(tmp_path)
    assert [r.emulated for r in again.records("w1")] == [False, False, True]


def test_native_timings_rank_before_emulated_ones(tmp_path: Path) -> None:
    database = Database(tmp_path)
    database.commit_record(TuningRecord("w", "t", "[1]", 0.5, timestamp=1.0))
    database.commit_record(TuningRecord("w", "t", "[2]", 0.1, timestamp=2.0, emulated=True))
    # The emulated 0.1 s is not comparable with the native 0.5 s: only native timings rank.
    assert [r.trace_json for r in database.get_top_k("w", "t", 5)] == ["[1]"]
    # A workload timed only under emulation ranks by those timings.
    database.commit_record(TuningRecord("v", "t", "[3]", 0.3, timestamp=3.0, emulated=True))
    database.commit_record(TuningRecord("v", "t", "[4]", 0.2, timestamp=4.0, emulated=True))
    top = database.get_top_k("v", "t", 5)
    assert [r.trace_json for r in top] == ["[4]", "[3]"] and all(r.emulated for r in top)


# ---------------------------------------------------------------- measuring inputs


def test_declared_value_ranges_drive_the_measuring_inputs() -> None:
    @T.script
    def add(A: T.Buffer((64,), "uint8"), B: T.Buffer((64,), "int8"), C: T.Buffer((64,), "int32")):
        T.func_attr({"value_ranges": {"A": (100, 255)}})
        for i in range(64):
            with T.block("C"):
                vi = T.spatial_axis(64, i)
                C[vi] = T.cast(A[vi], "int32") + T.cast(B[vi], "int32")

    arrays, outputs = make_arguments(add)
    assert outputs == [2]
    assert arrays[0].min() >= 100 and arrays[0].max() > 200  # the declared range, all of it
    assert -8 <= arrays[1].min() and arrays[1].max() < 8  # undeclared narrow integers as before
