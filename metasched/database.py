"""The tuning database: every measured candidate, as versioned JSON lines in a directory.

    db = Database("tune/")                 # tune/workloads.jsonl, tune/records.jsonl
    key = db.commit_workload(func)         # the structural hash of the unscheduled program
    db.commit_record(TuningRecord(key, "llvm", trace_json, seconds=1.2e-3))
    db.get_top_k(func, "llvm", 5)          # valid records, fastest first
    db.workload(key)                       # the unscheduled program back

Each line is one JSON object with ``"version": 1``. Appends are one ``os.write`` of a whole line on a
file opened with ``O_APPEND`` under an exclusive ``flock``, so two processes appending at once
never interleave, and a process killed mid-write leaves at most one cut line at the end, which
loading skips with a warning (reads take the shared lock, so a line being written is never
mistaken for a cut one). A Database re-reads what other processes appended when queried.
Records are keyed by workload hash and the full target string: a schedule tuned for one target
is never applied to another.

A record timed under an emulator (an AArch64 target run under qemu on an x86-64 machine) says
``"emulated": true``; records without the field (all older ones) were timed natively. Ranking
(``get_top_k``) uses emulated timings only for a workload and target with no native timing.
Likewise a record says how much other processes disturbed its timing (``"load"``, ``"stall"``:
``metasched.measure.noise``); ranking uses a busy timing only for a program with no quiet one,
at its quiet estimate.
"""

from __future__ import annotations

import fcntl
import json
import os
import statistics
import time
import warnings
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, cast

from metasched.task import workload_hash
from tir.ir import PrimFunc
from tir.target import Target

__all__ = ["Database", "DatabaseError", "TuningRecord"]

VERSION = 1

# Error kinds after which a program's other measurements are not trusted.
_UNTRUSTED = frozenset({"wrong", "crash"})


class DatabaseError(ValueError):
    """A database directory that cannot be used (not a directory, a file of another version)."""


@dataclass(frozen=True)
class TuningRecord:
    """One measured candidate. ``seconds`` is None and ``error_kind`` set when it failed."""

    workload_hash: str
    target: str
    trace_json: str
    seconds: float | None
    error_kind: str | None = None
    error_msg: str = ""
    timestamp: float = 0.0
    emulated: bool = False  # timed under an emulator (qemu), not on the target's hardware
    # How much other processes disturbed the timing (``metasched.measure.noise``); None: not
    # counted (older records, other systems).
    load: float | None = None
    stall: float | None = None
    # The task's default schedule (the rules' choice): a tuned program must beat it clearly
    # to be used (``metasched.apply_database``).
    default: bool = False

    @property
    def is_valid(self) -> bool:
        return self.error_kind is None and self.seconds is not None

    @property
    def busy(self) -> bool:
        """A timing taken while other processes kept the CPU busy."""
        from metasched.measure.noise import is_busy

        return self.is_valid and is_busy(self.load)


def _key(func_or_hash: PrimFunc | str) -> str:
    return func_or_hash if isinstance(func_or_hash, str) else workload_hash(func_or_hash)


class _JsonLines:
    """One append-only JSON-lines file, read incrementally."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0

    def append(self, item: dict[str, Any]) -> None:
        line = (json.dumps({"version": VERSION, **item}, separators=(",", ":")) + "\n").encode()
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                _heal_cut_line(fd)
                os.write(fd, line)
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def new_items(self) -> Iterator[dict[str, Any]]:
        """Lines appended since the last call. Read under a shared lock: writers hold the
        exclusive one for their whole write, so a last line without its newline was cut by a
        killed writer; it is skipped with a warning (the next append ends it, see
        ``_heal_cut_line``, and the empty line that leaves is skipped too)."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            try:
                size = os.fstat(fd).st_size
                data = os.pread(fd, size - self._offset, self._offset) if size > self._offset else b""
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
        self._offset += len(data)
        lines = data.split(b"\n")
        if lines[-1]:
            warnings.warn(
                f"{self.path}: skipping a line cut short by a killed writer ({lines[-1][:60]!r}...)", stacklevel=3
            )
        for raw in lines[:-1]:
            if not raw.strip():
                continue
            try:
                item = json.loads(raw)
            except ValueError:
                warnings.warn(f"{self.path}: skipping a damaged line ({raw[:60]!r}...)", stacklevel=3)
                continue
            if not isinstance(item, dict) or item.get("version") != VERSION:
                warnings.warn(f"{self.path}: skipping a line of another version ({raw[:60]!r}...)", stacklevel=3)
                continue
            yield item


def _heal_cut_line(fd: int) -> None:
    """A writer killed mid-line leaves the file without a final newline: end that cut line, so
    the next record starts on a line of its own (the cut one is skipped when read)."""
    size = os.fstat(fd).st_size
    if size == 0:
        return
    if os.pread(fd, 1, size - 1) != b"\n":
        os.write(fd, b"\n")


class Database:
    """Tuning records of a directory (created when missing). See the module docstring."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if self.path.exists() and not self.path.is_dir():
            raise DatabaseError(f"tuning database {self.path} is not a directory")
        self.path.mkdir(parents=True, exist_ok=True)
        self._workload_file = _JsonLines(self.path / "workloads.jsonl")
        self._record_file = _JsonLines(self.path / "records.jsonl")
        self._workloads: dict[str, str] = {}  # hash -> printed program
        self._records: dict[str, list[TuningRecord]] = {}  # hash -> records in commit order
        self._funcs: dict[str, PrimFunc] = {}
        self._refresh()

    def __repr__(self) -> str:
        return f"Database({str(self.path)!r}: {len(self._workloads)} workloads, {len(self)} records)"

    def _refresh(self) -> None:
        for item in self._workload_file.new_items():
            if isinstance(item.get("hash"), str) and isinstance(item.get("script"), str):
                self._workloads.setdefault(item["hash"], item["script"])
        for item in self._record_file.new_items():
            try:
                record = TuningRecord(
                    workload_hash=str(item["workload_hash"]),
                    target=str(item["target"]),
                    trace_json=str(item["trace_json"]),
                    seconds=None if item.get("seconds") is None else float(item["seconds"]),
                    error_kind=item.get("error_kind"),
                    error_msg=str(item.get("error_msg", "")),
                    timestamp=float(item.get("timestamp", 0.0)),
                    emulated=bool(item.get("emulated", False)),
                    load=None if item.get("load") is None else float(item["load"]),
                    stall=None if item.get("stall") is None else float(item["stall"]),
                    default=bool(item.get("default", False)),
                )
            except (KeyError, TypeError, ValueError):
                warnings.warn(f"{self._record_file.path}: skipping a record with missing fields", stacklevel=2)
                continue
            self._records.setdefault(record.workload_hash, []).append(record)

    # ---------------------------------------------------------------- writing

    def commit_workload(self, func: PrimFunc) -> str:
        """Record the unscheduled program (once); returns its hash."""
        self._refresh()
        key = workload_hash(func)
        if key not in self._workloads:
            script = func.script()
            self._workload_file.append({"hash": key, "name": func.name, "script": script})
            self._workloads[key] = script
            self._funcs[key] = func
        return key

    def commit_record(self, record: TuningRecord) -> None:
        """Append one measured candidate; it is on disk when this returns."""
        if not record.timestamp:
            record = TuningRecord(**{**asdict(record), "timestamp": time.time()})
        item = asdict(record)
        if not item["emulated"]:
            del item["emulated"]  # native timings keep the format older readers know
        for optional in ("load", "stall"):
            if item[optional] is None:
                del item[optional]
        if not item["default"]:
            del item["default"]
        self._record_file.append(item)
        self._refresh()  # reads our own line back (and anything others appended)

    # ---------------------------------------------------------------- reading

    def __len__(self) -> int:
        self._refresh()
        return sum(len(records) for records in self._records.values())

    def workloads(self) -> list[str]:
        self._refresh()
        return list(self._workloads)

    def workload(self, workload_hash: str) -> PrimFunc:
        """The unscheduled program of a workload hash."""
        self._refresh()
        if workload_hash not in self._funcs:
            if workload_hash not in self._workloads:
                raise KeyError(f"no workload {workload_hash} in {self.path}")
            import tir

            func = tir.parse(self._workloads[workload_hash])
            assert isinstance(func, PrimFunc)
            self._funcs[workload_hash] = func
        return self._funcs[workload_hash]

    def records(
        self, func_or_hash: PrimFunc | str | None = None, target: str | Target | None = None
    ) -> list[TuningRecord]:
        """Records in commit order, of one workload and/or target (its full text) when given."""
        self._refresh()
        if func_or_hash is None:
            found = [r for records in self._records.values() for r in records]
        else:
            found = list(self._records.get(_key(func_or_hash), []))
        text = None if target is None else str(target)
        return [r for r in found if text is None or r.target == text]

    def get_top_k(self, func_or_hash: PrimFunc | str, target: str | Target, k: int) -> list[TuningRecord]:
        """The ``k`` fastest programs of a workload for ``target``, one record each.

        A program measured more than once (the tuner re-times its best few at the end) counts
        with the median of its valid measurements, so one lucky measurement cannot make it the
        best; a program that ever computed a wrong result or crashed is left out. Timings under
        an emulator count only when the workload has no native timing for ``target``. A timing
        taken on a busy machine (``TuningRecord.busy``) counts only for a program with no quiet
        timing, and then at its quiet estimate (``noise.quiet_estimate``): load slows a
        parallel program more than a serial one, so raw busy timings rank programs wrongly."""
        from metasched.measure.noise import quiet_estimate

        records = self.records(func_or_hash, target)
        if any(r.emulated and r.is_valid for r in records) and any(not r.emulated and r.is_valid for r in records):
            records = [r for r in records if not (r.emulated and r.is_valid)]
        quiet_programs = {r.trace_json for r in records if r.is_valid and not r.busy}
        counted = []
        for record in records:
            if not record.busy:
                counted.append(record)
            elif record.trace_json not in quiet_programs:
                counted.append(replace(record, seconds=quiet_estimate(record.seconds, record.stall)))  # type: ignore[arg-type]
        records = counted
        groups: dict[str, list[TuningRecord]] = {}
        for record in records:
            groups.setdefault(record.trace_json, []).append(record)
        programs = []
        for group in groups.values():
            if any(r.error_kind in _UNTRUSTED for r in group):
                continue
            valid = sorted((r for r in group if r.is_valid), key=lambda r: r.seconds)  # type: ignore[arg-type, return-value]
            if valid:
                # valid records have seconds
                programs.append(replace(valid[0], seconds=statistics.median(cast(float, r.seconds) for r in valid)))
        programs.sort(key=lambda r: r.seconds)  # type: ignore[arg-type, return-value]
        return programs[:k]

    def has(self, func_or_hash: PrimFunc | str, target: str | Target) -> bool:
        """Whether the workload has a valid record for ``target`` (it was tuned there)."""
        return bool(self.get_top_k(func_or_hash, target, 1))
