"""Vector widths that are not powers of two (issue 17 C): ``vectorize`` of extents 1-17 builds
and computes what numpy computes, for float32, int8, int32 and float64, and every alignment in
the LLVM IR is a power of two (LLVM rejects ``store <6 x float> ... align 24``)."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tir
from tir.schedule import Schedule

DTYPES = ["float32", "int8", "int32", "float64"]


def _program(n: int, dtype: str) -> tir.PrimFunc:
    """Three shapes of vector access: a row of a parameter at a base that is a multiple of
    ``n`` or ``n + 1`` (offset by one), a row of an allocated (64-byte aligned) 2-D buffer,
    and a whole allocated 1-D buffer (base 0: the alignment is the allocation's)."""
    return tir.parse(f'''
@T.script
def widths(A: T.Buffer((3, {n + 1}), "{dtype}"), C: T.Buffer((3, {n}), "{dtype}"), D: T.Buffer(({n},), "{dtype}")):
    B = T.alloc_buffer((3, {n}), "{dtype}")
    E = T.alloc_buffer(({n},), "{dtype}")
    for i, j in T.grid(3, {n}):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj + 1] + A[vi, vj]
    for i, j in T.grid(3, {n}):
        with T.block("C"):
            vi, vj = T.remap("SS", i, j)
            C[vi, vj] = B[vi, vj] * B[vi, vj]
    for j in range({n}):
        with T.block("E"):
            vj = T.spatial_axis({n}, j)
            E[vj] = A[0, vj] - A[2, vj]
    for j in range({n}):
        with T.block("D"):
            vj = T.spatial_axis({n}, j)
            D[vj] = E[vj] + E[vj]
''')


def _vectorized(n: int, dtype: str) -> tir.PrimFunc:
    sch = Schedule(_program(n, dtype))
    for name in ("B", "C", "E", "D"):
        sch.vectorize(sch.get_loops(sch.get_block(name))[-1])
    return sch.func


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", range(1, 18))
def test_vectorize_any_extent_builds_and_computes_the_same(n: int, dtype: str) -> None:
    func = _vectorized(n, dtype)
    module = tir.build(func, "llvm")
    alignments = {int(a) for a in re.findall(r"align (\d+)", module.get_source("ll"))}
    assert all(a & (a - 1) == 0 for a in alignments), f"alignments {sorted(alignments)} are not all powers of two"
    rng = np.random.default_rng(n)
    a = rng.integers(-8, 8, size=(3, n + 1)).astype(dtype)
    c = np.zeros((3, n), dtype)
    d = np.zeros(n, dtype)
    module(a, c, d)
    b = a[:, 1:] + a[:, :-1]
    np.testing.assert_array_equal(c, b * b)
    e = a[0, :n] - a[2, :n]
    np.testing.assert_array_equal(d, e + e)
