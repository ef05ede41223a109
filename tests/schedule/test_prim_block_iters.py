"""reorder_block_iter_var and unsafe_set_dtype: golden, numerics, replay, refusals (TVM's cases)."""

from __future__ import annotations

import numpy as np
import pytest
from schedule_testing import check_numerics, check_replay, check_schedule

import tir
import tir.script as T
from tir.schedule import Schedule, ScheduleError


@T.script
def matmul(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")):
    for i, j, k in T.grid(16, 16, 16):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vj, vk]


@T.script
def add_relu(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32"), D: T.Buffer((16,), "float32")):
    C = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = A[vi] + B[vi]
    for i in range(16):
        with T.block("D"):
            vi = T.remap("S", i)
            D[vi] = T.max(C[vi], 0.0)


def test_reorder_block_iter_var(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(matmul, debug=True)
    sch.reorder_block_iter_var(sch.get_block("C"), [2, 1, 0])
    assert 'vk, vj, vi = T.remap("RSR"' not in sch.func.script()
    assert 'vk, vj, vi = T.remap("RSS", k, j, i)' in sch.func.script()
    check_schedule(sch, matmul, golden, "schedule/reorder_block_iter_var")


@pytest.mark.parametrize("order", [[2, 1], [-1, 3, 2], [0, 0, 1], [0, 1, 2.0]])
def test_reorder_block_iter_var_refuses_a_non_permutation(order: list[object]) -> None:
    sch = Schedule(matmul)
    with pytest.raises(ScheduleError, match=r"new_order must be a permutation of 0\.\.2"):
        sch.reorder_block_iter_var(sch.get_block("C"), order)  # type: ignore[arg-type]
    assert sch.func is matmul


def test_unsafe_set_dtype_casts_stores_and_loads(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(add_relu, debug=True)
    sch.unsafe_set_dtype(sch.get_block("C"), 0, "float16")
    text = sch.func.script()
    assert 'C = T.alloc_buffer((16,), "float16")' in text
    assert 'C[vi] = T.cast(A[vi] + B[vi], "float16")' in text
    check_schedule(sch, add_relu, golden, "schedule/unsafe_set_dtype", rtol=1e-2)
    # The values went through float16: exactly numpy's rounding.
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(16).astype("float32"), rng.standard_normal(16).astype("float32")
    d = np.zeros(16, "float32")
    tir.build(sch.func)(a, b, d)
    np.testing.assert_array_equal(d, np.maximum((a + b).astype("float16").astype("float32"), 0))


def test_unsafe_set_dtype_refuses_a_parameter_and_a_bad_dtype() -> None:
    sch = Schedule(add_relu)
    with pytest.raises(ScheduleError, match="D is a parameter; its type is the caller's"):
        sch.unsafe_set_dtype(sch.get_block("D"), 0, "float16")
    with pytest.raises(ScheduleError, match="the new dtype must be a scalar number type"):
        sch.unsafe_set_dtype(sch.get_block("C"), 0, "float32x4")
    with pytest.raises(ScheduleError, match="bad dtype 'float17'"):
        sch.unsafe_set_dtype(sch.get_block("C"), 0, "float17")
    assert sch.func is add_relu


def test_unsafe_set_dtype_to_an_integer_truncates() -> None:
    sch = Schedule(add_relu, debug=True)
    sch.unsafe_set_dtype(sch.get_block("C"), 0, "int32")
    check_replay(sch, add_relu)
    a = np.array([1.7, -2.5] * 8, "float32")
    b = np.zeros(16, "float32")
    for run in (lambda f, *x: tir.interpret(f, *x), lambda f, *x: tir.build(f)(*x)):
        d = np.zeros(16, "float32")
        run(sch.func, a, b, d)
        np.testing.assert_array_equal(d, np.maximum(np.trunc(a), 0))
    check_numerics(add_relu, Schedule(add_relu).func)


@T.script
def add_relu_viewed(A: T.Buffer((16, 4), "float32"), B: T.Buffer((16, 4), "float32"), D: T.Buffer((16, 4), "float32")):
    C = T.alloc_buffer((16, 4), "float32")
    for i in range(16):
        with T.block("C"):
            vi = T.remap("S", i)
            C_row = T.match_buffer(C[vi, 0:4], (4,), "float32")
            for j in range(4):
                C_row[j] = A[vi, j] + B[vi, j]
    for i in range(16):
        with T.block("D"):
            vi = T.remap("S", i)
            C_row = T.match_buffer(C[vi, 0:4], (4,), "float32")
            for j in range(4):
                D[vi, j] = T.max(C_row[j], 0.0)


def test_unsafe_set_dtype_retypes_a_match_buffer_view(golden) -> None:  # type: ignore[no-untyped-def]
    # TVM's test_set_dtype_subregion: the views of the buffer take the new type with it.
    sch = Schedule(add_relu_viewed, debug=True)
    sch.unsafe_set_dtype(sch.get_block("C"), 0, "float16")
    text = sch.func.script()
    assert 'C = T.alloc_buffer((16, 4), "float16")' in text
    assert text.count('(4,), "float16")') == 2
    check_schedule(sch, add_relu_viewed, golden, "schedule/unsafe_set_dtype_view", rtol=1e-2)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((16, 4)).astype("float32"), rng.standard_normal((16, 4)).astype("float32")
    expected = np.maximum((a + b).astype("float16").astype("float32"), 0)
    for run in (lambda f, *x: tir.interpret(f, *x), lambda f, *x: tir.build(f)(*x)):
        d = np.zeros((16, 4), "float32")
        run(sch.func, a, b, d)
        np.testing.assert_array_equal(d, expected)
