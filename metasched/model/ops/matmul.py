"""MatMul (batched, broadcasting, 1-D operands) and Gemm (transposes, alpha, beta, broadcast C)."""

from __future__ import annotations

from typing import Any

from metasched.model.ops import OpContext, broadcast_load, broadcast_shapes, cast, register
from metasched.model.te import Tensor, lazy
from tir.ir import PrimExpr, const


def lower_matmul(
    ctx: OpContext,
    a: Tensor,
    b: Tensor,
    acc_dtype: str | None = None,
    a_zero: Tensor | None = None,
    b_zero: Tensor | None = None,
) -> Tensor:
    acc = acc_dtype or a.dtype
    a2 = a if a.ndim >= 2 else lazy((1, a.shape[0]), a.dtype, lambda i, k: a[(k,)])
    b2 = b if b.ndim >= 2 else lazy((b.shape[0], 1), b.dtype, lambda k, j: b[(k,)])
    m, k = a2.shape[-2:]
    k2, n = b2.shape[-2:]
    if k != k2:
        raise ctx.fail(f"inner dimensions differ: {a.shape} @ {b.shape}")
    batch = broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    shape = (*batch, m, n)

    def element(s: tuple[PrimExpr, ...], r: tuple[PrimExpr, ...]) -> PrimExpr:
        bi = s[:-2]
        av = broadcast_load(a2, (*bi, s[-2], r[0]))
        bv = broadcast_load(b2, (*bi, r[0], s[-1]))
        if acc != a.dtype or acc != b.dtype:
            av, bv = cast(av, acc), cast(bv, acc)
            if a_zero is not None:
                av = av - cast(a_zero[(s[-2],)] if a_zero.ndim == 1 else a_zero.load(()), acc)
            if b_zero is not None:
                bv = bv - cast(b_zero[(s[-1],)] if b_zero.ndim == 1 else b_zero.load(()), acc)
        return av * bv

    y = ctx.builder.reduce(ctx.stage, shape, (k,), element, "sum", dtype=acc)
    if a.ndim == 1 and b.ndim == 1:
        return lazy((), acc, lambda: y[(const(0), const(0))])
    if a.ndim == 1:
        return lazy((*batch, n), acc, lambda *i: y[(*i[:-1], const(0), i[-1])])
    if b.ndim == 1:
        return lazy((*batch, m), acc, lambda *i: y[(*i, const(0))])
    return y


@register("MatMul", kind="complex")
def _matmul(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    return [lower_matmul(ctx, inputs[0], inputs[1])]


@register("Gemm", kind="complex")
def _gemm(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    a, b = inputs[0], inputs[1]
    c = inputs[2] if len(inputs) > 2 else None
    alpha = float(ctx.attr("alpha", 1.0))
    beta = float(ctx.attr("beta", 1.0))
    at = lazy(a.shape[::-1], a.dtype, lambda i, k: a[(k, i)]) if ctx.attr("transA", 0) else a
    bt = lazy(b.shape[::-1], b.dtype, lambda k, j: b[(j, k)]) if ctx.attr("transB", 0) else b
    y = lower_matmul(ctx, at, bt)
    if c is None and alpha == 1.0:
        return [y]

    def element(i: PrimExpr, j: PrimExpr) -> PrimExpr:
        v = y[(i, j)]
        if alpha != 1.0:
            v = v * const(alpha, y.dtype)
        if c is not None:
            cv = broadcast_load(c, (i, j))
            v = v + (cv if beta == 1.0 else cv * const(beta, y.dtype))
        return v

    return [lazy(y.shape, y.dtype, element)]
