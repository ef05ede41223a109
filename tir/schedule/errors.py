"""``ScheduleError``: what a primitive refuses, and why."""

from __future__ import annotations

from typing import Any


class ScheduleError(ValueError):
    """A schedule primitive refused: it names the primitive, the block or loop, the rule that
    failed, and shows the offending part of the program.

    ``primitive``, ``target`` (e.g. ``"loop i"`` or ``"block 'C'"``) and ``rule`` are kept
    as attributes so tools (the tuner) can read them without parsing the text.
    """

    def __init__(self, primitive: str, target: str, rule: str, fragment: Any = None) -> None:
        self.primitive = primitive
        self.target = target
        self.rule = rule
        self.fragment = fragment
        text = f"{primitive}: {target}: {rule}"
        if fragment is not None:
            shown = fragment if isinstance(fragment, str) else _show(fragment)
            text += "\n" + _indent(shown)
        super().__init__(text)


def _show(node: Any) -> str:
    try:
        text = str(node)
    except Exception:  # never let printing hide the real error
        text = repr(node)
    lines = text.splitlines()
    if len(lines) > 40:
        lines = lines[:40] + [f"... ({len(lines) - 40} more lines)"]
    return "\n".join(lines)


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())
