"""Schedules: handles, primitives, traces (docs/design.md section 5)."""

from __future__ import annotations

from tir.schedule.errors import ScheduleError
from tir.schedule.handles import BlockRV, ExprRV, LoopRV
from tir.schedule.schedule import Schedule
from tir.schedule.trace import Instruction, Trace, TraceError

__all__ = ["BlockRV", "ExprRV", "Instruction", "LoopRV", "Schedule", "ScheduleError", "Trace", "TraceError"]
