"""Postprocessors: turn a sketch's "decide later" annotations into primitives and check the
result. Each raises ``ScheduleError`` or ``PostprocError`` with a reason when it cannot apply;
the search counts rejected candidates by that reason.

    for postproc in default_postprocs(Target.parse("llvm")):
        postproc.apply(sch)
"""

from __future__ import annotations

from tir.schedule import Schedule
from tir.target import Target

__all__ = ["Postproc", "PostprocError", "default_postprocs"]


class PostprocError(ValueError):
    """A postprocessor could not turn a candidate into a valid program; the message says why."""

    def __init__(self, postproc: str, reason: str) -> None:
        super().__init__(f"{postproc}: {reason}")
        self.postproc = postproc
        self.reason = reason


class Postproc:
    """Base class: ``apply`` changes ``sch`` in place, or raises with a reason."""

    name = "postproc"
    #: True for a postprocessor that only checks (changes nothing): a lazy make leaves it for
    #: ``finish_candidate`` (``metasched.search.candidate``).
    checks_only = False

    def apply(self, sch: Schedule) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def default_postprocs(target: Target) -> list[Postproc]:
    """The CPU postprocessors, in order: decompose reductions (so their init is a loop nest of
    its own, vectorized like any other), parallel / vectorize / unroll from the root
    annotations, then the validator. On CUDA: cooperative fetch, unbound blocks, the Tensor Core
    init and update, and the validator with shared memory judged as lowered."""
    from metasched.space.postproc.rewrite_parallel_vectorize_unroll import RewriteParallelVectorizeUnroll
    from metasched.space.postproc.rewrite_reduction_block import RewriteReductionBlock
    from metasched.space.postproc.verify import Verify

    if target.is_cuda:
        from metasched.space.postproc.rewrite_cooperative_fetch import RewriteCooperativeFetch
        from metasched.space.postproc.rewrite_tensor_core import RewriteTensorCore
        from metasched.space.postproc.rewrite_unbound_block import RewriteUnboundBlock
        from metasched.space.postproc.verify_gpu import VerifyGPU

        # The shared-memory copies spread over the thread block, every block left outside a
        # kernel given one, the Tensor Core init and update tensorized, then the validator
        # (thread extents, warp-level ops; shared memory measured on the lowered kernels,
        # where compaction and pipelining have sized it).
        return [RewriteCooperativeFetch(), RewriteUnboundBlock(), RewriteTensorCore(), VerifyGPU(target)]
    return [RewriteReductionBlock(), RewriteParallelVectorizeUnroll(), Verify(target)]
