"""Schedules of programs with symbolic extents: the representative size's schedule, replayed.

A fused group whose shapes use symbolic dimensions is lowered twice: symbolically (what is
built) and specialized to the representative sizes given to ``compile`` (what is scheduled or
looked up in the tuning database; ``extract_tasks`` hands the tuner these specializations).
The representative program's trace -- the database's best record, else the default rules'
schedule -- is replayed on the symbolic program. A tile sampled for a loop whose extent is
symbolic keeps the representative's inner factors and takes ``None`` as its outer factor, so
``split`` gives ``ceildiv(extent, inner)`` outer iterations and a ``T.where`` on the tail.

When no trace replays and verifies (a primitive that needs a constant extent), the default rules
run on the symbolic program itself, and when that fails too it runs unscheduled; the compile
report's ``schedule`` entry says which, and why.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tir.ir import IntImm, PrimFunc
from tir.schedule import Schedule, Trace
from tir.target import Target

__all__ = ["schedule_symbolic"]


class _SymbolicReplay(Schedule):
    """Replays a trace recorded on the representative program onto the symbolic one."""

    def sample_perfect_tile(  # type: ignore[override]
        self, loop: Any, n: int, max_innermost_factor: int = 16, decision: Any = None
    ) -> list[Any]:
        extent = self.get(loop).extent  # type: ignore[union-attr]
        if isinstance(extent, IntImm) or decision is None:
            return super().sample_perfect_tile(loop, n, max_innermost_factor, decision)
        # The representative's inner tiles stay; the outer tile covers whatever extent comes.
        return [None, *[int(f) for f in decision[1:]]]


def _default_trace(func: PrimFunc, target: Target) -> Trace | None:
    """The trace of the default schedule (``metasched.space.default``) of ``func``."""
    from metasched.space.default import default_candidate

    candidate = default_candidate(func, target)
    return candidate.trace if candidate is not None else None


def _replay(func: PrimFunc, trace: Trace) -> PrimFunc:
    from tir.analysis import verify

    sch = _SymbolicReplay(func)
    trace.apply_to(sch)
    violations = verify(sch.func)
    if violations:
        raise ValueError(f"the replayed program does not verify: {violations[0]}")
    return sch.func


def schedule_symbolic(
    func: PrimFunc,
    representative: PrimFunc,
    sizes: Mapping[str, int],
    target: Target,
    database: Any = None,
    mode: str = "default",
) -> tuple[PrimFunc, str]:
    """``func`` (symbolic extents) scheduled as its ``representative`` specialization is; the
    second item says where the schedule came from (``"database (N=8)"``, ``"default (N=8)"``,
    or a fallback with its reason)."""
    if mode == "none":
        return func, "unscheduled"
    at = ", ".join(f"{k}={v}" for k, v in sizes.items())
    traces: list[tuple[str, Trace]] = []
    reasons = []
    if database is not None:
        try:
            records = database.get_top_k(representative, target, 5)
            traces += [("database", Trace.from_json(record.trace_json)) for record in records]
        except Exception as error:  # noqa: BLE001 - an unreadable record: the default schedule still applies
            reasons.append(f"database: {type(error).__name__}: {str(error).splitlines()[0][:160] if str(error) else ''}")
    default = _default_trace(representative, target)
    if default is not None:
        traces.append(("default", default))
    for source, trace in traces:
        try:
            return _replay(func, trace), f"{source} ({at})"
        except Exception as error:  # noqa: BLE001 - fall back below, with the reason
            reasons.append(f"{source} trace: {type(error).__name__}: {str(error).splitlines()[0][:160]}")
    why = "; ".join(reasons) or "no schedule for the representative program"
    from metasched.space.default import default_schedule

    try:
        fallback = default_schedule(func, target)
    except Exception:  # noqa: BLE001
        fallback = func
    if fallback is not func:
        return fallback, f"default on symbolic extents (the {at} schedule did not replay: {why})"
    return func, f"unscheduled (the {at} schedule did not replay: {why})"
