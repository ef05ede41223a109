"""Math calls, LLVM intrinsics by name, external calls, and the target-feature check."""

from __future__ import annotations

import math
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest
from codegen_kernels import assert_matches_interp, elementwise, run_llvm

import tir
from tir.codegen import CodegenError, codegen_llvm
from tir.ir import (
    Buffer,
    BufferLoad,
    BufferStore,
    Call,
    Cast,
    For,
    ForKind,
    IntImm,
    PrimExpr,
    PrimFunc,
    Ramp,
    StringImm,
    Var,
)
from tir.target import Target

KINDS = [ForKind.SERIAL, ForKind.VECTORIZED]

#: op -> (Python reference on float64, input generator)
UNARY = {
    "exp": (math.exp, lambda rng: rng.uniform(-10, 10, 16)),
    "exp2": (lambda x: 2.0**x, lambda rng: rng.uniform(-10, 10, 16)),
    "log": (math.log, lambda rng: rng.uniform(0.01, 100, 16)),
    "log2": (math.log2, lambda rng: rng.uniform(0.01, 100, 16)),
    "log10": (math.log10, lambda rng: rng.uniform(0.01, 100, 16)),
    "sqrt": (math.sqrt, lambda rng: rng.uniform(0, 100, 16)),
    "rsqrt": (lambda x: 1 / math.sqrt(x), lambda rng: rng.uniform(0.01, 100, 16)),
    "tanh": (math.tanh, lambda rng: rng.uniform(-5, 5, 16)),
    "sigmoid": (lambda x: 1 / (1 + math.exp(-x)), lambda rng: rng.uniform(-10, 10, 16)),
    "erf": (math.erf, lambda rng: rng.uniform(-4, 4, 16)),
    "sin": (math.sin, lambda rng: rng.uniform(-6, 6, 16)),
    "cos": (math.cos, lambda rng: rng.uniform(-6, 6, 16)),
    "floor": (math.floor, lambda rng: rng.uniform(-6, 6, 16)),
    "ceil": (math.ceil, lambda rng: rng.uniform(-6, 6, 16)),
    "trunc": (math.trunc, lambda rng: rng.uniform(-6, 6, 16)),
    "abs": (abs, lambda rng: rng.uniform(-6, 6, 16)),
}


def call(op: str) -> object:
    return lambda *args: Call(args[0].dtype, op, tuple(args))


@pytest.mark.parametrize("kind", KINDS, ids=["serial", "vector"])
@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_math_float32(op: str, kind: ForKind) -> None:
    reference, make = UNARY[op]
    x = make(np.random.default_rng(5)).astype(np.float32)
    f = elementwise(f"m_{op}", 16, ["float32"], call(op), kind)
    out = run_llvm(f, [x, np.zeros(16, np.float32)])[1]
    expected = np.array([reference(float(v)) for v in x])
    np.testing.assert_allclose(out, expected, rtol=4e-7, atol=1e-7)


@pytest.mark.parametrize("op", ["exp", "log", "tanh", "erf", "sqrt", "sin"])
def test_unary_math_float64(op: str) -> None:
    reference, make = UNARY[op]
    x = make(np.random.default_rng(6))
    f = elementwise(f"m64_{op}", 16, ["float64"], call(op), ForKind.VECTORIZED)
    out = run_llvm(f, [x, np.zeros(16, np.float64)])[1]
    np.testing.assert_allclose(out, [reference(float(v)) for v in x], rtol=1e-15, atol=1e-15)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("op", ["exp", "tanh", "erf", "sqrt", "sigmoid"])
def test_unary_math_half_types_match_interpreter(op: str, dtype: str) -> None:
    from tir.interp.runtime import bf16_to_bits

    x = UNARY[op][1](np.random.default_rng(7)).astype(np.float32)
    data = bf16_to_bits(x) if dtype == "bfloat16" else x.astype(np.float16)
    out = np.zeros(16, data.dtype)
    f = elementwise(f"mh_{op}", 16, [dtype], call(op), ForKind.VECTORIZED)
    # Computing in float32 then rounding once may differ from the interpreter's float64 route
    # in the last bit of a half type.
    got = run_llvm(f, [data, out])[1]
    want = out.copy()
    tir.interpret(f, data, want)
    if dtype == "bfloat16":
        assert np.max(np.abs(got.astype(np.int32) - want.astype(np.int32))) <= 1
    else:
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=1e-3)


def test_erf_tanh_accuracy_over_a_range() -> None:
    x = np.linspace(-6, 6, 1024).astype(np.float32)
    for op, reference in (("erf", math.erf), ("tanh", math.tanh)):
        f = elementwise(f"acc_{op}", 1024, ["float32"], call(op), ForKind.SERIAL)
        out = run_llvm(f, [x, np.zeros(1024, np.float32)])[1].astype(np.float64)
        expected = np.array([reference(float(v)) for v in x])
        ulp = np.spacing(np.abs(expected).astype(np.float32)).astype(np.float64)
        assert np.max(np.abs(out - expected) / ulp) <= 2.0, op


def test_round_is_half_away_from_zero() -> None:
    f = elementwise("rnd", 6, ["float32"], call("round"), ForKind.VECTORIZED)
    x = np.array([-2.5, -0.5, 0.5, 1.5, 2.5, 0.49999997], np.float32)
    assert run_llvm(f, [x, np.zeros(6, np.float32)])[1].tolist() == [-3.0, -1.0, 1.0, 2.0, 3.0, 0.0]


def test_pow_and_fma() -> None:
    f = elementwise("pw", 4, ["float32", "float32"], call("pow"))
    a = np.array([2.0, 9.0, 0.5, 10.0], np.float32)
    b = np.array([10.0, 0.5, -2.0, -1.0], np.float32)
    np.testing.assert_allclose(run_llvm(f, [a, b, np.zeros(4, np.float32)])[2], [1024, 3, 4, 0.1], rtol=1e-7)
    g = elementwise("fused", 1, ["float64", "float64"], lambda a, b: Call("float64", "fma", (a, b, -a * b)))
    # a * b - round(a * b) is the rounding error of the product: 0 unless fma rounds once.
    a = np.array([1 + 2**-30], np.float64)
    b = np.array([1 - 2**-29], np.float64)
    out = run_llvm(g, [a, b, np.zeros(1)])[2]
    exact = Fraction(a[0]) * Fraction(b[0]) - Fraction(float(a[0] * b[0]))
    assert out[0] == float(exact) != 0.0
    assert_matches_interp(g, [a, b, np.zeros(1)])


def test_integer_abs_wraps_at_minimum() -> None:
    f = elementwise("iabs", 4, ["int8"], call("abs"), ForKind.VECTORIZED)
    out = run_llvm(f, [np.array([-5, 5, -128, 0], np.int8), np.zeros(4, np.int8)])[1]
    assert out.tolist() == [5, 5, -128, 0]


def test_if_then_else_evaluates_only_the_taken_side() -> None:
    # The untaken side divides by zero: evaluating it would kill the process (SIGFPE).
    def compute(a: PrimExpr, b: PrimExpr) -> PrimExpr:
        return Call("int32", "if_then_else", (b.not_equal(0), a // b, IntImm(-1)))

    for kind in KINDS:
        f = elementwise("lazy", 8, ["int32", "int32"], compute, kind)
        a = np.arange(8, dtype=np.int32) * 3
        b = np.array([1, 0, 2, 0, 3, 0, 4, 0], np.int32)
        out = run_llvm(f, [a, b, np.zeros(8, np.int32)])[2]
        assert out.tolist() == [0, -1, 3, -1, 4, -1, 4, -1]


def _vector_kernel(name: str, dtype: str, lanes: int, value: object) -> PrimFunc:
    """``Out[0:lanes] = value(In0[0:lanes], In1[0:lanes], In2[0:lanes])`` as vector IR."""
    ins = [Buffer(f"In{k}", (lanes,), dtype) for k in range(3)]
    ramp = Ramp(IntImm(0), IntImm(1), lanes)
    loads = [BufferLoad(buffer, (ramp,)) for buffer in ins]
    result = value(*loads)  # type: ignore[operator]
    out = Buffer("Out", (result.dtype.lanes,), str(result.dtype.element))
    store = BufferStore(out, result, (Ramp(IntImm(0), IntImm(1), result.dtype.lanes),))
    return PrimFunc(name, (*ins, out), store)


@pytest.mark.parametrize("name", ["llvm.fma.v8f32", "llvm.fma"])
def test_call_llvm_intrin_fma(name: str) -> None:
    f = _vector_kernel(
        "intrin_fma", "float32", 8, lambda a, b, c: Call("float32x8", "call_llvm_intrin", (StringImm(name), a, b, c))
    )
    rng = np.random.default_rng(8)
    a, b, c = (rng.standard_normal(8).astype(np.float32) for _ in range(3))
    out = run_llvm(f, [a, b, c, np.zeros(8, np.float32)])[3]
    expected = (a.astype(np.float64) * b + c).astype(np.float32)
    np.testing.assert_array_equal(out, expected)
    assert "llvm.fma.v8f32" in codegen_llvm(tir.transform.lower(f), "llvm")


def test_call_llvm_pure_intrin_and_call_extern() -> None:
    f = elementwise(
        "pure_sqrt", 4, ["float32"], lambda x: Call("float32", "call_llvm_pure_intrin", (StringImm("llvm.sqrt.f32"), x))
    )
    np.testing.assert_array_equal(
        run_llvm(f, [np.array([4, 9, 2, 0], np.float32), np.zeros(4, np.float32)])[1],
        np.sqrt([4, 9, 2, 0]).astype(np.float32),
    )
    g = elementwise("ext_exp", 4, ["float64"], lambda x: Call("float64", "call_extern", (StringImm("exp"), x)))
    x = np.array([0.0, 1.0, -1.0, 2.5])
    np.testing.assert_array_equal(run_llvm(g, [x, np.zeros(4)])[1], np.exp(x))


def test_call_extern_of_an_unknown_function_is_a_clear_error() -> None:
    f = elementwise(
        "ext_missing", 4, ["float32"], lambda x: Call("float32", "call_extern", (StringImm("no_such_fn_xyz"), x))
    )
    with pytest.raises(RuntimeError, match="no_such_fn_xyz"):
        tir.build(f, "llvm")


def _avx2_kernel() -> PrimFunc:
    """``vpmaddwd``: int16 pairs multiplied and added into int32 (needs AVX2)."""
    return _vector_kernel(
        "madd",
        "int16",
        16,
        lambda a, b, c: Call("int32x8", "call_llvm_pure_intrin", (StringImm("llvm.x86.avx2.pmadd.wd"), a, b)),
    )


def _avx512_kernel() -> PrimFunc:
    return _vector_kernel(
        "rcp14",
        "float32",
        16,
        lambda a, b, c: Call(
            "float32x16",
            "call_llvm_pure_intrin",
            (StringImm("llvm.x86.avx512.rcp14.ps.512"), a, b, IntImm(-1, "int16")),
        ),
    )


def test_feature_check_rejects_avx512_on_baseline_x86() -> None:
    lowered = tir.transform.lower(_avx512_kernel())
    with pytest.raises(CodegenError) as info:
        codegen_llvm(lowered, "llvm -mcpu=x86-64")
    message = str(info.value)
    assert "llvm.x86.avx512.rcp14.ps.512" in message and "avx512f" in message and "x86-64" in message
    with pytest.raises(CodegenError, match="avx2"):
        tir.build(_avx2_kernel(), "llvm -mcpu=x86-64")
    # The process survived, and the same program compiles where the feature is present.
    assert "llvm.x86.avx512.rcp14.ps.512" in codegen_llvm(lowered, "llvm -mcpu=skylake-avx512")


def test_feature_check_rejects_foreign_isa() -> None:
    arm = _vector_kernel(
        "sdot",
        "int32",
        4,
        lambda a, b, c: Call(
            "int32x4", "call_llvm_pure_intrin", (StringImm("llvm.aarch64.neon.sdot.v4i32.v16i8"), a, b, c)
        ),
    )
    with pytest.raises(CodegenError, match=r"llvm.aarch64.neon.sdot.* needs an aarch64 target"):
        codegen_llvm(tir.transform.lower(arm), "llvm -mcpu=x86-64")
    with pytest.raises(CodegenError, match=r"llvm.x86.avx2.pmadd.wd needs an x86_64 target"):
        codegen_llvm(tir.transform.lower(_avx2_kernel()), "llvm -mtriple=aarch64-linux-gnu -mattr=+neon")
    with pytest.raises(CodegenError, match="dotprod"):
        codegen_llvm(tir.transform.lower(arm), "llvm -mtriple=aarch64-linux-gnu -mattr=+neon")


def test_feature_check_keeps_the_process_alive() -> None:
    # Without the check LLVM would abort the interpreter; run it in a child to prove it does not.
    code = (
        "import sys; sys.path.insert(0, 'tests/codegen');"
        "from test_llvm_intrinsics import _avx512_kernel; import tir;"
        "from tir.codegen import CodegenError\n"
        "try:\n    tir.build(_avx512_kernel(), 'llvm -mcpu=x86-64')\n"
        "except CodegenError:\n    print('refused')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "refused"


@pytest.mark.skipif(not Target.host().has("avx2"), reason="this CPU has no AVX2")
def test_avx2_intrinsic_runs_on_the_host() -> None:
    a = np.arange(16, dtype=np.int16) - 8
    b = np.arange(16, dtype=np.int16) * 3
    out = run_llvm(_avx2_kernel(), [a, b, np.zeros(16, np.int16), np.zeros(8, np.int32)])[3]
    pairs = (a.astype(np.int32) * b).reshape(8, 2).sum(axis=1)
    np.testing.assert_array_equal(out, pairs)


def test_intrinsic_with_wrong_signature_is_a_codegen_error() -> None:
    f = elementwise(
        "bad_sig", 4, ["float32"], lambda x: Call("float32", "call_llvm_pure_intrin", (StringImm("llvm.fma.f32"), x))
    )
    with pytest.raises(CodegenError, match="LLVM rejected"):
        tir.build(f, "llvm")


def test_math_of_a_loop_variable() -> None:
    i = Var("i")
    out = Buffer("Out", (4,), "float32")
    body = For(
        i, IntImm(0), IntImm(4), ForKind.SERIAL, BufferStore(out, Call("float32", "sqrt", (Cast("float32", i),)), (i,))
    )
    f = PrimFunc("sqrt_i", (out,), body)
    np.testing.assert_allclose(run_llvm(f, [np.zeros(4, np.float32)])[0], np.sqrt(np.arange(4)), rtol=1e-7)


def test_unmangled_intrinsic_name_with_two_signatures() -> None:
    # One module calls llvm.fabs on float32 and on float64: LLVM names each overload.
    def compute(a: PrimExpr, b: PrimExpr) -> PrimExpr:
        wide = Call("float64", "call_llvm_pure_intrin", (StringImm("llvm.fabs"), Cast("float64", a)))
        narrow = Call("float32", "call_llvm_pure_intrin", (StringImm("llvm.fabs"), b))
        return Cast("float32", wide) + narrow

    f = elementwise("two_fabs", 4, ["float32", "float32"], compute)
    a = np.array([-1, 2, -3, 4], np.float32)
    b = np.array([-10, 20, -30, 40], np.float32)
    np.testing.assert_array_equal(run_llvm(f, [a, b, np.zeros(4, np.float32)])[2], np.abs(a) + np.abs(b))


def _math_over_vectors(op: str, n: int) -> PrimFunc:
    """``Out[i] = op(In[i])``: a serial loop over vectors of 16 lanes."""
    src, dst = Buffer("In", (n,), "float32"), Buffer("Out", (n,), "float32")
    i, j = Var("i"), Var("j")
    index = i * 16 + j
    store = BufferStore(dst, Call("float32", op, (BufferLoad(src, (index,)),)), (index,))
    inner = For(j, IntImm(0), IntImm(16), ForKind.VECTORIZED, store)
    return PrimFunc(f"vec_{op}", (src, dst), For(i, IntImm(0), IntImm(n // 16), ForKind.SERIAL, inner))


SPECIALS = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-30, 88.72283, 88.7229, 89.0, -87.3, -103.9, -104.0,
            -150.0, 3.9499998, 3.95, 0.87499994, 0.875, 1e10, -1e10]  # fmt: skip


@pytest.mark.parametrize("op,bound", [("exp", 1.0), ("erf", 1.5), ("sigmoid", 2.0)])
def test_vector_exp_erf_are_inline_and_accurate(op: str, bound: float) -> None:
    """float32 vectors of exp / erf (and sigmoid through exp) are computed inline (no libm call
    per lane) within ``bound`` ulp of the exact value, specials included."""
    reference = {
        "exp": lambda v: math.exp(v) if v < 710 else math.inf,
        "erf": math.erf,
        "sigmoid": lambda v: 1 / (1 + math.exp(-v)) if v > -700 else 0.0,
    }[op]
    grid = np.linspace(-110 if op == "exp" else -6, 90 if op == "exp" else 6, 200_000 - len(SPECIALS))
    x = np.concatenate([grid, SPECIALS]).astype(np.float32)
    f = _math_over_vectors(op, len(x))
    from tir.transform import lower

    source = codegen_llvm(lower(f, "llvm"), Target.parse("llvm"))
    assert ("erff" not in source and "llvm.exp" not in source) or not Target.parse("llvm").has("fma")
    got = run_llvm(f, [x, np.zeros_like(x)])[1].astype(np.float64)
    finite = np.isfinite(x)
    expected = np.array([reference(float(v)) if np.isfinite(v) else np.nan for v in x])
    with np.errstate(over="ignore"):
        exact = expected.astype(np.float32)
    overflow = finite & np.isinf(exact)
    assert np.all(got[overflow] == exact[overflow])
    finite &= ~overflow
    normal = finite & (np.abs(exact) >= np.finfo(np.float32).tiny)
    ulp = np.spacing(np.abs(exact[normal])).astype(np.float64)
    assert np.max(np.abs(got[normal] - expected[normal]) / ulp) <= bound
    tiny = finite & ~normal  # subnormal results: within one subnormal step
    assert np.all(np.abs(got[tiny] - expected[tiny]) <= 1.5e-45)
    assert np.isnan(got[np.isnan(x)]).all()
    want = {"exp": (math.inf, 0.0), "erf": (1.0, -1.0), "sigmoid": (1.0, 0.0)}[op]
    assert (got[x == np.inf][0], got[x == -np.inf][0]) == want
