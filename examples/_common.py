"""The harness every example shares: make inputs, run the interpreter, compare with numpy.

Each example module defines

- its kernel, a ``@T.script`` function, also bound to the module name ``KERNEL``;
- ``make_args(rng) -> list[np.ndarray]``: one array per buffer parameter, in parameter order
  (inputs random, outputs zeros);
- ``reference(*args) -> dict[str, np.ndarray]``: the expected outputs by parameter name,
  computed with numpy alone;
- ``ATOL``: the largest absolute error accepted;
- ``main()``, which calls :func:`run_example`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import tir

#: Every example draws its inputs from this seed, so runs are reproducible.
SEED = 0

MakeArgs = Callable[[np.random.Generator], list[np.ndarray]]
Reference = Callable[..., dict[str, np.ndarray]]


def check_args(func: tir.PrimFunc, args: list[np.ndarray]) -> None:
    """Raise ``ValueError`` unless ``args`` match the buffer parameters of ``func``."""
    buffers = func.buffer_params
    if len(args) != len(buffers):
        raise ValueError(f"{func.name} takes {len(buffers)} buffers, got {len(args)} arrays")
    for buffer, array in zip(buffers, args):
        shape = buffer.const_shape()
        if shape is not None and tuple(array.shape) != shape:
            raise ValueError(f"{func.name}: {buffer.name} has shape {shape}, the array {array.shape}")
        if np.dtype(str(buffer.dtype)) != array.dtype:
            raise ValueError(f"{func.name}: {buffer.name} is {buffer.dtype}, the array {array.dtype}")


def max_abs_error(func: tir.PrimFunc, args: list[np.ndarray], expected: dict[str, np.ndarray]) -> float:
    """The largest absolute difference between the output arrays in ``args`` and ``expected``."""
    by_name = {buffer.name: array for buffer, array in zip(func.buffer_params, args)}
    worst = 0.0
    for name, want in expected.items():
        got = by_name[name]
        if got.shape != want.shape:
            raise AssertionError(f"{func.name}: output {name} has shape {got.shape}, expected {want.shape}")
        diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
        if diff.size and not np.all(np.isfinite(diff)):
            return float("inf")
        worst = max(worst, float(diff.max(initial=0.0)))
    return worst


def run_and_check(
    func: tir.PrimFunc, make_args: MakeArgs, reference: Reference, atol: float, seed: int = SEED
) -> float:
    """Interpret ``func`` on fresh arguments; return the max abs error, raise if it exceeds ``atol``."""
    args = make_args(np.random.default_rng(seed))
    check_args(func, args)
    # The reference gets its own copies: it must not see what the interpreter wrote.
    expected = reference(*[array.copy() for array in args])
    tir.interpret(func, *args)
    error = max_abs_error(func, args, expected)
    if not error <= atol:
        raise AssertionError(f"{func.name}: max abs error {error:.3g} exceeds the tolerance {atol:g}")
    return error


def run_example(func: tir.PrimFunc, make_args: MakeArgs, reference: Reference, atol: float) -> None:
    """What ``python examples/<name>.py`` does: print the program, run it, report the error."""
    print(func.script())
    error = run_and_check(func, make_args, reference, atol)
    print(f"{func.name}: interpreter matches numpy (max abs error {error:.2g})")
