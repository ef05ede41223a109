"""Loops carrying a dependence through memory at a modulo address reach LLVM with its loop
vectorizer off (``tir.codegen.llvm_vectorizer_guard``): LLVM 22 vectorized them wrongly."""

from __future__ import annotations

import numpy as np

import tir

# Every iteration of f updates pool[h * 8 + f % 4 * 2]: LLVM took the address for h * 8 + f * 2
# (with data[h * 36 + f] instead of data[f] it happens not to vectorize, and computes right).
UPDATE = """
@T.script
def update(data: T.Buffer((36,), "float32"), pool: T.Buffer((32,), "float32")):
    for h, f in T.grid(4, 36):
        pool[h * 8 + f % 4 * 2] = T.max(pool[h * 8 + f % 4 * 2], data[f])
"""

# One store per element, at a modulo address, and nothing else touches the buffer: no dependence.
SCATTER = """
@T.script
def scatter(data: T.Buffer((144,), "float32"), out: T.Buffer((144,), "float32")):
    for f in range(144):
        out[f % 4 * 36 + f // 4] = data[f]
"""

AFFINE = UPDATE.replace("h * 8 + f % 4 * 2", "h * 36 + f").replace("(32,)", "(144,)")

# The same, with the f loop marked for LLVM to unroll (as unroll_loops leaves a large one).
UNROLL_HINT = """
@T.script
def update(data: T.Buffer((36,), "float32"), pool: T.Buffer((32,), "float32")):
    for h in range(4):
        for f in T.serial(36, annotations={"pragma_unroll": True}):
            pool[h * 8 + f % 4 * 2] = T.max(pool[h * 8 + f % 4 * 2], data[f])
"""

VECTORIZE_OFF = '!"llvm.loop.vectorize.enable", i1 0'


def test_a_loop_updating_a_modulo_address_is_not_vectorized_by_llvm() -> None:
    module = tir.build(tir.parse(UPDATE), "llvm")
    assert VECTORIZE_OFF in module.get_source("ll-unopt")
    data = np.random.default_rng(0).random(36, dtype=np.float32)
    pool = np.zeros(32, np.float32)
    module(data, pool)
    expected = np.zeros(32, np.float32)
    for h in range(4):
        expected[h * 8 : h * 8 + 8 : 2] = data.reshape(9, 4).max(axis=0)
    np.testing.assert_array_equal(pool, expected)


def test_affine_updates_and_lone_scatters_stay_vectorizable() -> None:
    for source in (AFFINE, SCATTER):
        assert "llvm.loop.vectorize" not in tir.build(tir.parse(source), "llvm").get_source("ll-unopt")


def test_a_loop_left_to_llvm_to_unroll_keeps_both_hints() -> None:
    text = tir.codegen.codegen_llvm(tir.transform.lower(tir.parse(UNROLL_HINT), "llvm"))
    assert VECTORIZE_OFF in text and '!"llvm.loop.unroll.full"' in text
    loop_ids = [line for line in text.splitlines() if line.startswith("!") and "llvm.loop" not in line]
    assert len(loop_ids) == 1 and loop_ids[0].count("!") == 5  # !n = !{ !n, !a, !b }
