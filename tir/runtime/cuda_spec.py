"""``KernelSpec``: what the CUDA runtime needs to launch one device kernel of a built module.

The CUDA builder (``tir.codegen.cuda.build_cuda``) makes one spec per kernel that
``tir.transform.split_host_device`` outlined, in launch order; ``tir.runtime.cuda.CUDAModule``
launches them.

- ``name``: the ``extern "C" __global__`` function's name in the cubin.
- ``params``: kernel arguments in order: buffers (the host function's buffer objects, matched
  by identity or name) first, then scalar ``Var``s.
- ``grid`` / ``block``: launch dimensions (x, y, z) as expressions over the host's scalar
  parameters (usually constants).
- ``shared_bytes``: dynamic shared memory per block, in bytes (0: all shared memory static).
"""

from __future__ import annotations

from dataclasses import dataclass

from tir.ir.buffer import Buffer
from tir.ir.expr import PrimExpr, Var

__all__ = ["KernelSpec"]


@dataclass(frozen=True)
class KernelSpec:
    """One kernel launch: its name, argument list, launch dimensions and dynamic shared memory."""

    name: str
    params: list[Buffer | Var]
    grid: tuple[PrimExpr, PrimExpr, PrimExpr]
    block: tuple[PrimExpr, PrimExpr, PrimExpr]
    shared_bytes: int = 0
