"""Transposed 2-D convolution (a.k.a. deconvolution): NHWC input, HWIO weights, 3 x 3, stride 2.

Input pixel ``(ih, iw)`` scatters ``data[ih, iw] * weight[kh, kw]`` to output pixel
``(ih * STRIDE + kh - PAD, iw * STRIDE + kw - PAD)``. The kernel writes the same sum as a
gather, one output pixel at a time: for an output row ``oh`` and kernel row ``kh``, the
input row is ``(oh + PAD - kh) / STRIDE`` when that division is exact and in range, and no
input row contributes otherwise. ``T.if_then_else`` tests both conditions before the read;
``th = ...`` binds a scalar for the statements after it.

Run it with ``python examples/conv2d_transpose.py``.
"""

from __future__ import annotations

import numpy as np
from _common import run_example

import tir.script as T

N, IH, IW, CI, CO = 1, 4, 4, 2, 3  # batch, input height and width, input and output channels
KH, KW = 3, 3
STRIDE, PAD = 2, 1
OH, OW = (IH - 1) * STRIDE - 2 * PAD + KH, (IW - 1) * STRIDE - 2 * PAD + KW  # 7 x 7


@T.script
def conv2d_transpose(
    data: T.Buffer((N, IH, IW, CI), "float32"),
    weight: T.Buffer((KH, KW, CI, CO), "float32"),
    out: T.Buffer((N, OH, OW, CO), "float32"),
):
    for n, oh, ow, co, rh, rw, ci in T.grid(N, OH, OW, CO, KH, KW, CI):
        with T.block("conv_transpose"):
            vn, voh, vow, vco, vrh, vrw, vci = T.remap("SSSSRRR", n, oh, ow, co, rh, rw, ci)
            with T.init():
                out[vn, voh, vow, vco] = 0.0
            # Output pixel (voh, vow) gets input pixel (th / STRIDE, tw / STRIDE) through the
            # kernel tap (vrh, vrw), if the division is exact and the pixel exists.
            th = voh + PAD - vrh
            tw = vow + PAD - vrw
            out[vn, voh, vow, vco] += (
                T.if_then_else(
                    th % STRIDE == 0 and tw % STRIDE == 0 and 0 <= th // STRIDE < IH and 0 <= tw // STRIDE < IW,
                    data[vn, th // STRIDE, tw // STRIDE, vci],
                    0.0,
                )
                * weight[vrh, vrw, vci, vco]
            )


KERNEL = conv2d_transpose
ATOL = 1e-4


def make_args(rng: np.random.Generator) -> list[np.ndarray]:
    data = rng.standard_normal((N, IH, IW, CI), dtype=np.float32)
    weight = rng.standard_normal((KH, KW, CI, CO), dtype=np.float32)
    return [data, weight, np.zeros((N, OH, OW, CO), np.float32)]


def reference(data: np.ndarray, weight: np.ndarray, out: np.ndarray) -> dict[str, np.ndarray]:
    # The scatter form, on an output grown by PAD on every side, then cropped.
    full = np.zeros((N, OH + 2 * PAD, OW + 2 * PAD, CO))
    for ih in range(IH):
        for iw in range(IW):
            for kh in range(KH):
                for kw in range(KW):
                    contribution = data[:, ih, iw, :].astype(np.float64) @ weight[kh, kw].astype(np.float64)
                    full[:, ih * STRIDE + kh, iw * STRIDE + kw, :] += contribution
    return {"out": full[:, PAD : PAD + OH, PAD : PAD + OW, :]}


def main() -> None:
    run_example(conv2d_transpose, make_args, reference, ATOL)


if __name__ == "__main__":
    main()
