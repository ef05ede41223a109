"""Small kernels and checks the code-generation tests share.

``elementwise(...)`` builds ``Out[i] = compute(In0[i], In1[i], ...)`` directly as IR (no blocks), as
a serial or vectorized loop; ``run_llvm`` / ``run_interp`` run a function on copies of the
arguments and return them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import tir
from tir.ir import Buffer, BufferLoad, BufferStore, For, ForKind, IntImm, PrimExpr, PrimFunc, Var


def elementwise(
    name: str,
    n: int,
    in_dtypes: Sequence[str],
    compute: Callable[..., PrimExpr],
    kind: ForKind = ForKind.SERIAL,
    out_dtype: str | None = None,
) -> PrimFunc:
    """``Out[i] = compute(In0[i], ...)`` for ``i`` in ``range(n)``, the loop of ``kind``."""
    ins = [Buffer(f"In{k}", (n,), dtype) for k, dtype in enumerate(in_dtypes)]
    i = Var("i")
    value = compute(*[BufferLoad(buffer, (i,)) for buffer in ins])
    out = Buffer("Out", (n,), out_dtype or str(value.dtype))
    loop = For(i, IntImm(0), IntImm(n), kind, BufferStore(out, value, (i,)))
    return PrimFunc(name, (*ins, out), loop)


def copies(args: Sequence[Any]) -> list[Any]:
    return [arg.copy() if isinstance(arg, np.ndarray) else arg for arg in args]


def run_llvm(func: PrimFunc, args: Sequence[Any], target: str = "llvm") -> list[Any]:
    out = copies(args)
    tir.build(func, target)(*out)
    return out


def run_interp(func: PrimFunc, args: Sequence[Any]) -> list[Any]:
    out = copies(args)
    tir.interpret(func, *out)
    return out


def assert_matches_interp(func: PrimFunc, args: Sequence[Any], rtol: float = 0.0, atol: float = 0.0) -> list[Any]:
    """LLVM and the interpreter agree on every buffer (exactly unless a tolerance is given)."""
    expected = run_interp(func, args)
    got = run_llvm(func, args)
    for e, g in zip(expected, got):
        if isinstance(e, np.ndarray):
            if rtol == 0.0 and atol == 0.0:
                np.testing.assert_array_equal(g, e)
            else:
                np.testing.assert_allclose(g.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol)
    return got
