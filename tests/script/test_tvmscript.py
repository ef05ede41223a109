"""TVMScript as TVM writes it parses here (issue 18, part 2): the classic forms, the forms TVM 0.27
prints (``T.sblock``), ``@I.ir_module`` classes, and a TVM-printed tuned GEMM that builds and runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import tir
from tir.script.diagnostics import ScriptError

HERE = Path(__file__).parent / "tvmscript"

CLASSIC = '''
from tvm.script import tir as T

@T.prim_func
def main(a: T.handle, b: T.handle, c: T.handle):
    T.func_attr({"global_symbol": "main", "tir.noalias": True})
    A = T.match_buffer(a, [64, 32])
    B = T.match_buffer(b, [48, 32])
    C = T.match_buffer(c, [64, 48])
    for i, j, k in T.grid(64, 48, 32):
        with T.block("update"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vj, vk]
'''

S_TIR = '''
from tvm.script import tir as T

@T.prim_func(s_tir=True)
def main(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8,), "float32")):
    with T.sblock("root"):
        T.reads()
        T.writes()
        S = T.sblock_alloc_buffer((8,), "float32")
        for i, k in T.grid(8, 16):
            with T.sblock("S"):
                vi = T.axis.S(8, i)
                vk = T.axis.R(16, k)
                T.reads(A[vi, vk])
                T.writes(S[vi])
                T.sblock_attr({"meta_schedule.random_compute_producer": 1})
                with T.init():
                    S[vi] = T.float32(0)
                S[vi] = S[vi] + A[vi, vk]
        for i in T.serial(8):
            with T.sblock("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = T.Select(S[vi] > T.float32(0), S[vi], T.float32(0))
'''

MODULE = '''
from tvm.script import ir as I
from tvm.script import tir as T

@I.ir_module
class Module:
    @T.prim_func(private=True)
    def double(A: T.Buffer((8,), "int32"), B: T.Buffer((8,), "int32")):
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = T.shift_left(A[vi], 1) + T.shift_right(A[vi], 2)

    @T.prim_func
    def clamp(A: T.Buffer((8,), "int8"), B: T.Buffer((8,), "float32")):
        for i in range(8):
            with T.block("B"):
                vi = T.axis.spatial(8, i)
                B[vi] = T.max(T.Cast("float32", A[vi]), T.min_value("float32")) + T.Cast(
                    "float32", T.max_value("int8") - T.int8(-3) * T.int8(0)
                )
'''


def test_classic_tvmscript_with_handles_and_list_remap() -> None:
    func = tir.parse(CLASSIC)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 32), dtype=np.float32)
    b = rng.standard_normal((48, 32), dtype=np.float32)
    c = np.zeros((64, 48), np.float32)
    tir.build(func, "llvm")(a, b, c)
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-4, atol=1e-4)


def test_the_forms_tvm_0_27_prints() -> None:
    func = tir.parse(S_TIR)
    a = np.random.default_rng(1).standard_normal((8, 16), dtype=np.float32)
    b = np.zeros(8, np.float32)
    tir.interpret(func, a, b)
    np.testing.assert_allclose(b, np.maximum(a.sum(1), 0), rtol=1e-5, atol=1e-5)
    assert "T.block(" in func.script() and "sblock" not in func.script()  # printed in our own form
    assert tir.structural_equal(tir.parse(func.script()), func)


def test_ir_module_class_with_typed_constants_casts_and_shifts() -> None:
    mod = tir.parse(MODULE)
    assert isinstance(mod, tir.IRModule) and sorted(mod.functions) == ["clamp", "double"]
    a = np.arange(-4, 4, dtype=np.int32)
    b = np.zeros(8, np.int32)
    tir.build(mod.functions["double"], "llvm")(a, b)
    np.testing.assert_array_equal(b, (a << 1) + (a >> 2))
    a8 = np.arange(-4, 4, dtype=np.int8)
    f = np.zeros(8, np.float32)
    tir.interpret(mod.functions["clamp"], a8, f)
    np.testing.assert_array_equal(f, a8.astype(np.float32) + 127)


def test_ir_module_decorator_at_python_run_time() -> None:
    import tir.script as T
    from tir.script import ir as I

    source = HERE / "runtime_module.py.txt"
    namespace: dict = {"T": T, "I": I}
    exec(compile(source.read_text(), str(source), "exec"), namespace)
    module = namespace["Module"]
    assert isinstance(module, tir.IRModule) and list(module.functions) == ["main"]


def test_a_tvm_printed_tuned_gemm_parses_builds_and_matches_numpy() -> None:
    mod = tir.parse((HERE / "tuned_gemm.tvm.txt").read_text())
    func = mod.functions["main"]
    assert tir.analysis.verify(func) == []
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((2, 128, 128), dtype=np.float32)
    c = np.zeros((128, 128), np.float32)
    tir.build(func, "llvm")(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("from tvm.script import relax as R\n", "tvm.script.relax has no counterpart here"),
        ("import tir.script as T\n@T.prim_func(inline=True)\ndef f():\n    pass\n", "unknown @T.prim_func option 'inline'"),
        ("import tir.script as T\nclass M:\n    pass\n", "must be decorated with @I.ir_module"),
    ],
)
def test_unsupported_tvm_forms_get_a_clear_error(text: str, message: str) -> None:
    with pytest.raises(ScriptError, match=message):
        tir.parse(text)


def test_schedule_keywords_tvm_users_type() -> None:
    mod = tir.parse(MODULE)
    sch = tir.Schedule(mod, func_name="double")
    sch.work_on("clamp")  # before any primitive: switches
    block = sch.get_block("B", func_name="clamp")
    assert sch.get(block).name == "B"
    (loop,) = sch.get_loops(block)
    assert sch.get(loop).extent.value == 8
    with pytest.raises(tir.ScheduleError, match="a schedule holds one function"):
        sch.work_on("double")
    with pytest.raises(tir.ScheduleError, match=r"no such function; the module has \['clamp', 'double'\]"):
        sch.get_block("B", func_name="missing")
    assert list(sch.mod.functions) == ["clamp"]


DTYPE_KEYWORDS = '''
from tvm.script import tir as T

@T.prim_func
def main(A: T.Buffer((16,), "float16"), B: T.Buffer((16,), "float16"), C: T.Buffer((16,), "int8"),
         D: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("B"):
            vi = T.axis.spatial(16, i)
            B[vi] = T.if_then_else(
                T.likely(1 <= vi, dtype="bool"), T.exp(A[vi - 1], dtype="float16"), T.float16(0), dtype="float16"
            )
            C[vi] = T.if_then_else(vi < 8, 1, 0, dtype="int8")
            D[vi] = T.sqrt(T.floor(T.Cast("float32", vi) * T.float32(0.5), dtype="float32"), dtype="float32") + T.Cast(
                "float32", T.floordiv(vi, 3, dtype="int32")
            )
'''


def test_tvm_dtype_keyword_on_math_and_if_then_else() -> None:
    func = tir.parse(DTYPE_KEYWORDS)
    text = func.script()
    assert "dtype=" not in text and "T.int8(1)" in text  # our own form; the int8 literals stay int8
    assert tir.structural_equal(tir.parse(text), func)
    a = np.random.default_rng(3).standard_normal(16).astype(np.float16)
    b, c, d = np.zeros(16, np.float16), np.zeros(16, np.int8), np.zeros(16, np.float32)
    tir.interpret(func, a, b, c, d)
    idx = np.arange(16)
    np.testing.assert_allclose(b[1:], np.exp(a[:-1].astype(np.float32)).astype(np.float16), rtol=1e-2)
    assert b[0] == 0
    np.testing.assert_array_equal(c, (idx < 8).astype(np.int8))
    np.testing.assert_allclose(d, np.sqrt(np.floor(idx * 0.5)) + idx // 3, rtol=1e-6)


def test_tvm_dtype_keyword_on_call_extern_is_the_result_type() -> None:
    keyword = tir.parse(
        "import tir.script as T\n@T.prim_func\ndef f(A: T.Buffer((4,), 'float32')):\n"
        "    T.evaluate(T.call_extern('vec4add', A[0], 4, dtype='int32'))\n"
    )
    positional = tir.parse(
        "import tir.script as T\n@T.prim_func\ndef f(A: T.Buffer((4,), 'float32')):\n"
        "    T.evaluate(T.call_extern('int32', 'vec4add', A[0], 4))\n"
    )
    assert tir.structural_equal(keyword, positional)
    assert tir.structural_equal(tir.parse(keyword.script()), keyword)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            'T.exp(A[0], dtype="float16")',
            r"<string>:4:\d+: error: T.exp computes float32 here, but its dtype keyword says float16",
        ),
        (
            'T.if_then_else(A[0] > 0, A[0], 0.0, dtype="int32")',
            "T.if_then_else computes float32 here, but its dtype keyword says int32",
        ),
        ('T.floordiv(4, 3, dtype="int64")', "T.floordiv computes int32 here, but its dtype keyword says int64"),
        ('T.exp(A[0], dtype="float77")', "unknown dtype 'float77'"),
        ('T.if_then_else(A[0] > 0, 300, 0, dtype="int8")', "the constant 300 does not fit in int8"),
        ('T.call_extern("f", A[0], dtype="int32", name="g")', "T.call_extern has no argument 'name'"),
    ],
)
def test_tvm_dtype_keyword_must_agree_with_the_call(call: str, message: str) -> None:
    text = f"import tir.script as T\n@T.prim_func\ndef f(A: T.Buffer((4,), 'float32')):\n    T.evaluate({call})\n"
    with pytest.raises(ScriptError, match=message):
        tir.parse(text)
