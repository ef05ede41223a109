"""Einsum, lowered from its equation to one stage: the output's letters are the spatial
iterators, every other letter a reduction iterator, the value the product of the operands read
at their letters -- a matmul-like block the tuner tiles like any other (``bhqd,bhkd->bhqk`` is
a batched matmul, ``ij->ji`` a transpose, ``ii->i`` a diagonal, ``ij->`` a full sum).

An ellipsis stands for the same broadcast dimensions in every operand (numpy's rule: aligned
from the right, extent 1 broadcasts); without ``->`` the output is the letters used once, in
alphabetical order, after the ellipsis dimensions.
"""

from __future__ import annotations

from typing import Any

from metasched.model.ops import OpContext, broadcast_shapes, register
from metasched.model.symbolic import Dim
from metasched.model.te import Tensor
from tir.ir import PrimExpr, const

#: Stand-ins for the dimensions an ellipsis covers (capital letters never collide: the
#: equation's letters are taken as given, case-sensitive, and these are not letters).
_ELLIPSIS_LETTERS = "0123456789"


def parse_equation(equation: str, ranks: list[int]) -> tuple[list[str], str]:
    """The operands' letter strings and the output's, the ellipsis expanded to digits
    (``"...ij,...jk"`` with ranks 3 and 2 -> ``["0ij", "jk"], "0ik"``)."""
    text = equation.replace(" ", "")
    lhs, arrow, rhs = text.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ValueError(f"the equation has {len(terms)} operands, the node {len(ranks)} inputs")
    ellipsis_rank = 0
    for term, rank in zip(terms, ranks, strict=True):
        if "..." in term:
            ellipsis_rank = max(ellipsis_rank, rank - len(term.replace("...", "")))
    if ellipsis_rank > len(_ELLIPSIS_LETTERS):
        raise ValueError(f"an ellipsis of {ellipsis_rank} dimensions")
    expanded = []
    for term, rank in zip(terms, ranks, strict=True):
        if "..." in term:
            covered = rank - len(term.replace("...", ""))
            term = term.replace("...", _ELLIPSIS_LETTERS[ellipsis_rank - covered : ellipsis_rank])
        if len(term) != rank or not all(c.isalpha() or c in _ELLIPSIS_LETTERS for c in term):
            raise ValueError(f"term {term!r} does not describe an operand of rank {rank}")
        expanded.append(term)
    broadcast = _ELLIPSIS_LETTERS[:ellipsis_rank]
    if arrow:
        out = rhs.replace("...", broadcast)
        if not all(c.isalpha() or c in broadcast for c in out) or len(set(out)) != len(out):
            raise ValueError(f"output term {rhs!r}")
    else:
        letters = "".join(expanded)
        out = broadcast + "".join(sorted(c for c in set(letters) if c.isalpha() and letters.count(c) == 1))
    used = set("".join(expanded))
    if any(c not in used for c in out):
        raise ValueError(f"the output term {rhs!r} names a letter no operand has")
    return expanded, out


@register("Einsum", kind="complex")
def _einsum(ctx: OpContext, inputs: list[Any]) -> list[Tensor]:
    operands: list[Tensor] = [t for t in inputs if t is not None]
    equation = str(ctx.attr("equation", ""))
    try:
        terms, out = parse_equation(equation, [t.ndim for t in operands])
    except ValueError as error:
        raise ctx.fail(f"equation {equation!r}: {error}") from None
    extents: dict[str, list[Dim]] = {}
    for term, tensor in zip(terms, operands, strict=True):
        for letter, extent in zip(term, tensor.shape, strict=True):
            extents.setdefault(letter, []).append(extent)
    size: dict[str, Dim] = {}
    for letter, seen in extents.items():
        try:
            (size[letter],) = broadcast_shapes(*[(e,) for e in seen])
        except ValueError:
            raise ctx.fail(f"equation {equation!r}: letter {letter!r} has extents {seen}") from None
    reduced = [c for c in dict.fromkeys("".join(terms)) if c not in out]
    dtype = operands[0].dtype

    def product(position: dict[str, PrimExpr]) -> PrimExpr:
        value: PrimExpr | None = None
        for term, tensor in zip(terms, operands, strict=True):
            idx = tuple(const(0) if e == 1 and size[c] != 1 else position[c] for c, e in zip(term, tensor.shape))
            loaded = tensor[idx] if idx else tensor.load(())
            value = loaded if value is None else value * loaded
        assert value is not None
        return value

    shape = [size[c] for c in out]
    if not reduced:
        return [ctx.builder.compute(ctx.stage, shape, lambda *s: product(dict(zip(out, s))), dtype)]
    return [
        ctx.builder.reduce(
            ctx.stage,
            shape,
            [size[c] for c in reduced],
            lambda s, r: product({**dict(zip(out, s)), **dict(zip(reduced, r))}),
            "sum",
            dtype=dtype,
        )
    ]
