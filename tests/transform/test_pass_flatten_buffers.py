"""flatten_buffers: multi-dimensional buffers become 1-D; parameters keep their shapes in attrs."""

from __future__ import annotations

import numpy as np
import pytest
from lowering_programs import PROGRAMS, assert_same_results, lower_before, nodes_of

import tir
from tir.ir import BufferLoad, BufferStore, IntImm, Ramp
from tir.transform import flatten_buffers


def _flatten(func: tir.PrimFunc) -> tir.PrimFunc:
    return flatten_buffers(lower_before(func, "flatten_buffers"))


@pytest.mark.parametrize("name", ["matmul_init", "match_unit_dims", "parallel_cache", "symbolic_param"])
def test_golden(name: str, golden) -> None:
    golden.check(f"transform/flatten_{name}", _flatten(PROGRAMS[name][0]).script())


@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("flat", [False, True], ids=["original_shapes", "flat_arrays"])
def test_same_results(name: str, flat: bool) -> None:
    func, make_args = PROGRAMS[name]
    if flat and name == "symbolic_declared":
        pytest.skip("m is known only from the original (2-D) shape")
    flattened = _flatten(func)
    for node in [*flattened.params, *nodes_of(flattened.body)]:
        if isinstance(node, tir.Buffer):
            assert node.ndim == 1
    assert_same_results(func, flattened, make_args, flat=flat)


def test_param_shapes_attribute() -> None:
    func = PROGRAMS["symbolic_param"][0]
    flattened = _flatten(func)
    shapes = flattened.attrs["param_shapes"]
    assert len(shapes) == 3 and shapes[2] is None
    assert shapes[0] is func.params[0].shape
    assert [p.name for p in flattened.params] == ["A", "B", "n"]


VECTOR_INDICES = """
@T.prim_func
def f(A: T.Buffer((4, 8), "float32"), B: T.Buffer((8, 4), "float32")):
    for i in range(4):
        with T.block("b"):
            vi = T.spatial_axis(4, i)
            B[T.ramp(0, 1, 8), vi] = A[vi, T.ramp(0, 1, 8)]
"""


def test_ramp_indices_stay_ramps(golden) -> None:
    func = tir.parse(VECTOR_INDICES)
    flattened = flatten_buffers(lower_before(func, "flatten_buffers"))
    golden.check("transform/flatten_ramp_indices", flattened.script())
    accesses = [n for n in nodes_of(flattened.body) if isinstance(n, (BufferLoad, BufferStore))]
    ramps = [a.indices[0] for a in accesses]
    assert all(isinstance(r, Ramp) for r in ramps)
    strides = sorted(r.stride.value for r in ramps if isinstance(r.stride, IntImm))
    assert strides == [1, 4]
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    b = np.zeros((8, 4), np.float32)
    tir.interpret(flattened, a.reshape(-1), b.reshape(-1))
    np.testing.assert_array_equal(b, a.T)


STRIDED = """
@T.prim_func
def f(a: T.handle, B: T.Buffer((4, 4), "float32")):
    A = T.match_buffer(a, (4, 4), "float32", strides=(8, 1))
    for i, j in T.grid(4, 4):
        with T.block("b"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj]
"""


def test_explicit_strides() -> None:
    flattened = flatten_buffers(lower_before(tir.parse(STRIDED), "flatten_buffers"))
    assert flattened.params[0].shape[0].value == 3 * 8 + 3 + 1
    assert "A[i * 8 + j]" in flattened.script()
    a = np.arange(32, dtype=np.float32)
    b = np.zeros(16, np.float32)
    tir.interpret(flattened, a[:28], b)
    np.testing.assert_array_equal(b.reshape(4, 4), a.reshape(4, 8)[:, :4])


def test_one_dimensional_buffers_are_kept() -> None:
    func = PROGRAMS["split_predicate"][0]
    lowered = lower_before(func, "flatten_buffers")
    flattened = flatten_buffers(lowered)
    assert flattened.params == lowered.params
    assert flattened.body is lowered.body
