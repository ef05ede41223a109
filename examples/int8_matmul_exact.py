"""Full-range quantized matmul on x86-64 AVX2, exact: int8 x int8 and uint8 x int8 -> int32.

The u7 intrinsic of examples/int8_matmul_x86.py (``vpmaddubsw``) saturates unless the uint8
activations stay below 128. Quantized models use the whole range (int8 activations, or uint8
up to 255), so two more intrinsics (tir/intrin/x86.py) widen both operands to int16 and multiply
with ``vpmaddwd``, which never saturates:

- ``x86_avx2_s8s8s32_dot_8x4``: int8 A x int8 B;
- ``x86_avx2_u8s8s32_dot_8x4``: uint8 A x int8 B.

They have the desc of the u7 intrinsic (an 8 x 4 dot-product step on B packed in 8 x 4 tiles),
so the schedule is the same: ``schedule_int8_matmul`` of examples/int8_matmul_x86.py with
another intrinsic name. Which one a program may use is a matter of the values it holds: a program
declares them (``T.func_attr({"value_ranges": {"A": (0, 127)}})``) and
``tir.intrin.check_operand_ranges`` says whether the u7 intrinsic fits; here it does not.

``python examples/int8_matmul_exact.py`` prints and interprets the small int8 x int8 kernel,
then builds both full-range forms at 256^3 for this CPU, checks them against numpy exactly on
extreme and random data, and times them next to the u7 form (on 7-bit data).
"""

from __future__ import annotations

import numpy as np
from _common import run_example
from int8_matmul_x86 import schedule_int8_matmul

import tir
import tir.script as T
from tir.intrin import TensorIntrin, check_operand_ranges
from tir.intrin.x86 import AVX2_S8S8_DOT, AVX2_U7S8_DOT, AVX2_U8S8_DOT
from tir.target import Target

#: The size of KERNEL, which the test suite interprets; main() also runs BIG natively.
M, N, K = 8, 32, 16
BIG = 256

#: The CPU the intrinsics need: tests that build every example for another target skip this one.
TARGET = "llvm"


def make_int8_matmul(m: int, n: int, k: int, a_dtype: str = "int8", name: str = "int8_matmul") -> tir.PrimFunc:
    """``C[i, j] = sum_k A[i, k] * B[k, j]``: ``a_dtype`` (int8 or uint8) x int8 -> int32."""

    @T.script
    def int8_matmul(A: T.Buffer((m, k), a_dtype), B: T.Buffer((k, n), "int8"), C: T.Buffer((m, n), "int32")):
        for i, j, r in T.grid(m, n, k):
            with T.block("C"):
                vi, vj, vk = T.remap("SSR", i, j, r)
                with T.init():
                    C[vi, vj] = 0
                C[vi, vj] = C[vi, vj] + T.cast(A[vi, vk], "int32") * T.cast(B[vk, vj], "int32")

    return int8_matmul.replace(name=name)


KERNEL = schedule_int8_matmul(make_int8_matmul(M, N, K, "int8", "int8_matmul_exact"), AVX2_S8S8_DOT).func
ATOL = 0.0  # integer arithmetic: exact


def full_range_operands(
    rng: np.random.Generator, m: int, n: int, k: int, a_dtype: str
) -> tuple[np.ndarray, np.ndarray]:
    """Random A (the whole ``a_dtype`` range) and int8 B, with the extreme products in place:
    row 0 of A at its most negative (or largest) value against column 0 of B at -128, so the
    largest sums in magnitude (K * -128 * -128 for int8) are there."""
    low, high = (-128, 128) if a_dtype == "int8" else (0, 256)
    a = rng.integers(low, high, (m, k)).astype(a_dtype)
    b = rng.integers(-128, 128, (k, n)).astype(np.int8)
    a[0, :] = low if a_dtype == "int8" else high - 1
    b[:, 0] = -128
    return a, b


def make_args(rng: np.random.Generator) -> list[np.ndarray]:
    a, b = full_range_operands(rng, M, N, K, "int8")
    return [a, b, np.zeros((M, N), np.int32)]


def reference(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> dict[str, np.ndarray]:
    return {"C": a.astype(np.int32) @ b.astype(np.int32)}


def main() -> None:
    run_example(KERNEL, make_args, reference, ATOL)
    full = make_int8_matmul(BIG, BIG, BIG, "uint8", "u8_matmul")
    reason = check_operand_ranges(AVX2_U7S8_DOT, full, {"A": "A", "B": "B", "C": "C"})
    print(f"u7 intrinsic for full-range uint8 A: refused ({reason})")
    declared = full.replace(attrs={"value_ranges": {"A": (0, 127)}})
    assert check_operand_ranges(AVX2_U7S8_DOT, declared, {"A": "A", "B": "B", "C": "C"}) is None
    if not TensorIntrin.get(AVX2_S8S8_DOT).available(Target.host()):
        print(f"{AVX2_S8S8_DOT}: this CPU lacks AVX2; skipping the {BIG}^3 runs")
        return
    rng = np.random.default_rng(0)
    for a_dtype, intrin, high in (
        ("int8", AVX2_S8S8_DOT, 128),
        ("uint8", AVX2_U8S8_DOT, 256),
        ("uint8", AVX2_U7S8_DOT, 128),
    ):
        func = make_int8_matmul(BIG, BIG, BIG, a_dtype, f"matmul_{a_dtype}_{BIG}")
        module = tir.build(schedule_int8_matmul(func, intrin).func, "llvm")
        module.set_num_threads(1)  # the time below is for one core
        a, b = full_range_operands(rng, BIG, BIG, BIG, a_dtype)
        if high == 128 and a_dtype == "uint8":
            a = a % 128  # the u7 contract
        c = np.zeros((BIG, BIG), np.int32)
        module(a, b, c)
        np.testing.assert_array_equal(c, a.astype(np.int32) @ b.astype(np.int32))
        seconds = module.time(a, b, c, repeat=10)
        values = f"[{int(a.min())}, {int(a.max())}]"
        print(
            f"{a_dtype} A {values} x int8 B, {BIG}^3 via {intrin}: equals numpy exactly; "
            f"{seconds * 1e3:.2f} ms on 1 thread ({2 * BIG**3 / seconds / 1e9:.0f} GOP/s)"
        )


if __name__ == "__main__":
    main()
