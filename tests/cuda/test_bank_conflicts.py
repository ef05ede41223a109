"""tir.analysis.bank_conflicts: wavefronts per warp access, and what padding does to them."""

from __future__ import annotations

import pytest
from test_matmul_tensorcore_example import _example

from tir.analysis.bank_conflicts import bank_conflicts, extra_wavefronts_per_block, wavefronts
from tir.transform import lower


def test_wavefronts_of_simple_patterns() -> None:
    assert wavefronts([4 * lane for lane in range(32)], 4) == (1, 1)  # one word per bank
    assert wavefronts([8 * lane for lane in range(32)], 4) == (1, 2)  # stride 2 words: 2-way
    assert wavefronts([128 * lane for lane in range(32)], 4) == (1, 32)  # one bank: 32-way
    assert wavefronts([0] * 32, 4) == (1, 1)  # a broadcast
    assert wavefronts([16 * lane for lane in range(32)], 16) == (4, 4)  # 16-byte lanes: 4 phases
    assert wavefronts([64 * lane for lane in range(8)], 16, lanes_per_phase=8) == (1, 4)  # rows of 64 bytes


def _kernel(pad: int, mma: bool, monkeypatch: pytest.MonkeyPatch) -> object:
    example = _example()
    monkeypatch.setattr(example, "PAD", pad)
    func = example.schedule_matmul(example.make_matmul(512), tiling=example.Tiling(mma=mma)).func
    mod = lower(func, "cuda -arch=sm_80")
    (kernel,) = [f for f in mod.functions.values() if f.attrs.get("kernel")]
    return kernel


def test_padding_makes_ldmatrix_conflict_free(monkeypatch: pytest.MonkeyPatch) -> None:
    padded = [a for a in bank_conflicts(_kernel(8, True, monkeypatch)) if a.kind == "ldmatrix"]
    assert padded and all(a.conflicts == 0 for a in padded)
    # Rows of 32 halves (64 bytes) unpadded: the 8 rows of each ldmatrix phase fall on 2 bank
    # groups, 4 rows each -- 4-way; B's rows of 64 halves (128 bytes): all 8 on one, 8-way.
    plain = {a.buffer: a for a in bank_conflicts(_kernel(0, True, monkeypatch)) if a.kind == "ldmatrix"}
    assert plain["A_shared"].wavefronts == 4 * plain["A_shared"].phases
    assert plain["B_shared"].wavefronts == 8 * plain["B_shared"].phases


def test_copies_into_padded_rows_of_64_bytes_conflict_two_ways(monkeypatch: pytest.MonkeyPatch) -> None:
    """The 16-byte cp.async stores of a phase (8 lanes) cover two 64-byte rows of A's tile; with
    16 bytes of padding the second row's last words meet the first row's banks: 2 wavefronts."""
    copies = {a.buffer: a for a in bank_conflicts(_kernel(8, False, monkeypatch)) if a.kind == "cp.async"}
    assert copies["A_shared"].wavefronts == 2 * copies["A_shared"].phases
    assert copies["B_shared"].conflicts == 0  # rows of 128 + 16 bytes: one row per phase


def test_conflicts_weighed_by_how_often_each_warp_runs_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """512^3, k tiles of 32: the 2-stage pipeline copies tile 0 before its loop (2 copy steps per
    thread) and tiles 1-15 in it (15 x 2); A's copies cost 4 extra wavefronts each, 4 warps."""
    kernel = _kernel(8, True, monkeypatch)
    copies = [
        (a.executions, a.conflicts) for a in bank_conflicts(kernel) if a.buffer == "A_shared" and a.kind == "cp.async"
    ]
    assert copies == [(2, 4), (30, 4)]
    assert extra_wavefronts_per_block(kernel) == 4 * (2 * 4 + 30 * 4)


def test_interleaved_copies_are_conflict_free(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lanes taking 8 rows of one 16-byte column (Tiling.interleave) put a phase's 8 stores into
    the padded rows' 8 bank groups: no conflict left in the kernel, for WMMA and mma.sync."""
    example = _example()
    for mma in (False, True):
        func = example.schedule_matmul(example.make_matmul(512), tiling=example.Tiling(mma=mma, interleave=True)).func
        (kernel,) = [f for f in lower(func, "cuda -arch=sm_80").functions.values() if f.attrs.get("kernel")]
        assert extra_wavefronts_per_block(kernel) == 0, bank_conflicts(kernel)
