"""``inject_software_pipeline``: annotated loops become prologue / steady state / epilogue.

A serial loop annotated (``sch.annotate(loop, ...)``) with

    ``"software_pipeline_stage"``: one stage number per statement of the loop body, and
    ``"software_pipeline_order"``: one position per statement (where it runs within a step)

is rewritten so that step ``t`` runs each statement ``s`` on iteration ``t - stage[s]``:
statements of stage 0 work ahead of those of stage 1 by one iteration, and so on. With
``num_stages = max(stage) + 1`` and a loop of ``N`` iterations there are ``N + num_stages - 1``
steps: the first ``num_stages - 1`` (prologue) and the last ``num_stages - 1`` (epilogue) are
unrolled with the statements that have an iteration to run; the steps in between form the
steady-state loop, which keeps the original loop variable.

Buffers allocated in the loop body and used by statements of different stages get a leading
dimension of ``max_stage - min_stage + 1`` versions, indexed by the iteration modulo that
count, so a stage can fill the next version while a later stage reads the current one.

For a CUDA target of sm_80 or newer, the stores of the producing stage that copy global
memory into such a shared buffer become ``T.ptx_cp_async(dst, src, bytes)`` (``cp.async``)
when the copy is an element copy of 4, 8 or 16 bytes, or a ``vectorized`` loop copying 4, 8
or 16 contiguous, provably aligned bytes; other copies stay ordinary loads. Each step then
commits its copies as one group (``T.ptx_cp_async_commit_group``) and waits, before the
first statement that reads them, for the groups it needs (``T.ptx_cp_async_wait_group(n)``:
all but the ``n`` newest complete), followed by a barrier; a barrier also precedes the copies
of each step after the first consumer ran, so no copy overwrites a version still being read.

Before (stages ``[0, 0, 1]``, order ``[0, 1, 2]``)::

    for k in range(4):
        A_shared = T.allocate((16, 16), "float16", scope="shared")
        for i, j in T.grid(16, 16):           # stage 0
            A_shared[i, j] = A[i, k * 16 + j]
        for i, j in T.grid(16, 16):           # stage 0
            B_shared[...] = ...
        for i, j in T.grid(16, 16):           # stage 1
            C[i, j] = C[i, j] + A_shared[i, j] * ...

After::

    A_shared = T.allocate((2, 16, 16), "float16", scope="shared")
    <stage 0 statements of iteration 0, version 0>             # prologue
    for k in range(1, 4):                                      # steady state
        <stage 0 statements of iteration k, version k % 2>
        <stage 1 statements of iteration k - 1, version (k - 1) % 2>
    <stage 1 statements of iteration 3, version 1>             # epilogue

The pass runs in the GPU pipeline after ``compact_allocations`` (which moves the shared
allocations into the loop body) and before ``flatten_buffers``. The annotations are trusted
as far as data flow across iterations goes (as TVM trusts them); the pass refuses, with a
``LoweringError``, malformed annotations, non-serial or symbolic-extent loops, and a buffer
read at a stage earlier than one that writes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tir.arith import is_multiple, simplify
from tir.ir import (
    Allocate,
    Buffer,
    BufferLoad,
    BufferStore,
    Call,
    Evaluate,
    For,
    ForKind,
    IntImm,
    IRMutator,
    IRVisitor,
    PrimExpr,
    PrimFunc,
    SeqStmt,
    Stmt,
    Var,
)
from tir.ir import expr as E
from tir.ir.dtype import as_dtype
from tir.ir.functor import substitute
from tir.target import Target
from tir.transform._common import LoweringError, make_seq, uses_var
from tir.transform.insert_syncthreads import syncthreads

__all__ = ["STAGE_KEY", "ORDER_KEY", "inject_software_pipeline"]

STAGE_KEY = "software_pipeline_stage"
ORDER_KEY = "software_pipeline_order"
_HANDLE = as_dtype("handle")
_SHARED = ("shared", "shared.dyn")
_ASYNC_BYTES = (4, 8, 16)


@dataclass
class _Accesses:
    reads: set[Buffer]
    writes: set[Buffer]


class _AccessCollector(IRVisitor):
    def __init__(self) -> None:
        self.reads: set[Buffer] = set()
        self.writes: set[Buffer] = set()

    def visit_BufferLoad(self, node: BufferLoad) -> None:
        self.reads.add(node.buffer)
        self.generic_visit(node)

    def visit_BufferStore(self, node: BufferStore) -> None:
        self.writes.add(node.buffer)
        self.generic_visit(node)

    def visit_Call(self, node: Call) -> None:
        # A tile op or cp.async names its destination by a load: count it as a write too.
        if node.args and isinstance(node.args[0], BufferLoad) and not node.op.startswith("tir."):
            self.writes.add(node.args[0].buffer)
        self.generic_visit(node)


def _accesses(stmt: Stmt) -> _Accesses:
    collector = _AccessCollector()
    collector.visit(stmt)
    return _Accesses(collector.reads, collector.writes)


class _Versioned(IRMutator):
    """Accesses of multi-versioned buffers get the version index in front."""

    def __init__(self, versions: dict[Buffer, tuple[Buffer, PrimExpr]]) -> None:
        self.versions = versions

    def visit_BufferLoad(self, node: BufferLoad) -> PrimExpr:
        node = self.generic_visit(node)  # type: ignore[assignment]
        entry = self.versions.get(node.buffer)
        if entry is None:
            return node
        return BufferLoad(entry[0], (entry[1], *node.indices))

    def visit_BufferStore(self, node: BufferStore) -> Stmt:
        node = self.generic_visit(node)  # type: ignore[assignment]
        entry = self.versions.get(node.buffer)
        if entry is None:
            return node
        return node.replace(buffer=entry[0], indices=(entry[1], *node.indices))


def _versioned_buffer(buffer: Buffer, count: int) -> Buffer:
    dtype = buffer.shape[0].dtype if buffer.shape else as_dtype("int32")
    shape = (IntImm(count, dtype), *buffer.shape)
    strides: tuple[PrimExpr, ...] = ()
    if buffer.strides:
        strides = (simplify(buffer.strides[0] * buffer.shape[0]), *buffer.strides)
    return buffer.replace(shape=shape, strides=strides)


def _flat_offset(buffer: Buffer, indices: Sequence[PrimExpr]) -> PrimExpr:
    if buffer.strides:
        strides = list(buffer.strides)
    else:
        strides = []
        acc: PrimExpr = IntImm(1, indices[-1].dtype)
        for extent in reversed(buffer.shape):
            strides.append(acc)
            acc = acc * extent
        strides.reverse()
    total: PrimExpr = IntImm(0, indices[-1].dtype)
    for index, stride in zip(indices, strides):
        total = total + index * stride
    return simplify(total)


def _async_copy(dst: BufferLoad, src: BufferLoad, nbytes: int) -> Stmt:
    return Evaluate(Call(_HANDLE, "ptx_cp_async", (dst, src, IntImm(nbytes))))


class _AsyncCopies(IRMutator):
    """Global -> shared copies into ``targets`` become ``ptx_cp_async`` where they can."""

    def __init__(self, targets: set[Buffer]) -> None:
        self.targets = targets
        self.converted = 0

    def copy_of(self, stmt: Stmt) -> tuple[BufferStore, BufferLoad] | None:
        if not isinstance(stmt, BufferStore) or stmt.buffer not in self.targets:
            return None
        value = stmt.value
        if not isinstance(value, BufferLoad) or value.buffer.scope != "global":
            return None
        if value.dtype != stmt.buffer.dtype or value.dtype.lanes != 1 or not stmt.indices or not value.indices:
            return None
        return stmt, value

    def visit_BufferStore(self, node: BufferStore) -> Stmt:
        copy = self.copy_of(node)
        if copy is None:
            return node
        nbytes = node.buffer.dtype.bits // 8
        if nbytes not in _ASYNC_BYTES:
            return node
        self.converted += 1
        return _async_copy(BufferLoad(node.buffer, node.indices), copy[1], nbytes)

    def visit_For(self, node: For) -> Stmt:
        if node.kind is ForKind.VECTORIZED and isinstance(node.extent, IntImm):
            vector = self.vector_copy(node)
            if vector is not None:
                self.converted += 1
                return vector
            return node  # a vectorized loop that is no plain copy stays as it is
        return self.generic_visit(node)  # type: ignore[return-value]

    def vector_copy(self, loop: For) -> Stmt | None:
        copy = self.copy_of(loop.body)
        if copy is None or not isinstance(loop.extent, IntImm):
            return None
        store, load = copy
        lanes = loop.extent.value
        nbytes = lanes * store.buffer.dtype.bits // 8
        if nbytes not in _ASYNC_BYTES:
            return None
        var = loop.loop_var
        zero = {var: loop.min}
        for indices in (store.indices, load.indices):
            if any(uses_var(index, var) for index in indices[:-1]):
                return None
            step = simplify(indices[-1] - substitute(indices[-1], zero))
            if step is not var and not (isinstance(step, Var) and step is var):
                return None
        dst = BufferLoad(store.buffer, tuple(substitute(i, zero) for i in store.indices))
        src = BufferLoad(load.buffer, tuple(substitute(i, zero) for i in load.indices))
        # cp.async needs both addresses aligned to the copy size (buffers start 16-byte aligned).
        for ref in (dst, src):
            if ref.buffer.elem_offset is not None or not is_multiple(_flat_offset(ref.buffer, ref.indices), lanes):
                return None
        return _async_copy(dst, src, nbytes)


def _int_list(value: Any, what: str, loop: For, count: int) -> list[int]:
    items = list(value) if isinstance(value, (list, tuple)) else None
    if items is not None:
        items = [i.value if isinstance(i, IntImm) else i for i in items]
    if items is None or len(items) != count or any(isinstance(i, bool) or not isinstance(i, int) for i in items):
        raise LoweringError(
            f"inject_software_pipeline: loop {loop.loop_var.name}: {what} must list one integer per statement "
            f"of the loop body ({count}), got {value!r}"
        )
    return items


def _commit() -> Stmt:
    return Evaluate(Call(_HANDLE, "ptx_cp_async_commit_group", ()))


def _wait(count: int) -> Stmt:
    return Evaluate(Call(_HANDLE, "ptx_cp_async_wait_group", (IntImm(count),)))


class _Pipeliner(IRMutator):
    def __init__(self, use_async: bool) -> None:
        self.use_async = use_async

    def visit_For(self, node: For) -> Stmt:
        node = self.generic_visit(node)  # type: ignore[assignment]
        if STAGE_KEY not in node.annotations:
            return node
        return self.pipeline(node)

    def pipeline(self, loop: For) -> Stmt:
        name = loop.loop_var.name
        if loop.kind is not ForKind.SERIAL:
            raise LoweringError(
                f"inject_software_pipeline: loop {name} is {loop.kind.value}; only serial loops can be pipelined"
            )
        if not isinstance(loop.extent, IntImm):
            raise LoweringError(f"inject_software_pipeline: loop {name} has a symbolic extent; it must be constant")
        allocations: list[Allocate] = []
        body = loop.body
        while isinstance(body, Allocate):
            allocations.append(body)
            body = body.body
        stmts = list(body.stmts) if isinstance(body, SeqStmt) else [body]
        stages = _int_list(loop.annotations[STAGE_KEY], STAGE_KEY, loop, len(stmts))
        order = _int_list(loop.annotations.get(ORDER_KEY, list(range(len(stmts)))), ORDER_KEY, loop, len(stmts))
        if sorted(order) != list(range(len(stmts))):
            raise LoweringError(
                f"inject_software_pipeline: loop {name}: {ORDER_KEY} must be a permutation of 0..{len(stmts) - 1}, "
                f"got {order}"
            )
        if min(stages) < 0:
            raise LoweringError(f"inject_software_pipeline: loop {name}: stages must be non-negative, got {stages}")
        max_stage = max(stages)
        local = {a.buffer for a in allocations}
        accesses = [_accesses(s) for s in stmts]
        for i, acc in enumerate(accesses):
            for j, other in enumerate(accesses):
                shared = acc.reads & other.writes & local
                if shared and stages[j] > stages[i]:
                    buffer = next(iter(shared))
                    raise LoweringError(
                        f"inject_software_pipeline: loop {name}: statement {i} (stage {stages[i]}) reads "
                        f"{buffer.name}, which statement {j} writes at the later stage {stages[j]}"
                    )
        # Versions: a local buffer touched at several stages.
        version_count: dict[Buffer, int] = {}
        for buffer in local:
            touching = [stages[i] for i, a in enumerate(accesses) if buffer in a.reads or buffer in a.writes]
            if touching and max(touching) > min(touching):
                version_count[buffer] = max(touching) - min(touching) + 1
        new_buffers = {b: _versioned_buffer(b, c) for b, c in version_count.items()}

        # Producers of multi-versioned shared buffers, all at one stage: candidates for cp.async.
        async_targets = {b for b in version_count if b.scope in _SHARED}
        producers = [i for i, a in enumerate(accesses) if a.writes & async_targets]
        producer_stage = {stages[i] for i in producers}
        async_stmts: dict[int, Stmt] = {}
        if self.use_async and len(producer_stage) == 1:
            for i in producers:
                converter = _AsyncCopies(async_targets)
                new = converter.visit(stmts[i])
                if converter.converted:
                    async_stmts[i] = new
        consumers = [i for i, a in enumerate(accesses) if a.reads & async_targets and i not in producers]

        extent = loop.extent.value
        var = loop.loop_var
        dtype = var.dtype

        def instance(index: int, iteration: PrimExpr) -> Stmt:
            """Statement ``index`` on ``iteration`` (0-based)."""
            stmt = async_stmts.get(index, stmts[index])
            versions = {
                old: (new_buffers[old], simplify(E.FloorMod(iteration, IntImm(version_count[old], dtype))))
                for old in new_buffers
            }
            stmt = substitute(stmt, {var: simplify(loop.min + iteration)})
            return _Versioned(versions).visit(stmt)  # type: ignore[no-any-return]

        sequence = sorted(range(len(stmts)), key=lambda i: order[i])
        first_async = min((order[i] for i in async_stmts), default=None)
        last_async = max((order[i] for i in async_stmts), default=None)
        first_consumer = min((order[i] for i in consumers), default=None) if async_stmts else None

        def step(iteration_of: dict[int, PrimExpr], committed: list[int], consumed: bool, t: int) -> list[Stmt]:
            """One step: ``iteration_of[i]`` is statement i's iteration, when it runs.

            ``committed`` lists (in order) the iterations whose copies were committed so far
            (``t``-relative numbers for the steady state); it is updated in place.
            """
            out: list[Stmt] = []
            for i in sequence:
                if i not in iteration_of:
                    continue
                if async_stmts and order[i] == first_async and consumed:
                    out.append(syncthreads())  # the versions being refilled are read no more
                if async_stmts and order[i] == first_consumer:
                    waits = [sum(1 for c in committed if c > t - stages[j]) for j in consumers if j in iteration_of]
                    out.append(_wait(min(waits)))
                    out.append(syncthreads())
                out.append(instance(i, iteration_of[i]))
                if async_stmts and order[i] == last_async:
                    out.append(_commit())
                    committed.append(t - next(iter(producer_stage)))
            return out

        steps: list[Stmt] = []
        committed: list[int] = []
        consumed = False
        # Prologue and epilogue steps run only the statements that have an iteration.
        prologue_end = min(max_stage, extent + max_stage)
        for t in range(prologue_end):
            runs = {i: IntImm(t - stages[i], dtype) for i in range(len(stmts)) if 0 <= t - stages[i] < extent}
            steps += step(runs, committed, consumed, t)
            consumed = consumed or any(i in runs for i in consumers)
        sp = next(iter(producer_stage)) if async_stmts else 0
        if extent > max_stage:
            # Steady state: every statement runs, the loop variable counts steps. How many
            # copy groups are outstanding is the same at every steady step: count them at a
            # representative step ``far`` (away from both ends) with the iterations committed
            # before it, and emit the statements with symbolic iterations.
            far = 1 << 20
            before = [far - 1 - sp - k for k in range(max_stage + 1)][::-1] if async_stmts else []
            runs = {i: simplify(var - loop.min - stages[i]) for i in range(len(stmts))}
            steady = loop.replace(
                min=simplify(loop.min + max_stage),
                extent=IntImm(extent - max_stage, dtype),
                body=make_seq(step(runs, before, True, far)),
                annotations={k: v for k, v in loop.annotations.items() if k not in (STAGE_KEY, ORDER_KEY)},
            )
            steps.append(steady)
            consumed = consumed or bool(consumers)
            last = extent - 1 - sp
            committed = [last - k for k in range(max_stage + 1) if last - k >= 0][::-1]
        for t in range(max(extent, prologue_end), extent + max_stage):
            runs = {i: IntImm(t - stages[i], dtype) for i in range(len(stmts)) if 0 <= t - stages[i] < extent}
            steps += step(runs, committed, consumed, t)
            consumed = True
        result = make_seq(steps)
        for allocation in reversed(allocations):
            result = allocation.replace(buffer=new_buffers.get(allocation.buffer, allocation.buffer), body=result)
        return result


def inject_software_pipeline(func: PrimFunc, target: Target | None = None) -> PrimFunc:
    """Pipeline every loop annotated with ``software_pipeline_stage`` (see the module docstring).

    ``cp.async`` copies are used for a CUDA target of compute capability 8.0 or more.
    """
    use_async = target is not None and target.is_cuda and bool(target.arch) and target.compute_capability >= 80
    body = _Pipeliner(use_async).visit(func.body)
    return func if body is func.body else func.replace(body=body)
