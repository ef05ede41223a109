"""Run sampled candidates of the Tensor Core design space on a GPU and check each against numpy.

The tuner measures whatever the space generates, so every sampled candidate must compute the
right answer. For each workload (fp16 GEMM, fp16 conv2d NHWC; float32 accumulation) this samples
``--samples`` candidates (round robin over the sketches, every decision drawn anew from the seed,
the CUDA postprocessors applied), builds each, runs it on fresh random inputs with the output
poisoned (NaN), and reports per candidate: the relative error ||out - ref|| / ||ref|| against
numpy in float32 (float16 products are exact in float32, so only the summation order differs:
errors sit near 1e-6; a wrong fragment layout or a race gives 1e-1 and up), the kernel time, the
features its source uses (WMMA or mma.sync, ldmatrix, cp.async), its launch, and what the cubin
says offline (``tir.codegen.cuda_report``: registers, spilled bytes, shared memory, blocks per
multiprocessor and the SASS mix; ``tir.analysis.bank_conflicts``: the shared-memory accesses
that conflict; ``--compile-only`` gives these without a GPU).

Candidates run in a child process: a kernel that faults (an illegal address poisons the CUDA
context) or hangs ends only that child; the parent records it and goes on with the next seed.

    python benchmarks/cuda_space_check.py --samples 24 --arch sm_90 --out DIR
    python benchmarks/cuda_space_check.py --compile-only ...   # build only: fills nvcc's cache

Prints a table and ends with one JSON line (counts per workload); ``DIR`` gets
``candidates.jsonl`` and, for up to three failing candidates per workload, their CUDA source and
trace.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import tir
import tir.script as T
from tir.codegen.cuda_report import kernel_reports

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from matmul_tensorcore import make_matmul as make_gemm  # noqa: E402 - the float16 GEMM, float32 sums

GOOD_ERROR = 1e-3  # relative error below which a candidate computes the right answer


def make_conv2d_nhwc() -> tir.PrimFunc:
    """N=16, 56x56 output, 64 -> 64 channels, 3x3, stride 1; the input is given padded (58x58)."""

    @T.script
    def conv2d(
        X: T.Buffer((16, 58, 58, 64), "float16"),
        W: T.Buffer((3, 3, 64, 64), "float16"),
        Y: T.Buffer((16, 56, 56, 64), "float32"),
    ):
        for n, h, w, co, rh, rw, ci in T.grid(16, 56, 56, 64, 3, 3, 64):
            with T.block("Y"):
                vn, vh, vw, vco, vrh, vrw, vci = T.remap("SSSSRRR", n, h, w, co, rh, rw, ci)
                with T.init():
                    Y[vn, vh, vw, vco] = T.float32(0)
                Y[vn, vh, vw, vco] = Y[vn, vh, vw, vco] + T.cast(X[vn, vh + vrh, vw + vrw, vci], "float32") * T.cast(
                    W[vrh, vrw, vci, vco], "float32"
                )

    return conv2d


def gemm_inputs(rng: np.random.Generator, n: int) -> list[np.ndarray]:
    a = rng.uniform(-1, 1, (n, n)).astype(np.float16)
    b = rng.uniform(-1, 1, (n, n)).astype(np.float16)
    return [a, b, np.full((n, n), np.nan, np.float32)]


def gemm_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a.astype(np.float32) @ b.astype(np.float32)


def conv_inputs(rng: np.random.Generator) -> list[np.ndarray]:
    x = rng.uniform(-1, 1, (16, 58, 58, 64)).astype(np.float16)
    w = rng.uniform(-1, 1, (3, 3, 64, 64)).astype(np.float16)
    return [x, w, np.full((16, 56, 56, 64), np.nan, np.float32)]


def conv_reference(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    x32, w32 = x.astype(np.float32), w.astype(np.float32)
    out = np.zeros((16, 56, 56, 64), np.float32)
    for rh in range(3):
        for rw in range(3):
            out += x32[:, rh : rh + 56, rw : rw + 56, :] @ w32[rh, rw]
    return out


WORKLOADS = {
    "gemm": (lambda: make_gemm(1024), lambda rng: gemm_inputs(rng, 1024), gemm_reference),
    "gemm4096": (lambda: make_gemm(4096), lambda rng: gemm_inputs(rng, 4096), gemm_reference),
    "conv": (make_conv2d_nhwc, conv_inputs, conv_reference),
}


def sample(func: tir.PrimFunc, target: str, seed: int) -> Any:
    """Candidate ``seed``: sketch ``seed % len(sketches)`` with every decision drawn from the seed."""
    from metasched.space.generator import SpaceGenerator
    from tir.schedule import Schedule

    space = SpaceGenerator()
    sketches = _sketches(space, func, target)
    sch = Schedule(func, seed=seed)
    sketch = sketches[seed % len(sketches)]
    sketch.apply_to(sch, dict.fromkeys(sketch.decisions))
    for postproc in space.postprocs_for(target):
        postproc.apply(sch)
    return sch


_SKETCHES: dict[tuple[str, str], Any] = {}


def _sketches(space: Any, func: tir.PrimFunc, target: str) -> Any:
    key = (func.name + str(func.params[0].shape), target)
    if key not in _SKETCHES:
        _SKETCHES[key] = space.generate(func, target)
    return _SKETCHES[key]


def features(source: str) -> str:
    """What the kernels call (the helpers above the first ``__global__`` are in every source)."""
    body = source[source.find("__global__") :]
    names = [("wmma::", "wmma"), ("ldmatrix", "mma.sync+ldmatrix"), ("cp_async", "cp.async")]
    return "+".join(short for needle, short in names if needle in body)


def check_one(workload: str, seed: int, target: str, out_dir: Path, compile_only: bool) -> dict[str, Any]:
    make, inputs, reference = WORKLOADS[workload]
    record: dict[str, Any] = {"workload": workload, "seed": seed}
    started = time.perf_counter()
    try:
        sch = sample(make(), target, seed)
    except Exception as error:  # noqa: BLE001 - a rejected sample is counted with its reason
        record.update(status="rejected", detail=str(error).splitlines()[0][:200])
        return record
    record["sample_s"] = round(time.perf_counter() - started, 3)
    started = time.perf_counter()
    try:
        module = tir.build(sch.func, target)
    except Exception as error:  # noqa: BLE001
        record.update(status="build", detail=str(error)[:400])
        _keep(out_dir, record, sch, None)
        return record
    record["build_s"] = round(time.perf_counter() - started, 3)
    source = module.get_source("cuda")
    record["features"] = features(source)
    record["kernels"] = [
        [k.name, [str(e) for e in k.grid], [str(e) for e in k.block], str(k.shared_bytes)] for k in module.kernels
    ]
    try:  # offline: registers, spills, SASS mix and occupancy from the cubin
        record["resources"] = [r.as_dict() for r in kernel_reports(module)]
    except Exception as error:  # noqa: BLE001 - a missing cuobjdump costs the report, not the check
        record["resources_error"] = str(error).splitlines()[0][:200]
    record["bank_conflicts"] = shared_conflicts(sch.func, target)
    if compile_only:
        record["status"] = "built"
        return record
    rng = np.random.default_rng(1000 + seed)
    args = inputs(rng)
    try:
        module(*args)
    except Exception as error:  # noqa: BLE001
        record.update(status="run", detail=f"{type(error).__name__}: {str(error)[:400]}")
        _keep(out_dir, record, sch, source)
        return record
    want = reference(*args[:2])
    got = args[2]
    unwritten = int(np.isnan(got).sum())
    error = float(np.linalg.norm(np.nan_to_num(got) - want) / np.linalg.norm(want))
    record.update(rel_error=error, unwritten=unwritten)
    if unwritten or not error < GOOD_ERROR:
        record["status"] = "wrong"
        bad = np.argwhere(~np.isclose(np.nan_to_num(got), want, rtol=1e-2, atol=1e-2))
        record["bad_count"] = int(len(bad))
        record["bad_first"] = bad[:8].tolist()
        _keep(out_dir, record, sch, source)
        return record
    # a second run on new inputs: a race shows as a different (wrong) answer
    args = inputs(np.random.default_rng(5000 + seed))
    module(*args)
    second = float(np.linalg.norm(np.nan_to_num(args[2]) - reference(*args[:2])) / np.linalg.norm(reference(*args[:2])))
    record["rel_error_2"] = second
    if not second < GOOD_ERROR:
        record["status"] = "wrong"
        _keep(out_dir, record, sch, source)
        return record
    seconds = module.time(*args, repeat=10, warmup=3)
    macs = int(np.prod(args[2].shape)) * (args[0].shape[-1] if workload.startswith("gemm") else 9 * 64)
    record.update(status="ok", ms=round(seconds * 1e3, 4), tflops=round(2 * macs / seconds / 1e12, 2))
    return record


def shared_conflicts(func: tir.PrimFunc, target: str) -> dict[str, Any]:
    """Static bank conflicts of the lowered kernels (``tir.analysis.bank_conflicts``): the extra
    wavefronts a thread block spends on them, and the conflicting accesses."""
    from tir.analysis.bank_conflicts import bank_conflicts, extra_wavefronts_per_block
    from tir.transform import lower

    kernels = [f for f in lower(func, target).functions.values() if f.attrs.get("kernel")]
    accesses = [a for f in kernels for a in bank_conflicts(f)]
    worst = sorted({(a.buffer, a.kind, a.wavefronts // a.phases) for a in accesses if a.conflicts}, key=lambda w: -w[2])
    return {
        "accesses": len(accesses),
        "extra_wavefronts": sum(extra_wavefronts_per_block(f) for f in kernels),
        "conflicting": [f"{buffer} {kind} {ways}-way" for buffer, kind, ways in worst],
    }


def _keep(out_dir: Path, record: dict[str, Any], sch: Any, source: str | None) -> None:
    """Save the trace (and the CUDA source) of a failing candidate, at most three per workload."""
    kept = sorted(out_dir.glob(f"fail_{record['workload']}_*.trace.py"))
    if len(kept) >= 3:
        return
    stem = out_dir / f"fail_{record['workload']}_{record['seed']}"
    Path(f"{stem}.trace.py").write_text(sch.trace.as_python())
    if source is not None:
        Path(f"{stem}.cu").write_text(source)


def child(args: argparse.Namespace) -> None:
    out_dir = Path(args.out)
    with open(out_dir / "candidates.jsonl", "a") as log:
        for item in args.todo.split(","):
            workload, seed = item.split(":")
            (out_dir / "running").write_text(item)
            record = check_one(workload, int(seed), args.target, out_dir, args.compile_only)
            log.write(json.dumps(record) + "\n")
            log.flush()
            if record.get("status") == "run" and "CUDA_ERROR" in record.get("detail", ""):
                sys.exit(3)  # the context may be poisoned: the parent starts a fresh child


def parent(args: argparse.Namespace) -> None:
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    log_path = out_dir / "candidates.jsonl"
    log_path.write_text("")
    todo = [f"{w}:{s}" for w in args.workloads.split(",") for s in range(args.samples)]
    started = time.perf_counter()
    while todo:
        command = [sys.executable, __file__, "--child", "--todo", ",".join(todo), "--out", str(out_dir)]
        command += ["--target", args.target] + (["--compile-only"] if args.compile_only else [])
        process = subprocess.Popen(command)
        last_size, last_change = -1, time.perf_counter()
        while process.poll() is None:
            time.sleep(0.5)
            size = log_path.stat().st_size
            if size != last_size:
                last_size, last_change = size, time.perf_counter()
            elif time.perf_counter() - last_change > args.hang_seconds:
                process.kill()
                process.wait()
                running = (out_dir / "running").read_text()
                workload, seed = running.split(":")
                with open(log_path, "a") as log:
                    log.write(json.dumps({"workload": workload, "seed": int(seed), "status": "hang"}) + "\n")
                break
        done = {f"{r['workload']}:{r['seed']}" for r in _records(log_path)}
        if process.returncode not in (0, 3, None, -9) and (out_dir / "running").exists():
            running = (out_dir / "running").read_text()
            if running not in done:
                with open(log_path, "a") as log:
                    detail = f"child exited with {process.returncode}"
                    log.write(
                        json.dumps(
                            {
                                "workload": running.split(":")[0],
                                "seed": int(running.split(":")[1]),
                                "status": "crash",
                                "detail": detail,
                            }
                        )
                        + "\n"
                    )
                done.add(running)
        todo = [item for item in todo if item not in done]
    records = _records(log_path)
    summary: dict[str, Any] = {"target": args.target, "seconds": round(time.perf_counter() - started, 1)}
    print(
        f"{'workload':9} {'seed':>4} {'status':9} {'features':28} {'rel_error':>10} {'ms':>9} {'TFLOP/s':>8}"
        f" {'regs':>4} {'spill':>5} {'smem':>6} {'occ':>3} {'bank':>4}  detail"
    )
    for r in records:
        used = (r.get("resources") or [{}])[0]
        print(
            f"{r['workload']:9} {r['seed']:4d} {r['status']:9} {r.get('features', ''):28} "
            f"{r.get('rel_error', float('nan')):10.2e} {r.get('ms', float('nan')):9.3f} {r.get('tflops', float('nan')):8.2f}"
            f" {used.get('registers', ''):>4} {used.get('spill_bytes', ''):>5} {used.get('shared_bytes', ''):>6}"
            f" {used.get('blocks_per_sm', ''):>3} {r.get('bank_conflicts', {}).get('extra_wavefronts', ''):>4}"
            f"  {r.get('detail', '')[:100]}"
        )
    for workload in args.workloads.split(","):
        mine = [r for r in records if r["workload"] == workload]
        counts: dict[str, int] = {}
        for r in mine:
            counts[r["status"]] = counts.get(r["status"], 0) + 1
        ok = [r for r in mine if r["status"] == "ok"]
        best = min(ok, key=lambda r: r["ms"]) if ok else None
        spilling = [r["seed"] for r in mine if any(k["spill_bytes"] for k in r.get("resources", []))]
        conflicting = [r["seed"] for r in mine if r.get("bank_conflicts", {}).get("extra_wavefronts")]
        summary[workload] = {
            "counts": counts,
            "spilling_seeds": spilling,
            "bank_conflict_seeds": conflicting,
            "best_ms": best and best["ms"],
            "best_seed": best and best["seed"],
            "best_tflops": best and best["tflops"],
        }
    print(json.dumps(summary))


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--arch", default="sm_90")
    parser.add_argument("--workloads", default="gemm,conv")
    parser.add_argument("--out", default="cuda_space_check")
    parser.add_argument("--compile-only", action="store_true")
    parser.add_argument("--hang-seconds", type=float, default=60.0)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--todo", help=argparse.SUPPRESS)
    parser.add_argument("--target", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.target is None:
        args.target = f"cuda -arch={args.arch}"
    if args.child:
        child(args)
    else:
        parent(args)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
