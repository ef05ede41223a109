"""Handles (random variables, in TVM's words) that name parts of a scheduled program.

- ``BlockRV`` names a block by its name; it stays valid while a block of that name exists.
- ``LoopRV`` names a loop by its loop variable; primitives that keep a loop keep its variable,
  so the handle stays valid; a loop replaced (by ``split``, ``fuse``) invalidates its handles.
- ``ExprRV`` holds a sampled integer (a tile size, a categorical choice).

Handles print as ``b0``, ``l1``, ``v2``: the names the trace uses.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tir.ir import Var


@dataclass(eq=False)
class BlockRV:
    block_name: str
    rv_name: str = field(default="b?", compare=False)
    owner: object = field(default=None, compare=False, repr=False)  # the Schedule lineage that made it

    def __repr__(self) -> str:
        return f"{self.rv_name}(block {self.block_name!r})"


@dataclass(eq=False)
class LoopRV:
    loop_var: Var
    rv_name: str = field(default="l?", compare=False)
    owner: object = field(default=None, compare=False, repr=False)

    def __repr__(self) -> str:
        return f"{self.rv_name}(loop {self.loop_var.name})"


@dataclass(eq=False)
class ExprRV:
    value: int
    rv_name: str = field(default="v?", compare=False)
    owner: object = field(default=None, compare=False, repr=False)

    def __int__(self) -> int:
        return self.value

    def __index__(self) -> int:
        return self.value

    def __repr__(self) -> str:
        return f"{self.rv_name}(= {self.value})"


RV = BlockRV | LoopRV | ExprRV
