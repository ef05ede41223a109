"""Structural equality and hashing modulo renaming."""

from __future__ import annotations

import pytest

import tir
from tir.ir import (
    Block,
    BlockRealize,
    Buffer,
    BufferRegion,
    BufferStore,
    FloatImm,
    For,
    ForKind,
    IntImm,
    IterKind,
    IterVar,
    PrimFunc,
    Range,
    Var,
    const,
)


def build_matmul(
    names: str = "ijk", n: int = 16, scale: float = 1.0, index_swap: bool = False, block_name: str = "C"
) -> PrimFunc:
    """A matmul built with fresh objects each call; ``names`` renames every variable."""
    A = Buffer(f"A_{names}", (n, n), "float32")
    B = Buffer(f"B_{names}", (n, n), "float32")
    C = Buffer(f"C_{names}", (n, n), "float32")
    i, j, k = (Var(c) for c in names)
    vi, vj, vk = (Var("v" + c) for c in names)
    a_index = (vk, vi) if index_swap else (vi, vk)
    body = BufferStore(C, C[vi, vj] + A[a_index] * B[vk, vj] * scale, (vi, vj))
    block = Block(
        name=block_name,
        iter_vars=(
            IterVar(vi, Range.from_extent(n)),
            IterVar(vj, Range.from_extent(n)),
            IterVar(vk, Range.from_extent(n), IterKind.REDUCE),
        ),
        reads=(BufferRegion.point(C, (vi, vj)), BufferRegion.point(A, a_index), BufferRegion.point(B, (vk, vj))),
        writes=(BufferRegion.point(C, (vi, vj)),),
        body=body,
        init=BufferStore(C, FloatImm(0.0), (vi, vj)),
    )
    stmt = BlockRealize((i, j, k), const(True), block)
    for var in (k, j, i):
        stmt = For(var, IntImm(0), IntImm(n), ForKind.SERIAL, stmt)
    root = Block("root", (), (), (), stmt)
    return PrimFunc("matmul", (A, B, C), BlockRealize((), const(True), root))


def test_alpha_renamed_copies_are_equal_and_hash_equal() -> None:
    f, g = build_matmul("ijk"), build_matmul("xyz")
    assert tir.structural_equal(f, g)
    tir.assert_structural_equal(f, g)
    assert tir.structural_hash(f) == tir.structural_hash(g)


@pytest.mark.parametrize(
    "changed",
    [
        {"n": 32},
        {"scale": 2.0},
        {"index_swap": True},
        {"block_name": "D"},
    ],
)
def test_changed_constant_index_or_name_is_not_equal(changed: dict) -> None:
    f, g = build_matmul(), build_matmul("xyz", **changed)
    assert not tir.structural_equal(f, g)
    assert tir.structural_hash(f) != tir.structural_hash(g)


def test_mismatch_report_names_path_and_both_sides() -> None:
    f, g = build_matmul(), build_matmul(scale=2.0)
    with pytest.raises(tir.StructuralMismatch) as info:
        tir.assert_structural_equal(f, g)
    text = str(info.value)
    assert "1.0 vs 2.0" in text
    assert ".body" in text and "--- left:" in text and "--- right:" in text


def test_free_vars_must_match_unless_mapped() -> None:
    x, y = Var("x"), Var("y")
    assert not tir.structural_equal(x + 1, y + 1)
    assert tir.structural_equal(x + 1, y + 1, map_free_vars=True)
    assert tir.structural_equal(x + 1, x + 1)
    # A mapping must be one-to-one: x + x is not y + z.
    assert not tir.structural_equal(x + x, y + Var("z"), map_free_vars=True)


def test_dtype_and_node_kind_matter() -> None:
    a, b = Var("a"), Var("b", "int64")
    assert not tir.structural_equal(a, b, map_free_vars=True)
    assert not tir.structural_equal(a + 1, a - 1)
    assert not tir.structural_equal(IntImm(1, "int32"), IntImm(1, "int64"))


def test_buffer_properties_matter() -> None:
    def func(scope: str) -> PrimFunc:
        A = Buffer("A", (4,), "float32", scope=scope)
        v = Var("i")
        store = BufferStore(A, FloatImm(1.0), (v,))
        loop = For(v, IntImm(0), IntImm(4), ForKind.SERIAL, store)
        return PrimFunc("f", (A,), BlockRealize((), const(True), Block("root", (), (), (), loop)))

    assert tir.structural_equal(func("global"), func("global"))
    assert not tir.structural_equal(func("global"), func("shared"))
    assert tir.structural_hash(func("global")) != tir.structural_hash(func("shared"))


def test_hash_is_stable_across_processes() -> None:
    import subprocess
    import sys
    from pathlib import Path

    code = (
        f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r});"
        "from test_structural import build_matmul; import tir;"
        "print(tir.structural_hash(build_matmul()))"
    )
    outputs = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=None).stdout
        for _ in range(2)
    }
    assert len(outputs) == 1
    assert int(outputs.pop()) == tir.structural_hash(build_matmul())
