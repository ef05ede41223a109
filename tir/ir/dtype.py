"""Data types: a scalar kind, a bit width and a number of vector lanes.

``DataType.parse("float32x8")`` gives a vector of eight float32 lanes; ``str()`` gives
the same text back. Every IR node stores a ``DataType``; constructors accept strings.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

_KINDS = ("int", "uint", "float", "bfloat", "bool", "handle")
_NAME_RE = re.compile(r"^(int|uint|float|bfloat|bool|handle)(\d*)(?:x(\d+))?$")

#: The scalar dtypes the language supports (docs/design.md section 3).
SCALAR_DTYPES = (
    "bool",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "float16",
    "bfloat16",
    "float32",
    "float64",
)


@dataclass(frozen=True)
class DataType:
    """A value type. ``kind`` is one of int, uint, float, bfloat, bool, handle."""

    kind: str
    bits: int
    lanes: int = 1

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"unknown dtype kind {self.kind!r}")
        if self.lanes < 1:
            raise ValueError(f"dtype lanes must be >= 1, got {self.lanes}")

    @staticmethod
    def parse(text: str | DataType) -> DataType:
        """Parse ``"float32"``, ``"int8x16"``, ``"bool"`` etc. into a DataType."""
        if isinstance(text, DataType):
            return text
        return _parse_cached(text)

    def __str__(self) -> str:
        base = "bool" if self.kind == "bool" else ("handle" if self.kind == "handle" else f"{self.kind}{self.bits}")
        return base if self.lanes == 1 else f"{base}x{self.lanes}"

    def __repr__(self) -> str:
        return f"DataType({str(self)!r})"

    @property
    def is_float(self) -> bool:
        return self.kind in ("float", "bfloat")

    @property
    def is_int(self) -> bool:
        """Signed integer."""
        return self.kind == "int"

    @property
    def is_uint(self) -> bool:
        return self.kind == "uint"

    @property
    def is_integer(self) -> bool:
        """Signed or unsigned integer (not bool)."""
        return self.kind in ("int", "uint")

    @property
    def is_bool(self) -> bool:
        return self.kind == "bool"

    @property
    def is_handle(self) -> bool:
        return self.kind == "handle"

    @property
    def is_scalar(self) -> bool:
        return self.lanes == 1

    @property
    def is_vector(self) -> bool:
        return self.lanes > 1

    @property
    def element(self) -> DataType:
        """The scalar type of one lane."""
        return self if self.lanes == 1 else DataType(self.kind, self.bits, 1)

    def with_lanes(self, lanes: int) -> DataType:
        return self if lanes == self.lanes else DataType(self.kind, self.bits, lanes)

    @property
    def bytes(self) -> int:
        return max(1, self.bits // 8) * self.lanes

    def min_value(self) -> int | float:
        """Smallest representable value of one lane."""
        if self.kind == "int":
            return -(1 << (self.bits - 1))
        if self.kind in ("uint", "bool"):
            return 0
        return -float("inf")

    def max_value(self) -> int | float:
        """Largest representable value of one lane."""
        if self.kind == "int":
            return (1 << (self.bits - 1)) - 1
        if self.kind == "uint":
            return (1 << self.bits) - 1
        if self.kind == "bool":
            return 1
        return float("inf")


@functools.cache
def _parse_cached(text: str) -> DataType:
    match = _NAME_RE.match(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"unknown dtype {text!r}; expected one of {', '.join(SCALAR_DTYPES)} (optionally with xLANES)")
    kind, bits_text, lanes_text = match.groups()
    if kind == "bool":
        if bits_text:
            raise ValueError(f"unknown dtype {text!r}; write 'bool'")
        bits = 1
    elif kind == "handle":
        bits = 64
    else:
        if not bits_text:
            raise ValueError(f"dtype {text!r} needs a bit width, e.g. {kind}32")
        bits = int(bits_text)
        scalar = f"{kind}{bits}"
        if scalar not in SCALAR_DTYPES:
            raise ValueError(f"unsupported dtype {text!r}; supported: {', '.join(SCALAR_DTYPES)}")
    lanes = int(lanes_text) if lanes_text else 1
    return DataType(kind, bits, lanes)


def as_dtype(value: str | DataType) -> DataType:
    """Normalize a dtype given as text or DataType."""
    return value if isinstance(value, DataType) else _parse_cached(value)


BOOL = DataType("bool", 1)
INT32 = DataType("int", 32)
INT64 = DataType("int", 64)
FLOAT32 = DataType("float", 32)
