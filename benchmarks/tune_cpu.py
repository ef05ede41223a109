"""The tuner on CPU: GEMM, conv2d and dense+bias+relu tuned by metasched, against numpy and onnxruntime.

Workloads (float32):
- gemm:  1024 x 1024 x 1024 matmul, compared with numpy (OpenBLAS);
- conv:  conv2d NHWC, N=1, 56x56, 64 -> 64, 3x3, stride 1, pad 1, compared with onnxruntime's Conv;
- dense: 128 x 3072 x 768 matmul + bias + relu, compared with onnxruntime's MatMul + Add + Relu
  with W a constant of the graph (a layer's weights), which onnxruntime packs once when the
  session is made; our program declares W layout-free (``T.func_attr({"layout_free_buffers":
  ["W"]})``), so a candidate that packs W packs it once, before the timing
  (``tir.transform.split_prepack``), and is timed on the rest.

Each is tuned with ``metasched.tune`` at each trial count (default 64 and 256) with the
candidates run at 2 threads, then its best program is timed at 1 and 2 threads side by side with
the peer (alternating rounds, best median of each side). Prints the ratios (ours / peer: above 1
means faster), the tuning wall time, trials per minute and the median candidate build time, and
ends with one JSON line. ``--cost-model random`` tunes with the random model instead of XGBoost;
``--compare-random`` adds a 64-trial random-model run per workload and says which model found
the better program.

Run: python benchmarks/tune_cpu.py [--trials 64 256] [--workloads gemm conv dense] [--compare-random]
(needs: pip install -e '.[bench]'; on an otherwise idle machine)
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

ROUNDS, REPEAT = 5, 10
PAUSE = 0.3  # seconds between the sides' timings (see compare)

# ---------------------------------------------------------------- workloads

N_GEMM = 1024


@T.script
def gemm(
    A: T.Buffer((1024, 1024), "float32"), B: T.Buffer((1024, 1024), "float32"), C: T.Buffer((1024, 1024), "float32")
):
    for i, j, k in T.grid(1024, 1024, 1024):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]


@T.script
def conv2d(
    data: T.Buffer((1, 56, 56, 64), "float32"),
    weight: T.Buffer((3, 3, 64, 64), "float32"),
    out: T.Buffer((1, 56, 56, 64), "float32"),
):
    padded = T.alloc_buffer((1, 58, 58, 64), "float32")
    for n, h, w, c in T.grid(1, 58, 58, 64):
        with T.block("pad"):
            vn, vh, vw, vc = T.remap("SSSS", n, h, w, c)
            padded[vn, vh, vw, vc] = T.if_then_else(
                1 <= vh and vh < 57 and 1 <= vw and vw < 57, data[vn, vh - 1, vw - 1, vc], 0.0
            )
    for n, h, w, co, rh, rw, ci in T.grid(1, 56, 56, 64, 3, 3, 64):
        with T.block("conv"):
            vn, vh, vw, vco, vrh, vrw, vci = T.remap("SSSSRRR", n, h, w, co, rh, rw, ci)
            with T.init():
                out[vn, vh, vw, vco] = 0.0
            out[vn, vh, vw, vco] += padded[vn, vh + vrh, vw + vrw, vci] * weight[vrh, vrw, vci, vco]


@T.script
def dense(
    X: T.Buffer((128, 768), "float32"),
    W: T.Buffer((768, 3072), "float32"),
    bias: T.Buffer((3072,), "float32"),
    Y: T.Buffer((128, 3072), "float32"),
):
    T.func_attr({"layout_free_buffers": ["W"]})
    acc = T.alloc_buffer((128, 3072), "float32")
    for i, j, k in T.grid(128, 3072, 768):
        with T.block("matmul"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                acc[vi, vj] = 0.0
            acc[vi, vj] += X[vi, vk] * W[vk, vj]
    for i, j in T.grid(128, 3072):
        with T.block("bias_relu"):
            vi, vj = T.remap("SS", i, j)
            Y[vi, vj] = T.max(acc[vi, vj] + bias[vj], 0.0)


def _onnx_session(nodes: list[Any], inputs: list[Any], outputs: list[Any], inits: list[Any], threads: int) -> Any:
    try:
        import onnxruntime as ort
        from onnx import helper
    except ImportError as exc:  # pragma: no cover - the bench extra installs them
        raise SystemExit("this benchmark needs onnx and onnxruntime: pip install -e '.[bench]'") from exc
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


class Workload:
    """A program, its inputs, the expected output, and the peer to compare with."""

    def __init__(self, name: str, func: tir.PrimFunc, peer: str, rng: np.random.Generator) -> None:
        self.name, self.func, self.peer = name, func, peer
        self.flops = metasched.count_flops(func)
        shapes = [tuple(int(d.value) for d in b.shape) for b in func.buffer_params]
        self.arrays = [rng.standard_normal(shape, dtype=np.float32) for shape in shapes]
        self.arrays[-1][...] = 0.0
        self.expected, self.peer_call = self._peer_setup()

    def _peer_setup(self) -> tuple[np.ndarray, Callable[[int], Callable[[], Any]]]:
        from onnx import TensorProto, helper, numpy_helper

        a = self.arrays
        if self.name == "gemm":
            expected = a[0].astype(np.float64) @ a[1].astype(np.float64)

            def numpy_peer(threads: int) -> Callable[[], Any]:
                def run() -> Any:
                    with blas_threads(threads):
                        return a[0] @ a[1]

                return run

            return expected, numpy_peer
        if self.name == "conv":
            data, weight = a[0], a[1]
            padded = np.pad(data.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
            windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(1, 2))
            cols = windows.transpose(0, 1, 2, 4, 5, 3).reshape(56 * 56, 9 * 64)
            expected = (cols @ weight.astype(np.float64).reshape(9 * 64, 64)).reshape(1, 56, 56, 64)
            feed = {"x": np.ascontiguousarray(data.transpose(0, 3, 1, 2))}
            w_oihw = np.ascontiguousarray(weight.transpose(3, 2, 0, 1))

            def conv_peer(threads: int) -> Callable[[], Any]:
                session = _onnx_session(
                    [helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])],
                    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 56, 56])],
                    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 56, 56])],
                    [numpy_helper.from_array(w_oihw, "w")],
                    threads,
                )
                return lambda: session.run(None, feed)

            return expected, conv_peer
        x, w, bias = a[0], a[1], a[2]
        expected = np.maximum(x.astype(np.float64) @ w.astype(np.float64) + bias, 0.0)

        def dense_session(threads: int) -> Callable[[], Any]:
            inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [128, 768])]
            inits = [numpy_helper.from_array(bias, "b"), numpy_helper.from_array(w, "w")]
            session = _onnx_session(
                [
                    helper.make_node("MatMul", ["x", "w"], ["m"]),
                    helper.make_node("Add", ["m", "b"], ["s"]),
                    helper.make_node("Relu", ["s"], ["y"]),
                ],
                inputs,
                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [128, 3072])],
                inits,
                threads,
            )
            return lambda: session.run(None, {"x": x})

        return expected, dense_session


WORKLOADS = {"gemm": (gemm, "numpy"), "conv": (conv2d, "onnxruntime"), "dense": (dense, "onnxruntime")}


def compare(workload: Workload, func: tir.PrimFunc) -> dict[int, tuple[float, float]]:
    """Seconds of ours and the peer's at 1 and 2 threads, measured alternately."""
    built = build_program(func, "llvm")  # layout-free parameters packed once, here
    module, arguments = built.module, built.arguments(workload.arrays)
    out = workload.arrays[-1]
    module(*arguments)
    np.testing.assert_allclose(out, workload.expected, rtol=1e-3, atol=1e-3)
    figures = {}
    for threads in (1, 2):
        module.set_num_threads(threads)
        peer = workload.peer_call(threads)
        ours = theirs = float("inf")
        for _ in range(ROUNDS):
            # A pause before each side: onnxruntime's and OpenBLAS's threads spin for a while
            # after a call (OpenBLAS about 0.1 s), and our threads timed right after them ran
            # up to 2x slower; each side is timed on a machine the other has left.
            time.sleep(PAUSE)
            ours = min(ours, module.time(*arguments, repeat=REPEAT, warmup=2))
            time.sleep(PAUSE)
            theirs = min(theirs, median_seconds(peer, repeat=REPEAT, warmup=2))
        figures[threads] = (ours, theirs)
    return figures


def tune_one(workload: Workload, trials: int, cost_model: str, seed: int) -> tuple[Any, dict[str, float]]:
    with tempfile.TemporaryDirectory(prefix=f"tune-{workload.name}-") as work_dir:
        result = metasched.tune(
            workload.func,
            "llvm",
            trials=trials,
            work_dir=work_dir,
            seed=seed,
            num_threads=2,
            cost_model=cost_model,
            log=lambda line: None,
        )
    task = result.tasks[0]
    stats = {
        "wall_s": result.wall_seconds,
        "trials_per_min": result.trials_per_minute,
        "median_build_s": statistics.median(result.build_seconds) if result.build_seconds else float("nan"),
        "best_ms_tuning": (task.best_seconds or float("nan")) * 1e3,
    }
    return task, stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--workloads", nargs="+", choices=sorted(WORKLOADS), default=["gemm", "conv", "dense"])
    parser.add_argument("--cost-model", choices=["xgb", "random"], default="xgb")
    parser.add_argument("--compare-random", action="store_true", help="also tune with the random model at 64 trials")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    figures: dict[str, Any] = {}
    for name in args.workloads:
        func, peer = WORKLOADS[name]
        workload = Workload(name, func, peer, rng)
        for trials in args.trials:
            task, stats = tune_one(workload, trials, args.cost_model, args.seed)
            tag = f"{name}_{trials}"
            if task.best_func is None:
                print(f"{tag}: no valid candidate ({dict(task.errors)})")
                continue
            timing = compare(workload, task.best_func)
            print(
                f"{name} ({workload.flops / 1e9:.2f} GFLOP), {trials} trials ({args.cost_model}): "
                f"tuned in {stats['wall_s']:.0f} s, {stats['trials_per_min']:.0f} trials/min, "
                f"median build {stats['median_build_s'] * 1e3:.0f} ms"
            )
            for threads, (ours, theirs) in timing.items():
                ratio = theirs / ours
                print(
                    f"  {threads} thread{'s' if threads > 1 else ' '}: ours {workload.flops / ours / 1e9:6.1f} GFLOP/s "
                    f"({ours * 1e3:.3f} ms)  {peer} {workload.flops / theirs / 1e9:6.1f} GFLOP/s "
                    f"({theirs * 1e3:.3f} ms)  ratio {ratio:.3f}"
                )
                figures[f"{tag}_ratio_{threads}t"] = ratio
            figures.update({f"{tag}_{k}": v for k, v in stats.items()})
        if args.compare_random:
            best = {}
            for model in ("xgb", "random"):
                task, _ = tune_one(workload, 64, model, args.seed)
                best[model] = task.best_seconds or float("inf")
            winner = "xgb" if best["xgb"] < best["random"] else "random"
            print(
                f"{name}, 64 trials: xgb best {best['xgb'] * 1e3:.3f} ms, random best {best['random'] * 1e3:.3f} ms "
                f"-> {winner} wins"
            )
            figures[f"{name}_64_xgb_vs_random"] = best["random"] / best["xgb"]
    report(figures)


if __name__ == "__main__":
    main()
