"""2-D convolution: NHWC input, HWIO weights, 3 x 3 kernel, stride 1, padding 1.

Two blocks. ``pad`` copies the input into a zero-bordered buffer (``T.alloc_buffer``), using
``T.if_then_else`` so that out-of-range input elements are never read. ``conv`` then reduces
over the window and the input channels with no bounds checks at all.

Run it with ``python examples/conv2d_nhwc.py``.
"""

from __future__ import annotations

import numpy as np
from _common import run_example

import tir.script as T

N, H, W, CI, CO = 1, 6, 6, 3, 4  # batch, height, width, input and output channels
KH, KW = 3, 3  # kernel window
HP, WP = H + 2, W + 2  # padded height and width


@T.script
def conv2d_nhwc(
    data: T.Buffer((N, H, W, CI), "float32"),
    weight: T.Buffer((KH, KW, CI, CO), "float32"),
    conv: T.Buffer((N, H, W, CO), "float32"),
):
    padded = T.alloc_buffer((N, HP, WP, CI), "float32")
    for n, h, w, c in T.grid(N, HP, WP, CI):
        with T.block("pad"):
            vn, vh, vw, vc = T.remap("SSSS", n, h, w, c)
            padded[vn, vh, vw, vc] = T.if_then_else(
                1 <= vh < H + 1 and 1 <= vw < W + 1, data[vn, vh - 1, vw - 1, vc], 0.0
            )
    for n, h, w, co, rh, rw, ci in T.grid(N, H, W, CO, KH, KW, CI):
        with T.block("conv"):
            vn, vh, vw, vco, vrh, vrw, vci = T.remap("SSSSRRR", n, h, w, co, rh, rw, ci)
            with T.init():
                conv[vn, vh, vw, vco] = 0.0
            conv[vn, vh, vw, vco] += padded[vn, vh + vrh, vw + vrw, vci] * weight[vrh, vrw, vci, vco]


KERNEL = conv2d_nhwc
ATOL = 1e-4


def make_args(rng: np.random.Generator) -> list[np.ndarray]:
    data = rng.standard_normal((N, H, W, CI), dtype=np.float32)
    weight = rng.standard_normal((KH, KW, CI, CO), dtype=np.float32)
    return [data, weight, np.zeros((N, H, W, CO), np.float32)]


def reference(data: np.ndarray, weight: np.ndarray, conv: np.ndarray) -> dict[str, np.ndarray]:
    padded = np.pad(data.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    out = np.zeros((N, H, W, CO))
    for rh in range(KH):
        for rw in range(KW):
            window = padded[:, rh : rh + H, rw : rw + W, :]  # (N, H, W, CI)
            out += window @ weight[rh, rw].astype(np.float64)  # (CI, CO)
    return {"conv": out}


def main() -> None:
    run_example(conv2d_nhwc, make_args, reference, ATOL)


if __name__ == "__main__":
    main()
