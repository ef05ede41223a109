"""The fuzz corpus: small kernels in the script dialect that exercise what schedules break.

Padding (explicit pad stages and padded reads), several outputs, reductions of every shape,
strided and dilated conv1d/conv2d in NHWC and NCHW, depthwise and grouped convolutions,
pooling, softmax, layer norm, int8 matmul, transposes, odd and prime extents, elementwise
chains, batch matmul, gemv. Extents stay small (a few thousand iterations): the fuzzer
interprets and builds every scheduled result.

``KERNELS`` maps each kernel's name to its ``PrimFunc``; ``REFERENCES`` gives a numpy
reference for some of them (the corpus test checks the unscheduled kernels against it).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import tir.script as T
from tir.ir import PrimFunc

# ---------------------------------------------------------------- matmuls and friends


@T.script
def matmul_odd(A: T.Buffer((7, 13), "float32"), B: T.Buffer((13, 11), "float32"), C: T.Buffer((7, 11), "float32")):
    for i, j, k in T.grid(7, 11, 13):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]


@T.script
def matmul_nt(A: T.Buffer((5, 7), "float32"), B: T.Buffer((9, 7), "float32"), C: T.Buffer((5, 9), "float32")):
    for i, j, k in T.grid(5, 9, 7):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vj, vk]


@T.script
def matmul_bias_relu(
    A: T.Buffer((16, 10), "float32"),
    B: T.Buffer((10, 12), "float32"),
    bias: T.Buffer((12,), "float32"),
    D: T.Buffer((16, 12), "float32"),
):
    C = T.alloc_buffer((16, 12), "float32")
    E = T.alloc_buffer((16, 12), "float32")
    for i, j, k in T.grid(16, 12, 10):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]
    for i, j in T.grid(16, 12):
        with T.block("E"):
            vi, vj = T.remap("SS", i, j)
            E[vi, vj] = C[vi, vj] + bias[vj]
    for i, j in T.grid(16, 12):
        with T.block("D"):
            vi, vj = T.remap("SS", i, j)
            D[vi, vj] = T.max(E[vi, vj], 0.0)


@T.script
def batch_matmul(
    A: T.Buffer((3, 8, 5), "float32"), B: T.Buffer((3, 5, 6), "float32"), C: T.Buffer((3, 8, 6), "float32")
):
    for b, i, j, k in T.grid(3, 8, 6, 5):
        with T.block("C"):
            vb, vi, vj, vk = T.remap("SSSR", b, i, j, k)
            with T.init():
                C[vb, vi, vj] = 0.0
            C[vb, vi, vj] += A[vb, vi, vk] * B[vb, vk, vj]


@T.script
def gemv(A: T.Buffer((17, 24), "float32"), x: T.Buffer((24,), "float32"), y: T.Buffer((17,), "float32")):
    for i, k in T.grid(17, 24):
        with T.block("y"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                y[vi] = 0.0
            y[vi] += A[vi, vk] * x[vk]


@T.script
def int8_matmul(A: T.Buffer((8, 16), "int8"), B: T.Buffer((16, 12), "int8"), C: T.Buffer((8, 12), "int32")):
    for i, j, k in T.grid(8, 12, 16):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0
            C[vi, vj] += T.cast(A[vi, vk], "int32") * T.cast(B[vk, vj], "int32")


@T.script
def int8_dense_requant(
    A: T.Buffer((6, 20), "int8"), W: T.Buffer((10, 20), "int8"), bias: T.Buffer((10,), "int32"),
    Q: T.Buffer((6, 10), "int8"),
):  # fmt: skip
    acc = T.alloc_buffer((6, 10), "int32")
    for i, j, k in T.grid(6, 10, 20):
        with T.block("acc"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                acc[vi, vj] = 0
            acc[vi, vj] += T.cast(A[vi, vk], "int32") * T.cast(W[vj, vk], "int32")
    for i, j in T.grid(6, 10):
        with T.block("Q"):
            vi, vj = T.remap("SS", i, j)
            Q[vi, vj] = T.cast(T.max(T.min((acc[vi, vj] + bias[vj]) // 4, 127), -128), "int8")


# ---------------------------------------------------------------- transposes and data movement


@T.script
def transpose2d(A: T.Buffer((13, 7), "float32"), B: T.Buffer((7, 13), "float32")):
    for i, j in T.grid(7, 13):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vj, vi]


@T.script
def transpose3d_add(A: T.Buffer((3, 5, 4), "float32"), B: T.Buffer((4, 3, 5), "float32")):
    T_ = T.alloc_buffer((4, 3, 5), "float32")
    for i, j, k in T.grid(4, 3, 5):
        with T.block("T"):
            vi, vj, vk = T.remap("SSS", i, j, k)
            T_[vi, vj, vk] = A[vj, vk, vi]
    for i, j, k in T.grid(4, 3, 5):
        with T.block("B"):
            vi, vj, vk = T.remap("SSS", i, j, k)
            B[vi, vj, vk] = T_[vi, vj, vk] * 2.0 + 1.0


@T.script
def reverse_gather(A: T.Buffer((31,), "float32"), B: T.Buffer((10,), "float32")):
    R = T.alloc_buffer((31,), "float32")
    for i in range(31):
        with T.block("R"):
            vi = T.spatial_axis(31, i)
            R[vi] = A[30 - vi]
    for i in range(10):
        with T.block("B"):
            vi = T.spatial_axis(10, i)
            B[vi] = R[vi * 3 + 1]


@T.script
def concat(A: T.Buffer((5, 6), "float32"), B: T.Buffer((7, 6), "float32"), C: T.Buffer((12, 6), "float32")):
    for i, j in T.grid(12, 6):
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = T.if_then_else(vi < 5, A[T.min(vi, 4), vj], B[T.max(vi - 5, 0), vj])


@T.script
def upsample_nearest(A: T.Buffer((5, 3), "float32"), B: T.Buffer((10, 6), "float32")):
    for i, j in T.grid(10, 6):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi // 2, vj // 2]


# ---------------------------------------------------------------- padding


@T.script
def pad_1d(A: T.Buffer((6,), "float32"), P: T.Buffer((8,), "float32")):
    B = T.alloc_buffer((6,), "float32")
    for i in range(6):
        with T.block("B"):
            vi = T.spatial_axis(6, i)
            B[vi] = A[vi] * 2.0
    for i in range(8):
        with T.block("P"):
            vi = T.spatial_axis(8, i)
            P[vi] = T.if_then_else(1 <= vi and vi < 7, B[vi - 1], 0.0)


@T.script
def pad2d_sum(A: T.Buffer((5, 7), "float32"), S: T.Buffer((7,), "float32")):
    P = T.alloc_buffer((7, 9), "float32")
    for i, j in T.grid(7, 9):
        with T.block("P"):
            vi, vj = T.remap("SS", i, j)
            P[vi, vj] = T.if_then_else(1 <= vi and vi < 6 and 1 <= vj and vj < 8, A[vi - 1, vj - 1], 0.0)
    for i, k in T.grid(7, 9):
        with T.block("S"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                S[vi] = 0.0
            S[vi] += P[vi, vk]


@T.script
def conv1d_constant_taps(A: T.Buffer((20,), "float32"), C: T.Buffer((18,), "float32")):
    taps = T.allocate_const([0.25, 0.5, 0.25], "float32", [3])
    B = T.alloc_buffer((18,), "float32")
    for i, k in T.grid(18, 3):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                B[vi] = 0.0
            B[vi] += A[vi + vk] * taps[vk]
    for i in range(18):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = T.max(B[vi], 0.0)


@T.script
def argmax_rows(A: T.Buffer((6, 20), "float32"), arg: T.Buffer((6,), "int32")):
    # topi's argmax form (equal values keep the smaller index): rfactor may split it anywhere.
    idx = T.alloc_buffer((6,), "int32")
    best = T.alloc_buffer((6,), "float32")
    for i, k in T.grid(6, 20):
        with T.block("argmax"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                idx[vi] = -1
                best[vi] = T.min_value("float32")
            new_idx: T.int32 = T.Select(best[vi] > A[vi, vk] or (best[vi] == A[vi, vk] and idx[vi] < vk), idx[vi], vk)
            new_best: T.float32 = T.Select(best[vi] > A[vi, vk], best[vi], A[vi, vk])
            idx[vi] = new_idx
            best[vi] = new_best
    for i in range(6):
        with T.block("arg"):
            vi = T.remap("S", i)
            arg[vi] = idx[vi]


# ---------------------------------------------------------------- convolutions


@T.script
def conv1d_nwc_strided_dilated(
    data: T.Buffer((2, 19, 3), "float32"), weight: T.Buffer((3, 3, 4), "float32"), out: T.Buffer((2, 7, 4), "float32")
):
    # stride 2, dilation 2, no padding: out width (19 - 2 * 2 - 1) // 2 + 1 = 7
    for n, w, co, rw, ci in T.grid(2, 7, 4, 3, 3):
        with T.block("conv"):
            vn, vw, vco, vrw, vci = T.remap("SSSRR", n, w, co, rw, ci)
            with T.init():
                out[vn, vw, vco] = 0.0
            out[vn, vw, vco] += data[vn, vw * 2 + vrw * 2, vci] * weight[vrw, vci, vco]


@T.script
def conv1d_ncw_padded(
    data: T.Buffer((1, 3, 11), "float32"), weight: T.Buffer((5, 3, 3), "float32"), out: T.Buffer((1, 5, 11), "float32")
):
    pad = T.alloc_buffer((1, 3, 13), "float32")
    for n, c, w in T.grid(1, 3, 13):
        with T.block("pad"):
            vn, vc, vw = T.remap("SSS", n, c, w)
            pad[vn, vc, vw] = T.if_then_else(1 <= vw and vw < 12, data[vn, vc, vw - 1], 0.0)
    for n, co, w, ci, rw in T.grid(1, 5, 11, 3, 3):
        with T.block("conv"):
            vn, vco, vw, vci, vrw = T.remap("SSSRR", n, co, w, ci, rw)
            with T.init():
                out[vn, vco, vw] = 0.0
            out[vn, vco, vw] += pad[vn, vci, vw + vrw] * weight[vco, vci, vrw]


@T.script
def conv2d_nhwc_stride2_pad(
    data: T.Buffer((1, 9, 9, 3), "float32"),
    weight: T.Buffer((3, 3, 3, 4), "float32"),
    out: T.Buffer((1, 5, 5, 4), "float32"),
):
    pad = T.alloc_buffer((1, 11, 11, 3), "float32")
    for n, h, w, c in T.grid(1, 11, 11, 3):
        with T.block("pad"):
            vn, vh, vw, vc = T.remap("SSSS", n, h, w, c)
            pad[vn, vh, vw, vc] = T.if_then_else(
                1 <= vh and vh < 10 and 1 <= vw and vw < 10, data[vn, vh - 1, vw - 1, vc], 0.0
            )
    for n, h, w, co, rh, rw, ci in T.grid(1, 5, 5, 4, 3, 3, 3):
        with T.block("conv"):
            vn, vh, vw, vco, vrh, vrw, vci = T.remap("SSSSRRR", n, h, w, co, rh, rw, ci)
            with T.init():
                out[vn, vh, vw, vco] = 0.0
            out[vn, vh, vw, vco] += pad[vn, vh * 2 + vrh, vw * 2 + vrw, vci] * weight[vrh, vrw, vci, vco]


@T.script
def conv2d_nchw_dilated(
    data: T.Buffer((1, 2, 10, 9), "float32"),
    weight: T.Buffer((3, 2, 3, 3), "float32"),
    out: T.Buffer((1, 3, 6, 5), "float32"),
):
    # dilation 2, no padding: 10 - 4 = 6, 9 - 4 = 5
    for n, co, h, w, ci, rh, rw in T.grid(1, 3, 6, 5, 2, 3, 3):
        with T.block("conv"):
            vn, vco, vh, vw, vci, vrh, vrw = T.remap("SSSSRRR", n, co, h, w, ci, rh, rw)
            with T.init():
                out[vn, vco, vh, vw] = 0.0
            out[vn, vco, vh, vw] += data[vn, vci, vh + vrh * 2, vw + vrw * 2] * weight[vco, vci, vrh, vrw]


@T.script
def conv2d_nhwc_1x1(
    data: T.Buffer((1, 5, 6, 8), "float32"), weight: T.Buffer((8, 6), "float32"), out: T.Buffer((1, 5, 6, 6), "float32")
):
    for n, h, w, co, ci in T.grid(1, 5, 6, 6, 8):
        with T.block("conv"):
            vn, vh, vw, vco, vci = T.remap("SSSSR", n, h, w, co, ci)
            with T.init():
                out[vn, vh, vw, vco] = 0.0
            out[vn, vh, vw, vco] += data[vn, vh, vw, vci] * weight[vci, vco]


@T.script
def depthwise_conv2d_nhwc(
    data: T.Buffer((1, 7, 7, 4), "float32"),
    weight: T.Buffer((3, 3, 4), "float32"),
    out: T.Buffer((1, 7, 7, 4), "float32"),
):
    for n, h, w, c, rh, rw in T.grid(1, 7, 7, 4, 3, 3):
        with T.block("depthwise"):
            vn, vh, vw, vc, vrh, vrw = T.remap("SSSSRR", n, h, w, c, rh, rw)
            with T.init():
                out[vn, vh, vw, vc] = 0.0
            out[vn, vh, vw, vc] += (
                T.if_then_else(
                    1 <= vh + vrh and vh + vrh < 8 and 1 <= vw + vrw and vw + vrw < 8,
                    data[vn, T.max(T.min(vh + vrh - 1, 6), 0), T.max(T.min(vw + vrw - 1, 6), 0), vc],
                    0.0,
                )
                * weight[vrh, vrw, vc]
            )


@T.script
def depthwise_conv2d_nchw_stride2(
    data: T.Buffer((1, 3, 11, 11), "float32"),
    weight: T.Buffer((3, 3, 3), "float32"),
    out: T.Buffer((1, 3, 5, 5), "float32"),
):
    for n, c, h, w, rh, rw in T.grid(1, 3, 5, 5, 3, 3):
        with T.block("depthwise"):
            vn, vc, vh, vw, vrh, vrw = T.remap("SSSSRR", n, c, h, w, rh, rw)
            with T.init():
                out[vn, vc, vh, vw] = 0.0
            out[vn, vc, vh, vw] += data[vn, vc, vh * 2 + vrh, vw * 2 + vrw] * weight[vc, vrh, vrw]


@T.script
def grouped_conv2d_nchw(
    data: T.Buffer((1, 4, 6, 6), "float32"),
    weight: T.Buffer((6, 2, 3, 3), "float32"),
    out: T.Buffer((1, 6, 4, 4), "float32"),
):
    # 2 groups: output channels 0-2 read input channels 0-1, 3-5 read 2-3
    for n, co, h, w, ci, rh, rw in T.grid(1, 6, 4, 4, 2, 3, 3):
        with T.block("conv"):
            vn, vco, vh, vw, vci, vrh, vrw = T.remap("SSSSRRR", n, co, h, w, ci, rh, rw)
            with T.init():
                out[vn, vco, vh, vw] = 0.0
            out[vn, vco, vh, vw] += data[vn, vco // 3 * 2 + vci, vh + vrh, vw + vrw] * weight[vco, vci, vrh, vrw]


@T.script
def conv1d_transpose(
    data: T.Buffer((2, 5), "float32"), weight: T.Buffer((2, 3, 3), "float32"), out: T.Buffer((3, 11), "float32")
):
    # stride 2, kernel 3: out width (5 - 1) * 2 + 3 = 11
    for co, w, ci, r in T.grid(3, 11, 2, 3):
        with T.block("convt"):
            vco, vw, vci, vr = T.remap("SSRR", co, w, ci, r)
            with T.init():
                out[vco, vw] = 0.0
            out[vco, vw] += T.if_then_else(
                (vw - vr) % 2 == 0 and 0 <= vw - vr and vw - vr < 10,
                data[vci, T.max(T.min((vw - vr) // 2, 4), 0)] * weight[vci, vco, vr],
                0.0,
            )


# ---------------------------------------------------------------- pooling


@T.script
def max_pool2d_nhwc(data: T.Buffer((1, 9, 9, 2), "float32"), pool: T.Buffer((1, 4, 4, 2), "float32")):
    for n, h, w, c, rh, rw in T.grid(1, 4, 4, 2, 3, 3):
        with T.block("pool"):
            vn, vh, vw, vc, vrh, vrw = T.remap("SSSSRR", n, h, w, c, rh, rw)
            with T.init():
                pool[vn, vh, vw, vc] = T.float32("-inf")
            pool[vn, vh, vw, vc] = T.max(pool[vn, vh, vw, vc], data[vn, vh * 2 + vrh, vw * 2 + vrw, vc])


@T.script
def avg_pool2d_nchw_pad(data: T.Buffer((1, 2, 7, 7), "float32"), out: T.Buffer((1, 2, 7, 7), "float32")):
    pad = T.alloc_buffer((1, 2, 9, 9), "float32")
    acc = T.alloc_buffer((1, 2, 7, 7), "float32")
    for n, c, h, w in T.grid(1, 2, 9, 9):
        with T.block("pad"):
            vn, vc, vh, vw = T.remap("SSSS", n, c, h, w)
            pad[vn, vc, vh, vw] = T.if_then_else(
                1 <= vh and vh < 8 and 1 <= vw and vw < 8, data[vn, vc, vh - 1, vw - 1], 0.0
            )
    for n, c, h, w, rh, rw in T.grid(1, 2, 7, 7, 3, 3):
        with T.block("acc"):
            vn, vc, vh, vw, vrh, vrw = T.remap("SSSSRR", n, c, h, w, rh, rw)
            with T.init():
                acc[vn, vc, vh, vw] = 0.0
            acc[vn, vc, vh, vw] += pad[vn, vc, vh + vrh, vw + vrw]
    for n, c, h, w in T.grid(1, 2, 7, 7):
        with T.block("out"):
            vn, vc, vh, vw = T.remap("SSSS", n, c, h, w)
            out[vn, vc, vh, vw] = acc[vn, vc, vh, vw] * T.float32(1.0 / 9.0)


@T.script
def global_avg_pool(data: T.Buffer((2, 3, 5, 5), "float32"), out: T.Buffer((2, 3), "float32")):
    acc = T.alloc_buffer((2, 3), "float32")
    for n, c, h, w in T.grid(2, 3, 5, 5):
        with T.block("acc"):
            vn, vc, vh, vw = T.remap("SSRR", n, c, h, w)
            with T.init():
                acc[vn, vc] = 0.0
            acc[vn, vc] += data[vn, vc, vh, vw]
    for n, c in T.grid(2, 3):
        with T.block("out"):
            vn, vc = T.remap("SS", n, c)
            out[vn, vc] = acc[vn, vc] * T.float32(0.04)


# ---------------------------------------------------------------- normalizations


@T.script
def partial_sums(A: T.Buffer((5, 12), "float32"), S: T.Buffer((5,), "float32")):
    # An rfactor's shape: partial sums P[r, i] over strided slices, then their sum (a reduction
    # that reverse_compute_at can split across the partials' loop).
    P = T.alloc_buffer((4, 5), "float32")
    for i, r, k in T.grid(5, 4, 3):
        with T.block("P"):
            vi, vr, vk = T.remap("SSR", i, r, k)
            with T.init():
                P[vr, vi] = 0.0
            P[vr, vi] += A[vi, vk * 4 + vr]
    for i, r in T.grid(5, 4):
        with T.block("S"):
            vi, vr = T.remap("SR", i, r)
            with T.init():
                S[vi] = 1.0
            S[vi] = S[vi] + P[vr, vi] * 0.5


@T.script
def softmax(A: T.Buffer((6, 13), "float32"), B: T.Buffer((6, 13), "float32")):
    row_max = T.alloc_buffer((6,), "float32")
    row_sum = T.alloc_buffer((6,), "float32")
    for i, k in T.grid(6, 13):
        with T.block("row_max"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                row_max[vi] = T.float32("-inf")
            row_max[vi] = T.max(row_max[vi], A[vi, vk])
    for i, k in T.grid(6, 13):
        with T.block("row_sum"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                row_sum[vi] = 0.0
            row_sum[vi] += T.exp(A[vi, vk] - row_max[vi])
    for i, j in T.grid(6, 13):
        with T.block("normalize"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = T.exp(A[vi, vj] - row_max[vi]) / row_sum[vi]


@T.script
def layer_norm(
    X: T.Buffer((5, 12), "float32"), gamma: T.Buffer((12,), "float32"), beta: T.Buffer((12,), "float32"),
    Y: T.Buffer((5, 12), "float32"),
):  # fmt: skip
    mean = T.alloc_buffer((5,), "float32")
    var = T.alloc_buffer((5,), "float32")
    for i, k in T.grid(5, 12):
        with T.block("mean"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                mean[vi] = 0.0
            mean[vi] += X[vi, vk] * T.float32(1.0 / 12.0)
    for i, k in T.grid(5, 12):
        with T.block("var"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                var[vi] = 0.0
            var[vi] += (X[vi, vk] - mean[vi]) * (X[vi, vk] - mean[vi]) * T.float32(1.0 / 12.0)
    for i, j in T.grid(5, 12):
        with T.block("normalize"):
            vi, vj = T.remap("SS", i, j)
            Y[vi, vj] = (X[vi, vj] - mean[vi]) * T.rsqrt(var[vi] + T.float32(1e-5)) * gamma[vj] + beta[vj]


@T.script
def l2_normalize(A: T.Buffer((4, 9), "float32"), B: T.Buffer((4, 9), "float32")):
    ss = T.alloc_buffer((4,), "float32")
    for i, k in T.grid(4, 9):
        with T.block("ss"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                ss[vi] = T.float32(1e-3)
            ss[vi] += A[vi, vk] * A[vi, vk]
    for i, j in T.grid(4, 9):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] / T.sqrt(ss[vi])


# ---------------------------------------------------------------- reductions


@T.script
def row_col_sums(A: T.Buffer((9, 14), "float32"), R: T.Buffer((9,), "float32"), C: T.Buffer((14,), "float32")):
    for i, k in T.grid(9, 14):
        with T.block("R"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                R[vi] = 0.0
            R[vi] += A[vi, vk]
    for j, k in T.grid(14, 9):
        with T.block("C"):
            vj, vk = T.remap("SR", j, k)
            with T.init():
                C[vj] = 0.0
            C[vj] += A[vk, vj]


@T.script
def reduce_3_axes(A: T.Buffer((3, 5, 7, 2), "float32"), B: T.Buffer((2,), "float32")):
    for c, i, j, k in T.grid(2, 3, 5, 7):
        with T.block("B"):
            vc, vi, vj, vk = T.remap("SRRR", c, i, j, k)
            with T.init():
                B[vc] = 0.0
            B[vc] += A[vi, vj, vk, vc]


@T.script
def row_sum_init(A: T.Buffer((6, 12), "float32"), S: T.Buffer((6,), "float32")):
    # A non-zero init: an init that runs late (after updates of its row) shows in the result even
    # where the updates it overwrites sum to little.
    for i, k in T.grid(6, 12):
        with T.block("S"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                S[vi] = 10.0
            S[vi] += A[vi, vk]


@T.script
def row_sum_init_chain(A: T.Buffer((6, 12), "float32"), D: T.Buffer((6, 12), "float32")):
    # row_sum_init between a producer and a consumer of the same 6x12 shape, so that
    # compute_at / reverse_compute_at can move the reduction under fused, split, reordered loops.
    B = T.alloc_buffer((6, 12), "float32")
    S = T.alloc_buffer((6,), "float32")
    for i, k in T.grid(6, 12):
        with T.block("B"):
            vi, vk = T.remap("SS", i, k)
            B[vi, vk] = A[vi, vk] * 2.0
    for i, k in T.grid(6, 12):
        with T.block("S"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                S[vi] = 10.0
            S[vi] += B[vi, vk]
    for i, k in T.grid(6, 12):
        with T.block("D"):
            vi, vk = T.remap("SS", i, k)
            D[vi, vk] = S[vi] - B[vi, vk]


@T.script
def min_max_outputs(A: T.Buffer((5, 11), "float32"), lo: T.Buffer((5,), "float32"), hi: T.Buffer((5,), "float32")):
    for i, k in T.grid(5, 11):
        with T.block("lo"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                lo[vi] = T.float32("inf")
            lo[vi] = T.min(lo[vi], A[vi, vk])
    for i, k in T.grid(5, 11):
        with T.block("hi"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                hi[vi] = T.float32("-inf")
            hi[vi] = T.max(hi[vi], A[vi, vk])


@T.script
def int_sum_of_products(A: T.Buffer((23,), "int32"), B: T.Buffer((23,), "int32"), S: T.Buffer((1,), "int32")):
    for k in range(23):
        with T.block("S"):
            vk = T.reduce_axis(23, k)
            with T.init():
                S[0] = 0
            S[0] += A[vk] * B[vk]


@T.script
def prefix_sum(A: T.Buffer((12,), "float32"), B: T.Buffer((12,), "float32")):
    for i, k in T.grid(12, 12):
        with T.block("B"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                B[vi] = 0.0
            B[vi] += T.if_then_else(vk <= vi, A[vk], 0.0)


# ---------------------------------------------------------------- elementwise


@T.script
def elementwise_chain(A: T.Buffer((37,), "float32"), D: T.Buffer((37,), "float32")):
    B = T.alloc_buffer((37,), "float32")
    C = T.alloc_buffer((37,), "float32")
    for i in range(37):
        with T.block("B"):
            vi = T.spatial_axis(37, i)
            B[vi] = A[vi] * 2.0
    for i in range(37):
        with T.block("C"):
            vi = T.spatial_axis(37, i)
            C[vi] = B[vi] + 1.0
    for i in range(37):
        with T.block("D"):
            vi = T.spatial_axis(37, i)
            D[vi] = T.max(C[vi], 0.0) * T.exp(B[vi] * 0.5)


@T.script
def broadcast_bias_tanh(
    A: T.Buffer((6, 10), "float32"), b: T.Buffer((10,), "float32"), C: T.Buffer((6, 10), "float32")
):
    B = T.alloc_buffer((6, 10), "float32")
    for i, j in T.grid(6, 10):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] + b[vj]
    for i, j in T.grid(6, 10):
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = T.tanh(B[vi, vj])


@T.script
def two_outputs_one_block(
    A: T.Buffer((4, 9), "float32"), B: T.Buffer((4, 9), "float32"), C: T.Buffer((4, 9), "float32")
):
    for i, j in T.grid(4, 9):
        with T.block("BC"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] + 1.0
            C[vi, vj] = A[vi, vj] * 3.0


@T.script
def int_floor_div_mod(A: T.Buffer((6, 7), "int32"), B: T.Buffer((6, 7), "int32")):
    for i, j in T.grid(6, 7):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] // 3 + A[vi, vj] % 4 * 10 + T.truncdiv(A[vi, vj], 2) * 100


@T.script
def int8_saturating_add(A: T.Buffer((29,), "int8"), B: T.Buffer((29,), "int8"), C: T.Buffer((29,), "int8")):
    for i in range(29):
        with T.block("C"):
            vi = T.spatial_axis(29, i)
            C[vi] = T.cast(T.max(T.min(T.cast(A[vi], "int32") * 3 + T.cast(B[vi], "int32"), 127), -128), "int8")


@T.script
def float64_stencil(A: T.Buffer((19,), "float64"), B: T.Buffer((17,), "float64")):
    for i in range(17):
        with T.block("B"):
            vi = T.spatial_axis(17, i)
            B[vi] = A[vi] * 0.25 + A[vi + 1] * 0.5 + A[vi + 2] * 0.25


@T.script
def prime_3d_scale(A: T.Buffer((3, 5, 7), "float32"), B: T.Buffer((3, 5, 7), "float32")):
    for i, j, k in T.grid(3, 5, 7):
        with T.block("B"):
            vi, vj, vk = T.remap("SSS", i, j, k)
            B[vi, vj, vk] = A[vi, vj, vk] * T.float32(1.5) - A[vi, vj, 6 - vk]


#: Every kernel of the corpus, by name.
KERNELS: dict[str, PrimFunc] = {
    func.name: func
    for func in [
        matmul_odd, matmul_nt, matmul_bias_relu, batch_matmul, gemv, int8_matmul, int8_dense_requant,
        transpose2d, transpose3d_add, reverse_gather, concat, upsample_nearest,
        pad_1d, pad2d_sum, partial_sums, conv1d_constant_taps, argmax_rows,
        conv1d_nwc_strided_dilated, conv1d_ncw_padded, conv2d_nhwc_stride2_pad, conv2d_nchw_dilated,
        conv2d_nhwc_1x1, depthwise_conv2d_nhwc, depthwise_conv2d_nchw_stride2, grouped_conv2d_nchw,
        conv1d_transpose,
        max_pool2d_nhwc, avg_pool2d_nchw_pad, global_avg_pool,
        softmax, layer_norm, l2_normalize,
        row_col_sums, reduce_3_axes, row_sum_init, row_sum_init_chain, min_max_outputs, int_sum_of_products,
        prefix_sum,
        elementwise_chain, broadcast_bias_tanh, two_outputs_one_block, int_floor_div_mod,
        int8_saturating_add, float64_stencil, prime_3d_scale,
    ]
}  # fmt: skip


#: The reductions with a non-zero ``T.init()`` that the init-order fuzz run focuses on (with
#: ``tests.fuzz.actions.INIT_ORDER_WEIGHTS``).
INIT_ORDER_KERNELS: list[str] = ["row_sum_init", "row_sum_init_chain"]


# ---------------------------------------------------------------- numpy references (some kernels)

Reference = Callable[..., dict[str, np.ndarray]]


def _conv2d_nchw(data: np.ndarray, weight: np.ndarray, stride: int, dilation: int) -> np.ndarray:
    n, _, h, w = data.shape
    co, ci, kh, kw = weight.shape
    oh = (h - dilation * (kh - 1) - 1) // stride + 1
    ow = (w - dilation * (kw - 1) - 1) // stride + 1
    out = np.zeros((n, co, oh, ow))
    for rh in range(kh):
        for rw in range(kw):
            hs, ws = rh * dilation, rw * dilation
            window = data[:, :, hs : hs + stride * (oh - 1) + 1 : stride, ws : ws + stride * (ow - 1) + 1 : stride]
            out += np.einsum("nchw,oc->nohw", window, weight[:, :, rh, rw])
    return out


def _floor_div_mod_reference(A: np.ndarray, B: np.ndarray) -> dict[str, np.ndarray]:
    trunc = (np.abs(A) // 2) * np.sign(A)
    return {"B": A // 3 + (A % 4) * 10 + trunc * 100}


REFERENCES: dict[str, Reference] = {
    "matmul_odd": lambda A, B, C: {"C": A @ B},
    "matmul_nt": lambda A, B, C: {"C": A @ B.T},
    "batch_matmul": lambda A, B, C: {"C": A @ B},
    "gemv": lambda A, x, y: {"y": A @ x},
    "int8_matmul": lambda A, B, C: {"C": A.astype(np.int32) @ B.astype(np.int32)},
    "transpose2d": lambda A, B: {"B": A.T},
    "pad_1d": lambda A, P: {"P": np.pad(A * 2.0, 1)},
    "argmax_rows": lambda A, arg: {"arg": A.argmax(1).astype(np.int32)},
    "conv1d_constant_taps": lambda A, C: {"C": np.maximum(np.convolve(A, [0.25, 0.5, 0.25], "valid"), 0.0)},
    "conv2d_nchw_dilated": lambda data, weight, out: {"out": _conv2d_nchw(data, weight, 1, 2)},
    "softmax": lambda A, B: {"B": np.exp(A - A.max(1, keepdims=True)) / np.exp(A - A.max(1, keepdims=True)).sum(1, keepdims=True)},
    "row_col_sums": lambda A, R, C: {"R": A.sum(1), "C": A.sum(0)},
    "row_sum_init": lambda A, S: {"S": 10.0 + A.sum(1)},
    "row_sum_init_chain": lambda A, D: {"D": (10.0 + 2.0 * A.sum(1))[:, None] - 2.0 * A},
    "min_max_outputs": lambda A, lo, hi: {"lo": A.min(1), "hi": A.max(1)},
    "prefix_sum": lambda A, B: {"B": np.cumsum(A)},
    "partial_sums": lambda A, S: {"S": 1.0 + 0.5 * A.sum(1)},
    "int_floor_div_mod": _floor_div_mod_reference,
    "upsample_nearest": lambda A, B: {"B": A.repeat(2, 0).repeat(2, 1)},
    "two_outputs_one_block": lambda A, B, C: {"B": A + 1.0, "C": A * 3.0},
}  # fmt: skip
