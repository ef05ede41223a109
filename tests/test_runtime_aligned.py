"""tir.runtime.aligned: buffers on cache lines, and the places that use them."""

from __future__ import annotations

import numpy as np
import pytest

from tir.runtime.aligned import ALIGN, aligned_copy, aligned_empty, aligned_zeros


@pytest.mark.parametrize("shape", [(3,), (1000, 3), (7, 5, 3), ()])
@pytest.mark.parametrize("dtype", ["float32", "int8", "float64"])
def test_aligned_arrays_start_on_a_cache_line(shape: tuple[int, ...], dtype: str) -> None:
    for make in (aligned_empty, aligned_zeros):
        array = make(shape, dtype)
        assert array.shape == shape and array.dtype == np.dtype(dtype) and array.flags.c_contiguous
        assert array.ctypes.data % ALIGN == 0
    assert not aligned_zeros(shape, dtype).any()


def test_aligned_copy_keeps_values_and_copies_only_when_needed() -> None:
    strided = np.arange(20, dtype=np.float32)[::2]
    copy = aligned_copy(strided)
    assert copy.ctypes.data % ALIGN == 0 and copy.flags.c_contiguous
    np.testing.assert_array_equal(copy, strided)
    assert aligned_copy(copy) is copy
    fresh = aligned_copy(copy, fresh=True)
    assert fresh is not copy and fresh.ctypes.data % ALIGN == 0
    np.testing.assert_array_equal(fresh, copy)


def test_tuner_arguments_are_aligned() -> None:
    import tir.script as T
    from metasched.measure.runner import make_arguments

    @T.script
    def add(A: T.Buffer((33, 7), "float32"), B: T.Buffer((33, 7), "float32")):
        for i, j in T.grid(33, 7):
            with T.block("B"):
                vi, vj = T.remap("SS", i, j)
                B[vi, vj] = A[vi, vj] + 1.0

    arrays, _ = make_arguments(add)
    assert all(array.ctypes.data % ALIGN == 0 for array in arrays)
