"""``Task``: one workload to tune -- an unscheduled program, its target, weight and FLOP count.

task = Task.from_func(matmul, target="llvm")
task.flops            # 2 * 1024**3 for a 1024^3 matmul
tasks = extract_tasks(module, "llvm")   # one task per distinct function (weights count repeats)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tir.ir import (
    Block,
    BlockRealize,
    BufferStore,
    For,
    IRModule,
    PrimFunc,
)
from tir.ir import expr as E
from tir.ir.expr import as_int
from tir.ir.functor import IRVisitor
from tir.ir.structural import structural_hash
from tir.target import Target

__all__ = ["Task", "count_flops", "extract_tasks", "workload_hash"]


def workload_hash(func: PrimFunc) -> str:
    """The key of a workload in the database: the structural hash of the unscheduled program, hex."""
    return f"{structural_hash(func) & (2**64 - 1):016x}"


@dataclass
class Task:
    """A workload to tune: ``func`` is the unscheduled program, ``target`` the parsed target
    (``str(task.target)`` is its full text, the database's key).

    A model's tasks (``metasched.model.compiled.group_tasks``) are named after the first fused
    group that runs the program (``g12_conv_relu``) and say more: ``pattern`` is that group's
    operator pattern (``conv_relu``: the task scheduler takes tasks of one pattern as alike),
    and in a model with symbolic dimensions ``symbolic_func`` is the program the compiled model
    runs (the sizes as variables) while ``func`` is it at the representative sizes: what is
    tuned and what the database keys."""

    name: str
    func: PrimFunc
    target: Target
    weight: float = 1.0
    flops: float = field(default=0.0)
    pattern: str | None = None
    symbolic_func: PrimFunc | None = None

    @staticmethod
    def from_func(
        func: PrimFunc,
        target: str | Target = "llvm",
        weight: float = 1.0,
        name: str | None = None,
        pattern: str | None = None,
        symbolic_func: PrimFunc | None = None,
    ) -> Task:
        if not isinstance(func, PrimFunc):
            raise TypeError(f"a task needs a PrimFunc, got {type(func).__name__}")
        if not isinstance(func.body, BlockRealize):
            raise ValueError(f"function {func.name!r} has no root block: tune programs before lowering them")
        parsed = Target.parse(target)
        return Task(name or func.name, func, parsed, float(weight), float(count_flops(func)), pattern, symbolic_func)

    @property
    def kernel(self) -> PrimFunc:
        """The program a compiled model runs for this task: ``symbolic_func`` when there is one."""
        return self.symbolic_func if self.symbolic_func is not None else self.func

    @property
    def key(self) -> str:
        return workload_hash(self.func)


def extract_tasks(func_or_mod: PrimFunc | IRModule, target: str | Target = "llvm") -> list[Task]:
    """One task per structurally distinct function; repeats add to the weight."""
    if isinstance(func_or_mod, PrimFunc):
        return [Task.from_func(func_or_mod, target)]
    if not isinstance(func_or_mod, IRModule):
        raise TypeError(f"metasched tunes a PrimFunc or an IRModule, got {type(func_or_mod).__name__}")
    tasks: dict[str, Task] = {}
    for func in func_or_mod.functions.values():
        key = workload_hash(func)
        if key in tasks:
            tasks[key].weight += 1
        else:
            tasks[key] = Task.from_func(func, target)
    return list(tasks.values())


# ---------------------------------------------------------------- FLOP counting

_ARITHMETIC = (E.Add, E.Sub, E.Mul, E.Div, E.FloorDiv, E.FloorMod, E.Min, E.Max)


class _FlopCounter(IRVisitor):
    """Counts arithmetic on stored values (not index arithmetic), times the enclosing trip counts."""

    def __init__(self) -> None:
        self.trips = 1
        self.total = 0

    def visit_For(self, loop: For) -> None:
        extent = as_int(loop.extent)
        saved = self.trips
        self.trips *= extent if extent is not None else 1
        self.visit(loop.body)
        self.trips = saved

    def visit_Block(self, block: Block) -> None:
        # A block's init runs once per spatial point: its (usually constant) stores count nothing.
        self.visit(block.body)

    def visit_BufferStore(self, store: BufferStore) -> None:
        self.total += self.trips * max(_count_ops(store.value), 1)


def _count_ops(value: E.PrimExpr) -> int:
    """Arithmetic and math calls in a stored value; buffer indices are not counted."""
    if isinstance(value, _ARITHMETIC):
        return 1 + _count_ops(value.a) + _count_ops(value.b)
    if isinstance(value, E.Call):
        return 1 + sum(_count_ops(arg) for arg in value.args if isinstance(arg, E.PrimExpr))
    if isinstance(value, E.Select):
        return _count_ops(value.true_value) + _count_ops(value.false_value)
    if isinstance(value, E.Cast):
        return _count_ops(value.value)
    return 0


def count_flops(func: PrimFunc) -> int:
    """Arithmetic operations of one run: each store's operations times the loop trips around it
    (a multiply-add is two). A store with no arithmetic (a copy) counts one."""
    counter = _FlopCounter()
    counter.visit(func.body)
    return counter.total
