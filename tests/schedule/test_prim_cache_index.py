"""cache_index (TVM's): index arithmetic of a block's iterators precomputed into buffers filled
before it. TVM's basic and bilinear-resize cases (golden, numerics, replay), the threshold,
what is never cached (inner loop variables, divisions by an iterator), refusals."""

from __future__ import annotations

import pytest
from schedule_testing import check_numerics, check_replay, check_schedule

import tir
import tir.script as T
from tir.analysis.tree import TreeIndex
from tir.schedule import Schedule, ScheduleError


@T.script
def resize(A: T.Buffer((1, 3, 40, 40), "float32"), B: T.Buffer((1, 3, 80, 80), "float32")):
    for i0, i1, i2, i3 in T.grid(1, 3, 80, 80):
        with T.block("A"):
            n, c, vi, vj = T.remap("SSSS", i0, i1, i2, i3)
            B[n, c, vi, vj] = A[n, c, vi // 4 + vj // 4, vj // 2]


@T.script
def resize_cache_index(A: T.Buffer((1, 3, 40, 40), "float32"), B: T.Buffer((1, 3, 80, 80), "float32")):
    index_var_0 = T.alloc_buffer((80, 80), "int32")
    index_var_1 = T.alloc_buffer((80,), "int32")
    for ax0, ax1 in T.grid(80, 80):
        with T.block("index_0"):
            v0, v1 = T.remap("SS", ax0, ax1)
            T.reads()
            T.writes(index_var_0[v0, v1])
            index_var_0[v0, v1] = v0 // 4 + v1 // 4
    for ax0 in range(80):
        with T.block("index_1"):
            v0 = T.remap("S", ax0)
            T.reads()
            T.writes(index_var_1[v0])
            index_var_1[v0] = v0 // 2
    for i0, i1, i2, i3 in T.grid(1, 3, 80, 80):
        with T.block("A"):
            n, c, vi, vj = T.remap("SSSS", i0, i1, i2, i3)
            # TVM keeps the read region of A as it was and declares no read of the index
            # buffers; here the block declares them too.
            T.reads(A[n, c, vi // 4 + vj // 4, vj // 2], index_var_0[vi, vj], index_var_1[vj])
            T.writes(B[n, c, vi, vj])
            B[n, c, vi, vj] = A[n, c, index_var_0[vi, vj], index_var_1[vj]]


def test_basic_cache_index(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(resize, debug=True)
    blocks = sch.cache_index(sch.get_block("A"), "global")
    assert [sch.get(b).name for b in blocks] == ["index_0", "index_1"]  # type: ignore[union-attr]
    tir.assert_structural_equal(sch.func, resize_cache_index)
    check_schedule(sch, resize, golden, "schedule/cache_index_basic")


@T.script
def bilinear_resize(x: T.Buffer((1, 3, 40, 40), "float16"), resize: T.Buffer((1, 3, 80, 80), "float16")):
    for i0, i1, i2, i3 in T.grid(1, 3, 80, 80):
        with T.block("resize"):
            n, c, vi, vj = T.remap("SSSS", i0, i1, i2, i3)
            T.reads(x[n, c, 0:40, 0:40])
            T.writes(resize[n, c, vi, vj])
            resize[n, c, vi, vj] = T.cast(
                (
                    T.cast(
                        x[
                            n,
                            c,
                            T.max(
                                T.min(
                                    T.cast(
                                        T.floor(
                                            (T.cast(vi, "float32") + T.float32(0.5)) * T.float32(0.5) - T.float32(0.5)
                                        ),
                                        "int32",
                                    ),
                                    39,
                                ),
                                0,
                            ),
                            T.max(
                                T.min(
                                    T.cast(
                                        T.floor(
                                            (T.cast(vj, "float32") + T.float32(0.5)) * T.float32(0.5) - T.float32(0.5)
                                        ),
                                        "int32",
                                    ),
                                    39,
                                ),
                                0,
                            ),
                        ],
                        "float32",
                    )
                    * (
                        T.float32(1)
                        - (
                            (T.cast(vj, "float32") + T.float32(0.5)) * T.float32(0.5)
                            - T.float32(0.5)
                            - T.cast(
                                T.cast(
                                    T.floor((T.cast(vj, "float32") + T.float32(0.5)) * T.float32(0.5) - T.float32(0.5)),
                                    "int32",
                                ),
                                "float32",
                            )
                        )
                    )
                    + T.cast(
                        x[
                            n,
                            c,
                            T.max(
                                T.min(
                                    T.cast(
                                        T.floor(
                                            (T.cast(vi, "float32") + T.float32(0.5)) * T.float32(0.5) - T.float32(0.5)
                                        ),
                                        "int32",
                                    ),
                                    39,
                                ),
                                0,
                            ),
                            T.max(
                                T.min(
                                    T.cast(
                                        T.floor(
                                            (T.cast(vj, "float32") + T.float32(0.5)) * T.float32(0.5) - T.float32(0.5)
                                        ),
                                        "int32",
                                    )
                                    + 1,
                                    39,
                                ),
                                0,
                            ),
                        ],
                        "float32",
                    )
                    * (
                        (T.cast(vj, "float32") + T.float32(0.5)) * T.float32(0.5)
                        - T.float32(0.5)
                        - T.cast(
                            T.cast(
                                T.floor((T.cast(vj, "float32") + T.float32(0.5)) * T.float32(0.5) - T.float32(0.5)),
                                "int32",
                            ),
                            "float32",
                        )
                    )
                )
                * (
                    T.float32(1)
                    - (
                        (T.cast(vi, "float32") + T.float32(0.5)) * T.float32(0.5)
                        - T.float32(0.5)
                        - T.cast(
                            T.cast(
                                T.floor((T.cast(vi, "float32") + T.float32(0.5)) * T.float32(0.5) - T.float32(0.5)),
                                "int32",
                            ),
                            "float32",
                        )
                    )
                )
                + (
                    T.cast(
                        x[
                            n,
                            c,
                            T.max(
                                T.min(
                                    T.cast(
                                        T.floor(
                                            (T.cast(vi, "float32") + T.float32(0.5)) * T.float32(0.5) - T.float32(0.5)
                                        ),
                                        "int32",
                                    )
                                    + 1,
                                    39,
                                ),
                                0,
                            ),
                            T.max(
                                T.min(
                                    T.cast(
                                        T.floor(
                                            (T.cast(vj, "float32") + T.float32(0.5)) * T.float32(0.5) - T.float32(0.5)
                                        ),
                                        "int32",
                                    ),
                                    39,
                                ),
                                0,
                            ),
                        ],
                        "float32",
                    )
                    * (
                        T.float32(1)
                        - (
                            (T.cast(vj, "float32") + T.float32(0.5)) * T.float32(0.5)
                            - T.float32(0.5)
                            - T.cast(
                                T.cast(
                                    T.floor((T.cast(vj, "float32") + T.float32(0.5)) * T.float32(0.5) - T.float32(0.5)),
                                    "int32",
                                ),
                                "float32",
                            )
                        )
                    )
                    + T.cast(
                        x[
                            n,
                            c,
                            T.max(
                                T.min(
                                    T.cast(
                                        T.floor(
                                            (T.cast(vi, "float32") + T.float32(0.5)) * T.float32(0.5) - T.float32(0.5)
                                        ),
                                        "int32",
                                    )
                                    + 1,
                                    39,
                                ),
                                0,
                            ),
                            T.max(
                                T.min(
                                    T.cast(
                                        T.floor(
                                            (T.cast(vj, "float32") + T.float32(0.5)) * T.float32(0.5) - T.float32(0.5)
                                        ),
                                        "int32",
                                    )
                                    + 1,
                                    39,
                                ),
                                0,
                            ),
                        ],
                        "float32",
                    )
                    * (
                        (T.cast(vj, "float32") + T.float32(0.5)) * T.float32(0.5)
                        - T.float32(0.5)
                        - T.cast(
                            T.cast(
                                T.floor((T.cast(vj, "float32") + T.float32(0.5)) * T.float32(0.5) - T.float32(0.5)),
                                "int32",
                            ),
                            "float32",
                        )
                    )
                )
                * (
                    (T.cast(vi, "float32") + T.float32(0.5)) * T.float32(0.5)
                    - T.float32(0.5)
                    - T.cast(
                        T.cast(
                            T.floor((T.cast(vi, "float32") + T.float32(0.5)) * T.float32(0.5) - T.float32(0.5)), "int32"
                        ),
                        "float32",
                    )
                ),
                "float16",
            )


def test_resize_bilinear_cache_index(golden) -> None:  # type: ignore[no-untyped-def]
    # With cse_thresh=4: the float fraction of the column coordinate (4 uses), the integer
    # row and column coordinates (6 and 4 uses, counting those inside rarer expressions); the
    # row fraction (2 uses) stays. TVM's result, buffer for buffer.
    sch = Schedule(bilinear_resize, debug=True)
    sch.cache_index(sch.get_block("resize"), "global", 4)
    buffers = [buffer for buffer in sch.func.root_block.alloc_buffers]  # type: ignore[union-attr]
    assert [(b.name, str(b.dtype), b.const_shape()) for b in buffers] == [
        ("index_var_0", "float32", (80,)),
        ("index_var_1", "int32", (80,)),
        ("index_var_2", "int32", (80,)),
    ]
    check_schedule(sch, bilinear_resize, golden, "schedule/cache_index_bilinear_resize")


@T.script
def repeated(A: T.Buffer((16, 8), "float32"), B: T.Buffer((8,), "float32"), C: T.Buffer((16, 8), "float32")):
    for i, j in T.grid(16, 8):
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = A[(vi * 3 + 1) % 16, vj] + A[(vi * 3 + 1) % 16, (vj + 1) % 8] * B[vj * 2 % 8]


def cached_exprs(sch: Schedule) -> list[str]:
    """What each index block stores, in buffer order."""
    found = []
    for name in sorted(b.name for b in sch.func.root_block.alloc_buffers):  # type: ignore[union-attr]
        block = TreeIndex(sch.func).blocks[name.replace("index_var_", "index_")].block
        found.append(tir.script.printer.expr_to_str(block.body.value))  # type: ignore[union-attr]
    return found


def test_threshold_caches_what_repeats() -> None:
    sch = Schedule(repeated, debug=True)
    sch.cache_index(sch.get_block("C"), "global", 2)
    assert cached_exprs(sch) == ["(v0 * 3 + 1) % 16"]
    check_numerics(repeated, sch.func)
    check_replay(sch, repeated)
    sch = Schedule(repeated, debug=True)
    sch.cache_index(sch.get_block("C"), "global")
    assert cached_exprs(sch) == ["(v0 * 3 + 1) % 16", "(v0 + 1) % 8", "v0 * 2 % 8"]
    check_numerics(repeated, sch.func)
    check_replay(sch, repeated)


@T.script
def guarded(A: T.Buffer((64,), "float32"), C: T.Buffer((16, 4), "float32")):
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            for k in range(4):
                C[vi, k] = T.if_then_else(vi > 0, A[64 // vi - 1], A[vi * 3 + k]) + T.cast(vi * 5 % 7, "float32")


def test_never_caches_inner_loop_variables_or_divisions_by_an_iterator(golden) -> None:  # type: ignore[no-untyped-def]
    # ``vi * 3 + k`` uses the block's own loop ``k``: only ``vi * 3`` is cached. ``64 // vi``
    # would divide by zero at vi = 0, which the block never evaluates but an index block would.
    sch = Schedule(guarded, debug=True)
    sch.cache_index(sch.get_block("C"), "global")
    assert cached_exprs(sch) == ['T.cast(v0 * 5 % 7, "float32")', "v0 * 3"]
    check_schedule(sch, guarded, golden, "schedule/cache_index_guarded")


@T.script
def shifted(A: T.Buffer((64,), "float32"), C: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("C"):
            vi = T.spatial_axis((2, 18), i + 2)
            C[vi - 2] = A[vi * 3 - 6] * T.cast(vi - 2, "float32")


def test_domain_not_from_zero_and_store_indices_kept(golden) -> None:  # type: ignore[no-untyped-def]
    # The iterator runs over [2, 18): the buffers are indexed by ``vi - 2``, the index blocks
    # compute at ``v0 + 2``. ``T.cast(vi - 2)`` is cached, ``C[vi - 2]`` stays as it is.
    sch = Schedule(shifted, debug=True)
    sch.cache_index(sch.get_block("C"), "global")
    assert cached_exprs(sch) == ["v0 * 3", 'T.cast(v0, "float32")']
    check_schedule(sch, shifted, golden, "schedule/cache_index_shifted")


@T.script
def plain(A: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = A[vi] + 1.0


def test_refusals() -> None:
    sch = Schedule(plain)
    with pytest.raises(ScheduleError, match="stores no pure arithmetic of its iterators"):
        sch.cache_index(sch.get_block("C"), "global")
    sch = Schedule(resize)
    with pytest.raises(ScheduleError, match="cse_thresh must be an integer >= 0, got -1"):
        sch.cache_index(sch.get_block("A"), "global", -1)
    with pytest.raises(ScheduleError, match="unknown storage scope 'texture'"):
        sch.cache_index(sch.get_block("A"), "texture")
    assert sch.func is resize
