"""Float math calls (``T.exp``, ``T.erf``, ``T.pow``, ...) as LLVM intrinsics, libm calls or inline code.

LLVM intrinsics are used where they exist (``llvm.exp``, ``llvm.sqrt``, ``llvm.round`` ...: LLVM
expands them inline or calls libm itself, lane by lane for vectors). ``tanh`` and ``erf`` call
libm (``tanhf`` / ``erff``, ``tanh`` / ``erf``), scalarized for vectors. ``sigmoid`` and ``rsqrt``
are built from their definitions. float16 and bfloat16 compute in float32 and round the result
once to their type. float32 vectors mostly take neither path (below).

float32 vectors of ``exp``, ``erf``, ``tanh``, ``log`` and ``pow`` (and so ``sigmoid``) on a
target with fused multiply-add are computed inline instead, every lane at once: libm called lane
by lane made GELU (erf, or tanh and pow) and softmax (exp) most of a transformer's elementwise
time (GPT-2's tanh-GELU over 64x3072 floats took 6 ms on one core, 0.15 ms inline). Scalars and
float64 keep libm. The errors below are the largest over every float32 input (all 2^32), against
float64 references, in ulp of the float32 result; each is under 1.5e-7 relative. Results that
are subnormal are within one subnormal step; inf, NaN and signed zeros come out as libm's
(tests/codegen/test_vector_math.py).

- ``exp``: x = n ln2 + r (ln2 in two parts, so n ln2 is exact), a degree-7 polynomial of r
  (Cephes' coefficients) and 2^n built in the exponent bits in two halves (so results down to
  the subnormals round once), or with AVX-512 one ``vscalefps`` (which rounds once too, and
  takes 17.8 -> 14.0 cycles a 16-lane vector of exp on a Xeon); within 1.02 ulp, inf above
  88.72, 0 below -103.97, NaN kept.
- ``erf``: odd; x + x q(x^2) below 0.875, else 1 - exp(-x^2) R(x) with R a degree-12 polynomial
  fitted to erfc(x) exp(x^2) on [0.875, 3.95] (least squares, relative error), 1 above; within
  1.57 ulp (the largest just above 0.875).
- ``tanh``: odd; a + a^3 p(a^2) below 0.625 (p of degree 4), else 1 - 2 / (exp(2a) + 1) (exp's
  inf above 44.4 gives exactly 1); within 1.34 ulp (the largest just above 0.625, where the
  subtraction from 1 loses a bit).
- ``log``: x = 2^e m with m in [sqrt(1/2), sqrt(2)) (subnormals scaled by 2^23 first), f = m - 1
  (exact), f - f^2/2 + f^3 p(f) with p of degree 7, plus e ln2 in two parts; within 0.79 ulp;
  -inf at +-0, NaN below 0, inf at inf.
- ``sigmoid``: 1 / (1 + exp(-x)), and exp(x) itself below -40 (they agree to 4e-18 there;
  exp(-x) overflows below -88.7, which gave 0 for results down to the subnormals), without
  exp's special cases (its argument never overflows; NaN is kept once); within 2.49 ulp on a
  vector, on AVX-512 (``vscalefps``) and AVX2 alike (the same formula on libm's exp for scalars
  and float64). 24.1 -> 17.2 cycles a 16-lane vector of x * sigmoid(x) on a Xeon.
- ``pow(x, y)``: 2^(y log2|x|) in float64 lanes, rounded once to float32: log2 by the atanh
  series of s = (m - 1) / (m + 1), 2^f by its Taylor series, both to about 1e-13 relative, so the
  product keeps the bits a float32 log would lose (its error is multiplied by |y log2 x|, up to
  150, in the result); within 0.5 ulp and double rounding. Then C99's cases: pow(x, +-0) =
  pow(1, y) = pow(-1, +-inf) = 1 even for NaN, negative x with an integer y signed by its parity
  (-0 and -inf included), NaN for a negative finite x with a finite non-integer y.

pow with a constant exponent (any float dtype, scalars too) is rewritten here, where the
constant is seen (``_pow``): 0 -> 1; 2, 3, 4 -> multiplications (float32 within 0.5, 1.3, 1.9
ulp; x^3 = x * x^2 as onnxruntime's cube; at the overflow threshold x * x^2 may round to inf
where x^3 rounds to the largest float, as for x = +-6.9814636e12); -1 -> 1 / x; 0.5 -> sqrt
(with pow's +0 at -0 and inf at -inf); -2, -3, -4, -0.5 -> 1 / x^n, 1 / sqrt(x), float32
computed in float64 and rounded once (within 0.5 ulp; a float32 x^n could leave the range where
1 / x^n does not), float64 rounding each step. Other exponents take the general path above
(float32 vectors) or libm.

The polynomials p of tanh and log were fitted by Lawson's iteration (least squares reweighted
by the error until it converges to the minimax) against mpmath on 3000-4000 Chebyshev points,
weighted for the relative error of the result; their coefficients rounded to float32 are within
9e-9 and 7e-9 relative of the functions (under 0.15 ulp).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import llvmlite.ir as ir

from tir.codegen.features import CodegenError
from tir.codegen.llvm_types import (
    F32,
    F64,
    I32,
    I64,
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


# tanh: a + a^3 p(a^2) below _TANH_SPLIT (p fitted as the module docstring says), else
# 1 - 2 / (exp(2a) + 1)
_TANH_SPLIT = 0.625
_TANH_SMALL = (
    -0.3333328068256378, 0.13331441581249237, -0.05373971536755562, 0.0206390880048275, -0.005704987328499556,
)  # fmt: skip
# log: x = 2^e m, m in [sqrt(1/2), sqrt(2)), f = m - 1 (exact), log(1 + f) = f - f^2/2 + f^3 p(f)
# (p fitted the same way); ln2 in two parts as for exp. _SQRT_HALF_BITS: the bits of sqrt(1/2).
_LOG_POLY = (
    0.3333333134651184, -0.2500081956386566, 0.20001226663589478, -0.16623356938362122,
    0.14201757311820984, -0.13160182535648346, 0.1276157796382904, -0.07634497433900833,
)  # fmt: skip
_SQRT_HALF_BITS = 0x3F3504F3
_F32_MIN_NORMAL = 2.0**-126
_SIGMOID_TAIL = -40.0  # sigmoid(x) = exp(x) below: exp(-40) = 4e-18 is under half a float64 ulp
# pow: integer exponents up to this size become multiplications (|n| = 4: two roundings)
_POW_MULTIPLY_MAX = 4
# pow in float64 lanes: log2(m) = s * sum_k c_k s^(2k), s = (m - 1) / (m + 1), c_k =
# 2 log2(e) / (2k + 1) (the atanh series: |s| <= 0.172, the first term left out is 4e-14
# relative); 2^f = sum_k (f ln2)^k / k! for |f| <= 1/2 (the first term left out is 2e-13).
_SQRT_HALF_BITS_64 = 0x3FE6A09E667F3BCD
_POW_LOG2_SERIES = tuple(2 * _LOG2E / (2 * k + 1) for k in range(8))
_POW_EXP2_SERIES = tuple(0.6931471805599453**k / math.factorial(k) for k in range(11))
_POW_T_LIMIT = 200.0  # |y log2 x| above: the float32 result is inf or 0 (2^+-200 in float64)


def _fma(b: ir.IRBuilder, x: ir.Value, y: ir.Value, z: ir.Value) -> ir.Value:
    return call_intrinsic(b, "llvm.fma", x.type, [x, y, z], [x.type])


def _horner(b: ir.IRBuilder, coefficients: tuple[float, ...], z: ir.Value) -> ir.Value:
    """sum c_k z^k, coefficients from c_0 up, one fused multiply-add per step."""
    acc: ir.Value = const(z.type, coefficients[-1])
    for c in coefficients[-2::-1]:
        acc = _fma(b, acc, z, const(z.type, c))
    return acc


def _scalef_fits(ty: ir.Type, scalef: bool) -> bool:
    """Whether ``vscalefps`` scales a vector of ``ty``: AVX-512 and 16 lanes (a zmm register)."""
    return scalef and isinstance(ty, ir.VectorType) and ty.count == 16


def _exp_core(b: ir.IRBuilder, x: ir.Value, scalef: bool) -> ir.Value:
    """exp(x) for x in [-104, 88.8] (clamped: outside, the result is 0 or inf already), without
    the special cases: y = e^r by the polynomial, times 2^n. With AVX-512, ``vscalefps`` scales
    by 2^n in one instruction (rounding once, to the subnormals too) where the two-halves
    construction takes nine: exp is most of a sigmoid, and a SiLU epilogue is a sigmoid per
    output element (EfficientNet)."""
    ty = x.type
    ity = ir.VectorType(ir.IntType(32), ty.count)
    # x < -104 ? -104 : x (a compare and select: one vmaxps; llvm.maxnum's NaN rule costs
    # three instructions, and NaN is handled by the callers)
    clamped = b.select(b.fcmp_ordered("<", x, const(ty, -104.0)), const(ty, -104.0), x)
    clamped = b.select(b.fcmp_ordered(">", clamped, const(ty, 88.8)), const(ty, 88.8), clamped)
    n = call_intrinsic(b, "llvm.rint", ty, [b.fmul(clamped, const(ty, _LOG2E))], [ty])
    r = _fma(b, n, const(ty, -_LN2_HI), clamped)
    r = _fma(b, n, const(ty, -_LN2_LO), r)
    poly = _horner(b, _EXP_POLY[::-1], r)
    y = b.fadd(_fma(b, poly, b.fmul(r, r), r), const(ty, 1.0))
    if _scalef_fits(ty, scalef):
        mask = ir.IntType(16)
        fn = declare(b.module, "llvm.x86.avx512.mask.scalef.ps.512", ty, [ty, ty, ty, mask, ir.IntType(32)])
        return b.call(fn, [y, n, y, const(mask, -1), const(ir.IntType(32), 4)])  # 4: current rounding
    # 2^n as two powers of two, each a normal float (n is in [-150, 128])
    whole = b.fptosi(n, ity)
    half = b.ashr(whole, const(ity, 1))
    scales = [b.bitcast(b.shl(b.add(part, const(ity, 127)), const(ity, 23)), ty) for part in (half, b.sub(whole, half))]
    return b.fmul(b.fmul(y, scales[0]), scales[1])


def _vector_exp(b: ir.IRBuilder, x: ir.Value, scalef: bool = False) -> ir.Value:
    ty = x.type
    result = _exp_core(b, x, scalef)
    result = b.select(b.fcmp_ordered(">", x, const(ty, _EXP_MAX)), const(ty, float("inf")), result)
    result = b.select(b.fcmp_ordered("<", x, const(ty, _EXP_MIN)), const(ty, 0.0), result)
    return b.select(b.fcmp_unordered("uno", x, x), x, result)


def _vector_sigmoid(b: ir.IRBuilder, x: ir.Value, scalef: bool = False) -> ir.Value:
    """1 / (1 + exp(-x)), and exp(x) itself below -40 (where the two agree to 4e-18 relative:
    exp(-x) overflows below -88.7 in float32 and gave 0 down to the subnormals). exp's special
    cases are not needed here: its argument is at most 40 (no overflow), the clamp at -104 gives
    0 below -103.97 as the select would, and NaN is kept once, at the end."""
    result = _logistic(b, x, lambda t: _exp_core(b, t, scalef))
    return b.select(b.fcmp_unordered("uno", x, x), x, result)


def _logistic(b: ir.IRBuilder, x: ir.Value, exp: Callable[[ir.Value], ir.Value]) -> ir.Value:
    """1 / (1 + exp(-x)), and exp(x) itself below ``_SIGMOID_TAIL``, on the given ``exp``."""
    ty = x.type
    tail = b.fcmp_ordered("<", x, const(ty, _SIGMOID_TAIL))
    e = exp(b.select(tail, x, b.fsub(const(ty, 0.0), x)))
    return b.select(tail, e, b.fdiv(const(ty, 1.0), b.fadd(const(ty, 1.0), e)))


def _vector_erf(b: ir.IRBuilder, x: ir.Value, scalef: bool = False) -> ir.Value:
    ty = x.type
    a = call_intrinsic(b, "llvm.fabs", ty, [x], [ty])
    square = b.fmul(a, a)
    small = _fma(b, a, _horner(b, _ERF_SMALL, square), a)
    u = b.fmul(b.fsub(a, const(ty, _ERF_MID)), const(ty, _ERF_INV_HALF))
    tail = b.fmul(_vector_exp(b, b.fsub(const(ty, 0.0), square), scalef), _horner(b, _ERF_LARGE, u))
    large = b.fsub(const(ty, 1.0), tail)
    value = b.select(b.fcmp_ordered("<", a, const(ty, _ERF_SPLIT)), small, large)
    value = b.select(b.fcmp_ordered("<", a, const(ty, _ERF_ONE)), value, const(ty, 1.0))
    value = b.select(b.fcmp_unordered("uno", x, x), x, value)  # NaN stays NaN
    return call_intrinsic(b, "llvm.copysign", ty, [value, x], [ty])


def _vector_tanh(b: ir.IRBuilder, x: ir.Value, scalef: bool = False) -> ir.Value:
    ty = x.type
    a = call_intrinsic(b, "llvm.fabs", ty, [x], [ty])
    square = b.fmul(a, a)
    small = _fma(b, b.fmul(a, square), _horner(b, _TANH_SMALL, square), a)
    # exp(2a) is inf above 44.4: 1 - 2 / inf is 1; a NaN passes through exp.
    denominator = b.fadd(_vector_exp(b, b.fadd(a, a), scalef), const(ty, 1.0))
    large = b.fsub(const(ty, 1.0), b.fdiv(const(ty, 2.0), denominator))
    value = b.select(b.fcmp_ordered("<", a, const(ty, _TANH_SPLIT)), small, large)
    return call_intrinsic(b, "llvm.copysign", ty, [value, x], [ty])


def _vector_log(b: ir.IRBuilder, x: ir.Value, scalef: bool = False) -> ir.Value:
    ty = x.type
    ity = ir.VectorType(I32, ty.count)
    subnormal = b.fcmp_ordered("<", x, const(ty, _F32_MIN_NORMAL))  # (and 0, negatives: replaced below)
    scaled = b.select(subnormal, b.fmul(x, const(ty, 2.0**23)), x)
    bits = b.bitcast(scaled, ity)
    # e = the exponent that puts m in [sqrt(1/2), sqrt(2)); m keeps the mantissa bits
    offset = b.sub(bits, const(ity, _SQRT_HALF_BITS))
    exponent = b.sub(b.ashr(offset, const(ity, 23)), b.select(subnormal, const(ity, 23), const(ity, 0)))
    mantissa = b.bitcast(b.sub(bits, b.and_(offset, const(ity, -(1 << 23)))), ty)
    f = b.fsub(mantissa, const(ty, 1.0))
    e = b.sitofp(exponent, ty)
    square = b.fmul(f, f)
    tail = b.fmul(b.fmul(square, f), _horner(b, _LOG_POLY, f))
    tail = _fma(b, e, const(ty, _LN2_LO), tail)
    tail = _fma(b, f, b.fmul(f, const(ty, -0.5)), tail)  # - f^2 / 2 rounded once with the rest
    result = _fma(b, e, const(ty, _LN2_HI), b.fadd(f, tail))
    result = b.select(b.fcmp_ordered("<", x, const(ty, 0.0)), const(ty, float("nan")), result)
    result = b.select(b.fcmp_ordered("==", x, const(ty, 0.0)), const(ty, float("-inf")), result)
    result = b.select(b.fcmp_ordered("==", x, const(ty, float("inf"))), x, result)
    return b.select(b.fcmp_unordered("uno", x, x), x, result)


def _log2_f64(b: ir.IRBuilder, a: ir.Value) -> ir.Value:
    """log2 of float64 lanes ``a`` >= 0 (widened float32 values: normal in float64), to about
    1e-16 relative plus 4e-14 relative of log2(m); 0 -> -inf, inf -> inf, NaN -> NaN."""
    ty = a.type
    lty = ir.VectorType(I64, ty.count)
    bits = b.bitcast(a, lty)
    offset = b.sub(bits, const(lty, _SQRT_HALF_BITS_64))
    exponent = b.sitofp(b.ashr(offset, const(lty, 52)), ty)
    mantissa = b.bitcast(b.sub(bits, b.and_(offset, const(lty, -(1 << 52)))), ty)
    s = b.fdiv(b.fsub(mantissa, const(ty, 1.0)), b.fadd(mantissa, const(ty, 1.0)))
    result = _fma(b, s, _horner(b, _POW_LOG2_SERIES, b.fmul(s, s)), exponent)
    result = b.select(b.fcmp_ordered("==", a, const(ty, 0.0)), const(ty, float("-inf")), result)
    result = b.select(b.fcmp_ordered("==", a, const(ty, float("inf"))), a, result)
    return b.select(b.fcmp_unordered("uno", a, a), a, result)


def _exp2_f64(b: ir.IRBuilder, t: ir.Value) -> ir.Value:
    """2^t of float64 lanes to about 2e-13 relative, with t clamped to +-_POW_T_LIMIT (so only
    results that round to float32 inf or 0 are changed); NaN stays NaN."""
    ty = t.type
    lty = ir.VectorType(I64, ty.count)
    clamped = call_intrinsic(b, "llvm.maxnum", ty, [t, const(ty, -_POW_T_LIMIT)], [ty])
    clamped = call_intrinsic(b, "llvm.minnum", ty, [clamped, const(ty, _POW_T_LIMIT)], [ty])
    n = call_intrinsic(b, "llvm.rint", ty, [clamped], [ty])
    fraction = b.fsub(clamped, n)  # exact, in [-1/2, 1/2]
    scale = b.bitcast(b.shl(b.add(b.fptosi(n, lty), const(lty, 1023)), const(lty, 52)), ty)
    result = b.fmul(_horner(b, _POW_EXP2_SERIES, fraction), scale)
    return b.select(b.fcmp_unordered("uno", t, t), t, result)


def _vector_pow(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    """float32 lanes of pow(x, y) as 2^(y log2|x|) computed in float64 lanes (so the product
    y log2|x| keeps the bits that a float32 log would lose: its error is multiplied by up to
    |y log2 x| in the result), rounded once to float32; then C99's signs and special cases."""
    ty = x.type
    wide = ir.VectorType(F64, ty.count)
    magnitude = b.fpext(call_intrinsic(b, "llvm.fabs", ty, [x], [ty]), wide)
    product = b.fmul(b.fpext(y, wide), _log2_f64(b, magnitude))
    result = b.fptrunc(_exp2_f64(b, product), ty)
    rounded = call_intrinsic(b, "llvm.rint", ty, [y], [ty])
    integral = b.fcmp_ordered("==", y, rounded)  # inf counts as even, NaN as neither
    half = b.fmul(y, const(ty, 0.5))
    odd = b.and_(integral, b.fcmp_ordered("one", call_intrinsic(b, "llvm.rint", ty, [half], [ty]), half))
    sign_bit = b.icmp_signed("<", b.bitcast(x, ir.VectorType(I32, ty.count)), const(ir.VectorType(I32, ty.count), 0))
    result = b.select(b.and_(sign_bit, odd), b.fneg(result), result)  # (-|x|)^odd, -0 included
    negative_finite = b.and_(b.fcmp_ordered("<", x, const(ty, 0.0)), b.fcmp_ordered(">", x, const(ty, float("-inf"))))
    result = b.select(b.and_(negative_finite, b.not_(integral)), const(ty, float("nan")), result)
    # pow(x, +-0) = pow(1, y) = pow(-1, +-inf) = 1, NaN or not
    one = b.or_(b.fcmp_ordered("==", y, const(ty, 0.0)), b.fcmp_ordered("==", x, const(ty, 1.0)))
    unit = b.fcmp_ordered("==", call_intrinsic(b, "llvm.fabs", ty, [x], [ty]), const(ty, 1.0))
    infinite = b.fcmp_ordered("==", call_intrinsic(b, "llvm.fabs", ty, [y], [ty]), const(ty, float("inf")))
    one = b.or_(one, b.and_(unit, infinite))
    return b.select(one, const(ty, 1.0), result)


def _integer_power(b: ir.IRBuilder, x: ir.Value, n: int) -> ir.Value:
    """x^n for n >= 1 by repeated squaring (x^3 = x * x^2, x^4 = (x^2)^2)."""
    result: ir.Value | None = None
    base = x
    while n:
        if n & 1:
            result = base if result is None else b.fmul(result, base)
        n >>= 1
        if n:
            base = b.fmul(base, base)
    assert result is not None
    return result


def _sqrt_pow(b: ir.IRBuilder, x: ir.Value) -> ir.Value:
    """pow(x, 0.5): sqrt, but +0 for -0 and inf for -inf (where sqrt gives -0 and NaN)."""
    ty = x.type
    root = b.fadd(call_intrinsic(b, "llvm.sqrt", ty, [x], [ty]), const(ty, 0.0))
    return b.select(b.fcmp_ordered("==", x, const(ty, float("-inf"))), const(ty, float("inf")), root)


def _pow(b: ir.IRBuilder, x: ir.Value, y: ir.Value, fused: bool, exponent: float | None) -> ir.Value:
    """pow(x, y); ``exponent``: y's value when it is a constant (the same in every lane)."""
    ty = x.type
    if exponent is not None:
        magnitude = abs(exponent)
        if exponent == 0.0:
            return const(ty, 1.0)  # even for x = NaN
        if exponent == -1.0:
            return b.fdiv(const(ty, 1.0), x)
        if exponent == 0.5:
            return _sqrt_pow(b, x)
        if magnitude.is_integer() and magnitude <= _POW_MULTIPLY_MAX and exponent > 0:
            return _integer_power(b, x, int(magnitude))  # float32: within 0.5 / 1.3 / 1.9 ulp for 2 / 3 / 4
        if (magnitude.is_integer() and magnitude <= _POW_MULTIPLY_MAX) or magnitude == 0.5:
            # 1 / x^n, 1 / sqrt(x): float32 computes in float64 and rounds once (float32 would
            # round twice, and x^n could leave the float32 range where 1 / x^n does not)
            wide = like(ty, F64) if isinstance(element_of(ty), ir.FloatType) else ty
            widened = b.fpext(x, wide) if wide != ty else x
            power = _sqrt_pow(b, widened) if magnitude == 0.5 else _integer_power(b, widened, int(magnitude))
            result = b.fdiv(const(wide, 1.0), power)
            return b.fptrunc(result, ty) if wide != ty else result
    if _inline_vector(ty, fused):
        return _vector_pow(b, x, y)
    return call_intrinsic(b, "llvm.pow", ty, [x, y], [ty])


def _constant_value(value: ir.Value) -> float | None:
    """The float that ``value`` holds in every lane when it is a constant, else None."""
    if not isinstance(value, ir.Constant):
        return None
    content = value.constant
    if isinstance(content, (list, tuple)):
        lanes = {lane.constant if isinstance(lane, ir.Constant) else None for lane in content}
        content = lanes.pop() if len(lanes) == 1 else None
    return float(content) if isinstance(content, (int, float)) and not isinstance(content, bool) else None


def _inline_vector(ty: ir.Type, fused: bool) -> bool:
    """Whether math on ``ty`` is computed inline (float32 vectors, on a target with FMA)."""
    return fused and isinstance(ty, ir.VectorType) and isinstance(ty.element, ir.FloatType)


#: float32 vector ops computed inline (``_inline_vector``), instead of libm lane by lane.
_VECTOR_F32 = {
    "exp": _vector_exp,
    "erf": _vector_erf,
    "tanh": _vector_tanh,
    "log": _vector_log,
    "sigmoid": _vector_sigmoid,
}


def _compute(
    builder: ir.IRBuilder,
    op: str,
    args: list[ir.Value],
    fused: bool = False,
    exponent: float | None = None,
    scalef: bool = False,
) -> ir.Value:
    """``op`` on float32 / float64 values (scalars or vectors); ``fused``: the target has FMA;
    ``exponent``: the constant second argument of ``pow``, if it is one; ``scalef``: the target
    has AVX-512 (``vscalefps``)."""
    ty = args[0].type
    if op == "pow":
        return _pow(builder, args[0], args[1], fused, exponent)
    if op in _VECTOR_F32 and _inline_vector(ty, fused):
        return _VECTOR_F32[op](builder, args[0], scalef)
    if op in LLVM_MATH:
        return call_intrinsic(builder, LLVM_MATH[op], ty, args, [ty])
    if op in LIBM_MATH:
        name32, name64 = LIBM_MATH[op]
        elem = element_of(ty)
        name = name64 if isinstance(elem, ir.DoubleType) else name32
        fn = declare(builder.module, name, elem, [elem] * len(args))
        return _scalarized_call(builder, fn, args)
    if op == "sigmoid":  # as _vector_sigmoid, on libm's exp (scalars and float64)
        return _logistic(builder, args[0], lambda t: _compute(builder, "exp", [t], fused))
    if op == "rsqrt":
        root = call_intrinsic(builder, "llvm.sqrt", ty, args, [ty])
        return builder.fdiv(const(ty, 1.0), root)
    raise CodegenError(f"no LLVM lowering for the math call T.{op}")


def emit_float_math(
    builder: ir.IRBuilder, op: str, args: list[ir.Value], dtype: DataType, fused: bool = False, scalef: bool = False
) -> ir.Value:
    """``T.<op>(*args)`` of float dtype ``dtype`` (register values in, register value out);
    ``fused``: the target has fused multiply-add (float32 vector math is then computed inline);
    ``scalef``: it has AVX-512F (exp scales by ``vscalefps``)."""
    if not dtype.is_float:
        raise CodegenError(f"T.{op} needs float operands, got {dtype}")
    exponent = _constant_value(args[1]) if op == "pow" else None
    if dtype.kind == "bfloat":
        # bfloat16 registers already hold float32 values; round the float32 result once.
        return bf16_round(builder, _compute(builder, op, args, fused, exponent, scalef))
    if dtype.bits == 16:
        wide_ty = like(args[0].type, F32)
        wide = [builder.fpext(arg, wide_ty) for arg in args]
        return builder.fptrunc(_compute(builder, op, wide, fused, exponent, scalef), args[0].type)
    return _compute(builder, op, args, fused, exponent, scalef)


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
