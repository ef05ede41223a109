"""The program walk every rule shares: blocks with their scopes and loops, kernels, and
violations with printed fragments."""

from __future__ import annotations

from dataclasses import dataclass, field

from tir.ir.buffer import Buffer
from tir.ir.expr import BufferLoad, Call, PrimExpr, StringImm, Var
from tir.ir.function import PrimFunc
from tir.ir.node import Node
from tir.ir.stmt import (
    Allocate,
    Block,
    BlockRealize,
    BufferStore,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    SeqStmt,
    Stmt,
)

#: Lines of a printed fragment kept in a violation.
FRAGMENT_LINES = 10


@dataclass(frozen=True)
class Violation:
    """One broken rule: its stable name, what broke it, why, and the printed program part."""

    rule: str
    target: str
    message: str
    fragment: str = ""

    def __str__(self) -> str:
        text = f"[{self.rule}] {self.target}: {self.message}"
        if self.fragment:
            text += "\n" + "\n".join("    | " + line for line in self.fragment.splitlines())
        return text


def fragment(node: Node | None, max_lines: int = FRAGMENT_LINES) -> str:
    """``node`` printed in the script dialect, cut to ``max_lines`` lines."""
    if node is None:
        return ""
    try:
        text = str(node)
    except Exception:  # a broken program may not print; the violation still stands
        return repr(node)
    lines = text.rstrip("\n").splitlines()
    if len(lines) > max_lines:
        lines = lines[:max_lines] + [f"... ({len(lines) - max_lines} more lines)"]
    return "\n".join(lines)


def block_target(block: Block) -> str:
    return f"block {block.name!r}"


def loop_target(loop: For) -> str:
    if loop.kind is ForKind.THREAD_BINDING:
        return f"loop {loop.loop_var.name} ({loop.thread_tag})"
    return f"loop {loop.loop_var.name}"


def is_thread_loop(loop: For) -> bool:
    return loop.kind is ForKind.THREAD_BINDING


def is_thread_idx(loop: For) -> bool:
    """A loop bound to threadIdx.* or vthread.*: iterations that run concurrently in one launch
    block and share its shared memory."""
    return loop.kind is ForKind.THREAD_BINDING and (loop.thread_tag or "").startswith(("threadIdx", "vthread"))


def is_shared_scope(buffer: Buffer) -> bool:
    return buffer.scope.startswith("shared")


def is_per_thread_scope(buffer: Buffer) -> bool:
    """Storage private to a thread (or to a warp's fragment), not shared between threads."""
    return buffer.scope == "local" or buffer.scope.startswith(("wmma.", "m16n8k16."))


@dataclass(eq=False)
class BlockInfo:
    """A block in the program, where it sits, and what surrounds it."""

    realize: BlockRealize | None  # None only for a root block that is not realized
    block: Block
    parent: BlockInfo | None
    loops: list[For]  # loops between the parent block and this one, outermost first
    all_loops: list[For]  # every enclosing loop, outermost first
    order: int  # position in program order (pre-order)
    kernel: Kernel | None
    children: list[BlockInfo] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.block.name

    def bindings(self) -> dict[Var, PrimExpr]:
        if self.realize is None:
            return {}
        return {iv.var: value for iv, value in zip(self.block.iter_vars, self.realize.iter_values)}


@dataclass(eq=False)
class Kernel:
    """The subtree under an outermost thread-bound loop: one GPU launch."""

    root: For
    thread_loops: list[For] = field(default_factory=list)
    blocks: list[BlockInfo] = field(default_factory=list)
    allocations: list[Buffer] = field(default_factory=list)  # alloc_buffers / Allocate inside
    calls: list[tuple[Call, list[For]]] = field(default_factory=list)  # every call, with its loops


@dataclass(eq=False)
class Program:
    """The walked program: blocks in program order, kernels, and raw (non-block) accesses."""

    func: PrimFunc
    blocks: list[BlockInfo] = field(default_factory=list)
    kernels: list[Kernel] = field(default_factory=list)
    # Buffers touched by a load or store that is not inside any block (below the given block).
    raw_access: dict[int, set[int]] = field(default_factory=dict)  # id(scope block) -> {id(buffer)}
    calls: list[tuple[Call, list[For]]] = field(default_factory=list)


class _Walker:
    """Builds a ``Program``: one pass over the statements."""

    def __init__(self, func: PrimFunc) -> None:
        self.program = Program(func)
        self.loops: list[For] = []
        self.block_stack: list[BlockInfo] = []
        self.kernel: Kernel | None = None
        self.counter = 0

    def run(self) -> Program:
        body = self.program.func.body
        if isinstance(body, BlockRealize):
            self.realize(body)
        elif isinstance(body, Block):
            self.block(None, body)
        else:
            self.stmt(body)
        return self.program

    # ------------------------------------------------------------ statements

    def stmt(self, stmt: Stmt | None) -> None:
        if stmt is None:
            return
        if isinstance(stmt, SeqStmt):
            for item in stmt.stmts:
                self.stmt(item)
        elif isinstance(stmt, For):
            self.exprs(stmt.min, stmt.extent)
            self.for_loop(stmt)
        elif isinstance(stmt, BlockRealize):
            self.realize(stmt)
        elif isinstance(stmt, Block):
            self.block(None, stmt)
        elif isinstance(stmt, BufferStore):
            self.raw(stmt.buffer)
            self.exprs(stmt.value, *stmt.indices)
        elif isinstance(stmt, IfThenElse):
            self.exprs(stmt.condition)
            self.stmt(stmt.then_case)
            self.stmt(stmt.else_case)
        elif isinstance(stmt, LetStmt):
            self.exprs(stmt.value)
            self.stmt(stmt.body)
        elif isinstance(stmt, Allocate):
            if self.kernel is not None:
                self.kernel.allocations.append(stmt.buffer)
            self.stmt(stmt.body)
        else:
            for name in type(stmt).child_fields():
                value = getattr(stmt, name)
                for item in value if isinstance(value, tuple) else (value,):
                    if isinstance(item, PrimExpr):
                        self.exprs(item)
                    elif isinstance(item, Stmt):
                        self.stmt(item)

    def for_loop(self, loop: For) -> None:
        started = False
        if is_thread_loop(loop) and self.kernel is None:
            self.kernel = Kernel(loop)
            self.program.kernels.append(self.kernel)
            started = True
        if is_thread_loop(loop) and self.kernel is not None:
            self.kernel.thread_loops.append(loop)
        self.loops.append(loop)
        self.stmt(loop.body)
        self.loops.pop()
        if started:
            self.kernel = None

    def realize(self, realize: BlockRealize) -> None:
        self.exprs(realize.predicate, *realize.iter_values)
        self.block(realize, realize.block)

    def block(self, realize: BlockRealize | None, block: Block) -> None:
        parent = self.block_stack[-1] if self.block_stack else None
        first_loop = 0
        if parent is not None:
            first_loop = len(parent.all_loops)
        info = BlockInfo(
            realize=realize,
            block=block,
            parent=parent,
            loops=list(self.loops[first_loop:]),
            all_loops=list(self.loops),
            order=self.counter,
            kernel=self.kernel,
        )
        self.counter += 1
        self.program.blocks.append(info)
        if parent is not None:
            parent.children.append(info)
        if self.kernel is not None:
            self.kernel.blocks.append(info)
            self.kernel.allocations.extend(block.alloc_buffers)
        self.block_stack.append(info)
        for match in block.match_buffers:
            self.exprs(*[r.min for r in match.source.region], *[r.extent for r in match.source.region])
        self.stmt(block.init)
        self.stmt(block.body)
        self.block_stack.pop()

    # ------------------------------------------------------------ expressions

    def raw(self, buffer: Buffer) -> None:
        if self.block_stack:
            scope = self.block_stack[-1]
            self.program.raw_access.setdefault(id(scope.block), set()).add(id(buffer))

    def exprs(self, *exprs: PrimExpr) -> None:
        for expr in exprs:
            self.expr(expr)

    def expr(self, expr: PrimExpr) -> None:
        if isinstance(expr, BufferLoad):
            self.raw(expr.buffer)
        elif isinstance(expr, Call):
            entry = (expr, list(self.loops))
            self.program.calls.append(entry)
            if self.kernel is not None:
                self.kernel.calls.append(entry)
        for name in type(expr).child_fields():
            value = getattr(expr, name)
            for item in value if isinstance(value, tuple) else (value,):
                if isinstance(item, PrimExpr):
                    self.expr(item)


def walk(func: PrimFunc) -> Program:
    """The blocks, kernels and calls of ``func``."""
    return _Walker(func).run()


def call_name(call: Call) -> str:
    """The name a call is known by: its op, or the callee of an extern / LLVM call."""
    if call.args and isinstance(call.args[0], StringImm) and call.op.startswith(("call_", "tir.call")):
        return call.args[0].value
    return call.op
