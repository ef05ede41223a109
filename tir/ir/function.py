"""PrimFunc and IRModule."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tir.ir.buffer import Buffer
from tir.ir.expr import Var
from tir.ir.node import Node
from tir.ir.stmt import Block, BlockRealize, Stmt

Param = Var | Buffer

#: The PrimFunc attribute that holds ``T.allocate_const`` buffers: ``((buffer, values), ...)``,
#: each buffer one of the root block's allocations, its values a row-major tuple of numbers.
CONSTANTS_ATTR = "tir.constants"


@dataclass(frozen=True, eq=False, repr=False)
class PrimFunc(Node):
    """A tensor program: parameters (buffers and scalar vars) and a body.

    Before lowering the body is the realize of the root block, named ``"root"``, which owns
    the function-level ``alloc_buffer`` s.
    """

    name: str
    params: tuple[Param, ...]
    body: Stmt
    attrs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.params, tuple):
            object.__setattr__(self, "params", tuple(self.params))

    @property
    def buffer_params(self) -> tuple[Buffer, ...]:
        return tuple(p for p in self.params if isinstance(p, Buffer))

    @property
    def root_block(self) -> Block | None:
        return self.body.block if isinstance(self.body, BlockRealize) else None

    @property
    def constants(self) -> dict[Buffer, tuple[int | float, ...]]:
        """The ``T.allocate_const`` buffers and their row-major values (empty for most)."""
        return dict(self.attrs.get(CONSTANTS_ATTR, ()))

    def script(self) -> str:
        """The program as script text that ``tir.parse`` reads back."""
        from tir.script.printer import to_script

        return to_script(self)

    def show(self) -> None:
        print(self.script())

    def __str__(self) -> str:
        return self.script()

    def __repr__(self) -> str:
        return f"PrimFunc({self.name!r})"


@dataclass(frozen=True, eq=False, repr=False)
class IRModule(Node):
    """Named PrimFuncs."""

    functions: dict[str, PrimFunc]

    def __getitem__(self, name: str) -> PrimFunc:
        return self.functions[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.functions)

    def __len__(self) -> int:
        return len(self.functions)

    def script(self) -> str:
        from tir.script.printer import to_script

        return to_script(self)

    def show(self) -> None:
        print(self.script())

    def __str__(self) -> str:
        return self.script()

    def __repr__(self) -> str:
        return f"IRModule({list(self.functions)})"
