"""Bitwise operators in the dialect (TVM's ``T.bitwise_and`` and ``&``, ``|``, ``^``, ``~`` on
integers): parsed, printed, and computed the same by the interpreter and the LLVM backend, with
two's complement semantics at each type's width."""

from __future__ import annotations

import numpy as np
import pytest

import tir
from tir.script import ScriptError

SOURCE = """
@T.script
def bits(A: T.Buffer((64,), "int32"), B: T.Buffer((64,), "int32"), C: T.Buffer((64,), "int32"),
         D: T.Buffer((64,), "uint8"), E: T.Buffer((64,), "int64")):
    for i in range(64):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = (A[vi] & B[vi]) | (A[vi] ^ 7) + T.bitwise_xor(~A[vi], B[vi])
            D[vi] = ~T.cast(A[vi], "uint8") & T.uint8(240)
            E[vi] = T.bitwise_or(T.cast(A[vi], "int64") * 65536, T.bitwise_not(T.int64(0)) ^ T.cast(B[vi], "int64"))
"""


def _expected(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    c = (a & b) | ((a ^ 7) + np.bitwise_xor(~a, b))
    d = (~a.astype(np.uint8)) & np.uint8(240)
    e = (a.astype(np.int64) * 65536) | (~np.int64(0) ^ b.astype(np.int64))
    return c, d, e


@pytest.mark.parametrize("backend", ["interp", "llvm"])
def test_bitwise_operators_compute_twos_complement(backend: str) -> None:
    func = tir.parse(SOURCE)
    rng = np.random.default_rng(0)
    a = rng.integers(-(2**31), 2**31, 64, dtype=np.int64).astype(np.int32)
    b = rng.integers(-(2**31), 2**31, 64, dtype=np.int64).astype(np.int32)
    c, d, e = np.zeros(64, np.int32), np.zeros(64, np.uint8), np.zeros(64, np.int64)
    run = tir.build(func) if backend == "llvm" else (lambda *args: tir.interpret(func, *args))
    run(a, b, c, d, e)
    for got, want in zip((c, d, e), _expected(a, b)):
        np.testing.assert_array_equal(got, want)


def test_bitwise_operators_print_and_parse_back() -> None:
    func = tir.parse(SOURCE)
    text = func.script()
    assert "T.bitwise_and(A[vi], B[vi])" in text and "T.bitwise_not(" in text
    assert tir.structural_equal(tir.parse(text), func)


def test_bitwise_loops_vectorize() -> None:
    from tir.transform import lower

    source = SOURCE.replace("for i in range(64):", "for i in T.vectorized(64):")
    func = tir.parse(source)
    lowered = lower(func, "llvm")
    text = "\n".join(f.script() for f in lowered.functions.values())
    assert "T.bitwise_and(A[T.ramp(" in text  # the loop became vector statements
    rng = np.random.default_rng(1)
    a = rng.integers(-(2**31), 2**31, 64, dtype=np.int64).astype(np.int32)
    b = rng.integers(-(2**31), 2**31, 64, dtype=np.int64).astype(np.int32)
    c, d, e = np.zeros(64, np.int32), np.zeros(64, np.uint8), np.zeros(64, np.int64)
    tir.build(func)(a, b, c, d, e)
    for got, want in zip((c, d, e), _expected(a, b)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("A[vi] & 1.5", "'&' on float32 values"),
        ("~A[vi]", "'~' on a float32 value"),
        ("T.bitwise_and(A[vi], A[vi])", "T.bitwise_and needs integer arguments, got float32"),
    ],
)
def test_bitwise_operators_refuse_floats(expr: str, message: str) -> None:
    source = f"""
@T.script
def bad(A: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("A"):
            vi = T.remap("S", i)
            A[vi] = {expr}
"""
    with pytest.raises(ScriptError, match=message):
        tir.parse(source)
