"""Float math calls (``T.exp``, ``T.erf``, ``T.pow``, ...) as LLVM intrinsics or libm calls.

LLVM intrinsics are used where they exist (``llvm.exp``, ``llvm.sqrt``, ``llvm.round`` ...: LLVM
expands them inline or calls libm itself, lane by lane for vectors). ``tanh`` and ``erf`` call
libm (``tanhf`` / ``erff``, ``tanh`` / ``erf``), scalarized for vectors. ``sigmoid`` and ``rsqrt``
are built from their definitions. float16 and bfloat16 compute in float32 and round the result
once to their type.

float32 vectors of ``exp`` (and so ``sigmoid``) and ``erf`` on a target with fused multiply-add
are computed inline instead, every lane at once: libm called lane by lane made GELU (erf) and
softmax (exp) a seventh of a BERT encoder's time. ``exp``: x = n ln2 + r (ln2 in two parts, so
n ln2 is exact), a degree-7 polynomial of r (Cephes' coefficients) and 2^n built in the exponent
bits in two halves (so results down to the subnormals round once); within 1 ulp of the exact
value, inf above 88.72, 0 below -103.97, NaN kept. ``erf``: odd; x + x q(x^2) below 0.875, else
1 - exp(-x^2) R(x) with R a degree-12 polynomial fitted to erfc(x) exp(x^2) on [0.875, 3.95]
(least squares, relative error), 1 above; within 1.3 ulp on [-4.5, 4.5] measured against
``math.erf`` (tests/codegen/test_llvm_intrinsics.py). Scalars keep libm.
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


# exp: Cody-Waite ln2 (the high part has 9 significant bits: n * _LN2_HI is exact for |n| < 2^15)
_LOG2E = 1.4426950408889634
_LN2_HI = 0.693359375
_LN2_LO = -2.12194440e-4
_EXP_POLY = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1)
_EXP_MAX = 88.72283935546875  # above: inf
_EXP_MIN = -103.97208  # below: 0 (under half the smallest subnormal)
# erf: x + x q(x^2) below _ERF_SPLIT (q's constant term is 2/sqrt(pi) - 1)
_ERF_SPLIT = 0.875
_ERF_SMALL = (
    0.12837916612625122, -0.37612637877464294, 0.11283741146326065, -0.026861967518925667,
    0.005207620095461607, -0.0008220503223128617, 8.71399897732772e-05,
)  # fmt: skip
# erf: 1 - exp(-x^2) R(u), u = (x - _ERF_MID) * _ERF_INV_HALF, below _ERF_ONE; 1 above
_ERF_MID = 2.4124999046325684
_ERF_INV_HALF = 0.6504064798355103
_ERF_ONE = 3.950000047683716
_ERF_LARGE = (
    0.2175081968307495, -0.1213119775056839, 0.06419628113508224, -0.0324355810880661,
    0.015722505748271942, -0.007335549686104059, 0.003313097171485424, -0.0014679584419354796,
    0.0006163621437735856, -0.00022122605878394097, 9.541266626911238e-05, -6.474246038123965e-05,
    2.2686657757731155e-05,
)  # fmt: skip


def _fma(b: ir.IRBuilder, x: ir.Value, y: ir.Value, z: ir.Value) -> ir.Value:
    return call_intrinsic(b, "llvm.fma", x.type, [x, y, z], [x.type])


def _horner(b: ir.IRBuilder, coefficients: tuple[float, ...], z: ir.Value) -> ir.Value:
    """sum c_k z^k, coefficients from c_0 up, one fused multiply-add per step."""
    acc: ir.Value = const(z.type, coefficients[-1])
    for c in coefficients[-2::-1]:
        acc = _fma(b, acc, z, const(z.type, c))
    return acc


def _vector_exp(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    ty = x.type
    ity = ir.VectorType(ir.IntType(32), ty.count)
    clamped = call_intrinsic(b, "llvm.maxnum", ty, [x, const(ty, -104.0)], [ty])
    clamped = call_intrinsic(b, "llvm.minnum", ty, [clamped, const(ty, 88.8)], [ty])
    n = call_intrinsic(b, "llvm.rint", ty, [b.fmul(clamped, const(ty, _LOG2E))], [ty])
    r = _fma(b, n, const(ty, -_LN2_HI), clamped)
    r = _fma(b, n, const(ty, -_LN2_LO), r)
    poly = _horner(b, _EXP_POLY[::-1], r)
    y = b.fadd(_fma(b, poly, b.fmul(r, r), r), const(ty, 1.0))
    # 2^n as two powers of two, each a normal float (n is in [-150, 128])
    whole = b.fptosi(n, ity)
    half = b.ashr(whole, const(ity, 1))
    scales = [b.bitcast(b.shl(b.add(part, const(ity, 127)), const(ity, 23)), ty) for part in (half, b.sub(whole, half))]
    result = b.fmul(b.fmul(y, scales[0]), scales[1])
    result = b.select(b.fcmp_ordered(">", x, const(ty, _EXP_MAX)), const(ty, float("inf")), result)
    result = b.select(b.fcmp_ordered("<", x, const(ty, _EXP_MIN)), const(ty, 0.0), result)
    return b.select(b.fcmp_unordered("uno", x, x), x, result)


def _vector_erf(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    ty = x.type
    a = call_intrinsic(b, "llvm.fabs", ty, [x], [ty])
    square = b.fmul(a, a)
    small = _fma(b, a, _horner(b, _ERF_SMALL, square), a)
    u = b.fmul(b.fsub(a, const(ty, _ERF_MID)), const(ty, _ERF_INV_HALF))
    tail = b.fmul(_vector_exp(b, b.fsub(const(ty, 0.0), square)), _horner(b, _ERF_LARGE, u))
    large = b.fsub(const(ty, 1.0), tail)
    value = b.select(b.fcmp_ordered("<", a, const(ty, _ERF_SPLIT)), small, large)
    value = b.select(b.fcmp_ordered("<", a, const(ty, _ERF_ONE)), value, const(ty, 1.0))
    value = b.select(b.fcmp_unordered("uno", x, x), x, value)  # NaN stays NaN
    return call_intrinsic(b, "llvm.copysign", ty, [value, x], [ty])


def _inline_vector(ty: ir.Type, fused: bool) -> bool:
    """Whether ``exp`` / ``erf`` of ``ty`` are computed inline (float32 vectors, with FMA)."""
    return fused and isinstance(ty, ir.VectorType) and isinstance(ty.element, ir.FloatType)


def _compute(builder: ir.IRBuilder, op: str, args: list[ir.Value], fused: bool = False) -> ir.Value:
    """``op`` on float32 / float64 values (scalars or vectors); ``fused``: the target has FMA."""
    ty = args[0].type
    if op in ("exp", "erf") and _inline_vector(ty, fused):
        return _vector_exp(builder, args[0]) if op == "exp" else _vector_erf(builder, args[0])
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
        exp = _compute(builder, "exp", [negated], fused)
        return builder.fdiv(const(ty, 1.0), builder.fadd(const(ty, 1.0), exp))
    if op == "rsqrt":
        root = call_intrinsic(builder, "llvm.sqrt", ty, args, [ty])
        return builder.fdiv(const(ty, 1.0), root)
    raise CodegenError(f"no LLVM lowering for the math call T.{op}")


def emit_float_math(
    builder: ir.IRBuilder, op: str, args: list[ir.Value], dtype: DataType, fused: bool = False
) -> ir.Value:
    """``T.<op>(*args)`` of float dtype ``dtype`` (register values in, register value out);
    ``fused``: the target has fused multiply-add (vector exp / erf are then computed inline)."""
    if not dtype.is_float:
        raise CodegenError(f"T.{op} needs float operands, got {dtype}")
    if dtype.kind == "bfloat":
        # bfloat16 registers already hold float32 values; round the float32 result once.
        return bf16_round(builder, _compute(builder, op, args, fused))
    if dtype.bits == 16:
        wide_ty = like(args[0].type, F32)
        wide = [builder.fpext(arg, wide_ty) for arg in args]
        return builder.fptrunc(_compute(builder, op, wide, fused), args[0].type)
    return _compute(builder, op, args, fused)


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
