"""Hoist the packing of layout-free parameters out of a program, into a prepack function run once.

A *layout-free* parameter is one whose value does not change from call to call -- a model's
weights -- so that any layout of it can be prepared ahead of time. A schedule that copies such
a parameter into another layout (``cache_read`` + ``transform_layout``: the B panels of a
matmul, the weight panels of a convolution) pays for the copy on every call; split off, the
copy runs once and the program reads the packed buffer directly, as onnxruntime's MLAS reads
prepacked weights.

``split_prepack(func, layout_free=None)`` names the layout-free parameters (default: the
function attribute ``"layout_free_buffers"``, a list of parameter names or positions) and moves every
top-level statement of the root block that reads only layout-free parameters (or what earlier
moved statements produced) and writes only root-allocated buffers nothing else writes into a
``prepack`` function. Before, with ``T.func_attr({"layout_free_buffers": ["W"]})``::

    W_global = T.alloc_buffer((192, 768, 16), "float32")
    for ax0, ax1 in T.grid(768, 3072):              # runs on every call
        with T.block("W_global"): ... W_global[v1 // 16, v0, v1 % 16] = W[v0, v1]
    for i, j_0, k, j_1 in T.grid(128, 192, 768, 16):
        with T.block("matmul"): ... acc[vi, vj] += X[vi, vk] * W_global[vj // 16, vk, vj % 16]

after: ``prepack(W, W_global)`` holds the first loop nest; ``main(X, bias, Y, W_global)``
the rest (``W`` is gone from its parameters: nothing else read it; the packed buffers come
last). The split is exact: the moved statements compute the same values from the same inputs,
once instead of every time; ``main`` with ``prepack``'s outputs computes what ``func`` computes.
A program with nothing to move gives ``prepack=None`` and ``main`` = ``func``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tir.ir import Block, BlockRealize, Buffer, BufferLoad, BufferStore, Call, PrimFunc, Stmt, Var
from tir.ir.expr import Let
from tir.ir.functor import free_vars, post_order_visit
from tir.ir.stmt import For, LetStmt, SeqStmt

__all__ = ["LAYOUT_FREE_ATTR", "PrepackSplit", "layout_free_names", "split_prepack"]

#: The function attribute naming the layout-free buffer parameters.
LAYOUT_FREE_ATTR = "layout_free_buffers"


@dataclass(frozen=True)
class PrepackSplit:
    """``func`` as ``prepack`` (run once on the layout-free parameters) and ``main``."""

    main: PrimFunc
    prepack: PrimFunc | None  # None: nothing to hoist, ``main`` is the program itself
    inputs: tuple[str, ...] = ()  # prepack's layout-free parameters (its first parameters)
    packed: tuple[str, ...] = ()  # what prepack writes for main (its last parameters, main's last)
    dropped: tuple[str, ...] = ()  # parameters of the program that main no longer takes

    def main_arguments(self, arguments: Mapping[str, Any], packed: Mapping[str, Any]) -> list[Any]:
        """``main``'s buffer arguments from the program's (by parameter name) and the packed ones."""
        values = {**arguments, **packed}
        return [values[buffer.name] for buffer in self.main.buffer_params]


@dataclass
class _Access:
    reads: set[Buffer]
    writes: set[Buffer]
    free: set[Var]  # variables used but not defined inside


def _access(stmt: Stmt) -> _Access:
    reads: set[Buffer] = set()
    writes: set[Buffer] = set()
    used: set[Var] = set()
    defined: set[Var] = set()
    buffers: set[Buffer] = set()
    inner: set[Buffer] = set()  # allocated inside: private to the statement
    views: list[Any] = []  # match_buffer views (a tensorized block's operands)

    def visit(node: Any) -> None:
        if isinstance(node, BufferLoad):
            reads.add(node.buffer)
        elif isinstance(node, BufferStore):
            writes.add(node.buffer)
        elif isinstance(node, Block):
            reads.update(region.buffer for region in node.reads)
            writes.update(region.buffer for region in node.writes)
            defined.update(iv.var for iv in node.iter_vars)
            inner.update(node.alloc_buffers)
            views.extend(node.match_buffers)
        elif isinstance(node, Call) and node.op == "tir.address_of":
            # An address handed to a call: the callee may read and write through it.
            for arg in node.args:
                if isinstance(arg, BufferLoad):
                    writes.add(arg.buffer)
        elif isinstance(node, For):
            defined.add(node.loop_var)
        elif isinstance(node, (LetStmt, Let)):
            defined.add(node.var)
        elif isinstance(node, Var):
            used.add(node)
        elif isinstance(node, Buffer):
            buffers.add(node)

    post_order_visit(stmt, visit)
    for match in views:  # a view is read; it writes its source only where something stores to it
        reads.add(match.source.buffer)
        if match.buffer in writes:
            writes.add(match.source.buffer)
    free = used - defined
    for buffer in buffers | reads | writes:  # a symbolic shape ties the statement to a call
        free.update(v for v in free_vars(buffer.shape) if v not in defined)
    return _Access(reads - inner, writes - inner, free)


def _statements(body: Stmt) -> list[Stmt]:
    return list(body.stmts) if isinstance(body, SeqStmt) else [body]


def _sequence(stmts: Sequence[Stmt]) -> Stmt:
    return stmts[0] if len(stmts) == 1 else SeqStmt(tuple(stmts))


def layout_free_names(func: PrimFunc, layout_free: Iterable[str | int] | None = None) -> tuple[str, ...]:
    """The names of ``func``'s layout-free buffer parameters: ``layout_free`` (names, or
    positions among the buffer parameters), by default ``func.attrs["layout_free_buffers"]``.
    One that is not a buffer parameter of ``func`` raises ``ValueError``."""
    given = tuple(layout_free if layout_free is not None else func.attrs.get(LAYOUT_FREE_ATTR, ()))
    params = func.buffer_params
    by_name = {buffer.name: buffer for buffer in params}
    unknown = [
        item
        for item in given
        if not (item in by_name if isinstance(item, str) else isinstance(item, int) and 0 <= item < len(params))
    ]
    if unknown:
        raise ValueError(
            f"{func.name}: layout-free {', '.join(map(repr, unknown))} is not a buffer parameter "
            f"(parameters: {', '.join(by_name)})"
        )
    return tuple(item if isinstance(item, str) else params[item].name for item in given)


def split_prepack(func: PrimFunc, layout_free: Iterable[str] | None = None) -> PrepackSplit:
    """Split the packing of ``func``'s layout-free parameters off (see the module docstring).

    ``layout_free``: parameter names, or positions among the buffer parameters (default:
    ``func.attrs["layout_free_buffers"]``; positions keep the structural hash of programs that
    differ only in parameter names equal). One that is not a buffer parameter of ``func``
    raises ``ValueError``.
    """
    names = layout_free_names(func, layout_free)
    by_name = {buffer.name: buffer for buffer in func.buffer_params}
    root = func.root_block
    if not names or root is None or not isinstance(func.body, BlockRealize):
        return PrepackSplit(func, None)
    constant = {by_name[name] for name in names}
    allocated = set(root.alloc_buffers)
    stmts = _statements(root.body)
    accesses = [_access(stmt) for stmt in stmts]
    writers: dict[Buffer, int] = {}
    for access in accesses:
        for buffer in access.writes:
            writers[buffer] = writers.get(buffer, 0) + 1

    available = set(constant)
    hoisted: list[int] = []
    for index, access in enumerate(accesses):
        if (
            access.reads
            and access.reads <= available
            and access.writes <= allocated
            and all(writers[buffer] == 1 for buffer in access.writes)
            and not access.free
        ):
            hoisted.append(index)
            available |= access.writes
    if not hoisted:
        return PrepackSplit(func, None)

    kept = [stmt for index, stmt in enumerate(stmts) if index not in hoisted]
    kept_access = [access for index, access in enumerate(accesses) if index not in hoisted]
    used_by_main = set().union(*(a.reads | a.writes for a in kept_access)) if kept_access else set()
    produced = set().union(*(accesses[i].writes for i in hoisted))
    exported = [buffer for buffer in root.alloc_buffers if buffer in produced and buffer in used_by_main]
    internal = tuple(buffer for buffer in root.alloc_buffers if buffer in produced and buffer not in used_by_main)
    inputs = [
        buffer
        for buffer in func.buffer_params
        if buffer in constant and any(buffer in accesses[i].reads for i in hoisted)
    ]
    if not exported:
        # The moved statements feed nothing that stays: leave the program as it is.
        return PrepackSplit(func, None)

    taken = {param.name for param in func.params}
    clash = [buffer.name for buffer in exported if buffer.name in taken]
    if clash:
        raise ValueError(f"{func.name}: packed buffer {clash[0]!r} has the name of a parameter")
    dropped = [buffer for buffer in inputs if buffer not in used_by_main]
    attrs = {key: value for key, value in func.attrs.items() if key != LAYOUT_FREE_ATTR}

    main_root = root.replace(
        body=_sequence(kept),
        alloc_buffers=tuple(b for b in root.alloc_buffers if b not in produced),
    )
    main = PrimFunc(
        func.name,
        tuple(p for p in func.params if p not in dropped) + tuple(exported),
        func.body.replace(block=main_root),
        attrs,
    )
    prepack_root = root.replace(
        body=_sequence([stmts[i] for i in hoisted]), alloc_buffers=internal, reads=(), writes=()
    )
    prepack = PrimFunc(
        f"{func.name}_prepack", tuple(inputs) + tuple(exported), func.body.replace(block=prepack_root), {}
    )
    return PrepackSplit(
        main,
        prepack,
        tuple(b.name for b in inputs),
        tuple(b.name for b in exported),
        tuple(b.name for b in dropped),
    )
