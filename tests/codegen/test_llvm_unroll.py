"""Unrolled loops too large to copy in TIR reach LLVM marked for full unrolling, and LLVM
unrolls them (its heuristic unroller stays off for every other loop)."""

from __future__ import annotations

import numpy as np

import tir

# 128 iterations of a 16-statement body: past unroll_loops' 1024-statement limit, so the loop
# stays a loop with the ``pragma_unroll`` hint.
BIG = """
@T.script
def big(A: T.Buffer((128, 16), "float32"), B: T.Buffer((128, 16), "float32")):
    for i in T.unroll(128):
        for j in T.unroll(16):
            with T.block("B"):
                vi, vj = T.remap("SS", i, j)
                B[vi, vj] = A[vi, vj] * 2.0 + 1.0
"""

SERIAL = BIG.replace("T.unroll(128)", "range(128)").replace("T.unroll(16)", "range(16)")


def test_a_large_unrolled_loop_is_unrolled_by_llvm() -> None:
    module = tir.build(tir.parse(BIG), "llvm")
    unoptimized = module.get_source("ll-unopt")
    assert '!"llvm.loop.unroll.full"' in unoptimized
    assert "phi" not in module.get_source("ll")  # no loop left
    a = np.random.default_rng(0).standard_normal((128, 16)).astype(np.float32)
    b = np.zeros_like(a)
    module(a, b)
    np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)


def test_serial_loops_are_not_marked() -> None:
    module = tir.build(tir.parse(SERIAL), "llvm")
    assert "llvm.loop.unroll" not in module.get_source("ll-unopt")
