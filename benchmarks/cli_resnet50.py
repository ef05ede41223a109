"""The deployer's job end to end, through the real command line: `metasched tune` on the ResNet-50
architecture (the onnx package's light_resnet50, random weights, batch 1) with a 20-minute
budget at 2 threads, then `metasched bench` on the tuned model; prints the speedup over
onnxruntime (and over the default schedules) and ends with one JSON line.

    python benchmarks/cli_resnet50.py [--time-budget 20m] [--threads 2] [--work-dir DIR] [--repeat 20]

Running it again with the same --work-dir continues a stopped run and skips tasks already tuned
(`metasched tune`'s own behaviour); run it on an idle machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def metasched(*args: str) -> None:
    """Run the command line as a user would (its live output straight to this terminal)."""
    command = [sys.executable, "-m", "metasched", *args]
    print("$ metasched " + " ".join(args), flush=True)
    done = subprocess.run(command)
    if done.returncode != 0:
        sys.exit(f"metasched {args[0]} failed with exit status {done.returncode}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-budget", default="20m", help="tuning budget (default 20m)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--work-dir", help="tuning database (default: a new temporary directory)")
    parser.add_argument("--repeat", type=int, default=20, help="timed runs per contender")
    args = parser.parse_args()

    import onnx

    from metasched.cli.demo_model import light_model_path, randomize_weights

    work_dir = Path(args.work_dir or tempfile.mkdtemp(prefix="cli_resnet50_"))
    work_dir.mkdir(parents=True, exist_ok=True)
    model = work_dir / "resnet50.onnx"
    if not model.exists():
        onnx.save(randomize_weights(onnx.load(light_model_path("resnet50")), seed=0), str(model))

    threads = str(args.threads)
    start = time.perf_counter()
    metasched(
        "tune",
        str(model),
        "--time-budget",
        args.time_budget,
        "--threads",
        threads,
        "--work-dir",
        str(work_dir),
        "--repeat",
        str(args.repeat),
        "--plot",
    )
    tune_seconds = time.perf_counter() - start

    tuned_json = work_dir / "bench_tuned.json"
    default_json = work_dir / "bench_default.json"
    metasched(
        "bench",
        str(model),
        "--work-dir",
        str(work_dir),
        "--threads",
        threads,
        "--repeat",
        str(args.repeat),
        "--json",
        str(tuned_json),
    )
    metasched("bench", str(model), "--threads", threads, "--repeat", str(args.repeat), "--json", str(default_json))
    tuned = json.loads(tuned_json.read_text())["results"][0]
    default = json.loads(default_json.read_text())["results"][0]
    speedup = tuned["speedup_vs_onnxruntime"]
    print(
        f"ResNet-50 at {args.threads} threads: tuned {tuned['ours_ms']:.2f} ms, default schedules "
        f"{default['ours_ms']:.2f} ms, onnxruntime {tuned['onnxruntime_ms']:.2f} ms: "
        f"{speedup:.2f}x onnxruntime's speed, {default['ours_ms'] / tuned['ours_ms']:.2f}x the default schedules'"
    )
    print(
        json.dumps(
            {
                "benchmark": "cli_resnet50",
                "time_budget": args.time_budget,
                "threads": args.threads,
                "tune_and_compare_s": round(tune_seconds, 1),
                "tuned_ms": round(tuned["ours_ms"], 3),
                "default_ms": round(default["ours_ms"], 3),
                "onnxruntime_ms": round(tuned["onnxruntime_ms"], 3),
                "speedup_vs_onnxruntime": round(speedup, 3),
                "speedup_vs_default": round(default["ours_ms"] / tuned["ours_ms"], 3),
                "work_dir": str(work_dir),
            }
        )
    )


if __name__ == "__main__":
    main()
