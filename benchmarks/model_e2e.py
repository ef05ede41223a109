"""Whole-model benchmark: ResNet-50 (light_resnet50, random weights) and a BERT-style encoder
(seq 128, hidden 768, 12 heads, 2 layers), batch 1, default schedules (or a tuning database),
at 1 and 2 threads, side by side with onnxruntime pinned to the same thread count.

    python benchmarks/model_e2e.py [--models resnet50,bert] [--repeat 10] [--database DIR]
    python benchmarks/model_e2e.py --models resnet50 --tune-minutes 30 --work-dir tune-resnet50/

With ``--tune-minutes`` each model is tuned first (``metasched.tune`` over its tasks at 2 threads,
records in ``--work-dir``, resumed when the directory has some) and compiled from that database;
the default schedules are timed beside the tuned ones.

Latency: the best median of ``--repeat`` runs over 5 rounds that alternate between the sides.
Prints compile time, latency, speed relative to onnxruntime and peak memory; ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np

# The model tests' helpers (model_testing: onnxruntime references; bert_model: the BERT-style encoder).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "metasched"))

ROUNDS = 5


def _ort_session(model, threads: int):  # type: ignore[no-untyped-def]
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _median_seconds(run, repeat: int) -> float:  # type: ignore[no-untyped-def]
    run()  # warm-up
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        samples.append(time.perf_counter() - start)
    return float(np.median(samples))


def _side_by_side(sides, repeat: int) -> list[float]:  # type: ignore[no-untyped-def]
    """The best median of each side over ``ROUNDS`` alternating rounds: a shared machine's
    second core comes and goes over seconds, and back-to-back blocks would hand one side the
    good seconds."""
    best = [float("inf")] * len(sides)
    for _ in range(ROUNDS):
        for index, run in enumerate(sides):
            best[index] = min(best[index], _median_seconds(run, repeat))
    return best


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def main() -> None:
    import onnx
    from bert_model import bert_encoder
    from model_testing import assert_close, ort_run

    from metasched import model as msm
    from metasched.cli.demo_model import light_model_path, randomize_weights

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet50,bert")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--database", default=None)
    parser.add_argument("--tune-minutes", type=float, default=0.0, help="tune each model first, for this long")
    parser.add_argument("--work-dir", default=None, help="the tuning database (default: tune-e2e-<model>/)")
    args = parser.parse_args()
    results = []
    for name in args.models.split(","):
        if name == "bert":
            model = bert_encoder(seq=128, hidden=768, heads=12, layers=2)
            feeds = {"x": np.random.default_rng(0).standard_normal((1, 128, 768)).astype(np.float32)}
        else:
            model = randomize_weights(onnx.load(light_model_path(name)))
            graph0 = msm.from_onnx(model)
            feeds = {graph0.inputs[0]: np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)}
        graph = msm.from_onnx(model)
        database, tuning_s, default = args.database, 0.0, None
        if args.tune_minutes > 0:
            import metasched
            from metasched.measure import Measurer

            database = args.work_dir or f"tune-e2e-{name}"
            tasks = msm.extract_tasks(graph, "llvm")
            start = time.perf_counter()
            # cold caches, as in the model, where every layer's weights come from memory
            measurer = Measurer("llvm", num_threads=2, flush_cache=True)
            metasched.tune(
                tasks,
                "llvm",
                time_budget=args.tune_minutes * 60,
                work_dir=database,
                num_threads=2,
                measurer=measurer,
                allow_empty=True,  # a task with no valid program keeps its default schedule
            )
            measurer.close()
            tuning_s = time.perf_counter() - start
            default = msm.compile(graph, threads=2)
        start = time.perf_counter()
        compiled = msm.compile(graph, threads=2, database=database)
        compile_s = time.perf_counter() - start
        want = ort_run(model, feeds, threads=2)
        got = compiled.run(feeds)
        correct = True
        for key, value in want.items():
            try:
                assert_close(got[key], value)
            except AssertionError:
                correct = False
        print(f"{name}: {compiled.report.summary()}; matches onnxruntime: {correct}")
        for threads in [int(t) for t in args.threads.split(",")]:
            compiled.set_threads(threads)
            session = _ort_session(model, threads)
            sides = [partial(compiled.run, feeds), partial(session.run, None, feeds)]
            if default is not None:
                default.set_threads(threads)
                sides.append(partial(default.run, feeds))
            timed = _side_by_side(sides, args.repeat)
            ours, theirs = timed[0], timed[1]
            row = {
                "model": name,
                "threads": threads,
                "ours_ms": round(ours * 1e3, 2),
                "onnxruntime_ms": round(theirs * 1e3, 2),
                "speed_vs_ort": round(theirs / ours, 3),
                "compile_s": round(compile_s, 1),
                "tuning_s": round(tuning_s, 1),
                "correct": correct,
                "arena_mib": round(compiled.arena_bytes / 2**20, 1),
                "intermediates_mib": round(compiled.intermediate_bytes / 2**20, 1),
            }
            if default is not None:
                row["default_ms"] = round(timed[2] * 1e3, 2)
                row["default_vs_ort"] = round(theirs * 1e3 / row["default_ms"], 3)
            print(
                f"  {threads} thread(s): ours {row['ours_ms']} ms, onnxruntime {row['onnxruntime_ms']} ms, "
                f"{row['speed_vs_ort']}x" + (f" (default schedules {row['default_ms']} ms)" if default else "")
            )
            results.append(row)
    print(json.dumps({"benchmark": "model_e2e", "peak_rss_mib": round(_peak_mib(), 1), "results": results}))


if __name__ == "__main__":
    main()
