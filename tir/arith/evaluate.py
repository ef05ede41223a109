"""Integer index expressions evaluated at many points at once (numpy arrays of variable values).

Used where checking every point is cheaper and surer than a symbolic proof: whether a layout
map is one-to-one, whether a fused loop's iterations touch disjoint boxes.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from tir.ir import Add, Cast, FloorDiv, FloorMod, IntImm, Max, Min, Mul, PrimExpr, Sub, Var

__all__ = ["evaluate_int"]


def evaluate_int(expr: PrimExpr, env: Mapping[int, np.ndarray]) -> np.ndarray | int | None:
    """Integer ``expr`` with each variable ``v`` taking the values ``env[id(v)]`` (arrays that
    broadcast together); None when ``expr`` uses anything else (another variable, a load, a
    division by a non-positive number).

    Before: ``i // 8 * 14 + j`` with ``env = {id(i): [0, 8, 9], id(j): 1}``; after: ``[1, 15, 15]``.
    """
    if isinstance(expr, IntImm):
        return expr.value
    if isinstance(expr, Var):
        return env.get(id(expr))
    if isinstance(expr, Cast) and expr.dtype.is_integer:
        return evaluate_int(expr.value, env)
    if not isinstance(expr, (Add, Sub, Mul, FloorDiv, FloorMod, Min, Max)):
        return None
    a, b = evaluate_int(expr.a, env), evaluate_int(expr.b, env)
    if a is None or b is None:
        return None
    if isinstance(expr, Add):
        return a + b
    if isinstance(expr, Sub):
        return a - b
    if isinstance(expr, Mul):
        return a * b
    if isinstance(expr, Min):
        return np.minimum(a, b)
    if isinstance(expr, Max):
        return np.maximum(a, b)
    if np.any(np.asarray(b) <= 0):
        return None
    return a // b if isinstance(expr, FloorDiv) else a % b
