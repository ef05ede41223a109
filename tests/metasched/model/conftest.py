"""Fixtures shared by the model tests."""

from __future__ import annotations

import pytest


@pytest.fixture
def like_onnxruntime(monkeypatch: pytest.MonkeyPatch) -> None:
    """uint8 / int8 x int8 products summed as this machine's onnxruntime sums them: in saturated
    int16 pairs on x86-64 with AVX2 and no VNNI (``metasched.model.qdq``), exactly elsewhere."""
    from metasched.model.qdq import INT16_PAIRS_ENV, onnxruntime_saturates_pairs

    monkeypatch.setenv(INT16_PAIRS_ENV, "1" if onnxruntime_saturates_pairs() else "0")
