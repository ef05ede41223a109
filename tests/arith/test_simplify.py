"""The simplifier: random expressions keep their value; every rule, one targeted test."""

from __future__ import annotations

import math
import time

import pytest
from arith_expr_gen import domains, evaluate, int_exprs
from hypothesis import given
from hypothesis import strategies as st

from tir.arith import Analyzer, ConstIntBound, const_int_bound, simplify
from tir.ir import (
    EQ,
    GE,
    LT,
    NE,
    Add,
    And,
    Buffer,
    BufferLoad,
    Call,
    Cast,
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    Let,
    Max,
    Min,
    Mul,
    Not,
    Or,
    Range,
    Select,
    Sub,
    Var,
)
from tir.ir.structural import structural_equal

i, j, k, m = Var("i"), Var("j"), Var("k"), Var("m")
TRUE, FALSE = IntImm(1, "bool"), IntImm(0, "bool")
# Strategies are built once: building them per example makes hypothesis re-validate them.
EXPRS_BY_COUNT = {count: int_exprs([i, j, k, m][:count], max_leaves=14) for count in (2, 3, 4)}
EXPRS_IJ = int_exprs([i, j], max_leaves=10)


def _c(value: int) -> IntImm:
    return IntImm(value)


def _dom(*pairs: tuple[Var, int, int]) -> dict[Var, Range]:
    return {var: Range(_c(start), _c(extent)) for var, start, extent in pairs}


def _check(expr, expected, dom_map=None) -> None:  # type: ignore[no-untyped-def]
    result = simplify(expr, dom_map)
    assert structural_equal(result, expected), f"simplify({expr!r}) = {result!r}, expected {expected!r}"


# ---------------------------------------------------------------- random expressions


@given(st.data())
def test_random_expressions_keep_their_value(data: st.DataObject) -> None:
    count = data.draw(st.integers(2, 4))
    variables = [i, j, k, m][:count]
    pairs = data.draw(domains(count))
    dom_map = {var: Range(_c(start), _c(extent)) for var, (start, extent) in zip(variables, pairs)}
    expr = data.draw(EXPRS_BY_COUNT[count])
    result = simplify(expr, dom_map)
    for _ in range(6):
        point = {
            var: data.draw(st.integers(start, start + extent - 1)) for var, (start, extent) in zip(variables, pairs)
        }
        assert evaluate(result, point) == evaluate(expr, point), (expr, result, point)
    # Simplifying again changes nothing and gives back the very same object.
    assert simplify(result, dom_map) is result, (expr, result, simplify(result, dom_map))


@given(st.data())
def test_random_expressions_without_ranges(data: st.DataObject) -> None:
    expr = data.draw(EXPRS_IJ)
    result = simplify(expr)
    for _ in range(6):
        point = {i: data.draw(st.integers(-50, 50)), j: data.draw(st.integers(-50, 50))}
        assert evaluate(result, point) == evaluate(expr, point), (expr, result, point)
    assert simplify(result) is result


@given(st.data())
def test_const_int_bound_is_sound(data: st.DataObject) -> None:
    pairs = data.draw(domains(2))
    dom_map = {i: Range(_c(pairs[0][0]), _c(pairs[0][1])), j: Range(_c(pairs[1][0]), _c(pairs[1][1]))}
    expr = data.draw(EXPRS_IJ)
    bound = const_int_bound(expr, dom_map)
    analyzer_bound = _analyzer(dom_map).const_int_bound(expr)
    for i_value in range(pairs[0][0], pairs[0][0] + pairs[0][1]):
        for j_value in range(pairs[1][0], pairs[1][0] + pairs[1][1]):
            value = evaluate(expr, {i: i_value, j: j_value})
            assert bound.min_value <= value <= bound.max_value
            assert analyzer_bound.min_value <= value <= analyzer_bound.max_value


def _analyzer(dom_map: dict[Var, Range]) -> Analyzer:
    analyzer = Analyzer()
    for var, dom in dom_map.items():
        analyzer.bind(var, dom)
    return analyzer


# ---------------------------------------------------------------- sums


def test_like_terms_are_collected() -> None:
    _check(i * 4 + j - i * 4 + 2 * j, j * 3)
    _check(i + i, i * 2)
    _check(i - i, _c(0))
    _check((i + 1) * 4, i * 4 + 4)
    _check(3 * (i - j) + 2, i * 3 - j * 3 + 2)


def test_term_order_is_first_seen_with_constant_last() -> None:
    _check(1 + j + i * 2, j + i * 2 + 1)
    _check(0 - i + j, j - i)
    _check(5 - i, Sub(_c(5), i))
    _check(0 - i - 3, Sub(Sub(_c(0), i), _c(3)))
    _check(i * 4 + 0, i * 4)
    _check(i * 1, i)
    _check(i * 0 + 7, _c(7))


def test_nonlinear_products_stay_atoms_with_constants_pulled_out() -> None:
    _check((i * 4) * j - (i * j) * 4, _c(0))
    _check((i * 2) * (j * 3), Mul(Mul(i, j), _c(6)))


def test_constant_folding_wraps_int32() -> None:
    _check(Add(_c(2**31 - 1), _c(1)), _c(-(2**31)))


# ---------------------------------------------------------------- division and modulo


def test_floordiv_floormod_of_split_index() -> None:
    dom = _dom((j, 0, 16))
    _check((i * 16 + j) // 16, i, dom)
    _check((i * 16 + j) % 16, j, dom)
    _check((i * 16 + j + 3) // 16, i + FloorDiv(j + 3, _c(16)), dom)
    # Without the range of j only the multiple of 16 leaves the division.
    _check((i * 16 + j) // 16, i + FloorDiv(j, _c(16)))
    _check((i * 16 + j) % 16, FloorMod(j, _c(16)))


def test_division_of_split_index_by_a_coarser_factor() -> None:
    dom = _dom((j, 0, 4))
    _check((i * 4 + j) // 8, i // 2, dom)
    _check((i * 4 + j) % 8, FloorMod(i, _c(2)) * 4 + j, dom)
    _check((i * 8 + k * 4 + j) // 16, FloorDiv(i * 2 + k, _c(4)), dom)
    # j may reach 4: no split.
    kept = (i * 4 + k) // 8
    assert simplify(kept, dom) is kept


def test_division_by_one_and_constants() -> None:
    _check(i // 1, i)
    _check(i % 1, _c(0))
    _check(FloorDiv(_c(-7), _c(2)), _c(-4))
    _check(FloorMod(_c(-7), _c(2)), _c(1))
    _check(FloorMod(_c(7), _c(-2)), _c(-1))
    _check(Div(_c(-7), _c(2)), _c(-3))
    _check(FloorDiv(i, _c(0)), FloorDiv(i, _c(0)))  # undefined: kept


def test_floordiv_floormod_of_small_values() -> None:
    dom = _dom((i, 0, 8))
    _check(i // 8, _c(0), dom)
    _check(i % 8, i, dom)
    _check((i + 8) // 8, _c(1), dom)
    _check((i + 8) % 8, i, dom)
    _check((i - 8) % 8, i, dom)


def test_nested_division() -> None:
    _check((i // 4) // 8, i // 32)
    _check((i % 32) // 4, (i // 4) % 8)
    _check((i % 32) % 8, i % 8)
    _check((i % 8) % 32, i % 8)


def test_split_fuse_identities() -> None:
    _check((i // 4) * 4 + i % 4, i)
    _check(i % 4 + (i // 4) * 4, i)
    _check(((i + j) // 8) * 8 + (i + j) % 8, i + j)
    _check(i - (i // 4) * 4, i % 4)
    _check(((i // 16) % 4) * 16 + i % 16, i % 64)
    _check(((i // 4) * 4 + i % 4) * 2, i * 2)


def test_negative_divisor() -> None:
    _check(FloorDiv(i * 6, _c(-3)), Sub(_c(0), i * 2))
    _check(FloorMod(i * 6, _c(-3)), _c(0))


def test_truncdiv_of_non_negative_is_floordiv() -> None:
    dom = _dom((i, 0, 8), (j, 0, 4))
    _check(Div(i * 4 + j, _c(4)), i, dom)
    _check(Div(i, _c(1)), i)
    _check(Div(i, _c(4)), Div(i, _c(4)))  # sign unknown: kept


# ---------------------------------------------------------------- min / max


def test_min_max() -> None:
    dom = _dom((i, 0, 4))
    _check(Min(i, _c(5)), i, dom)
    _check(Max(i, _c(5)), _c(5), dom)
    _check(Min(i * 4 + 3, i * 4 + 8), i * 4 + 3)
    _check(Max(i * 4 + 3, i * 4 + 8), i * 4 + 8)
    _check(Min(i, i), i)
    _check(Min(_c(3), _c(9)), _c(3))
    _check(Min(_c(4), j), Min(j, _c(4)))
    _check(Min(Min(j, _c(8)), _c(4)), Min(j, _c(4)))
    _check(Max(Max(j, _c(8)), _c(4)), Max(j, _c(8)))
    _check(Min(i * 4 + 3, i * 4 + j), i * 4 + Min(j, _c(3)))


# ---------------------------------------------------------------- comparisons and logic


def test_comparisons_decided_by_bounds() -> None:
    dom = _dom((i, 0, 16), (j, 0, 4))
    _check(i < 16, TRUE, dom)
    _check(i < 15, LT(i, _c(15)), dom)
    _check(i * 4 + j < 64, TRUE, dom)
    _check(i >= 16, FALSE, dom)
    _check(EQ(i + 1, i + 1), TRUE)
    _check(NE(i + 1, i), TRUE)
    _check(LT(_c(2), _c(3)), TRUE)
    _check(LT(FloatImm(2.5), FloatImm(1.0)), FALSE)


def test_logic_folding() -> None:
    p = LT(i, j)
    _check(And(p, TRUE), p)
    _check(And(FALSE, p), FALSE)
    _check(Or(p, TRUE), TRUE)
    _check(Or(FALSE, p), p)
    _check(Not(Not(p)), p)
    _check(Not(p), GE(i, j))
    _check(And(p, Not(p)), FALSE)
    _check(Or(p, p), p)
    _check(Not(TRUE), FALSE)


def test_select_folding() -> None:
    dom = _dom((i, 0, 8))
    _check(Select(i < 8, i + 1, i - 1), i + 1, dom)
    _check(Select(LT(i, j), i * 2, i + i), i * 2)
    kept = Select(LT(i, j), i, j)
    assert simplify(kept) is kept
    _check(Call("int32", "if_then_else", (FALSE, i, j)), j)


# ---------------------------------------------------------------- constants of other dtypes


def test_int8_constants_wrap_and_int8_algebra_is_left_alone() -> None:
    _check(Add(IntImm(100, "int8"), IntImm(100, "int8")), IntImm(-56, "int8"))
    _check(Mul(IntImm(200, "uint8"), IntImm(2, "uint8")), IntImm(144, "uint8"))
    _check(Sub(IntImm(0, "uint8"), IntImm(1, "uint8")), IntImm(255, "uint8"))
    _check(Div(IntImm(-128, "int8"), IntImm(-1, "int8")), IntImm(-128, "int8"))
    a, b = Var("a", "int8"), Var("b", "int8")
    # (a + b) - b would be a, but only under no-overflow assumptions we do not make for int8.
    expr = Sub(Add(a, b), b)
    assert simplify(expr) is expr
    _check(Add(a, IntImm(0, "int8")), a)


def test_float_constants_fold_with_rounding() -> None:
    _check(Add(FloatImm(1.5), FloatImm(2.25)), FloatImm(3.75))
    third = simplify(Div(FloatImm(1.0), FloatImm(3.0)))
    assert isinstance(third, FloatImm) and third.value == 0.3333333432674408  # float32 rounding
    half = simplify(Add(FloatImm(1.0, "float16"), FloatImm(0.0004, "float16")))
    assert isinstance(half, FloatImm) and half.value == 1.0
    big = simplify(Mul(FloatImm(60000.0, "float16"), FloatImm(2.0, "float16")))
    assert isinstance(big, FloatImm) and math.isinf(big.value)
    bf = simplify(Add(FloatImm(1.0, "bfloat16"), FloatImm(0.00390625, "bfloat16")))
    assert isinstance(bf, FloatImm) and bf.value == 1.0  # ties to even at 8 bits
    _check(Div(FloatImm(1.0, "float64"), FloatImm(4.0, "float64")), FloatImm(0.25, "float64"))
    kept = Div(FloatImm(1.0), FloatImm(0.0))
    assert simplify(kept) is kept


def test_casts_fold() -> None:
    _check(Cast("int8", _c(300)), IntImm(44, "int8"))
    _check(Cast("float32", _c(3)), FloatImm(3.0))
    _check(Cast("int32", FloatImm(-2.7)), _c(-2))
    _check(Cast("bool", _c(5)), TRUE)
    _check(Cast("int32", i), i)
    _check(Cast("int32", Cast("int64", i)), i)
    kept = Cast("int32", FloatImm(1e20))
    assert simplify(kept) is kept


def test_float_expressions_keep_structure_with_integer_parts_simplified() -> None:
    A = Buffer("A", (_c(64),), "float32")
    x = Var("x", "float32")
    expr = Add(Mul(BufferLoad(A, (i * 4 + j - i * 4,)), x), Call("float32", "exp", (x,)))
    expected = Add(Mul(BufferLoad(A, (j,)), x), Call("float32", "exp", (x,)))
    _check(expr, expected)
    same = Add(x, FloatImm(0.0))  # x + 0.0 is not x for x = -0.0
    assert simplify(same) is same
    _check(Mul(x, FloatImm(1.0)), x)


def test_let_is_substituted_or_kept() -> None:
    t = Var("t")
    _check(Let(t, _c(4), t * 2 + i), i + 8)
    _check(Let(t, i, t + t), i * 2)
    kept = Let(t, i * j, t + 1)
    assert simplify(kept) is kept


def test_unchanged_expression_is_the_same_object() -> None:
    for expr in (i * 4 + j, FloorDiv(i + j, _c(16)), Min(i, j), i - j * 2, LT(i, j), Select(LT(i, j), i, j)):
        assert simplify(expr) is expr


# ---------------------------------------------------------------- Analyzer


def test_analyzer_bind_and_queries() -> None:
    analyzer = Analyzer()
    analyzer.bind(i, Range(_c(0), _c(8)))
    analyzer.bind(j, Range(_c(0), _c(16)))
    assert analyzer.const_int_bound(i * 16 + j) == ConstIntBound(0, 127)
    assert analyzer.can_prove(i * 16 + j < 128)
    assert not analyzer.can_prove(i * 16 + j < 127)
    assert analyzer.can_prove_equal((i * 16 + j) // 16, i)
    assert not analyzer.can_prove_equal(i, j)
    assert analyzer.can_prove_equal(i + 1, 1 + i)
    analyzer.bind(k, i * 2)
    assert structural_equal(analyzer.simplify(k + 1), i * 2 + 1)
    analyzer.bind(m, Range(_c(5), _c(1)))  # extent 1: l is 5
    assert structural_equal(analyzer.simplify(m * 2), _c(10))


def test_const_int_bound_unknown_and_tighter_via_simplification() -> None:
    bound = const_int_bound(i + 1)
    assert bound.min_value == -math.inf and bound.max_value == math.inf
    analyzer = Analyzer()
    analyzer.bind(i, Range(_c(0), _c(8)))
    # Interval arithmetic alone gives [-7, 7]; the simplified form is 0.
    assert analyzer.const_int_bound(i - i) == ConstIntBound(0, 0)
    assert const_int_bound(FloorMod(j, _c(8))) == ConstIntBound(0, 7)
    assert const_int_bound(BufferLoad(Buffer("B", (_c(4),), "int8"), (_c(0),))) == ConstIntBound(-128, 127)


@pytest.mark.parametrize("repeat", [200])
def test_typical_index_expression_is_fast(repeat: int) -> None:
    dom = _dom((i, 0, 8), (j, 0, 4), (k, 0, 16))
    expr = FloorDiv((i * 4 + j) * 16 + k, _c(16)) * 64 + FloorMod((i * 4 + j) * 16 + k, _c(16))
    analyzer = _analyzer(dom)
    start = time.perf_counter()
    for _ in range(repeat):
        analyzer.simplify(expr)
    per_call = (time.perf_counter() - start) / repeat
    assert per_call < 2e-3, f"{per_call * 1e6:.0f} us per simplify"
