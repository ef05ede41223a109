"""annotate_buffer_access: TVM's cases (golden, numerics, replay), and the refusal of a region
that does not contain the block's accesses."""

from __future__ import annotations

import pytest
from schedule_testing import check_numerics, check_replay, check_schedule

import tir.script as T
from tir.schedule import Schedule, ScheduleError


@T.script
def elementwise(A: T.Buffer((32, 32), "float32"), C: T.Buffer((32, 32), "float32")):
    B = T.alloc_buffer((32, 32), "float32")
    for i, j in T.grid(32, 32):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(32, 32):
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = B[vi, vj] + 1.0


@T.script
def resize(x: T.Buffer((1, 3, 40, 40), "float32"), y: T.Buffer((1, 3, 20, 20), "float32")):
    x_global = T.alloc_buffer((1, 3, 40, 40), "float32")
    for ax0, ax1, ax2, ax3 in T.grid(1, 3, 40, 40):
        with T.block("cache"):
            v0, v1, v2, v3 = T.remap("SSSS", ax0, ax1, ax2, ax3)
            x_global[v0, v1, v2, v3] = x[v0, v1, v2, v3]
    for i0, i1, i2, i3 in T.grid(1, 3, 20, 20):
        with T.block("resize"):
            v0, v1, v2, v3 = T.remap("SSSS", i0, i1, i2, i3)
            y[v0, v1, v2, v3] = x_global[
                v0,
                v1,
                T.cast(T.floor(T.cast(v2 * 2, "float32") + 0.5), "int32"),
                T.cast(T.floor(T.cast(v3 * 2, "float32") + 0.5), "int32"),
            ]


def test_annotate_read_and_write_regions(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(elementwise, debug=True)
    block = sch.get_block("B")
    sch.annotate_buffer_access(block, 0, "read", lambda vi, vj: ((vi - 1, vi + 2), (vj - 1, vj + 2)))
    sch.annotate_buffer_access(block, 0, "write", lambda vi, vj: ((vi, vi + 2), (vj, vj + 2)))
    assert sch.get(block).annotations == {"explicit_read_region": [0], "explicit_write_region": [0]}
    check_schedule(sch, elementwise, golden, "schedule/annotate_buffer_access")


def test_annotated_region_lets_compute_at_copy_only_what_a_resize_reads() -> None:
    # TVM's case: the reads of x_global cannot be bounded by analysis (a float floor), so
    # compute_at would copy whole rows; checked at every iterator value, the annotated
    # window holds, and the copy shrinks to 24 x 24 per 10 x 10 tile.
    sch = Schedule(resize, debug=True)
    block = sch.get_block("resize")
    sch.annotate_buffer_access(
        block, 0, "read", lambda n, c, h, w: (n, c, (h * 2 - 3, h * 2 + 3), (w * 2 - 3, w * 2 + 3))
    )
    h, w = sch.get_loops(block)[-2:]
    ho, hi = sch.split(h, factors=[2, 10])
    wo, wi = sch.split(w, factors=[2, 10])
    sch.reorder(ho, wo, hi, wi)
    sch.compute_at(sch.get_block("cache"), wo)
    assert "for ax0, ax1 in T.grid(24, 24):" in sch.func.script()
    check_numerics(resize, sch.func)
    check_replay(sch, resize)


@pytest.mark.parametrize(
    ("ranges", "message"),
    [
        (lambda n, c, h, w: (n, c, (h * 2 + 1, h * 2 + 2), (w * 2 - 3, w * 2 + 3)), "does not contain every read"),
        (lambda n, c, h, w: (n, c, (h, h + 1)), "gave 3 entries for a 4-d buffer"),
        (lambda n, c, h, w: (n, c, (h, h + 1, 2), w), r"a range is a \(start, end\) pair"),
    ],
)
def test_annotate_buffer_access_refuses(ranges, message: str) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(resize)
    with pytest.raises(ScheduleError, match=message):
        sch.annotate_buffer_access(sch.get_block("resize"), 0, "read", ranges)
    assert sch.func is resize
