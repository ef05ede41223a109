"""reindex_cache_read / reindex_cache_write: golden, numerics, replay, refusals (TVM's cases)."""

from __future__ import annotations

import pytest
from schedule_testing import check_schedule

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
    from schedule_testing import check_numerics, check_replay

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
