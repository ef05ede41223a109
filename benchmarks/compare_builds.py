"""Saved builds of one model and onnxruntime, timed side by side in one process.

A change to the compiler is judged by building the model before and after it (``metasched
compile MODEL.onnx -o DIR`` at each commit, or ``CompiledModel.save``) and timing the builds
here, alternately with onnxruntime: on a VM whose processes run up to a third faster or slower
than the next, ratios taken in separate processes move more than most changes do.

    git checkout OLD && metasched compile m.onnx -o /tmp/old
    git checkout NEW && metasched compile m.onnx -o /tmp/new
    python3 benchmarks/compare_builds.py --model m.onnx --inputs m.npz --builds /tmp/old,/tmp/new

Prints each build's time, onnxruntime's, and their ratios per thread count (best of ``--rounds``
medians of ``--repeat`` runs per side, the sides in turn), and ends with one JSON line.
"""

from __future__ import annotations

import argparse
import os

import numpy as np
from _harness import median_seconds, report


def _feeds(model: object, inputs: str | None) -> dict[str, np.ndarray]:
    graph_inputs = list(model.graph.input)  # type: ignore[attr-defined]
    if inputs:
        data = np.load(inputs)
        return {value.name: data[key] for value, key in zip(graph_inputs, data.files, strict=False)}
    rng = np.random.default_rng(0)
    feeds = {}
    for value in graph_inputs:
        dims = [d.dim_value if d.dim_value > 0 else 1 for d in value.type.tensor_type.shape.dim]
        feeds[value.name] = rng.standard_normal(dims).astype(np.float32)
    return feeds


def main() -> None:
    import onnx
    import onnxruntime as ort

    from metasched import model as msm

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="the ONNX file the builds were compiled from")
    parser.add_argument("--inputs", default=None, help="an .npz of the inputs, in the file's input order")
    parser.add_argument("--builds", required=True, help="comma-separated saved builds (directories)")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    model = onnx.load(args.model)
    feeds = _feeds(model, args.inputs)
    builds = [path for path in args.builds.split(",") if path]
    rows = []
    for threads in [int(t) for t in args.threads.split(",")]:
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(args.model, options, providers=["CPUExecutionProvider"])
        sides = {"onnxruntime": lambda session=session: session.run(None, feeds)}
        for path in builds:
            compiled = msm.load(path, threads=threads)
            sides[path] = lambda compiled=compiled: compiled.run(feeds)
        best = dict.fromkeys(sides, float("inf"))
        for _ in range(args.rounds):
            for name, run in sides.items():
                best[name] = min(best[name], median_seconds(run, repeat=args.repeat, warmup=1))
        peer = best["onnxruntime"]
        print(f"{os.path.basename(args.model)}, {threads} thread(s): onnxruntime {peer * 1e3:.2f} ms")
        for path in builds:
            print(f"  {path}: {best[path] * 1e3:.2f} ms, {peer / best[path]:.3f}x onnxruntime")
            rows.append(
                {
                    "build": path,
                    "threads": threads,
                    "ms": round(best[path] * 1e3, 3),
                    "onnxruntime_ms": round(peer * 1e3, 3),
                    "ratio": round(peer / best[path], 3),
                }
            )
    report({"benchmark": "compare_builds", "model": args.model, "rows": rows})


if __name__ == "__main__":
    main()
