"""Sketch rules: each turns a schedule and one block into the schedules that follow from it.

A rule states which blocks it fits (from the block signature, never the name) and returns
``[sch]`` unchanged for the others. A rule that branches returns copies (``sch.copy()``), one
per choice; everything goes through ``Schedule`` methods, so each result's trace records it and
replays with new sampling decisions.

    rules = default_rules(Target.parse("llvm"))
    for rule in rules:
        schedules = rule.apply(sch, block)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tir.schedule import Schedule, ScheduleError
from tir.schedule.handles import BlockRV
from tir.target import Target

__all__ = ["SketchRule", "cuda_rules", "default_rules", "try_on_copy"]


class SketchRule:
    """Base class: ``apply`` returns the schedules that result from ``block`` in ``sch``."""

    name = "rule"

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def try_on_copy(sch: Schedule, step: Callable[[Schedule], Any]) -> Schedule | None:
    """``step`` applied to a copy of ``sch``; None when a primitive refuses (the rule then falls
    back to another choice instead of failing)."""
    other = sch.copy()
    try:
        step(other)
    except ScheduleError:
        return None
    return other


def default_rules(target: Target, intrinsics: Sequence[str] | None = None) -> list[SketchRule]:
    """The CPU rules, in the order they run on each block: auto-inline, add-rfactor,
    multi-level tiling with a tensor intrinsic (when the target has intrinsics it uses by
    default, or ``intrinsics`` names some), multi-level tiling, parallel-vectorize-unroll (root
    block), random compute location."""
    from metasched.space.rules.add_rfactor import AddRFactor
    from metasched.space.rules.auto_inline import AutoInline
    from metasched.space.rules.multi_level_tiling import MultiLevelTiling
    from metasched.space.rules.multi_level_tiling_intrin import MultiLevelTilingWithIntrin, default_intrinsics
    from metasched.space.rules.parallel_vectorize_unroll import ParallelVectorizeUnroll
    from metasched.space.rules.random_compute_location import RandomComputeLocation

    if target.is_cuda:
        return cuda_rules(target, intrinsics)
    if not target.is_cpu:
        raise ValueError(f"metasched has design-space rules for CPU (llvm) and CUDA targets only, got {target.text!r}")
    with_intrin: list[SketchRule] = []
    if intrinsics is not None or default_intrinsics(target):
        with_intrin.append(MultiLevelTilingWithIntrin(target, intrinsics))
    return [
        AutoInline(),
        AddRFactor(target),
        *with_intrin,
        MultiLevelTiling(target),
        ParallelVectorizeUnroll(target),
        RandomComputeLocation(),
    ]


def cuda_rules(target: Target, intrinsics: Sequence[str] | None = None) -> list[SketchRule]:
    """The CUDA rules: multi-level tiling with the Tensor Core intrinsics the target runs
    ("SSSRRSRS", WMMA and mma.sync; ``intrinsics``: only the groups using one of those names).
    A block no intrinsic fits is left as it is (the postprocessors give it a kernel of its
    own); a plain GPU tiling is not there yet."""
    from metasched.space.rules.multi_level_tiling_tensor_core import MultiLevelTilingTensorCore, default_groups

    groups = default_groups(target)
    if intrinsics is not None:
        wanted = set(intrinsics)
        groups = [g for g in groups if wanted & {g.load_a, g.load_b, g.sync, g.fill, g.store, g.store_shared}]
    return [MultiLevelTilingTensorCore(target, groups)]
