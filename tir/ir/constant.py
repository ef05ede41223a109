"""Constant buffers (``T.allocate_const``): values checked against their dtype and kept exactly.

A constant buffer is allocated at the function level with its contents known at compile time
(a lookup table, a small set of weights). Its values travel as a row-major tuple of Python
numbers already rounded to the dtype, so that printing them and parsing them back gives the
same bits, and the interpreter and every backend read the same numbers::

    >>> from tir.ir import as_dtype
    >>> constant_values([[1, 2], [3, 4]], as_dtype("int8"), (2, 2))
    (1, 2, 3, 4)
    >>> constant_values([0.1], as_dtype("float32"), (1,))
    (0.10000000149011612,)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from tir.ir.dtype import DataType

__all__ = ["CONSTANT_DTYPES", "constant_array", "constant_text", "constant_values"]

#: The dtypes a constant buffer may have (scalar lanes; bfloat16 and bool have no literal form).
CONSTANT_DTYPES = frozenset(("int8", "int16", "int32", "int64", "uint8", "float16", "float32", "float64"))


def constant_values(values: Any, dtype: DataType, shape: Sequence[int]) -> tuple[int | float, ...]:
    """``values`` (nested lists of numbers) as a row-major tuple in ``dtype``'s precision.

    Raises ``ValueError`` naming what is wrong: an unsupported dtype, a count that is not the
    product of ``shape``, a non-number, a fraction or out-of-range value for an integer dtype,
    a value that is not finite in a float dtype.
    """
    name = str(dtype)
    if name not in CONSTANT_DTYPES:
        raise ValueError(f"a constant buffer of dtype {name} is not supported; use one of {sorted(CONSTANT_DTYPES)}")
    flat = list(_flatten(values))
    count = math.prod(shape)
    if len(flat) != count:
        raise ValueError(f"{len(flat)} values for a buffer of shape {tuple(shape)} ({count} elements)")
    for value in flat:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"constant values must be numbers, got {value!r}")
    storage = np.dtype(name)
    if storage.kind in "iu":
        info = np.iinfo(storage)
        for value in flat:
            if isinstance(value, float) and not value.is_integer():
                raise ValueError(f"{value!r} is not an integer, as a {name} value must be")
            if not info.min <= value <= info.max:
                raise ValueError(f"{value!r} is outside the range of {name} [{info.min}, {info.max}]")
        return tuple(int(value) for value in flat)
    with np.errstate(over="ignore"):
        rounded = np.asarray(flat, dtype=np.float64).astype(storage)
    if not np.all(np.isfinite(rounded)):  # printed constants must read back: no inf or nan literals
        bad = flat[int(np.argmin(np.isfinite(rounded)))]
        raise ValueError(f"{bad!r} is not a finite {name} value")
    return tuple(float(value) for value in rounded.astype(np.float64))


def constant_array(values: Sequence[int | float], dtype: DataType, shape: Sequence[int]) -> np.ndarray:
    """The constant as a read-only numpy array of ``shape``."""
    array = np.asarray(values, dtype=np.dtype(str(dtype))).reshape(tuple(shape))
    array.flags.writeable = False
    return array


def constant_text(value: int | float, dtype: DataType) -> str:
    """The shortest literal that reads back as ``value`` in ``dtype`` (``0.1``, not the float64
    digits of the float32 nearest to it)."""
    if isinstance(value, int):
        return str(value)
    return repr(float(value)) if str(dtype) == "float64" else str(np.dtype(str(dtype)).type(value))


def _flatten(values: Any) -> Any:
    if isinstance(values, (list, tuple)):
        for item in values:
            yield from _flatten(item)
    else:
        yield values
