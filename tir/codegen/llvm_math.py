"""Float math calls (``T.exp``, ``T.erf``, ``T.pow``, ...) as LLVM intrinsics or libm calls.

LLVM intrinsics are used where they exist (``llvm.exp``, ``llvm.sqrt``, ``llvm.round`` ...: LLVM
expands them inline or calls libm itself, lane by lane for vectors). ``tanh`` and ``erf`` call
libm (``tanhf`` / ``erff``, ``tanh`` / ``erf``), scalarized for vectors. ``sigmoid`` and ``rsqrt``
are built from their definitions. float16 and bfloat16 compute in float32 and round the result
once to their type.
"""

from __future__ import annotations

import llvmlite.ir as ir

from tir.codegen.features import CodegenError
from tir.codegen.llvm_types import (
    F32,
    bf16_round,
    call_intrinsic,
    const,
    declare,
    element_of,
    like,
)
from tir.ir.dtype import DataType

#: Ops that map to an overloaded LLVM intrinsic of the same arity.
LLVM_MATH = {
    "exp": "llvm.exp",
    "exp2": "llvm.exp2",
    "log": "llvm.log",
    "log2": "llvm.log2",
    "log10": "llvm.log10",
    "sqrt": "llvm.sqrt",
    "sin": "llvm.sin",
    "cos": "llvm.cos",
    "floor": "llvm.floor",
    "ceil": "llvm.ceil",
    "round": "llvm.round",  # halfway cases away from zero
    "trunc": "llvm.trunc",
    "abs": "llvm.fabs",
    "pow": "llvm.pow",
    "fma": "llvm.fma",
}

#: Ops computed by a libm function: op -> (float32 name, float64 name).
LIBM_MATH = {
    "tanh": ("tanhf", "tanh"),
    "erf": ("erff", "erf"),
}

#: Every float op this module emits.
FLOAT_MATH_OPS = frozenset(LLVM_MATH) | frozenset(LIBM_MATH) | {"sigmoid", "rsqrt"}


def _scalarized_call(builder: ir.IRBuilder, fn: ir.Function, args: list[ir.Value]) -> ir.Value:
    """Call a scalar function on every lane of vector arguments."""
    ty = args[0].type
    if not isinstance(ty, ir.VectorType):
        return builder.call(fn, args)
    result: ir.Value = ir.Constant(ty, ir.Undefined)
    for lane in range(ty.count):
        index = ir.Constant(ir.IntType(32), lane)
        scalars = [builder.extract_element(arg, index) for arg in args]
        result = builder.insert_element(result, builder.call(fn, scalars), index)
    return result


def _compute(builder: ir.IRBuilder, op: str, args: list[ir.Value]) -> ir.Value:
    """``op`` on float32 / float64 values (scalars or vectors)."""
    ty = args[0].type
    if op in LLVM_MATH:
        return call_intrinsic(builder, LLVM_MATH[op], ty, args, [ty])
    if op in LIBM_MATH:
        name32, name64 = LIBM_MATH[op]
        elem = element_of(ty)
        name = name64 if isinstance(elem, ir.DoubleType) else name32
        fn = declare(builder.module, name, elem, [elem] * len(args))
        return _scalarized_call(builder, fn, args)
    if op == "sigmoid":
        (x,) = args
        negated = builder.fsub(const(ty, 0.0), x)
        exp = call_intrinsic(builder, "llvm.exp", ty, [negated], [ty])
        return builder.fdiv(const(ty, 1.0), builder.fadd(const(ty, 1.0), exp))
    if op == "rsqrt":
        root = call_intrinsic(builder, "llvm.sqrt", ty, args, [ty])
        return builder.fdiv(const(ty, 1.0), root)
    raise CodegenError(f"no LLVM lowering for the math call T.{op}")


def emit_float_math(builder: ir.IRBuilder, op: str, args: list[ir.Value], dtype: DataType) -> ir.Value:
    """``T.<op>(*args)`` of float dtype ``dtype`` (register values in, register value out)."""
    if not dtype.is_float:
        raise CodegenError(f"T.{op} needs float operands, got {dtype}")
    if dtype.kind == "bfloat":
        # bfloat16 registers already hold float32 values; round the float32 result once.
        return bf16_round(builder, _compute(builder, op, args))
    if dtype.bits == 16:
        wide_ty = like(args[0].type, F32)
        wide = [builder.fpext(arg, wide_ty) for arg in args]
        return builder.fptrunc(_compute(builder, op, wide), args[0].type)
    return _compute(builder, op, args)


def emit_isnan(builder: ir.IRBuilder, value: ir.Value) -> ir.Value:
    return builder.fcmp_unordered("uno", value, value)


def emit_int_abs(builder: ir.IRBuilder, value: ir.Value, signed: bool) -> ir.Value:
    """``|x|`` of an integer, wrapping at the minimum (``abs(-128)`` is ``-128`` in int8)."""
    if not signed:
        return value
    negative = builder.icmp_signed("<", value, const(value.type, 0))
    return builder.select(negative, builder.sub(const(value.type, 0), value), value)


def vector_reduce_or(builder: ir.IRBuilder, mask: ir.Value) -> ir.Value:
    """Whether any lane of an ``<N x i1>`` is set."""
    return call_intrinsic(builder, "llvm.vector.reduce.or", ir.IntType(1), [mask], [mask.type])
