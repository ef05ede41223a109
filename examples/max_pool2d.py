"""2-D max pooling: NHWC, 3 x 3 window, stride 2, no padding (windows overlap by one).

A max reduction over the window axes ``rh, rw``; the init is -inf so that any input wins.

Run it with ``python examples/max_pool2d.py``.
"""

from __future__ import annotations

import numpy as np
from _common import run_example

import tir.script as T

N, H, W, C = 1, 9, 9, 4  # batch, input height, input width, channels
KH, KW = 3, 3  # window
STRIDE = 2
OH, OW = (H - KH) // STRIDE + 1, (W - KW) // STRIDE + 1  # 4 x 4


@T.script
def max_pool2d(data: T.Buffer((N, H, W, C), "float32"), pool: T.Buffer((N, OH, OW, C), "float32")):
    for n, oh, ow, c, rh, rw in T.grid(N, OH, OW, C, KH, KW):
        with T.block("pool"):
            vn, voh, vow, vc, vrh, vrw = T.remap("SSSSRR", n, oh, ow, c, rh, rw)
            with T.init():
                pool[vn, voh, vow, vc] = T.float32("-inf")
            pool[vn, voh, vow, vc] = T.max(pool[vn, voh, vow, vc], data[vn, voh * STRIDE + vrh, vow * STRIDE + vrw, vc])


KERNEL = max_pool2d
ATOL = 0.0  # max only selects values: the result is exact


def make_args(rng: np.random.Generator) -> list[np.ndarray]:
    data = rng.standard_normal((N, H, W, C), dtype=np.float32)
    return [data, np.zeros((N, OH, OW, C), np.float32)]


def reference(data: np.ndarray, pool: np.ndarray) -> dict[str, np.ndarray]:
    out = np.full((N, OH, OW, C), -np.inf, dtype=np.float32)
    for rh in range(KH):
        for rw in range(KW):
            window = data[:, rh : rh + STRIDE * OH : STRIDE, rw : rw + STRIDE * OW : STRIDE, :]
            out = np.maximum(out, window)
    return {"pool": out}


def main() -> None:
    run_example(max_pool2d, make_args, reference, ATOL)


if __name__ == "__main__":
    main()
