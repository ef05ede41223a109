"""The validator's ``out-of-bounds`` rule, and ``tir.build`` refusing what it reports (issue 17 D)."""

from __future__ import annotations

import pytest

import tir
import tir.script as T
from tir.analysis import verify
from tir.analysis.verify import VerificationError, check_bounds


@T.script
def far_read(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("B"):
            vi = T.spatial_axis(4, i)
            B[vi] = A[vi + 100000000]


@T.script
def padded_read(A: T.Buffer((6,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("P"):
            vi = T.spatial_axis(8, i)
            B[vi] = T.if_then_else(1 <= vi and vi < 7, A[vi - 1], T.float32(0))


@T.script
def partly_outside(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("B"):
            vi = T.spatial_axis(4, i)
            B[vi] = A[vi + 2]


@T.script
def guarded_statement(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("B"):
            vi = T.spatial_axis(4, i)
            if vi > 100:
                B[vi] = A[vi + 100]


@T.script
def symbolic(A: T.Buffer((n,), "float32"), B: T.Buffer((4,), "float32"), n: T.int32):  # noqa: F821
    for i in range(4):
        with T.block("B"):
            vi = T.spatial_axis(4, i)
            B[vi] = A[vi + 100]


@T.script
def write_below_zero(A: T.Buffer((4, 8), "float32")):
    for i, j in T.grid(4, 8):
        with T.block("W"):
            vi, vj = T.remap("SS", i, j)
            A[vi, vj - 8] = 0.0


def test_far_read_is_reported_naming_block_buffer_and_index() -> None:
    (violation,) = verify(far_read)
    assert violation.rule == "out-of-bounds"
    assert violation.target == "block 'B'"
    assert "reads A[vi + 100000000]" in violation.message
    assert "[100000000, 100000003]" in violation.message and "extent 4" in violation.message


def test_write_before_the_start_is_reported() -> None:
    (violation,) = check_bounds(write_below_zero)
    assert violation.target == "block 'W'" and "writes A[vi, vj - 8]: index 1" in violation.message


@pytest.mark.parametrize("func", [padded_read, partly_outside, guarded_statement, symbolic], ids=lambda f: f.name)
def test_not_provably_outside_is_not_reported(func: tir.PrimFunc) -> None:
    """Guarded padding reads, accesses only partly outside (left to checked builds), accesses
    under an ``if``, and symbolic extents are not judged."""
    assert check_bounds(func) == []


def test_build_refuses_a_provable_out_of_bounds_access() -> None:
    with pytest.raises(VerificationError, match=r"\[out-of-bounds\] block 'B': reads A\[vi \+ 100000000\]"):
        tir.build(far_read, "llvm")


def test_build_accepts_padding() -> None:
    tir.build(padded_read, "llvm")
