"""``metasched tune``: tune a model's tasks within a budget, live, stoppable and resumable, then
build the tuned model and compare it with its default schedules and with onnxruntime.

Ctrl-C: the measuring workers never see the terminal's SIGINT (they are started from a thread
that blocks it, and inherit the mask), so only the tuner stops: the batch in flight is dropped,
every finished measurement is already in the database, the summary is printed, exit 130.
"""

from __future__ import annotations

import argparse
import math
import signal
import time
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from metasched.cli.common import (
    DEMO_MODEL,
    CliError,
    HelpFormatter,
    LoadedModel,
    check_target,
    format_seconds,
    load_model,
    open_work_dir,
    parse_duration,
    parse_input_shapes,
    plural,
    random_inputs,
    say,
    warn_if_busy,
)
from metasched.cli.runlog import RunLog, TaskNote

__all__ = ["DEMO_TIME_BUDGET", "add_parser", "run"]

#: The demo's budget: a newcomer sees the final table within about five minutes on 2 cores.
DEMO_TIME_BUDGET = "2m"
#: The budget when a model is given without --trials or --time-budget.
DEFAULT_TIME_BUDGET = "10m"

# Log lines of metasched.tune worth showing without --verbose (the table shows the rest).
_NOTABLE = (
    "not in the design space",
    "fails its check",
    "no new valid candidate",
    "interrupted",
    "re-timed on a busy machine",
)


def add_parser(subparsers: Any, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "tune",
        parents=[common],
        help="tune an ONNX model's kernels within a budget (live table), then compare with onnxruntime",
        description=(
            "Tune every kernel (task) of an ONNX model for this CPU within a budget of trials or time, "
            "recording every measurement in the work directory's database. Every task's default schedule "
            "is measured first, so every task has a measured program at least as fast as its default one; "
            "then a task scheduler "
            "spends the budget where it cuts the model's latency most. Ctrl-C stops cleanly; running the "
            "same command again continues the run, and tasks already tuned for the target are skipped "
            "(--retune tunes them again). At the end the tuned model is built, its outputs are compared with "
            "onnxruntime on random inputs, and its latency with the default schedules' and onnxruntime's. "
            f"Without MODEL: a demo on the onnx package's light_{DEMO_MODEL} (random weights), "
            f"--time-budget {DEMO_TIME_BUDGET}."
        ),
        epilog=(
            "examples:\n"
            "  metasched tune                                   # the demo: squeezenet, 2 minutes\n"
            "  metasched tune model.onnx --time-budget 20m --work-dir tune/\n"
            "  metasched tune model.onnx --input x:1,3,224,224 --trials 500 --threads 2 --plot"
        ),
        formatter_class=HelpFormatter,
    )
    parser.add_argument("model", nargs="?", metavar="MODEL.onnx", help="the model (default: the demo model)")
    parser.add_argument("--target", default="llvm", help="target string (default: llvm, this CPU)")
    parser.add_argument(
        "--input",
        action="append",
        metavar="NAME:D1,D2,...",
        help="an input's shape, for inputs with symbolic dimensions (repeatable)",
    )
    budget = parser.add_mutually_exclusive_group()
    budget.add_argument("--trials", type=int, metavar="N", help="measure N candidates in all")
    budget.add_argument(
        "--time-budget",
        metavar="DURATION",
        help=f"tune for this long, e.g. 20m, 90s, 1h (default {DEFAULT_TIME_BUDGET}; the demo {DEMO_TIME_BUDGET})",
    )
    parser.add_argument(
        "--work-dir", default="metasched-work", metavar="DIR", help="the tuning database (default: metasched-work)"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=2,
        metavar="N",
        help="threads each kernel and the final model run with (default 2)",
    )
    parser.add_argument(
        "--executor",
        default="local",
        metavar="local[:N]|dask://HOST:PORT",
        help="where candidates are measured: local worker processes (default; local:N for N of them), or "
        "the workers of a dask.distributed scheduler (dask://host:8786), one chunk of candidates at a time "
        "per machine (`metasched worker` starts one; once some declare the measure resource, only those "
        "measure)",
    )
    parser.add_argument("--workers", type=int, metavar="N", help="local measuring processes (default: the cores)")
    parser.add_argument(
        "--task-scheduler",
        choices=["gradient", "round-robin"],
        default="gradient",
        help="how trials are spread over tasks (default gradient: where the model gains most)",
    )
    parser.add_argument(
        "--cache",
        choices=["auto", "cold", "warm"],
        default="auto",
        help="time kernels with cold caches (each run after an eviction: the weights come from memory, as in a "
        "model bigger than the caches) or warm; auto (default): cold when the model's weights and largest "
        "activations take more than a quarter of the last-level cache, warm when the whole model stays in it",
    )
    parser.add_argument("--warm-cache", action="store_true", help="the same as --cache warm")
    parser.add_argument("--retune", action="store_true", help="tune tasks already tuned for this target again")
    parser.add_argument("--plot", action="store_true", help="write tuning.png in the work directory")
    parser.add_argument("--seed", type=int, default=0, help="search seed (default 0)")
    parser.add_argument(
        "--repeat",
        type=int,
        metavar="N",
        help="timed runs of each model in the final comparison (default: 20, or as many as take a second, at most 300)",
    )
    parser.add_argument("--no-compare", action="store_true", help="skip the final build and comparison")
    parser.add_argument("--plain", action="store_true", help="plain progress lines even on a terminal")
    parser.add_argument("--verbose", "-v", action="store_true", help="every progress line of the tuner")
    parser.set_defaults(handler=run)


def _block_sigint() -> None:
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


def _make_executor(spec: str, workers: int | None) -> tuple[Executor, int | None]:
    """The executor measurements run on, and the local measuring processes.

    ``local`` / ``local:N``: one thread of this process with SIGINT blocked, so the worker
    processes it starts inherit the blocked signal and survive Ctrl-C (the tuner alone stops,
    and kills them). ``dask://HOST:PORT`` (or ``tcp://``): the measuring workers of that
    dask.distributed scheduler (``metasched.measure.dask_executor``); an address that does not
    answer is a ``CliError`` (``connect``)."""
    if spec == "local" or spec.startswith("local:"):
        count = spec.partition(":")[2]
        if count:
            if not count.isdigit() or int(count) < 1:
                raise CliError(f"--executor {spec!r}: local:N needs N, the measuring processes, at least 1")
            if workers is not None and workers != int(count):
                raise CliError(f"--executor {spec!r} and --workers {workers} disagree; give one of them")
            workers = int(count)
        return ThreadPoolExecutor(max_workers=1, thread_name_prefix="measure", initializer=_block_sigint), workers
    if not spec.startswith(("dask://", "tcp://")):
        raise CliError(f"--executor {spec!r}: give local, local:N or dask://HOST:PORT (a dask scheduler)")
    from metasched.cli.worker import connect

    return connect(spec, "--executor"), workers


def _budget(args: argparse.Namespace, demo: bool) -> tuple[int | None, float | None]:
    if args.trials is not None:
        if args.trials < 1:
            raise CliError(f"--trials {args.trials}: give at least 1")
        return args.trials, None
    text = args.time_budget or (DEMO_TIME_BUDGET if demo else DEFAULT_TIME_BUDGET)
    if args.time_budget is None:
        say(f"no --trials or --time-budget given: --time-budget {text}")
    return None, parse_duration(text)


def run(args: argparse.Namespace) -> int:
    from metasched.database import Database
    from metasched.model import extract_tasks

    target = check_target(args.target)
    shapes = parse_input_shapes(args.input)
    if args.threads < 1:
        raise CliError(f"--threads {args.threads}: give at least 1")
    # The model is imported before the work directory is made: one that fails leaves nothing behind.
    model = None if args.model is None else load_model(args.model, shapes)
    work_dir = open_work_dir(args.work_dir)
    if model is None:
        say(
            f"no model given: the demo, light_{DEMO_MODEL} from the onnx package with random weights "
            f"(written to {work_dir / f'light_{DEMO_MODEL}.onnx'})"
        )
        model = load_model(None, shapes, work_dir)
    trials, time_budget = _budget(args, model.is_demo)
    warn_if_busy()
    tasks = extract_tasks(model.graph, target)
    calls = sum(t.weight for t in tasks)
    flops = sum(t.weight * t.flops for t in tasks)
    work = f"{flops / 1e9:.2f} GFLOP" if flops >= 1e8 else f"{flops / 1e6:.2f} MFLOP"
    say(f"{model.path.name}: {len(tasks)} tasks ({calls:g} kernel calls, {work} per run), target {target!r}")

    runlog = RunLog(work_dir)
    database = Database(work_dir)
    tuned_before = set() if args.retune else runlog.tuned_tasks(target)
    todo = [t for t in tasks if t.key not in tuned_before]
    skipped = len(tasks) - len(todo)
    if skipped:
        say(
            f"{skipped} of {len(tasks)} tasks already tuned for {target!r} in {work_dir}: skipped (--retune tunes them)"
        )

    # Continue a stopped run of this model: its budget counts from that run's start.
    stopped = runlog.stopped_run(model.digest, target)
    budget_given = (trials, time_budget)  # the run's whole budget, as noted in the run log
    began = None
    if stopped is not None and todo:
        began = float(stopped["began"])
        keys = {t.key for t in todo}
        since = [r for r in database.records(target=target) if r.workload_hash in keys and r.timestamp >= began]
        spent_trials = len(since)
        spent_seconds = max((r.timestamp for r in since), default=began) - began
        if trials is not None:
            trials -= spent_trials
        if time_budget is not None:
            time_budget -= spent_seconds
        say(
            f"continuing the run stopped at {time.strftime('%H:%M:%S', time.localtime(float(stopped['time'])))}: "
            f"{plural(spent_trials, 'trial')} ({format_seconds(spent_seconds)}) were measured; "
            + (
                f"{plural(max(trials, 0), 'trial')} to go"
                if trials is not None
                else f"{format_seconds(max(time_budget or 0, 0))} to go"
            )
        )

    notes = [TaskNote(t.key, t.name, t.weight, t.flops) for t in tasks]
    run_id = runlog.start(str(model.path), model.digest, target, *budget_given, notes, began=began)
    result = None
    if todo and ((trials is not None and trials > 0) or (time_budget is not None and time_budget > 0)):
        result = _tune(args, model, todo, target, trials, time_budget, work_dir, skipped)
        _summary(result, work_dir)
        if result.interrupted:
            say(f"stopped: every finished measurement is in {work_dir}; run the same command again to continue")
            return 130
    elif todo:
        say("the budget of this run was spent before it stopped")
    # Only tasks with a measured program count as tuned: a task the budget did not reach is
    # tuned by the next run (and keeps its default schedule meanwhile).
    # A task whose best could not be confirmed by quiet timings (the machine was busy) is not
    # tuned yet either: the next run tunes it again, its recorded leaders re-timed first.
    doubtful = {t.key for t, r in zip(todo, result.tasks) if r.quiet is False} if result is not None else set()
    covered = [t.key for t in todo if database.has(t.func, target) and t.key not in doubtful]
    runlog.finish(run_id, covered, result.trials if result is not None else 0)
    if args.plot:
        from metasched.cli.plot import plot_tuning

        png = plot_tuning(work_dir, target, work_dir / "tuning.png", notes)
        say(f"plot: {png}")
    if not args.no_compare:
        _compare(model, work_dir, target, args.threads, args.repeat)
    _next_steps(model, work_dir, target)
    return 0


def _tune(
    args: argparse.Namespace,
    model: LoadedModel,
    tasks: list[Any],
    target: str,
    trials: int | None,
    time_budget: float | None,
    work_dir: Path,
    skipped: int,
) -> Any:
    import metasched
    from metasched.cli.live import make_display
    from metasched.measure import Measurer
    from metasched.measure.dask_executor import DaskExecutor, NoWorkerError, SchedulerLostError
    from metasched.measure.executors import close_local_pools
    from tir.registrations import RegistrationError

    budget = plural(trials, "trial") if trials is not None else f"{format_seconds(time_budget or 0)}"
    say(f"tuning {len(tasks)} tasks, budget {budget}, {args.threads} threads, work dir {work_dir}")
    executor, workers = _make_executor(args.executor, args.workers)
    cold = _cold_caches(args, model)
    measurer = Measurer(target, executor=executor, num_threads=args.threads, workers=workers, flush_cache=cold)
    display = make_display(f"metasched tune {model.path.name}", skipped=skipped, plain=args.plain or None)
    if isinstance(executor, DaskExecutor):
        executor.log = display.log  # lost workers are told in the table's log, not over it
    last_status: list[Any] = []

    def on_progress(status: Any) -> None:
        last_status[:] = [status]
        display.update(status)

    def log(line: str) -> None:
        if args.verbose or any(mark in line for mark in _NOTABLE):
            display.log(line)

    try:
        result = metasched.tune(
            tasks,
            target,
            trials=trials,
            time_budget=time_budget,
            work_dir=str(work_dir),
            seed=args.seed,
            measurer=measurer,
            task_scheduler=args.task_scheduler,
            log=log,
            on_progress=on_progress,
            stop_on_interrupt=True,
            allow_empty=True,  # a task with no valid program keeps its default schedule (said in the summary)
        )
    except NoWorkerError as error:
        raise CliError(f"--executor {args.executor}: {error}") from None
    except RegistrationError as error:
        raise CliError(str(error)) from None
    except SchedulerLostError:
        raise CliError(
            f"--executor {args.executor}: the dask scheduler went away; the tune stopped, every finished "
            f"measurement is in {work_dir}: run the same command again to continue"
        ) from None
    finally:
        display.close(last_status[0] if last_status else None)
        # Kill the measuring processes now (a batch cut by Ctrl-C may still be running there).
        close_local_pools()
        if isinstance(executor, ThreadPoolExecutor):
            executor.shutdown(wait=True, cancel_futures=True)
        else:
            executor.shutdown(wait=False, cancel_futures=True)
        if isinstance(executor, DaskExecutor):
            executor.client.close()
    return result


def _cold_caches(args: argparse.Namespace, model: LoadedModel) -> bool:
    """Whether kernels are timed with cold caches (``--cache``).

    In a model bigger than the caches a kernel's weights were evicted by the kernels before it,
    and timed warm the tuner favours schedules that re-read a weight panel many times (tuned
    matmuls of BERT ran 20-50% slower cold than warm). In a model that stays in the last-level
    cache, an eviction before every run is what the model never sees: the demo SqueezeNet's
    kernels summed to 7.7 ms timed cold, 2.9 ms warm, and the model ran in 2.9 ms (2-core Xeon,
    260 MiB L3)."""
    mode = "warm" if args.warm_cache else args.cache
    if mode != "auto":
        return mode == "cold"
    from metasched.measure.runner import last_level_cache_bytes

    footprint = model_footprint(model.graph)
    cold = footprint > last_level_cache_bytes() // 4  # other processes share it
    say(
        f"kernels timed with {'cold' if cold else 'warm'} caches: the model's weights and largest activations "
        f"take {footprint / 2**20:.1f} MiB, the last-level cache {last_level_cache_bytes() / 2**20:.0f} MiB "
        "(--cache cold|warm to choose)"
    )
    return cold


def model_footprint(graph: Any) -> int:
    """Bytes a run keeps touching: the weights, and the two largest values (an input and an
    output of the biggest layer); symbolic dimensions at their representative sizes."""
    import numpy as np

    from metasched.model.compiled import representative_graph

    fixed = representative_graph(graph) if graph.symbolic else graph
    weights = sum(int(np.asarray(value).nbytes) for value in fixed.constants.values())
    values = sorted(int(info.nbytes) for info in fixed.infos.values() if all(isinstance(d, int) for d in info.shape))
    return weights + sum(values[-2:])


def _summary(result: Any, work_dir: Path) -> None:
    from metasched.cli.live import model_estimate

    state = "stopped" if result.interrupted else "finished"
    say(f"tuning {state}: {plural(result.trials, 'trial')} in {format_seconds(result.wall_seconds)}")
    tuned, default = model_estimate(result.tasks)
    if tuned is not None and default is not None:
        say(f"estimated model time (sum of kernels): default {default * 1e3:.3f} ms -> tuned {tuned * 1e3:.3f} ms")
    if result.uncovered:
        names = ", ".join(result.uncovered[:6]) + (" ..." if len(result.uncovered) > 6 else "")
        say(
            f"the budget was too small to measure {len(result.uncovered)} of {len(result.tasks)} tasks ({names}): "
            "they keep their default schedule; a larger budget covers them"
        )
    for task in result.tasks:
        if task.best_func is None and (task.trials or task.rejects):
            say(f"{task.name}: no valid program (it keeps its default schedule): {task.failure_text()}")
    noise = result.noise_summary()
    if noise:
        say(("warning: " if not result.trustworthy else "note: ") + noise)
    failures = sum(sum(t.errors.values()) for t in result.tasks)
    if failures:
        kinds: dict[str, int] = {}
        for task in result.tasks:
            for kind, count in task.errors.items():
                kinds[kind] = kinds.get(kind, 0) + count
        say("failed candidates (recorded, never used): " + ", ".join(f"{v} {k}" for k, v in sorted(kinds.items())))


def _comparison_runs(runs: list[Any], feeds: Any) -> int:
    """Timed runs of each contender: 20, or as many as take a second (at most 300). A 3 ms
    model timed 20 times in three blocks gave IQRs of 1.5 ms on a 2-core VM, wider than the
    differences the table reports."""
    start = time.perf_counter()
    for run in runs:
        run(feeds)
    each = (time.perf_counter() - start) / len(runs)
    return int(min(300, max(20, math.ceil(1.0 / max(each, 1e-6)))))


def _compare(model: LoadedModel, work_dir: Path, target: str, threads: int, repeat: int | None) -> None:
    """Build the default and the tuned model, check the tuned one against onnxruntime, and time
    all three at ``threads``."""
    from metasched import model as msm
    from metasched.cli.report import Timing, compare_outputs, ort_session, print_table, time_contenders

    say("building the model with default schedules and with the tuned ones...")
    default = msm.compile(model.graph, target, database=None, threads=threads)
    tuned = msm.compile(model.graph, target, database=str(work_dir), threads=threads)
    assert tuned.report is not None  # compile() always sets it
    sources = tuned.report.sources()
    say("tuned model: " + ", ".join(f"{count} tasks {source}" for source, count in sources.items()))
    for warning in tuned.report.warnings:
        say(f"warning: {warning}")
    for compiled in (default, tuned):
        compiled.set_threads(threads)
    feeds = random_inputs(model.graph)
    session = ort_session(model.proto, threads)
    ours = tuned.run(feeds)
    if session is None:
        say("onnxruntime is not installed: no output check and no onnxruntime timing (pip install onnxruntime)")
    else:
        names = [o.name for o in session.get_outputs()]
        theirs = dict(zip(names, session.run(None, feeds)))
        for name, worst, relative in compare_outputs(ours, theirs):
            verdict = "ok" if relative < 1e-3 else "DIFFERS"
            say(f"output {name!r} vs onnxruntime: max abs diff {worst:.3g}, max rel diff {relative:.3g} ({verdict})")
    contenders = {"default schedules": lambda: default.run(feeds), "tuned": lambda: tuned.run(feeds)}
    if session is not None:
        contenders["onnxruntime"] = lambda: session.run(None, feeds)
    if repeat is None:
        repeat = _comparison_runs([default.run, tuned.run], feeds)
    timings: dict[str, Timing] = time_contenders(contenders, repeat)
    base = timings["tuned"].median
    rows = []
    for name, timing in timings.items():
        speed = timing.median / base if base > 0 else math.nan
        rows.append(
            [name, f"{timing.median * 1e3:.3f}", f"{timing.low * 1e3:.3f}-{timing.high * 1e3:.3f}", f"{speed:.2f}x"]
        )
    print_table(
        f"latency at {threads} thread{'s' if threads > 1 else ''} (median of {repeat} runs)",
        ["model", "median ms", "IQR ms", "tuned is faster by"],
        rows,
    )
    if session is not None:
        say(
            f"speedup: tuned vs default {timings['default schedules'].median / base:.2f}x, "
            f"tuned vs onnxruntime {timings['onnxruntime'].median / base:.2f}x"
        )


def _next_steps(model: LoadedModel, work_dir: Path, target: str) -> None:
    target_flag = "" if target == "llvm" else f" --target '{target}'"
    say("next:")
    say(f"  metasched compile {model.path} --work-dir {work_dir}{target_flag} -o {model.name}.out")
    say(f"  metasched bench {model.name}.out --threads 1,2")
    say(f"  metasched db list --work-dir {work_dir}")
