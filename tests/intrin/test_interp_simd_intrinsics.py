"""The interpreter's integer SIMD intrinsics (tir/interp/runtime.py ``SIMD_INTRINSICS``).

Each one is checked lane by lane against the instruction itself: the same program is built
with LLVM and run on this CPU (x86-64) or under qemu (AArch64), on random data and on the
extreme values where saturation or wrap-around happens.
"""

from __future__ import annotations

import numpy as np
import pytest

import tir
import tir.script as T
from tir.runtime.aarch64 import toolchain_missing_reason
from tir.target import Target

ARM = "llvm -mtriple=aarch64-linux-gnu -mattr=+neon,+dotprod"
needs_avx2 = pytest.mark.skipif(not Target.host().has("avx2"), reason="this CPU lacks AVX2")
_MISSING = toolchain_missing_reason()
needs_qemu = pytest.mark.skipif(_MISSING is not None, reason=f"AArch64 tools missing: {_MISSING}")


@T.script
def pmaddubsw(A: T.Buffer((32,), "uint8"), B: T.Buffer((32,), "int8"), C: T.Buffer((16,), "int16")):
    C[T.ramp(0, 1, 16)] = T.call_llvm_pure_intrin(
        "int16x16", "llvm.x86.avx2.pmadd.ub.sw", A[T.ramp(0, 1, 32)], B[T.ramp(0, 1, 32)]
    )


@T.script
def pmaddwd(A: T.Buffer((16,), "int16"), B: T.Buffer((16,), "int16"), C: T.Buffer((8,), "int32")):
    C[T.ramp(0, 1, 8)] = T.call_llvm_pure_intrin(
        "int32x8", "llvm.x86.avx2.pmadd.wd", A[T.ramp(0, 1, 16)], B[T.ramp(0, 1, 16)]
    )


@T.script
def vpdpbusd(A: T.Buffer((32,), "uint8"), B: T.Buffer((32,), "int8"), C: T.Buffer((8,), "int32")):
    C[T.ramp(0, 1, 8)] = T.call_llvm_pure_intrin(
        "int32x8", "llvm.x86.avx512.vpdpbusd.256", C[T.ramp(0, 1, 8)], A[T.ramp(0, 1, 32)], B[T.ramp(0, 1, 32)]
    )


@T.script
def sdot(A: T.Buffer((16,), "int8"), B: T.Buffer((16,), "int8"), C: T.Buffer((4,), "int32")):
    C[T.ramp(0, 1, 4)] = T.call_llvm_pure_intrin(
        "int32x4", "llvm.aarch64.neon.sdot.v4i32.v16i8", C[T.ramp(0, 1, 4)], A[T.ramp(0, 1, 16)], B[T.ramp(0, 1, 16)]
    )


@T.script
def mistyped(A: T.Buffer((16,), "uint8"), B: T.Buffer((16,), "int8"), C: T.Buffer((16,), "int16")):
    # 16 bytes give 8 pairs, not 16.
    C[T.ramp(0, 1, 16)] = T.call_llvm_pure_intrin(
        "int16x16", "llvm.x86.avx2.pmadd.ub.sw", A[T.ramp(0, 1, 16)], B[T.ramp(0, 1, 16)]
    )


def _interpret(func: tir.PrimFunc, *args: np.ndarray) -> np.ndarray:
    copies = [a.copy() for a in args]
    tir.interpret(func, *copies)
    return copies[-1]


def _extreme_bytes(rng: np.random.Generator, n: int, dtype: type) -> np.ndarray:
    info = np.iinfo(dtype)
    return rng.choice(np.array([info.min, info.min + 1, -1 if info.min else 1, 0, info.max - 1, info.max]), n).astype(
        dtype
    )


def test_pmaddubsw_saturates_like_the_formula() -> None:
    a = np.array([255, 255] * 4 + [127, 127] * 4 + [255, 1] * 8, np.uint8)
    b = np.array([127, 127] * 2 + [-128, -128] * 2 + [127, 127] * 2 + [-128, -128] * 2 + [100, 3] * 8, np.int8)
    got = _interpret(pmaddubsw, a, b, np.zeros(16, np.int16))
    # 255*127*2 = 64770 -> 32767; 255*-128*2 = -65280 -> -32768; 7-bit operands are exact.
    assert list(got[:8]) == [32767, 32767, -32768, -32768, 32258, 32258, -32512, -32512]
    assert list(got[8:]) == [255 * 100 + 3] * 8


@needs_avx2
@pytest.mark.parametrize("extreme", [False, True])
def test_pmaddubsw_matches_the_cpu(extreme: bool) -> None:
    rng = np.random.default_rng(1)
    for _ in range(20):
        if extreme:
            a, b = _extreme_bytes(rng, 32, np.uint8), _extreme_bytes(rng, 32, np.int8)
        else:
            a, b = rng.integers(0, 256, 32, dtype=np.uint8), rng.integers(-128, 128, 32, dtype=np.int8)
        hardware = np.zeros(16, np.int16)
        tir.build(pmaddubsw, "llvm")(a, b, hardware)
        np.testing.assert_array_equal(_interpret(pmaddubsw, a, b, np.zeros(16, np.int16)), hardware)


@needs_avx2
def test_pmaddwd_matches_the_cpu_including_the_wrapping_sum() -> None:
    rng = np.random.default_rng(2)
    module = tir.build(pmaddwd, "llvm")
    for trial in range(20):
        a, b = _extreme_bytes(rng, 16, np.int16), _extreme_bytes(rng, 16, np.int16)
        if trial == 0:
            a[:], b[:] = -32768, -32768  # 2 * 2**30 = 2**31 wraps to -2**31
        hardware = np.zeros(8, np.int32)
        module(a, b, hardware)
        got = _interpret(pmaddwd, a, b, np.zeros(8, np.int32))
        np.testing.assert_array_equal(got, hardware)
        if trial == 0:
            assert (got == np.iinfo(np.int32).min).all()


def test_vpdpbusd_is_exact_and_wraps_the_accumulator() -> None:
    # No CPU here has VNNI (the tests of tir/intrin/x86.py check the codegen): the semantics
    # are checked against the formula.
    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 256, 32, dtype=np.uint8), rng.integers(-128, 128, 32, dtype=np.int8)
    c = rng.integers(-(2**31), 2**31, 8, dtype=np.int64).astype(np.int32)
    c[0] = np.iinfo(np.int32).max
    a[:4], b[:4] = 255, 127  # +129540 on top of int32 max wraps around
    want = c.astype(np.int64) + (a.astype(np.int64) * b.astype(np.int64)).reshape(8, 4).sum(axis=1)
    want = ((want + 2**31) % 2**32 - 2**31).astype(np.int32)
    np.testing.assert_array_equal(_interpret(vpdpbusd, a, b, c), want)


@pytest.mark.aarch64
@needs_qemu
def test_sdot_matches_qemu() -> None:
    rng = np.random.default_rng(4)
    module = tir.build(sdot, ARM)
    for extreme in (False, True):
        if extreme:
            a, b = _extreme_bytes(rng, 16, np.int8), _extreme_bytes(rng, 16, np.int8)
        else:
            a, b = rng.integers(-128, 128, 16, dtype=np.int8), rng.integers(-128, 128, 16, dtype=np.int8)
        c = rng.integers(-(2**31), 2**31, 4, dtype=np.int64).astype(np.int32)
        c[0] = np.iinfo(np.int32).max
        emulated = c.copy()
        module(a, b, emulated)
        np.testing.assert_array_equal(_interpret(sdot, a, b, c), emulated)


def test_sdot_formula() -> None:
    a = np.array([-128] * 4 + [1, 2, 3, 4] * 3, np.int8)
    b = np.array([-128] * 4 + [5, -6, 7, -8] * 3, np.int8)
    got = _interpret(sdot, a, b, np.array([10, 0, -1, 2**31 - 1], np.int32))
    assert list(got) == [10 + 4 * 16384, 5 - 12 + 21 - 32, -1 - 18, (2**31 - 1 - 18) - 0]


def test_mistyped_call_names_the_intrinsic() -> None:
    with pytest.raises(TypeError, match=r"llvm\.x86\.avx2\.pmadd\.ub\.sw.*int16x16 from \(uint8x16, int8x16\)"):
        tir.interpret(mistyped, np.zeros(16, np.uint8), np.zeros(16, np.int8), np.zeros(16, np.int16))


def test_other_target_intrinsics_stay_unsupported() -> None:
    @T.script
    def other(A: T.Buffer((8,), "int32"), C: T.Buffer((8,), "int32")):
        C[T.ramp(0, 1, 8)] = T.call_llvm_pure_intrin(
            "int32x8", "llvm.x86.avx2.psign.d", A[T.ramp(0, 1, 8)], A[T.ramp(0, 1, 8)]
        )

    with pytest.raises(NotImplementedError, match=r"llvm\.x86\.avx2\.psign\.d"):
        tir.interpret(other, np.zeros(8, np.int32), np.zeros(8, np.int32))
