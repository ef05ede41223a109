"""Iterator-map detection: the paper's examples, predicates, inversion, and random loop nests
(splits, fuses, mutations) checked against brute-force enumeration of the bindings."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tir.arith import Analyzer
from tir.arith.iter_map import IterSum, detect_iter_map, determined_vars, inverse_iter_map, normalize_iter_map
from tir.ir import (
    GE,
    GT,
    LE,
    LT,
    Add,
    And,
    Cast,
    FloorDiv,
    FloorMod,
    IntImm,
    Max,
    Min,
    Mul,
    PrimExpr,
    Range,
    Sub,
    Var,
    const,
)
from tir.ir.functor import substitute


def R(extent: Any, start: Any = 0) -> Range:
    return Range.from_extent(extent, start)


# ---------------------------------------------------------------- evaluation helpers


def evaluate(expr: PrimExpr, env: dict[Var, np.ndarray]) -> np.ndarray:
    """Vectorized integer evaluation of an index expression."""
    if isinstance(expr, IntImm):
        return np.int64(expr.value)  # type: ignore[return-value]
    if isinstance(expr, Var):
        return env[expr]
    if isinstance(expr, Cast):
        return evaluate(expr.value, env)
    ops = {
        Add: np.add,
        Sub: np.subtract,
        Mul: np.multiply,
        FloorDiv: np.floor_divide,
        FloorMod: np.mod,
        Min: np.minimum,
        Max: np.maximum,
        LT: np.less,
        LE: np.less_equal,
        GT: np.greater,
        GE: np.greater_equal,
        And: np.logical_and,
    }
    for cls, op in ops.items():
        if type(expr) is cls:
            return op(evaluate(expr.a, env), evaluate(expr.b, env))  # type: ignore[attr-defined]
    raise TypeError(f"cannot evaluate {type(expr).__name__}")


def enumerate_map(
    bindings: list[PrimExpr], loops: list[tuple[Var, int]], predicate: PrimExpr | None
) -> tuple[np.ndarray, dict[Var, np.ndarray]]:
    """All binding tuples over the loop points that satisfy the predicate (rows), and the points."""
    grids = np.meshgrid(*[np.arange(extent) for _, extent in loops], indexing="ij")
    env = {var: grid.reshape(-1).astype(np.int64) for (var, _), grid in zip(loops, grids)}
    count = env[loops[0][0]].shape[0]
    keep = np.ones(count, dtype=bool) if predicate is None else np.broadcast_to(evaluate(predicate, env), (count,))
    env = {var: values[keep] for var, values in env.items()}
    columns = [np.broadcast_to(evaluate(b, env), (int(keep.sum()),)) for b in bindings]
    return np.stack(columns, axis=1) if columns else np.zeros((int(keep.sum()), 0), np.int64), env


def brute_bijective(values: np.ndarray) -> bool:
    """One-to-one onto the box spanned by each coordinate's min..max."""
    if values.shape[0] == 0:
        return False
    box = 1
    for column in values.T:
        box *= int(column.max() - column.min() + 1)
    distinct = len({tuple(row) for row in values.tolist()})
    return distinct == values.shape[0] == box


def brute_surjective(values: np.ndarray) -> bool:
    """The points cover the whole box spanned by each coordinate's min..max."""
    if values.shape[0] == 0:
        return False
    box = 1
    for column in values.T:
        box *= int(column.max() - column.min() + 1)
    return len({tuple(row) for row in values.tolist()}) == box


def const_value(expr: PrimExpr) -> int:
    assert isinstance(expr, IntImm), f"expected a constant, got {expr}"
    return expr.value


# ---------------------------------------------------------------- the paper's examples


def test_paper_dependent_bindings_rejected() -> None:
    i = Var("i")
    for level in ("surjective", "bijective"):
        result = detect_iter_map([i, i * 2], {i: R(16)}, check_level=level)  # type: ignore[arg-type]
        assert not result.ok and result.indices is None
        assert result.errors


def test_paper_split_bindings_accepted() -> None:
    i = Var("i")
    result = detect_iter_map([i // 4, i % 4], {i: R(16)}, check_level="bijective")
    assert result.ok and not result.errors
    assert [const_value(r.extent) for r in result.ranges] == [4, 4]
    assert [str(s) for s in result.indices or []] == ["i // 4", "i % 4"]


def test_ranges_are_in_each_bindings_own_type() -> None:
    # An int64 loop next to int32 ones (TVM's reindex mixed_dtype program): each range is in
    # its binding's type, min and extent alike, so it compares with the iterator's domain.
    i0, i1 = Var("i0", "int64"), Var("i1", "int32")
    dom = {i0: Range(IntImm(0, "int64"), IntImm(2, "int64")), i1: Range(IntImm(0, "int32"), IntImm(1280, "int32"))}
    for bindings in ([i0, i1], [i1, i0], [i1 // 8, i0, i1 % 8]):
        result = detect_iter_map(bindings, dom)
        assert result.ok, result.errors
        for binding, rng in zip(bindings, result.ranges):
            assert rng.min.dtype == binding.dtype and rng.extent.dtype == binding.dtype
    result = detect_iter_map([i0, i1], dom)
    assert Analyzer().can_prove_equal(result.ranges[1].extent, dom[i1].extent)


def test_same_iterator_twice_is_not_independent() -> None:
    i = Var("i")
    result = detect_iter_map([i, i], {i: R(8)})
    assert not result.ok
    assert "not independent" in result.errors[0]


def test_fused_binding_and_split_of_fused() -> None:
    i, j = Var("i"), Var("j")
    f = Var("f")
    result = detect_iter_map([f // 4, f % 4], {f: R(32)}, check_level="bijective")
    assert result.ok
    result = detect_iter_map([(i * 8 + j) // 4, (i * 8 + j) % 4], {i: R(4), j: R(8)}, check_level="bijective")
    assert result.ok, result.errors
    assert [const_value(r.extent) for r in result.ranges] == [8, 4]


def test_surjective_allows_unused_and_overlap_but_bijective_does_not() -> None:
    i, k, a = Var("i"), Var("k"), Var("a")
    partial = detect_iter_map([i // 4], {i: R(16)})
    assert partial.ok and partial.unused_vars == [i]
    assert not detect_iter_map([i // 4], {i: R(16)}, check_level="bijective").ok
    unused = detect_iter_map([i], {i: R(4), k: R(3)})
    assert unused.ok and unused.unused_vars == [k]
    window = detect_iter_map([i * 4 + a], {i: R(25), a: R(6)}, predicate=i * 4 + a < 100)
    assert window.ok and window.exact == [False]
    assert const_value(window.ranges[0].extent) == 100
    assert not detect_iter_map([i * 4 + a], {i: R(25), a: R(6)}, check_level="bijective").ok


def test_gaps_are_rejected() -> None:
    i, j = Var("i"), Var("j")
    result = detect_iter_map([i * 4 + j], {i: R(4), j: R(3)})
    assert not result.ok and "gaps" in result.errors[0]


def test_predicate_makes_padded_split_exact() -> None:
    i0, i1 = Var("i0"), Var("i1")
    dom = {i0: R(4), i1: R(32)}
    result = detect_iter_map([i0 * 32 + i1], dom, predicate=i0 * 32 + i1 < 100, check_level="bijective")
    assert result.ok and const_value(result.ranges[0].extent) == 100
    without = detect_iter_map([i0 * 32 + i1], dom, check_level="bijective")
    assert without.ok and const_value(without.ranges[0].extent) == 128
    split = detect_iter_map(
        [(i0 * 32 + i1) // 10, (i0 * 32 + i1) % 10], dom, predicate=i0 * 32 + i1 < 100, check_level="bijective"
    )
    assert split.ok, split.errors
    bad = detect_iter_map([(i0 * 32 + i1) // 10, (i0 * 32 + i1) % 10], dom, check_level="bijective")
    assert not bad.ok and "does not divide" in bad.errors[0]


def test_unsupported_predicate_only_rejected_when_bijective() -> None:
    i = Var("i")
    weird = (i % 3).equal(0)
    assert detect_iter_map([i], {i: R(9)}, predicate=weird).ok
    result = detect_iter_map([i], {i: R(9)}, predicate=weird, check_level="bijective")
    assert not result.ok and "predicate" in result.errors[0]


def test_not_quasi_affine() -> None:
    i, j = Var("i"), Var("j")
    assert "not affine" in detect_iter_map([i * j], {i: R(4), j: R(4)}).errors[0]
    assert "divides by an iterator" in detect_iter_map([i // j], {i: R(4), j: R(4)}).errors[0]
    result = detect_iter_map([Min(i, const(2))], {i: R(4)})
    assert not result.ok and "not quasi-affine" in result.errors[0]


def test_non_rectangular_nest_is_rejected() -> None:
    i, j = Var("i"), Var("j")
    result = detect_iter_map([i, j], {i: R(4), j: Range(const(0), i + 1)})
    assert not result.ok and "non-rectangular" in result.errors[0]


def test_constants_outer_variables_and_loop_starts() -> None:
    i, vo = Var("i"), Var("vo")
    result = detect_iter_map([vo * 16 + i, const(3)], {i: R(16)}, check_level="bijective")
    assert result.ok
    assert str(result.ranges[0].min) == "vo * 16" and const_value(result.ranges[0].extent) == 16
    assert const_value(result.ranges[1].min) == 3 and const_value(result.ranges[1].extent) == 1
    j = Var("j")
    shifted = detect_iter_map([j], {j: R(6, 2)}, check_level="bijective")
    assert const_value(shifted.ranges[0].min) == 2 and const_value(shifted.ranges[0].extent) == 6


def test_reversed_binding() -> None:
    i = Var("i")
    result = detect_iter_map([15 - i], {i: R(16)}, check_level="bijective")
    assert result.ok and result.exact == [True]
    assert const_value(result.ranges[0].min) == 0 and const_value(result.ranges[0].extent) == 16
    inverse = inverse_iter_map(result, [Var("o")])
    assert str(inverse[i]) == "15 - o"


def test_symbolic_extents() -> None:
    n = Var("n")
    i, i0, i1 = Var("i"), Var("i0"), Var("i1")
    result = detect_iter_map([i], {i: R(n)}, check_level="bijective")
    assert result.ok and result.ranges[0].extent is n
    padded = detect_iter_map(
        [i0 * 32 + i1], {i0: R((n + 31) // 32), i1: R(32)}, predicate=i0 * 32 + i1 < n, check_level="surjective"
    )
    assert padded.ok, padded.errors
    assert Analyzer().can_prove_equal(padded.ranges[0].extent, Min(((n + 31) // 32) * 32, n)) or str(
        padded.ranges[0].extent
    ) in ("n", "T.min((n + 31) // 32 * 32, n)")


def test_normalize_simplifies_bindings() -> None:
    i, i0, i1 = Var("i"), Var("i0"), Var("i1")
    dom = {i: R(16), i0: R(4), i1: R(32)}
    out = normalize_iter_map([i // 4 * 4 + i % 4, (i0 * 32 + i1) // 32, i0 * 0 + 5], dom)
    assert [str(e) for e in out] == ["i", "i0", "5"]


def test_inverse_of_fuse_and_split() -> None:
    i, j = Var("i"), Var("j")
    f = i * 8 + j
    result = detect_iter_map([f // 4, f % 4], {i: R(4), j: R(8)}, check_level="bijective")
    outputs = [Var("o0"), Var("o1")]
    inverse = inverse_iter_map(result, outputs)
    values, env = enumerate_map([f // 4, f % 4], [(i, 4), (j, 8)], None)
    back = {o: values[:, k] for k, o in enumerate(outputs)}
    np.testing.assert_array_equal(evaluate(inverse[i], back), env[i])
    np.testing.assert_array_equal(evaluate(inverse[j], back), env[j])
    with pytest.raises(ValueError, match="bijective"):
        inverse_iter_map(detect_iter_map([f // 4, f % 4], {i: R(4), j: R(8)}), outputs)
    with pytest.raises(ValueError, match="detection failed"):
        inverse_iter_map(detect_iter_map([i, i], {i: R(4)}, check_level="bijective"), outputs)


def test_iter_sum_structure() -> None:
    i, j = Var("i"), Var("j")
    result = detect_iter_map([i * 4 + j], {i: R(4), j: R(4)})
    (value,) = result.indices or []
    assert isinstance(value, IterSum)
    assert [a.scale.value for a in value.args] == [4, 1]  # type: ignore[attr-defined]
    assert value.loop_vars() == [i, j]
    assert result.binding_vars == [[i, j]]


# ---------------------------------------------------------------- random loop nests


@st.composite
def loop_nests(draw: st.DrawFn) -> dict[str, Any]:
    """Original loops transformed by random splits and fuses; bindings give the original iterators."""
    count = draw(st.integers(1, 3))
    extents = [draw(st.integers(1, 9)) for _ in range(count)]
    originals = [Var(f"v{k}") for k in range(count)]
    loops: list[tuple[Var, int]] = list(zip(originals, extents))
    bindings: list[PrimExpr] = list(originals)
    predicates: list[PrimExpr] = []
    fresh = itertools.count()
    for _ in range(draw(st.integers(0, 4))):
        if draw(st.booleans()) or len(loops) < 2:
            # split a loop (the inner factor may not divide the extent: predicate)
            index = draw(st.integers(0, len(loops) - 1))
            var, extent = loops[index]
            factor = draw(st.integers(1, max(1, min(extent + 2, 8))))
            outer_extent = -(-extent // factor)
            outer, inner = Var(f"s{next(fresh)}"), Var(f"s{next(fresh)}")
            replacement = outer * factor + inner
            vmap = {var: replacement}
            bindings = [substitute(b, vmap) for b in bindings]
            predicates = [substitute(p, vmap) for p in predicates]
            if outer_extent * factor != extent:
                predicates.append(replacement < extent)
            loops[index : index + 1] = [(outer, outer_extent), (inner, factor)]
        else:
            # fuse two adjacent loops
            index = draw(st.integers(0, len(loops) - 2))
            (a, ea), (b, eb) = loops[index], loops[index + 1]
            fused = Var(f"f{next(fresh)}")
            vmap = {a: fused // eb, b: fused % eb}
            bindings = [substitute(x, vmap) for x in bindings]
            predicates = [substitute(p, vmap) for p in predicates]
            loops[index : index + 2] = [(fused, ea * eb)]
        if int(np.prod([e for _, e in loops])) > 4096:
            break
    simplified = draw(st.booleans())
    if simplified:
        analyzer = Analyzer()
        for var, extent in loops:
            analyzer.bind(var, R(extent))
        bindings = [analyzer.simplify(b) for b in bindings]
    mutation = draw(st.sampled_from(["none", "none", "scale", "add", "duplicate", "extra_loop", "div", "drop_pred"]))
    k = draw(st.integers(0, len(bindings) - 1))
    j = draw(st.integers(0, len(bindings) - 1))
    if mutation == "scale":
        bindings[k] = bindings[k] * 2
    elif mutation == "add" and j != k:
        bindings[k] = bindings[k] + bindings[j]
    elif mutation == "duplicate" and j != k:
        bindings[j] = bindings[k]
    elif mutation == "extra_loop":
        loops.append((Var("extra"), draw(st.integers(2, 3))))
    elif mutation == "div":
        bindings[k] = bindings[k] // draw(st.integers(2, 3))
    elif mutation == "drop_pred":
        predicates = []
    predicate: PrimExpr | None = None
    for p in predicates:
        predicate = p if predicate is None else And(predicate, p)
    return {"loops": loops, "bindings": bindings, "predicate": predicate, "mutation": mutation, "simplified": simplified}


@settings(max_examples=300, deadline=None)
@given(loop_nests())
def test_detection_agrees_with_enumeration(case: dict[str, Any]) -> None:
    """Bijective detection is sound always, and complete for the forms split and fuse write
    (a simplifier may rewrite bindings out of the predicate's form: only soundness then)."""
    loops, bindings, predicate = case["loops"], case["bindings"], case["predicate"]
    dom = {var: R(extent) for var, extent in loops}
    values, env = enumerate_map(bindings, loops, predicate)
    bijective = brute_bijective(values)
    result = detect_iter_map(bindings, dom, predicate=True if predicate is None else predicate, check_level="bijective")
    context = f"bindings={[str(b) for b in bindings]} loops={[(v.name, e) for v, e in loops]} pred={predicate}"
    if result.ok or not case["simplified"]:
        assert result.ok == bijective, f"{context}: detected {result.ok} ({result.errors}), enumeration {bijective}"
    if case["mutation"] == "none" and not case["simplified"]:
        assert result.ok, f"{context}: an unmutated nest must be bijective: {result.errors}"
    if result.ok:
        for column, dom_range in zip(values.T, result.ranges):
            assert const_value(dom_range.min) == column.min(), context
            assert const_value(dom_range.extent) == column.max() - column.min() + 1, context
        outputs = [Var(f"o{k}") for k in range(len(bindings))]
        inverse = inverse_iter_map(result, outputs)
        back = {o: values[:, k] for k, o in enumerate(outputs)}
        for var, _ in loops:
            got = np.broadcast_to(evaluate(inverse[var], back), env[var].shape)
            np.testing.assert_array_equal(got, env[var], err_msg=f"{context}: inverse of {var.name}")
        normalized = normalize_iter_map(bindings, dom, True if predicate is None else predicate)
        again, _ = enumerate_map(normalized, loops, predicate)
        np.testing.assert_array_equal(again, values, err_msg=f"{context}: normalized {[str(e) for e in normalized]}")
    surjective = detect_iter_map(bindings, dom, predicate=True if predicate is None else predicate)
    if surjective.ok:
        for column, dom_range in zip(values.T, surjective.ranges):
            low, extent = const_value(dom_range.min), const_value(dom_range.extent)
            if surjective.predicate_applied:  # exact: the ranges are the values, all combinations occur
                assert (low, extent) == (column.min(), column.max() - column.min() + 1), context
            else:  # a superset
                assert low <= column.min() and column.max() <= low + extent - 1, context
        if surjective.predicate_applied:
            assert brute_surjective(values), f"{context}: detected surjective, enumeration disagrees"


def test_symbolic_fuse_with_known_sizes() -> None:
    n, m, f = Var("n"), Var("m"), Var("f")
    sizes = {n: Range(const(1), const(1 << 20)), m: Range(const(1), const(1 << 20))}
    result = detect_iter_map([f // m, f % m], {f: Range(const(0), n * m)}, check_level="bijective", var_ranges=sizes)
    assert result.ok, result.errors
    assert [(str(r.min), str(r.extent)) for r in result.ranges] == [("0", "n"), ("0", "m")]
    inverse = inverse_iter_map(result, [Var("a"), Var("b")])
    assert str(inverse[f]) == "a * m + b"
    # without knowing m > 0 the divisions cannot be judged
    assert not detect_iter_map([f // m, f % m], {f: Range(const(0), n * m)}).ok


# ---------------------------------------------------------------- determined variables


def brute_determined(values: np.ndarray, env: dict[Var, np.ndarray], var: Var) -> bool:
    """Whether equal binding tuples imply equal values of ``var`` over the enumerated points."""
    seen: dict[tuple[int, ...], int] = {}
    for row, value in zip(values.tolist(), env[var].tolist()):
        if seen.setdefault(tuple(row), value) != value:
            return False
    return True


def test_determined_vars_of_a_simplified_fuse_and_split() -> None:
    # A 1000^3 nest fused and split by 16, as split writes it after simplification: the top
    # binding uses o alone, the others the fused o * 16 + i.
    o, i = Var("o"), Var("i")
    dom = {o: R(62500000), i: R(16)}
    bindings = [o // 62500, (o * 16 + i) // 1000 % 1000, (o * 16 + i) % 1000]
    assert {v.name for v in determined_vars(bindings, dom)} == {"o", "i"}
    # Without the top binding only i is known.
    assert [v.name for v in determined_vars(bindings[1:], dom)] == ["i"]


def test_determined_vars_need_digits_on_source_boundaries() -> None:
    o, i = Var("o"), Var("i")
    dom = {o: R(2), i: R(6)}
    # (o * 6 + i) // 4 mixes digits of o and i: (0, 4) and (1, 0) give 1 and i % 4 = 0.
    assert determined_vars([(o * 6 + i) // 4, i % 4], dom) == []
    assert {v.name for v in determined_vars([(o * 6 + i) // 3, (o * 6 + i) % 3], dom)} == {"o", "i"}
    # (o * 16 + i) % 32 with o < 4: o and o + 2 collide.
    assert [v.name for v in determined_vars([(o * 16 + i) % 32], {o: R(4), i: R(16)})] == ["i"]


def test_determined_vars_with_a_padded_split() -> None:
    o, i = Var("o"), Var("i")
    fused = o * 48 + i
    bindings = [fused // 1000000, fused // 1000 % 1000, fused % 1000]
    dom = {o: R(20833334), i: R(48)}
    assert {v.name for v in determined_vars(bindings, dom, fused < 1000000000)} == {"o", "i"}


@settings(max_examples=300, deadline=None)
@given(loop_nests(), st.integers(0, 7))
def test_determined_vars_agree_with_enumeration(case: dict[str, Any], dropped: int) -> None:
    """Sound always (also with a binding dropped); complete for unmutated nests."""
    loops, bindings, predicate = case["loops"], case["bindings"], case["predicate"]
    dom = {var: R(extent) for var, extent in loops}
    condition = True if predicate is None else predicate
    subsets = [bindings]
    if len(bindings) > 1:
        subsets.append([b for k, b in enumerate(bindings) if k != dropped % len(bindings)])
    for subset in subsets:
        values, env = enumerate_map(subset, loops, predicate)
        found = determined_vars(subset, dom, condition)
        context = f"bindings={[str(b) for b in subset]} loops={[(v.name, e) for v, e in loops]} pred={predicate}"
        for var in found:
            assert brute_determined(values, env, var), f"{context}: {var.name} claimed determined"
    if case["mutation"] == "none" and predicate is None:
        assert {id(v) for v in determined_vars(bindings, dom)} == {id(v) for v, _ in loops}, (
            f"bindings={[str(b) for b in bindings]} loops={[(v.name, e) for v, e in loops]}"
        )
