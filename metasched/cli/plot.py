"""Tuning curves as a PNG (matplotlib, no display needed): the model's estimated latency against
trials and against wall time, and one curve per task (its best latency against its trials).

Everything is read back from the database (records carry timestamps), so ``metasched db plot``
draws a run long after it ended. The model's latency is the sum over tasks of calls times best
latency so far, drawn from the moment every task has a measurement.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

__all__ = ["plot_tuning"]


def plot_tuning(work_dir: Path, target: str, output: Path, notes: list[Any] | None = None) -> Path:
    """Write the PNG; ``notes`` (``TaskNote``: hash, name, weight) pick and weigh the tasks
    (default: the run log's, else every workload of the database with weight 1)."""
    from metasched.cli.common import CliError

    try:
        import matplotlib
    except ImportError:
        raise CliError("plots need matplotlib: pip install matplotlib (bash scripts/install.sh installs it)") from None
    matplotlib.use("Agg")  # a file, never a window
    import matplotlib.pyplot as plt

    from metasched.cli.runlog import RunLog, TaskNote
    from metasched.database import Database

    database = Database(work_dir)
    if notes is None:
        notes = list(RunLog(work_dir).task_notes(target).values())
    if not notes:
        notes = [TaskNote(key, key[:8], 1.0, 0.0) for key in database.workloads()]
    by_hash = {note.hash: note for note in notes}
    records = sorted(
        (r for r in database.records(target=target) if r.workload_hash in by_hash), key=lambda r: r.timestamp
    )
    if not records:
        raise CliError(f"no tuning records for target {target!r} in {work_dir}: nothing to plot (run metasched tune)")

    start = records[0].timestamp
    best: dict[str, float] = {}
    task_curves: dict[str, tuple[list[int], list[float]]] = {key: ([], []) for key in by_hash}
    task_trials: dict[str, int] = dict.fromkeys(by_hash, 0)
    model_trials: list[int] = []
    model_times: list[float] = []
    model_latency: list[float] = []
    for count, record in enumerate(records, start=1):
        key = record.workload_hash
        task_trials[key] += 1
        if record.is_valid and record.seconds is not None and record.seconds < best.get(key, math.inf):
            best[key] = record.seconds
        if key in best:
            task_curves[key][0].append(task_trials[key])
            task_curves[key][1].append(best[key] * 1e3)
        if len(best) == len(by_hash):
            model_trials.append(count)
            model_times.append(record.timestamp - start)
            model_latency.append(sum(by_hash[k].weight * s for k, s in best.items()) * 1e3)

    figure, (by_trials, by_time, per_task) = plt.subplots(1, 3, figsize=(16, 4.8))
    figure.suptitle(f"metasched tune: {work_dir} ({target})")
    for axes, xs, label in ((by_trials, model_trials, "trials (all tasks)"), (by_time, model_times, "wall time (s)")):
        axes.step(xs, model_latency, where="post", color="tab:blue")
        axes.set_xlabel(label)
        axes.set_ylabel("model latency estimate (ms)")
        axes.grid(alpha=0.3)
    by_trials.set_title("best model latency against trials")
    by_time.set_title("best model latency against wall time")
    shown = sorted(by_hash, key=lambda k: -by_hash[k].weight * best.get(k, 0.0))
    for key in shown:
        xs, ys = task_curves[key]
        if xs:
            per_task.step(xs, ys, where="post", label=by_hash[key].name if key in shown[:10] else None)
    per_task.set_yscale("log")
    per_task.set_xlabel("trials of the task")
    per_task.set_ylabel("best latency (ms, log)")
    per_task.set_title("per task")
    per_task.grid(alpha=0.3)
    if len(shown) > 0:
        per_task.legend(fontsize=7, title="10 largest" if len(shown) > 10 else None)
    figure.tight_layout()
    output.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(output, dpi=90)
    plt.close(figure)
    return output
