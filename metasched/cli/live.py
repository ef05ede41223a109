"""Progress of a tuning run: a live table in a terminal (``rich``), plain periodic lines
anywhere else (a pipe, a log file, CI).

Both draw from ``metasched.TuneStatus``: per task the trials (this run's and the database's
earlier ones), the best latency, GFLOP/s, the task's share of the model's time (weight times
best latency, over the sum) and the gain over its default schedule; for the run the trials
against the budget, the elapsed time, an ETA and the model's estimated latency.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any, TextIO

from metasched.cli.common import format_seconds

__all__ = ["LiveTable", "PlainLines", "make_display", "model_estimate", "run_eta"]

_PHASES = {
    "coverage": "measuring default schedules",
    "search": "searching",
    "settle": "re-timing the best programs",
    "done": "done",
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
                "best ms": _ms(task.best_seconds),
                "GFLOP/s": f"{task.gflops:.1f}" if task.gflops else "-",
                "share": f"{share * 100:.1f}%" if share is not None else "-",
                "gain": f"{task.gain:.2f}x" if task.gain else "-",
                "_share": f"{share or 0.0}",
            }
        )
    return rows


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
    """One line per ``interval`` seconds (and at every phase change) for a non-terminal."""

    def __init__(self, stream: TextIO | None = None, interval: float = 10.0, verbose: bool = False) -> None:
        self.stream = stream or sys.stdout
        self.interval = interval
        self.verbose = verbose
        self._last = -math.inf
        self._phase = ""

    def update(self, status: Any) -> None:
        now = time.monotonic()
        if status.phase == self._phase and now - self._last < self.interval:
            return
        self._last, self._phase = now, status.phase
        line = f"[{format_seconds(status.elapsed):>6}] {_footer(status)}"
        if status.task_index is not None:
            task = status.tasks[status.task_index]
            line += f" | last {task.name}: {task.trials} trials, best {_ms(task.best_seconds)} ms"
        print(line, file=self.stream, flush=True)

    def log(self, line: str) -> None:
        print(line, file=self.stream, flush=True)

    def close(self, status: Any | None = None) -> None:
        if status is not None and status.phase != self._phase:  # the last state, unless just printed
            print(f"[{format_seconds(status.elapsed):>6}] {_footer(status)}", file=self.stream, flush=True)


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
        self.live = Live(self._render(), console=self.console, refresh_per_second=4, transient=False)
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
        caption = _footer(self.status)
        if self.skipped:
            caption += f" | {self.skipped} tasks already tuned"
        table.caption = caption
        return table

    def update(self, status: Any) -> None:
        self.status = status
        self.live.update(self._render())

    def log(self, line: str) -> None:
        self.live.console.print(line, markup=False, highlight=False)

    def close(self, status: Any | None = None) -> None:
        if status is not None:
            self.status = status
            self.live.update(self._render())
        self.live.stop()


def make_display(title: str, skipped: int = 0, plain: bool | None = None, interval: float = 10.0) -> Any:
    """The live table on a terminal, plain lines elsewhere (or when ``plain``)."""
    if plain is None:
        plain = not sys.stdout.isatty()
    if plain:
        return PlainLines(interval=interval)
    return LiveTable(title, skipped=skipped)
