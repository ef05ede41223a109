"""Integer division has one meaning in both backends, with no signal (issue 17 D).

numpy's convention (docs/dialect.md, "Integer division"): ``x // 0 == 0``, ``x % 0 == 0``,
``T.truncdiv(x, 0) == 0``, ``MIN // -1 == MIN`` (wrapped), ``MIN % -1 == 0``. x86 raises SIGFPE
on a zero divisor and on ``MIN / -1``, so every built case runs in a child process first: a
regression fails the test instead of killing pytest.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from codegen_kernels import elementwise, run_interp, run_llvm

from tir.ir import Div, FloorDiv, FloorMod, ForKind, IntImm

DTYPES = ("int8", "int16", "int32", "int64", "uint8")
OPS = {"floordiv": FloorDiv, "floormod": FloorMod, "truncdiv": Div}


def run_isolated(case: str, *args: str) -> None:
    """Run ``case`` of this file in a fresh interpreter; a signal or an assertion fails here."""
    result = subprocess.run(
        [sys.executable, str(Path(__file__)), case, *args], capture_output=True, text=True, timeout=300
    )
    if result.returncode != 0:
        died = f"killed by signal {-result.returncode}" if result.returncode < 0 else f"exit {result.returncode}"
        pytest.fail(f"{case}{args} {died}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")


def special_values(dtype: str) -> np.ndarray:
    info = np.iinfo(dtype)
    values = {int(info.min), int(info.min) + 1, -7, -1, 0, 1, 2, 7, int(info.max) - 1, int(info.max)}
    return np.array(sorted(v for v in values if info.min <= v <= info.max), dtype)


def operand_pairs(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    values = special_values(dtype)
    a, b = np.meshgrid(values, values, indexing="ij")
    return a.ravel().copy(), b.ravel().copy()


def expected(op: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """numpy's results; truncdiv (which numpy lacks) from Python ints with the same convention."""
    with np.errstate(all="ignore"):
        if op == "floordiv":
            return np.floor_divide(a, b)
        if op == "floormod":
            return np.remainder(a, b)
    bits = a.dtype.itemsize * 8
    out = []
    for x, y in zip(a.tolist(), b.tolist()):
        q = 0 if y == 0 else abs(x) // abs(y) * (1 if (x >= 0) == (y > 0) else -1)
        out.append(q)
    wrapped = np.array(out, dtype=object)
    if np.issubdtype(a.dtype, np.signedinteger):
        wrapped = (wrapped + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))
    return wrapped.astype(a.dtype)


def division_kernel(op: str, dtype: str, n: int, kind: ForKind) -> object:
    return elementwise(f"{op}_{dtype}", n, [dtype, dtype], lambda x, y: OPS[op](x, y), kind)


def check_backends(op: str, dtype: str, kind_name: str) -> None:
    a, b = operand_pairs(dtype)
    func = division_kernel(op, dtype, a.size, ForKind[kind_name])
    want = expected(op, a, b)
    out = np.zeros_like(a)
    interp = run_interp(func, [a, b, out])[2]
    np.testing.assert_array_equal(interp, want, err_msg=f"interpreter {op} {dtype} {kind_name}")
    llvm = run_llvm(func, [a, b, out])[2]
    np.testing.assert_array_equal(llvm, want, err_msg=f"llvm {op} {dtype} {kind_name}")


def check_constant_divisors(dtype: str) -> None:
    """``x // 0`` and ``x // -1`` with a literal divisor, and a divisor that is 0 for one ``i``."""
    values = special_values(dtype)
    n = values.size
    signed = np.issubdtype(np.dtype(dtype), np.signedinteger)
    divisors = [0, -1] if signed else [0]
    for op, cls in OPS.items():
        for c in divisors:
            func = elementwise(f"{op}_const", n, [dtype], lambda x, cls=cls, c=c: cls(x, IntImm(c, x.dtype)))
            want = expected(op, values, np.full_like(values, c))
            out = np.zeros_like(values)
            np.testing.assert_array_equal(run_interp(func, [values, out])[1], want, err_msg=f"interp {op} {c}")
            np.testing.assert_array_equal(run_llvm(func, [values, out])[1], want, err_msg=f"llvm {op} {c}")


def check_loop_divisor() -> None:
    """``A[i] // (i - 3)``: the divisor's range includes 0, so the guard must stay."""
    n = 8
    a = np.arange(-20, -20 + 7 * n, 7, dtype=np.int32)
    for op, cls in OPS.items():
        func = elementwise(f"{op}_loop", n, ["int32"], lambda x: x)
        loop = func.body  # Out[i] = In0[i] becomes Out[i] = In0[i] op (i - 3)
        store = loop.body
        func = func.replace(body=loop.replace(body=store.replace(value=cls(store.value, loop.loop_var - IntImm(3)))))
        want = expected(op, a, np.arange(n, dtype=np.int32) - 3)
        out = np.zeros_like(a)
        np.testing.assert_array_equal(run_interp(func, [a, out])[1], want, err_msg=f"interp {op}")
        np.testing.assert_array_equal(run_llvm(func, [a, out])[1], want, err_msg=f"llvm {op}")


@pytest.mark.parametrize("dtype", DTYPES)
def test_division_special_values_agree(dtype: str) -> None:
    run_isolated("backends", dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_constant_divisors(dtype: str) -> None:
    run_isolated("constants", dtype)


def test_divisor_from_loop_variable() -> None:
    run_isolated("loop")


def test_interpreter_division_by_zero_gives_zero() -> None:
    import tir
    import tir.script as T

    @T.script
    def div0(A: T.Buffer((3,), "int32"), B: T.Buffer((3,), "int32")):
        for i in range(3):
            with T.block("B"):
                vi = T.spatial_axis(3, i)
                B[vi] = A[vi] // (A[vi] - A[vi]) + A[vi] % 0 + T.truncdiv(A[vi], 0)

    out = np.full(3, 9, np.int32)
    tir.interpret(div0, np.array([0, 5, -5], np.int32), out)
    np.testing.assert_array_equal(out, [0, 0, 0])


def test_float_division_is_ieee() -> None:
    func = elementwise("fdiv", 4, ["float32", "float32"], lambda x, y: Div(x, y))
    a = np.array([1.0, -1.0, 0.0, 3.0], np.float32)
    b = np.array([0.0, 0.0, 0.0, 2.0], np.float32)
    out = np.zeros(4, np.float32)
    want = np.array([np.inf, -np.inf, np.nan, 1.5], np.float32)
    np.testing.assert_array_equal(run_interp(func, [a, b, out])[2], want)
    np.testing.assert_array_equal(run_llvm(func, [a, b, out])[2], want)


def test_positive_constant_divisor_has_no_guard() -> None:
    """The common ``x // 4`` pays for no zero / -1 test."""
    import tir

    func = elementwise("div4", 16, ["int32"], lambda x: FloorDiv(x, IntImm(4, x.dtype)) + FloorMod(x, IntImm(4, x.dtype)))
    body = tir.build(func, "llvm").get_source("ll-unopt").split('@"div4.body"', 1)[1]
    assert "icmp eq" not in body


def _main(argv: list[str]) -> None:
    case, *args = argv
    if case == "backends":
        for op in OPS:
            for kind in ("SERIAL", "VECTORIZED"):
                check_backends(op, args[0], kind)
    elif case == "constants":
        check_constant_divisors(args[0])
    elif case == "loop":
        check_loop_divisor()
    else:
        raise SystemExit(f"unknown case {case}")


if __name__ == "__main__":
    _main(sys.argv[1:])
