"""The parser builds the IR that docs/dialect.md describes."""

from __future__ import annotations

import pytest
import script_programs as programs

import tir
import tir.script as T
from tir.ir import (
    Add,
    And,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferStore,
    Cast,
    Evaluate,
    FloatImm,
    For,
    ForKind,
    IfThenElse,
    IntImm,
    IterKind,
    LetStmt,
    Max,
    Min,
    Mul,
    SeqStmt,
    Span,
    Sub,
    Var,
)
from tir.script import grid as g
from tir.script import spatial_axis
from tir.script.printer import to_script


def loops_of(stmt: tir.Stmt) -> list[For]:
    out = []
    while isinstance(stmt, For):
        out.append(stmt)
        stmt = stmt.body
    return out


def first_block(func: tir.PrimFunc) -> BlockRealize:
    stmt = func.body.block.body
    while not isinstance(stmt, BlockRealize):
        stmt = stmt.stmts[0] if isinstance(stmt, SeqStmt) else stmt.body
    return stmt


def test_matmul_relu_structure() -> None:
    func = programs.matmul_relu
    assert func.name == "matmul_relu"
    assert [p.name for p in func.params] == ["A", "B", "D"]
    a = func.params[0]
    assert isinstance(a, Buffer) and a.const_shape() == (128, 128) and str(a.dtype) == "float32"
    root = func.body
    assert isinstance(root, BlockRealize) and root.iter_values == () and root.block.name == "root"
    assert root.block.reads == () and root.block.writes == ()
    assert [b.name for b in root.block.alloc_buffers] == ["C"]
    first, second = root.block.body.stmts
    assert [(loop.loop_var.name, loop.extent.value, loop.kind) for loop in loops_of(first)] == [
        ("i", 128, ForKind.SERIAL),
        ("j", 128, ForKind.SERIAL),
        ("k", 128, ForKind.SERIAL),
    ]
    realize = loops_of(first)[-1].body
    block = realize.block
    assert block.name == "C"
    assert [iv.kind for iv in block.iter_vars] == [IterKind.SPATIAL, IterKind.SPATIAL, IterKind.REDUCE]
    assert list(realize.iter_values) == [loop.loop_var for loop in loops_of(first)]
    assert [to_script(r) for r in block.reads] == ["C[vi, vj]", "A[vi, vk]", "B[vk, vj]"]
    assert [to_script(w) for w in block.writes] == ["C[vi, vj]"]
    assert isinstance(block.init, BufferStore) and block.init.value.value == 0.0
    # `+=` is exactly a store of `C[vi, vj] + ...`
    assert isinstance(block.body, BufferStore) and isinstance(block.body.value, Add)
    assert isinstance(block.body.value.a, BufferLoad) and block.body.value.a.buffer is root.block.alloc_buffers[0]
    d_block = loops_of(second)[-1].body.block
    assert isinstance(d_block.body.value, Max)


def test_literals_adopt_the_dtype_of_the_other_operand() -> None:
    @T.script
    def f(H: T.Buffer((4,), "float16"), L: T.Buffer((4,), "int64"), n: T.int64):
        for i in range(4):
            H[i] = H[i] * 2
            L[i] = n + 1
            H[i] = 0

    stores = loops_of(f.body.block.body)[0].body.stmts
    assert stores[0].value.b.dtype == tir.DataType.parse("float16")
    assert isinstance(stores[0].value.b, FloatImm) and stores[0].value.b.value == 2.0
    assert isinstance(stores[1].value.b, IntImm) and str(stores[1].value.b.dtype) == "int64"
    assert isinstance(stores[2].value, FloatImm) and str(stores[2].value.dtype) == "float16"


def test_python_constants_fold_and_module_constants_resolve() -> None:
    @T.script
    def f(A: T.Buffer((programs.SIZE * 2,), "float32")):
        for i in range(2 * 8):
            A[i * (2 + 1)] = 1.0

    assert f.params[0].const_shape() == (32,)
    loop = f.body.block.body
    assert loop.extent.value == 16
    assert isinstance(loop.body.indices[0], Mul) and loop.body.indices[0].b.value == 3


def test_loop_ranges_and_kinds() -> None:
    func = programs.loop_kinds
    loops = loops_of(func.body.block.body)
    assert [loop.kind for loop in loops] == [
        ForKind.THREAD_BINDING,
        ForKind.THREAD_BINDING,
        ForKind.UNROLLED,
        ForKind.SERIAL,
        ForKind.SERIAL,
    ]
    assert [loop.thread_tag for loop in loops[:2]] == ["blockIdx.x", "threadIdx.x"]
    assert (loops[1].min.value, loops[1].extent.value) == (2, 8)
    assert loops[2].annotations == {"pragma_unroll_explicit": True}
    n = func.params[1]
    assert loops[4].min.value == 1 and isinstance(loops[4].extent, Sub) and loops[4].extent.a is n
    block = loops[4].body.block
    assert [iv.kind for iv in block.iter_vars] == [IterKind.SPATIAL, IterKind.REDUCE, IterKind.OPAQUE]
    assert (block.iter_vars[0].dom.min.value, block.iter_vars[0].dom.extent.value) == (2, 8)


def test_int64_extents_make_int64_loop_variables() -> None:
    loops = loops_of(programs.int64_loops.body.block.body.stmts[0])
    assert [str(loop.loop_var.dtype) for loop in loops] == ["int64", "int64"]
    realize = loops[-1].body
    assert [str(iv.var.dtype) for iv in realize.block.iter_vars] == ["int64", "int64"]


def test_where_axes_and_annotations() -> None:
    realize = first_block(programs.split_where)
    assert str(realize.predicate) == "i * 4 + ii < 1000"
    assert str(realize.iter_values[0]) == "i * 4 + ii"
    loops = loops_of(programs.split_where.body.block.body)
    assert [loop.kind for loop in loops] == [ForKind.PARALLEL, ForKind.VECTORIZED]
    assert loops[1].annotations == {"pragma_auto_unroll": 16, "note": "x"}


def test_nested_blocks_match_buffer_and_branches() -> None:
    func = programs.nested_blocks
    assert func.attrs == {"global_symbol": "nested_blocks", "tir.noalias": True}
    outer = func.body.block.body.block
    assert outer.name == "outer" and outer.iter_vars == ()
    assert outer.annotations["sizes"] == [1, 2.5, "a"] and outer.annotations["one"] == (3,)
    (scratch,) = outer.alloc_buffers
    assert scratch.scope == "local"
    inner = outer.body.body.block
    (match,) = inner.match_buffers
    assert match.buffer.name == "Asub" and match.source.buffer is func.params[0]
    assert to_script(match.source) == "A[vi * 4:vi * 4 + 4, 0:4]"
    branch = inner.body.stmts[1]
    assert isinstance(branch, IfThenElse) and isinstance(branch.else_case, IfThenElse)
    let = branch.else_case.else_case
    assert isinstance(let, LetStmt) and let.var.name == "x"
    assert isinstance(let.body, LetStmt) and str(let.body.var.dtype) == "int64"


def test_handle_parameters_become_matched_buffers() -> None:
    func = programs.handle_style
    a, n, m = func.params
    assert isinstance(a, Buffer) and a.name == "A" and a.shape[0] is n
    assert (a.align, a.offset_factor, a.elem_offset.value) == (64, 4, 0)
    assert [s.value for s in a.strides] == [4, 1]
    assert str(m.dtype) == "int64"


def test_symbolic_shapes_use_later_parameters_and_declared_variables() -> None:
    a, n = programs.symbolic_shape.params
    assert a.shape[0] is n and str(a.shape[1]) == "n * 2"
    (buffer,) = programs.declared_var.params
    (k,) = buffer.shape
    assert isinstance(k, Var) and k.name == "k"
    assert loops_of(programs.declared_var.body.block.body)[0].extent is k


def test_explicit_root_block() -> None:
    root = programs.explicit_root.body.block
    assert root.name == "root" and root.annotations == {"k": 1}
    assert root.reads == () and [to_script(w) for w in root.writes] == ["A[0:4]"]
    assert [b.name for b in root.alloc_buffers] == ["B"]


def test_partial_signature_infers_the_other_half() -> None:
    block = first_block(programs.partial_signature).block
    assert [to_script(r) for r in block.reads] == ["A[vi, 0:8]"]
    assert [to_script(w) for w in block.writes] == ["B[vi]"]


def test_bare_and_aliased_names() -> None:
    @T.script
    def f(A: T.Buffer((4, 4), "float32")):
        for i, j in g(4, 4):
            with T.block("b"):
                vi = spatial_axis(4, i)
                vj = T.axis.spatial(4, j)
                A[vi, vj] = min(A[vi, vj], 1.0) + max(A[vi, vj], 0.0)

    block = first_block(f).block
    assert [iv.var.name for iv in block.iter_vars] == ["vi", "vj"]
    assert isinstance(block.body.value.a, Min) and isinstance(block.body.value.b, Max)


def test_closure_and_defining_scope_constants() -> None:
    size = 6
    scale = 0.5

    @T.script
    def f(A: T.Buffer((size,), "float32")):
        for i in range(size):
            A[i] = A[i] * scale

    assert f.params[0].const_shape() == (6,)
    assert f.body.block.body.body.value.b.value == 0.5


def test_chained_comparison_and_logic() -> None:
    @T.script
    def f(A: T.Buffer((8,), "float32"), n: T.int32):
        for i in range(8):
            if 0 <= i - 2 < n and not i == 3:
                A[i] = 1.0

    cond = f.body.block.body.body.condition
    assert isinstance(cond, And) and isinstance(cond.a, And)
    assert str(cond) == "0 <= i - 2 and i - 2 < n and not i == 3"


def test_casts_and_typed_constants() -> None:
    @T.script
    def f(A: T.Buffer((4,), "int8"), B: T.Buffer((4,), "float16")):
        for i in range(4):
            A[i] = T.int8(3) + T.cast(i, "int8")
            B[i] = T.float16(i) + T.float16("inf")

    first, second = f.body.block.body.body.stmts
    assert isinstance(first.value.a, IntImm) and str(first.value.a.dtype) == "int8"
    assert isinstance(first.value.b, Cast)
    assert isinstance(second.value.a, Cast) and second.value.b.value == float("inf")


def test_evaluate_statements() -> None:
    call = programs.vector_ops.body.block.body.body.block.body.stmts[2]
    assert isinstance(call, Evaluate) and call.value.op == "call_extern"
    assert call.value.args[0].value == "printf"
    assert str(programs.empty_body.body.block.body) == "T.evaluate(0)"


def test_spans_carry_true_file_positions() -> None:
    @T.script
    def f(A: T.Buffer((4,), "float32")):
        for i in range(4):
            A[i] = A[i] + 1.0

    loop = f.body.block.body
    assert isinstance(loop.span, Span)
    assert loop.span.file == __file__
    line_text = open(__file__).read().splitlines()[loop.span.line - 1]
    assert line_text.strip() == "for i in range(4):"
    assert loop.span.col == line_text.index("for")
    store = loop.body
    assert store.span.line == loop.span.line + 1
    value_line = open(__file__).read().splitlines()[store.value.span.line - 1]
    assert value_line[store.value.span.col : store.value.span.end_col] == "A[i] + 1.0"
    assert store.value.span.end_line == store.span.line


def test_markers_outside_scripts() -> None:
    with pytest.raises(RuntimeError, match="only has a meaning inside a @T.script function"):
        T.grid(4, 4)
    with pytest.raises(RuntimeError):
        T.exp(1.0)
    annotation = T.Buffer((4, 4), "float32")  # evaluated harmlessly when a def runs
    assert annotation.args == ((4, 4), "float32")
    assert isinstance(T.float32(1.5), FloatImm)
    assert isinstance(T.int64(Var("i")), Cast)
    assert T.prim_func(private=True) is T.script  # TVM's options change nothing here


def test_parse_text_forms() -> None:
    body = '(A: T.Buffer((4,), "float32")):\n    for i in range(4):\n        A[i] = 0.0\n'
    plain = tir.parse("def f" + body)
    assert isinstance(plain, tir.PrimFunc) and plain.name == "f"
    for decorator in ("@T.script\n", "@T.prim_func\n", "@script\n"):
        tir.assert_structural_equal(tir.parse(decorator + "def f" + body), plain)
    with_imports = "from __future__ import annotations\nimport tir.script as T\nN = 4\n\ndef f" + body.replace(
        "4,", "N,"
    )
    tir.assert_structural_equal(tir.parse(with_imports), plain)
    bare = tir.parse('def f(A: Buffer((4,), "float32")):\n    for i in grid(4):\n        A[i] = 0.0\n')
    tir.assert_structural_equal(bare, plain)


def test_vector_loads_and_stores() -> None:
    stores = programs.vector_ops.body.block.body.body.block.body.stmts
    assert str(stores[0].value.dtype) == "float32x8"
    assert str(stores[1].value.dtype) == "int32x8"


def test_reads_and_writes_may_name_block_buffers_declared_later() -> None:
    func = tir.parse(
        'def f(A: T.Buffer((4,), "float32")):\n'
        '    with T.block("b"):\n'
        "        T.reads(A[0:4])\n"
        "        T.writes(A[0:4], S[0:4])\n"
        '        S = T.alloc_buffer((4,), "float32")\n'
        "        for i in range(4):\n"
        "            S[i] = A[i]\n"
        "            A[i] = S[i]\n"
    )
    block = func.body.block.body.block
    assert block.writes[1].buffer is block.alloc_buffers[0]


def test_module_of_several_functions() -> None:
    module = tir.parse(
        'def a(A: T.Buffer((1,), "float32")):\n    A[0] = 1.0\n\ndef b(B: T.Buffer((1,), "float32")):\n    B[0] = 2.0\n'
    )
    assert isinstance(module, tir.IRModule) and list(module) == ["a", "b"]
    assert isinstance(module["b"].body.block, Block)


class Kernels:
    """Scripts may be methods; a docstring reaching column 0 does not disturb positions."""

    @T.script
    def method(A: T.Buffer((4,), "float32")):
        """First line.
        Second line at column 0.
        """
        for i in range(4):
            A[i] = 1.0


def test_method_with_a_dedented_docstring() -> None:
    loop = Kernels.method.body.block.body
    line = open(__file__).read().splitlines()[loop.span.line - 1]
    assert line[loop.span.col :] == "for i in range(4):"


def test_an_empty_storage_scope_is_the_default_global() -> None:
    """TVM writes ``scope=""`` for the default scope; it parses as ``global`` and prints as the default."""

    @T.script
    def empty_scope(A: T.Buffer((4,), "float32")):
        B = T.alloc_buffer((4,), "float32", scope="")
        for i in range(4):
            with T.block("B"):
                vi = T.remap("S", i)
                B[vi] = A[vi]

    (buffer,) = empty_scope.body.block.alloc_buffers
    assert buffer.scope == "global"
    assert "scope=" not in empty_scope.script()
