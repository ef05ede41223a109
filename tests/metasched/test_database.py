"""The tuning database: JSON lines that round-trip, survive a cut last line, and take appends
from two processes at once without interleaving."""

from __future__ import annotations

import json
import multiprocessing
import warnings

import pytest

import tir
from metasched.database import Database, DatabaseError, TuningRecord
from metasched.task import workload_hash

PROGRAM = tir.parse(
    """
import tir.script as T
@T.script
def scale(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B"):
            vi = T.spatial_axis(8, i)
            B[vi] = A[vi] * 2.0
"""
)


def _record(
    seconds: float | None, target: str = "llvm", kind: str | None = None, program: str | None = None
) -> TuningRecord:
    """A record of a program named ``program`` (default: one program per ``seconds`` value)."""
    trace = json.dumps({"version": 1, "instructions": [], "program": program or str(seconds)})
    return TuningRecord(workload_hash(PROGRAM), target, trace, seconds, kind)


def test_records_round_trip_and_top_k_is_fastest_valid_first(tmp_path) -> None:  # noqa: ANN001
    db = Database(tmp_path)
    key = db.commit_workload(PROGRAM)
    assert db.commit_workload(PROGRAM) == key  # once
    for seconds in (3e-3, 1e-3, 2e-3):
        db.commit_record(_record(seconds))
    db.commit_record(_record(None, kind="crash"))
    db.commit_record(_record(5e-4, target="llvm -mcpu=x86-64"))
    again = Database(tmp_path)
    assert len(again) == 5
    assert [r.seconds for r in again.get_top_k(PROGRAM, "llvm", 2)] == [1e-3, 2e-3]
    assert [r.seconds for r in again.get_top_k(key, "llvm -mcpu=x86-64", 5)] == [5e-4]
    assert again.has(PROGRAM, "llvm") and not again.has(PROGRAM, "llvm -mcpu=haswell")
    assert tir.structural_equal(again.workload(key), PROGRAM)
    assert [r.error_kind for r in again.records(PROGRAM, "llvm")] == [None, None, None, "crash"]
    assert all(r.timestamp > 0 for r in again.records())


def test_a_line_cut_by_a_killed_process_is_skipped_not_fatal(tmp_path) -> None:  # noqa: ANN001
    db = Database(tmp_path)
    db.commit_workload(PROGRAM)
    db.commit_record(_record(1e-3))
    with open(tmp_path / "records.jsonl", "a") as handle:
        handle.write('{"version": 1, "workload_hash": "ab')  # killed mid-write
    with open(tmp_path / "workloads.jsonl", "a") as handle:
        handle.write('{"version": 1, "hash": "cd')
    with pytest.warns(UserWarning, match="cut short by a killed writer"):
        reopened = Database(tmp_path)
    assert len(reopened) == 1 and len(reopened.workloads()) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the cut line is reported once, not again after the next append
        reopened.commit_record(_record(2e-3))  # the next append starts on a line of its own
        assert [r.seconds for r in reopened.records()] == [1e-3, 2e-3]
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert len(Database(tmp_path)) == 2
    lines = (tmp_path / "records.jsonl").read_text().splitlines()
    assert len(lines) == 3 and json.loads(lines[-1])["seconds"] == 2e-3


def test_damaged_and_other_version_lines_are_skipped_with_a_warning(tmp_path) -> None:  # noqa: ANN001
    Database(tmp_path).commit_record(_record(1e-3))
    with open(tmp_path / "records.jsonl", "a") as handle:
        handle.write("not json\n")
        handle.write(json.dumps({"version": 99, "future": True}) + "\n")
    with pytest.warns(UserWarning) as caught:
        db = Database(tmp_path)
    assert len(db) == 1
    assert any("damaged" in str(w.message) for w in caught) and any("another version" in str(w.message) for w in caught)


def test_an_open_database_sees_what_another_one_appended(tmp_path) -> None:  # noqa: ANN001
    first, second = Database(tmp_path), Database(tmp_path)
    key = first.commit_workload(PROGRAM)
    first.commit_record(_record(3e-3))
    assert second.has(key, "llvm") and len(second) == 1
    second.commit_record(_record(1e-3))
    assert [r.seconds for r in first.get_top_k(PROGRAM, "llvm", 5)] == [1e-3, 3e-3]
    assert tir.structural_equal(second.workload(key), PROGRAM)


def test_a_file_where_the_directory_should_be_is_a_clear_error(tmp_path) -> None:  # noqa: ANN001
    path = tmp_path / "db"
    path.write_text("x")
    with pytest.raises(DatabaseError, match="is not a directory"):
        Database(path)


def _append_many(path: str, start: int) -> None:
    db = Database(path)
    for n in range(start, start + 200):
        db.commit_record(_record(float(n), kind=None))


def test_two_processes_appending_at_once_give_whole_lines(tmp_path) -> None:  # noqa: ANN001
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=_append_many, args=(str(tmp_path), k * 1000)) for k in (1, 2)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(60)
    lines = (tmp_path / "records.jsonl").read_text().splitlines()
    assert len(lines) == 400
    assert sorted(json.loads(line)["seconds"] for line in lines) == [
        float(n) for k in (1, 2) for n in range(k * 1000, k * 1000 + 200)
    ]
    assert len(Database(tmp_path)) == 400


def test_a_program_measured_again_counts_with_its_median_and_a_wrong_one_not_at_all(tmp_path) -> None:  # noqa: ANN001
    db = Database(tmp_path)
    db.commit_workload(PROGRAM)
    for seconds in (1.0e-3, 3.0e-3, 3.2e-3):  # one lucky measurement among slower ones
        db.commit_record(_record(seconds, program="lucky"))
    db.commit_record(_record(2.0e-3, program="steady"))
    db.commit_record(_record(0.5e-3, program="flaky"))
    db.commit_record(_record(None, kind="wrong", program="flaky"))
    top = db.get_top_k(PROGRAM, "llvm", 5)
    assert [(json.loads(r.trace_json)["program"], r.seconds) for r in top] == [("steady", 2.0e-3), ("lucky", 3.0e-3)]
