"""Checks every schedule-primitive test runs: golden text, numerics, trace replay.

    sch = tir.Schedule(func)
    ...primitives...
    check_schedule(sch, func, golden, "schedule/split_basic")

``check_schedule`` compares the printed result with ``tests/golden/<name>.txt`` (before and after
are both in the snapshot), re-parses the printed result, runs the scheduled program against the
original in the interpreter and through the LLVM backend on random inputs, and replays the trace
(directly and through JSON) on a fresh schedule, expecting a structurally equal program.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import tir
from tir.ir import Buffer, PrimFunc, Var
from tir.schedule import Schedule, Trace


def random_args(func: PrimFunc, seed: int = 0) -> list[Any]:
    """Random inputs for every parameter (buffers filled, scalars small positive ints)."""
    rng = np.random.default_rng(seed)
    args: list[Any] = []
    for param in func.params:
        if isinstance(param, Var):
            args.append(4)
            continue
        assert isinstance(param, Buffer)
        shape = param.const_shape()
        assert shape is not None, f"buffer {param.name} has a symbolic shape; pass args explicitly"
        dtype = str(param.dtype)
        if param.dtype.is_float:
            args.append(rng.uniform(-1.0, 1.0, size=shape).astype(dtype))
        elif param.dtype.is_bool:
            args.append(rng.integers(0, 2, size=shape).astype(bool))
        else:
            lo, hi = (-8, 8) if param.dtype.is_int else (0, 16)
            args.append(rng.integers(lo, hi, size=shape).astype(dtype))
    return args


def run_interp(func: PrimFunc, args: list[Any]) -> list[Any]:
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    tir.interpret(func, *copies)
    return copies


def run_llvm(func: PrimFunc, args: list[Any]) -> list[Any]:
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    tir.build(func, "llvm")(*copies)
    return copies


def assert_same_outputs(expected: list[Any], actual: list[Any], func: PrimFunc, rtol: float = 1e-5) -> None:
    for param, want, got in zip(func.params, expected, actual):
        if isinstance(want, np.ndarray):
            if want.dtype.kind == "f":
                np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol, err_msg=f"buffer {param.name}")
            else:
                np.testing.assert_array_equal(got, want, err_msg=f"buffer {param.name}")


def check_numerics(original: PrimFunc, scheduled: PrimFunc, llvm: bool = True, rtol: float = 1e-5) -> None:
    """The scheduled program computes what the original computes (interpreter, then LLVM)."""
    args = random_args(original)
    expected = run_interp(original, args)
    assert_same_outputs(expected, run_interp(scheduled, args), original, rtol)
    if llvm:
        assert_same_outputs(expected, run_llvm(scheduled, args), original, rtol)


def check_replay(sch: Schedule, original: PrimFunc) -> None:
    """The trace replays to the same program, directly and through JSON."""
    fresh = Schedule(original)
    sch.trace.apply_to(fresh)
    tir.assert_structural_equal(fresh.func, sch.func)
    again = Schedule(original)
    Trace.from_json(sch.trace.to_json()).apply_to(again)
    tir.assert_structural_equal(again.func, sch.func)


def check_schedule(
    sch: Schedule, original: PrimFunc, golden: Any, name: str, llvm: bool = True, rtol: float = 1e-5
) -> None:
    """Golden before/after, round trip of the printed result, numerics, trace replay."""
    text = sch.func.script()
    golden.check(name, f"# before\n{original.script()}\n# after\n{text}\n# trace\n{sch.trace.as_python()}")
    tir.assert_structural_equal(tir.parse(text), sch.func)
    check_numerics(original, sch.func, llvm=llvm, rtol=rtol)
    check_replay(sch, original)
