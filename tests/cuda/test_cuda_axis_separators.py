"""Axis separators are a layout request the CUDA backend flattens across: the same kernels with
and without them (shared-memory tiles, tensor-core fragments and their views)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from cuda_kernels import make_matmul_f16, make_matmul_f32, schedule_shared_tiled, schedule_tensor_core

import tir
from tir.analysis.tree import TreeIndex
from tir.codegen.cuda import codegen_cuda
from tir.schedule import Schedule
from tir.transform import lower


def _source(func: tir.PrimFunc) -> str:
    return codegen_cuda(lower(func, "cuda -arch=sm_80"), "cuda -arch=sm_80")


def _separate_every_allocation(sch: Schedule) -> int:
    """Separator [1] on every allocated buffer of two or more dimensions; how many."""
    params = {id(p) for p in sch.func.params}
    count = 0
    for name, realize in TreeIndex(sch.func).blocks.items():
        for position, region in enumerate(realize.block.writes):
            buffer = region.buffer
            if id(buffer) not in params and buffer.ndim >= 2 and not buffer.axis_separators:
                sch.set_axis_separator(sch.get_block(name), ("write", position), [1])
                count += 1
    return count


@pytest.mark.parametrize(
    "make",
    [
        lambda: schedule_shared_tiled(make_matmul_f32()),
        lambda: schedule_tensor_core(make_matmul_f16(128)),
        lambda: schedule_tensor_core(make_matmul_f16(128), mma=True),
    ],
    ids=["shared_tiled", "wmma", "mma"],
)
def test_cuda_source_is_unchanged_by_axis_separators(make: Callable[[], Schedule]) -> None:
    sch = make()
    before = _source(sch.func)
    assert _separate_every_allocation(sch) >= 2
    assert "axis_separators=[1]" in sch.func.script()
    assert _source(sch.func) == before
