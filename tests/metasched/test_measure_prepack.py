"""The measurer on programs with layout-free parameters: a candidate that packs them is checked
against the unscheduled program with the packing run once before the timing."""

from __future__ import annotations

import tir
from metasched.measure import MeasureInput, Measurer
from tests.transform.test_split_prepack import dense, packed_dense


def test_a_packing_candidate_is_checked_and_a_wrong_one_caught() -> None:
    packed = packed_dense()
    wrong = tir.parse(packed.script().replace("acc[vi, vj] + bias[vj]", "acc[vi, vj] - bias[vj]"))
    with Measurer("llvm", num_threads=1, workers=1) as measurer:
        good, bad = measurer.measure(
            [MeasureInput(packed, "llvm", reference=dense), MeasureInput(wrong, "llvm", reference=dense)]
        )
    assert good.error_kind is None and good.seconds is not None, good.error_msg
    assert bad.error_kind == "wrong"
