"""The command line's own notes in a work directory, next to the tuning database: which model
runs started and finished there (``cli-runs.jsonl``, one JSON object a line).

A run that finished marks its tasks as tuned for its target: the next ``metasched tune`` skips
them unless ``--retune``. A run that started and never finished (Ctrl-C, a killed process) is
continued by the next run of the same model and target: its budget counts from the stopped
run's start, measured by the records the database holds since then.

The database itself (``metasched.Database``) stays the truth about measurements; this file only
says what the runs meant to do. A cut last line (a killed writer) is skipped.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["RUNLOG_NAME", "RunLog", "TaskNote"]

RUNLOG_NAME = "cli-runs.jsonl"


@dataclass(frozen=True)
class TaskNote:
    """A task as a run saw it: what the database alone does not know (its name in the model,
    how many times the model calls it, its FLOPs)."""

    hash: str
    name: str
    weight: float
    flops: float


class RunLog:
    def __init__(self, work_dir: Path) -> None:
        self.path = Path(work_dir) / RUNLOG_NAME

    def events(self) -> list[dict[str, Any]]:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return []
        events = []
        for line in text.splitlines():
            try:
                item = json.loads(line)
            except ValueError:
                continue  # a line cut by a killed writer
            if isinstance(item, dict) and "event" in item:
                events.append(item)
        return events

    def _append(self, item: dict[str, Any]) -> None:
        line = json.dumps(item, separators=(",", ":")) + "\n"
        with open(self.path, "a") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())

    def start(
        self,
        model: str,
        digest: str,
        target: str,
        trials: int | None,
        time_budget: float | None,
        tasks: list[TaskNote],
        began: float | None = None,
    ) -> str:
        """Note a run's start; returns its id. ``began``: the start of the stopped run this one
        continues (its budget counts from then)."""
        now = time.time()
        run_id = f"{int(now * 1000):x}"
        self._append(
            {
                "event": "start",
                "run": run_id,
                "time": now,
                "began": began if began is not None else now,
                "model": model,
                "digest": digest,
                "target": target,
                "trials": trials,
                "time_budget": time_budget,
                "tasks": [note.__dict__ for note in tasks],
            }
        )
        return run_id

    def finish(self, run_id: str, tuned: list[str], trials: int) -> None:
        """Note that a run spent its budget: its tasks (hashes) count as tuned."""
        self._append({"event": "finish", "run": run_id, "time": time.time(), "tuned": tuned, "trials": trials})

    def tuned_tasks(self, target: str) -> set[str]:
        """Hashes of tasks some finished run tuned for ``target``."""
        starts = {e["run"]: e for e in self.events() if e["event"] == "start"}
        tuned: set[str] = set()
        for event in self.events():
            if event["event"] == "finish" and starts.get(event["run"], {}).get("target") == target:
                tuned.update(event.get("tuned", []))
        return tuned

    def stopped_run(self, digest: str, target: str) -> dict[str, Any] | None:
        """The latest run of this model and target when it never finished, else None."""
        events = self.events()
        finished = {e["run"] for e in events if e["event"] == "finish"}
        runs = [e for e in events if e["event"] == "start" and e.get("digest") == digest and e.get("target") == target]
        if runs and runs[-1]["run"] not in finished:
            return runs[-1]
        return None

    def task_notes(self, target: str | None = None) -> dict[str, TaskNote]:
        """What the latest runs said of each task (by hash), for ``target`` when given."""
        notes: dict[str, TaskNote] = {}
        for event in self.events():
            if event["event"] != "start" or (target is not None and event.get("target") != target):
                continue
            for item in event.get("tasks", []):
                notes[item["hash"]] = TaskNote(item["hash"], item["name"], item["weight"], item["flops"])
        return notes

    def latest_run(self, target: str | None = None) -> dict[str, Any] | None:
        runs = [e for e in self.events() if e["event"] == "start" and (target is None or e.get("target") == target)]
        return runs[-1] if runs else None
