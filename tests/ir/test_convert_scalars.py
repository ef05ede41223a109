"""tir.ir.expr.convert takes integer-like values (numpy scalars, a schedule's sampled ExprRV)."""

from __future__ import annotations

import numpy as np

from tir.ir import IntImm
from tir.ir.expr import convert
from tir.ir.structural import structural_equal


def test_numpy_scalars_convert_to_constants() -> None:
    assert structural_equal(convert(np.int64(5)), IntImm(5))
    assert convert(np.True_).dtype.is_bool
    assert convert(np.int8(3), IntImm(0, "int64").dtype).dtype.bits == 64
