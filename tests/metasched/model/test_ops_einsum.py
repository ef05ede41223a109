"""Einsum against onnxruntime: batched matmuls, transposes, reductions, diagonals, ellipses
with broadcasting, implicit outputs; the stage it lowers to is one reduction block."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from model_testing import assert_close, make_model, ort_run  # noqa: E402
from onnx import helper  # noqa: E402

from metasched import model as msm  # noqa: E402
from metasched.model.fuse import lower_group, partition  # noqa: E402
from metasched.model.ops.einsum import parse_equation  # noqa: E402

RNG = np.random.default_rng(5)


def r(*shape, dtype="float32"):  # type: ignore[no-untyped-def]
    if np.dtype(dtype).kind in "iu":
        return RNG.integers(-4, 5, shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def check(equation, *operands, schedule="none"):  # type: ignore[no-untyped-def]
    names = [f"x{k}" for k in range(len(operands))]
    inputs = dict(zip(names, operands, strict=True))
    model = make_model([helper.make_node("Einsum", names, ["y"], equation=equation)], inputs, ["y"], (), 12)
    want = ort_run(model, inputs)["y"]
    graph = msm.from_onnx(model)
    got = msm.compile(graph, schedule=schedule, threads=1).run(inputs)["y"]
    assert got.shape == want.shape and got.dtype == want.dtype
    if want.dtype.kind == "f":
        assert_close(got, want)
    else:
        np.testing.assert_array_equal(got, want)
    return graph


CASES = [
    ("bhqd,bhkd->bhqk", (r(2, 3, 4, 5), r(2, 3, 6, 5))),  # attention scores
    ("bhqk,bhkd->bhqd", (r(2, 3, 4, 6), r(2, 3, 6, 5))),  # attention values
    ("ij,jk->ik", (r(3, 4), r(4, 5))),
    ("ij,jk", (r(3, 4), r(4, 5))),  # implicit output: ik
    ("ij->ji", (r(3, 4),)),  # transpose: no reduction
    ("ij->", (r(3, 4),)),  # full sum
    ("ijk->ki", (r(2, 3, 4),)),  # transpose and reduce
    ("ii->i", (r(4, 4),)),  # diagonal
    ("ii", (r(4, 4),)),  # trace (implicit)
    ("i,i->", (r(5), r(5))),  # dot
    ("i,j->ij", (r(3), r(4))),  # outer product
    ("bij,bjk->bik", (r(2, 3, 4, dtype="int64"), r(2, 4, 2, dtype="int64"))),
    ("...ij,...jk->...ik", (r(2, 1, 3, 4), r(1, 5, 4, 2))),  # ellipsis, broadcast batch
    ("...ij,jk->...ik", (r(2, 3, 4), r(4, 2))),
    ("...d,d->...", (r(2, 3, 4), r(4))),
    ("b i d, b j d -> b i j", (r(2, 3, 4), r(2, 5, 4))),  # spaces
    ("abc,cd,de->abe", (r(2, 3, 4), r(4, 5), r(5, 2))),  # three operands
    ("Bij,Bjk->Bik", (r(2, 3, 4), r(2, 4, 5))),  # capitals are letters too
]


@pytest.mark.parametrize("equation,operands", CASES, ids=[c[0] for c in CASES])
def test_einsum(equation, operands):  # type: ignore[no-untyped-def]
    check(equation, *operands)


def test_einsum_is_one_reduction_block_and_schedules():  # type: ignore[no-untyped-def]
    graph = check("bhqd,bhkd->bhqk", r(1, 2, 8, 16), r(1, 2, 8, 16), schedule="default")
    (group,) = partition(graph)
    text = str(lower_group(graph, group))
    assert text.count("T.block(") == 1 and '"SSSSR"' in text.replace("'", '"'), text


def test_parse_equation():  # type: ignore[no-untyped-def]
    assert parse_equation("...ij,...jk", [3, 2]) == (["0ij", "jk"], "0ik")
    assert parse_equation("ba,ab", [2, 2]) == (["ba", "ab"], "")
    with pytest.raises(ValueError, match="rank"):
        parse_equation("ij,jk->ik", [2, 3])
    with pytest.raises(ValueError, match="no operand"):
        parse_equation("ij->iz", [2])
