"""The built-in x86-64 tensor intrinsics (tir/intrin/x86.py).

Each impl is built on its own and compared with its desc (interpreted) and numpy; the int8
AVX2 dot product's saturation contract and the VNNI feature checks have negative tests; the
tensorized int8 matmul of examples/int8_matmul_x86.py runs at 512^3 and equals numpy exactly.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

import tir
from tir.codegen import CodegenError
from tir.intrin import IntrinError, TensorIntrin
from tir.intrin.x86 import AVX2_FMA_F32, AVX2_U7S8_DOT, VNNI_U8S8_DOT, check_u7_operand, u7s8_dot_reference
from tir.schedule import ScheduleError
from tir.target import Target

HOST = Target.host()
needs_avx2_fma = pytest.mark.skipif(
    not (HOST.isa == "x86_64" and HOST.has("avx2") and HOST.has("fma")), reason="this CPU lacks AVX2/FMA"
)
ICELAKE = "llvm -mcpu=icelake-server"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _example(name: str) -> ModuleType:
    """``examples/<name>.py`` as a module (examples/ is not a package)."""
    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    module_name = f"tir_examples_{name}"
    if module_name not in sys.modules:
        spec = importlib.util.spec_from_file_location(module_name, EXAMPLES / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    return sys.modules[module_name]


def _saturating_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The documented result of the AVX2 tensorized matmul for ANY uint8 A: each pair of
    adjacent depths (2p, 2p + 1) is summed and saturated to int16 before accumulating."""
    products = a.astype(np.int64)[:, :, None] * b.astype(np.int64)[None, :, :]  # (M, K, N)
    pairs = products.reshape(a.shape[0], a.shape[1] // 2, 2, b.shape[1]).sum(axis=2)
    return np.clip(pairs, -32768, 32767).sum(axis=1).astype(np.int32)


def _run(func: tir.PrimFunc, target: str | None, *args: np.ndarray) -> np.ndarray:
    """Run ``func`` (interpreted when ``target`` is None) on copies; returns the last argument."""
    copies = [a.copy() for a in args]
    if target is None:
        tir.interpret(func, *copies)
    else:
        tir.build(func, target)(*copies)
    return copies[-1]


def _dot_exact(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``c[0, i] + sum_k a[0, k] * b[0, 0, 4 * i + k]`` in int32."""
    return c + (a.astype(np.int32).reshape(1, 4) * b.reshape(8, 4).astype(np.int32)).sum(axis=1)[None, :]


def _dot_operands(
    rng: np.random.Generator, a_high: int = 128, a_low: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random operands of the int8 dot products, in their parameter shapes."""
    a = rng.integers(a_low, a_high, (1, 4), dtype=np.uint8)
    b = rng.integers(-128, 128, (1, 1, 32), dtype=np.int8)
    c = rng.integers(-(10**6), 10**6, (1, 8), dtype=np.int32)
    return a, b, c


# ---------------------------------------------------------------- registry and targets


def test_registered_for_x86_64() -> None:
    for name in (AVX2_FMA_F32, AVX2_U7S8_DOT, VNNI_U8S8_DOT):
        intrin = TensorIntrin.get(name)
        assert intrin.isa == "x86_64"
        assert intrin.doc
    assert TensorIntrin.get(AVX2_FMA_F32).required_features == ("avx2", "fma")
    assert TensorIntrin.get(VNNI_U8S8_DOT).required_features == ("avx512vnni", "avx512vl")


def test_vnni_is_listed_for_icelake_but_not_for_this_cpu_nor_haswell() -> None:
    assert VNNI_U8S8_DOT in TensorIntrin.list(ICELAKE)
    assert AVX2_U7S8_DOT in TensorIntrin.list(ICELAKE)
    assert VNNI_U8S8_DOT not in TensorIntrin.list("llvm -mcpu=haswell")
    assert AVX2_U7S8_DOT in TensorIntrin.list("llvm -mcpu=haswell")
    if not HOST.has("avx512vnni"):
        assert VNNI_U8S8_DOT not in TensorIntrin.list("llvm")
        assert not TensorIntrin.get(VNNI_U8S8_DOT).available(HOST)


def test_not_listed_for_other_isas() -> None:
    for target in ("llvm -mtriple=aarch64-linux-gnu -mattr=+neon,+dotprod", "llvm -mcpu=x86-64"):
        listed = TensorIntrin.list(target)
        assert not {AVX2_FMA_F32, AVX2_U7S8_DOT, VNNI_U8S8_DOT} & set(listed)


# ---------------------------------------------------------------- float32 FMA tile


@needs_avx2_fma
def test_fma_tile_matches_desc_and_numpy() -> None:
    intrin = TensorIntrin.get(AVX2_FMA_F32)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 4), dtype=np.float32)
    b = rng.standard_normal((4, 16), dtype=np.float32)
    c = rng.standard_normal((4, 16), dtype=np.float32)
    want = c + a @ b
    hardware = _run(intrin.impl, "llvm", a, b, c)
    np.testing.assert_allclose(hardware, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_run(intrin.desc, None, a, b, c), hardware, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(_run(intrin.impl, None, a, b, c), hardware, rtol=0, atol=1e-6)
    assert tir.build(intrin.impl, "llvm").get_source("asm").count("vfmadd") == 32


def test_fma_tile_refused_without_the_fma_feature_is_not_a_crash() -> None:
    # llvm.fma is target-independent: without FMA hardware LLVM calls fmaf, it does not abort.
    source = tir.build(TensorIntrin.get(AVX2_FMA_F32).impl, "llvm -mcpu=x86-64").get_source("ll")
    assert "llvm.fma.v8f32" in source


# ---------------------------------------------------------------- AVX2 u7 x s8 dot product


@needs_avx2_fma
def test_u7s8_dot_is_exact_for_7_bit_operands() -> None:
    intrin = TensorIntrin.get(AVX2_U7S8_DOT)
    rng = np.random.default_rng(1)
    for trial in range(10):
        a, b, c = _dot_operands(rng)
        if trial == 0:  # the largest pair sums: 2 * 127 * 127 and 2 * 127 * -128
            a[:] = 127
            b[..., :16], b[..., 16:] = 127, -128
        want = _dot_exact(a, b, c)
        check_u7_operand(a)
        np.testing.assert_array_equal(_run(intrin.impl, "llvm", a, b, c), want)
        np.testing.assert_array_equal(_run(intrin.impl, None, a, b, c), want)
        np.testing.assert_array_equal(_run(intrin.desc, None, a, b, c), want)


@needs_avx2_fma
def test_u7s8_dot_saturates_as_documented_beyond_7_bits() -> None:
    intrin = TensorIntrin.get(AVX2_U7S8_DOT)
    a = np.array([[255, 255, 200, 128]], np.uint8)
    b = np.tile(np.array([127, 127, -128, -128], np.int8), 8).reshape(1, 1, 32)
    c = np.zeros((1, 8), np.int32)
    exact = _dot_exact(a, b, c)  # 255*127*2 + (200+128)*-128 = 64770 - 41984 = 22786
    documented = u7s8_dot_reference(a, b, c)  # 32767 + -32768 = -1
    assert exact.tolist() == [[22786] * 8] and documented.tolist() == [[-1] * 8]
    np.testing.assert_array_equal(_run(intrin.impl, "llvm", a, b, c), documented)
    np.testing.assert_array_equal(_run(intrin.impl, None, a, b, c), documented)  # the interpreter agrees
    with pytest.raises(IntrinError, match=r"x86_avx2_u7s8s32_dot_8x4: operand A holds 255 at \(0, 0\).*<= 127"):
        check_u7_operand(a)


def test_check_u7_operand() -> None:
    check_u7_operand(np.full((3, 5), 127, np.uint8))
    bad = np.zeros((3, 5), np.uint8)
    bad[2, 1] = 128
    with pytest.raises(IntrinError, match=r"holds 128 at \(2, 1\)"):
        check_u7_operand(bad, "X")
    with pytest.raises(IntrinError, match="must be uint8"):
        check_u7_operand(np.zeros(4, np.int8))


def test_u7s8_reference_matches_random_hardware_runs() -> None:
    if not HOST.has("avx2"):
        pytest.skip("this CPU lacks AVX2")
    module = tir.build(TensorIntrin.get(AVX2_U7S8_DOT).impl, "llvm")
    rng = np.random.default_rng(2)
    for _ in range(20):
        a, b, c = _dot_operands(rng, a_high=256)
        out = c.copy()
        module(a, b, out)
        np.testing.assert_array_equal(out, u7s8_dot_reference(a, b, c))


def test_u7s8_dot_assembly() -> None:
    asm = tir.build(TensorIntrin.get(AVX2_U7S8_DOT).impl, "llvm -mcpu=haswell").get_source("asm")
    for instruction in ("vpbroadcastd", "vpmaddubsw"):
        assert instruction in asm
    # On a VNNI CPU, LLVM folds vpmaddwd and the following add into vpdpwssd.
    assert "vpmaddwd" in asm or "vpdpwssd" in asm


# ---------------------------------------------------------------- AVX-512 VNNI


def test_vnni_builds_for_icelake() -> None:
    module = tir.build(TensorIntrin.get(VNNI_U8S8_DOT).impl, ICELAKE)
    assert "vpdpbusd" in module.get_source("asm")


def test_vnni_refused_for_this_cpu_with_a_codegen_error() -> None:
    if HOST.has("avx512vnni") or HOST.has("avxvnni"):
        pytest.skip("this CPU has VNNI")
    impl = TensorIntrin.get(VNNI_U8S8_DOT).impl
    with pytest.raises(
        CodegenError, match=r"llvm\.x86\.avx512\.vpdpbusd\.256 needs target feature.*avx512vnni\+avx512vl"
    ):
        tir.build(impl, "llvm")
    with pytest.raises(CodegenError, match="avx512vnni"):
        tir.build(impl, "llvm -mcpu=skylake-avx512")  # AVX-512 without VNNI


def test_vnni_refusal_leaves_the_process_alive() -> None:
    # LLVM aborts the process when it meets an instruction the target lacks: the refusal must
    # come first. A child process shows that nothing reached LLVM.
    code = textwrap.dedent(
        """
        import tir
        from tir.codegen import CodegenError
        from tir.intrin import TensorIntrin
        try:
            tir.build(TensorIntrin.get("x86_avx512vnni_u8s8s32_dot_8x4").impl, "llvm -mcpu=haswell")
        except CodegenError as error:
            print("refused:", str(error).splitlines()[0][:90])
        print("alive")
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "refused: function _dot_u8s8_vnni_impl: intrinsic llvm.x86.avx512.vpdpbusd" in result.stdout
    assert result.stdout.rstrip().endswith("alive")


def test_vnni_semantics_in_the_interpreter_cover_the_full_uint8_range() -> None:
    intrin = TensorIntrin.get(VNNI_U8S8_DOT)
    a, b, c = _dot_operands(np.random.default_rng(3), a_high=256, a_low=128)
    np.testing.assert_array_equal(_run(intrin.impl, None, a, b, c), _dot_exact(a, b, c))
    np.testing.assert_array_equal(_run(intrin.desc, None, a, b, c), _dot_exact(a, b, c))


# ---------------------------------------------------------------- tensorized int8 matmul


@needs_avx2_fma
def test_tensorized_int8_matmul_512_equals_numpy_exactly() -> None:
    example = _example("int8_matmul_x86")
    sch = example.schedule_int8_matmul(example.make_int8_matmul(512, 512, 512))
    text = sch.func.script()
    assert text.count("llvm.x86.avx2.pmadd.ub.sw") == 1 and "C_o" in text
    module = tir.build(sch.func, "llvm")
    asm = module.get_source("asm")
    for instruction in ("vpbroadcastd", "vpmaddubsw"):
        assert instruction in asm
    # On a VNNI CPU, LLVM folds vpmaddwd and the following add into vpdpwssd.
    assert "vpmaddwd" in asm or "vpdpwssd" in asm
    rng = np.random.default_rng(5)
    a = rng.integers(0, 128, (512, 512), dtype=np.uint8)
    b = rng.integers(-128, 128, (512, 512), dtype=np.int8)
    a[0, :], b[:, 0] = 127, -128  # the most negative pair sums all along row 0 x column 0
    check_u7_operand(a)
    c = np.zeros((512, 512), np.int32)
    module(a, b, c)
    np.testing.assert_array_equal(c, a.astype(np.int32) @ b.astype(np.int32))


def test_tensorized_int8_matmul_in_the_interpreter() -> None:
    example = _example("int8_matmul_x86")
    args = example.make_args(np.random.default_rng(6))
    tir.interpret(example.KERNEL, *args)
    np.testing.assert_array_equal(args[2], example.reference(*args)["C"])


@needs_avx2_fma
def test_tensorized_int8_matmul_saturates_beyond_7_bits() -> None:
    example = _example("int8_matmul_x86")
    m, n, k = 8, 32, 16
    func = example.schedule_int8_matmul(example.make_int8_matmul(m, n, k)).func
    rng = np.random.default_rng(7)
    a = rng.integers(128, 256, (m, k), dtype=np.uint8)
    b = rng.integers(-128, 128, (k, n), dtype=np.int8)
    b[:2, :] = 127  # 2 * 128 * 127 > 32767: the first pair saturates in every column
    exact, documented = a.astype(np.int32) @ b.astype(np.int32), _saturating_matmul(a, b)
    assert (exact != documented).any()
    hardware, interpreted = np.zeros((m, n), np.int32), np.zeros((m, n), np.int32)
    tir.build(func, "llvm")(a, b, hardware)
    tir.interpret(func, a, b, interpreted)
    np.testing.assert_array_equal(hardware, documented)
    np.testing.assert_array_equal(interpreted, documented)
    with pytest.raises(IntrinError, match="exact only for values <= 127"):
        check_u7_operand(a)


def test_vnni_tensorized_matmul_is_exact_for_full_uint8_and_refused_here() -> None:
    example = _example("int8_matmul_x86")
    func = example.schedule_int8_matmul(example.make_int8_matmul(8, 32, 16), intrin=VNNI_U8S8_DOT).func
    rng = np.random.default_rng(8)
    a = rng.integers(0, 256, (8, 16), dtype=np.uint8)
    a[:, :] = np.maximum(a, 200)
    b = rng.integers(-128, 128, (16, 32), dtype=np.int8)
    c = np.zeros((8, 32), np.int32)
    tir.interpret(func, a, b, c)
    np.testing.assert_array_equal(c, a.astype(np.int32) @ b.astype(np.int32))
    assert "vpdpbusd" in tir.build(func, ICELAKE).get_source("asm")
    if not (HOST.has("avx512vnni") or HOST.has("avxvnni")):
        with pytest.raises(CodegenError, match=r"vpdpbusd\.256 needs target feature"):
            tir.build(func, "llvm")


def test_tensorize_refuses_signed_activations() -> None:
    # The intrinsics read uint8 activations: an int8 x int8 matmul does not match.
    example = _example("int8_matmul_sdot")  # its kernel is int8 x int8
    sch = tir.Schedule(example.make_int8_matmul(8, 32, 16))
    block = sch.get_block("C")
    packed = sch.cache_read(block, 2, "global")
    sch.transform_layout(packed, ("write", 0), lambda k, n: (n // 8, k // 4, n % 8 * 4 + k % 4))
    i, j, k = sch.get_loops(block)
    j_tile, j_lane = sch.split(j, [None, 8])
    k_step, k_lane = sch.split(k, [None, 4])
    sch.reorder(i, j_tile, k_step, j_lane, k_lane)
    sch.decompose_reduction(block, k_step)
    before = sch.func
    with pytest.raises(ScheduleError, match=r"dtype mismatch: `A\[0, vk\]` is uint8 in the intrinsic, .* is int8"):
        sch.tensorize(j_lane, AVX2_U7S8_DOT)
    assert sch.func is before


@needs_avx2_fma
def test_fma_tile_tensorizes_a_float32_matmul() -> None:
    sys.path.insert(0, str(EXAMPLES))
    from matmul_schedule import make_matmul

    def schedule(n: int) -> tir.PrimFunc:
        sch = tir.Schedule(make_matmul(n))
        block = sch.get_block("C")
        i, j, k = sch.get_loops(block)
        i_tile, i_row = sch.split(i, [None, 4])
        j_tile, j_col = sch.split(j, [None, 16])
        k_tile, k_step = sch.split(k, [None, 4])
        sch.reorder(i_tile, j_tile, k_tile, i_row, j_col, k_step)
        sch.decompose_reduction(block, k_tile)
        sch.tensorize(i_row, AVX2_FMA_F32)
        return sch.func

    rng = np.random.default_rng(9)
    a = rng.standard_normal((64, 64), dtype=np.float32)
    b = rng.standard_normal((64, 64), dtype=np.float32)
    c = np.zeros((64, 64), np.float32)
    tir.build(schedule(64), "llvm")(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    small = np.zeros((16, 16), np.float32)
    tir.interpret(schedule(16), a[:16, :16].copy(), b[:16, :16].copy(), small)
    np.testing.assert_allclose(small, a[:16, :16] @ b[:16, :16], rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- every built-in intrinsic


@pytest.mark.parametrize("name", [n for n in TensorIntrin.list() if n.startswith(("x86_", "aarch64_"))])
def test_builtin_desc_and_impl_round_trip(name: str) -> None:
    intrin = TensorIntrin.get(name)
    for func in (intrin.desc, intrin.impl):
        text = func.script()
        reparsed = tir.parse(text)
        assert isinstance(reparsed, tir.PrimFunc)
        tir.assert_structural_equal(reparsed, func)
        assert reparsed.script() == text
