"""The exact full-range int8 dot products for AVX2 and the value-range declarations.

``x86_avx2_s8s8s32_dot_8x4`` / ``x86_avx2_u8s8s32_dot_8x4`` (tir/intrin/x86.py) are checked on
their own and tensorized into matmuls (examples/int8_matmul_exact.py) against numpy's int32
matmul, bit for bit, on random full-range data and on the extreme products (-128 * -128 summed
over the whole depth); ``tir.intrin.ranges`` accepts the u7 intrinsic only where the program
declares its operand fits.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

import tir
import tir.script as T
from tir.codegen import CodegenError
from tir.intrin import IntrinError, TensorIntrin, check_operand_ranges, declared_value_ranges
from tir.intrin.ranges import buffer_value_range, check_arrays_in_ranges, dtype_range
from tir.intrin.x86 import AVX2_FMA_F32, AVX2_S8S8_DOT, AVX2_U7S8_DOT, AVX2_U8S8_DOT, VNNI_U8S8_DOT
from tir.target import Target

HOST = Target.host()
needs_avx2 = pytest.mark.skipif(not (HOST.isa == "x86_64" and HOST.has("avx2")), reason="this CPU lacks AVX2")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EXACT = (AVX2_S8S8_DOT, AVX2_U8S8_DOT)
A_DTYPE = {AVX2_S8S8_DOT: "int8", AVX2_U8S8_DOT: "uint8"}


def _example() -> ModuleType:
    """examples/int8_matmul_exact.py as a module (examples/ is not a package)."""
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    name = "tir_examples_int8_matmul_exact"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, EXAMPLES / "int8_matmul_exact.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def _dot_exact(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    return c + (a.astype(np.int32).reshape(1, 4) * b.reshape(8, 4).astype(np.int32)).sum(axis=1)[None, :]


def _full_range(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    low, high = dtype_range(dtype)
    return rng.integers(low, high + 1, shape).astype(dtype)


# ---------------------------------------------------------------- registration


def test_registered_for_avx2_only() -> None:
    for name in EXACT:
        intrin = TensorIntrin.get(name)
        assert intrin.isa == "x86_64" and intrin.required_features == ("avx2",) and intrin.doc
        assert intrin.operand_ranges == {}  # exact for every input
        assert name in TensorIntrin.list("llvm -mcpu=haswell")
        assert name not in TensorIntrin.list("llvm -mcpu=x86-64")  # SSE2 only
        assert name not in TensorIntrin.list("llvm -mcpu=sandybridge")  # AVX without AVX2
        assert name not in TensorIntrin.list("llvm -mtriple=aarch64-linux-gnu -mattr=+neon,+dotprod")
    assert TensorIntrin.get(AVX2_U7S8_DOT).operand_ranges == {"A": (0, 127)}
    assert TensorIntrin.get(VNNI_U8S8_DOT).operand_ranges == {}


def test_refused_without_avx2_with_a_codegen_error() -> None:
    # llvmlite aborts the process on an instruction the target lacks: the refusal comes first.
    for name in EXACT:
        with pytest.raises(CodegenError, match=r"llvm\.x86\.avx2\.\S+ needs target feature.*avx2"):
            tir.build(TensorIntrin.get(name).impl, "llvm -mcpu=sandybridge")


def test_desc_matches_the_u8s8_desc() -> None:
    # The same desc as the u7 intrinsic (A's dtype aside), so the same schedule tensorizes with it.
    u7 = TensorIntrin.get(AVX2_U7S8_DOT).desc
    assert tir.structural_equal(TensorIntrin.get(AVX2_U8S8_DOT).desc.replace(name=u7.name), u7)
    s8 = TensorIntrin.get(AVX2_S8S8_DOT).desc
    assert [str(b.dtype) for b in s8.buffer_params] == ["int8", "int8", "int32"]
    assert [b.const_shape() for b in s8.buffer_params] == [b.const_shape() for b in u7.buffer_params]


# ---------------------------------------------------------------- the dot products on their own


@pytest.mark.parametrize("name", EXACT)
def test_impl_is_exact_on_the_interpreter(name: str) -> None:
    intrin = TensorIntrin.get(name)
    rng = np.random.default_rng(0)
    for trial in range(20):
        a = _full_range(rng, (1, 4), A_DTYPE[name])
        b = _full_range(rng, (1, 1, 32), "int8")
        c = rng.integers(-(10**6), 10**6, (1, 8)).astype(np.int32)
        if trial == 0:
            a[:] = dtype_range(A_DTYPE[name])[0 if name == AVX2_S8S8_DOT else 1]
            b[:] = -128
        want = _dot_exact(a, b, c)
        for func in (intrin.impl, intrin.desc):
            out = c.copy()
            tir.interpret(func, a, b, out)
            np.testing.assert_array_equal(out, want)


@needs_avx2
@pytest.mark.parametrize("name", EXACT)
def test_impl_is_exact_on_this_cpu(name: str) -> None:
    module = tir.build(TensorIntrin.get(name).impl, "llvm")
    rng = np.random.default_rng(1)
    for trial in range(50):
        a = _full_range(rng, (1, 4), A_DTYPE[name])
        b = _full_range(rng, (1, 1, 32), "int8")
        c = rng.integers(-(10**6), 10**6, (1, 8)).astype(np.int32)
        if trial == 0:  # every product -128 * -128 (int8 A) or 255 * -128 (uint8 A)
            a[:] = -128 if name == AVX2_S8S8_DOT else 255
            b[:] = -128
        out = c.copy()
        module(a, b, out)
        np.testing.assert_array_equal(out, _dot_exact(a, b, c))


def test_impl_assembly() -> None:
    asm = tir.build(TensorIntrin.get(AVX2_S8S8_DOT).impl, "llvm -mcpu=haswell").get_source("asm")
    for instruction in ("vpmovsxbw", "vpmaddwd", "vphaddd"):
        assert instruction in asm
    assert "vpmaddubsw" not in asm  # the saturating instruction is not used
    asm = tir.build(TensorIntrin.get(AVX2_U8S8_DOT).impl, "llvm -mcpu=haswell").get_source("asm")
    assert "vpmovzxbw" in asm and "vpmaddubsw" not in asm  # A zero-extended


# ---------------------------------------------------------------- tensorized matmuls


@needs_avx2
@pytest.mark.parametrize("name", EXACT)
@pytest.mark.parametrize("shape", [(64, 64, 128), (16, 48, 36)])
def test_tensorized_matmul_is_bit_exact(name: str, shape: tuple[int, int, int]) -> None:
    example = _example()
    m, n, k = shape
    a_dtype = A_DTYPE[name]
    sch = example.schedule_int8_matmul(example.make_int8_matmul(m, n, k, a_dtype), name)
    text = sch.func.script()
    assert "llvm.x86.avx2.pmadd.wd" in text and "pmadd.ub.sw" not in text
    module = tir.build(sch.func, "llvm")
    rng = np.random.default_rng(m + n + k)
    a, b = example.full_range_operands(rng, m, n, k, a_dtype)
    c = np.full((m, n), 12345, np.int32)  # the schedule zeroes C itself
    module(a, b, c)
    want = a.astype(np.int32) @ b.astype(np.int32)
    np.testing.assert_array_equal(c, want)
    assert want[0, 0] == k * (-128 if a_dtype == "int8" else 255) * -128  # the extreme sum was there


@needs_avx2
def test_extreme_products_everywhere() -> None:
    # Every product -128 * -128: each output is K * 16384, the largest an int8 x int8 sum gets.
    example = _example()
    m, n, k = 8, 16, 256
    sch = example.schedule_int8_matmul(example.make_int8_matmul(m, n, k, "int8"), AVX2_S8S8_DOT)
    module = tir.build(sch.func, "llvm")
    a, b, c = np.full((m, k), -128, np.int8), np.full((k, n), -128, np.int8), np.zeros((m, n), np.int32)
    module(a, b, c)
    assert (c == k * 16384).all()
    a[:, ::2] = 127  # alternate -128 * -128 and 127 * -128
    module(a, b, c)
    np.testing.assert_array_equal(c, a.astype(np.int32) @ b.astype(np.int32))


def test_u7_form_of_the_same_schedule_is_wrong_on_full_range_data() -> None:
    # Why the exact forms exist: the interpreter computes what vpmaddubsw does (saturation).
    example = _example()
    m, n, k = 4, 16, 8
    func = example.make_int8_matmul(m, n, k, "uint8")
    sch = example.schedule_int8_matmul(func, AVX2_U7S8_DOT, parallel=False)
    exact = example.schedule_int8_matmul(func, AVX2_U8S8_DOT, parallel=False)
    a, b = np.full((m, k), 255, np.uint8), np.full((k, n), -128, np.int8)
    want = a.astype(np.int32) @ b.astype(np.int32)
    saturated, fixed = np.zeros((m, n), np.int32), np.zeros((m, n), np.int32)
    tir.interpret(sch.func, a, b, saturated)
    tir.interpret(exact.func, a, b, fixed)
    np.testing.assert_array_equal(fixed, want)
    assert (saturated != want).all()


# ---------------------------------------------------------------- value ranges


@T.script
def qmatmul(A: T.Buffer((16, 16), "uint8"), B: T.Buffer((16, 16), "int8"), C: T.Buffer((16, 16), "int32")):
    T.func_attr({"value_ranges": {"A": (0, 127)}})
    for i, j, r in T.grid(16, 16, 16):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, r)
            with T.init():
                C[vi, vj] = 0
            C[vi, vj] = C[vi, vj] + T.cast(A[vi, vk], "int32") * T.cast(B[vk, vj], "int32")


BINDING = {"A": "A", "B": "B", "C": "C"}


def test_declared_value_ranges() -> None:
    assert declared_value_ranges(qmatmul) == {"A": (0, 127), "B": (-128, 127), "C": (-(2**31), 2**31 - 1)}
    plain = qmatmul.replace(attrs={})
    assert declared_value_ranges(plain)["A"] == (0, 255)
    by_position = qmatmul.replace(attrs={"value_ranges": {1: [-8, 7]}})  # lists as well as tuples
    assert declared_value_ranges(by_position)["B"] == (-8, 7)
    # The declaration prints and parses back.
    again = tir.parse(qmatmul.script())
    assert declared_value_ranges(again)["A"] == (0, 127) and tir.structural_equal(again, qmatmul)


@pytest.mark.parametrize(
    "ranges, message",
    [
        ({"X": (0, 1)}, "names 'X', which is not a buffer parameter"),
        ({"A": (0, 300)}, r"leaves uint8's range \[0, 255\]"),
        ({"A": (5, 1)}, "is empty"),
        ({"A": (0,)}, r"a \(low, high\) pair of integers"),
        ({"A": (0.0, 1.0)}, r"a \(low, high\) pair of integers"),
        ([("A", (0, 1))], "must map buffer parameters"),
    ],
)
def test_malformed_declarations_are_refused(ranges: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        declared_value_ranges(qmatmul.replace(attrs={"value_ranges": ranges}))


def test_u7_accepted_only_where_the_declared_range_fits() -> None:
    assert check_operand_ranges(AVX2_U7S8_DOT, qmatmul, BINDING) is None
    reason = check_operand_ranges(AVX2_U7S8_DOT, qmatmul.replace(attrs={}), BINDING)
    assert reason is not None
    assert "x86_avx2_u7s8s32_dot_8x4 needs its operand A in [0, 127]; A of qmatmul may hold [0, 255]" in reason
    assert '"value_ranges"' in reason  # says how to declare
    narrower = qmatmul.replace(attrs={"value_ranges": {"A": (3, 100)}})
    assert check_operand_ranges(AVX2_U7S8_DOT, narrower, BINDING) is None
    wider = qmatmul.replace(attrs={"value_ranges": {"A": (0, 128)}})
    assert "may hold [0, 128]" in str(check_operand_ranges(AVX2_U7S8_DOT, wider, BINDING))
    # Exact intrinsics take anything; Buffers work as well as names; a restricted operand
    # missing from the binding is refused.
    for name in (AVX2_U8S8_DOT, VNNI_U8S8_DOT, AVX2_FMA_F32):
        assert check_operand_ranges(name, qmatmul.replace(attrs={}), BINDING) is None
    a_buffer = qmatmul.buffer_params[0]
    assert check_operand_ranges(TensorIntrin.get(AVX2_U7S8_DOT), qmatmul, {"A": a_buffer}) is None
    assert "does not say which buffer" in str(check_operand_ranges(AVX2_U7S8_DOT, qmatmul, {"B": "B"}))


def test_ranges_follow_copies_the_schedule_makes() -> None:
    # The tensorized program reads a packed copy of B and (here) a cache of A: their ranges are
    # those of the parameters they copy.
    sch = tir.Schedule(qmatmul)
    block = sch.get_block("C")
    sch.cache_read(block, 1, "global")  # A (the reads are C, A, B)
    sch.cache_read(block, 2, "global")  # B
    func = sch.func
    assert func.root_block is not None
    copies = {str(b.dtype): b.name for b in func.root_block.alloc_buffers}
    a_copy = copies["uint8"]
    assert buffer_value_range(func, copies["int8"]) == (-128, 127)
    assert a_copy != "A" and buffer_value_range(func, a_copy) == (0, 127)
    assert check_operand_ranges(AVX2_U7S8_DOT, func, {"A": a_copy}) is None
    assert check_operand_ranges(AVX2_U7S8_DOT, func.replace(attrs={}), {"A": a_copy}) is not None
    with pytest.raises(ValueError, match="no buffer named 'nope'"):
        buffer_value_range(func, "nope")


def test_padding_constants_widen_a_traced_range() -> None:
    @T.script
    def padded(A: T.Buffer((4,), "uint8"), B: T.Buffer((8,), "int32")):
        T.func_attr({"value_ranges": {"A": (10, 20)}})
        A_pad = T.alloc_buffer((8,), "uint8")
        for i in range(8):
            with T.block("pad"):
                vi = T.spatial_axis(8, i)
                A_pad[vi] = T.if_then_else(vi < 4, A[T.min(vi, 3)], T.uint8(0))
        for i in range(8):
            with T.block("B"):
                vi = T.spatial_axis(8, i)
                B[vi] = T.cast(A_pad[vi], "int32") + 1

    assert buffer_value_range(padded, "A_pad") == (0, 20)
    assert buffer_value_range(padded, "B") == dtype_range("int32")  # a parameter
    computed = padded.replace(attrs={})
    assert buffer_value_range(computed, "A_pad") == (0, 255)


def test_intrinsic_operand_ranges_are_checked_at_registration() -> None:
    intrin = TensorIntrin.get(AVX2_U7S8_DOT)
    with pytest.raises(IntrinError, match="names 'X', which is not an integer buffer parameter"):
        TensorIntrin.register("test_bad_ranges", intrin.desc, intrin.impl, operand_ranges={"X": (0, 1)})
    with pytest.raises(IntrinError, match=r"leaves uint8's range"):
        TensorIntrin.register("test_bad_ranges", intrin.desc, intrin.impl, operand_ranges={"A": (-1, 1)})
    assert "test_bad_ranges" not in TensorIntrin.list()


def test_check_arrays_in_ranges() -> None:
    a = np.full((16, 16), 127, np.uint8)
    b, c = np.zeros((16, 16), np.int8), np.zeros((16, 16), np.int32)
    check_arrays_in_ranges(qmatmul, [a, b, c])
    a[3, 4] = 128
    with pytest.raises(ValueError, match=r"A holds 128 at \(3, 4\), outside its declared range \[0, 127\]"):
        check_arrays_in_ranges(qmatmul, [a, b, c])
