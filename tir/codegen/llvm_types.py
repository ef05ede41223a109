"""Dtypes as LLVM types, constants, and the numeric conversions of docs/lowering.md.

Two LLVM types stand for each dtype:

- the *value* type, used in registers: ``bool`` -> ``i1``, ``float16`` -> ``half``,
  ``bfloat16`` -> ``float`` (a float32 always holding a bfloat16-representable value, rounded to
  nearest even after every operation), vectors -> ``<N x T>``;
- the *storage* type, used in memory and at the entry ABI: ``bool`` -> ``i8`` (numpy's bool),
  ``bfloat16`` -> ``i16`` (the raw bits), otherwise the value type.

Every helper works on scalars and vectors alike: constants are splatted to the operand's type.
"""

from __future__ import annotations

import functools
import struct

import llvmlite.ir as ir
import numpy as np

from tir.codegen.features import CodegenError
from tir.ir.dtype import DataType

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F16 = ir.HalfType()
F32 = ir.FloatType()
F64 = ir.DoubleType()
PTR = ir.PointerType()
VOID = ir.VoidType()


def _scalar_value_type(dtype: DataType) -> ir.Type:
    if dtype.kind == "bool":
        return I1
    if dtype.kind in ("int", "uint"):
        return ir.IntType(dtype.bits)
    if dtype.kind == "float":
        return {16: F16, 32: F32, 64: F64}[dtype.bits]
    if dtype.kind == "bfloat":
        return F32
    if dtype.kind == "handle":
        return PTR
    raise CodegenError(f"no LLVM type for dtype {dtype}")


def _with_lanes(elem: ir.Type, lanes: int) -> ir.Type:
    return elem if lanes == 1 else ir.VectorType(elem, lanes)


def value_type(dtype: DataType) -> ir.Type:
    """The register type of ``dtype``."""
    return _with_lanes(_scalar_value_type(dtype.element), dtype.lanes)


def storage_type(dtype: DataType) -> ir.Type:
    """The in-memory type of ``dtype`` (bool: i8; bfloat16: i16 bits)."""
    if dtype.kind == "bool":
        return _with_lanes(I8, dtype.lanes)
    if dtype.kind == "bfloat":
        return _with_lanes(I16, dtype.lanes)
    return value_type(dtype)


def storage_bytes(dtype: DataType) -> int:
    """Bytes one lane of ``dtype`` occupies in memory."""
    return 1 if dtype.kind == "bool" else dtype.bits // 8


def element_of(ty: ir.Type) -> ir.Type:
    return ty.element if isinstance(ty, ir.VectorType) else ty


def lanes_of(ty: ir.Type) -> int:
    return ty.count if isinstance(ty, ir.VectorType) else 1


def like(ty: ir.Type, elem: ir.Type) -> ir.Type:
    """``elem`` with the lanes of ``ty``."""
    return _with_lanes(elem, lanes_of(ty))


def mangle(ty: ir.Type) -> str:
    """LLVM's overloaded-intrinsic suffix of a type: ``f32``, ``v8f32``, ``i1``, ``p0``."""
    if isinstance(ty, ir.VectorType):
        return f"v{ty.count}{mangle(ty.element)}"
    if isinstance(ty, ir.IntType):
        return f"i{ty.width}"
    if isinstance(ty, ir.HalfType):
        return "f16"
    if isinstance(ty, ir.FloatType):
        return "f32"
    if isinstance(ty, ir.DoubleType):
        return "f64"
    if isinstance(ty, ir.PointerType):
        return "p0"
    raise CodegenError(f"cannot mangle LLVM type {ty}")


# ---------------------------------------------------------------- constants


def round_float(value: float, dtype: DataType) -> float:
    """``value`` rounded to the float dtype (bfloat16: to nearest even, as the interpreter)."""
    if dtype.kind == "bfloat":
        from tir.interp.runtime import to_bfloat16

        return float(to_bfloat16(value))
    if dtype.bits == 16:
        return float(np.float16(value))
    if dtype.bits == 32:
        return float(np.float32(value))
    return float(value)


def const(ty: ir.Type, value: int | float) -> ir.Constant:
    """A constant of ``ty``, splatted over the lanes of a vector type."""
    elem = element_of(ty)
    if isinstance(elem, ir.IntType):
        value = int(value)
        # llvmlite prints the Python int; keep it in the signed range of the width.
        mask = (1 << elem.width) - 1
        value &= mask
        if elem.width > 1 and value >> (elem.width - 1):
            value -= 1 << elem.width
        scalar = ir.Constant(elem, value)
    else:
        scalar = ir.Constant(elem, float(value))
    if isinstance(ty, ir.VectorType):
        return ir.Constant(ty, [scalar] * ty.count)
    return scalar


def float_bits(value: float) -> int:
    """The IEEE float32 bit pattern of ``value``."""
    return int(struct.unpack("<I", struct.pack("<f", value))[0])


# ---------------------------------------------------------------- intrinsic declarations


def declare(module: ir.Module, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    """The function ``name`` of ``module``, declared on first use."""
    existing = module.globals.get(name)
    if existing is not None:
        if not isinstance(existing, ir.Function):
            raise CodegenError(f"{name} is already a global that is not a function")
        if existing.function_type.return_type != ret or list(existing.function_type.args) != list(args):
            raise CodegenError(
                f"function {name} used with two signatures: {existing.function_type} and {ir.FunctionType(ret, args)}"
            )
        return existing
    return ir.Function(module, ir.FunctionType(ret, args), name)


def canonical_intrinsic_name(name: str, ret: ir.Type, args: list[ir.Type]) -> str:
    """The full (mangled) name LLVM gives intrinsic ``name`` called with these types.

    ``llvm.fma`` with ``<8 x float>`` operands is ``llvm.fma.v8f32``; an already mangled name
    comes back unchanged. LLVM itself does the mangling (it parses a declaration), so every
    overloaded intrinsic is named right; a signature LLVM rejects is a ``CodegenError``.
    """
    return _canonical_name_cached(name, str(ir.FunctionType(ret, args)))


@functools.cache
def _canonical_name_cached(name: str, signature: str) -> str:
    import llvmlite.binding as llvm

    ret, _, rest = signature.partition(" (")
    declaration = f'declare {ret} @"{name}"({rest}'
    try:
        module = llvm.parse_assembly(declaration)
        module.verify()
    except RuntimeError as exc:
        raise CodegenError(
            f"LLVM rejects the intrinsic {name} with signature {signature}: {str(exc).strip()}"
        ) from None
    functions = list(module.functions)
    return functions[0].name if functions else name


def call_intrinsic(
    builder: ir.IRBuilder, base: str, ret: ir.Type, args: list[ir.Value], overloads: list[ir.Type]
) -> ir.Value:
    """Call ``llvm.<base>.<mangled overloads>``."""
    name = base + "".join("." + mangle(ty) for ty in overloads)
    fn = declare(builder.module, name, ret, [arg.type for arg in args])
    return builder.call(fn, args)


# ---------------------------------------------------------------- bfloat16


def bf16_round(builder: ir.IRBuilder, value: ir.Value) -> ir.Value:
    """Round float32 value(s) to the nearest bfloat16 (ties to even), returned as float32.

    NaN stays a quiet NaN with its sign (a plain rounding could carry a low payload into inf).
    """
    bits = bf16_bits(builder, value)
    return bf16_from_bits(builder, bits)


def bf16_bits(builder: ir.IRBuilder, value: ir.Value) -> ir.Value:
    """float32 value(s) -> i16 bfloat16 bits, rounding to nearest even."""
    int_ty = like(value.type, I32)
    bits = builder.bitcast(value, int_ty)
    upper = builder.lshr(bits, const(int_ty, 16))
    lsb = builder.and_(upper, const(int_ty, 1))
    rounded = builder.lshr(builder.add(builder.add(bits, const(int_ty, 0x7FFF)), lsb), const(int_ty, 16))
    quiet = builder.or_(upper, const(int_ty, 0x40))
    is_nan = builder.fcmp_unordered("uno", value, value)
    chosen = builder.select(is_nan, quiet, rounded)
    return builder.trunc(chosen, like(value.type, I16))


def bf16_from_bits(builder: ir.IRBuilder, bits: ir.Value) -> ir.Value:
    """i16 bfloat16 bits -> float32 value(s) (exact)."""
    int_ty = like(bits.type, I32)
    wide = builder.shl(builder.zext(bits, int_ty), const(int_ty, 16))
    return builder.bitcast(wide, like(bits.type, F32))


def f64_to_f32_round_to_odd(builder: ir.IRBuilder, value: ir.Value) -> ir.Value:
    """float64 -> float32 rounding to odd: when inexact, the neighbour toward zero with its last bit set.

    Rounding the result again to a format with at most 22 significant bits (float16 has 11,
    bfloat16 8) then equals rounding the float64 directly: no double-rounding error.
    """
    f32_ty = like(value.type, F32)
    i32_ty = like(value.type, I32)
    narrow = builder.fptrunc(value, f32_ty)
    back = builder.fpext(narrow, value.type)
    inexact = builder.fcmp_ordered("one", back, value)  # false for NaN and for exact values
    abs_back = call_intrinsic(builder, "llvm.fabs", back.type, [back], [back.type])
    abs_value = call_intrinsic(builder, "llvm.fabs", value.type, [value], [value.type])
    overshoot = builder.fcmp_ordered("ogt", abs_back, abs_value)
    bits = builder.bitcast(narrow, i32_ty)
    toward_zero = builder.select(overshoot, builder.sub(bits, const(i32_ty, 1)), bits)
    odd = builder.or_(toward_zero, const(i32_ty, 1))
    return builder.bitcast(builder.select(inexact, odd, bits), f32_ty)


# ---------------------------------------------------------------- casts


def _float_to_f32(builder: ir.IRBuilder, value: ir.Value, source: DataType) -> ir.Value:
    """A float value of ``source`` as float32, exactly or rounding to odd (for a second rounding)."""
    if source.kind == "bfloat" or source.bits == 32:
        return value
    if source.bits == 16:
        return builder.fpext(value, like(value.type, F32))
    return f64_to_f32_round_to_odd(builder, value)


def emit_cast(builder: ir.IRBuilder, value: ir.Value, source: DataType, target: DataType) -> ir.Value:
    """Convert ``value`` of dtype ``source`` to ``target`` with the rules of docs/lowering.md.

    float -> int truncates toward zero and saturates (NaN -> 0) through ``llvm.fpto[su]i.sat``;
    int -> narrower int wraps; float -> narrower float rounds to nearest even; anything -> bool is
    ``!= 0`` (a NaN is true).
    """
    if source.element == target.element:
        return value
    to_ty = value_type(target)
    if target.is_bool:
        if source.is_float:
            return builder.fcmp_unordered("!=", value, const(value.type, 0.0))
        return builder.icmp_unsigned("!=", value, const(value.type, 0))
    if target.is_integer:
        if source.is_bool:
            return builder.zext(value, to_ty)
        if source.is_integer:
            if target.bits < source.bits:
                return builder.trunc(value, to_ty)
            if target.bits > source.bits:
                return builder.sext(value, to_ty) if source.is_int else builder.zext(value, to_ty)
            return value  # int8 <-> uint8: the same bits
        if source.is_float:
            base = "llvm.fptosi.sat" if target.is_int else "llvm.fptoui.sat"
            return call_intrinsic(builder, base, to_ty, [value], [to_ty, value.type])
    if target.is_float:
        if source.is_bool:
            return builder.uitofp(value, to_ty)  # 0.0 or 1.0: exact in every float type
        if source.is_integer:
            if target.kind == "bfloat":
                wide = (
                    builder.sitofp(value, like(value.type, F64))
                    if source.is_int
                    else builder.uitofp(value, like(value.type, F64))
                )
                return bf16_round(builder, f64_to_f32_round_to_odd(builder, wide))
            return builder.sitofp(value, to_ty) if source.is_int else builder.uitofp(value, to_ty)
        if source.is_float:
            if target.kind == "bfloat":
                return bf16_round(builder, _float_to_f32(builder, value, source))
            if source.kind == "bfloat":
                source_bits = 32
            else:
                source_bits = source.bits
            if target.bits > source_bits:
                return builder.fpext(value, to_ty)
            if target.bits < source_bits:
                if target.bits == 16 and source_bits == 64:
                    # Avoid LLVM's __truncdfhf2 libcall and its double rounding alternatives.
                    return builder.fptrunc(f64_to_f32_round_to_odd(builder, value), to_ty)
                return builder.fptrunc(value, to_ty)
            return value
    raise CodegenError(f"unsupported cast {source} -> {target}")
