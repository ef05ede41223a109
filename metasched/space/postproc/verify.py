"""Verify: the validator on the finished candidate; the first violation is the reject reason."""

from __future__ import annotations

from metasched.space.postproc import Postproc, PostprocError
from tir.analysis import verify
from tir.schedule import Schedule
from tir.target import Target

__all__ = ["Verify"]


class Verify(Postproc):
    name = "verify"
    checks_only = True

    def __init__(self, target: Target | None = None) -> None:
        self.target = target

    def apply(self, sch: Schedule) -> None:
        problems = verify(sch.func, self.target)
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise PostprocError(self.name, f"{problems[0]}{more}")
