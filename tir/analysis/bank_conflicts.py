"""Shared-memory bank conflicts of a lowered CUDA kernel, counted statically.

Shared memory has 32 banks of 4 bytes. A warp's access is served in *wavefronts*: the hardware
splits it into phases of 128 bytes' worth of lanes (32 lanes of 4-byte accesses, 16 of 8-byte,
8 of 16-byte; ``ldmatrix`` reads its 8-row matrices one phase each), and a phase takes as many
wavefronts as the most distinct 4-byte words any one bank holds among its addresses (the same
word read by several lanes is one broadcast). A conflict-free access takes one wavefront per
phase; every further one is a conflict.

``bank_conflicts(kernel)`` finds each shared-memory access of a kernel (a device function of
``tir.transform.lower``'s output: loads and stores of ``shared`` buffers, vectorized copies,
``cp.async`` destinations, the ``mma.sync`` tile ops' per-lane addresses), evaluates its byte
address for the 32 lanes of the first warp (the thread-index variables from the linear thread
id, every serial loop at its first iteration, block indices 0), and returns one
:class:`SharedAccess` per access with its phases and wavefronts for one execution, and
``executions``: how often one warp runs it (the constant trip counts of the serial loops around
it). They show *which* accesses conflict and how badly (a padded tile, ``storage_align``, should
show none for ``ldmatrix``); ``extra_wavefronts_per_block`` weighs them into one number per
thread block (every warp assumed to access like the first). Buffers are
assumed to start on a 128-byte boundary; a shift of a whole buffer moves every lane's bank
alike and changes no count. WMMA fragment loads are opaque (their lane addresses are the
library's) and are not counted.

    for access in bank_conflicts(kernel):
        print(access.buffer, access.kind, access.width, access.wavefronts, access.phases)
"""

from __future__ import annotations

from dataclasses import dataclass

from tir.arith import simplify
from tir.ir import (
    BufferLoad,
    BufferStore,
    Call,
    For,
    ForKind,
    IntImm,
    IRVisitor,
    LetStmt,
    PrimExpr,
    PrimFunc,
    Var,
)
from tir.ir.functor import substitute

__all__ = ["SharedAccess", "bank_conflicts", "extra_wavefronts_per_block", "wavefronts"]

_SHARED = ("shared", "shared.dyn")
_BANKS = 32
_WARP = 32


@dataclass(frozen=True)
class SharedAccess:
    """One shared-memory access of a warp: ``wavefronts`` against the ideal ``phases``."""

    buffer: str
    kind: str  # "load", "store", "vector load", "vector store", "cp.async", "ldmatrix", "mma store"
    width: int  # bytes per lane
    phases: int
    wavefronts: int
    executions: int = 1  # times one warp runs it: the trip counts of the serial loops around it

    @property
    def conflicts(self) -> int:
        return self.wavefronts - self.phases


def wavefronts(addresses: list[int], width: int, lanes_per_phase: int | None = None) -> tuple[int, int]:
    """``(phases, wavefronts)`` of one warp access: ``addresses[l]`` is lane ``l``'s first byte,
    each lane touching ``width`` bytes."""
    per_phase = lanes_per_phase or max(1, min(_WARP, 128 // max(width, 1)))
    phases = 0
    total = 0
    for start in range(0, len(addresses), per_phase):
        words_by_bank: dict[int, set[int]] = {}
        for address in addresses[start : start + per_phase]:
            for word in range(address // 4, (address + max(width, 4) - 1) // 4 + 1):
                words_by_bank.setdefault(word % _BANKS, set()).add(word)
        phases += 1
        total += max(len(words) for words in words_by_bank.values())
    return phases, total


def _lane_env(kernel: PrimFunc, lane: int) -> dict[str, int]:
    """threadIdx.x/y/z of linear thread ``lane`` (the first warp's lanes) for the kernel's launch."""
    extents = {
        tag: (e.value if isinstance(e, IntImm) else 1) for tag, e in kernel.attrs.get("thread_extents", {}).items()
    }
    x, y = extents.get("threadIdx.x", 1), extents.get("threadIdx.y", 1)
    return {"threadIdx.x": lane % x, "threadIdx.y": (lane // x) % y, "threadIdx.z": lane // (x * y)}


class _Collect(IRVisitor):
    def __init__(self, kernel: PrimFunc) -> None:
        self.kernel = kernel
        self.lanes = [_lane_env(kernel, lane) for lane in range(_WARP)]
        # Per lane: variable -> value (loops at their first iteration, threads from the lane).
        self.envs: list[dict[Var, PrimExpr]] = [{} for _ in range(_WARP)]
        self.found: list[SharedAccess] = []
        self.vector: tuple[Var, int] | None = None  # the vectorized loop around the access
        self.trips = 1  # product of the constant trip counts of the serial loops around

    # ---------------------------------------------------------------- scopes

    def visit_For(self, node: For) -> None:
        saved = [dict(env) for env in self.envs]
        if node.kind is ForKind.THREAD_BINDING and (node.thread_tag or "").startswith("threadIdx"):
            for env, lane in zip(self.envs, self.lanes):
                env[node.loop_var] = IntImm(lane.get(node.thread_tag or "", 0), node.loop_var.dtype)
        else:
            for env in self.envs:
                env[node.loop_var] = self._value(node.min, env)
        outer, trips = self.vector, self.trips
        if node.kind is ForKind.VECTORIZED and isinstance(node.extent, IntImm) and isinstance(node.body, BufferStore):
            self.vector = (node.loop_var, node.extent.value)
        elif node.kind is not ForKind.THREAD_BINDING and isinstance(node.extent, IntImm):
            self.trips *= node.extent.value
        self.visit(node.body)
        self.vector, self.trips = outer, trips
        self.envs = saved

    def visit_LetStmt(self, node: LetStmt) -> None:
        saved = [dict(env) for env in self.envs]
        for env in self.envs:
            env[node.var] = self._value(node.value, env)
        self.visit(node.body)
        self.envs = saved

    # ---------------------------------------------------------------- accesses

    def visit_BufferStore(self, node: BufferStore) -> None:
        if node.buffer.scope in _SHARED:
            self._record(node.buffer, node.indices, "store")
        self.visit(node.value)
        for index in node.indices:
            self.visit(index)

    def visit_BufferLoad(self, node: BufferLoad) -> None:
        if node.buffer.scope in _SHARED:
            self._record(node.buffer, node.indices, "load")
        for index in node.indices:
            self.visit(index)

    def visit_Call(self, node: Call) -> None:
        op, args = node.op, node.args
        if op == "ptx_cp_async" and isinstance(args[0], BufferLoad) and args[0].buffer.scope in _SHARED:
            self._record(args[0].buffer, args[0].indices, "cp.async", width=int(args[2].value))  # type: ignore[attr-defined]
            self.visit(args[1])
            return
        if op == "ptx_ldmatrix" and isinstance(args[1], BufferLoad) and args[1].buffer.scope in _SHARED:
            from tir.codegen.cuda_mma import ldmatrix_lane_offsets

            trans = isinstance(args[3], IntImm) and args[3].value != 0
            offsets = [self._int(args[2], env) for env in self.envs]
            lanes = ldmatrix_lane_offsets(trans)
            self._record(
                args[1].buffer,
                args[1].indices,
                "ldmatrix",
                width=16,
                lane_offsets=[lanes[lane][0] * offsets[lane] + lanes[lane][1] for lane in range(len(lanes))],
                lanes_per_phase=8,
            )
            return
        if op == "ptx_mma_store" and isinstance(args[0], BufferLoad) and args[0].buffer.scope in _SHARED:
            from tir.codegen.cuda_mma import mma_store_lane_offsets

            strides = [self._int(args[2], env) for env in self.envs]
            rows = mma_store_lane_offsets()
            self._record(
                args[0].buffer,
                args[0].indices,
                "mma store",
                width=4,
                lane_offsets=[rows[lane][0] * strides[lane] + rows[lane][1] for lane in range(_WARP)],
            )
            return
        if op.startswith("wmma_"):
            return  # the library's lane addresses: not counted
        self.generic_visit(node)

    def _record(
        self,
        buffer: object,
        indices: tuple[PrimExpr, ...],
        kind: str,
        width: int | None = None,
        lane_offsets: list[int] | None = None,
        lanes_per_phase: int | None = None,
    ) -> None:
        if len(indices) != 1:
            return  # not flattened: not a lowered kernel's access
        element = max(1, buffer.dtype.bits * buffer.dtype.lanes // 8)  # type: ignore[attr-defined]
        index = indices[0]
        size = width or element
        if self.vector is not None and kind in ("load", "store"):
            var, extent = self.vector
            kind = "vector " + kind
            size = element * extent
            index = substitute(index, {var: IntImm(0, var.dtype)})
        try:
            starts = [self._int(index, env) * element for env in self.envs]
        except ValueError:
            return  # an index this analysis cannot evaluate (data-dependent): not counted
        if lane_offsets is not None:
            lanes = len(lane_offsets)
            starts = [starts[lane] + lane_offsets[lane] * element for lane in range(lanes)]
        phases, waves = wavefronts(starts, size, lanes_per_phase)
        self.found.append(SharedAccess(buffer.name, kind, size, phases, waves, self.trips))  # type: ignore[attr-defined]

    def _value(self, expr: PrimExpr, env: dict[Var, PrimExpr]) -> PrimExpr:
        return simplify(substitute(expr, env)) if env else simplify(expr)

    def _int(self, expr: PrimExpr, env: dict[Var, PrimExpr]) -> int:
        value = self._value(expr, env)
        if not isinstance(value, IntImm):
            raise ValueError(f"not a constant: {value}")
        return value.value


def bank_conflicts(kernel: PrimFunc) -> list[SharedAccess]:
    """Every counted shared-memory access of ``kernel`` (module docstring), in program order."""
    collect = _Collect(kernel)
    # blockIdx loops and anything bound outside the threads: their first value (0).
    collect.visit(kernel.body)
    return collect.found


def extra_wavefronts_per_block(kernel: PrimFunc) -> int:
    """The wavefronts a thread block spends on bank conflicts: every access's conflicts times the
    times each warp runs it, times the block's warps (assuming every warp's pattern is the
    first warp's)."""
    extents = kernel.attrs.get("thread_extents", {})
    threads = 1
    for tag in ("threadIdx.x", "threadIdx.y", "threadIdx.z"):
        extent = extents.get(tag)
        threads *= extent.value if isinstance(extent, IntImm) else 1
    warps = -(-threads // _WARP)
    return warps * sum(a.conflicts * a.executions for a in bank_conflicts(kernel))
