"""tir.build of programs with shape variables: one module, every size (issue 18, part 1).

Shape variables (``n = T.int32()`` with ``T.match_buffer(a, (n, 64))``) become trailing scalar
parameters of the lowered program (``tir.transform.bind_shape_vars``); the runtime fills them
from the arrays' shapes and refuses arrays that disagree.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import tir
import tir.script as T
from tir.transform import LoweringError, lower

SIZES = (1, 7, 16, 129)


@T.script
def add_one(a: T.handle, b: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n, 64), "float32")
    B = T.match_buffer(b, (n, 64), "float32")
    for i, j in T.grid(n, 64):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] + 1.0


@T.script
def matmul(a: T.handle, b: T.handle, c: T.handle):
    m = T.int32()
    n = T.int32()
    A = T.match_buffer(a, (m, 24), "float32")
    B = T.match_buffer(b, (24, n), "float32")
    C = T.match_buffer(c, (m, n), "float32")
    for i, j, k in T.grid(m, n, 24):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]


@T.script
def scale_declared(A: T.Buffer((n,), "float32"), B: T.Buffer((n,), "float32")):  # noqa: F821
    n = T.int32()
    for i in range(n):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi] * 2.0


@T.script
def with_scalar(a: T.handle, b: T.handle, n: T.int32):
    A = T.match_buffer(a, (n, 4), "float32")
    B = T.match_buffer(b, (n, 4), "float32")
    for i, j in T.grid(n, 4):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = A[vi, vj] - 1.0


@T.script
def compound_only(a: T.handle, b: T.handle):
    n = T.int32()
    A = T.match_buffer(a, (n * 2,), "float32")
    B = T.match_buffer(b, (n * 2,), "float32")
    for i in range(n * 2):
        with T.block("B"):
            vi = T.remap("S", i)
            B[vi] = A[vi]


def _rand(*shape: int) -> np.ndarray:
    return np.random.default_rng(sum(shape)).standard_normal(shape).astype("float32")


def test_elementwise_one_build_every_size() -> None:
    module = tir.build(add_one)
    for n in SIZES:
        a = _rand(n, 64)
        b = np.zeros_like(a)
        module(a, b)
        np.testing.assert_allclose(b, a + 1.0, rtol=1e-6)
    assert "n: int32" not in repr(module) and "float32[n, 64]" in repr(module)


def test_lowered_program_takes_shape_variables_as_trailing_parameters() -> None:
    lowered = lower(add_one)["add_one"]
    assert [p.name for p in lowered.params] == ["A", "B", "n"]
    assert lowered.attrs["shape_vars"] == ("n",)
    a = _rand(5, 64)
    b = np.zeros_like(a)
    tir.interpret(lowered, a, b)  # the interpreter binds it from the arrays too
    np.testing.assert_allclose(b, a + 1.0, rtol=1e-6)


@pytest.mark.parametrize("schedule", ["none", "parallel_vectorize", "split_parallel_vectorize"])
def test_matmul_two_symbolic_dims(schedule: str) -> None:
    sch = tir.Schedule(matmul, debug=True)
    i, j, k = sch.get_loops(sch.get_block("C"))
    if schedule == "parallel_vectorize":
        sch.parallel(i)
    elif schedule == "split_parallel_vectorize":
        i0, i1 = sch.split(i, [None, 4])
        j0, j1 = sch.split(j, [None, 8])
        sch.reorder(i0, j0, k, i1, j1)
        sch.parallel(i0)
        sch.vectorize(j1)
    module = tir.build(sch.mod)
    for m, n in [(1, 1), (3, 8), (7, 13), (16, 32), (5, 17)]:
        a, b = _rand(m, 24), _rand(24, n)
        c = np.full((m, n), np.nan, "float32")
        module(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
        expected = np.full((m, n), np.nan, "float32")
        tir.interpret(sch.mod, a, b, expected)
        np.testing.assert_allclose(expected, a @ b, rtol=1e-4, atol=1e-4)


def test_buffer_parameter_with_a_declared_variable() -> None:
    module = tir.build(scale_declared)
    for n in SIZES:
        a = _rand(n)
        b = np.zeros_like(a)
        module(a, b)
        np.testing.assert_allclose(b, a * 2.0)


def test_scalar_parameter_stays_a_parameter() -> None:
    module = tir.build(with_scalar)
    a = _rand(6, 4)
    b = np.zeros_like(a)
    module(a, b, 6)
    np.testing.assert_allclose(b, a - 1.0)
    with pytest.raises(ValueError, match="expected shape"):
        module(a, b, 5)


def test_disagreeing_arrays_name_the_variable_and_both_sources() -> None:
    module = tir.build(add_one)
    with pytest.raises(ValueError, match=r"shape variable n is 3 from A \(3, 64\) but 4 from B \(4, 64\)"):
        module(np.zeros((3, 64), "float32"), np.zeros((4, 64), "float32"))
    mm = tir.build(matmul)
    with pytest.raises(ValueError, match=r"shape variable n is 5 from B \(24, 5\) but 6 from C \(2, 6\)"):
        mm(np.zeros((2, 24), "float32"), np.zeros((24, 5), "float32"), np.zeros((2, 6), "float32"))
    with pytest.raises(ValueError, match=r"expected shape \(2, 24\)|shape variable m"):
        mm(np.zeros((2, 23), "float32"), np.zeros((24, 5), "float32"), np.zeros((2, 5), "float32"))
    with pytest.raises(TypeError, match=r"takes 2 arguments \(A, B\), 3 given"):
        module(np.zeros((3, 64), "float32"), np.zeros((3, 64), "float32"), 3)
    with pytest.raises(ValueError, match="2 dimensions"):
        module(np.zeros((3,), "float32"), np.zeros((3, 64), "float32"))


def test_empty_arrays_run() -> None:
    module = tir.build(add_one)
    a = np.zeros((0, 64), "float32")
    module(a, a.copy())


def test_variable_only_inside_an_expression_is_refused_at_build() -> None:
    with pytest.raises(LoweringError, match=r"shape variable n appears only inside an expression of A's shape"):
        tir.build(compound_only)


def test_time_and_export_library(tmp_path) -> None:
    module = tir.build(add_one)
    a = _rand(33, 64)
    b = np.zeros_like(a)
    assert module.time(a, b, repeat=2) > 0
    path = module.export_library(tmp_path / "libadd.so")
    library = ctypes.CDLL(path)
    # The exported ABI: args[i] for each parameter, then a pointer to each shape variable's value.
    n = np.array(33, dtype=np.int32)
    args = (ctypes.c_void_p * 3)(a.ctypes.data, b.ctypes.data, n.ctypes.data)
    b[:] = 0
    assert library.add_one(args) == 0
    np.testing.assert_allclose(b, a + 1.0)
