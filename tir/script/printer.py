"""Placeholder: the printer is being written."""

from __future__ import annotations


def expr_to_str(expr):  # type: ignore[no-untyped-def]
    return repr(expr)


def stmt_to_str(stmt):  # type: ignore[no-untyped-def]
    return repr(stmt)


def to_script(node):  # type: ignore[no-untyped-def]
    return repr(node)
