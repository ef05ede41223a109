"""Verify-GPU: the validator for a CUDA candidate, with shared memory measured where it lives.

``tir.analysis.verify`` judges shared memory before lowering: a ``cache_read`` into shared
memory is allocated at the root, so it counts the hull one launch block touches over all its
loops -- for a tensor-core GEMM staged per k tile, the whole k extent of A and B (786 KB for a
4096^3 GEMM whose kernel really holds 20 KB). Allocation compaction later moves such a buffer
into the k loop and shrinks it to one tile, and software pipelining doubles it. So this
postprocessor runs the validator and keeps every violation but ``shared-memory``, which it
judges on the lowered program instead: per kernel, the bytes of its ``shared`` allocations
(after compaction, pipelining and storage_align padding) are at most the target's limit and at
most 48 KB, the most a kernel can declare statically (``__shared__`` arrays, which the CUDA code
generator emits; more needs dynamic shared memory).
"""

from __future__ import annotations

from metasched.space.postproc import Postproc, PostprocError
from tir.analysis import verify
from tir.ir import Allocate, post_order_visit
from tir.schedule import Schedule
from tir.target import Target

__all__ = ["STATIC_SHARED_LIMIT", "VerifyGPU", "kernel_shared_bytes"]

#: Bytes of statically declared ``__shared__`` memory one CUDA kernel may hold.
STATIC_SHARED_LIMIT = 48 * 1024


def kernel_shared_bytes(func: object, target: Target) -> dict[str, int]:
    """Per lowered function of ``func`` (the host and its kernels), its shared-memory bytes."""
    from tir.transform import lower

    mod = lower(func, target)  # type: ignore[arg-type]
    sizes: dict[str, int] = {}
    for name in mod:
        total = [0]

        def visit(node: object, total: list[int] = total) -> None:
            if isinstance(node, Allocate) and node.buffer.scope.startswith("shared"):
                shape = node.buffer.const_shape()
                if shape is not None:
                    count = 1
                    for extent in shape:
                        count *= extent
                    total[0] += count * node.buffer.dtype.bits // 8

        post_order_visit(mod[name].body, visit)
        sizes[name] = total[0]
    return sizes


class VerifyGPU(Postproc):
    name = "verify_gpu"
    checks_only = True

    def __init__(self, target: Target) -> None:
        self.target = target

    def apply(self, sch: Schedule) -> None:
        problems = [p for p in verify(sch.func, self.target) if p.rule != "shared-memory"]
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise PostprocError(self.name, f"{problems[0]}{more}")
        limit = min(self.target.max_shared_memory_per_block, STATIC_SHARED_LIMIT)
        try:
            sizes = kernel_shared_bytes(sch.func, self.target)
        except Exception as error:  # a lowering pass refused: the candidate cannot be built
            first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise PostprocError(self.name, f"lowering failed: {first}") from error
        for kernel, size in sizes.items():
            if size > limit:
                raise PostprocError(
                    self.name,
                    f"kernel {kernel} uses {size} bytes of shared memory once lowered, more than the {limit} "
                    f"a kernel may declare statically on {self.target.text}",
                )
