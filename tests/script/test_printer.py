"""The printer: golden snapshots of whole programs and the formatting rules one by one."""

from __future__ import annotations

import pytest
import script_programs as programs

import tir
from tir.ir import (
    Add,
    Allocate,
    Block,
    BlockRealize,
    Broadcast,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    Call,
    Cast,
    Div,
    Evaluate,
    FloatImm,
    FloorDiv,
    FloorMod,
    For,
    ForKind,
    IntImm,
    Let,
    Max,
    Mul,
    Not,
    PrimFunc,
    Ramp,
    Select,
    StringImm,
    Sub,
    Var,
)
from tir.script.printer import to_script

GOLDEN = [
    "matmul_relu",
    "bare_names",
    "split_where",
    "loop_kinds",
    "nested_blocks",
    "vector_ops",
    "math_dtypes",
    "handle_style",
    "symbolic_shape",
    "declared_var",
    "explicit_root",
    "int64_loops",
    "lets_and_branches",
    "gpu_shared",
]


@pytest.mark.parametrize("name", GOLDEN)
def test_golden(name: str, golden) -> None:  # type: ignore[no-untyped-def]
    golden.check(f"script/{name}", getattr(programs, name).script())


def test_str_and_print_show_the_script(capsys: pytest.CaptureFixture[str]) -> None:
    func = programs.matmul_relu
    assert str(func) == func.script()
    func.show()
    assert capsys.readouterr().out == func.script() + "\n"


def test_matmul_relu_text() -> None:
    assert programs.matmul_relu.script() == (
        "@T.script\n"
        'def matmul_relu(A: T.Buffer((128, 128), "float32"),\n'
        '                B: T.Buffer((128, 128), "float32"),\n'
        '                D: T.Buffer((128, 128), "float32")):\n'
        '    C = T.alloc_buffer((128, 128), "float32")\n'
        "    for i, j, k in T.grid(128, 128, 128):\n"
        '        with T.block("C"):\n'
        '            vi, vj, vk = T.remap("SSR", i, j, k)\n'
        "            T.reads(C[vi, vj], A[vi, vk], B[vk, vj])\n"
        "            T.writes(C[vi, vj])\n"
        "            with T.init():\n"
        "                C[vi, vj] = 0.0\n"
        "            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]\n"
        "    for i, j in T.grid(128, 128):\n"
        '        with T.block("D"):\n'
        '            vi, vj = T.remap("SS", i, j)\n'
        "            T.reads(C[vi, vj])\n"
        "            T.writes(D[vi, vj])\n"
        "            D[vi, vj] = T.max(C[vi, vj], 0.0)"
    )


# ---------------------------------------------------------------------- expressions

i, j = Var("i"), Var("j")
x, y = Var("x", "float32"), Var("y", "float32")


@pytest.mark.parametrize(
    ("expr", "text"),
    [
        (FloorDiv(i * 4 + j, IntImm(2)), "(i * 4 + j) // 2"),
        (i * (j + 1), "i * (j + 1)"),
        (Sub(i, Sub(j, IntImm(1))), "i - (j - 1)"),
        (Sub(Sub(i, j), IntImm(1)), "i - j - 1"),
        (FloorMod(i, IntImm(3)) * j, "i % 3 * j"),
        (Mul(i, FloorMod(j, IntImm(3))), "i * (j % 3)"),
        (Sub(IntImm(0), i + j), "-(i + j)"),
        (Sub(FloatImm(0.0, "float32"), x) * y, "-x * y"),
        (Div(x, y * 2.0), "x / (y * 2.0)"),
        (Div(i, j), "T.truncdiv(i, j)"),
        (Max(x, FloatImm(0.0, "float32")), "T.max(x, 0.0)"),
        (tir.ir.And(i < j, Not(j < IntImm(3))), "i < j and not j < 3"),
        (Not(tir.ir.Or(i < j, j < i)), "not (i < j or j < i)"),
        (tir.ir.EQ(i < j, IntImm(1, "bool")), "(i < j) == True"),
        (Select(i < j, x, FloatImm(1.5, "float32")), "T.select(i < j, x, 1.5)"),
        (Cast("int64", i), 'T.cast(i, "int64")'),
        (Call("float32", "exp", (x,)), "T.exp(x)"),
        (Call("float32", "if_then_else", (i < j, x, y)), "T.if_then_else(i < j, x, y)"),
        (
            Call("float32x8", "call_llvm_intrin", (StringImm("llvm.fma.v8f32"), Broadcast(x, 8))),
            'T.call_llvm_intrin("float32x8", "llvm.fma.v8f32", T.broadcast(x, 8))',
        ),
        (Ramp(i * 8, IntImm(1), 8), "T.ramp(i * 8, 1, 8)"),
        (Add(IntImm(2), IntImm(3)), "T.int32(2) + 3"),
    ],
)
def test_expression_text(expr: tir.PrimExpr, text: str) -> None:
    assert str(expr) == text


@pytest.mark.parametrize(
    ("const", "text"),
    [
        (IntImm(5), "5"),
        (IntImm(-7), "-7"),
        (IntImm(5, "int8"), "T.int8(5)"),
        (IntImm(5, "int64"), "T.int64(5)"),
        (IntImm(200, "uint8"), "T.uint8(200)"),
        (IntImm(1, "bool"), "True"),
        (IntImm(0, "bool"), "False"),
        (FloatImm(0.0, "float32"), "0.0"),
        (FloatImm(1.5, "float32"), "1.5"),
        (FloatImm(1e-05, "float32"), "1e-05"),
        (FloatImm(0.5, "float16"), "T.float16(0.5)"),
        (FloatImm(2.0, "float64"), "T.float64(2.0)"),
        (FloatImm(1.0, "bfloat16"), "T.bfloat16(1.0)"),
        (FloatImm(float("inf"), "float32"), 'T.float32("inf")'),
        (FloatImm(float("-inf"), "float16"), 'T.float16("-inf")'),
        (FloatImm(float("nan"), "float32"), 'T.float32("nan")'),
    ],
)
def test_constant_text(const: tir.PrimExpr, text: str) -> None:
    assert str(const) == text


def test_literal_next_to_a_typed_expression_prints_bare() -> None:
    h = Var("h", "float16")
    n = Var("n", "int64")
    assert str(h * FloatImm(0.5, "float16")) == "h * 0.5"
    assert str(n + IntImm(1, "int64")) == "n + 1"
    assert str(tir.ir.Min(n, IntImm(4, "int64"))) == "T.min(n, 4)"


# ---------------------------------------------------------------------- statements and functions


def _root(body: tir.Stmt, allocs: tuple[Buffer, ...] = ()) -> BlockRealize:
    return BlockRealize((), IntImm(1, "bool"), Block("root", (), (), (), body, alloc_buffers=allocs))


def test_grid_collapses_only_plain_serial_loops() -> None:
    a, b, c = Var("a"), Var("b"), Var("c")
    buf = Buffer("A", (IntImm(4), IntImm(4), IntImm(4)), "float32")
    store = BufferStore(buf, FloatImm(0.0, "float32"), (a, b, c))
    inner = For(c, IntImm(0), IntImm(4), ForKind.SERIAL, store, annotations={"k": 1})
    middle = For(b, IntImm(0), IntImm(4), ForKind.SERIAL, inner)
    outer = For(a, IntImm(0), IntImm(4), ForKind.SERIAL, middle)
    text = PrimFunc("g", (buf,), _root(outer)).script()
    assert "for a, b in T.grid(4, 4):" in text
    assert 'for c in T.serial(4, annotations={"k": 1}):' in text
    shifted = For(a, IntImm(2), IntImm(4), ForKind.SERIAL, middle)
    assert "for a in T.serial(2, 6):" in PrimFunc("g", (buf,), _root(shifted)).script()


def test_regions_print_points_and_ranges() -> None:
    vi = Var("vi")
    buf = Buffer("A", (IntImm(8), IntImm(128)), "float32")
    region = BufferRegion(buf, (tir.Range(vi, IntImm(1)), tir.Range(IntImm(0), IntImm(128))))
    assert to_script(region) == "A[vi, 0:128]"
    shifted = BufferRegion(buf, (tir.Range(vi * 4, IntImm(4)), tir.Range(IntImm(2), IntImm(3))))
    assert to_script(shifted) == "A[vi * 4:vi * 4 + 4, 2:5]"


def test_plain_root_is_hidden_and_other_roots_are_explicit() -> None:
    buf = Buffer("A", (IntImm(4),), "float32")
    scratch = Buffer("S", (IntImm(4),), "float32")
    body = BufferStore(buf, BufferLoad(scratch, (IntImm(0),)), (IntImm(0),))
    plain = PrimFunc("p", (buf,), _root(body, (scratch,))).script()
    assert "T.block" not in plain
    assert plain.splitlines()[2] == '    S = T.alloc_buffer((4,), "float32")'
    annotated_root = Block("root", (), (), (), body, alloc_buffers=(scratch,), annotations={"a": 1})
    text = PrimFunc("p", (buf,), BlockRealize((), IntImm(1, "bool"), annotated_root)).script()
    assert text.splitlines()[2:6] == [
        '    with T.block("root"):',
        "        T.reads()",
        "        T.writes()",
        '        T.block_attr({"a": 1})',
    ]


def test_scalar_params_and_symbolic_shapes() -> None:
    n = Var("n")
    buf = Buffer("A", (n, IntImm(4)), "float32", scope="shared", align=16)
    func = PrimFunc("s", (buf, n), _root(Evaluate(IntImm(0))))
    assert (
        func.script().splitlines()[1] == 'def s(A: T.Buffer((n, 4), "float32", scope="shared", align=16), n: T.int32):'
    )
    free = Var("m")
    other = Buffer("B", (free,), "int8")
    text = PrimFunc("f", (other,), _root(Evaluate(IntImm(0)))).script()
    assert text.splitlines()[1:3] == ['def f(B: T.Buffer((m,), "int8")):', "    m = T.int32()"]


def test_names_are_sanitized() -> None:
    odd = Buffer("A.shared", (IntImm(4),), "float32")
    keyword_var = Var("lambda")
    t_var = Var("T")
    store = BufferStore(odd, FloatImm(0.0, "float32"), (keyword_var + t_var,))
    loop = For(
        keyword_var, IntImm(0), IntImm(2), ForKind.SERIAL, For(t_var, IntImm(0), IntImm(2), ForKind.SERIAL, store)
    )
    text = PrimFunc("names", (odd,), _root(loop)).script()
    assert "A_shared: T.Buffer" in text
    assert "for lambda_, T_ in T.grid(2, 2):" in text
    assert "A_shared[lambda_ + T_] = 0.0" in text
    tir.assert_structural_equal(tir.parse(text), PrimFunc("names", (odd,), _root(loop)))


def test_let_statement_and_annotated_let() -> None:
    v, w = Var("v"), Var("w", "int64")
    buf = Buffer("A", (IntImm(4),), "int32")
    body = tir.ir.LetStmt(v, IntImm(3), tir.ir.LetStmt(w, Cast("int64", v), BufferStore(buf, v, (IntImm(0),))))
    assert str(body) == 'v = 3\nw = T.cast(v, "int64")\nA[0] = v'
    mismatched = tir.ir.LetStmt(w, IntImm(3), Evaluate(IntImm(0)))
    assert str(mismatched) == "w: T.int64 = 3\nT.evaluate(0)"


def test_lowered_nodes_print_readably() -> None:
    buf = Buffer("tmp", (IntImm(4),), "float32", scope="local")
    v = Var("v")
    stmt = Allocate(buf, BufferStore(buf, FloatImm(1.0, "float32"), (IntImm(0),)))
    assert str(stmt) == 'tmp = T.allocate((4,), "float32", scope="local")\ntmp[0] = 1.0'
    assert str(Let(v, IntImm(2), v * v)) == "T.let(v, 2, v * v)"


def test_printing_is_deterministic() -> None:
    for func in programs.ALL_PROGRAMS:
        assert func.script() == func.script()
        assert tir.parse(func.script()).script() == func.script()
