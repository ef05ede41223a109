"""eval_interval / relax_region / union_regions: soundness against enumeration, exactness."""

from __future__ import annotations

import itertools

import pytest
from arith_expr_gen import domains, evaluate, int_exprs
from hypothesis import given
from hypothesis import strategies as st

from tir.arith import eval_interval, relax_region, union_regions
from tir.ir import (
    Buffer,
    BufferLoad,
    BufferRegion,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Ramp,
    Range,
    Select,
    Var,
    const,
)
from tir.ir.structural import structural_equal

X, Y, N = Var("x"), Var("y"), Var("n")
EXPRS_XYN = int_exprs([X, Y, N], max_leaves=8)  # built once: hypothesis validates strategies per build


def _dom_map(pairs: list[tuple[int, int]], variables: list[Var]) -> dict[Var, Range]:
    return {var: Range(const(start), const(extent)) for var, (start, extent) in zip(variables, pairs)}


def _points(dom_map: dict[Var, Range]):  # type: ignore[no-untyped-def]
    variables = list(dom_map)
    spans = [range(dom.min.value, dom.min.value + dom.extent.value) for dom in dom_map.values()]  # type: ignore[attr-defined]
    for values in itertools.product(*spans):
        yield dict(zip(variables, values))


@given(st.data())
def test_eval_interval_is_sound(data: st.DataObject) -> None:
    dom_map = _dom_map(data.draw(domains(2)), [X, Y])
    expr = data.draw(EXPRS_XYN)
    outer = {N: data.draw(st.integers(-12, 12))}
    low, high = eval_interval(expr, dom_map)
    low_value, high_value = evaluate(low, outer), evaluate(high, outer)
    for point in _points(dom_map):
        value = evaluate(expr, {**point, **outer})
        assert low_value <= value <= high_value, (expr, low, high, point, value)


@given(
    st.lists(st.integers(-5, 5), min_size=3, max_size=3),
    st.integers(-20, 20),
    domains(3),
    st.sampled_from([1, 2, 3, 4, 8]),
)
def test_eval_interval_is_exact_on_affine_sums_and_their_floordiv(
    coeffs: list[int], offset: int, pairs: list[tuple[int, int]], divisor: int
) -> None:
    variables = [Var("a"), Var("b"), Var("c")]
    dom_map = _dom_map(pairs, variables)
    expr = const(offset)
    for coeff, var in zip(coeffs, variables):
        expr = expr + var * coeff
    expr = FloorDiv(expr, const(divisor))
    values = [evaluate(expr, point) for point in _points(dom_map)]
    low, high = eval_interval(expr, dom_map)
    assert isinstance(low, IntImm) and isinstance(high, IntImm)
    assert (low.value, high.value) == (min(values), max(values))


def test_symbolic_affine_interval() -> None:
    vi, ii = Var("vi"), Var("ii")
    low, high = eval_interval(vi * 4 + ii, {ii: Range.from_extent(4)})
    assert structural_equal(low, vi * 4)
    assert structural_equal(high, vi * 4 + 3)
    low, high = eval_interval(vi * 4 + 0, {})
    assert structural_equal(low, vi * 4) and structural_equal(high, vi * 4)


def test_floormod_interval() -> None:
    vi, ii = Var("vi"), Var("ii")
    # The operand fits inside one period: exact.
    low, high = eval_interval(FloorMod(vi * 8 + ii, const(8)), {ii: Range.from_extent(4)})
    assert structural_equal((low, high), (const(0), const(3)))
    # It may straddle a period boundary: the whole [0, c - 1].
    low, high = eval_interval(FloorMod(vi * 3 + ii, const(8)), {ii: Range.from_extent(4)})
    assert structural_equal((low, high), (const(0), const(7)))
    # A split index seen through a coarser modulus stays exact.
    low, high = eval_interval(FloorMod(vi * 4 + ii, const(8)), {ii: Range.from_extent(4)})
    assert structural_equal((low, high), (FloorMod(vi, const(2)) * 4, FloorMod(vi, const(2)) * 4 + 3))
    low, high = eval_interval(FloorMod(ii + 2, const(8)), {ii: Range.from_extent(4)})
    assert structural_equal((low, high), (const(2), const(5)))


def test_min_max_select_intervals() -> None:
    i = Var("i")
    dom = {i: Range.from_extent(10)}
    assert structural_equal(eval_interval(Min(i * 4, const(30)), dom), (const(0), const(30)))
    assert structural_equal(eval_interval(Max(i, const(3)), dom), (const(3), const(9)))
    assert structural_equal(eval_interval(Select(i < 5, i, i * 2), dom), (const(0), const(18)))


def test_outer_variable_in_range_bounds() -> None:
    vo, i = Var("vo"), Var("i")
    # i sweeps [vo * 8, vo * 8 + 8).
    low, high = eval_interval(i * 2, {i: Range(vo * 8, const(8))})
    assert structural_equal(low, vo * 16)
    assert structural_equal(high, vo * 16 + 14)


def test_nested_domain_ranges() -> None:
    i, j = Var("i"), Var("j")
    # j in [i, i + 4), i in [0, 8): j in [0, 10].
    low, high = eval_interval(j, {i: Range.from_extent(8), j: Range(i, const(4))})
    assert structural_equal((low, high), (const(0), const(10)))


def test_unbounded_side_is_dtype_extreme() -> None:
    i = Var("i")
    A = Buffer("A", (const(8),), "int32")
    low, high = eval_interval(BufferLoad(A, (i,)) + i, {i: Range.from_extent(8)})
    assert (low.value, high.value) == (-(2**31), 2**31 - 1)  # type: ignore[attr-defined]


def test_relax_region_with_ramp_and_shape_fallback() -> None:
    vi, ii = Var("vi"), Var("ii")
    A = Buffer("A", (const(8),), "int32")
    region = relax_region(
        [vi * 4 + ii, Ramp(vi * 8, const(1), 8), BufferLoad(A, (ii,))],
        {ii: Range.from_extent(4)},
        shape=[const(64), const(64), const(100)],
    )
    expected = (Range(vi * 4, const(4)), Range(vi * 8, const(8)), Range(const(0), const(100)))
    assert structural_equal(region, expected)


def test_relax_region_without_shape_starts_unbounded_at_zero() -> None:
    A, i = Buffer("A", (const(8),), "int32"), Var("i")
    (dim,) = relax_region([BufferLoad(A, (i,))], {i: Range.from_extent(8)})
    assert structural_equal(dim, Range(const(0), const(2**31 - 1)))
    # A load that does not vary is an outer value: it stays symbolic.
    (dim,) = relax_region([BufferLoad(A, (const(0),))], {i: Range.from_extent(8)})
    assert structural_equal(dim, Range(BufferLoad(A, (const(0),)), const(1)))


def test_union_regions() -> None:
    vi, n = Var("vi"), Var("n")
    a = (Range(vi * 4, const(4)), Range(const(0), const(8)))
    b = (Range(vi * 4 + 2, const(4)), Range(const(8), const(8)))
    assert structural_equal(union_regions(a, b), (Range(vi * 4, const(6)), Range(const(0), const(16))))
    # Identical ranges come back as the same objects.
    same = union_regions(a, a)
    assert all(x is y for x, y in zip(same, a))
    # Incomparable: a sound Min/Max hull, or the full dimension when the shape is given.
    c = (Range(n, const(1)),)
    d = (Range(vi, const(1)),)
    (hull,) = union_regions(c, d)
    assert structural_equal(hull.min, Min(n, vi))
    assert structural_equal(union_regions(c, d, shape=[const(32)]), (Range(const(0), const(32)),))


def test_union_of_buffer_regions() -> None:
    buffer = Buffer("B", (const(16),), "float32")
    merged = union_regions(
        BufferRegion(buffer, (Range(const(0), const(4)),)), BufferRegion(buffer, (Range(const(8), const(4)),))
    )
    assert isinstance(merged, BufferRegion) and merged.buffer is buffer
    assert structural_equal(merged.region, (Range(const(0), const(12)),))
    other = Buffer("C", (const(16),), "float32")
    with pytest.raises(ValueError):
        union_regions(BufferRegion(buffer, merged.region), BufferRegion(other, merged.region))
