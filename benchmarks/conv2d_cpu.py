"""Hand-scheduled float32 conv2d NHWC against onnxruntime's Conv, at 1 and 2 threads.

conv2d: N=1, H=W=56, CI=64 -> CO=64, 3x3 kernel, stride 1, padding 1, weights HWIO. The kernel is
written in the dialect (a padding block and a conv block with ``T.init``) and scheduled with the
Schedule API only; see ``schedule_conv2d`` for the schedule and why. onnxruntime runs the same
convolution as an ONNX ``Conv`` node (NCHW; inputs are transposed outside the timed region).

Prints GFLOP/s for both at each thread count and our ratio, and ends with one JSON line. The two
sides are timed alternately and each keeps its best median; still, 2-thread figures need an
otherwise idle machine: a busy core slows our static two-way split much more than onnxruntime.

Run: python benchmarks/conv2d_cpu.py   (needs: pip install -e '.[bench]')
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from _harness import median_seconds, report

import tir
import tir.script as T
from tir.schedule import Schedule

H = W = 56
CI = CO = 64
KH = KW = 3
FLOPS = 2.0 * H * W * CO * KH * KW * CI
ROUNDS, REPEAT = 10, 20  # timing: best of ROUNDS medians of REPEAT calls, the two sides alternating


@T.script
def conv2d(
    data: T.Buffer((1, H, W, CI), "float32"),
    weight: T.Buffer((KH, KW, CI, CO), "float32"),
    out: T.Buffer((1, H, W, CO), "float32"),
):
    padded = T.alloc_buffer((1, H + 2, W + 2, CI), "float32")
    for n, h, w, c in T.grid(1, H + 2, W + 2, CI):
        with T.block("pad"):
            vn, vh, vw, vc = T.remap("SSSS", n, h, w, c)
            padded[vn, vh, vw, vc] = T.if_then_else(
                1 <= vh and vh < H + 1 and 1 <= vw and vw < W + 1, data[vn, vh - 1, vw - 1, vc], 0.0
            )
    for n, h, w, co, rh, rw, ci in T.grid(1, H, W, CO, KH, KW, CI):
        with T.block("conv"):
            vn, vh, vw, vco, vrh, vrw, vci = T.remap("SSSSRRR", n, h, w, co, rh, rw, ci)
            with T.init():
                out[vn, vh, vw, vco] = 0.0
            out[vn, vh, vw, vco] += padded[vn, vh + vrh, vw + vrw, vci] * weight[vrh, vrw, vci, vco]


ROWS = 4  # output pixels (along w) per micro-kernel: the "rows" of a 4 x 16 register tile
COLS = 16  # output channels per micro-kernel: two 8-float ymm vectors


def schedule_conv2d() -> Schedule:
    """The schedule: a 4 x 16 register micro-kernel over (w, co) reducing over input channels,
    the window loops outside it, output rows in parallel, the padding computed per output row.

    Loop nest of the conv block: ``h`` (parallel) / ``co`` by 16 / ``rh`` / ``rw`` / ``w`` by 4 /
    ``ci`` / 4 pixels (unrolled) x 16 channels (vectorized: two ymm). The innermost tile keeps
    8 accumulators in registers; each ``ci`` step broadcasts 4 input values and loads 2 weight
    vectors for 8 FMAs. With ``rh, rw`` outside the pixel groups, the 64 x 16 weight slice of one
    window position (4 KiB) stays in L1 while all 14 groups of 4 pixels of the row use it; the
    accumulators are reloaded 9 times per tile, which costs little next to 64 x 8 FMAs. The
    zero-init is split off by decompose_reduction, so the accumulation has no condition. The
    padding block is computed at the row loop: each row builds the 3 padded input rows it reads
    (lowering compacts the buffer to a 3 x 58 x 64 scratch per row), vectorized over channels,
    so the whole kernel is one parallel loop.
    """
    sch = Schedule(conv2d)
    conv = sch.get_block("conv")
    n, h, w, co, rh, rw, ci = sch.get_loops(conv)
    w_outer, w_inner = sch.split(w, [None, ROWS])
    co_outer, co_inner = sch.split(co, [None, COLS])
    sch.reorder(h, co_outer, rh, rw, w_outer, ci, w_inner, co_inner)
    sch.unroll(w_inner)
    sch.vectorize(co_inner)
    init = sch.decompose_reduction(conv, rh)
    sch.vectorize(sch.get_loops(init)[-1])
    row = sch.fuse(n, h)
    sch.parallel(row)

    pad = sch.get_block("pad")
    sch.compute_at(pad, row)
    sch.vectorize(sch.get_loops(pad)[-1])
    return sch


def numpy_conv2d(data: np.ndarray, weight: np.ndarray) -> np.ndarray:
    padded = np.pad(data.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (KH, KW), axis=(1, 2))  # n h w c kh kw
    cols = windows.transpose(0, 1, 2, 4, 5, 3).reshape(H * W, KH * KW * CI)
    return (cols @ weight.astype(np.float64).reshape(KH * KW * CI, CO)).reshape(1, H, W, CO)


def onnx_session(weight_oihw: np.ndarray, threads: int) -> Any:
    """An onnxruntime session running one ONNX ``Conv`` (NCHW, OIHW weights) on ``threads`` threads."""
    try:
        import onnxruntime as ort
        from onnx import TensorProto, helper, numpy_helper
    except ImportError as exc:  # pragma: no cover - the bench extra installs them
        raise SystemExit("this benchmark needs onnx and onnxruntime: pip install -e '.[bench]'") from exc
    node = helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[KH, KW], pads=[1, 1, 1, 1], strides=[1, 1])
    graph = helper.make_graph(
        [node],
        "conv2d",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, CI, H, W])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, CO, H, W])],
        [numpy_helper.from_array(weight_oihw, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def best_of_rounds(ours: Callable[[], float], theirs: Callable[[], float], rounds: int) -> tuple[float, float]:
    """The fastest per-round median seconds of each side, the two measured alternately: a
    machine shared with other work slows both sides in the same rounds, not one side only."""
    best_ours = best_theirs = float("inf")
    for _ in range(rounds):
        best_ours = min(best_ours, ours())
        best_theirs = min(best_theirs, theirs())
    return best_ours, best_theirs


def main() -> None:
    rng = np.random.default_rng(0)
    data = rng.standard_normal((1, H, W, CI), dtype=np.float32)
    weight = rng.standard_normal((KH, KW, CI, CO), dtype=np.float32)
    out = np.zeros((1, H, W, CO), np.float32)
    expected = numpy_conv2d(data, weight)

    mod = tir.build(schedule_conv2d().mod, "llvm")
    data_nchw = np.ascontiguousarray(data.transpose(0, 3, 1, 2))  # onnxruntime's layouts, made
    weight_oihw = np.ascontiguousarray(weight.transpose(3, 2, 0, 1))  # outside the timed region
    feed = {"x": data_nchw}

    figures: dict[str, float] = {}
    print(f"conv2d NHWC float32 1x{H}x{W}x{CI} -> {CO}, 3x3, stride 1, pad 1 ({FLOPS / 1e9:.3f} GFLOP per call)")
    for threads in (1, 2):
        mod.set_num_threads(threads)
        session = onnx_session(weight_oihw, threads)
        out[...] = 0.0
        mod(data, weight, out)
        (ort_out,) = session.run(None, feed)
        ort_nhwc = ort_out.transpose(0, 2, 3, 1)
        np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(ort_nhwc, expected, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(out, ort_nhwc, rtol=1e-4, atol=1e-4)

        ours_s, theirs_s = best_of_rounds(
            lambda: mod.time(data, weight, out, repeat=REPEAT, warmup=2),
            lambda s=session: median_seconds(lambda: s.run(None, feed), repeat=REPEAT, warmup=2),
            ROUNDS,
        )
        ours, theirs = FLOPS / ours_s / 1e9, FLOPS / theirs_s / 1e9
        print(
            f"  {threads} thread{'s' if threads > 1 else ' '}: ours {ours:6.1f} GFLOP/s ({ours_s * 1e3:.3f} ms)"
            f"   onnxruntime {theirs:6.1f} GFLOP/s ({theirs_s * 1e3:.3f} ms)   ratio {ours / theirs:.3f}"
        )
        figures[f"ratio_vs_onnxruntime_{threads}t"] = ours / theirs
    report(figures)


if __name__ == "__main__":
    main()
