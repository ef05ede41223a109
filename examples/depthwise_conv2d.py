"""Depthwise 2-D convolution: NHWC input, one 3 x 3 filter per channel, stride 1, padding 1.

Each output channel reads only its own input channel. Here the zero padding is not a separate
block: ``T.if_then_else`` inside the reduction reads the input only where the window is in
range and contributes 0 elsewhere.

Run it with ``python examples/depthwise_conv2d.py``.
"""

from __future__ import annotations

import numpy as np
from _common import run_example

import tir.script as T

N, H, W, C = 1, 8, 8, 4  # batch, height, width, channels
KH, KW = 3, 3


@T.script
def depthwise_conv2d(
    data: T.Buffer((N, H, W, C), "float32"),
    weight: T.Buffer((KH, KW, C), "float32"),
    out: T.Buffer((N, H, W, C), "float32"),
):
    for n, h, w, c, rh, rw in T.grid(N, H, W, C, KH, KW):
        with T.block("depthwise"):
            vn, vh, vw, vc, vrh, vrw = T.remap("SSSSRR", n, h, w, c, rh, rw)
            with T.init():
                out[vn, vh, vw, vc] = 0.0
            out[vn, vh, vw, vc] += (
                T.if_then_else(
                    0 <= vh + vrh - 1 < H and 0 <= vw + vrw - 1 < W,
                    data[vn, vh + vrh - 1, vw + vrw - 1, vc],
                    0.0,
                )
                * weight[vrh, vrw, vc]
            )


KERNEL = depthwise_conv2d
ATOL = 1e-4


def make_args(rng: np.random.Generator) -> list[np.ndarray]:
    data = rng.standard_normal((N, H, W, C), dtype=np.float32)
    weight = rng.standard_normal((KH, KW, C), dtype=np.float32)
    return [data, weight, np.zeros((N, H, W, C), np.float32)]


def reference(data: np.ndarray, weight: np.ndarray, out: np.ndarray) -> dict[str, np.ndarray]:
    padded = np.pad(data.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    result = np.zeros((N, H, W, C))
    for rh in range(KH):
        for rw in range(KW):
            result += padded[:, rh : rh + H, rw : rw + W, :] * weight[rh, rw].astype(np.float64)
    return {"out": result}


def main() -> None:
    run_example(depthwise_conv2d, make_args, reference, ATOL)


if __name__ == "__main__":
    main()
