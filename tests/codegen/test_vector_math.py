"""Inline float32 vector math (tir.codegen.llvm_math): no libm call per lane, and accuracy
against float64 numpy over the whole float32 range (dense [-20, 20], a sweep over every 4099th
bit pattern of each sign, subnormals included, and inf / -inf / NaN / +-0).

The ulp bounds asserted here are the maxima measured over every float32 input (2^32 of them),
rounded up; each is also below 2e-6 relative error. Results that are subnormal are checked to
within one subnormal step (relative error is meaningless there).
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import tir
from tir.ir import Buffer, BufferLoad, BufferStore, Call, FloatImm, For, ForKind, IntImm, PrimExpr, PrimFunc, Var
from tir.target import Target

pytestmark = pytest.mark.skipif(not Target.parse("llvm").has("fma"), reason="inline vector math needs FMA")

LANES = 16
TINY = float(np.finfo(np.float32).tiny)
SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-40, -1e-40, TINY, -TINY, 3.4028235e38, -3.4028235e38,
            0.625, 0.62499994, 0.875, 3.95, 9.01, -9.01, 44.4, 88.72283, 88.7229, -103.9, -104.0, 1.0, 0.99999994,
            1.0000001, 0.70710677, 0.7071068]  # fmt: skip


def whole_range() -> np.ndarray:
    """Dense [-20, 20], every 4099th positive bit pattern and its negation, and SPECIALS."""
    dense = np.linspace(-20.0, 20.0, 400_003).astype(np.float32)
    sweep = np.arange(0, 0x7F800000, 4099, dtype=np.uint32).view(np.float32)
    x = np.concatenate([dense, sweep, -sweep, np.array(SPECIALS, np.float32)])
    return np.concatenate([x, np.zeros(-len(x) % LANES, np.float32)])


def vector_kernel(name: str, n: int, compute: object, inputs: int = 1) -> PrimFunc:
    """``Out[i] = compute(In0[i], ...)``: a serial loop over vectorized loops of 16 lanes."""
    ins = [Buffer(f"In{k}", (n,), "float32") for k in range(inputs)]
    dst = Buffer("Out", (n,), "float32")
    i, j = Var("i"), Var("j")
    index = i * LANES + j
    value = compute(*[BufferLoad(buffer, (index,)) for buffer in ins])  # type: ignore[operator]
    inner = For(j, IntImm(0), IntImm(LANES), ForKind.VECTORIZED, BufferStore(dst, value, (index,)))
    return PrimFunc(name, (*ins, dst), For(i, IntImm(0), IntImm(n // LANES), ForKind.SERIAL, inner))


def unary(op: str) -> object:
    return lambda x: Call("float32", op, (x,))


def pow_by(exponent: float) -> object:
    return lambda x: Call("float32", "pow", (x, FloatImm(exponent, "float32")))


#: LLVM intrinsics that x86 expands lane by lane into libm calls.
PER_LANE = re.compile(r"llvm\.(exp|exp2|log|log2|log10|pow|sin|cos)\.")


def called_functions(module: object) -> set[str]:
    return set(re.findall(r"call [^@]*@([\w.]+)\(", module.get_source("ll")))  # type: ignore[attr-defined]


def assert_no_libm(module: object) -> None:
    names = called_functions(module)
    per_lane = {name for name in names if not name.startswith("llvm.") or PER_LANE.match(name)}
    assert not per_lane, f"per-lane math calls left in the vector loop: {sorted(per_lane)}"


def measure(got: np.ndarray, reference: np.ndarray) -> tuple[float, float]:
    """(max ulp, max relative error) over normal results; also checks subnormal and
    non-finite results (within one subnormal step; the same inf / NaN)."""
    got = got.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        exact = reference.astype(np.float32)
        spacing = np.spacing(np.abs(exact))
    finite = np.isfinite(exact)
    same = (got[~finite] == exact[~finite]) | (np.isnan(got[~finite]) & np.isnan(exact[~finite]))
    assert same.all(), (got[~finite][~same][:5], exact[~finite][~same][:5])
    normal = finite & (np.abs(exact) >= TINY)
    error = np.abs(got[normal] - reference[normal])
    assert np.all(np.abs(got[finite & ~normal] - reference[finite & ~normal]) <= 1.5e-45)
    ulp = spacing[normal].astype(np.float64)
    return float(np.max(error / ulp)), float(np.max(error / np.abs(reference[normal])))


def logistic(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e))


#: op -> (float64 reference, max ulp measured over all float32 inputs, rounded up)
UNARY = {
    "exp": (np.exp, 1.02),
    "tanh": (np.tanh, 1.34),
    "log": (np.log, 0.82),
    "erf": (np.frompyfunc(math.erf, 1, 1), 1.57),
    "sigmoid": (logistic, 2.49),
}


HOST = Target.parse("llvm")
#: The host, and where it has AVX-512 an AVX2 target too: exp scales by 2^n with ``vscalefps``
#: on AVX-512 and in the exponent bits elsewhere; both paths are held to the same bounds.
TARGETS = ["llvm"] + (["llvm -mcpu=haswell"] if HOST.isa == "x86_64" and HOST.has("avx512f") else [])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_vector_math_accuracy(op: str, target: str) -> None:
    reference, bound = UNARY[op]
    x = whole_range()
    module = tir.build(vector_kernel(f"vm_{op}", len(x), unary(op)), target)
    assert_no_libm(module)
    out = np.zeros_like(x)
    module(x, out)
    with np.errstate(all="ignore"):
        expected = np.asarray(reference(x.astype(np.float64)), dtype=np.float64)
    ulps, relative = measure(out, expected)
    assert ulps <= bound and relative <= 2e-6, (op, ulps, relative)


@pytest.mark.skipif(not (HOST.isa == "x86_64" and HOST.has("avx512f")), reason="needs AVX-512")
def test_exp_scales_with_vscalef_on_avx512_only() -> None:
    for op in ("exp", "sigmoid"):
        kernel = vector_kernel(f"sc_{op}", 64, unary(op))
        assert "llvm.x86.avx512.mask.scalef.ps.512" in called_functions(tir.build(kernel, "llvm"))
        assert not any("scalef" in name for name in called_functions(tir.build(kernel, "llvm -mcpu=haswell")))


@pytest.mark.parametrize("target", TARGETS)
def test_unary_vector_math_special_values(target: str) -> None:
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-45, -1e-45, 1.0, -1.0, 50.0, -50.0, 100.0, -100.0] + [0.0] * 3,
                 np.float32)  # fmt: skip
    expected = {
        "tanh": [1.0, -1.0, np.nan, 0.0, -0.0, 1e-45, -1e-45, math.tanh(1), -math.tanh(1), 1.0, -1.0, 1.0, -1.0],
        "log": [np.inf, np.nan, np.nan, -np.inf, -np.inf, math.log(2.0**-149), np.nan, 0.0, np.nan, math.log(50),
                np.nan, math.log(100), np.nan],
        "exp": [np.inf, 0.0, np.nan, 1.0, 1.0, 1.0, 1.0, math.e, 1 / math.e, math.exp(50), math.exp(-50), np.inf,
                3.7835059e-44],
        "sigmoid": [1.0, 0.0, np.nan, 0.5, 0.5, 0.5, 0.5, 1 / (1 + math.exp(-1)), 1 / (1 + math.exp(1)),
                    1.0, math.exp(-50), 1.0, 3.7835059e-44],
    }  # fmt: skip
    for op, want in expected.items():
        out = np.zeros_like(x)
        tir.build(vector_kernel(f"sv_{op}", len(x), unary(op)), target)(x, out)
        want32 = np.array(want, np.float32)
        np.testing.assert_allclose(out[:13], want32, rtol=3e-7, atol=0, err_msg=op)
        assert np.array_equal(np.signbit(out[:13]), np.signbit(want32)), op  # signed zeros too


def test_gelu_tanh_kernel_has_no_libm_calls() -> None:
    """The GPT-2 tanh-GELU: ``tanh((x + pow(x, 3) * 0.044715) * 0.79788) + 1``."""

    def gelu(x: PrimExpr) -> PrimExpr:
        cube = Call("float32", "pow", (x, FloatImm(3.0, "float32")))
        inner = (x + cube * FloatImm(0.044715, "float32")) * FloatImm(0.7978845834732056, "float32")
        return Call("float32", "tanh", (inner,)) + FloatImm(1.0, "float32")

    x = np.linspace(-12, 12, 4096).astype(np.float32)
    module = tir.build(vector_kernel("gelu_tanh", len(x), gelu), "llvm")
    assert_no_libm(module)
    assert not any(name.startswith(("llvm.pow", "llvm.fma.v16f64")) for name in called_functions(module))
    out = np.zeros_like(x)
    module(x, out)
    x64 = x.astype(np.float64)
    expected = np.tanh((x64 + x64**3 * np.float32(0.044715)) * np.float32(0.7978845834732056)) + 1
    np.testing.assert_allclose(out, expected, rtol=0, atol=4e-7)


# pow with a constant exponent: -> max ulp over the whole range (0.5: correctly rounded, up to
# double rounding through float64). 2, 3, 4 multiply in float32; -2, -3, -4 and -0.5 compute in
# float64 and round once; the rest go through 2^(y log2|x|) in float64 lanes.
POW_CONSTANT = {3.0: 1.29, 2.0: 0.5, 4.0: 1.9, -1.0: 0.5, -2.0: 0.5, -3.0: 0.5, 0.5: 0.5, -0.5: 0.5, 2.5: 0.5,
                1.0 / 3.0: 0.5, 5.0: 0.5, -7.0: 0.5, 1.5: 0.5, 0.0: 0.0, 1.0: 0.0}  # fmt: skip


@pytest.mark.parametrize("exponent", sorted(POW_CONSTANT))
def test_pow_constant_exponent(exponent: float) -> None:
    x = whole_range()
    module = tir.build(vector_kernel("vm_pow", len(x), pow_by(exponent)), "llvm")
    assert_no_libm(module)
    if exponent in (2.0, 3.0, 4.0, -1.0, 0.5):
        assert not any(name.startswith("llvm.fma") for name in called_functions(module))  # plain multiplications
    out = np.zeros_like(x)
    module(x, out)
    x64 = x.astype(np.float64)
    with np.errstate(all="ignore"):
        # an array of exponents: numpy's scalar-exponent shortcuts (sqrt for 0.5) differ from C99
        expected = np.power(x64, np.full_like(x64, np.float32(exponent)))
    ulps, _ = measure(out, expected)
    assert ulps <= POW_CONSTANT[exponent] + 1e-6, ulps
    numbers = ~np.isnan(expected)
    assert np.array_equal(np.signbit(out[numbers]), np.signbit(expected[numbers]))  # zeros and infinities too


POW_SPECIALS = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0, 2.5, -2.5, np.inf, -np.inf, np.nan, 1e-45,
                -1e-45, 3.4e38, -3.4e38, 0.99999994, 1.0000001, 16777216.0, -16777218.0, 1e30, -7.0]  # fmt: skip


def test_pow_vector_special_cases_and_accuracy() -> None:
    """A non-constant exponent: every pair of special values as C99's pow (numpy's float64
    pow, rounded), signs of zeros and infinities included; random pairs within 0.5 ulp."""
    grid_x, grid_y = np.meshgrid(np.array(POW_SPECIALS, np.float32), np.array(POW_SPECIALS, np.float32))
    rng = np.random.default_rng(11)
    count = 100_000
    magnitudes = np.exp(rng.uniform(-100, 88, count)) * rng.choice([-1, 1], count)
    x = np.concatenate([grid_x.ravel(), rng.uniform(-30, 30, count), magnitudes]).astype(np.float32)
    y = np.concatenate([grid_y.ravel(), np.round(rng.uniform(-40, 40, count)), rng.uniform(-3, 3, count)]).astype(
        np.float32
    )
    pad = -len(x) % LANES
    x, y = np.concatenate([x, np.ones(pad, np.float32)]), np.concatenate([y, np.ones(pad, np.float32)])
    module = tir.build(vector_kernel("vm_powxy", len(x), lambda a, b: Call("float32", "pow", (a, b)), 2), "llvm")
    assert_no_libm(module)
    out = np.zeros_like(x)
    module(x, y, out)
    with np.errstate(all="ignore"):
        expected = np.power(x.astype(np.float64), y.astype(np.float64))
    with np.errstate(over="ignore"):
        exact = expected.astype(np.float32)
    corners = grid_x.size
    same = (out[:corners] == exact[:corners]) | (np.isnan(out[:corners]) & np.isnan(exact[:corners]))
    assert same.all(), list(zip(x[:corners][~same], y[:corners][~same], out[:corners][~same]))[:5]
    finite = ~np.isnan(exact[:corners])
    assert np.array_equal(np.signbit(out[:corners][finite]), np.signbit(exact[:corners][finite]))
    ulps, _ = measure(out, expected)
    assert ulps <= 0.5 + 1e-6


@pytest.mark.parametrize("exponent", [3.0, -2.0, -0.5])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_scalar_pow_constant_exponent(dtype: str, exponent: float) -> None:
    """pow(x, 3) in a scalar loop is x * x^2, pow(x, -2) is 1 / x^2 (float32 through float64),
    pow(x, -0.5) is 1 / sqrt(x): no libm call, float64 as float32."""
    n = 8
    src, dst = Buffer("In", (n,), dtype), Buffer("Out", (n,), dtype)
    i = Var("i")
    value = Call(dtype, "pow", (BufferLoad(src, (i,)), FloatImm(exponent, dtype)))
    func = PrimFunc("spow", (src, dst), For(i, IntImm(0), IntImm(n), ForKind.SERIAL, BufferStore(dst, value, (i,))))
    module = tir.build(func, "llvm")
    assert not {name for name in called_functions(module) if "pow" in name}
    x = np.linspace(0.25, 3, n).astype(dtype)
    out = np.zeros_like(x)
    module(x, out)
    wide = x.astype(np.float64)
    expected = {3.0: x * (x * x), -2.0: (1 / (wide * wide)).astype(dtype), -0.5: (1 / np.sqrt(wide)).astype(dtype)}
    np.testing.assert_array_equal(out, expected[exponent])


def test_half_pow_constant_exponent_multiplies() -> None:
    """float16 lanes widen to float32: the constant exponent is still seen."""
    src, dst = Buffer("In", (64,), "float16"), Buffer("Out", (64,), "float16")
    i, j = Var("i"), Var("j")
    index = i * LANES + j
    value = Call("float16", "pow", (BufferLoad(src, (index,)), FloatImm(2.0, "float16")))
    inner = For(j, IntImm(0), IntImm(LANES), ForKind.VECTORIZED, BufferStore(dst, value, (index,)))
    func = PrimFunc("hpow", (src, dst), For(i, IntImm(0), IntImm(64 // LANES), ForKind.SERIAL, inner))
    module = tir.build(func, "llvm")
    assert not {name for name in called_functions(module) if "pow" in name}
    x = np.linspace(-4, 4, 64).astype(np.float16)
    out = np.zeros_like(x)
    module(x, out)
    np.testing.assert_array_equal(out, (x.astype(np.float32) ** 2).astype(np.float16))
