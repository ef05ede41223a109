"""LLVM IR generation (through llvmlite) for lowered programs.

``codegen_llvm(mod, target)`` turns an ``IRModule`` in the lowered form of docs/lowering.md
(block-free, 1-D buffers, vector expressions) into the text of one LLVM module, with the
target's triple and data layout set. Every function of the module becomes an internal
``i32 @"NAME.body"(ptr noalias %buf..., <scalar>...)``; every function that is not the outlined
body of a parallel loop also gets the entry ABI wrapper ``i32 @NAME(ptr %args)``, where
``args[i]`` is the data pointer of buffer parameter ``i`` or a pointer to the value of scalar
parameter ``i``.

As a convenience for programs written directly in lowered form, a function body may still be
the realize of the root block (no iterators): its ``alloc_buffer`` s are allocated; any other
block is refused. Multi-dimensional buffers are indexed row-major (or by their strides).

Numerics follow docs/lowering.md; see ``tir.codegen.llvm_types`` for dtypes and casts and
``tir.codegen.llvm_math`` for math calls.
"""

from __future__ import annotations

import llvmlite.ir as ir

from tir.codegen import llvm_parallel
from tir.codegen.features import CodegenError, check_module_intrinsics
from tir.codegen.llvm_function import FunctionCodegen, from_storage
from tir.codegen.llvm_target import data_layout
from tir.codegen.llvm_types import I32, I64, PTR, const, storage_bytes, storage_type, value_type
from tir.ir import Buffer, IRModule, PrimFunc
from tir.target import Target

__all__ = ["ModuleCodegen", "body_symbol", "codegen_llvm", "is_entry_function"]


def is_entry_function(func: PrimFunc) -> bool:
    """Whether ``func`` gets the entry ABI (it is not the outlined body of a parallel loop)."""
    return llvm_parallel.OUTLINED_ATTR not in func.attrs


def body_symbol(name: str) -> str:
    """The LLVM name of the internal function computing PrimFunc ``name``."""
    return f"{name}.body"


def codegen_llvm(mod: IRModule | PrimFunc, target: Target | str = "llvm") -> str:
    """LLVM IR text of ``mod`` for ``target`` (unoptimized; triple and data layout set).

    Raises ``CodegenError`` for a program it cannot compile, before LLVM sees it: a
    target-specific intrinsic the target lacks, a block other than the root block, a variable
    used where it is not defined, an unknown call.
    """
    target = Target.parse(target)
    if not target.is_cpu:
        raise CodegenError(f"codegen_llvm needs a CPU (llvm) target, got {target.text!r}")
    if isinstance(mod, PrimFunc):
        mod = IRModule({mod.name: mod})
    check_module_intrinsics(mod, target)
    return ModuleCodegen(mod, target).generate()


class _LoopID(ir.values.MDValue):
    """A self-referencing metadata node (a loop ID): compared and hashed by identity, since its
    operands contain itself."""

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)


class ModuleCodegen:
    """Emits one LLVM module for an IRModule."""

    def __init__(self, mod: IRModule, target: Target) -> None:
        self.mod = mod
        self.target = target
        self.module = ir.Module(name="tir")
        self.module.triple = target.triple
        self.module.data_layout = data_layout(target)
        self.body_functions: dict[str, ir.Function] = {}
        self.trampolines: dict[str, ir.Function] = {}
        self._num_threads: ir.GlobalVariable | None = None
        self._unroll_full: ir.values.MDValue | None = None
        self._vectorize_off: ir.values.MDValue | None = None

    @property
    def num_threads_global(self) -> ir.GlobalVariable:
        """``i32 @__tir_num_threads``: threads per parallel launch (0: the OpenMP default)."""
        if self._num_threads is None:
            var = ir.GlobalVariable(self.module, I32, llvm_parallel.NUM_THREADS_SYMBOL)
            var.initializer = const(I32, 0)
            var.align = 4
            self._num_threads = var
        return self._num_threads

    def loop_id(self, *, unroll_full: bool = False, vectorize_off: bool = False) -> ir.values.MDValue:
        """A new loop ID ``!n = !{!n, ...}`` for one loop's back edge with the properties asked for:

        - ``llvm.loop.unroll.full``: ``unroll_loops`` leaves an unrolled loop too large to copy
          in TIR as a loop marked ``pragma_unroll``; LLVM's unroller, which ``optimize``
          otherwise runs only for loops that ask for it, then unrolls it (copying in C++ is far
          cheaper);
        - ``llvm.loop.vectorize.enable = false``: a loop LLVM's vectorizer would miscompile
          (``tir.codegen.llvm_vectorizer_guard``), and every loop of a function the schedule
          vectorized (``FunctionCodegen.scheduled_vectors``)."""
        properties: list[ir.values.MDValue] = []
        if unroll_full:
            if self._unroll_full is None:
                self._unroll_full = self.module.add_metadata([ir.MetaDataString(self.module, "llvm.loop.unroll.full")])
            properties.append(self._unroll_full)
        if vectorize_off:
            if self._vectorize_off is None:
                self._vectorize_off = self.module.add_metadata(
                    [ir.MetaDataString(self.module, "llvm.loop.vectorize.enable"), ir.Constant(ir.IntType(1), 0)]
                )
            properties.append(self._vectorize_off)
        loop_id = _LoopID(self.module, properties, name=str(len(self.module.metadata)))
        loop_id.operands = (loop_id, *properties)
        return loop_id

    def generate(self) -> str:
        for name, func in self.mod.functions.items():
            self.body_functions[name] = self._declare_body(func)
        for name, func in self.mod.functions.items():
            FunctionCodegen(self, func, self.body_functions[name]).emit()
        for name, func in self.mod.functions.items():
            if is_entry_function(func):
                self._emit_entry_wrapper(func, self.body_functions[name])
        return str(self.module)

    def _declare_body(self, func: PrimFunc) -> ir.Function:
        arg_types = [PTR if isinstance(param, Buffer) else value_type(param.dtype) for param in func.params]
        fn = ir.Function(self.module, ir.FunctionType(I32, arg_types), body_symbol(func.name))
        fn.linkage = "internal"
        fn.attributes.add("nounwind")
        for param, arg in zip(func.params, fn.args):
            arg.name = param.name
            if isinstance(param, Buffer):
                arg.add_attribute("noalias")
        return fn

    def _emit_entry_wrapper(self, func: PrimFunc, body: ir.Function) -> None:
        fn = ir.Function(self.module, ir.FunctionType(I32, [PTR]), func.name)
        fn.args[0].name = "args"
        fn.attributes.add("nounwind")
        builder = ir.IRBuilder(fn.append_basic_block("entry"))
        values: list[ir.Value] = []
        for position, param in enumerate(func.params):
            slot = builder.gep(fn.args[0], [const(I64, position)], source_etype=PTR)
            pointer = builder.load(slot, name=f"{param.name}.ptr", typ=PTR, align=8)
            if isinstance(param, Buffer):
                values.append(pointer)
            else:
                raw = builder.load(
                    pointer, name=param.name, typ=storage_type(param.dtype), align=storage_bytes(param.dtype)
                )
                values.append(from_storage(builder, raw, param.dtype))
        builder.ret(builder.call(body, values))
