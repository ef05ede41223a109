"""``tir.build(f, "llvm", checked=True)``: out-of-bounds accesses raise ``IndexError`` naming the
buffer, instead of touching memory the arrays do not own (issue 17 D).

Each case runs in a child process (an unchecked access could crash it), so a regression fails
the test instead of killing pytest.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tir
import tir.script as T


def run_isolated(case: str) -> None:
    result = subprocess.run([sys.executable, str(Path(__file__)), case], capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        died = f"killed by signal {-result.returncode}" if result.returncode < 0 else f"exit {result.returncode}"
        pytest.fail(f"{case} {died}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")


@T.script
def shifted_read(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4, 8), "float32"), k: T.int32):
    for i, j in T.grid(4, 8):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj + k]


@T.script
def shifted_write(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32"), k: T.int32):
    for i in T.vectorized(16):
        with T.block("B"):
            vi = T.spatial_axis(16, i)
            B[vi + k] = A[vi]


@T.script
def gather(A: T.Buffer((8,), "float32"), Idx: T.Buffer((4,), "int32"), B: T.Buffer((4,), "float32")):
    for i in T.parallel(4):
        with T.block("B"):
            vi = T.spatial_axis(4, i)
            B[vi] = A[Idx[vi]]


@T.script
def padded(A: T.Buffer((6,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("P"):
            vi = T.spatial_axis(8, i)
            B[vi] = T.if_then_else(1 <= vi and vi < 7, A[vi - 1], T.float32(0))


def expect_index_error(call, *names: str) -> None:
    try:
        call()
    except IndexError as error:
        text = str(error)
        assert "out-of-bounds access" in text and all(name in text for name in names), text
    else:
        raise AssertionError("no IndexError")


def case_read() -> None:
    module = tir.build(shifted_read, "llvm", checked=True)
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    b = np.zeros((4, 8), np.float32)
    module(a, b, 0)
    np.testing.assert_array_equal(b, a)
    expect_index_error(lambda: module(a, b, 1), "A[")
    expect_index_error(lambda: module(a, b, -100000), "A[")


def case_vector_write() -> None:
    module = tir.build(shifted_write, "llvm", checked=True)
    a = np.arange(16, dtype=np.float32)
    b = np.zeros(16, np.float32)
    module(a, b, 0)
    np.testing.assert_array_equal(b, a)
    expect_index_error(lambda: module(a, b, 3), "buffer B")


def case_gather() -> None:
    module = tir.build(gather, "llvm", checked=True)
    a = np.arange(8, dtype=np.float32)
    b = np.zeros(4, np.float32)
    module(a, np.array([7, 0, 3, 1], np.int32), b)
    np.testing.assert_array_equal(b, [7, 0, 3, 1])
    expect_index_error(lambda: module(a, np.array([1, 2, 1 << 30, 0], np.int32), b), "buffer A")


def case_padding() -> None:
    """A guarded padding read is tested only where its branch is taken."""
    b = np.zeros(8, np.float32)
    tir.build(padded, "llvm", checked=True)(np.arange(1, 7, dtype=np.float32), b)
    np.testing.assert_array_equal(b, [0, 1, 2, 3, 4, 5, 6, 0])


@pytest.mark.parametrize("case", ["read", "vector_write", "gather", "padding"])
def test_checked_build(case: str) -> None:
    run_isolated(case)


def test_unchecked_build_has_no_checks() -> None:
    text = tir.build(shifted_read, "llvm").get_source("ll-unopt")
    assert "after_bounds_error" not in text
    assert "after_bounds_error" in tir.build(shifted_read, "llvm", checked=True).get_source("ll-unopt")


if __name__ == "__main__":
    globals()[f"case_{sys.argv[1]}"]()
