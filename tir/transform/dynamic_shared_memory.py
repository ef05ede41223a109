"""``plan_dynamic_shared_memory``: kernels whose shared memory outgrows a static declaration.

A ``__shared__`` array declared in CUDA C++ is static shared memory, and nvcc refuses a kernel
whose static shared memory passes 48 KB ("uses too much shared data"), although GPUs since
Volta give a block up to 96-227 KB when the launch asks for it as *dynamic* shared memory (one
``extern __shared__`` array sized at launch, opted into with ``cuFuncSetAttribute``). Deep
software pipelines need that room: a 128 x 128 float16 tile pair with k tiles of 32 and 3
stages takes 57 KB.

This pass runs last in the GPU pipeline, on each kernel: when its ``shared`` buffers together
pass ``STATIC_SHARED_LIMIT`` bytes, or any buffer is declared ``shared.dyn``, every shared
buffer of the kernel gets an offset in one dynamic allocation (``dynamic_shared_layout``: in
order of first allocation, each offset aligned to the buffer's alignment and at least 16
bytes, so vector copies and ``cp.async`` stay aligned), and the kernel's ``"shared_bytes"``
attribute and the host's launch call carry the total. Offsets never overlap: buffers live for
the whole kernel, as static ones do. The CUDA code generator then declares, instead of
``__shared__ half A_shared[5120];``::

    extern __shared__ __align__(16) unsigned char tir_dynamic_shared[];
    half* A_shared = (half*)(tir_dynamic_shared + 0);

and the runtime launches with that many bytes (opting in above 48 KB). Kernels under the
limit are left as they are. Whether the total fits the GPU is the verifier's
``shared-memory`` rule and the runtime's launch check.
"""

from __future__ import annotations

from tir.analysis.verify.gpu import buffer_bytes
from tir.ir import Allocate, Buffer, Call, Evaluate, IntImm, IRModule, IRMutator, IRVisitor, PrimFunc, StringImm

__all__ = ["STATIC_SHARED_LIMIT", "dynamic_shared_layout", "plan_dynamic_shared_memory"]

#: The most static shared memory nvcc accepts in one kernel.
STATIC_SHARED_LIMIT = 48 * 1024

_SHARED_SCOPES = ("shared", "shared.dyn")


def _shared_allocations(kernel: PrimFunc) -> list[Buffer]:
    """The kernel's shared buffers with constant sizes, each once, in order of allocation."""
    found: list[Buffer] = []
    seen: set[int] = set()

    class _Collect(IRVisitor):
        def visit_Allocate(self, node: Allocate) -> None:
            buffer = node.buffer
            if buffer.scope in _SHARED_SCOPES and id(buffer) not in seen and _byte_size(buffer) is not None:
                seen.add(id(buffer))
                found.append(buffer)
            self.generic_visit(node)

    _Collect().visit(kernel.body)
    return found


def _byte_size(buffer: Buffer) -> int | None:
    shape = buffer.const_shape()
    return None if shape is None else buffer_bytes(buffer, list(shape))


def _layout(buffers: list[Buffer]) -> tuple[dict[int, int], int]:
    offsets: dict[int, int] = {}
    end = 0
    for buffer in buffers:
        align = max(16, buffer.align)
        start = -(-end // align) * align
        offsets[id(buffer)] = start
        end = start + (_byte_size(buffer) or 0)
    return offsets, end


def dynamic_shared_layout(kernel: PrimFunc) -> dict[int, int]:
    """Byte offsets (by ``id`` of the buffer) of a kernel's shared buffers in its dynamic shared
    memory; empty when the kernel's shared memory stays static (``"shared_bytes"`` is 0)."""
    if not int(kernel.attrs.get("shared_bytes", 0)):
        return {}
    return _layout(_shared_allocations(kernel))[0]


def _needs_dynamic(buffers: list[Buffer], total: int) -> bool:
    return total > STATIC_SHARED_LIMIT or any(b.scope == "shared.dyn" for b in buffers)


def plan_dynamic_shared_memory(mod: IRModule) -> IRModule:
    """Give every kernel whose shared memory cannot be static its dynamic size (module docstring)."""
    sizes: dict[str, int] = {}
    functions = dict(mod.functions)
    for name, func in mod.functions.items():
        if not func.attrs.get("kernel"):
            continue
        buffers = _shared_allocations(func)
        _, total = _layout(buffers)
        if _needs_dynamic(buffers, total):
            sizes[name] = total
            functions[name] = func.replace(attrs={**func.attrs, "shared_bytes": total})
    if not sizes:
        return mod
    from tir.transform.split_host_device import LAUNCH_OP

    class _Launches(IRMutator):
        def visit_Evaluate(self, node: Evaluate) -> Evaluate:
            call = node.value
            if isinstance(call, Call) and call.op == LAUNCH_OP and isinstance(call.args[0], StringImm):
                size = sizes.get(call.args[0].value)
                if size is not None:
                    return Evaluate(Call(call.dtype, call.op, (*call.args[:-1], IntImm(size))))
            return node

    for name, func in mod.functions.items():
        if not func.attrs.get("kernel"):
            body = _Launches().visit(func.body)
            if body is not func.body:
                functions[name] = func.replace(body=body)
    return mod.replace(functions=functions)
