"""``Schedule``: the program being transformed, its handles, and its trace.

    sch = tir.Schedule(func)                 # or an IRModule with one function
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    io, ii = sch.split(i, factors=[None, 32])
    sch.show()                               # the program now
    sch.trace.show()                         # the Python that reproduces it

Each primitive is a pure ``PrimFunc -> PrimFunc`` function in its own module under
``tir/schedule/``; a ``Schedule`` method resolves the handles, calls it, and records the call in
the trace. The methods live in one mixin class per primitive family, combined here.
"""

from __future__ import annotations

import difflib
import random
from collections.abc import Callable, Sequence
from typing import Any

from tir.analysis.tree import TreeIndex
from tir.ir import Block, BlockRealize, For, IntImm, IRModule, PrimFunc, Stmt, Var
from tir.ir.function import CONSTANTS_ATTR
from tir.schedule.errors import ScheduleError
from tir.schedule.handles import BlockRV, ExprRV, LoopRV
from tir.schedule.trace import Instruction, Trace


class ScheduleBase:
    """State, handle resolution and trace recording shared by every primitive family."""

    def __init__(
        self, func_or_mod: PrimFunc | IRModule, seed: int | None = None, debug: bool = False, func_name: str | None = None
    ) -> None:
        if isinstance(func_or_mod, IRModule):
            names = list(func_or_mod.functions)
            if func_name is None:
                if len(names) != 1:
                    raise ValueError(f"the module has functions {names}; pass func_name= to pick one")
                func_name = names[0]
            func = func_or_mod.functions[func_name]
        elif isinstance(func_or_mod, PrimFunc):
            func = func_or_mod
        else:
            raise TypeError(f"Schedule needs a PrimFunc or an IRModule, got {type(func_or_mod).__name__}")
        if not isinstance(func.body, BlockRealize):
            raise ValueError(f"function {func.name!r} has no root block; schedule programs before lowering them")
        self._func = func
        self._module = func_or_mod if isinstance(func_or_mod, IRModule) else None
        self._index: TreeIndex | None = None
        self.seed = seed
        self.rng = random.Random(seed)
        self.debug = debug
        if debug:
            # Checked once up front, so that a step is only ever blamed for problems it made.
            self._verify(func, "Schedule", "the input program fails validation before any step")
        self.trace = Trace()
        self._rv_counter = 0
        # Handles remember the schedule that made them; copies share it (their handles agree),
        # a handle from an unrelated schedule is refused: its trace could not be replayed.
        self._lineage = object()

    # ---------------------------------------------------------------- program

    @property
    def func(self) -> PrimFunc:
        """The current program."""
        return self._func

    @property
    def mod(self) -> IRModule:
        """The current program as a one-function module."""
        return IRModule({self._func.name: self._func})

    def show(self) -> None:
        print(self._func.script())

    def copy(self) -> Schedule:
        """An independent schedule with the same program, trace and random state."""
        other = object.__new__(type(self))
        other.__dict__.update(self.__dict__)
        other.trace = self.trace.copy()
        other.rng = random.Random()
        other.rng.setstate(self.rng.getstate())
        return other  # type: ignore[return-value]

    @property
    def index(self) -> TreeIndex:
        if self._index is None or self._index.func is not self._func:
            self._index = TreeIndex(self._func)
        return self._index

    def _set_func(self, func: PrimFunc, primitive: str) -> None:
        if func is self._func:
            return
        if self.debug:
            self._verify(func, primitive)  # before installing: a refused step changes nothing
        elif CONSTANTS_ATTR in func.attrs:
            self._verify_constants(func, primitive)
        self._func = func
        self._index = None

    @staticmethod
    def _verify_constants(func: PrimFunc, primitive: str) -> None:
        """A step must not write or replace a ``T.allocate_const`` buffer (checked in every mode:
        its values would be lost without a trace)."""
        from tir.analysis.verify._context import walk
        from tir.analysis.verify.well_formed import check_constants

        problems = check_constants(walk(func))
        if problems:
            raise ScheduleError(primitive, problems[0].target, "; ".join(p.message for p in problems))

    def _verify(self, func: PrimFunc, primitive: str, what: str = "the result fails validation") -> None:
        from tir.analysis import verify

        problems = verify(func, staged=True)  # a state on the way: see tir.analysis.verify
        if problems:
            raise ScheduleError(primitive, f"function {func.name!r}", f"{what}: " + "; ".join(map(str, problems)))

    # ---------------------------------------------------------------- handles

    def _new_rv(self, rv: Any) -> Any:
        prefix = "b" if isinstance(rv, BlockRV) else "l" if isinstance(rv, LoopRV) else "v"
        rv.rv_name = f"{prefix}{self._rv_counter}"
        rv.owner = self._lineage
        self._rv_counter += 1
        return rv

    def _check_owner(self, rv: Any, primitive: str) -> None:
        if rv.owner is not None and rv.owner is not self._lineage:
            raise ScheduleError(
                primitive, repr(rv), "the handle belongs to another Schedule; get it from this one (get_block, get_loops)"
            )

    def block_rv(self, name: str) -> BlockRV:
        return self._new_rv(BlockRV(name))

    def loop_rv(self, var: Var) -> LoopRV:
        return self._new_rv(LoopRV(var))

    def expr_rv(self, value: int) -> ExprRV:
        return self._new_rv(ExprRV(int(value)))

    def resolve_block(self, block: BlockRV | str, primitive: str) -> BlockRealize:
        """The realize of the block a handle names, or a ScheduleError saying it is gone."""
        name = block if isinstance(block, str) else getattr(block, "block_name", None)
        if name is None:
            raise ScheduleError(primitive, repr(block), "expected a block handle (BlockRV)")
        if isinstance(block, BlockRV):
            self._check_owner(block, primitive)
        realize = self.index.blocks.get(name)
        if realize is None:
            names = {n.lower(): n for n in self.index.blocks if n != "root"}
            close = [names[n] for n in difflib.get_close_matches(name.lower(), list(names), n=3)]
            hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
            raise ScheduleError(
                primitive,
                f"block {name!r}",
                f"no such block in the current program (removed or renamed by an earlier step?){hint}",
            )
        return realize

    def resolve_loop(self, loop: LoopRV, primitive: str) -> For:
        """The loop a handle names, or a ScheduleError saying it is gone."""
        if not isinstance(loop, LoopRV):
            hint = self._close_loops(loop) if isinstance(loop, str) else ""
            raise ScheduleError(
                primitive, repr(loop), f"expected a loop handle (LoopRV), from sch.get_loops(block){hint}"
            )
        self._check_owner(loop, primitive)
        found = self.index.loops.get(id(loop.loop_var))
        if found is None:
            raise ScheduleError(
                primitive,
                f"loop {loop.loop_var.name}",
                "no such loop in the current program (an earlier split, fuse or inline replaced it)"
                + self._close_loops(loop.loop_var.name),
            )
        return found

    def _close_loops(self, name: str) -> str:
        """``; the program has loops 'i_0', 'i_1'`` for the loops named closest to ``name``."""
        names = sorted({loop.loop_var.name for loop in self.index.loops.values()})
        close = [n for n in names if n.startswith(f"{name}_") or name in n.split("_")]
        close = close or difflib.get_close_matches(name, names, n=3)
        return f"; the program has loop(s) {', '.join(map(repr, close[:4]))}" if close else ""

    def resolve_int(self, value: int | IntImm | ExprRV, primitive: str) -> int:
        """The integer a primitive's argument stands for: an int, an integer constant
        (``IntImm``, of any integer type: TVM passes ``IntImm(10, "int64")``), or a sampled ExprRV."""
        if isinstance(value, ExprRV):
            self._check_owner(value, primitive)
            return value.value
        if isinstance(value, IntImm) and value.dtype.is_integer:
            return value.value
        if isinstance(value, bool) or not isinstance(value, int):
            raise ScheduleError(
                primitive, repr(value), "expected an integer (an int or an integer IntImm) or a sampled ExprRV"
            )
        return value

    # ---------------------------------------------------------------- trace

    def _record(
        self,
        kind: str,
        args: Sequence[Any],
        kwargs: dict[str, Any] | None = None,
        outputs: Sequence[Any] | Any = (),
        decision: Any = None,
    ) -> None:
        output_is_list = isinstance(outputs, (list, tuple))
        outs = tuple(outputs) if output_is_list else (outputs,)
        self.trace.append(Instruction(kind, tuple(args), dict(kwargs or {}), outs, output_is_list, decision))

    def _apply(
        self, kind: str, args: Sequence[Any], kwargs: dict[str, Any], transform: Callable[[PrimFunc], Any]
    ) -> Any:
        """Run a pure transformation ``func -> func`` or ``func -> (func, outputs)`` and record it.

        ``outputs`` are wrapped into handles: Var -> LoopRV, str -> BlockRV, int -> ExprRV.
        """
        result = transform(self._func)
        if isinstance(result, tuple):
            func, raw_outputs = result
        else:
            func, raw_outputs = result, None
        self._set_func(func, kind)
        outputs = self._wrap(raw_outputs)
        self._record(kind, args, kwargs, outputs if outputs is not None else ())
        return outputs

    def _wrap(self, raw: Any) -> Any:
        if raw is None:
            return None
        if isinstance(raw, (list, tuple)):
            return [self._wrap(item) for item in raw]
        if isinstance(raw, Var):
            return self.loop_rv(raw)
        if isinstance(raw, str):
            return self.block_rv(raw)
        if isinstance(raw, int):
            return self.expr_rv(raw)
        raise TypeError(f"cannot make a handle of {type(raw).__name__}")

    # ---------------------------------------------------------------- queries

    def get_block(self, name: str, func_name: str | None = None) -> BlockRV:
        """The block named ``name``. ``func_name`` (TVM's argument) must name this schedule's
        function when given."""
        if func_name is not None:
            self.work_on(func_name)
        self.resolve_block(name, "get_block")
        rv = self.block_rv(name)
        self._record("get_block", (name,), {}, rv)
        return rv

    def work_on(self, func_name: str) -> None:
        """TVM's ``work_on``: choose the function of a module to schedule. A schedule holds one
        function; this switches to another of the module it was made from only before the first
        primitive, and otherwise just checks the name."""
        if func_name == self._func.name:
            return
        others = sorted(self._module.functions) if self._module is not None else [self._func.name]
        if self._module is None or func_name not in self._module.functions:
            raise ScheduleError("work_on", f"function {func_name!r}", f"no such function; the module has {others}")
        if len(self.trace):
            raise ScheduleError(
                "work_on", f"function {func_name!r}", "a schedule holds one function: make a new Schedule for another"
            )
        self._func = self._module.functions[func_name]
        self._index = None

    def get(self, rv: BlockRV | LoopRV | ExprRV) -> Block | For | int:
        """TVM's ``sch.get``: the ``Block`` or ``For`` a handle names now, or a sampled integer."""
        if isinstance(rv, BlockRV):
            return self.get_block_node(rv)
        if isinstance(rv, LoopRV):
            return self.get_loop_node(rv)
        return self.resolve_int(rv, "get")

    def get_loops(self, block: BlockRV) -> list[LoopRV]:
        """The loops around ``block`` up to its enclosing block, outermost first."""
        realize = self.resolve_block(block, "get_loops")
        rvs = [self.loop_rv(loop.loop_var) for loop in self.index.loops_above(realize)]
        self._record("get_loops", (block,), {}, rvs)
        return rvs

    def get_child_blocks(self, block_or_loop: BlockRV | LoopRV) -> list[BlockRV]:
        """Blocks directly under a block's body or a loop (not inside another block)."""
        if isinstance(block_or_loop, LoopRV):
            stmt: Stmt = self.resolve_loop(block_or_loop, "get_child_blocks")
        else:
            stmt = self.resolve_block(block_or_loop, "get_child_blocks")
        rvs = [self.block_rv(r.block.name) for r in self.index.child_blocks(stmt)]
        self._record("get_child_blocks", (block_or_loop,), {}, rvs)
        return rvs

    def get_producers(self, block: BlockRV) -> list[BlockRV]:
        """Blocks of the same scope, before ``block``, that write a buffer ``block`` reads."""
        names = self._neighbours(block, "get_producers", producers=True)
        rvs = [self.block_rv(name) for name in names]
        self._record("get_producers", (block,), {}, rvs)
        return rvs

    def get_consumers(self, block: BlockRV) -> list[BlockRV]:
        """Blocks of the same scope, after ``block``, that read a buffer ``block`` writes."""
        names = self._neighbours(block, "get_consumers", producers=False)
        rvs = [self.block_rv(name) for name in names]
        self._record("get_consumers", (block,), {}, rvs)
        return rvs

    def _neighbours(self, block: BlockRV, primitive: str, producers: bool) -> list[str]:
        realize = self.resolve_block(block, primitive)
        scope = self.index.scope_block(realize)
        if scope is None:
            return []
        siblings = self.index.child_blocks(scope)
        position = next(i for i, r in enumerate(siblings) if r is realize)
        mine = realize.block
        found = []
        if producers:
            wanted = {id(region.buffer) for region in mine.reads}
            for other in siblings[:position]:
                if any(id(region.buffer) in wanted for region in other.block.writes):
                    found.append(other.block.name)
        else:
            wanted = {id(region.buffer) for region in mine.writes}
            for other in siblings[position + 1 :]:
                if any(id(region.buffer) in wanted for region in other.block.reads):
                    found.append(other.block.name)
        return found

    def get_block_node(self, block: BlockRV) -> Block:
        """The current ``Block`` node a handle names (for inspection)."""
        return self.resolve_block(block, "get_block_node").block

    def get_loop_node(self, loop: LoopRV) -> For:
        """The current ``For`` node a handle names (for inspection)."""
        return self.resolve_loop(loop, "get_loop_node")


from tir.schedule.primitives import PrimitiveMixins  # noqa: E402  (mixins use ScheduleBase)


class Schedule(PrimitiveMixins, ScheduleBase):
    """A program under transformation. See the module docstring, and each method's docstring
    for the program before and after."""
