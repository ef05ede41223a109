"""vectorize_loops: vectorized loops become Ramp / Broadcast expressions, or fall back to serial."""

from __future__ import annotations

import pytest
from lowering_programs import PROGRAMS, assert_same_results, lower_before, nodes_of

import tir
from tir.ir import Broadcast, BufferLoad, BufferStore, For, ForKind, Ramp
from tir.target import Target
from tir.transform import vectorize_loops
from tir.transform.vectorize import MAX_LANES


def _vectorize(func: tir.PrimFunc) -> tir.PrimFunc:
    return vectorize_loops(lower_before(func, "vectorize_loops"))


def _loops(func: tir.PrimFunc) -> list[For]:
    return [n for n in nodes_of(func.body) if isinstance(n, For)]


def _vector_stores(func: tir.PrimFunc) -> list[BufferStore]:
    return [n for n in nodes_of(func.body) if isinstance(n, BufferStore) and isinstance(n.indices[0], Ramp)]


@pytest.mark.parametrize("name", ["elementwise_vec", "select_vec", "parallel_cache", "symbolic_param"])
def test_vectorized_golden(name: str, golden) -> None:
    vectorized = _vectorize(PROGRAMS[name][0])
    assert not any(loop.kind is ForKind.VECTORIZED for loop in _loops(vectorized))
    assert _vector_stores(vectorized)
    golden.check(f"transform/vectorize_{name}", vectorized.script())


@pytest.mark.parametrize("name", ["reduce_vec_fallback", "cond_vec_fallback", "shifted_vec_fallback"])
def test_fallback_to_serial(name: str) -> None:
    before = lower_before(PROGRAMS[name][0], "vectorize_loops")
    vectorized = vectorize_loops(before)
    assert not _vector_stores(vectorized)
    assert not any(loop.kind is ForKind.VECTORIZED for loop in _loops(vectorized))
    # The fallback keeps the body as it was.
    old = [loop for loop in _loops(before) if loop.kind is ForKind.VECTORIZED]
    new = [loop for loop in _loops(vectorized) if loop.loop_var is old[0].loop_var]
    assert new[0].kind is ForKind.SERIAL and new[0].body is old[0].body


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_same_results(name: str) -> None:
    func, make_args = PROGRAMS[name]
    assert_same_results(func, _vectorize(func), make_args)


def test_scalars_broadcast_and_loads_become_vector_loads() -> None:
    vectorized = _vectorize(PROGRAMS["elementwise_vec"][0])
    (store,) = _vector_stores(vectorized)
    assert store.value.dtype.lanes == 8
    nodes = nodes_of(store.value)
    assert any(isinstance(n, BufferLoad) and isinstance(n.indices[0], Ramp) for n in nodes)
    assert any(isinstance(n, Broadcast) and isinstance(n.value, BufferLoad) for n in nodes)


NESTED_LOOP = """
@T.prim_func
def f(A: T.Buffer((8, 4), "float32")):
    for i in T.vectorized(8):
        for j in range(4):
            A[i, j] = 1.0
"""

LET_IN_BODY = """
@T.prim_func
def f(A: T.Buffer((8,), "float32")):
    for i in T.vectorized(8):
        x = A[i] * 2.0
        A[i] = x
"""

EXTERN_CALL = """
@T.prim_func
def f(A: T.Buffer((8,), "float32")):
    for i in T.vectorized(8):
        A[i] = T.call_extern("float32", "expf", A[i])
"""

NONLINEAR_INDEX = """
@T.prim_func
def f(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in T.vectorized(8):
        B[i] = A[i // 2]
"""

TOO_WIDE = f"""
@T.prim_func
def f(A: T.Buffer(({2 * MAX_LANES},), "float32")):
    for i in T.vectorized({2 * MAX_LANES}):
        A[i] = 0.0
"""

IF_ON_LOOP_VAR = """
@T.prim_func
def f(A: T.Buffer((16,), "float32")):
    for i in T.vectorized(16):
        if i < 8:
            A[i] = 0.0
"""


@pytest.mark.parametrize(
    "source", [NESTED_LOOP, LET_IN_BODY, EXTERN_CALL, NONLINEAR_INDEX, TOO_WIDE, IF_ON_LOOP_VAR],
    ids=["nested_loop", "let", "extern_call", "nonlinear_index", "too_wide", "if_on_loop_var"],
)
def test_more_fallbacks(source: str) -> None:
    func = convert_and_flatten(source)
    vectorized = vectorize_loops(func)
    assert not _vector_stores(vectorized)
    assert all(loop.kind is ForKind.SERIAL for loop in _loops(vectorized))


INVARIANT_CONDITION = """
@T.prim_func
def f(A: T.Buffer((4, 8), "float32"), n: T.int32):
    for i in range(4):
        for j in T.vectorized(8):
            if i < n:
                A[i, j] = A[i, j] + T.cast(n, "float32")
"""


def test_invariant_condition_is_kept(golden) -> None:
    vectorized = vectorize_loops(convert_and_flatten(INVARIANT_CONDITION), target=Target.parse("llvm"))
    assert _vector_stores(vectorized)
    golden.check("transform/vectorize_invariant_condition", vectorized.script())


def convert_and_flatten(source: str) -> tir.PrimFunc:
    return lower_before(tir.parse(source), "vectorize_loops")
