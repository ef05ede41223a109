"""Parse errors: one exception type and one helper that formats every message.

A message reads::

    kernels.py:12:25: error: unknown name 'foo'
                C[vi, vj] = foo(A[vi, vk])
                            ^^^
    expected a name defined in the function, its module, or tir.script

Lines are 1-based and columns 1-based in the text (``ast`` reports 0-based UTF-8 byte
offsets; they are converted to characters here).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from tir.ir.node import Span


@dataclass
class Source:
    """The text being parsed: a file name and its lines by (true, 1-based) line number."""

    filename: str
    lines: dict[int, str] = field(default_factory=dict)

    @staticmethod
    def from_text(text: str, filename: str = "<string>", first_line: int = 1) -> Source:
        return Source(filename, {first_line + i: line for i, line in enumerate(text.splitlines())})

    def line(self, lineno: int) -> str:
        return self.lines.get(lineno, "")

    def span(self, node: ast.AST) -> Span:
        """The span of an ``ast`` node (whose positions are already true file positions)."""
        line = getattr(node, "lineno", 0)
        col = getattr(node, "col_offset", 0)
        return Span(self.filename, line, col, getattr(node, "end_lineno", None), getattr(node, "end_col_offset", None))


def _char_col(line: str, byte_col: int) -> int:
    """A 0-based UTF-8 byte offset in ``line`` as a character offset."""
    return len(line.encode("utf-8")[:byte_col].decode("utf-8", errors="replace"))


def format_error(source: Source, span: Span, message: str, expected: str) -> str:
    """``file:line:col: error: MESSAGE``, the source line, a caret line and ``expected ...``."""
    text = source.line(span.line)
    start = _char_col(text, span.col)
    if span.end_line == span.line and span.end_col is not None:
        end = _char_col(text, span.end_col)
    else:  # a span over several lines: underline to the end of its first line
        end = len(text.rstrip())
    end = max(end, start + 1)
    prefix = "".join(ch if ch == "\t" else " " for ch in text[:start])
    parts = [f"{span.file}:{span.line}:{start + 1}: error: {message}"]
    if text:
        parts.append(text)
        parts.append(prefix + "^" * (end - start))
    if expected:
        parts.append(expected if expected.startswith("expected") else f"expected {expected}")
    return "\n".join(parts)


class ScriptError(SyntaxError):
    """A malformed script. ``str(err)`` is the formatted message; ``.message`` the short one.

    ``filename``, ``lineno``, ``offset`` (1-based column), ``end_lineno``, ``end_offset`` and
    ``text`` are set as for any ``SyntaxError``; ``.expected`` is the hint line.
    """

    def __init__(self, source: Source, span: Span, message: str, expected: str) -> None:
        formatted = format_error(source, span, message, expected)
        text = source.line(span.line)
        col = _char_col(text, span.col)
        end_col = _char_col(text, span.end_col) if span.end_col is not None and span.end_line == span.line else None
        super().__init__(
            formatted,
            (span.file, span.line, col + 1, text, span.end_line, None if end_col is None else end_col + 1),
        )
        self.message = message
        self.expected = expected
        self.span = span
        self.formatted = formatted

    def __str__(self) -> str:
        return self.formatted


def script_error(source: Source, node: ast.AST | Span, message: str, expected: str) -> ScriptError:
    """The one way the parser makes an error: at an ``ast`` node (or span) of ``source``."""
    span = node if isinstance(node, Span) else source.span(node)
    return ScriptError(source, span, message, expected)
