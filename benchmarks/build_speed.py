"""Compile speed: how long ``tir.build`` takes per stage, and that the faster pipeline loses no kernel speed.

Workloads (float32), each with a hand schedule of the kind the tuner produces (tiled, packed,
vectorized, unrolled register tile, parallel outer loop):
- gemm:  1024^3 matmul, the schedule of ``examples/matmul_schedule.py``;
- conv:  conv2d NHWC, N=1, 56x56, 64 -> 64, 3x3, pad 1, the schedule of ``benchmarks/conv2d_cpu.py``;
- dense: 128 x 3072 x 768 matmul + bias + relu, scheduled here (``schedule_dense``).

For each workload and each LLVM pipeline it prints the milliseconds of the stages of a build
(bounds check, ``tir.transform.lower``, ``codegen_llvm``, LLVM: optimization and JIT), the total
of one ``tir.build`` call (median of ``--builds``), and the kernel's GFLOP/s at one thread. The
pipelines: ``before`` is LLVM's O3 with its own loop unroller (the previous default), ``now``
is ``tir.codegen.llvm_target.optimize`` as it is (O3 without LLVM's unroller: programs unroll
explicitly). Kernels of the two are timed alternately (``--rounds`` rounds, best median of
each) on one thread, by wall clock (``Module.time``) and by the thread's CPU time, which a
machine shared with other work disturbs much less. Build times are wall clock, with the
thread's CPU time next to them for the same reason.

``--candidates N`` also samples N tuner candidates per workload (``metasched`` design space,
default rules and postprocessors) and reports the median and the maximum of their builds.

Ends with one JSON line. Run: python benchmarks/build_speed.py [--workloads gemm conv dense]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from _harness import report

import tir
from tir.codegen import llvm_target
from tir.codegen.llvm import codegen_llvm
from tir.runtime.module import LLVMModule
from tir.target import Target
from tir.transform import lower

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from conv2d_cpu import schedule_conv2d  # noqa: E402
from matmul_schedule import make_matmul, schedule_matmul  # noqa: E402
from tune_cpu import dense  # noqa: E402  (the workload the tuner benchmark tunes)


def schedule_dense() -> tir.Schedule:
    """64-column slices of the output in parallel; per slice, the 768 x 64 slice of W packed
    into 16-column panels (contiguous in k), a 4 x 16 register tile (4 rows unrolled, 16 columns
    vectorized) accumulated over k, then bias + relu over the slice, vectorized."""
    sch = tir.Schedule(dense)
    matmul = sch.get_block("matmul")
    i, j, k = sch.get_loops(matmul)
    j_slice, j_panel, j_col = sch.split(j, [None, 4, 16])
    i_group, i_row = sch.split(i, [None, 4])
    sch.reorder(j_slice, j_panel, i_group, k, i_row, j_col)
    packed = sch.cache_read(matmul, 2, "global")  # reads are (acc, X, W): W is index 2
    sch.compute_at(packed, j_slice)
    sch.transform_layout(packed, ("write", 0), lambda k, j: (j // 16, k, j % 16))
    sch.vectorize(sch.split(sch.get_loops(packed)[-1], [None, 16])[-1])
    init = sch.decompose_reduction(matmul, i_group)
    sch.vectorize(j_col)
    sch.unroll(i_row)
    sch.vectorize(sch.get_loops(init)[-1])
    epilogue = sch.get_block("bias_relu")
    sch.reverse_compute_at(epilogue, j_slice)
    sch.vectorize(sch.get_loops(epilogue)[-1])
    sch.parallel(j_slice)
    return sch


def _reference(name: str, arrays: list[np.ndarray]) -> np.ndarray:
    a = [x.astype(np.float64) for x in arrays]
    if name == "gemm":
        return a[0] @ a[1]
    if name == "conv":
        padded = np.pad(a[0], ((0, 0), (1, 1), (1, 1), (0, 0)))
        windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(1, 2))
        cols = windows.transpose(0, 1, 2, 4, 5, 3).reshape(56 * 56, 9 * 64)
        return (cols @ a[1].reshape(9 * 64, 64)).reshape(1, 56, 56, 64)
    return np.maximum(a[0] @ a[1] + a[2], 0.0)


WORKLOADS: dict[str, tuple[Callable[[], tir.PrimFunc], float]] = {
    "gemm": (lambda: schedule_matmul(make_matmul(1024)).func, 2.0 * 1024**3),
    "conv": (lambda: schedule_conv2d().func, 2.0 * 56 * 56 * 64 * 9 * 64),
    "dense": (lambda: schedule_dense().func, 2.0 * 128 * 3072 * 768),
}
PIPELINES = ("before", "now")


@contextlib.contextmanager
def pipeline(name: str) -> Iterator[None]:
    """Builds inside use LLVM pipeline ``name`` (``before``: O3 with LLVM's loop unroller)."""
    original = llvm_target.optimize
    if name == "before":
        llvm_target.optimize = functools.partial(original, llvm_unroll=True)
    try:
        yield
    finally:
        llvm_target.optimize = original


def stage_times(func: tir.PrimFunc, target: Target) -> tuple[dict[str, float], dict[str, float], LLVMModule]:
    """Wall and thread-CPU seconds of each stage of one build, the way ``tir.build`` runs them."""
    from tir.build import _refuse_out_of_bounds

    wall: dict[str, float] = {}
    cpu: dict[str, float] = {}
    result: dict[str, Any] = {}

    def stage(name: str, run: Callable[[], Any]) -> None:
        start, start_cpu = time.perf_counter(), time.thread_time()
        result[name] = run()
        wall[name], cpu[name] = time.perf_counter() - start, time.thread_time() - start_cpu

    stage("check", lambda: _refuse_out_of_bounds(func))
    stage("lower", lambda: lower(func, target))
    stage("codegen", lambda: codegen_llvm(result["lower"], target))
    stage("llvm", lambda: LLVMModule(result["lower"], target, result["codegen"]))
    return wall, cpu, result["llvm"]


def build_figures(func: tir.PrimFunc, target: Target, builds: int) -> tuple[dict[str, float], LLVMModule]:
    """Median milliseconds per stage over ``builds`` builds, and of whole ``tir.build`` calls."""
    samples: dict[str, list[float]] = {}
    module = None
    for _ in range(builds):
        wall, cpu, module = stage_times(func, target)
        for name in wall:
            samples.setdefault(name, []).append(wall[name])
            samples.setdefault(f"{name}_cpu", []).append(cpu[name])
        start, start_cpu = time.perf_counter(), time.thread_time()
        tir.build(func, target)
        samples.setdefault("total", []).append(time.perf_counter() - start)
        samples.setdefault("total_cpu", []).append(time.thread_time() - start_cpu)
    assert module is not None
    return {name: statistics.median(values) * 1e3 for name, values in samples.items()}, module


def cpu_seconds(module: LLVMModule, arrays: list[np.ndarray], repeat: int) -> float:
    """Median thread-CPU seconds of one call on one thread."""
    values = module.check_arguments(arrays)
    function = module._function(module.entry_name)
    pointers, _keep = module.pack(values)
    module._set_threads()
    function(pointers)
    samples = []
    for _ in range(repeat):
        start = time.thread_time_ns()
        function(pointers)
        samples.append((time.thread_time_ns() - start) * 1e-9)
    return statistics.median(samples)


def kernel_figures(
    modules: dict[str, LLVMModule], arrays: list[np.ndarray], rounds: int
) -> dict[str, tuple[float, float]]:
    """Best median wall seconds and best median CPU seconds per pipeline, timed alternately."""
    best = {name: (float("inf"), float("inf")) for name in modules}
    for module in modules.values():
        module.set_num_threads(1)
    for _ in range(rounds):
        for name, module in modules.items():
            wall = module.time(*arrays, repeat=5, warmup=1)
            cpu = cpu_seconds(module, arrays, repeat=5)
            best[name] = (min(best[name][0], wall), min(best[name][1], cpu))
    return best


def sample_candidates(func_name: str, count: int, seed: int = 0) -> list[tir.PrimFunc]:
    """``count`` valid candidates of the tuner's design space for the unscheduled workload."""
    from tune_cpu import WORKLOADS as TUNE_WORKLOADS

    from metasched.space.generator import SpaceGenerator
    from tir.analysis import verify

    func = TUNE_WORKLOADS[func_name][0]
    space = SpaceGenerator(seed=seed)
    sketches = space.generate(func, "llvm")
    found: list[tir.PrimFunc] = []
    for draw in range(1, 20 * count + 1):
        if len(found) == count:
            break
        sch = tir.Schedule(func, seed=seed + draw)
        try:
            sketches[draw % len(sketches)].apply_to(sch)
            for postproc in space.postprocs_for("llvm"):
                postproc.apply(sch)
        except Exception:  # a refused sample: the tuner draws again too
            continue
        if not verify(sch.func):
            found.append(sch.func)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workloads", nargs="+", choices=sorted(WORKLOADS), default=list(WORKLOADS))
    parser.add_argument("--builds", type=int, default=5, help="builds per workload and pipeline (median)")
    parser.add_argument("--rounds", type=int, default=5, help="alternating kernel timing rounds")
    parser.add_argument("--candidates", type=int, default=0, help="also build N sampled tuner candidates each")
    args = parser.parse_args()

    target = Target.parse("llvm")
    rng = np.random.default_rng(0)
    figures: dict[str, Any] = {}
    print(
        "ms per build (wall; thread CPU in brackets); kernel GFLOP/s on 1 thread: by Module.time / by CPU time\n"
        f"{'workload':8} {'pipeline':8} {'check':>12} {'lower':>12} {'codegen':>12} {'LLVM':>14} {'total':>14}"
        f" {'GFLOP/s':>14}"
    )
    for name in args.workloads:
        make, flops = WORKLOADS[name]
        func = make()
        tir.build(func, target)  # first build: imports and one-time LLVM setup stay out of the figures
        arrays = [rng.standard_normal([int(d.value) for d in b.shape], dtype=np.float32) for b in func.buffer_params]
        expected = _reference(name, arrays)
        times: dict[str, dict[str, float]] = {}
        modules: dict[str, LLVMModule] = {}
        for pipe in PIPELINES:
            with pipeline(pipe):
                times[pipe], modules[pipe] = build_figures(func, target, args.builds)
            arrays[-1][...] = 0.0
            modules[pipe](*arrays)
            np.testing.assert_allclose(arrays[-1], expected, rtol=1e-3, atol=1e-3)
        kernels = kernel_figures(modules, arrays, args.rounds)
        for pipe in PIPELINES:
            t = times[pipe]
            gflops_wall, gflops_cpu = (flops / seconds / 1e9 for seconds in kernels[pipe])
            cells = " ".join(
                f"{t[stage]:6.0f} [{t[stage + '_cpu']:4.0f}]".rjust(14 if stage in ("llvm", "total") else 12)
                for stage in ("check", "lower", "codegen", "llvm", "total")
            )
            print(f"{name:8} {pipe:8} {cells} {gflops_wall:6.1f} / {gflops_cpu:5.1f}")
            for stage in ("check", "lower", "codegen", "llvm", "total"):
                figures[f"{name}_{pipe}_{stage}_ms"] = t[stage]
                figures[f"{name}_{pipe}_{stage}_cpu_ms"] = t[stage + "_cpu"]
            figures[f"{name}_{pipe}_gflops"] = gflops_wall
            figures[f"{name}_{pipe}_gflops_cpu"] = gflops_cpu
        figures[f"{name}_speed_ratio_now_vs_before"] = kernels["before"][1] / kernels["now"][1]
    totals = [figures[f"{name}_now_total_ms"] for name in args.workloads]
    figures["median_build_ms"] = statistics.median(totals)
    print(f"median build, now: {figures['median_build_ms']:.0f} ms (target: under 300 ms)")

    if args.candidates:
        for name in args.workloads:
            candidates = sample_candidates(name, args.candidates)
            for pipe in PIPELINES:
                with pipeline(pipe):
                    builds = []
                    for func in candidates:
                        start = time.perf_counter()
                        tir.build(func, target)
                        builds.append(time.perf_counter() - start)
                median_ms, max_ms = statistics.median(builds) * 1e3, max(builds) * 1e3
                print(
                    f"{name} tuner candidates ({len(candidates)}), {pipe}: median build {median_ms:.0f} ms, max {max_ms:.0f} ms"
                )
                figures[f"{name}_candidates_{pipe}_median_build_ms"] = median_ms
                figures[f"{name}_candidates_{pipe}_max_build_ms"] = max_ms
    report(figures)


if __name__ == "__main__":
    main()
