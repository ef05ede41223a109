"""rfactor of tuple reductions (argmax / argmin) and of reduction bodies with let bindings.

TVM's test_tir_schedule_rfactor.py cases re-expressed in our dialect (smaller shapes): the
accepted ones printed against a golden and judged numerically, with inputs full of equal
values so that tie-breaking is exercised; every refused one with the reason we give.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from schedule_testing import check_schedule, run_interp, run_llvm

import tir
import tir.script as T
from tir.ir import PrimFunc
from tir.schedule import Schedule, ScheduleError

RTOL = 1e-4


def tie_args(func: PrimFunc, seed: int = 0, values: int = 3) -> list[Any]:
    """Inputs with many equal values: every buffer holds integers from a few values (floats too),
    except a buffer named ``idx``, which gets distinct, shuffled indices."""
    rng = np.random.default_rng(seed)
    args: list[Any] = []
    for param in func.params:
        shape = param.const_shape()  # type: ignore[union-attr]
        dtype = str(param.dtype)  # type: ignore[union-attr]
        if param.name == "idx":  # type: ignore[union-attr]
            args.append(rng.permutation(int(np.prod(shape))).reshape(shape).astype(dtype))
        else:
            args.append(rng.integers(0, values, size=shape).astype(dtype))
    return args


def check_ties(original: PrimFunc, scheduled: PrimFunc, seeds: int = 4) -> None:
    """The scheduled program gives exactly the original's outputs (indices included) on inputs
    with many ties, in the interpreter and through LLVM."""
    for seed in range(seeds):
        args = tie_args(original, seed)
        expected = run_interp(original, args)
        for got in (run_interp(scheduled, args), run_llvm(scheduled, args)):
            for param, want, have in zip(original.params, expected, got):
                np.testing.assert_array_equal(have, want, err_msg=f"buffer {param.name}, seed {seed}")  # type: ignore[union-attr]


# ---------------------------------------------------------------- TVM's accepted programs


@T.script
def argmax_first(
    idx: T.Buffer((8, 16), "int32"),
    val: T.Buffer((8, 16), "float32"),
    argmax_v0: T.Buffer((8,), "int32"),
    argmax_v1: T.Buffer((8,), "float32"),
):
    # TVM's argmax_split: of equal values the first one met wins (`>=`).
    for i0, i1_0, i1_1 in T.grid(8, 4, 4):
        with T.block("argmax"):
            i = T.spatial_axis(8, i0)
            k = T.reduce_axis(16, i1_0 * 4 + i1_1)
            with T.init():
                argmax_v0[i] = -1
                argmax_v1[i] = T.min_value("float32")
            v_argmax_v0: T.int32 = T.Select(argmax_v1[i] >= val[i, k], argmax_v0[i], idx[i, k])
            v_argmax_v1: T.float32 = T.Select(argmax_v1[i] >= val[i, k], argmax_v1[i], val[i, k])
            argmax_v0[i] = v_argmax_v0
            argmax_v1[i] = v_argmax_v1


@T.script
def argmin_first_reordered(
    idx: T.Buffer((8, 16), "int32"),
    val: T.Buffer((8, 16), "float32"),
    argmin_v0: T.Buffer((8,), "int32"),
    argmin_v1: T.Buffer((8,), "float32"),
):
    # TVM's argmin_split_init_update_reordered: init and stores name the value first.
    for i0, i1_0, i1_1 in T.grid(8, 4, 4):
        with T.block("argmin"):
            i = T.spatial_axis(8, i0)
            k = T.reduce_axis(16, i1_0 * 4 + i1_1)
            with T.init():
                argmin_v1[i] = T.max_value("float32")
                argmin_v0[i] = -1
            v_argmin_v0: T.int32 = T.Select(argmin_v1[i] <= val[i, k], argmin_v0[i], idx[i, k])
            v_argmin_v1: T.float32 = T.Select(argmin_v1[i] <= val[i, k], argmin_v1[i], val[i, k])
            argmin_v1[i] = v_argmin_v1
            argmin_v0[i] = v_argmin_v0


@T.script
def topi_argmax(placeholder: T.Buffer((1, 32), "int32"), placeholder_red: T.Buffer((1,), "int32")):
    # What TVM's te.create_prim_func makes of topi.argmax(A, axis=1): ties keep the smaller index.
    placeholder_red_temp_v0 = T.alloc_buffer((1,), "int32")
    placeholder_red_temp_v1 = T.alloc_buffer((1,), "int32")
    for ax0, k1 in T.grid(1, 32):
        with T.block("placeholder_red_temp"):
            v_ax0, v_k1 = T.remap("SR", ax0, k1)
            with T.init():
                placeholder_red_temp_v0[v_ax0] = -1
                placeholder_red_temp_v1[v_ax0] = -2147483648
            v_placeholder_red_temp_v0: T.int32 = T.Select(
                placeholder_red_temp_v1[v_ax0] > placeholder[v_ax0, v_k1]
                or (
                    placeholder_red_temp_v1[v_ax0] == placeholder[v_ax0, v_k1] and placeholder_red_temp_v0[v_ax0] < v_k1
                ),
                placeholder_red_temp_v0[v_ax0],
                v_k1,
            )
            v_placeholder_red_temp_v1: T.int32 = T.Select(
                placeholder_red_temp_v1[v_ax0] > placeholder[v_ax0, v_k1],
                placeholder_red_temp_v1[v_ax0],
                placeholder[v_ax0, v_k1],
            )
            placeholder_red_temp_v0[v_ax0] = v_placeholder_red_temp_v0
            placeholder_red_temp_v1[v_ax0] = v_placeholder_red_temp_v1
    for ax0 in range(1):
        with T.block("placeholder_red"):
            v_ax0 = T.remap("S", ax0)
            placeholder_red[v_ax0] = placeholder_red_temp_v0[v_ax0]


@T.script
def topi_argmin(placeholder: T.Buffer((1, 32), "int32"), placeholder_red: T.Buffer((1,), "int32")):
    placeholder_red_temp_v0 = T.alloc_buffer((1,), "int32")
    placeholder_red_temp_v1 = T.alloc_buffer((1,), "int32")
    for ax0, k1 in T.grid(1, 32):
        with T.block("placeholder_red_temp"):
            v_ax0, v_k1 = T.remap("SR", ax0, k1)
            with T.init():
                placeholder_red_temp_v0[v_ax0] = -1
                placeholder_red_temp_v1[v_ax0] = 2147483647
            v_placeholder_red_temp_v0: T.int32 = T.Select(
                placeholder_red_temp_v1[v_ax0] < placeholder[v_ax0, v_k1]
                or (
                    placeholder_red_temp_v1[v_ax0] == placeholder[v_ax0, v_k1] and placeholder_red_temp_v0[v_ax0] < v_k1
                ),
                placeholder_red_temp_v0[v_ax0],
                v_k1,
            )
            v_placeholder_red_temp_v1: T.int32 = T.Select(
                placeholder_red_temp_v1[v_ax0] < placeholder[v_ax0, v_k1],
                placeholder_red_temp_v1[v_ax0],
                placeholder[v_ax0, v_k1],
            )
            placeholder_red_temp_v0[v_ax0] = v_placeholder_red_temp_v0
            placeholder_red_temp_v1[v_ax0] = v_placeholder_red_temp_v1
    for ax0 in range(1):
        with T.block("placeholder_red"):
            v_ax0 = T.remap("S", ax0)
            placeholder_red[v_ax0] = placeholder_red_temp_v0[v_ax0]


@T.script
def matmul_with_let(
    A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")
):
    # TVM's transformed_matmul_with_let: the new value is bound to a let, then stored.
    for i0, i1, i2_outer, i2_inner_outer, i2_inner_inner in T.grid(16, 16, 2, 2, 4):
        with T.block("update"):
            vi, vj = T.remap("SS", i0, i1)
            vk = T.reduce_axis(16, i2_outer * 8 + i2_inner_outer * 4 + i2_inner_inner)
            with T.init():
                C[vi, vj] = 0.0
            v_C: T.float32 = C[vi, vj] + A[vi, vk] * B[vj, vk]
            C[vi, vj] = v_C


@T.script
def argmax_smallest_idx(
    idx: T.Buffer((8, 16), "int32"),
    val: T.Buffer((8, 16), "float32"),
    argmax_v0: T.Buffer((8,), "int32"),
    argmax_v1: T.Buffer((8,), "float32"),
):
    # The tie-breaking form over an index buffer: of equal values the smaller idx wins.
    for i0, i1_0, i1_1 in T.grid(8, 4, 4):
        with T.block("argmax"):
            i = T.spatial_axis(8, i0)
            k = T.reduce_axis(16, i1_0 * 4 + i1_1)
            with T.init():
                argmax_v0[i] = -1
                argmax_v1[i] = T.float32("-inf")
            v0: T.int32 = T.Select(
                argmax_v1[i] > val[i, k] or argmax_v1[i] == val[i, k] and argmax_v0[i] < idx[i, k],
                argmax_v0[i],
                idx[i, k],
            )
            v1: T.float32 = T.Select(argmax_v1[i] > val[i, k], argmax_v1[i], val[i, k])
            argmax_v0[i] = v0
            argmax_v1[i] = v1


@T.script
def sum_and_max(A: T.Buffer((8, 16), "float32"), S: T.Buffer((8,), "float32"), M: T.Buffer((8,), "float32")):
    # Two outputs reduced each on its own (TVM knows a pair of sums).
    for i, k in T.grid(8, 16):
        with T.block("R"):
            vi, vk = T.remap("SR", i, k)
            with T.init():
                S[vi] = 0.0
                M[vi] = T.float32("-inf")
            s: T.float32 = S[vi] + A[vi, vk]
            m: T.float32 = T.max(M[vi], A[vi, vk])
            S[vi] = s
            M[vi] = m


def _loops(sch: Schedule, block: str) -> list:  # type: ignore[type-arg]
    return sch.get_loops(sch.get_block(block))


def test_rfactor_argmax_first_maximum_outer_loop(golden) -> None:  # type: ignore[no-untyped-def]
    # TVM's test_reduction_rfactor_argmax factors the inner loop i1_1 (refused below); the outer
    # one keeps the order of the iterations, so ties still go to the first maximum.
    sch = Schedule(argmax_first, debug=True)
    _, ko, _ = _loops(sch, "argmax")
    rf = sch.rfactor(ko, 1)
    assert rf.block_name == "argmax_rf"
    check_schedule(sch, argmax_first, golden, "schedule/rfactor_argmax_first", rtol=RTOL)
    check_ties(argmax_first, sch.func)


def test_rfactor_argmin_first_minimum_init_and_update_reordered(golden) -> None:  # type: ignore[no-untyped-def]
    # TVM's test_reduction_rfactor_argmin_init_update_reordeded, outer loop (see above).
    sch = Schedule(argmin_first_reordered, debug=True)
    _, ko, _ = _loops(sch, "argmin")
    sch.rfactor(ko, 1)
    check_schedule(sch, argmin_first_reordered, golden, "schedule/rfactor_argmin_first_reordered", rtol=RTOL)
    check_ties(argmin_first_reordered, sch.func)


@pytest.mark.parametrize(("func", "name"), [(topi_argmax, "topi_argmax"), (topi_argmin, "topi_argmin")])
def test_rfactor_topi_argmax_and_argmin(func: PrimFunc, name: str, golden) -> None:  # type: ignore[no-untyped-def]
    # TVM's test_reduction_rfactor_topi_argmax / _argmin: split k by 8, factor the inner part.
    sch = Schedule(func, debug=True)
    _, k = _loops(sch, "placeholder_red_temp")
    _, ki = sch.split(k, [None, 8])
    rf = sch.rfactor(ki, 1)
    assert rf.block_name == "placeholder_red_temp_rf"
    check_schedule(sch, func, golden, f"schedule/rfactor_{name}", rtol=RTOL)
    check_ties(func, sch.func, seeds=16)


def test_rfactor_matmul_with_let(golden) -> None:  # type: ignore[no-untyped-def]
    # TVM's test_reduction_rfactor_matmul_with_let.
    sch = Schedule(matmul_with_let, debug=True)
    *_, kii = _loops(sch, "update")
    sch.rfactor(kii, 0)
    check_schedule(sch, matmul_with_let, golden, "schedule/rfactor_matmul_with_let", rtol=RTOL)


@pytest.mark.parametrize("which", [1, 2])
def test_rfactor_tie_breaking_argmax_any_reduce_loop(which: int) -> None:
    # Ties go to the smaller index whatever the order: any reduce loop can be factored.
    sch = Schedule(argmax_smallest_idx, debug=True)
    sch.rfactor(_loops(sch, "argmax")[which], 0)
    tir.assert_structural_equal(tir.parse(sch.func.script()), sch.func)
    check_ties(argmax_smallest_idx, sch.func)


def test_rfactor_independent_outputs_then_parallel() -> None:
    sch = Schedule(sum_and_max, debug=True)
    _, k = _loops(sch, "R")
    k0, _ = sch.split(k, [4, None])
    sch.reorder(k0, _loops(sch, "R")[0])
    sch.rfactor(k0, 0)
    sch.parallel(k0)  # k0 drives a spatial iterator of R_rf
    tir.assert_structural_equal(tir.parse(sch.func.script()), sch.func)
    check_ties(sum_and_max, sch.func)
    args = tie_args(sum_and_max)
    args[0] = np.random.default_rng(1).uniform(-1, 1, size=(8, 16)).astype("float32")
    expected, got = run_interp(sum_and_max, args), run_llvm(sch.func, args)
    np.testing.assert_allclose(got[1], expected[1], rtol=RTOL)
    np.testing.assert_array_equal(got[2], expected[2])


def test_rfactor_argmax_then_vectorize_the_partials() -> None:
    sch = Schedule(topi_argmax, debug=True)
    _, k = _loops(sch, "placeholder_red_temp")
    _, ki = sch.split(k, [None, 8])
    sch.rfactor(ki, 1)
    sch.vectorize(ki)  # ki drives a spatial iterator of the _rf block
    check_ties(topi_argmax, sch.func, seeds=16)


def test_rfactor_argmax_then_decompose_both() -> None:
    sch = Schedule(topi_argmax, debug=True)
    block = sch.get_block("placeholder_red_temp")
    _, k = sch.get_loops(block)
    _, ki = sch.split(k, [None, 8])
    rf = sch.rfactor(ki, 1)
    sch.decompose_reduction(rf, sch.get_loops(rf)[1])
    sch.decompose_reduction(block, sch.get_loops(block)[1])
    check_ties(topi_argmax, sch.func, seeds=16)


# ---------------------------------------------------------------- the order-keeping forms


@T.script
def argmax_first_rfactor_inner(
    idx: T.Buffer((8, 16), "int32"),
    val: T.Buffer((8, 16), "float32"),
    argmax_v0: T.Buffer((8,), "int32"),
    argmax_v1: T.Buffer((8,), "float32"),
):
    # What TVM's rfactor(i1_1, 1) makes of argmax_first (its argmax_split_rfactor).
    argmax_v0_rf = T.alloc_buffer((8, 4), "int32")
    argmax_v1_rf = T.alloc_buffer((8, 4), "float32")
    for i0, i1_0, i1_1 in T.grid(8, 4, 4):
        with T.block("argmax_rf"):
            vi1_1, i, vi1_0 = T.remap("SSR", i1_1, i0, i1_0)
            with T.init():
                argmax_v0_rf[i, vi1_1] = -1
                argmax_v1_rf[i, vi1_1] = T.min_value("float32")
            v0: T.int32 = T.Select(
                argmax_v1_rf[i, vi1_1] >= val[i, vi1_0 * 4 + vi1_1], argmax_v0_rf[i, vi1_1], idx[i, vi1_0 * 4 + vi1_1]
            )
            v1: T.float32 = T.Select(
                argmax_v1_rf[i, vi1_1] >= val[i, vi1_0 * 4 + vi1_1], argmax_v1_rf[i, vi1_1], val[i, vi1_0 * 4 + vi1_1]
            )
            argmax_v0_rf[i, vi1_1] = v0
            argmax_v1_rf[i, vi1_1] = v1
    for i0, i1_1 in T.grid(8, 4):
        with T.block("argmax"):
            vi1_1, i = T.remap("RS", i1_1, i0)
            with T.init():
                argmax_v0[i] = -1
                argmax_v1[i] = T.min_value("float32")
            w0: T.int32 = T.Select(argmax_v1[i] >= argmax_v1_rf[i, vi1_1], argmax_v0[i], argmax_v0_rf[i, vi1_1])
            w1: T.float32 = T.Select(argmax_v1[i] >= argmax_v1_rf[i, vi1_1], argmax_v1[i], argmax_v1_rf[i, vi1_1])
            argmax_v0[i] = w0
            argmax_v1[i] = w1


def test_rfactor_first_maximum_inner_loop_would_change_ties() -> None:
    # Why factoring the inner loop of an order-keeping argmax is refused: TVM's result picks
    # another index when equal maxima sit at k = 2 (k_0 = 0, k_1 = 2) and k = 5 (k_0 = 1, k_1 = 1).
    idx = np.tile(np.arange(16, dtype="int32"), (8, 1))
    val = np.zeros((8, 16), "float32")
    val[:, 2] = val[:, 5] = 1.0
    before = run_interp(argmax_first, [idx, val, np.zeros(8, "int32"), np.zeros(8, "float32")])
    tvm = run_interp(argmax_first_rfactor_inner, [idx, val, np.zeros(8, "int32"), np.zeros(8, "float32")])
    assert (before[2] == 2).all() and (tvm[2] == 5).all()
    with pytest.raises(AssertionError, match="buffer argmax_v0"):
        check_ties(argmax_first, argmax_first_rfactor_inner)  # the tie inputs catch it too
    sch = Schedule(argmax_first)
    with pytest.raises(ScheduleError, match="factor the outermost reduce loop i1_0"):
        sch.rfactor(_loops(sch, "argmax")[2], 1)


@T.script
def argmax_first_unit_outer(
    idx: T.Buffer((8, 16), "int32"),
    val: T.Buffer((8, 16), "float32"),
    argmax_v0: T.Buffer((8,), "int32"),
    argmax_v1: T.Buffer((8,), "float32"),
):
    for i0, k0, k1 in T.grid(8, 1, 16):
        with T.block("argmax"):
            i = T.spatial_axis(8, i0)
            k = T.reduce_axis(16, k0 * 16 + k1)
            with T.init():
                argmax_v0[i] = -1
                argmax_v1[i] = T.min_value("float32")
            v0: T.int32 = T.Select(argmax_v1[i] >= val[i, k], argmax_v0[i], idx[i, k])
            v1: T.float32 = T.Select(argmax_v1[i] >= val[i, k], argmax_v1[i], val[i, k])
            argmax_v0[i] = v0
            argmax_v1[i] = v1


def test_rfactor_first_maximum_inside_a_unit_reduce_loop() -> None:
    # A reduce loop of one iteration outside keeps the order: still accepted.
    sch = Schedule(argmax_first_unit_outer, debug=True)
    sch.rfactor(_loops(sch, "argmax")[2], 0)
    check_ties(argmax_first_unit_outer, sch.func)


@pytest.mark.parametrize(("func", "block"), [(argmax_first, "argmax"), (argmin_first_reordered, "argmin")])
def test_rfactor_refuses_the_inner_loop_of_an_order_keeping_form(func: PrimFunc, block: str) -> None:
    # TVM's test_reduction_rfactor_argmax / _argmin_init_update_reordeded, as TVM writes them.
    sch = Schedule(func)
    with pytest.raises(
        ScheduleError, match=r"rfactor: loop i1_1: block '\w+' is an arg(max|min) keeping the first (maximum|minimum)"
    ):
        sch.rfactor(_loops(sch, block)[2], 1)
    assert tir.structural_equal(sch.func, func)


# ---------------------------------------------------------------- TVM's refused programs

_TEMPLATE = """
@T.script
def variant(idx: T.Buffer((8, 16), "int32"), val: T.Buffer((8, 16), "{val}"),
            argmax_v0: T.Buffer(({n0},), "int32"), argmax_v1: T.Buffer((8,), "{val}"){extra}):
    for i0, i1_0, i1_1 in T.grid(8, 4, 4):
        with T.block("argmax"):
            i = T.spatial_axis(8, i0)
            k = T.reduce_axis(16, i1_0 * 4 + i1_1)
            with T.init():
{init}
{body}
"""

_INIT = """\
argmax_v0[i] = -1
argmax_v1[i] = T.min_value("{val}")"""

_LETS = """\
v_argmax_v0: T.int32 = T.Select(argmax_v1[i] >= val[i, k], argmax_v0[i], idx[i, k])
v_argmax_v1: T.{val} = T.Select(argmax_v1[i] >= val[i, k], argmax_v1[i], val[i, k])"""

_STORES = """\
argmax_v0[i] = v_argmax_v0
argmax_v1[i] = v_argmax_v1"""


def _variant(
    init: str = _INIT,
    body: str = _LETS + "\n" + _STORES,
    val: str = "float32",
    n0: int = 8,
    extra: str = "",
) -> PrimFunc:
    """TVM's argmax_split with the init or body replaced (the TVM negative cases)."""

    def indent(text: str, spaces: int) -> str:
        return "\n".join(" " * spaces + line for line in text.format(val=val).splitlines())

    source = _TEMPLATE.format(val=val, n0=n0, extra=extra, init=indent(init, 16), body=indent(body, 12))
    func = tir.parse(source)
    assert isinstance(func, PrimFunc)
    return func


NEGATIVE: list[tuple[str, Callable[[], PrimFunc], str]] = [
    (
        "reduction_buffer_different_shape",
        lambda: _variant(n0=16),
        r"the outputs argmax_v0 \(16,\) and argmax_v1 \(8,\) have different shapes",
    ),
    (
        "different_access_indices",
        lambda: _variant(
            init='argmax_v0[i] = -1\nargmax_v1[i + 1] = T.min_value("float32")',
            body=_LETS + "\nargmax_v0[i] = v_argmax_v0\nargmax_v1[i + 1] = v_argmax_v1",
        ),
        r"argmax_v1\[i \+ 1\] and argmax_v0\[i\] are at different indices",
    ),
    (
        "init_not_bufferstore",
        lambda: _variant(init='argmax_v0[i] = -1\nv1_init: T.float32 = T.min_value("float32")\nargmax_v1[i] = v1_init'),
        r"the init must be buffer stores, one per output",
    ),
    (
        "init_buffer_duplicate",
        lambda: _variant(init="argmax_v0[i] = -1\nargmax_v0[i] = -1"),
        "the init stores to argmax_v0 twice",
    ),
    (
        "bind_fewer_than_init",
        lambda: _variant(
            body=_LETS.splitlines()[0]
            + "\nargmax_v0[i] = v_argmax_v0"
            + "\nargmax_v1[i] = T.Select(argmax_v1[i] >= val[i, k], argmax_v1[i], val[i, k])"
        ),
        r"the body binds 1 let variable\(s\) for 2 init store\(s\)",
    ),
    (
        "bind_more_than_init",
        lambda: _variant(init="argmax_v0[i] = -1"),
        r"the body binds 2 let variable\(s\) for 1 init store\(s\)",
    ),
    (
        "let_body_neither_seqstmt_nor_bufferstore",
        lambda: _variant(body=_LETS + "\nT.evaluate(0)"),
        r"after its lets the body must be buffer stores only; found `T.evaluate\(0\)`",
    ),
    (
        "init_update_inconsistent_bufferstore_number",
        lambda: _variant(body=_LETS + "\n" + _STORES + "\nargmax_v1[i] = v_argmax_v1"),
        r"the body stores 3 times for 2 init store\(s\)",
    ),
    (
        "body_seq_not_bufferstore",
        lambda: _variant(body=_LETS + "\nargmax_v0[i] = v_argmax_v0\nT.evaluate(0)"),
        r"after its lets the body must be buffer stores only; found `T.evaluate\(0\)`",
    ),
    (
        "body_bufferstore_value_not_var",
        lambda: _variant(
            body=_LETS
            + "\nargmax_v0[i] = T.Select(argmax_v1[i] >= val[i, k], argmax_v0[i], idx[i, k])"
            + "\nargmax_v1[i] = v_argmax_v1"
        ),
        r"each store must store one of the let variables \['v_argmax_v0', 'v_argmax_v1'\]",
    ),
    (
        # TVM's program stores a variable bound nowhere; here a scalar parameter, bound but not
        # by a let of the body.
        "body_bufferstore_value_unbound_var",
        lambda: _variant(
            body=_LETS + "\nargmax_v0[i] = v_unbound\nargmax_v1[i] = v_argmax_v1", extra=", v_unbound: T.int32"
        ),
        "the body stores v_unbound to argmax_v0; each store must store one of the let variables",
    ),
    (
        "one_let_var_used_multi_times",
        lambda: _variant(val="int32", body=_LETS + "\nargmax_v0[i] = v_argmax_v0\nargmax_v1[i] = v_argmax_v0"),
        "the body stores the let variable v_argmax_v0 twice",
    ),
    (
        "body_one_buffer_updated_multi_times",
        lambda: _variant(val="int32", body=_LETS + "\nargmax_v0[i] = v_argmax_v0\nargmax_v0[i] = v_argmax_v1"),
        "the body stores to argmax_v0 twice",
    ),
    (
        "init_buffer_not_match",
        lambda: _variant(
            init='argmax_v0_1[i] = -1\nargmax_v1[i] = T.min_value("float32")',
            extra=", argmax_v0_1: T.Buffer((8,), 'int32')",
        ),
        r"the body stores to argmax_v0, which the init does not store to \(it stores to \['argmax_v0_1', 'argmax_v1'\]\)",
    ),
]


@pytest.mark.parametrize("case", NEGATIVE, ids=[c[0] for c in NEGATIVE])
def test_rfactor_refuses_tvm_argmax_cases(case: tuple[str, Callable[[], PrimFunc], str]) -> None:
    # TVM's test_reduction_rfactor_argmax_<name>; we factor the outer loop, which the well-formed
    # argmax accepts, so the refusal is for the form alone.
    _, make, message = case
    func = make()
    sch = Schedule(func)
    with pytest.raises(ScheduleError, match=r"rfactor: block 'argmax': .*" + message):
        sch.rfactor(_loops(sch, "argmax")[1], 1)
    assert tir.structural_equal(sch.func, func)


def test_the_tvm_template_itself_is_accepted() -> None:
    func = _variant()
    sch = Schedule(func, debug=True)
    sch.rfactor(_loops(sch, "argmax")[1], 1)
    check_ties(func, sch.func)


# ---------------------------------------------------------------- combiners we do not know

OTHER: list[tuple[str, Callable[[], PrimFunc], str]] = [
    (
        "argmax init is not (-1, lowest)",
        lambda: _variant(init="argmax_v0[i] = -1\nargmax_v1[i] = T.float32(0)"),
        r"the init values \(argmax_v0, argmax_v1\) = \(-1, 0.0\) are not the identity of argmax keeping the first "
        r"maximum \(`>=`\) \(expected \(-1, ",
    ),
    (
        "argmax index init is not -1",
        lambda: _variant(init='argmax_v0[i] = 0\nargmax_v1[i] = T.min_value("float32")'),
        r"are not the identity of argmax keeping the first maximum",
    ),
    (
        "last maximum (`<` instead of `>=`) is not a known combiner",
        lambda: _variant(
            body="v_argmax_v0: T.int32 = T.Select(argmax_v1[i] < val[i, k], idx[i, k], argmax_v0[i])\n"
            "v_argmax_v1: T.float32 = T.Select(argmax_v1[i] < val[i, k], val[i, k], argmax_v1[i])\n" + _STORES
        ),
        r"the new value of argmax_v0 reads argmax_v1, and the update is not one of the tuple combiners",
    ),
    (
        "selects on different conditions",
        lambda: _variant(
            body="v_argmax_v0: T.int32 = T.Select(argmax_v1[i] > val[i, k], argmax_v0[i], idx[i, k])\n"
            "v_argmax_v1: T.float32 = T.Select(argmax_v1[i] >= val[i, k], argmax_v1[i], val[i, k])\n" + _STORES
        ),
        r"the new value of argmax_v0 reads argmax_v1",
    ),
    (
        "operand reads an output",
        lambda: _variant(
            body="v_argmax_v0: T.int32 = T.Select(argmax_v1[i] >= val[i, k], argmax_v0[i], argmax_v0[i] + 1)\n"
            "v_argmax_v1: T.float32 = T.Select(argmax_v1[i] >= val[i, k], argmax_v1[i], val[i, k])\n" + _STORES
        ),
        r"the new value of argmax_v0 reads argmax_v1",
    ),
    (
        "a let uses another let",
        lambda: _variant(
            body=_LETS.splitlines()[0]
            + "\nv_argmax_v1: T.float32 = T.Select(v_argmax_v0 >= 0, argmax_v1[i], val[i, k])\n"
            + _STORES
        ),
        r"the value bound to v_argmax_v1 uses the let variable\(s\) \['v_argmax_v0'\]",
    ),
    (
        "independent outputs, one not a reduction",
        lambda: _variant(
            init="argmax_v0[i] = 0\nargmax_v1[i] = T.float32(0)",
            body="v_argmax_v0: T.int32 = argmax_v0[i] + idx[i, k]\nv_argmax_v1: T.float32 = val[i, k] - argmax_v1[i]\n"
            + _STORES,
        ),
        r"output argmax_v1: the body must be of the form `argmax_v1\[...\] = argmax_v1\[...\] op e`",
    ),
]


@pytest.mark.parametrize("case", OTHER, ids=[c[0] for c in OTHER])
def test_rfactor_refuses_unknown_tuple_combiners(case: tuple[str, Callable[[], PrimFunc], str]) -> None:
    _, make, message = case
    func = make()
    sch = Schedule(func)
    with pytest.raises(ScheduleError, match=message):
        sch.rfactor(_loops(sch, "argmax")[1], 1)
    assert tir.structural_equal(sch.func, func)


def test_tvm_spelling_of_the_argmax_parses_to_ours() -> None:
    # TVM 0.27 prints let bindings as `v: T.let[T.int32] = ...`: the alias layer reads them.
    tvm_text = """
@T.prim_func(s_tir=True)
def argmax_first(
    idx: T.Buffer((8, 16), "int32"),
    val: T.Buffer((8, 16), "float32"),
    argmax_v0: T.Buffer((8,), "int32"),
    argmax_v1: T.Buffer((8,), "float32"),
) -> None:
    for i0, i1_0, i1_1 in T.grid(8, 4, 4):
        with T.sblock("argmax"):
            i = T.axis.spatial(8, i0)
            k = T.axis.reduce(16, i1_0 * 4 + i1_1)
            T.reads(idx[i, k], val[i, k])
            T.writes(argmax_v0[i], argmax_v1[i])
            with T.init():
                argmax_v0[i] = -1
                argmax_v1[i] = T.min_value("float32")
            v_argmax_v0: T.let[T.int32] = T.Select(argmax_v1[i] >= val[i, k], argmax_v0[i], idx[i, k])
            v_argmax_v1: T.let[T.float32] = T.Select(argmax_v1[i] >= val[i, k], argmax_v1[i], val[i, k])
            argmax_v0[i] = v_argmax_v0
            argmax_v1[i] = v_argmax_v1
"""
    parsed = tir.parse(tvm_text)
    assert isinstance(parsed, PrimFunc)
    ours = Schedule(argmax_first)
    theirs = Schedule(parsed)
    for sch in (ours, theirs):
        sch.rfactor(_loops(sch, "argmax")[1], 1)
    tir.assert_structural_equal(theirs.func, ours.func)
