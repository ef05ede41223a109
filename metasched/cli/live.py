"""Progress of a tuning run: a live table in a terminal (``rich``), plain periodic lines
anywhere else (a pipe, a log file, CI).

Both draw from ``metasched.TuneStatus``: per task the trials (this run's and the database's
earlier ones), the best latency, GFLOP/s, the task's share of the model's time (weight times
best latency, over the sum) and the gain over its default schedule; for the run the trials
against the budget, the elapsed time, an ETA and the model's estimated latency. A latency timed
under an emulator (an AArch64 target under qemu) is followed by "(qemu)".
"""

from __future__ import annotations

import dataclasses
import math
import sys
import threading
import time
from typing import Any, TextIO

from metasched.cli.common import format_seconds

__all__ = ["LiveTable", "PlainLines", "make_display", "model_estimate", "run_eta"]

_PHASES = {
    "coverage": "measuring default schedules",
    "search": "searching",
    "settle": "re-timing the best programs",
    "done": "done",
    "stopped": "stopped (Ctrl-C)",
}


def model_estimate(tasks: list[Any]) -> tuple[float | None, float | None]:
    """(tuned, default) model latency estimates: the weighted sum of the tasks' best (default)
    latencies, None while some task has no measurement."""
    if not tasks:
        return None, None
    best = [t.weight * t.best_seconds for t in tasks if t.best_seconds]
    default = [t.weight * t.default_seconds for t in tasks if t.default_seconds]
    return (sum(best) if len(best) == len(tasks) else None), (sum(default) if len(default) == len(tasks) else None)


def run_eta(status: Any) -> float | None:
    """Seconds left in the run's budget: the time budget's rest, or the trials' rest at the
    pace so far, whichever comes first."""
    left = []
    if status.time_budget is not None:
        left.append(status.time_budget - status.elapsed)
    if status.trials_budget is not None and status.trials > 0:
        left.append((status.trials_budget - status.trials) * status.elapsed / status.trials)
    return max(0.0, min(left)) if left else None


def _ms(seconds: float | None) -> str:
    return f"{seconds * 1e3:.3f}" if seconds else "-"


def _best_ms(task: Any) -> str:
    """A task's best latency in ms, marked when it was timed under an emulator."""
    text = _ms(task.best_seconds)
    return f"{text} (qemu)" if task.best_seconds and getattr(task, "emulated", False) else text


def _task_rows(tasks: list[Any]) -> list[dict[str, str]]:
    total = sum(t.weight * t.best_seconds for t in tasks if t.best_seconds) or math.inf
    rows = []
    for task in tasks:
        share = task.weight * task.best_seconds / total if task.best_seconds else None
        rows.append(
            {
                "task": task.name,
                "calls": f"{task.weight:g}",
                "trials": f"{task.known_trials + task.trials}",
                "best ms": _best_ms(task),
                "GFLOP/s": f"{task.gflops:.1f}" if task.gflops else "-",
                "share": f"{share * 100:.1f}%" if share is not None else "-",
                "gain": f"{task.gain:.2f}x" if task.gain else "-",
                "_share": f"{share or 0.0}",
            }
        )
    return rows


def _now(status: Any, since: float) -> Any:
    """``status`` with its clock moved on by the seconds since it was reported (the tuner
    reports after each batch; a batch of a large model can take a minute)."""
    if status.phase in ("done", "stopped"):
        return status
    return dataclasses.replace(status, elapsed=status.elapsed + time.monotonic() - since)


def _footer(status: Any) -> str:
    budget = f"/{status.trials_budget}" if status.trials_budget is not None else ""
    parts = [f"{_PHASES.get(status.phase, status.phase)}", f"trials {status.trials}{budget}"]
    parts.append(f"elapsed {format_seconds(status.elapsed)}")
    eta = run_eta(status)
    if eta is not None and status.phase in ("coverage", "search"):
        parts.append(f"ETA {format_seconds(eta)}")
    tuned, default = model_estimate(status.tasks)
    if tuned is not None:
        text = f"model {tuned * 1e3:.3f} ms"
        if default:
            text += f" (default {default * 1e3:.3f} ms, {default / tuned:.2f}x)"
        parts.append(text)
    return " | ".join(parts)


class PlainLines:
    """A line at every phase change and then every ``interval`` seconds, batch or not (a
    heartbeat thread repeats the last state with its clock moved on), for a non-terminal."""

    def __init__(self, stream: TextIO | None = None, interval: float = 10.0) -> None:
        self.stream = stream or sys.stdout
        self.interval = interval
        self._lock = threading.Lock()
        self._last_print = -math.inf
        self._phase = ""
        self._status: Any = None
        self._since = time.monotonic()
        self._stop = threading.Event()
        self._heartbeat = threading.Thread(target=self._beat, name="progress", daemon=True)
        self._heartbeat.start()

    def _print(self, status: Any, task_index: int | None = None) -> None:
        line = f"[{format_seconds(status.elapsed):>6}] {_footer(status)}"
        if task_index is not None:
            task = status.tasks[task_index]
            line += f" | last {task.name}: {task.trials} trials, best {_best_ms(task)} ms"
        print(line, file=self.stream, flush=True)
        self._last_print = time.monotonic()

    def _beat(self) -> None:
        while not self._stop.wait(1.0):
            with self._lock:
                if self._status is not None and time.monotonic() - self._last_print >= self.interval:
                    self._print(_now(self._status, self._since))

    def update(self, status: Any) -> None:
        with self._lock:
            self._status, self._since = status, time.monotonic()
            if status.phase == self._phase and time.monotonic() - self._last_print < self.interval:
                return
            self._phase = status.phase
            self._print(status, status.task_index)

    def log(self, line: str) -> None:
        with self._lock:
            print(line, file=self.stream, flush=True)

    def close(self, status: Any | None = None) -> None:
        self._stop.set()
        self._heartbeat.join()
        if status is not None and status.phase != self._phase:  # the last state, unless just printed
            self._print(status)


class LiveTable:
    """A table redrawn in place (rich's ``Live``), the slowest tasks (largest share) first;
    what does not fit the terminal is summed up in one row."""

    def __init__(self, title: str, console: Any = None, skipped: int = 0) -> None:
        from rich.console import Console
        from rich.live import Live

        self.console = console or Console()
        self.title = title
        self.skipped = skipped
        self.status: Any = None
        self.since = time.monotonic()
        # Rendered afresh at every refresh (not only when a batch reports), so the clock runs.
        self.live = Live(console=self.console, get_renderable=self._render, refresh_per_second=2, transient=False)
        self.live.start()

    def _render(self) -> Any:
        from rich.table import Table

        table = Table(title=self.title, title_justify="left", caption_justify="left", expand=False)
        for column, justify in [
            ("task", "left"),
            ("calls", "right"),
            ("trials", "right"),
            ("best ms", "right"),
            ("GFLOP/s", "right"),
            ("share", "right"),
            ("gain", "right"),
        ]:
            table.add_column(column, justify=justify)  # type: ignore[arg-type]
        if self.status is None:
            table.caption = "importing and preparing tasks..."
            return table
        rows = sorted(_task_rows(self.status.tasks), key=lambda r: -float(r["_share"]))
        room = max(5, self.console.size.height - 10)
        for row in rows[:room]:
            table.add_row(*(row[c] for c in ("task", "calls", "trials", "best ms", "GFLOP/s", "share", "gain")))
        if len(rows) > room:
            table.add_row(f"... {len(rows) - room} more tasks", "", "", "", "", "", "")
        caption = _footer(_now(self.status, self.since))
        if self.skipped:
            caption += f" | {self.skipped} tasks already tuned"
        table.caption = caption
        return table

    def update(self, status: Any) -> None:
        self.status, self.since = status, time.monotonic()
        self.live.refresh()

    def log(self, line: str) -> None:
        self.live.console.print(line, markup=False, highlight=False)

    def close(self, status: Any | None = None) -> None:
        if status is not None:
            self.status, self.since = status, time.monotonic()
        self.live.refresh()
        self.live.stop()


def make_display(title: str, skipped: int = 0, plain: bool | None = None, interval: float = 10.0) -> Any:
    """The live table on a terminal, plain lines elsewhere (or when ``plain``)."""
    if plain is None:
        plain = not sys.stdout.isatty()
    if not plain:
        try:
            return LiveTable(title, skipped=skipped)
        except ImportError:  # rich missing (an install without dependencies): lines still work
            pass
    return PlainLines(interval=interval)
