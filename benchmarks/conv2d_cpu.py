"""Hand-scheduled float32 conv2d NHWC against onnxruntime's Conv, at 1 and 2 threads.

conv2d: N=1, H=W=56, CI=64 -> CO=64, 3x3 kernel, stride 1, padding 1, weights HWIO. The kernel is
written in the dialect (a padding block and a conv block with ``T.init``) and scheduled with the
Schedule API only; see ``schedule_conv2d`` for the schedule and why. onnxruntime runs the same
convolution as an ONNX ``Conv`` node (NCHW; inputs are transposed outside the timed region).

Prints GFLOP/s for both at each thread count and our ratio, and ends with one JSON line.

Run: python benchmarks/conv2d_cpu.py   (needs: pip install -e '.[bench]')
"""

from __future__ import annotations

import numpy as np
from _harness import median_seconds, report

import tir
import tir.script as T
from tir.schedule import Schedule

H = W = 56
CI = CO = 64
KH = KW = 3
FLOPS = 2.0 * H * W * CO * KH * KW * CI


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


ROWS = 4  # output pixels (along w) per micro-kernel
COLS = 16  # output channels per micro-kernel: two 8-float vectors


def schedule_conv2d() -> Schedule:
    sch = Schedule(conv2d)
    conv = sch.get_block("conv")
    n, h, w, co, rh, rw, ci = sch.get_loops(conv)
    wo, wi = sch.split(w, [None, ROWS])
    coo, coi = sch.split(co, [None, COLS])
    sch.reorder(h, coo, wo, rh, rw, ci, wi, coi)
    sch.unroll(wi)
    sch.vectorize(coi)
    init = sch.decompose_reduction(conv, rh)
    sch.vectorize(sch.get_loops(init)[-1])
    nh = sch.fuse(n, h)
    sch.parallel(nh)

    pad = sch.get_block("pad")
    pn, ph, pw, pc = sch.get_loops(pad)
    sch.parallel(sch.fuse(pn, ph))
    sch.vectorize(pc)
    return sch


def numpy_conv2d(data: np.ndarray, weight: np.ndarray) -> np.ndarray:
    padded = np.pad(data.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (KH, KW), axis=(1, 2))  # n h w c kh kw
    cols = windows.transpose(0, 1, 2, 4, 5, 3).reshape(H * W, KH * KW * CI)
    return (cols @ weight.astype(np.float64).reshape(KH * KW * CI, CO)).reshape(1, H, W, CO)


def onnx_session(weight_oihw: np.ndarray, threads: int):  # type: ignore[no-untyped-def]
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


def main() -> None:
    rng = np.random.default_rng(0)
    data = rng.standard_normal((1, H, W, CI), dtype=np.float32)
    weight = rng.standard_normal((KH, KW, CI, CO), dtype=np.float32)
    out = np.zeros((1, H, W, CO), np.float32)
    expected = numpy_conv2d(data, weight)

    mod = tir.build(schedule_conv2d().mod, "llvm")
    data_nchw = np.ascontiguousarray(data.transpose(0, 3, 1, 2))
    weight_oihw = np.ascontiguousarray(weight.transpose(3, 2, 0, 1))

    figures: dict[str, float] = {}
    print(f"conv2d NHWC float32 1x{H}x{W}x{CI} -> {CO}, 3x3, pad 1 ({FLOPS / 1e9:.3f} GFLOP)")
    for threads in (1, 2):
        mod.set_num_threads(threads)
        out[...] = 0.0
        mod(data, weight, out)
        np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
        session = onnx_session(weight_oihw, threads)
        (ort_out,) = session.run(None, {"x": data_nchw})
        np.testing.assert_allclose(ort_out.transpose(0, 2, 3, 1), expected, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(out, ort_out.transpose(0, 2, 3, 1), rtol=1e-4, atol=1e-4)

        ours = FLOPS / mod.time(data, weight, out, repeat=50) / 1e9
        theirs = FLOPS / median_seconds(lambda s=session: s.run(None, {"x": data_nchw}), repeat=50, warmup=5) / 1e9
        ratio = ours / theirs
        print(f"  {threads} thread(s): ours {ours:7.2f} GFLOP/s   onnxruntime {theirs:7.2f} GFLOP/s   ratio {ratio:.3f}")
        figures[f"ratio_vs_onnxruntime_{threads}t"] = ratio
    report(figures)


if __name__ == "__main__":
    main()
