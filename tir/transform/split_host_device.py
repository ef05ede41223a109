"""``split_host_device``: thread-bound loop nests become device kernels (CUDA pipeline).

An outermost loop bound to ``blockIdx.*`` / ``threadIdx.*`` starts a kernel: the loop and its
subtree become a device PrimFunc, and the host function launches it with a
``tir.cuda_launch`` call in its place. Before (lowered, 1-D buffers)::

    def add(A: T.Buffer((1024,), "float32"), B: T.Buffer((1024,), "float32")):
        for bx in T.thread_binding(8, thread="blockIdx.x"):
            for tx in T.thread_binding(128, thread="threadIdx.x"):
                B[bx * 128 + tx] = A[bx * 128 + tx] + 1.0

After: the module holds ``add`` (host) and ``add_kernel0`` (device)::

    def add(A, B):                      # attrs: param_shapes, "kernels": ("add_kernel0",)
        T.tir.cuda_launch("handle", "add_kernel0", 8, 1, 1, 128, 1, 1, 0)

    def add_kernel0(A, B):              # attrs: "kernel": True, "grid", "block", ...
        for bx in T.thread_binding(8, thread="blockIdx.x"):
            for tx in T.thread_binding(128, thread="threadIdx.x"):
                B[bx * 128 + tx] = A[bx * 128 + tx] + 1.0

Device function attrs: ``"kernel": True``, ``"grid"`` / ``"block"`` (x, y, z extents: the
largest extent of the loops bound to each tag; 1 for an unused tag), ``"thread_extents"``
(tag -> extent), ``"shared_bytes"`` (dynamic shared memory: 0 here, set by
``plan_dynamic_shared_memory`` for kernels that need more than static memory holds),
``"host"`` (the host function's name). Kernel parameters are the host buffers the kernel
touches, in the host's parameter order, then the scalar parameters it uses.

Limits (refused with a ``LoweringError`` that says so): the host function may hold only
kernels, in sequence (no host-side loop, store, branch or global allocation around them);
``vthread`` bindings are not supported; a tag bound by several loops of one kernel needs
constant extents.
"""

from __future__ import annotations

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
    IRModule,
    IRVisitor,
    PrimExpr,
    PrimFunc,
    SeqStmt,
    Stmt,
    StringImm,
    Var,
    free_vars,
)
from tir.ir.dtype import as_dtype
from tir.ir.ops import OpInfo, get_op, register_op
from tir.transform._common import LoweringError, make_seq

__all__ = ["KERNEL_ATTR", "LAUNCH_OP", "split_host_device"]

#: The op a host function launches a kernel with:
#: ``(name, grid_x, grid_y, grid_z, block_x, block_y, block_z, shared_bytes)``.
LAUNCH_OP = "tir.cuda_launch"
KERNEL_ATTR = "kernel"
HANDLE = as_dtype("handle")

if get_op(LAUNCH_OP) is None:
    register_op(
        OpInfo(
            LAUNCH_OP,
            8,
            8,
            "explicit",
            pure=False,
            doc="launch the device kernel NAME: (NAME, grid x, y, z, block x, y, z, dynamic shared bytes)",
        )
    )

_GRID_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
_BLOCK_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")


def _is_thread_loop(stmt: Stmt) -> bool:
    return isinstance(stmt, For) and stmt.kind is ForKind.THREAD_BINDING


class _KernelUses(IRVisitor):
    """Buffers, variables and thread-bound loops of a kernel body."""

    def __init__(self) -> None:
        self.buffers: dict[Buffer, None] = {}
        self.vars: dict[Var, None] = {}
        self.thread_loops: list[For] = []

    def visit_BufferLoad(self, node: BufferLoad) -> None:
        self.buffers.setdefault(node.buffer, None)
        self.generic_visit(node)

    def visit_BufferStore(self, node: BufferStore) -> None:
        self.buffers.setdefault(node.buffer, None)
        self.generic_visit(node)

    def visit_Var(self, node: Var) -> None:
        self.vars.setdefault(node, None)

    def visit_For(self, node: For) -> None:
        if node.kind is ForKind.THREAD_BINDING:
            self.thread_loops.append(node)
        self.generic_visit(node)


def _launch_extents(func: PrimFunc, kernel: For, loops: list[For]) -> dict[str, PrimExpr]:
    extents: dict[str, list[PrimExpr]] = {}
    for loop in loops:
        tag = loop.thread_tag or ""
        if tag.startswith("vthread"):
            raise LoweringError(
                f"split_host_device: function {func.name}: loop {loop.loop_var.name} is bound to {tag}; "
                "virtual threads are not supported by the CUDA backend yet"
            )
        extents.setdefault(tag, []).append(loop.extent)
    out: dict[str, PrimExpr] = {}
    for tag, values in extents.items():
        if len(values) == 1:
            out[tag] = values[0]
            continue
        ints = [v.value for v in values if isinstance(v, IntImm)]
        if len(ints) != len(values):
            raise LoweringError(
                f"split_host_device: function {func.name}: {tag} is bound by {len(values)} loops of one kernel, "
                "some of symbolic extent; give them constant extents"
            )
        out[tag] = IntImm(max(ints))
    return out


def _split_function(func: PrimFunc, taken: set[str]) -> list[PrimFunc]:
    """The host function and its kernels, in launch order (host first)."""
    kernels: list[PrimFunc] = []
    buffer_params = [p for p in func.params if isinstance(p, Buffer)]
    scalar_params = [p for p in func.params if isinstance(p, Var)]

    def outline(loop: For) -> Stmt:
        uses = _KernelUses()
        uses.visit(loop)
        extents = _launch_extents(func, loop, uses.thread_loops)
        for buffer in uses.buffers:
            if buffer.scope == "global" and buffer not in buffer_params:
                raise LoweringError(
                    f"split_host_device: function {func.name}: the kernel uses the global buffer {buffer.name}, "
                    "which is not a parameter; intermediate global buffers are not supported yet"
                )
        params: list[Buffer | Var] = [b for b in buffer_params if b in uses.buffers]
        shape_vars = {v for b in buffer_params for v in free_vars((*b.shape, *b.strides))}
        params += [v for v in scalar_params if v in uses.vars or (v in shape_vars and v in uses.vars)]
        index = len(kernels)
        name = f"{func.name}_kernel{index}"
        while name in taken:
            index += 1
            name = f"{func.name}_kernel{index}"
        taken.add(name)
        one = IntImm(1)
        grid = tuple(extents.get(tag, one) for tag in _GRID_TAGS)
        block = tuple(extents.get(tag, one) for tag in _BLOCK_TAGS)
        attrs = {
            KERNEL_ATTR: True,
            "grid": grid,
            "block": block,
            "thread_extents": extents,
            "shared_bytes": 0,
            "host": func.name,
        }
        kernels.append(PrimFunc(name, tuple(params), loop, attrs))
        return Evaluate(Call(HANDLE, LAUNCH_OP, (StringImm(name), *grid, *block, IntImm(0))))

    def host(stmt: Stmt) -> Stmt:
        if _is_thread_loop(stmt):
            assert isinstance(stmt, For)
            return outline(stmt)
        if isinstance(stmt, SeqStmt):
            return make_seq([host(s) for s in stmt.stmts])
        if isinstance(stmt, Evaluate) and isinstance(stmt.value, (IntImm, StringImm)):
            return stmt
        what = type(stmt).__name__
        detail = ""
        if isinstance(stmt, For):
            detail = f" (loop {stmt.loop_var.name}, {stmt.kind.value})"
        elif isinstance(stmt, Allocate):
            detail = f" (allocation of {stmt.buffer.name}, scope {stmt.buffer.scope})"
        raise LoweringError(
            f"split_host_device: function {func.name}: a {what}{detail} lies outside every thread-bound loop; "
            "the CUDA backend runs only kernels: bind the outermost loops to blockIdx.* / threadIdx.* "
            "(host-side loops, stores and allocations around kernels are not supported yet)"
        )

    probe = _KernelUses()
    probe.visit(func.body)
    if not probe.thread_loops:
        raise LoweringError(
            f"split_host_device: function {func.name} has no thread-bound loop; for a CUDA target bind loops "
            "to blockIdx.* / threadIdx.* (sch.bind), or build it for a CPU target ('llvm')"
        )
    body = host(func.body)
    if not kernels:
        raise LoweringError(
            f"split_host_device: function {func.name} has no thread-bound loop; for a CUDA target bind loops "
            "to blockIdx.* / threadIdx.* (sch.bind)"
        )
    host_func = func.replace(body=body, attrs={**func.attrs, "kernels": tuple(k.name for k in kernels)})
    return [host_func, *kernels]


def split_host_device(mod: IRModule) -> IRModule:
    """Outline the kernels of every function of ``mod`` (see the module docstring)."""
    functions: dict[str, PrimFunc] = {}
    taken = set(mod.functions)
    for func in mod.functions.values():
        if func.attrs.get(KERNEL_ATTR):
            functions[func.name] = func
            continue
        for part in _split_function(func, taken):
            functions[part.name] = part
    return IRModule(functions)
