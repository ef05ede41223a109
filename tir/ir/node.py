"""The base of every IR node, and the source span it may carry."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar


@dataclass(frozen=True)
class Span:
    """Where a node came from: 1-based line, 0-based column, as Python's ``ast`` reports."""

    file: str
    line: int
    col: int
    end_line: int | None = None
    end_col: int | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col + 1}"


N = TypeVar("N", bound="Node")


@dataclass(frozen=True, eq=False)
class Node:
    """Base of all IR nodes.

    Nodes are immutable and compared by identity with ``==``; use
    ``tir.structural_equal`` to compare programs. ``span`` never takes part in equality.
    """

    span: Span | None = field(default=None, kw_only=True, repr=False)

    #: Names of the dataclass fields that may hold nodes (computed once per class).
    _child_fields: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._child_fields = ()  # filled lazily by child_fields()

    @classmethod
    def child_fields(cls) -> tuple[str, ...]:
        if not cls._child_fields and dataclasses.is_dataclass(cls):
            names = tuple(f.name for f in dataclasses.fields(cls) if f.name != "span")
            cls._child_fields = names
        return cls._child_fields

    def replace(self: N, **changes: Any) -> N:
        """A copy with some fields changed; returns ``self`` when nothing changes."""
        if all(getattr(self, key) is value for key, value in changes.items()):
            return self
        return dataclasses.replace(self, **changes)

    def with_span(self: N, span: Span | None) -> N:
        return self if span is None or self.span is span else dataclasses.replace(self, span=span)
