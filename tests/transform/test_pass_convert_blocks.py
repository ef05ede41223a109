"""convert_blocks_to_loops: bindings substituted, predicates, allocations, match_buffer views."""

from __future__ import annotations

import pytest
from lowering_programs import PROGRAMS, assert_same_results, lower_before, nodes_of

import tir
from tir.transform import LoweringError, convert_blocks_to_loops


def _convert(name: str) -> tir.PrimFunc:
    func, _ = PROGRAMS[name]
    return convert_blocks_to_loops(lower_before(func, "convert_blocks_to_loops"))


@pytest.mark.parametrize(
    "name", ["matmul_init", "split_predicate", "nested_blocks", "match_unit_dims", "tiled_boundary", "parallel_cache"]
)
def test_golden(name: str, golden) -> None:
    golden.check(f"transform/convert_blocks_{name}", _convert(name).script())


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_no_blocks_and_same_results(name: str) -> None:
    func, make_args = PROGRAMS[name]
    converted = _convert(name)
    assert not any(isinstance(n, (tir.Block, tir.BlockRealize)) for n in nodes_of(converted.body))
    assert_same_results(func, converted, make_args)


def test_init_is_lowered_even_without_lower_init() -> None:
    func, make_args = PROGRAMS["matmul_init"]
    assert_same_results(func, convert_blocks_to_loops(func), make_args)


def test_root_allocations_wrap_the_body() -> None:
    converted = _convert("parallel_cache")
    assert isinstance(converted.body, tir.ir.Allocate) and converted.body.buffer.name == "C"


def test_match_buffer_rewritten_to_source() -> None:
    converted = _convert("match_unit_dims")
    names = {n.buffer.name for n in nodes_of(converted.body) if isinstance(n, (tir.ir.BufferLoad, tir.ir.BufferStore))}
    assert names == {"A", "B"}


SYMBOLIC_VIEW = """
@T.prim_func
def f(A: T.Buffer((16,), "float32")):
    k = T.int32()
    for i in range(4):
        with T.block("b"):
            vi = T.spatial_axis(4, i)
            S = T.match_buffer(A[vi * 4 : vi * 4 + 4], (k,), "float32")
            for j in range(k):
                S[j] = S[j] + 1.0
"""


def test_symbolic_view_shape_takes_the_region_extent() -> None:
    func = tir.parse(SYMBOLIC_VIEW)
    converted = convert_blocks_to_loops(func)
    text = converted.script()
    assert "T.grid(4, 4)" in text and "A[i * 4 + j]" in text and "k" not in text


MISMATCHED_VIEW = """
@T.prim_func
def f(A: T.Buffer((16, 16), "float32")):
    with T.block("b"):
        S = T.match_buffer(A[0:4, 0:4], (2, 8), "float32")
        S[0, 0] = 1.0
"""


def test_mismatched_view_is_refused() -> None:
    func = tir.parse(MISMATCHED_VIEW)
    with pytest.raises(LoweringError, match="match_buffer S .* does not fit the region of A"):
        convert_blocks_to_loops(func)
