"""Compiler support the built-in intrinsics rely on, outside tir/intrin/.

- access inference bounds a vector index that is not a Ramp (``k * 4 + T.ramp(0, 1, 32) % 4``,
  the group broadcast of the int8 dot products) over its lanes;
- the LLVM code generator emits such a gather lane by lane with scalar indices, so that LLVM
  sees the repeated group and loads it once as a broadcast.
"""

from __future__ import annotations

import numpy as np

import tir
import tir.script as T
from tir.target import Target


@T.script
def group_broadcast(A: T.Buffer((64,), "uint8"), C: T.Buffer((16, 32), "uint8")):
    for k in range(16):
        with T.block("C"):
            vk = T.spatial_axis(16, k)
            C[vk, T.ramp(0, 1, 32)] = A[vk * 4 + T.ramp(0, 1, 32) % 4]


def test_access_inference_bounds_a_vector_index_over_its_lanes() -> None:
    realize = group_broadcast.body
    while not (isinstance(realize, tir.ir.BlockRealize) and realize.block.name == "C"):
        realize = realize.body if not isinstance(realize, tir.ir.BlockRealize) else realize.block.body
    (read,) = realize.block.reads
    (rng,) = read.region
    vk = realize.block.iter_vars[0].var
    tir.assert_structural_equal(rng.min, vk * 4)
    assert rng.extent.value == 4  # four bytes per k, not the whole of A


def test_group_broadcast_gather_runs_and_compiles_to_a_broadcast() -> None:
    a = np.arange(64, dtype=np.uint8)
    want = np.stack([np.tile(a[4 * k : 4 * k + 4], 8) for k in range(16)])
    interpreted = np.zeros((16, 32), np.uint8)
    tir.interpret(group_broadcast, a, interpreted)
    np.testing.assert_array_equal(interpreted, want)
    module = tir.build(group_broadcast, "llvm -mcpu=haswell")
    asm = module.get_source("asm")
    assert "broadcast" in asm and "vpinsrb" not in asm and "vpextr" not in asm
    if Target.host().has("avx2"):
        compiled = np.zeros((16, 32), np.uint8)
        module(a, compiled)
        np.testing.assert_array_equal(compiled, want)
