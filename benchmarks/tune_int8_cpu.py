"""The tuner on int8 CPU workloads: auto-tensorized GEMMs and convolutions, against float32 and onnxruntime.

Workloads (x86-64 AVX2 int8 dot-product intrinsics, found by ``metasched.tune`` itself):
- gemm:      1024^3 GEMM, uint8 activations declared in [0, 127]
             (``T.func_attr({"value_ranges": {"A": (0, 127)}})``) x int8 weights -> int32.
             Compared side by side at 1 and 2 threads with (a) the best tuned float32 GEMM of
             the same size (tuned in the same run; ratio of GFLOP/s, target >= 1.5) and (b)
             onnxruntime's ``MatMulInteger`` (uint8 x int8 -> int32, B a graph input like ours;
             target >= 1.0).
- gemm_s8:   full-range int8 x int8 -> int32 GEMM (1024^3), tuned and checked exactly against
             numpy's int32 product on extreme and random data.
- conv_s1, conv_s2: int8 x int8 conv2d NHWC, N=1, 56x56, 64 -> 64 channels, 3x3, pad 1, stride 1
             and 2; the tuner tensorizes it through ReIndex (the im2col copy of the padded input);
             checked exactly against numpy.

Each program is tuned with ``metasched.tune`` (``--trials``, default 256; candidates run at 2
threads); the best program is rebuilt here, checked, and timed at 1 and 2 threads. Prints the
tuning wall time, whether the best program is tensorized and with which intrinsic, the ratios
(above 1: ours faster), and ends with one JSON line.

Run: python benchmarks/tune_int8_cpu.py [--trials 256] [--fp32-trials N] [--workloads gemm gemm_s8 conv_s1 conv_s2]
     python benchmarks/tune_int8_cpu.py --quick      (a smoke check: 8 trials, 256^3 GEMMs, short timings)
(needs: pip install -e '.[bench]'; an AVX2 machine; on an otherwise idle machine for real numbers)
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from _harness import blas_threads, median_seconds, report

import metasched
import tir
import tir.script as T
from metasched.measure.builder import build_program
from metasched.space.tensorize import VALUE_RANGES_ATTR
from tir.intrin import TensorIntrin

PAUSE = 0.3  # seconds between the sides' timings: the other side's spinning threads (tune_cpu.py)

# ---------------------------------------------------------------- workloads


def make_gemm(n: int, a_dtype: str, b_dtype: str, c_dtype: str) -> tir.PrimFunc:
    """``C[i, j] = sum_k A[i, k] * B[k, j]``, integer operands widened to ``c_dtype``."""
    if c_dtype == "float32":

        @T.script
        def gemm_f32(A: T.Buffer((n, n), "float32"), B: T.Buffer((n, n), "float32"), C: T.Buffer((n, n), "float32")):
            for i, j, k in T.grid(n, n, n):
                with T.block("C"):
                    vi, vj, vk = T.remap("SSR", i, j, k)
                    with T.init():
                        C[vi, vj] = 0.0
                    C[vi, vj] += A[vi, vk] * B[vk, vj]

        return gemm_f32

    @T.script
    def gemm_int(A: T.Buffer((n, n), a_dtype), B: T.Buffer((n, n), b_dtype), C: T.Buffer((n, n), "int32")):
        for i, j, k in T.grid(n, n, n):
            with T.block("C"):
                vi, vj, vk = T.remap("SSR", i, j, k)
                with T.init():
                    C[vi, vj] = 0
                C[vi, vj] = C[vi, vj] + T.cast(A[vi, vk], "int32") * T.cast(B[vk, vj], "int32")

    return gemm_int.replace(name=f"gemm_{a_dtype}_{b_dtype}_{n}")


def make_conv2d_nhwc(stride: int, size: int = 56, channels: int = 64) -> tir.PrimFunc:
    """int8 x int8 -> int32 conv2d NHWC, 3x3 window, pad 1: a pad block, then the convolution."""
    out_size = (size + 2 - 3) // stride + 1
    padded_size = size + 2

    @T.script
    def conv2d_int8(
        data: T.Buffer((1, size, size, channels), "int8"),
        weight: T.Buffer((3, 3, channels, channels), "int8"),
        out: T.Buffer((1, out_size, out_size, channels), "int32"),
    ):
        padded = T.alloc_buffer((1, padded_size, padded_size, channels), "int8")
        for n, h, w, c in T.grid(1, padded_size, padded_size, channels):
            with T.block("pad"):
                vn, vh, vw, vc = T.remap("SSSS", n, h, w, c)
                padded[vn, vh, vw, vc] = T.if_then_else(
                    1 <= vh and vh < size + 1 and 1 <= vw and vw < size + 1,
                    data[vn, vh - 1, vw - 1, vc],
                    T.cast(0, "int8"),
                )
        for n, h, w, co, rh, rw, ci in T.grid(1, out_size, out_size, channels, 3, 3, channels):
            with T.block("conv"):
                vn, vh, vw, vco, vrh, vrw, vci = T.remap("SSSSRRR", n, h, w, co, rh, rw, ci)
                with T.init():
                    out[vn, vh, vw, vco] = 0
                out[vn, vh, vw, vco] = out[vn, vh, vw, vco] + T.cast(
                    padded[vn, vh * stride + vrh, vw * stride + vrw, vci], "int32"
                ) * T.cast(weight[vrh, vrw, vci, vco], "int32")

    return conv2d_int8.replace(name=f"conv2d_nhwc_int8_s{stride}")


def conv2d_reference(data: np.ndarray, weight: np.ndarray, stride: int) -> np.ndarray:
    """The convolution in int64 through im2col (exact)."""
    padded = np.pad(data.astype(np.int64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(1, 2))[:, ::stride, ::stride]
    n, ho, wo, c = windows.shape[:4]
    cols = windows.transpose(0, 1, 2, 4, 5, 3).reshape(n * ho * wo, 9 * c)
    return (cols @ weight.astype(np.int64).reshape(9 * c, -1)).reshape(n, ho, wo, -1)


def full_range_int8(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Random int8 over the whole range, -128 included."""
    return rng.integers(-128, 128, shape).astype(np.int8)


# ---------------------------------------------------------------- tuning


def tune_one(func: tir.PrimFunc, name: str, trials: int, seed: int) -> tuple[Any, dict[str, Any]]:
    """The best program of a ``trials``-long tune at 2 threads, and what the run says about it."""
    with tempfile.TemporaryDirectory(prefix=f"tune-int8-{name}-") as work_dir:
        result = metasched.tune(func, "llvm", trials=trials, work_dir=work_dir, seed=seed, num_threads=2, log=_quiet)
    task = result.tasks[0]
    intrinsics = tensorized_with(task.best_trace)
    stats = {
        "wall_s": result.wall_seconds,
        "trials": result.trials,
        "median_build_s": statistics.median(result.build_seconds) if result.build_seconds else float("nan"),
        "best_ms_tuning": (task.best_seconds or float("nan")) * 1e3,
        "tensorized": bool(intrinsics),
        "intrinsic": ",".join(intrinsics) if intrinsics else None,
    }
    if task.best_func is None:
        stats["errors"] = dict(task.errors)
    return task, stats


def tensorized_with(trace: Any) -> list[str]:
    """The tensor intrinsics a trace's ``tensorize`` steps use."""
    if trace is None:
        return []
    known = set(TensorIntrin.list())
    return sorted(
        {
            arg
            for i in trace.instructions
            if i.kind == "tensorize"
            for arg in i.args
            if isinstance(arg, str) and arg in known
        }
    )


def _quiet(line: str) -> None:
    pass


def describe(name: str, stats: dict[str, Any]) -> str:
    how = f"tensorized with {stats['intrinsic']}" if stats["tensorized"] else "NOT tensorized"
    return (
        f"{name}: {stats['trials']} trials in {stats['wall_s']:.0f} s (median build "
        f"{stats['median_build_s'] * 1e3:.0f} ms), best {stats['best_ms_tuning']:.3f} ms while tuning, {how}"
    )


# ---------------------------------------------------------------- timing


def time_side_by_side(
    sides: dict[str, Callable[[int], Callable[[], float]]], rounds: int, repeat: int
) -> dict[int, dict[str, float]]:
    """Seconds of each side at 1 and 2 threads: the best of ``rounds`` alternating medians.

    ``sides[name](threads)`` pins the thread count and returns a function that times one
    median of ``repeat`` runs."""
    figures: dict[int, dict[str, float]] = {}
    for threads in (1, 2):
        timers = {name: make(threads) for name, make in sides.items()}
        best = dict.fromkeys(timers, float("inf"))
        for _ in range(rounds):
            for name, timer in timers.items():
                time.sleep(PAUSE)
                best[name] = min(best[name], timer())
        figures[threads] = best
    return figures


def ours(module: Any, arguments: list[Any], repeat: int) -> Callable[[int], Callable[[], float]]:
    def make(threads: int) -> Callable[[], float]:
        module.set_num_threads(threads)
        return lambda: module.time(*arguments, repeat=repeat, warmup=2)

    return make


def matmul_integer_session(n: int, threads: int) -> Any:
    """onnxruntime's ``MatMulInteger`` (uint8 x int8 -> int32) on ``threads`` intra-op threads."""
    try:
        import onnxruntime as ort
        from onnx import TensorProto, helper
    except ImportError as exc:  # pragma: no cover - the bench extra installs them
        raise SystemExit("this benchmark needs onnx and onnxruntime: pip install -e '.[bench]'") from exc
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["A", "B"], ["C"])],
        "int8_gemm",
        [
            helper.make_tensor_value_info("A", TensorProto.UINT8, [n, n]),
            helper.make_tensor_value_info("B", TensorProto.INT8, [n, n]),
        ],
        [helper.make_tensor_value_info("C", TensorProto.INT32, [n, n])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=10)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


# ---------------------------------------------------------------- the workloads' runs


def run_gemm(n: int, trials: int, fp32_trials: int, rounds: int, repeat: int, seed: int) -> dict[str, Any]:
    """The u7 int8 GEMM against the tuned float32 GEMM and onnxruntime, at 1 and 2 threads."""
    rng = np.random.default_rng(seed)
    int8 = make_gemm(n, "uint8", "int8", "int32")
    int8 = int8.replace(attrs={**int8.attrs, VALUE_RANGES_ATTR: {"A": [0, 127]}})
    fp32 = make_gemm(n, "float32", "float32", "float32")
    task8, stats8 = tune_one(int8, "gemm", trials, seed)
    print(describe(f"gemm {n}^3 uint8[0,127] x int8 -> int32", stats8))
    task32, stats32 = tune_one(fp32, "gemm_f32", fp32_trials, seed)
    print(describe(f"gemm {n}^3 float32", stats32))
    figures = {f"gemm_{k}": v for k, v in stats8.items()} | {f"gemm_f32_{k}": v for k, v in stats32.items()}
    if task8.best_func is None or task32.best_func is None:
        print("  no valid candidate: nothing to compare")
        return figures

    a = rng.integers(0, 128, (n, n)).astype(np.uint8)
    b = full_range_int8(rng, (n, n))
    a[0, :], b[:, 0] = 127, -128  # the largest products, summed over a whole row
    c = np.zeros((n, n), np.int32)
    want = a.astype(np.int64) @ b.astype(np.int64)
    module8 = build_program(task8.best_func, "llvm").module
    module8(a, b, c)
    np.testing.assert_array_equal(c, want)
    af, bf = rng.standard_normal((2, n, n), dtype=np.float32)
    cf = np.zeros((n, n), np.float32)
    module32 = build_program(task32.best_func, "llvm").module
    module32(af, bf, cf)
    with blas_threads(2):
        np.testing.assert_allclose(cf, af @ bf, rtol=1e-3, atol=1e-3)
    feeds = {"A": a, "B": b}

    def onnxruntime_side(threads: int) -> Callable[[], float]:
        session = matmul_integer_session(n, threads)
        np.testing.assert_array_equal(session.run(None, feeds)[0], want)
        return lambda: median_seconds(lambda: session.run(None, feeds), repeat=repeat, warmup=2)

    timing = time_side_by_side(
        {
            "int8": ours(module8, [a, b, c], repeat),
            "f32": ours(module32, [af, bf, cf], repeat),
            "ort": onnxruntime_side,
        },
        rounds,
        repeat,
    )
    ops = 2.0 * n**3
    print(f"  exact vs numpy; side by side ({rounds} rounds, best median of {repeat}):")
    for threads, best in timing.items():
        vs_f32, vs_ort = best["f32"] / best["int8"], best["ort"] / best["int8"]
        print(
            f"  {threads} thread{'s' if threads > 1 else ' '}: int8 {ops / best['int8'] / 1e9:6.1f} GOP/s "
            f"({best['int8'] * 1e3:.2f} ms)  float32 {ops / best['f32'] / 1e9:6.1f} GFLOP/s "
            f"({best['f32'] * 1e3:.2f} ms)  onnxruntime MatMulInteger {ops / best['ort'] / 1e9:6.1f} GOP/s "
            f"({best['ort'] * 1e3:.2f} ms)  int8/f32 {vs_f32:.2f}x (target 1.5)  int8/ort {vs_ort:.2f}x (target 1.0)"
        )
        figures[f"gemm_vs_f32_{threads}t"] = vs_f32
        figures[f"gemm_vs_ort_{threads}t"] = vs_ort
        figures[f"gemm_int8_ms_{threads}t"] = best["int8"] * 1e3
        figures[f"gemm_f32_ms_{threads}t"] = best["f32"] * 1e3
        figures[f"gemm_ort_ms_{threads}t"] = best["ort"] * 1e3
    return figures


def run_exact(
    name: str,
    func: tir.PrimFunc,
    arrays: list[np.ndarray],
    want: np.ndarray,
    ops: float,
    trials: int,
    rounds: int,
    repeat: int,
    seed: int,
) -> dict[str, Any]:
    """Tune ``func``, check its best program exactly against ``want`` and time it at 1 and 2 threads."""
    task, stats = tune_one(func, name, trials, seed)
    print(describe(name, stats))
    figures = {f"{name}_{k}": v for k, v in stats.items()}
    if task.best_func is None:
        print(f"  no valid candidate ({stats.get('errors')})")
        return figures
    module = build_program(task.best_func, "llvm").module
    out = arrays[-1]
    out[...] = 0
    module(*arrays)
    np.testing.assert_array_equal(out, want)
    figures[f"{name}_exact"] = True
    timing = time_side_by_side({"ours": ours(module, arrays, repeat)}, rounds, repeat)
    line = "  exact vs numpy;"
    for threads, best in timing.items():
        seconds = best["ours"]
        line += (
            f" {threads} thread{'s' if threads > 1 else ''}: {seconds * 1e3:.3f} ms ({ops / seconds / 1e9:.1f} GOP/s);"
        )
        figures[f"{name}_ms_{threads}t"] = seconds * 1e3
    print(line.rstrip(";"))
    return figures


WORKLOADS = ("gemm", "gemm_s8", "conv_s1", "conv_s2")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=None, help="trials per int8 workload (default 256; --quick: 8)")
    parser.add_argument("--fp32-trials", type=int, default=None, help="trials of the float32 GEMM (default: --trials)")
    parser.add_argument("--workloads", nargs="+", choices=WORKLOADS, default=list(WORKLOADS))
    parser.add_argument("--quick", action="store_true", help="smoke check: 8 trials, 256^3 GEMMs, short timings")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    trials = args.trials if args.trials is not None else (8 if args.quick else 256)
    fp32_trials = args.fp32_trials if args.fp32_trials is not None else trials
    n = 256 if args.quick else 1024
    rounds, repeat = (2, 3) if args.quick else (5, 10)
    rng = np.random.default_rng(args.seed)
    figures: dict[str, Any] = {"trials": trials, "fp32_trials": fp32_trials, "gemm_n": n, "quick": args.quick}
    for name in args.workloads:
        if name == "gemm":
            figures |= run_gemm(n, trials, fp32_trials, rounds, repeat, args.seed)
        elif name == "gemm_s8":
            a, b = full_range_int8(rng, (n, n)), full_range_int8(rng, (n, n))
            a[0, :], b[:, 0] = -128, -128  # the largest products (+16384), summed over a whole row
            want = a.astype(np.int64) @ b.astype(np.int64)
            func = make_gemm(n, "int8", "int8", "int32")
            arrays = [a, b, np.zeros((n, n), np.int32)]
            figures |= run_exact("gemm_s8", func, arrays, want, 2.0 * n**3, trials, rounds, repeat, args.seed)
        else:
            stride = int(name[-1])
            data, weight = full_range_int8(rng, (1, 56, 56, 64)), full_range_int8(rng, (3, 3, 64, 64))
            data[0, :8, :8, :], weight[..., 0] = -128, -128  # the largest products over whole windows
            want = conv2d_reference(data, weight, stride)
            arrays = [data, weight, np.zeros(want.shape, np.int32)]
            ops = 2.0 * want.size * 9 * 64  # a multiply-add per output, window element and input channel
            figures |= run_exact(name, make_conv2d_nhwc(stride), arrays, want, ops, trials, rounds, repeat, args.seed)
    report(figures)


if __name__ == "__main__":
    main()
