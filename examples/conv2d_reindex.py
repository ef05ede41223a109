"""A 2-D convolution turned into a matrix multiplication by schedule primitives alone.

A convolution ``conv[n, h, w, co] += padded[n, h + rh, w + rw, ci] * weight[rh, rw, ci, co]``
is a matmul in disguise: group the iterators by the operands they index (TensorIR calls these
their characteristic vectors) and the spatial group ``(n, h, w)`` is a row, ``co`` a column, and
the reduction group ``(rh, rw, ci)`` the inner dimension. Three primitives make that explicit:

1. ``reindex`` gives each operand (and the output) a copy indexed directly by the block's
   iterators: ``padded_reindex[n, h, w, rh, rw, ci] = padded[n, h + rh, w + rw, ci]`` (the
   im2col step), ``weight_reindex[co, rh, rw, ci]``, ``conv_reindex[n, h, w, co]``;
2. ``transform_block_layout`` fuses the iteration space into three iterators:
   ``(n * H * W + h * W + w, co, rh * KW * CI + rw * CI + ci)``;
3. ``transform_layout`` stores the copies in the matching 2-D layouts, so that the block reads
   ``C[i, j] = C[i, j] + A[i, k] * B[k, j]``, ready for a matmul micro-kernel (tensorize).

The program is printed after every step. Run it with ``python examples/conv2d_reindex.py``.
"""

from __future__ import annotations

import numpy as np
from _common import run_example

import tir
import tir.script as T

N, H, W, CI, CO = 2, 6, 6, 3, 4  # batch, height, width, input and output channels
KH, KW = 3, 3  # kernel window
HP, WP = H + 2, W + 2  # padded height and width (padding 1)


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


def reindex_to_matmul(func: tir.PrimFunc, verbose: bool = False) -> tir.Schedule:
    """The schedule: conv2d as a (N*H*W) x CO x (KH*KW*CI) matmul."""
    sch = tir.Schedule(func, debug=True)  # debug: every step is validated

    def step(title: str) -> None:
        if verbose:
            print(f"\n# --- {title}")
            sch.show()

    step("the convolution as written")
    conv = sch.get_block("conv")
    # The block reads (conv, padded, weight) and writes conv.
    sch.reindex(conv, ("read", 1))
    step("reindex padded: an im2col copy indexed by (n, h, w, rh, rw, ci)")
    sch.reindex(conv, ("read", 2))
    step("reindex weight: a copy indexed by (co, rh, rw, ci)")
    sch.reindex(conv, ("write", 0))
    step("reindex conv: the block writes a copy indexed by (n, h, w, co), copied back after it")
    sch.transform_block_layout(
        conv, lambda n, h, w, co, rh, rw, ci: (n * H * W + h * W + w, co, rh * KW * CI + rw * CI + ci)
    )
    step("transform_block_layout: three iterators, i = (n, h, w), j = co, k = (rh, rw, ci)")
    sch.transform_layout(
        conv, ("read", 1), lambda n, h, w, rh, rw, ci: (n * H * W + h * W + w, rh * KW * CI + rw * CI + ci)
    )
    sch.transform_layout(conv, ("read", 2), lambda co, rh, rw, ci: (rh * KW * CI + rw * CI + ci, co))
    sch.transform_layout(conv, ("write", 0), lambda n, h, w, co: (n * H * W + h * W + w, co))
    step("transform_layout: A[i, k], B[k, j], C[i, j] -- the block is a matmul")
    return sch


KERNEL = reindex_to_matmul(conv2d_nhwc).func.replace(name="conv2d_reindex")
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
            out += padded[:, rh : rh + H, rw : rw + W, :] @ weight[rh, rw].astype(np.float64)
    return {"conv": out}


def main() -> None:
    run_example(KERNEL, make_args, reference, ATOL)
    print("\n# ===== the walkthrough, step by step")
    sch = reindex_to_matmul(conv2d_nhwc, verbose=True)
    print("\n# --- the schedule, as replayable Python")
    sch.trace.show()


if __name__ == "__main__":
    main()
