"""metasched: the meta-scheduler -- finds fast schedules of tensor programs by itself.

    import metasched
    result = metasched.tune(func, target="llvm", trials=64, work_dir="tune/")
    result.best_func                        # the tuned PrimFunc
    tuned = metasched.apply_database(func, result.database, "llvm")

docs/metasched.md describes the stages (design space, search, cost model, measurement, database).
"""

from __future__ import annotations

from metasched.database import Database, TuningRecord
from metasched.space.tensorize import tensorize_candidates
from metasched.task import Task, count_flops, extract_tasks
from metasched.tune import NoProgramError, TaskResult, TuneResult, apply_database, tune
from tir.registrations import RegistrationError

__version__ = "0.1.0"

__all__ = [
    "Database",
    "NoProgramError",
    "RegistrationError",
    "Task",
    "TaskResult",
    "TuneResult",
    "TuningRecord",
    "apply_database",
    "count_flops",
    "extract_tasks",
    "tensorize_candidates",
    "tune",
]
