"""What a compiled CUDA kernel costs, read offline from its cubin: no GPU needed.

    report = kernel_reports(module)          # a tir.runtime.cuda.CUDAModule
    report[0].registers, report[0].spill_bytes, report[0].sass["HMMA"], report[0].blocks_per_sm

Per kernel: the registers per thread, the local memory (``LOCAL``, where ptxas spills
registers) and stack bytes, from ``cuobjdump -res-usage``; the count of each instruction that
decides a Tensor Core kernel's speed in its SASS (``SASS_OPS``: HMMA/HGMMA for the matrix
units, LDSM for ``ldmatrix``, LDGSTS for ``cp.async``, the 128-bit shared and global moves,
barriers); and the occupancy its launch allows: thread blocks per multiprocessor as limited by
registers (allocated per warp in units of 256), shared memory (the launch's dynamic bytes,
the static ones and the 1 KB a block reserves on sm_80+) and threads, with the name of the
limit that binds. A candidate that spills, or that fits one block per multiprocessor only, is
visible before any GPU is used (``benchmarks/cuda_space_check.py`` reports these per sampled
candidate).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tir.codegen.cuda_compile import CudaCompileError, disassemble, run_cuobjdump

__all__ = ["SASS_OPS", "KernelReport", "kernel_reports", "occupancy", "resource_usage", "sass_counts"]

#: SASS opcodes (prefixes) counted per kernel.
SASS_OPS = ("HMMA", "HGMMA", "LDSM", "LDGSTS", "STS.128", "LDS.128", "LDG.E.128", "STG.E.128", "BAR.SYNC")


@dataclass(frozen=True)
class _SMLimits:
    threads: int
    blocks: int
    shared: int  # bytes per multiprocessor
    reserved: int  # shared bytes the system takes per block


#: Per compute capability (the first at or below the target's applies).
_SM_LIMITS = {
    70: _SMLimits(2048, 32, 96 * 1024, 0),
    75: _SMLimits(1024, 16, 64 * 1024, 0),
    80: _SMLimits(2048, 32, 164 * 1024, 1024),
    86: _SMLimits(1536, 16, 100 * 1024, 1024),
    89: _SMLimits(1536, 24, 100 * 1024, 1024),
    90: _SMLimits(2048, 32, 228 * 1024, 0),  # cuobjdump's SHARED already counts the 1 KB on sm_90
}
_REGISTERS_PER_SM = 65536


@dataclass(frozen=True)
class KernelReport:
    """One kernel's resources (``cuobjdump -res-usage``), SASS mix and occupancy."""

    name: str
    registers: int
    spill_bytes: int  # local memory per thread: ptxas spills there
    stack_bytes: int
    static_shared_bytes: int
    dynamic_shared_bytes: int
    threads: int
    sass: dict[str, int] = field(default_factory=dict)
    blocks_per_sm: int = 0
    occupancy_limit: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "kernel": self.name,
            "registers": self.registers,
            "spill_bytes": self.spill_bytes,
            "stack_bytes": self.stack_bytes,
            "shared_bytes": self.static_shared_bytes + self.dynamic_shared_bytes,
            "threads": self.threads,
            "blocks_per_sm": self.blocks_per_sm,
            "occupancy_limit": self.occupancy_limit,
            "sass": self.sass,
        }


def resource_usage(cubin: bytes) -> dict[str, dict[str, int]]:
    """Per function of ``cubin``: ``REG``, ``STACK``, ``SHARED``, ``LOCAL`` ... as cuobjdump prints them."""
    usage: dict[str, dict[str, int]] = {}
    current = None
    for line in run_cuobjdump(cubin, "-res-usage").splitlines():
        header = re.match(r"\s*Function (\S+?):?\s*$", line)
        if header:
            current = header.group(1)
            continue
        if current is not None and "REG:" in line:
            usage[current] = {key: int(value) for key, value in re.findall(r"(\w+(?:\[\d+\])?):(\d+)", line)}
            current = None
    return usage


def sass_counts(sass: str) -> dict[str, dict[str, int]]:
    """Per function in a ``cuobjdump -sass`` listing: how often each of ``SASS_OPS`` occurs."""
    counts: dict[str, dict[str, int]] = {}
    current: dict[str, int] | None = None
    for line in sass.splitlines():
        header = re.match(r"\s*Function : (\S+)", line)
        if header:
            current = counts.setdefault(header.group(1), dict.fromkeys(SASS_OPS, 0))
            continue
        instruction = re.match(r"\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)
        if current is None or instruction is None:
            continue
        opcode = instruction.group(1)
        for op in SASS_OPS:
            if opcode == op or opcode.startswith(op + "."):
                current[op] += 1
    return counts


def occupancy(capability: int, threads: int, registers: int, shared_bytes: int) -> tuple[int, str]:
    """Thread blocks per multiprocessor for a block of ``threads`` threads using ``registers``
    per thread and ``shared_bytes`` of shared memory, and the limit that binds."""
    limits = (
        next(v for k, v in sorted(_SM_LIMITS.items(), reverse=True) if capability >= k)
        if capability >= 70
        else _SM_LIMITS[70]
    )
    warps = -(-threads // 32)
    per_warp = -(-max(registers, 1) * 32 // 256) * 256
    by = {
        "threads": limits.threads // max(threads, 1),
        "blocks": limits.blocks,
        "registers": _REGISTERS_PER_SM // (per_warp * warps) if warps else limits.blocks,
        "shared memory": limits.shared // (shared_bytes + limits.reserved) if shared_bytes else limits.blocks,
    }
    binding = min(by, key=lambda k: by[k])
    return by[binding], binding


def kernel_reports(module: Any) -> list[KernelReport]:
    """One :class:`KernelReport` per kernel of a built ``CUDAModule`` (launch extents must be constants)."""
    from tir.ir import IntImm

    usage = resource_usage(module.cubin)
    try:
        mix = sass_counts(disassemble(module.cubin))
    except CudaCompileError:
        mix = {}
    capability = module.target.compute_capability
    reports = []
    for kernel in module.kernels:
        used = usage.get(kernel.name, {})
        threads = 1
        for extent in kernel.block:
            threads *= extent.value if isinstance(extent, IntImm) else 1
        dynamic = int(kernel.shared_bytes)
        static = used.get("SHARED", 0)
        blocks, limit = occupancy(capability, threads, used.get("REG", 0), static + dynamic)
        reports.append(
            KernelReport(
                kernel.name,
                used.get("REG", 0),
                used.get("LOCAL", 0),
                used.get("STACK", 0),
                static,
                dynamic,
                threads,
                mix.get(kernel.name, {}),
                blocks,
                limit,
            )
        )
    return reports
