"""32-bit buffer indices are computed in 64 bits (tir/codegen/llvm_function.py, ``wide_expr``).

A 32-bit loop counts in 64 bits and the arithmetic of an index on loop variables and constants
is 64-bit, so no access sign-extends its index (LLVM spent about a third of a tuner candidate's
optimization time widening them). Uses of a loop variable outside an index (a stored value, a
condition) see its 32-bit value; a load or parameter inside an index is sign-extended.
"""

from __future__ import annotations

import re

import numpy as np

import tir
import tir.codegen.llvm
import tir.script as T
import tir.transform
from tir.target import Target


def unoptimized_ir(func: tir.PrimFunc) -> str:
    target = Target.parse("llvm")
    return tir.codegen.llvm.codegen_llvm(tir.transform.lower(func, target), target)


@T.script
def tiled_copy(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32")):
    for f in range(64):
        for i, j in T.grid(8, 8):
            with T.block("B"):
                vi = T.spatial_axis(64, f // 8 * 8 + i)
                vj = T.spatial_axis(64, f % 8 * 8 + j)
                B[vi, vj] = A[vi, vj] * 2.0


def test_loops_and_index_arithmetic_are_64_bit() -> None:
    text = unoptimized_ir(tiled_copy)
    phis = re.findall(r"= phi\s+(i\d+)", text)
    assert phis and set(phis) == {"i64"}, phis
    assert " sext " not in text, "an index was sign-extended"
    module = tir.build(tiled_copy, "llvm")
    a = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    b = np.zeros_like(a)
    module(a, b)
    np.testing.assert_array_equal(b, a * 2.0)


@T.script
def mixed_uses(A: T.Buffer((16,), "int32"), B: T.Buffer((24,), "int32"), C: T.Buffer((24,), "float32"), n: T.int32):
    # The loop variable in an index (floor division and modulo of negative numbers), in a
    # stored value, in a condition and converted to float; a load and a parameter in an index.
    for i in range(24):
        B[i] = A[(i - 11) % 16] + A[(i - 5) // 4 + 4] * i + T.if_then_else(i < n, A[A[i % 16] % 16], 0)
        C[(i + n) % 24] = T.cast(i // 5 - 2, "float32")


def test_loop_variable_outside_an_index_keeps_its_32_bit_value() -> None:
    rng = np.random.default_rng(1)
    a = rng.integers(-50, 50, 16).astype(np.int32)
    n = 13
    expected_b = np.zeros(24, np.int32)
    expected_c = np.zeros(24, np.float32)
    for i in range(24):
        taken = a[a[i % 16] % 16] if i < n else 0
        expected_b[i] = a[(i - 11) % 16] + a[(i - 5) // 4 + 4] * i + taken
        expected_c[(i + n) % 24] = i // 5 - 2
    text = unoptimized_ir(mixed_uses)
    assert " trunc " in text  # the stored i, the condition and the conversion read i's 32 bits
    module = tir.build(mixed_uses, "llvm")
    b, c = np.zeros(24, np.int32), np.zeros(24, np.float32)
    module(a, b, c, n)
    np.testing.assert_array_equal(b, expected_b)
    np.testing.assert_array_equal(c, expected_c)
    interpreted_b, interpreted_c = np.zeros(24, np.int32), np.zeros(24, np.float32)
    tir.interpret(mixed_uses, a, interpreted_b, interpreted_c, n)
    np.testing.assert_array_equal(interpreted_b, expected_b)
    np.testing.assert_array_equal(interpreted_c, expected_c)
