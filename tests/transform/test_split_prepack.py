"""split_prepack: the packing of layout-free parameters moves into a function run once; main with
the packed buffers computes what the program computes."""

from __future__ import annotations

import numpy as np
import pytest

import tir
import tir.script as T
from metasched.measure.builder import build_program
from tir.schedule import Schedule
from tir.transform import LAYOUT_FREE_ATTR, split_prepack


@T.script
def dense(
    X: T.Buffer((8, 32), "float32"),
    W: T.Buffer((32, 64), "float32"),
    bias: T.Buffer((64,), "float32"),
    Y: T.Buffer((8, 64), "float32"),
):
    T.func_attr({"layout_free_buffers": ["W"]})
    acc = T.alloc_buffer((8, 64), "float32")
    for i, j, k in T.grid(8, 64, 32):
        with T.block("matmul"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                acc[vi, vj] = 0.0
            acc[vi, vj] += X[vi, vk] * W[vk, vj]
    for i, j in T.grid(8, 64):
        with T.block("bias_relu"):
            vi, vj = T.remap("SS", i, j)
            Y[vi, vj] = T.max(acc[vi, vj] + bias[vj], 0.0)


def packed_dense(func: tir.PrimFunc = dense, twice: bool = False) -> tir.PrimFunc:
    """W copied into 8-wide panels at the root (the multi-level tiling's packing); ``twice``
    packs the panels once more (a chain of two moved statements)."""
    sch = Schedule(func)
    block = sch.get_block("matmul")
    packed = sch.cache_read(block, 2, "global")
    sch.transform_layout(packed, ("write", 0), "lambda d0, d1: (d1 // 8, d0, d1 % 8)")
    if twice:
        sch.cache_read(block, 2, "global")
    return sch.func


def arrays(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {
        "X": rng.standard_normal((8, 32)).astype("float32"),
        "W": rng.standard_normal((32, 64)).astype("float32"),
        "bias": rng.standard_normal(64).astype("float32"),
        "Y": np.full((8, 64), np.nan, "float32"),
    }


def expected(values: dict[str, np.ndarray]) -> np.ndarray:
    return np.maximum(values["X"] @ values["W"] + values["bias"], 0.0)


@pytest.mark.parametrize("twice", [False, True])
def test_the_packing_moves_out_and_main_computes_the_same(twice: bool) -> None:
    func = packed_dense(twice=twice)
    split = split_prepack(func)
    assert split.prepack is not None
    assert split.inputs == ("W",) and split.dropped == ("W",)
    assert [b.name for b in split.main.buffer_params] == ["X", "bias", "Y", *split.packed]
    assert LAYOUT_FREE_ATTR not in split.main.attrs
    main_blocks = split.main.script()
    assert "W_global" in main_blocks and 'T.block("W_global")' not in main_blocks
    values = arrays(np.random.default_rng(0))
    prepack = tir.build(split.prepack)
    packed = {
        b.name: np.zeros(b.const_shape(), "float32") for b in split.prepack.buffer_params if b.name in split.packed
    }
    prepack(values["W"], *packed.values())
    tir.build(split.main)(*split.main_arguments(values, packed))
    np.testing.assert_allclose(values["Y"], expected(values), rtol=1e-5, atol=1e-5)


def test_build_program_packs_once_and_takes_the_programs_arguments() -> None:
    built = build_program(packed_dense(), "llvm")
    assert built.prepack is not None
    values = arrays(np.random.default_rng(1))
    ordered = [values[b.name] for b in dense.buffer_params]
    built.module(*built.arguments(ordered))
    np.testing.assert_allclose(values["Y"], expected(values), rtol=1e-5, atol=1e-5)


def test_nothing_moves_without_layout_free_parameters_or_packing() -> None:
    plain = packed_dense(dense.replace(attrs={}))
    assert split_prepack(plain).prepack is None and split_prepack(plain).main is plain
    assert split_prepack(dense).prepack is None  # layout-free, but nothing packs it


def test_a_copy_that_reads_a_changing_parameter_stays() -> None:
    # X is not layout-free: its copy must run on every call.
    sch = Schedule(dense)
    sch.cache_read(sch.get_block("matmul"), 1, "global")
    assert split_prepack(sch.func).prepack is None
    # Named explicitly, it moves.
    split = split_prepack(sch.func, ["X", "W"])
    assert split.prepack is not None and split.inputs == ("X",)


def test_a_parameter_main_still_reads_is_kept() -> None:
    @T.script
    def twice(W: T.Buffer((16, 8), "float32"), Y: T.Buffer((16, 8), "float32")):
        T.func_attr({"layout_free_buffers": ["W"]})
        Wt = T.alloc_buffer((8, 16), "float32")
        for i, j in T.grid(8, 16):
            with T.block("Wt"):
                vi, vj = T.remap("SS", i, j)
                Wt[vi, vj] = W[vj, vi]
        for i, j in T.grid(16, 8):
            with T.block("Y"):
                vi, vj = T.remap("SS", i, j)
                Y[vi, vj] = W[vi, vj] + Wt[vj, vi]

    split = split_prepack(twice)
    assert split.prepack is not None and split.dropped == ()
    assert [b.name for b in split.main.buffer_params] == ["W", "Y", "Wt"]
    w = np.arange(128, dtype="float32").reshape(16, 8)
    built = build_program(twice, "llvm")
    y = np.zeros((16, 8), "float32")
    built.module(*built.arguments([w, y]))
    np.testing.assert_array_equal(y, 2 * w)


def test_a_buffer_written_twice_is_not_moved() -> None:
    @T.script
    def rewritten(W: T.Buffer((16,), "float32"), Y: T.Buffer((16,), "float32")):
        T.func_attr({"layout_free_buffers": ["W"]})
        copy = T.alloc_buffer((16,), "float32")
        for i in range(16):
            with T.block("copy"):
                vi = T.axis.spatial(16, i)
                copy[vi] = W[vi]
        for i in range(16):
            with T.block("bump"):
                vi = T.axis.spatial(16, i)
                copy[vi] = copy[vi] + 1.0
        for i in range(16):
            with T.block("Y"):
                vi = T.axis.spatial(16, i)
                Y[vi] = copy[vi]

    assert split_prepack(rewritten).prepack is None


def test_an_unknown_name_is_an_error_naming_it() -> None:
    with pytest.raises(ValueError, match="'Q' is not a buffer parameter"):
        split_prepack(dense, ["Q"])


def test_positions_name_parameters_too() -> None:
    func = packed_dense(dense.replace(attrs={LAYOUT_FREE_ATTR: [1]}))
    assert split_prepack(func).inputs == ("W",)
    with pytest.raises(ValueError, match="7 is not a buffer parameter"):
        split_prepack(func, [7])
