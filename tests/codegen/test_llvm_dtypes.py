"""LLVM code for every dtype: arithmetic, wrap-around, casts, floor division; checked against the interpreter."""

from __future__ import annotations

import numpy as np
import pytest
from codegen_kernels import assert_matches_interp, elementwise, run_llvm

import tir
from tir.interp.runtime import bf16_from_bits, bf16_to_bits, to_bfloat16
from tir.ir import (
    LT,
    And,
    Call,
    Cast,
    Div,
    FloorDiv,
    FloorMod,
    ForKind,
    IntImm,
    Max,
    Min,
    Not,
    Or,
    PrimExpr,
    Select,
    const,
)

KINDS = [ForKind.SERIAL, ForKind.VECTORIZED]
N = 16


def random_values(dtype: str, rng: np.random.Generator, n: int = N) -> np.ndarray:
    if dtype == "bool":
        return rng.integers(0, 2, n).astype(np.bool_)
    if dtype == "bfloat16":
        return bf16_to_bits(rng.standard_normal(n).astype(np.float32) * 8)
    if dtype.startswith(("int", "uint")):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    return (rng.standard_normal(n) * 8).astype(dtype)


def zeros(dtype: str, n: int = N) -> np.ndarray:
    return np.zeros(n, np.uint16 if dtype == "bfloat16" else dtype)


@pytest.mark.parametrize("kind", KINDS, ids=["serial", "vector"])
@pytest.mark.parametrize(
    "dtype", ["int8", "int16", "int32", "int64", "uint8", "float16", "bfloat16", "float32", "float64"]
)
def test_arithmetic_per_dtype(dtype: str, kind: ForKind) -> None:
    def compute(a: PrimExpr, b: PrimExpr) -> PrimExpr:
        return a * b + a - b * b

    f = elementwise(f"arith_{dtype}", N, [dtype, dtype], compute, kind)
    rng = np.random.default_rng(1)
    # float32/float64 `a * b + c` may be fused (one rounding; docs/lowering.md): a tolerance
    # there, bit-exact for every other dtype.
    rtol = {"float32": 1e-6, "float64": 1e-14}.get(dtype, 0.0)
    assert_matches_interp(
        f, [random_values(dtype, rng), random_values(dtype, rng), zeros(dtype)], rtol=rtol, atol=rtol
    )


def test_float32_multiply_add_is_fused_into_fma() -> None:
    f = elementwise("fma_contract", N, ["float32", "float32"], lambda a, b: a * b + a, ForKind.VECTORIZED)
    asm = tir.build(f, "llvm").get_source("asm")
    assert "vfmadd" in asm


def test_int8_overflow_wraps() -> None:
    f = elementwise("wrap8", 4, ["int8", "int8"], lambda a, b: a + b)
    a = np.array([100, -100, 127, 5], np.int8)
    b = np.array([100, -100, 1, 5], np.int8)
    out = run_llvm(f, [a, b, np.zeros(4, np.int8)])[2]
    assert out.tolist() == [-56, 56, -128, 10]


def test_uint8_wraps_and_compares_unsigned() -> None:
    f = elementwise("u8", 4, ["uint8", "uint8"], lambda a, b: Select(LT(a, b), a - b, Div(a, b)))
    a = np.array([3, 200, 250, 7], np.uint8)
    b = np.array([5, 100, 2, 200], np.uint8)
    out = run_llvm(f, [a, b, np.zeros(4, np.uint8)])[2]
    assert out.tolist() == [254, 2, 125, 63]  # 3 - 5 wraps; 200 > 100 unsigned; 7 - 200 wraps


def test_float16_round_trip() -> None:
    f = elementwise("f16_trip", N, ["float32"], lambda x: Cast("float32", Cast("float16", x)))
    x = np.random.default_rng(2).standard_normal(N).astype(np.float32) * 1000
    x[:4] = [65520.0, 1e-8, -0.0, np.inf]
    out = run_llvm(f, [x, np.zeros(N, np.float32)])[1]
    with np.errstate(over="ignore"):
        expected = x.astype(np.float16).astype(np.float32)
    np.testing.assert_array_equal(out, expected)


def test_float64_to_float16_rounds_once() -> None:
    # 1 + 2^-11 + 2^-40 is just above the halfway point between two float16 values; rounding
    # through float32 first would lose the 2^-40 and round to even (down).
    f = elementwise("f64_f16", 2, ["float64"], lambda x: Cast("float16", x))
    x = np.array([1 + 2**-11 + 2**-40, -(1 + 2**-11 + 2**-40)], np.float64)
    out = run_llvm(f, [x, np.zeros(2, np.float16)])[1]
    np.testing.assert_array_equal(out, x.astype(np.float16))
    assert out[0] == np.float16(1 + 2**-10)


@pytest.mark.parametrize("kind", KINDS, ids=["serial", "vector"])
def test_bfloat16_cast_ties_to_even_and_nan(kind: ForKind) -> None:
    f = elementwise("to_bf16", 8, ["float32"], lambda x: Cast("bfloat16", x), kind)
    halfway = bf16_from_bits(np.array([0x3F80, 0x3F81], np.uint16))  # 1.0 and its successor
    x = np.array(
        [
            (halfway[0] + halfway[1]) / 2,  # exact tie: to even (0x3F80)
            np.nextafter((halfway[0] + halfway[1]) / 2, np.float32(2)),  # above the tie
            np.float32(np.nan),
            np.float32(3.0e38),  # rounds up to inf
            -1.5,
            0.0,
            np.float32(1e-40),  # subnormal
            -np.inf,
        ],
        np.float32,
    )
    out = run_llvm(f, [x, np.zeros(8, np.uint16)])[1]
    assert out[0] == 0x3F80 and out[1] == 0x3F81
    assert np.isnan(bf16_from_bits(out[2]))
    np.testing.assert_array_equal(out[3:], bf16_to_bits(x[3:]))


def test_bfloat16_arithmetic_rounds_every_operation() -> None:
    f = elementwise("bf16_ops", N, ["bfloat16", "bfloat16"], lambda a, b: a * b + a / b)
    rng = np.random.default_rng(3)
    got = assert_matches_interp(f, [random_values("bfloat16", rng), random_values("bfloat16", rng), zeros("bfloat16")])
    assert got[2].dtype == np.uint16


def test_float64_to_bfloat16_has_no_double_rounding() -> None:
    f = elementwise("f64_bf16", 2, ["float64"], lambda x: Cast("bfloat16", x))
    # Just above the tie between two bfloat16 values, by less than float32 can hold.
    x = np.array([1 + 2**-8 + 2**-40, 1 + 2**-8], np.float64)
    out = run_llvm(f, [x, np.zeros(2, np.uint16)])[1]
    np.testing.assert_array_equal(out, bf16_to_bits(to_bfloat16(x)))
    assert out.tolist() == [0x3F81, 0x3F80]


@pytest.mark.parametrize("kind", KINDS, ids=["serial", "vector"])
def test_bool_logic_and_storage(kind: ForKind) -> None:
    def compute(a: PrimExpr, b: PrimExpr) -> PrimExpr:
        return Or(And(a, Not(b)), And(Not(a), b))  # xor

    f = elementwise("xor", N, ["bool", "bool"], compute, kind)
    rng = np.random.default_rng(4)
    a, b = random_values("bool", rng), random_values("bool", rng)
    out = assert_matches_interp(f, [a, b, zeros("bool")])[2]
    np.testing.assert_array_equal(out, a ^ b)


@pytest.mark.parametrize("kind", KINDS, ids=["serial", "vector"])
@pytest.mark.parametrize("target", ["int8", "uint8", "int32", "int64"])
def test_float_to_int_saturates(target: str, kind: ForKind) -> None:
    f = elementwise(f"to_{target}", 8, ["float32"], lambda x: Cast(target, x), kind)
    x = np.array([2.9, -2.9, 1e20, -1e20, np.nan, np.inf, -np.inf, 127.5], np.float32)
    out = assert_matches_interp(f, [x, zeros(target, 8)])[1]
    info = np.iinfo(target)
    low = 0 if target == "uint8" else -2
    assert out.tolist()[:7] == [2, low, info.max, info.min, 0, info.max, info.min]


def test_int_casts_wrap_and_extend() -> None:
    f = elementwise("narrow", 4, ["int32"], lambda x: Cast("int8", x))
    out = run_llvm(f, [np.array([300, -129, 5, 128], np.int32), np.zeros(4, np.int8)])[1]
    assert out.tolist() == [44, 127, 5, -128]
    g = elementwise("widen", 3, ["uint8"], lambda x: Cast("int32", x))
    assert run_llvm(g, [np.array([255, 0, 128], np.uint8), np.zeros(3, np.int32)])[1].tolist() == [255, 0, 128]
    h = elementwise("sign", 2, ["int8"], lambda x: Cast("int64", x))
    assert run_llvm(h, [np.array([-1, 127], np.int8), np.zeros(2, np.int64)])[1].tolist() == [-1, 127]


def test_casts_to_and_from_bool_and_float() -> None:
    f = elementwise("to_bool", 4, ["float32"], lambda x: Cast("int32", Cast("bool", x)))
    out = run_llvm(f, [np.array([0.0, -0.5, np.nan, -0.0], np.float32), np.zeros(4, np.int32)])[1]
    assert out.tolist() == [0, 1, 1, 0]
    g = elementwise("int_to_float", 3, ["int64"], lambda x: Cast("float32", x))
    x = np.array([2**53 + 1, -7, 2**24 + 1], np.int64)
    np.testing.assert_array_equal(run_llvm(g, [x, np.zeros(3, np.float32)])[1], x.astype(np.float32))
    h = elementwise("int_to_bf16", 3, ["int32"], lambda x: Cast("bfloat16", x))
    assert_matches_interp(h, [np.array([257, -385, 1 << 30], np.int32), np.zeros(3, np.uint16)])


@pytest.mark.parametrize("kind", KINDS, ids=["serial", "vector"])
def test_floordiv_floormod_of_negatives(kind: ForKind) -> None:
    values = [-7, 7, -8, 8, 0, -1, 2**31 - 1, -(2**31)]
    divisors = [2, -2, 3, -3, 5, -5, 7, -7]
    a = np.array(values * 2, np.int32)
    b = np.array(divisors + divisors[::-1], np.int32)
    for op, reference in ((FloorDiv, np.floor_divide), (FloorMod, np.mod)):
        f = elementwise(f"floor_{op.__name__}", N, ["int32", "int32"], op, kind)
        out = assert_matches_interp(f, [a, b, zeros("int32")])[2]
        np.testing.assert_array_equal(out, reference(a.astype(np.int64), b.astype(np.int64)).astype(np.int32))


def test_truncdiv_truncates() -> None:
    f = elementwise("tdiv", 4, ["int32", "int32"], Div)
    out = run_llvm(f, [np.array([-7, 7, -7, 7], np.int32), np.array([2, 2, -2, -2], np.int32), zeros("int32", 4)])[2]
    assert out.tolist() == [-3, 3, 3, -3]


@pytest.mark.parametrize("divisor", [1, 3, 8])
def test_floordiv_by_positive_constant(divisor: int) -> None:
    n = 24

    def compute(a: PrimExpr) -> PrimExpr:
        return FloorDiv(a, IntImm(divisor)) * IntImm(100) + FloorMod(a, IntImm(divisor))

    f = elementwise("const_div", n, ["int32"], compute)
    a = np.arange(-12, 12, dtype=np.int32)
    out = run_llvm(f, [a, np.zeros(n, np.int32)])[1]
    np.testing.assert_array_equal(out, (a // divisor) * 100 + a % divisor)


def test_float_floordiv_and_floormod() -> None:
    for op, reference in ((FloorDiv, np.floor_divide), (FloorMod, np.mod)):
        f = elementwise(f"ffloor_{op.__name__}", 4, ["float32", "float32"], op)
        a = np.array([-7.5, 7.5, -1.0, 5.0], np.float32)
        b = np.array([2.0, -2.0, 3.0, 2.5], np.float32)
        out = assert_matches_interp(f, [a, b, zeros("float32", 4)])[2]
        np.testing.assert_allclose(out, reference(a, b))


@pytest.mark.parametrize("kind", KINDS, ids=["serial", "vector"])
def test_float_min_max_match_interpreter_on_nan(kind: ForKind) -> None:
    def compute(a: PrimExpr, b: PrimExpr) -> PrimExpr:
        return Min(a, b) * const(10.0) + Max(a, b)

    f = elementwise("minmax", 8, ["float32", "float32"], compute, kind)
    a = np.array([1, np.nan, 3, -np.inf, 0.0, -0.0, 5, np.nan], np.float32)
    b = np.array([2, 1, np.nan, 1, -0.0, 0.0, 5, np.nan], np.float32)
    got = assert_matches_interp(f, [a, b, zeros("float32", 8)])[2]
    assert got[0] == 12.0


def test_isnan_and_select() -> None:
    f = elementwise("nan_to_zero", 4, ["float32"], lambda x: Select(Call("bool", "isnan", (x,)), const(0.0), x))
    out = run_llvm(f, [np.array([np.nan, 1.5, -np.inf, np.nan], np.float32), zeros("float32", 4)])[1]
    assert out.tolist() == [0.0, 1.5, -np.inf, 0.0]
