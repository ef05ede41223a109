"""Name resolution for the parser: script-defined names (scoped) and the Python environment."""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tir.ir.buffer import Range
from tir.ir.expr import Var

#: Returned by lookups that find nothing (``None`` is a legitimate Python value).
MISSING: Any = object()


class Env:
    """Python names visible to a script: closure, defining scope, module globals, builtins."""

    def __init__(self, *mappings: Mapping[str, Any]) -> None:
        self.mappings = [m for m in mappings if m is not None]

    def lookup(self, name: str) -> Any:
        for mapping in self.mappings:
            if name in mapping:
                return _normalize(mapping[name])
        return getattr(builtins, name, MISSING)


def _normalize(value: Any) -> Any:
    """numpy scalars become Python numbers, so constants from numpy code just work."""
    if type(value).__module__ == "numpy" and hasattr(value, "item") and getattr(value, "shape", None) == ():
        return value.item()
    return value


@dataclass
class Frame:
    """Names defined by one construct: a function, loop, block, or let binding."""

    names: dict[str, Any] = field(default_factory=dict)
    loop_var_names: list[str] = field(default_factory=list)


class Scope:
    """Script names by lexical scope, the ranges of the enclosing loops, and exited loop vars.

    A loop variable that went out of scope is remembered by name, so that a later use can be
    reported as "used outside its loop" rather than as an unknown name.
    """

    def __init__(self) -> None:
        self.frames: list[Frame] = [Frame()]
        self.loop_ranges: dict[Var, Range] = {}
        self.exited_loop_vars: set[str] = set()

    def push(self) -> Frame:
        frame = Frame()
        self.frames.append(frame)
        return frame

    def pop(self) -> None:
        frame = self.frames.pop()
        for name in frame.loop_var_names:
            var = frame.names.get(name)
            if isinstance(var, Var):
                self.loop_ranges.pop(var, None)
            if self.lookup(name) is MISSING:
                self.exited_loop_vars.add(name)

    def define(self, name: str, value: Any) -> None:
        self.frames[-1].names[name] = value
        self.exited_loop_vars.discard(name)

    def define_loop_var(self, name: str, var: Var, dom: Range) -> None:
        self.define(name, var)
        self.frames[-1].loop_var_names.append(name)
        self.loop_ranges[var] = dom

    def lookup(self, name: str) -> Any:
        for frame in reversed(self.frames):
            if name in frame.names:
                return frame.names[name]
        return MISSING

    def defined_in_innermost(self, name: str) -> bool:
        return name in self.frames[-1].names
