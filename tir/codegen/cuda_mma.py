"""CUDA printing of the ``mma.sync`` m16n8k16 tile ops (inline PTX), for ``tir.codegen.cuda``.

Fragments are per-thread registers laid out as the PTX ISA's "Matrix Fragments for
mma.m16n8k16 with floating point type" prescribe; with ``g = lane / 4`` and ``t = lane % 4``:

- ``m16n8k16.matrixA`` (16 x 16 float16): four 32-bit registers per tile, each two halves:
  a0a1 = A[g][2t:2t+2], a2a3 = A[g+8][2t:2t+2], a4a5 = A[g][2t+8:2t+10], a6a7 = A[g+8][2t+8:2t+10];
- ``m16n8k16.matrixB`` (16 (k) x 8 (n) float16): two registers: b0b1 = B[2t:2t+2][g],
  b2b3 = B[2t+8:2t+10][g];
- ``m16n8k16.matrixC`` (16 x 8 float32): four floats: c0c1 = C[g][2t:2t+2], c2c3 = C[g+8][2t:2t+2].

``ldmatrix .x4`` with lane ``l`` giving the address of row ``l % 16``, column ``(l / 16) * 8``
of a row-major A tile fills exactly a0..a7 (its four 8 x 8 matrices are the tile's quadrants
in the order top-left, bottom-left, top-right, bottom-right). ``ldmatrix .x2.trans`` with lane
``l < 16`` giving row ``l`` (k) of a row-major ``[k, n]`` B tile fills b0..b3 (the transpose
hands each thread a column pair). Each tile op runs on the whole warp: every lane executes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tir.codegen.features import CodegenError
from tir.ir import Buffer, BufferLoad, Call, IntImm

if TYPE_CHECKING:
    from tir.codegen.cuda import CudaFunctionCodegen

__all__ = ["LANE_HELPER", "fragment_declaration", "ldmatrix_lane_offsets", "mma_store_lane_offsets", "print_call"]

#: Device helper the mma ops use (printed once in the source prelude).
LANE_HELPER = """\
__device__ __forceinline__ unsigned tir_lane_id() {
  unsigned lane;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(lane));
  return lane;
}
"""

_REGISTERS = {
    "m16n8k16.matrixA": ("unsigned", 4),
    "m16n8k16.matrixB": ("unsigned", 2),
    "m16n8k16.matrixC": ("float", 4),
}


def fragment_declaration(buffer: Buffer, name: str, tiles: int) -> str:
    """``unsigned A_frag[tiles][4];`` and the like: one register group per tile."""
    ctype, count = _REGISTERS[buffer.scope]
    if buffer.scope == "m16n8k16.matrixC" and str(buffer.dtype) != "float32":
        raise CodegenError(f"cuda: m16n8k16 accumulator {buffer.name} must be float32, got {buffer.dtype}")
    if buffer.scope != "m16n8k16.matrixC" and str(buffer.dtype) != "float16":
        raise CodegenError(f"cuda: m16n8k16 operand {buffer.name} must be float16, got {buffer.dtype}")
    return f"{ctype} {name}[{tiles}][{count}];"


def _regs(tile: str, count: int, constraint: str) -> list[str]:
    return [f'"{constraint}"({tile}[{i}])' for i in range(count)]


def ldmatrix_lane_offsets(trans: bool) -> list[tuple[int, int]]:
    """(row, column) of the tile element each lane's ``ldmatrix`` address points at, as
    ``print_call`` prints it: ``.x4`` lanes 0-31 row ``l % 16``, column ``(l / 16) * 8``;
    ``.x2.trans`` lanes 0-15 row ``l`` (the hardware reads no further addresses)."""
    if trans:
        return [(lane, 0) for lane in range(16)]
    return [(lane % 16, (lane // 16) * 8) for lane in range(32)]


def mma_store_lane_offsets() -> list[tuple[int, int]]:
    """(row, column) of each lane's first float in ``ptx_mma_store`` (``print_call``): row
    ``l / 4``, column ``2 * (l % 4)``; the lane's other three are at +1, +8 rows and both."""
    return [(lane // 4, 2 * (lane % 4)) for lane in range(32)]


def print_call(gen: CudaFunctionCodegen, call: Call) -> str:
    """The statement text of one ``ptx_*`` tile op."""
    op, args = call.op, call.args
    if op == "ptx_ldmatrix":
        frag = gen.tile(args[0])
        src = args[1]
        if not isinstance(src, BufferLoad) or src.buffer.scope not in ("shared", "shared.dyn"):
            raise CodegenError("cuda: ldmatrix reads shared memory; stage the operand with cache_read(..., 'shared')")
        stride = gen.expr(args[2])
        trans = isinstance(args[3], IntImm) and args[3].value != 0
        base = gen.pointer(src)
        if trans:  # lane addresses: ldmatrix_lane_offsets (keep the two in step)
            address = f"({base}) + (tir_lane_id() % 16) * ({stride})"
            asm = '"ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\\n"'
            outs = ", ".join(_regs(frag, 2, "=r"))
        else:
            address = f"({base}) + (tir_lane_id() % 16) * ({stride}) + (tir_lane_id() / 16) * 8"
            asm = '"ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\\n"'
            outs = ", ".join(_regs(frag, 4, "=r"))
        shared = f"(unsigned)__cvta_generic_to_shared({address})"
        return f'asm volatile({asm} : {outs} : "r"({shared}))'
    if op == "ptx_mma_sync":
        d, a, b, c = (gen.tile(x) for x in args)
        asm = (
            '"mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, '
            '{%8, %9}, {%10, %11, %12, %13};\\n"'
        )
        outs = ", ".join(_regs(d, 4, "=f"))
        ins = ", ".join(_regs(a, 4, "r") + _regs(b, 2, "r") + _regs(c, 4, "f"))
        return f"asm volatile({asm} : {outs} : {ins})"
    if op == "ptx_mma_fill":
        frag = gen.tile(args[0])
        value = gen.expr(args[1])
        return f"for (int tir_r = 0; tir_r < 4; ++tir_r) {frag}[tir_r] = {value}"
    if op == "ptx_mma_store":
        dst = args[0]
        if not isinstance(dst, BufferLoad):
            raise CodegenError("cuda: ptx_mma_store needs a buffer reference")
        frag = gen.tile(args[1])
        stride = gen.expr(args[2])
        base = gen.pointer(dst)
        return (  # lane addresses: mma_store_lane_offsets (keep the two in step)
            "{ "
            f"unsigned tir_g = tir_lane_id() / 4, tir_t = tir_lane_id() % 4; "
            f"float* tir_p = ({base}) + tir_g * ({stride}) + 2 * tir_t; "
            f"tir_p[0] = {frag}[0]; tir_p[1] = {frag}[1]; "
            f"tir_p[8 * ({stride})] = {frag}[2]; tir_p[8 * ({stride}) + 1] = {frag}[3]; "
            "}"
        )
    raise CodegenError(f"cuda: tile op {op} is not supported")
