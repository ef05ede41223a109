"""tir.codegen.cuda_report: registers, spills, SASS mix and occupancy read offline from a cubin."""

from __future__ import annotations

from test_dynamic_shared_memory import _deep_matmul
from test_matmul_tensorcore_example import _example

import tir
from tir.codegen.cuda_report import kernel_reports, occupancy, sass_counts


def test_occupancy_names_the_binding_limit() -> None:
    # 168 registers: 5376 per warp, 4 warps -> 3 blocks of 65536 registers.
    assert occupancy(90, 128, 167, 57824) == (3, "registers")
    # 100 KB of shared memory per block (+1 KB reserved) on an A100's 164 KB: one block.
    assert occupancy(80, 256, 32, 100 * 1024) == (1, "shared memory")
    assert occupancy(80, 1024, 16, 0) == (2, "threads")
    assert occupancy(86, 32, 16, 0) == (16, "blocks")


def test_sass_counts_per_function() -> None:
    listing = """
        Function : k0
        /*0000*/                   LDSM.16.M88.4 R4, [R2] ;
        /*0010*/                   HMMA.16816.F32 R8, R4, R6, R8 ;
        /*0020*/              @!P0 LDGSTS.E.BYPASS.LTC128B.128 [R1], desc[UR4][R2.64] ;
        /*0030*/                   STS.128 [R3], R4 ;
        /*0040*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        Function : k1
        /*0000*/                   HMMA.16816.F32 R8, R4, R6, R8 ;
        /*0010*/                   HMMA.16816.F32 R8, R4, R6, R8 ;
    """
    counts = sass_counts(listing)
    assert counts["k0"]["LDSM"] == 1 and counts["k0"]["HMMA"] == 1 and counts["k0"]["LDGSTS"] == 1
    assert counts["k0"]["STS.128"] == 1 and counts["k0"]["BAR.SYNC"] == 1 and counts["k0"]["LDS.128"] == 0
    assert counts["k1"]["HMMA"] == 2


def test_report_of_a_deep_pipeline(nvcc: str, sass_tool: str) -> None:
    module = tir.build(_deep_matmul(4096, stages=3), "cuda -arch=sm_90")
    (report,) = kernel_reports(module)
    assert report.spill_bytes == 0 and 64 < report.registers <= 255
    assert report.dynamic_shared_bytes == 56800 and report.threads == 128
    # 2 warps x 2 warps, each 4 x 8 mma tiles per k16 step, 2 k16 steps per k tile: 64 HMMA per
    # pipeline step; the loop body and the two unrolled epilogue steps hold 3 steps.
    assert report.sass["HMMA"] == 192 and report.sass["LDSM"] > 0 and report.sass["LDGSTS"] > 0
    assert report.blocks_per_sm >= 1 and report.occupancy_limit in ("registers", "shared memory")


def test_report_of_the_example(nvcc: str, sass_tool: str) -> None:
    (report,) = kernel_reports(tir.build(_example().KERNEL, "cuda -arch=sm_80"))
    assert report.dynamic_shared_bytes == 0 and report.static_shared_bytes > 0
    assert report.sass["HMMA"] > 0 and report.spill_bytes == 0
    summary = report.as_dict()
    assert summary["shared_bytes"] == report.static_shared_bytes and summary["sass"]["HMMA"] == report.sass["HMMA"]
