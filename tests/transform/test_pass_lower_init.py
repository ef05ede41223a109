"""lower_init: T.init becomes a guarded statement before the block body."""

from __future__ import annotations

import pytest
from lowering_programs import PROGRAMS, assert_same_results, nodes_of

import tir
from tir.ir import EQ, And, IfThenElse
from tir.transform import lower_init
from tir.transform.lower_init import init_guard


@pytest.mark.parametrize("name", ["matmul_init", "two_reduce_axes", "init_spatial_only"])
def test_golden(name: str, golden) -> None:
    func, _ = PROGRAMS[name]
    golden.check(f"transform/lower_init_{name}", lower_init(func).script())


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_same_results(name: str) -> None:
    func, make_args = PROGRAMS[name]
    lowered = lower_init(func)
    assert not any(isinstance(n, tir.Block) and n.init is not None for n in nodes_of(lowered.body))
    assert_same_results(func, lowered, make_args)


def test_guard_compares_every_reduce_iterator() -> None:
    func, _ = PROGRAMS["two_reduce_axes"]
    block = next(n for n in nodes_of(func.body) if isinstance(n, tir.Block) and n.name == "B")
    guard = init_guard(block)
    assert isinstance(guard, And) and isinstance(guard.a, EQ) and isinstance(guard.b, EQ)
    lowered_block = next(n for n in nodes_of(lower_init(func).body) if isinstance(n, tir.Block) and n.name == "B")
    first = lowered_block.body.stmts[0]
    assert isinstance(first, IfThenElse) and first.condition is not None


def test_without_reduce_iterators_init_runs_every_time() -> None:
    func, _ = PROGRAMS["init_spatial_only"]
    block = next(n for n in nodes_of(lower_init(func).body) if isinstance(n, tir.Block) and n.name == "B")
    assert not any(isinstance(n, IfThenElse) for n in nodes_of(block.body))


def test_nothing_to_do_keeps_the_function() -> None:
    func, _ = PROGRAMS["split_predicate"]
    assert lower_init(func) is func
