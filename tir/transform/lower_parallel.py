"""``lower_parallel``: each outermost parallel loop becomes its own function and a launch.

The loop's body is outlined into a new PrimFunc of the module, ``<func>_parallel_<k>``, whose
parameters are the bounds of the iterations it runs, then the buffers and the scalar variables
the body uses from outside (the captured ones); the loop is replaced by a launch call. Parallel
loops nested inside become serial. Before::

    def f(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32"), n: T.int32):
        for i in T.parallel(8):
            for j in range(8):
                B[i * 8 + j] = A[i * 8 + j] * T.float32(n)

After (two functions)::

    def f(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32"), n: T.int32):
        T.tir.parallel_launch("int32", "f_parallel_0", 0, 8, T.tir.address_of("handle", A[0]),
                              T.tir.address_of("handle", B[0]), n)

    def f_parallel_0(begin: T.int32, end: T.int32, A: T.Buffer((64,), "float32"),
                     B: T.Buffer((64,), "float32"), n: T.int32):
        T.func_attr({"parallel_body_of": "f", "parallel_range": (0, 8)})
        for i in range(begin, end):
            for j in range(8):
                B[i * 8 + j] = A[i * 8 + j] * T.float32(n)

The launch is ``Call("int32", "tir.parallel_launch", (StringImm(name), min, extent,
*captured))`` with each captured buffer passed as ``tir.address_of(B[0, ...])``; the code
generator runs it on OpenMP threads, each taking one contiguous chunk of ``[min, min + extent)``
(``tir.codegen.llvm_parallel``). The outlined function carries ``attrs["parallel_body_of"]``
(the name of the function it came from), which marks it as internal: it gets no entry ABI, and
``attrs["parallel_range"]``, the ``(min, extent)`` of the original loop.
"""

from __future__ import annotations

from typing import Any

from tir.ir import (
    Allocate,
    Buffer,
    BufferLoad,
    BufferStore,
    Call,
    DataType,
    Evaluate,
    For,
    ForKind,
    IntImm,
    IRModule,
    IRMutator,
    IRVisitor,
    Let,
    LetStmt,
    PrimFunc,
    Stmt,
    StringImm,
    Var,
    post_order_visit,
)

__all__ = ["ADDRESS_OF_OP", "LAUNCH_OP", "OUTLINED_ATTR", "PARALLEL_RANGE_ATTR", "lower_parallel", "outlined_functions"]

#: The op of a launch: ``(name, min, extent, captured...)``.
LAUNCH_OP = "tir.parallel_launch"
#: The op giving the address of a buffer element, how a launch passes a captured buffer.
ADDRESS_OF_OP = "tir.address_of"
#: The attribute naming the function an outlined parallel body came from.
OUTLINED_ATTR = "parallel_body_of"
#: The attribute holding ``(min, extent)`` of the outlined loop: ``begin`` and ``end`` lie in it.
PARALLEL_RANGE_ATTR = "parallel_range"


def lower_parallel(mod: IRModule | PrimFunc, target: Any = None) -> IRModule:
    """Outline every outermost parallel loop of every function of ``mod`` (see the module docstring).

    Returns ``mod`` itself when it has no parallel loop. ``target`` is accepted for a uniform
    pass signature and not used.
    """
    if isinstance(mod, PrimFunc):
        mod = IRModule({mod.name: mod})
    functions: dict[str, PrimFunc] = {}
    taken = set(mod.functions)
    changed = False
    for name, func in mod.functions.items():
        outliner = _Outliner(func, taken)
        body = outliner.visit(func.body)
        functions[name] = func if body is func.body else func.replace(body=body)
        for outlined in outliner.outlined:
            functions[outlined.name] = outlined
        changed = changed or body is not func.body
    return mod.replace(functions=functions) if changed else mod


def outlined_functions(mod: IRModule) -> list[PrimFunc]:
    """The functions of ``mod`` that are outlined parallel loop bodies."""
    return [func for func in mod.functions.values() if OUTLINED_ATTR in func.attrs]


class _Serialize(IRMutator):
    """Parallel loops become serial (inside an outlined body)."""

    def visit_For(self, loop: For) -> Stmt:
        body = self.visit(loop.body)
        kind = ForKind.SERIAL if loop.kind is ForKind.PARALLEL else loop.kind
        return loop.replace(body=body, kind=kind)


class _Outliner(IRMutator):
    def __init__(self, func: PrimFunc, taken: set[str]) -> None:
        self.func = func
        self.taken = taken
        self.outlined: list[PrimFunc] = []

    def visit_For(self, loop: For) -> Stmt:
        if loop.kind is not ForKind.PARALLEL:
            return self.generic_visit(loop)  # type: ignore[return-value]
        return self.outline(loop)

    def fresh_name(self) -> str:
        index = 0
        while f"{self.func.name}_parallel_{index}" in self.taken:
            index += 1
        name = f"{self.func.name}_parallel_{index}"
        self.taken.add(name)
        return name

    def outline(self, loop: For) -> Stmt:
        body = _Serialize().visit(loop.body)
        buffers, variables = _captured(body, loop.loop_var)
        if not (isinstance(loop.extent, IntImm) and loop.extent.value <= 1):  # one iteration cannot race
            _check_no_shared_writes(body, loop, buffers)
        name = self.fresh_name()
        begin = Var("begin", loop.loop_var.dtype)
        end = Var("end", loop.loop_var.dtype)
        inner = For(loop.loop_var, begin, end - begin, ForKind.SERIAL, body, annotations=dict(loop.annotations))
        # The iterations the whole loop runs: every chunk [begin, end) lies inside it, which the
        # code generator uses to prove indices non-negative.
        attrs = {OUTLINED_ATTR: self.func.name, PARALLEL_RANGE_ATTR: (loop.min, loop.extent)}
        self.outlined.append(PrimFunc(name, (begin, end, *buffers, *variables), inner, attrs))
        captured = [_address_of(buffer) for buffer in buffers] + list(variables)
        launch = Call(DataType("int", 32), LAUNCH_OP, (StringImm(name), loop.min, loop.extent, *captured))
        return Evaluate(launch, span=loop.span)


def _check_no_shared_writes(body: Stmt, loop: For, captured: list[Buffer]) -> None:
    """Refuse a parallel loop whose iterations all write the same elements of an outside buffer.

    A store into a buffer allocated outside the loop (or a parameter) whose index does not
    depend on the loop variable is written by every thread: a data race. The usual cause is a
    scratch buffer whose allocation was left above the parallel loop.
    """
    from tir.transform._common import LoweringError

    outside = set(captured)
    dependent: set[Var] = {loop.loop_var}
    problems: list[str] = []

    def uses_dependent(expr: object) -> bool:
        found = False

        def look(node: object) -> None:
            nonlocal found
            if isinstance(node, Var) and node in dependent:
                found = True

        post_order_visit(expr, look)  # type: ignore[arg-type]
        return found

    class FindSharedWrites(IRVisitor):
        def visit_LetStmt(self, stmt: LetStmt) -> None:
            if uses_dependent(stmt.value):
                dependent.add(stmt.var)
            self.generic_visit(stmt)

        def visit_BufferStore(self, store: BufferStore) -> None:
            if store.buffer in outside and store.buffer.name not in problems:
                if not any(uses_dependent(index) for index in store.indices):
                    problems.append(store.buffer.name)
            self.generic_visit(store)

    FindSharedWrites().visit(body)
    if problems:
        names = ", ".join(repr(name) for name in problems)
        raise LoweringError(
            f"lower_parallel: every iteration of the parallel loop {loop.loop_var.name!r} writes the same "
            f"elements of {names}, which live outside the loop: the threads would race. Allocate the "
            "buffer inside the loop (compute_at the block that writes it) or keep the loop serial."
        )


def _address_of(buffer: Buffer) -> Call:
    zeros = tuple(IntImm(0, extent.dtype) for extent in buffer.shape) or (IntImm(0),)
    return Call(DataType("handle", 64), ADDRESS_OF_OP, (BufferLoad(buffer, zeros),))


class _Uses(IRVisitor):
    """What ``_captured`` collects, in one walk that enters each buffer's fields once (a
    post-order walk re-walked a buffer's shape at every access)."""

    def __init__(self) -> None:
        self.used_vars: dict[Var, None] = {}
        self.used_buffers: dict[Buffer, None] = {}
        self.defined: set[Var] = set()
        self.allocated: set[Buffer] = set()

    def visit_Var(self, var: Var) -> None:
        self.used_vars.setdefault(var, None)

    def visit_Buffer(self, buffer: Buffer) -> None:
        if buffer not in self.used_buffers:
            self.generic_visit(buffer)  # variables of its shape are used too
            self.used_buffers[buffer] = None

    def visit_For(self, loop: For) -> None:
        self.generic_visit(loop)
        self.defined.add(loop.loop_var)

    def visit_LetStmt(self, stmt: LetStmt) -> None:
        self.generic_visit(stmt)
        self.defined.add(stmt.var)

    def visit_Let(self, expr: Let) -> None:
        self.generic_visit(expr)
        self.defined.add(expr.var)

    def visit_Allocate(self, stmt: Allocate) -> None:
        self.generic_visit(stmt)
        self.allocated.add(stmt.buffer)


def _captured(body: Stmt, loop_var: Var) -> tuple[list[Buffer], list[Var]]:
    """Buffers and variables ``body`` uses but does not define, in order of first use."""
    uses = _Uses()
    uses.defined.add(loop_var)
    uses.visit(body)
    buffers = [buffer for buffer in uses.used_buffers if buffer not in uses.allocated]
    variables = [var for var in uses.used_vars if var not in uses.defined and not var.dtype.is_handle]
    return buffers, variables
