"""Parallel launches: ``tir.parallel_launch`` -> ``GOMP_parallel`` with a static schedule.

``lower_parallel`` outlines each outermost parallel loop into a PrimFunc
``NAME(begin, end, <captured buffers and scalars>)`` running iterations ``[begin, end)``, and
leaves behind ``tir.parallel_launch("NAME", min, extent, <captured values>)``, where a captured
buffer is passed as ``tir.address_of(B[0])``.

The code generator lowers a launch to

    closure = [i64 min, i64 extent, captured...]        ; 8-byte slots on the caller's stack
    if (extent > 0) GOMP_parallel(NAME.launch, &closure, __tir_num_threads, 0)

and emits the trampoline ``void NAME.launch(ptr closure)``: each OpenMP thread takes the static
chunk ``[tid * c, min((tid + 1) * c, extent))`` with ``c = ceil(extent / num_threads)`` and calls
the outlined function on it. ``@__tir_num_threads`` is a global the runtime sets (0 lets
libgomp choose: ``OMP_NUM_THREADS`` or every core).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import llvmlite.ir as ir

from tir.codegen.llvm_types import I32, I64, PTR, VOID, const, declare, value_type
from tir.ir import Call, PrimFunc, StringImm
from tir.transform.lower_parallel import ADDRESS_OF_OP, LAUNCH_OP, OUTLINED_ATTR, PARALLEL_RANGE_ATTR

__all__ = ["ADDRESS_OF_OP", "LAUNCH_OP", "NUM_THREADS_SYMBOL", "OUTLINED_ATTR", "PARALLEL_RANGE_ATTR", "emit_launch"]

if TYPE_CHECKING:
    from tir.codegen.llvm import FunctionCodegen, ModuleCodegen

#: The exported global holding the thread count of every launch (0: libgomp's default).
NUM_THREADS_SYMBOL = "__tir_num_threads"


def emit_launch(fcg: FunctionCodegen, call: Call) -> ir.Value:
    """Code for ``tir.parallel_launch(name, min, extent, captured...)``; its value is 0."""
    mcg = fcg.mcg
    if len(call.args) < 3 or not isinstance(call.args[0], StringImm):
        raise fcg.error(f"{LAUNCH_OP} needs (name, min, extent, captured...)")
    name = call.args[0].value
    outlined = mcg.mod.functions.get(name)
    if outlined is None:
        raise fcg.error(f"{LAUNCH_OP} of {name!r}, which is not a function of the module")
    body = mcg.body_functions[name]
    expected = list(body.function_type.args)[2:]
    captured = [fcg.expr(arg) for arg in call.args[3:]]
    if [value.type for value in captured] != expected:
        raise fcg.error(
            f"{LAUNCH_OP} of {name!r} passes {len(captured)} captured values of types "
            f"{[str(value.type) for value in captured]}; the function takes {[str(ty) for ty in expected]}"
        )
    b = fcg.builder
    begin = fcg.to_i64(fcg.expr(call.args[1]), call.args[1].dtype)
    extent = fcg.to_i64(fcg.expr(call.args[2]), call.args[2].dtype)
    # The closure is an array of 8-byte slots: every scalar and pointer fits in one.
    field_types = [I64, I64, *expected]
    closure = fcg.alloca(ir.ArrayType(I64, len(field_types)), f"{name}.closure", 8)
    for position, value in enumerate([begin, extent, *captured]):
        b.store(value, b.gep(closure, [const(I64, position)], source_etype=I64), align=8)
    trampoline = _trampoline(mcg, outlined, field_types)
    gomp_parallel = declare(mcg.module, "GOMP_parallel", VOID, [PTR, PTR, I32, I32])
    with b.if_then(b.icmp_signed(">", extent, const(I64, 0))):
        threads = b.load(mcg.num_threads_global, typ=I32, align=4)
        b.call(gomp_parallel, [trampoline, closure, threads, const(I32, 0)])
    return const(I32, 0)


def _trampoline(mcg: ModuleCodegen, outlined: PrimFunc, field_types: list[ir.Type]) -> ir.Function:
    existing = mcg.trampolines.get(outlined.name)
    if existing is not None:
        return existing
    fn = ir.Function(mcg.module, ir.FunctionType(VOID, [PTR]), f"{outlined.name}.launch")
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    mcg.trampolines[outlined.name] = fn
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    fields = []
    for position, field_ty in enumerate(field_types):
        pointer = b.gep(fn.args[0], [const(I64, position)], source_etype=I64)
        fields.append(b.load(pointer, typ=field_ty, align=8))
    begin, extent = fields[0], fields[1]
    num_threads = b.sext(b.call(declare(mcg.module, "omp_get_num_threads", I32, []), []), I64)
    thread = b.sext(b.call(declare(mcg.module, "omp_get_thread_num", I32, []), []), I64)
    chunk = b.sdiv(b.add(extent, b.sub(num_threads, const(I64, 1))), num_threads)
    low = b.mul(thread, chunk)
    high = b.add(low, chunk)
    high = b.select(b.icmp_signed("<", high, extent), high, extent)
    loop_ty = value_type(outlined.params[0].dtype)  # type: ignore[union-attr]
    with b.if_then(b.icmp_signed("<", low, high)):
        first = _narrow(b, b.add(begin, low), loop_ty)
        last = _narrow(b, b.add(begin, high), loop_ty)
        b.call(mcg.body_functions[outlined.name], [first, last, *fields[2:]])
    b.ret_void()
    return fn


def _narrow(b: ir.IRBuilder, value: ir.Value, ty: ir.Type) -> ir.Value:
    return value if ty == I64 else b.trunc(value, ty)
