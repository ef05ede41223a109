"""reindex_cache_read / reindex_cache_write: golden, numerics, replay, refusals (TVM's cases)."""

from __future__ import annotations

import pytest
from schedule_testing import check_numerics, check_replay, check_schedule

import tir.script as T
from tir.schedule import Schedule, ScheduleError


@T.script
def elementwise(A: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")):
    B = T.alloc_buffer((16, 16), "float32")
    for i, j in T.grid(16, 16):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] * 2.0
    for i, j in T.grid(16, 16):
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = B[vi, vj] + 1.0


@T.script
def matmul(A: T.Buffer((8, 12), "float32"), B: T.Buffer((12, 8), "float32"), C: T.Buffer((8, 8), "float32")):
    for i, j, k in T.grid(8, 8, 12):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


def test_reindex_cache_read(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(elementwise, debug=True)
    cached = sch.reindex_cache_read("C", 0, "shared", lambda i, j: (j, i // 2, i % 2))
    assert sch.get(cached).name == "B_shared"
    check_schedule(sch, elementwise, golden, "schedule/reindex_cache_read")


def test_reindex_cache_write(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(elementwise, debug=True)
    sch.reindex_cache_write("B", 0, "shared", lambda i, j: (j, i))
    check_schedule(sch, elementwise, golden, "schedule/reindex_cache_write")


def test_reindex_cache_of_a_matmul_operand_and_its_output() -> None:
    # The map takes every iterator of the block (vi, vj, vk), and uses those of the access.
    sch = Schedule(matmul, debug=True)
    sch.reindex_cache_read("C", 1, "shared", lambda i, j, k: (k // 4, i, k % 4))
    sch.reindex_cache_write("C", 0, "local", lambda i, j, k: (j, i))
    text = sch.func.script()
    assert 'A_shared = T.alloc_buffer((3, 8, 4), "float32", scope="shared")' in text
    assert 'C_local = T.alloc_buffer((8, 8), "float32", scope="local")' in text
    check_numerics(matmul, sch.func)
    check_replay(sch, matmul)


@pytest.mark.parametrize(
    ("step", "message"),
    [
        (lambda s: s.reindex_cache_read("C", 0, "shared", lambda i, j: j * 2), r"\(transform_layout\) the index map"),
        (lambda s: s.reindex_cache_write("B", 0, "shared", lambda i, j: i), r"not one-to-one"),
        (lambda s: s.reindex_cache_read("C", 0, "shared", lambda i: (i,)), "one index per iterator of the block, 2"),
        (lambda s: s.reindex_cache_read("C", 0, "texture", lambda i, j: (i, j)), "unknown storage scope 'texture'"),
    ],
)
def test_reindex_cache_refuses(step, message: str) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(elementwise)
    with pytest.raises(ScheduleError, match=message):
        step(sch)
    assert sch.func is elementwise


def test_reindex_cache_read_refuses_a_map_of_an_iterator_the_access_does_not_use() -> None:
    sch = Schedule(matmul)
    with pytest.raises(ScheduleError, match=r"uses \['j'\], iterators the access of A does not use"):
        sch.reindex_cache_read("C", 1, "shared", lambda i, j, k: (i, k, j))


# ---------------------------------------------------------------- next to the block, inside its statement


@T.script
def written_in_the_same_loop():
    A = T.alloc_buffer((128,), "float32")
    B = T.alloc_buffer((128,), "float32")
    C = T.alloc_buffer((128,), "float32")
    for i in range(8):
        for j in range(16):
            with T.block("A"):
                vi = T.spatial_axis(128, i * 16 + j)
                A[vi] = T.float32(vi) * 0.5
        for j in range(16):
            with T.block("B"):
                vi = T.spatial_axis(128, i * 16 + j)
                B[vi] = A[vi] + 1.0
    for i in range(128):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = A[vi] + B[vi]


@T.script
def read_in_the_same_loop(A: T.Buffer((4, 4, 4, 4), "float32"), C: T.Buffer((4, 4), "float32")):
    B = T.alloc_buffer((4, 4, 4), "float32")
    for i, j, k in T.grid(4, 4, 4):
        for r in range(4):
            with T.block("B"):
                vi, vj, vk, vl = T.remap("SSSR", i, j, k, r)
                with T.init():
                    B[vi, vj, vk] = 0.0
                B[vi, vj, vk] = B[vi, vj, vk] + A[vi, vj, vk, vl]
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] = C[vi, vj] + B[vi, vj, vk]


def test_reindex_cache_read_after_a_writer_in_the_same_loop(golden) -> None:  # type: ignore[no-untyped-def]
    # A is written under loop i before B reads it: a copy before the whole statement would be
    # stale, so the copy goes under i, right before B's loop, one iteration's 16 elements.
    sch = Schedule(written_in_the_same_loop, debug=True)
    sch.reindex_cache_read("B", 0, "shared", lambda i: (i // 32, i % 32))
    text = sch.func.script()
    assert text.index('T.block("A")') < text.index('T.block("A_shared")') < text.index('T.block("B")'), text
    assert "T.spatial_axis(128, i * 16 + ax0)" in text, text
    check_schedule(sch, written_in_the_same_loop, golden, "schedule/reindex_cache_read_after_a_writer")


def test_reindex_cache_write_before_a_reader_in_the_same_loop(golden) -> None:  # type: ignore[no-untyped-def]
    # C reads B under the loops that write it: the copy back goes right after B's loop r.
    sch = Schedule(read_in_the_same_loop, debug=True)
    sch.reindex_cache_write("B", 0, "shared", lambda i, j, k, r: (j, i, k))
    text = sch.func.script()
    assert text.index('T.block("B")') < text.index('T.block("B_shared")') < text.index('T.block("C")'), text
    check_schedule(sch, read_in_the_same_loop, golden, "schedule/reindex_cache_write_before_a_reader")


@T.script
def written_after_the_read(C: T.Buffer((8, 16), "float32")):
    A = T.alloc_buffer((8, 16), "float32")
    B = T.alloc_buffer((8, 16), "float32")
    for i in range(8):
        for j in range(16):
            with T.block("B"):
                vi, vj = T.remap("SS", i, j)
                B[vi, vj] = A[vi, vj] + 1.0
        for j in range(16):
            with T.block("A"):
                vi, vj = T.remap("SS", i, j)
                A[vi, vj] = T.float32(vi + vj)
    for i, j in T.grid(8, 16):
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = A[vi, vj] + B[vi, vj]


def test_reindex_cache_read_refuses_a_writer_after_the_reader_in_the_loop() -> None:
    sch = Schedule(written_after_the_read)
    with pytest.raises(ScheduleError, match="no point in between"):
        sch.reindex_cache_read("B", 0, "shared", lambda i, j: (j, i))
    assert sch.func is written_after_the_read
