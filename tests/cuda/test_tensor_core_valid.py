"""The tensor-core schedules satisfy the validator: warp-level intrinsics run on whole warps
(the kernel's threadIdx.x extent is 32) and the symbolic strides of their match_buffer views are
defined by the match."""

from __future__ import annotations

import pytest
from cuda_kernels import make_matmul_f16, schedule_tensor_core

import tir
from tir.analysis import verify
from tir.target import Target


@pytest.mark.parametrize("mma", [False, True], ids=["wmma", "mma_sync"])
def test_tensor_core_schedule_passes_the_validator(mma: bool) -> None:
    sch = schedule_tensor_core(make_matmul_f16(128), mma=mma)
    assert verify(sch.func, Target.parse("cuda -arch=sm_80")) == []


def test_match_buffer_stride_variable_is_defined_by_the_match() -> None:
    func = tir.parse(
        """
@T.script
def f(A: T.Buffer((32, 32), "float32")):
    for i in range(2):
        with T.block("b"):
            vi = T.spatial_axis(2, i)
            T.reads()
            T.writes(A[vi * 16:vi * 16 + 16, 0:16])
            s0 = T.int32()
            S = T.match_buffer(A[vi * 16:vi * 16 + 16, 0:16], (16, 16), "float32", strides=(s0, 1))
            S[0, 0] = T.float32(s0)
"""
    )
    assert verify(func) == []


def test_warp_level_op_in_a_kernel_of_16_lanes_is_refused() -> None:
    func = tir.parse(
        """
@T.script
def f(A: T.Buffer((16, 16), "float16")):
    F = T.alloc_buffer((16, 16), "float16", scope="wmma.accumulator")
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        for tx in T.thread_binding(16, thread="threadIdx.x"):
            with T.block("copy"):
                vt = T.spatial_axis(16, tx)
                T.reads(A[vt, 0:16])
                T.writes()
                T.evaluate(0)
        with T.block("fill"):
            T.reads()
            T.writes(F[0:16, 0:16])
            T.wmma_fill_fragment("handle", F[0, 0], T.float16(0))
"""
    )
    rules = [v.rule for v in verify(func, Target.parse("cuda -arch=sm_80"))]
    assert "intrinsic-scope" in rules


def test_fragment_loads_use_the_row_stride_of_the_compacted_shared_tile() -> None:
    """The leading dimension passed to load_matrix_sync is the stride of the shared tile as it
    is finally allocated (compaction shrinks B_shared to k_tile x block_tile = 32 x 64), not
    that of the full-size buffer cache_read created (128 wide)."""
    import re

    sch = schedule_tensor_core(make_matmul_f16(128), block_tile=64, k_tile=32)
    lowered = tir.transform.lower(sch.func, Target.parse("cuda -arch=sm_80"))
    from tir.codegen.cuda import codegen_cuda

    source = codegen_cuda(lowered, Target.parse("cuda -arch=sm_80"))
    loads = re.findall(r"load_matrix_sync\((\w+)\[.*?\], &(\w+)\[.*?\], (\w+)\)", source)
    strides = {src: ldm for _, src, ldm in loads}
    assert strides == {"A_shared": "32", "B_shared": "64"}
