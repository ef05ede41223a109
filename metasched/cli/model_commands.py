"""``metasched compile``, ``run`` and ``bench``: a tuned model built and saved, run on numpy
files, and timed against onnxruntime."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from metasched.cli.common import (
    CliError,
    HelpFormatter,
    check_target,
    load_model,
    parse_input_shapes,
    parse_threads,
    random_inputs,
    say,
    warn_if_busy,
)

__all__ = ["add_parsers"]

#: The ONNX file a compiled model directory keeps a copy of (bench compares against it).
SOURCE_NAME = "source.onnx"


def add_parsers(subparsers: Any, common: argparse.ArgumentParser) -> None:
    compile_parser = subparsers.add_parser(
        "compile",
        parents=[common],
        help="build an ONNX model with the work directory's tuned schedules and save it",
        description=(
            "Build MODEL.onnx with the best schedule the tuning database holds for each task (the default "
            "schedule for tasks it has none for) and save the compiled model to OUT/ "
            "(model.so, graph.json, constants.npz, and a copy of the ONNX file)."
        ),
        epilog="example:\n  metasched compile model.onnx --work-dir tune/ -o model.out",
        formatter_class=HelpFormatter,
    )
    compile_parser.add_argument("model", metavar="MODEL.onnx")
    compile_parser.add_argument("--work-dir", metavar="DIR", help="the tuning database (none: default schedules)")
    compile_parser.add_argument("-o", "--output", required=True, metavar="OUT/", help="directory to save the model to")
    compile_parser.add_argument("--target", default="llvm", help="target string (default llvm)")
    compile_parser.add_argument("--input", action="append", metavar="NAME:D1,D2,...", help="an input's shape")
    compile_parser.add_argument("--threads", type=int, default=2, help="threads the saved model runs with (default 2)")
    compile_parser.set_defaults(handler=run_compile)

    run_parser = subparsers.add_parser(
        "run",
        parents=[common],
        help="run a compiled model on .npy inputs",
        description="Run a model saved by `metasched compile` on inputs from .npy files.",
        epilog="example:\n  metasched run model.out --input data=x.npy -o outputs.npz",
        formatter_class=HelpFormatter,
    )
    run_parser.add_argument("compiled", metavar="OUT/", help="a directory written by metasched compile")
    run_parser.add_argument(
        "--input",
        action="append",
        required=True,
        metavar="NAME=FILE.npy",
        help="an input array (repeatable; a model with one input takes just FILE.npy)",
    )
    run_parser.add_argument("-o", "--output", metavar="FILE.npz", help="save the outputs here (default: print them)")
    run_parser.add_argument("--threads", type=int, help="threads (default: as compiled)")
    run_parser.set_defaults(handler=run_run)

    bench_parser = subparsers.add_parser(
        "bench",
        parents=[common],
        help="time a model (ONNX file or compiled directory) against onnxruntime",
        description=(
            "Time our model against onnxruntime at each thread count: median and interquartile range of "
            "--repeat runs, taking turns in rounds. MODEL.onnx is built first (with --work-dir's tuned schedules, or "
            "the default ones); a compiled OUT/ directory is loaded as it is."
        ),
        epilog="examples:\n  metasched bench model.out --threads 1,2\n  metasched bench model.onnx --work-dir tune/",
        formatter_class=HelpFormatter,
    )
    bench_parser.add_argument("model", metavar="MODEL.onnx|OUT/")
    bench_parser.add_argument("--threads", default="1,2", help="thread counts, comma-separated (default 1,2)")
    bench_parser.add_argument("--repeat", type=int, default=30, help="timed runs per contender (default 30)")
    bench_parser.add_argument("--work-dir", metavar="DIR", help="tuning database for an ONNX model")
    bench_parser.add_argument("--target", default="llvm", help="target string (default llvm)")
    bench_parser.add_argument("--input", action="append", metavar="NAME:D1,D2,...", help="an input's shape")
    bench_parser.add_argument("--json", metavar="FILE", help="also write the results to FILE as JSON")
    bench_parser.set_defaults(handler=run_bench)


def _database_dir(path: str | None) -> str | None:
    if path is None:
        return None
    if not Path(path, "records.jsonl").exists():
        raise CliError(f"--work-dir {path!r} holds no tuning database (no records.jsonl); run metasched tune first")
    return path


def run_compile(args: argparse.Namespace) -> int:
    from metasched import model as msm

    target = check_target(args.target)
    database = _database_dir(args.work_dir)
    model = load_model(args.model, parse_input_shapes(args.input))
    output = Path(args.output)
    if output.exists() and not output.is_dir():
        raise CliError(f"-o {args.output!r} is a file; give a directory to save the model to")
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise CliError(f"-o {args.output!r} cannot be created ({error.strerror}); choose another directory") from None
    compiled = msm.compile(model.graph, target, database=database, threads=args.threads)
    report = compiled.report
    assert report is not None  # compile() gives every model its report
    sources = report.sources()
    for warning in report.warnings:
        say(f"warning: {warning}")
    compiled.save(output)
    shutil.copyfile(model.path, output / SOURCE_NAME)
    say(f"compiled {model.path.name}: " + ", ".join(f"{n} tasks {s}" for s, n in sources.items()))
    if database is not None and "database" not in sources:
        say(f"note: {database} has no records for this model and target: every task uses its default schedule")
    say(f"saved to {output}/ (run it: metasched run {output} --input NAME=FILE.npy)")
    return 0


def _load_compiled(path: str, threads: int | None = None) -> Any:
    from metasched import model as msm

    directory = Path(path)
    if not directory.exists():
        raise CliError(f"{path!r} not found; give a directory written by metasched compile")
    if not (directory / "graph.json").exists():
        raise CliError(f"{path!r} is not a compiled model (no graph.json); write one with metasched compile")
    try:
        return msm.load(directory, threads=threads)
    except (OSError, ValueError) as error:
        raise CliError(f"{path!r}: cannot load the compiled model ({error}); compile it again") from None


def run_run(args: argparse.Namespace) -> int:
    compiled = _load_compiled(args.compiled, args.threads)
    if args.threads is not None:
        compiled.set_threads(args.threads)
    specs = compiled.input_specs
    feeds: dict[str, np.ndarray] = {}
    for item in args.input:
        name, sep, file = item.partition("=")
        if not sep:
            if len(specs) != 1:
                raise CliError(f"--input {item!r}: the model has inputs {list(specs)}; write NAME=FILE.npy for each")
            name, file = next(iter(specs)), item
        if name not in specs:
            raise CliError(f"--input {item!r}: the model has no input {name!r}; its inputs are {list(specs)}")
        try:
            feeds[name] = np.load(file, allow_pickle=False)
        except FileNotFoundError:
            raise CliError(f"--input {item!r}: file {file!r} not found") from None
        except (OSError, ValueError) as error:
            raise CliError(f"--input {item!r}: {file!r} is not a .npy array ({error})") from None
    missing = [n for n in specs if n not in feeds]
    if missing:
        wanted = ", ".join(f"{n} {specs[n][0]} {specs[n][1]}" for n in missing)
        raise CliError(f"missing input(s): {wanted}; give --input NAME=FILE.npy")
    try:
        outputs = compiled.run(feeds)
    except (TypeError, ValueError) as error:
        raise CliError(f"{error}") from None
    if args.output:
        np.savez(args.output, **outputs)
        say(
            f"saved {len(outputs)} output(s) to {args.output}: "
            + ", ".join(f"{k} {v.shape}" for k, v in outputs.items())
        )
    else:
        for name, value in outputs.items():
            flat = value.reshape(-1)
            say(f"{name}: shape {value.shape} {value.dtype}, first values {np.array2string(flat[:6], precision=5)}")
    return 0


def run_bench(args: argparse.Namespace) -> int:
    import onnx

    from metasched import model as msm
    from metasched.cli.report import ort_session, print_table, time_contenders

    threads_list = parse_threads(args.threads)
    warn_if_busy()
    path = Path(args.model)
    if path.is_dir():
        compiled = _load_compiled(args.model)
        source = path / SOURCE_NAME
        proto = onnx.load(str(source)) if source.exists() else None
        described = f"{path} (compiled)"

        feeds = _feeds_from_specs(compiled.input_specs)
    else:
        target = check_target(args.target)
        model = load_model(args.model, parse_input_shapes(args.input))
        compiled = msm.compile(model.graph, target, database=_database_dir(args.work_dir), threads=threads_list[0])
        proto = model.proto
        described = f"{path.name} ({'tuned from ' + args.work_dir if args.work_dir else 'default schedules'})"
        feeds = random_inputs(model.graph)
    rows = []
    speedups = []
    results = []
    for threads in threads_list:
        compiled.set_threads(threads)
        contenders = {"metasched": lambda: compiled.run(feeds)}
        session = ort_session(proto, threads) if proto is not None else None
        if session is not None:
            contenders["onnxruntime"] = lambda: session.run(None, feeds)  # noqa: B023 - used at once
        timings = time_contenders(contenders, args.repeat)
        ours = timings["metasched"]
        theirs_timing = timings.get("onnxruntime")
        results.append(
            {
                "threads": threads,
                "ours_ms": ours.median * 1e3,
                "ours_iqr_ms": [ours.low * 1e3, ours.high * 1e3],
                "onnxruntime_ms": theirs_timing.median * 1e3 if theirs_timing else None,
                "onnxruntime_iqr_ms": [theirs_timing.low * 1e3, theirs_timing.high * 1e3] if theirs_timing else None,
                "speedup_vs_onnxruntime": theirs_timing.median / ours.median if theirs_timing else None,
            }
        )
        row = [f"{threads}", f"{ours.median * 1e3:.3f}", f"{ours.low * 1e3:.3f}-{ours.high * 1e3:.3f}"]
        if session is not None:
            theirs = timings["onnxruntime"]
            speedups.append(theirs.median / ours.median)
            row += [
                f"{theirs.median * 1e3:.3f}",
                f"{theirs.low * 1e3:.3f}-{theirs.high * 1e3:.3f}",
                f"{speedups[-1]:.2f}x",
            ]
        else:
            row += ["-", "-", "-"]
        rows.append(row)
    print_table(
        f"{described}: median of {args.repeat} runs",
        ["threads", "ours ms", "ours IQR", "onnxruntime ms", "onnxruntime IQR", "speedup vs onnxruntime"],
        rows,
    )
    if proto is None:
        say(f"no {SOURCE_NAME} in {path}: onnxruntime was not timed")
    if args.json:
        import json

        Path(args.json).write_text(
            json.dumps({"model": str(path), "repeat": args.repeat, "results": results}, indent=1)
        )
    return 0


def _feeds_from_specs(specs: dict[str, tuple[tuple[Any, ...], str]]) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    feeds = {}
    for name, (shape, dtype) in specs.items():
        if any(isinstance(d, str) for d in shape):
            raise CliError(f"input {name!r} has symbolic dimensions {shape}: bench the ONNX file with --input instead")
        array = rng.standard_normal(shape) if np.issubdtype(np.dtype(dtype), np.floating) else rng.integers(0, 4, shape)
        feeds[name] = np.asarray(array).astype(dtype)
    return feeds
