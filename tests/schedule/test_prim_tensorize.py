"""tensorize: golden, numerics (interpreter and LLVM), replay, validation, and the structural-diff
errors for each way a block can differ from an intrinsic's description."""

from __future__ import annotations

import pytest
from examples_testing import load_example
from schedule_testing import check_numerics, check_replay, check_schedule

import tir
import tir.script as T
from tir.intrin import TensorIntrin
from tir.schedule import Schedule, ScheduleError

# ---------------------------------------------------------------- test intrinsics

#: The TensorIR paper's 4x4x4 matmul, as examples/tensorize_custom.py defines it.
PAPER_4X4X4 = load_example("tensorize_custom")


@T.script
def mm4_local_desc(
    A: T.Buffer((4, 4), "float32", scope="local"), B: T.Buffer((4, 4), "float32"), C: T.Buffer((4, 4), "float32")
):
    with T.block("root"):
        T.reads(C[0:4, 0:4], A[0:4, 0:4], B[0:4, 0:4])
        T.writes(C[0:4, 0:4])
        for i, j, k in T.grid(4, 4, 4):
            with T.block("update"):
                vi, vj, vk = T.remap("SSR", i, j, k)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


@T.script
def mm4_local_impl(
    A: T.Buffer((4, 4), "float32", scope="local"), B: T.Buffer((4, 4), "float32"), C: T.Buffer((4, 4), "float32")
):
    with T.block("root"):
        T.reads(C[0:4, 0:4], A[0:4, 0:4], B[0:4, 0:4])
        T.writes(C[0:4, 0:4])
        for i, j, k in T.grid(4, 4, 4):
            with T.block("update"):
                vi, vj, vk = T.remap("SSR", i, j, k)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]


@T.script
def vadd8_desc(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    with T.block("root"):
        T.reads(A[0:8], B[0:8])
        T.writes(C[0:8])
        for i in range(8):
            with T.block("add"):
                vi = T.remap("S", i)
                C[vi] = A[vi] + B[vi]


@T.script
def vadd8_impl(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    # a * 1 + b, rounded once, is exactly a + b.
    with T.block("root"):
        T.reads(A[0:8], B[0:8])
        T.writes(C[0:8])
        C[T.ramp(0, 1, 8)] = T.call_llvm_pure_intrin(
            "float32x8", "llvm.fma.v8f32", A[T.ramp(0, 1, 8)], T.broadcast(T.float32(1.0), 8), B[T.ramp(0, 1, 8)]
        )


MM4 = "test_tensorize_mm4"
MM4_LOCAL = "test_tensorize_mm4_local"
VADD8 = "test_tensorize_vadd8"
TensorIntrin.register(MM4, PAPER_4X4X4.dot_4x4x4_desc, PAPER_4X4X4.dot_4x4x4_impl, override=True)
TensorIntrin.register(MM4_LOCAL, mm4_local_desc, mm4_local_impl, override=True)
TensorIntrin.register(VADD8, vadd8_desc, vadd8_impl, override=True)

# ---------------------------------------------------------------- programs


def make_matmul(n: int = 16, dtype: str = "float32", init: bool = True) -> tir.PrimFunc:
    if init:

        @T.script
        def matmul(A: T.Buffer((n, n), dtype), B: T.Buffer((n, n), dtype), C: T.Buffer((n, n), dtype)):
            for i, j, k in T.grid(n, n, n):
                with T.block("C"):
                    vi, vj, vk = T.remap("SSR", i, j, k)
                    with T.init():
                        C[vi, vj] = T.cast(0, dtype)
                    C[vi, vj] += A[vi, vk] * B[vk, vj]

        return matmul

    @T.script
    def matmul_update(A: T.Buffer((n, n), dtype), B: T.Buffer((n, n), dtype), C: T.Buffer((n, n), dtype)):
        for i, j, k in T.grid(n, n, n):
            with T.block("C"):
                vi, vj, vk = T.remap("SSR", i, j, k)
                C[vi, vj] += A[vi, vk] * B[vk, vj]

    return matmul_update


@T.script
def vector_add(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32"), C: T.Buffer((64,), "float32")):
    for i in range(64):
        with T.block("C"):
            vi = T.remap("S", i)
            C[vi] = A[vi] + B[vi]


def tile(sch: Schedule, factors: tuple[int, int] = (4, 4)) -> list:  # type: ignore[type-arg]
    """Split i, j and k by ``factors`` and put the three inner loops innermost."""
    i, j, k = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, list(factors))
    j0, j1 = sch.split(j, list(factors))
    k0, k1 = sch.split(k, list(factors))
    sch.reorder(i0, j0, k0, i1, j1, k1)
    return [i0, j0, k0, i1, j1, k1]


# ---------------------------------------------------------------- matches


def test_tensorize_tile_loop_keeps_the_init(golden) -> None:  # type: ignore[no-untyped-def]
    matmul = make_matmul()
    sch = Schedule(matmul, debug=True)  # every step is validated (tir.analysis.verify)
    loops = tile(sch)
    sch.tensorize(loops[3], MM4)
    block = sch.get_block_node(sch.get_block("C_o"))
    assert [m.buffer.const_shape() for m in block.match_buffers] == [(4, 4)] * 3
    assert block.init is not None  # zeroes the tile on the first k_0 step, as before
    assert tir.analysis.verify(sch.func) == []
    kinds = [inst.kind for inst in sch.trace]
    assert "tensorize" in kinds and "blockize" not in kinds  # one instruction, replayed as one
    check_schedule(sch, matmul, golden, "schedule/tensorize_matmul_tile")


def test_tensorize_after_blockize_and_decompose(golden) -> None:  # type: ignore[no-untyped-def]
    matmul = make_matmul()
    sch = Schedule(matmul, debug=True)
    loops = tile(sch)
    sch.decompose_reduction(sch.get_block("C"), loops[0])
    outer = sch.blockize(loops[3])
    sch.tensorize(outer, MM4)
    assert sch.get_block_node(outer).init is None
    check_schedule(sch, matmul, golden, "schedule/tensorize_matmul_decomposed")


def test_tensorize_vector_add_with_llvm_intrinsic(golden) -> None:  # type: ignore[no-untyped-def]
    sch = Schedule(vector_add, debug=True)
    (i,) = sch.get_loops(sch.get_block("C"))
    _, i1 = sch.split(i, [None, 8])
    sch.tensorize(i1, VADD8)
    assert "llvm.fma.v8f32" in sch.func.script()
    check_schedule(sch, vector_add, golden, "schedule/tensorize_vector_add")


@T.script
def two_matmuls(
    A: T.Buffer((8, 8), "float32"),
    B: T.Buffer((8, 8), "float32"),
    C: T.Buffer((8, 8), "float32"),
    D: T.Buffer((8, 8), "float32"),
):
    for i, j, k in T.grid(8, 8, 8):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            C[vi, vj] += A[vi, vk] * B[vk, vj]
    for i, j, k in T.grid(8, 8, 8):
        with T.block("D"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            D[vi, vj] += B[vi, vk] * A[vk, vj]


def test_tensorize_twice_instantiates_fresh_copies() -> None:
    sch = Schedule(two_matmuls, debug=True)
    for name in ("C", "D"):
        i, j, k = sch.get_loops(sch.get_block(name))
        i0, i1 = sch.split(i, [2, 4])
        j0, j1 = sch.split(j, [2, 4])
        k0, k1 = sch.split(k, [2, 4])
        sch.reorder(i0, j0, k0, i1, j1, k1)
        sch.tensorize(i1, MM4)
    loop_vars = [loop.loop_var for loop in sch.index.loops.values()]
    assert len(loop_vars) == 10  # i_0, j_0, k_0 and the impl's i, j, twice: no variable shared
    assert len({id(v) for v in loop_vars}) == 10
    tir.assert_structural_equal(tir.parse(sch.func.script()), sch.func)
    check_numerics(two_matmuls, sch.func)
    check_replay(sch, two_matmuls)


def test_tensorize_a_local_scope_operand(golden) -> None:  # type: ignore[no-untyped-def]
    matmul = make_matmul(init=False)
    sch = Schedule(matmul, debug=True)
    loops = tile(sch)
    a_local = sch.cache_read(sch.get_block("C"), 1, "local")
    sch.compute_at(a_local, loops[2])
    sch.tensorize(loops[3], MM4_LOCAL)
    check_schedule(sch, matmul, golden, "schedule/tensorize_local_scope")


# ---------------------------------------------------------------- mismatches


def _refused(func: tir.PrimFunc, steps, intrin: str, *messages: str) -> str:  # type: ignore[no-untyped-def]
    sch = Schedule(func)
    target = steps(sch)
    before = sch.func
    with pytest.raises(ScheduleError) as info:
        sch.tensorize(target, intrin)
    text = str(info.value)
    for message in messages:
        assert message in text, f"{message!r} not in:\n{text}"
    assert info.value.primitive == "tensorize"
    assert sch.func is before  # a refused primitive changes nothing
    return text


def _tile_loop(factors: tuple[int, int] = (4, 4)):  # type: ignore[no-untyped-def]
    return lambda sch: tile(sch, factors)[3]


def test_tensorize_reports_a_dtype_mismatch() -> None:
    text = _refused(
        make_matmul(dtype="float16", init=False),
        _tile_loop(),
        MM4,
        "dtype mismatch: the intrinsic's parameter C is float32, the block's buffer C is float16",
        "intrinsic (desc):\n        C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]",
        "# buffer C: float16, shape (16, 16)",
        "likely fix: the data types differ",
    )
    assert "block 'C_o':\n        C[vi_o * 4 + vi_i, vj_o * 4 + vj_i] = " in text


def test_tensorize_reports_a_scope_mismatch() -> None:
    _refused(
        make_matmul(init=False),
        _tile_loop(),
        MM4_LOCAL,
        "scope mismatch: the intrinsic's parameter A is in scope 'local', the block's buffer A in 'global'",
        "# buffer A: float32, shape (4, 4), scope 'local'",
        "# buffer A: float32, shape (16, 16), scope 'global'",
        "likely fix: the storage scopes differ: stage the buffer in the intrinsic's scope first (cache_read",
    )


@T.script
def batch_matmul(
    A: T.Buffer((2, 16, 16), "float32"), B: T.Buffer((16, 16), "float32"), C: T.Buffer((2, 16, 16), "float32")
):
    for b, i, j, k in T.grid(2, 16, 16, 16):
        with T.block("C"):
            vb, vi, vj, vk = T.remap("SSSR", b, i, j, k)
            C[vb, vi, vj] += A[vb, vi, vk] * B[vk, vj]


def test_tensorize_reports_a_rank_mismatch() -> None:
    def steps(sch: Schedule):  # type: ignore[no-untyped-def]
        _, i, j, k = sch.get_loops(sch.get_block("C"))
        i0, i1 = sch.split(i, [4, 4])
        j0, j1 = sch.split(j, [4, 4])
        k0, k1 = sch.split(k, [4, 4])
        sch.reorder(i0, j0, k0, i1, j1, k1)
        return i1

    _refused(
        batch_matmul,
        steps,
        MM4,
        "shape mismatch: the intrinsic's parameter C has 2 dimensions, the block's buffer C 3",
        "# region C[vb_o, vi_o * 4:vi_o * 4 + 4, vj_o * 4:vj_o * 4 + 4]",
        "unit dimensions are not dropped",
    )


@T.script
def matmul_strided(
    A: T.Buffer((16, 32), "float32"), B: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")
):
    for i, j, k in T.grid(16, 16, 16):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            C[vi, vj] += A[vi, vk * 2] * B[vk, vj]


def test_tensorize_reports_a_shape_mismatch() -> None:
    _refused(
        matmul_strided,
        _tile_loop(),
        MM4,
        "shape mismatch: the block accesses 7 elements of A in dimension 1, the intrinsic's parameter A has 4",
        "# buffer A: float32, shape (4, 4), scope 'global'",
        "# region A[vi_o * 4:vi_o * 4 + 4, vk_o * 8:vk_o * 8 + 7]",
        "likely fix: the block's loop nest has another shape than the intrinsic's",
    )


@T.script
def matmul_sub(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")):
    for i, j, k in T.grid(16, 16, 16):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            C[vi, vj] = C[vi, vj] - A[vi, vk] * B[vk, vj]


@T.script
def matmul_transposed(
    A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")
):
    for i, j, k in T.grid(16, 16, 16):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            C[vi, vj] = C[vi, vj] + A[vk, vi] * B[vk, vj]


def test_tensorize_reports_a_different_expression() -> None:
    _refused(
        matmul_sub,
        _tile_loop(),
        MM4,
        "the expressions differ: `C[vi, vj] + A[vi, vk] * B[vk, vj]` in the intrinsic",
        "intrinsic (desc):\n        C[vi, vj] + A[vi, vk] * B[vk, vj]",
        "block 'C_o':\n        C[vi_o * 4 + vi_i, vj_o * 4 + vj_i] - A[",
        "likely fix: the block computes something else",
    )


def test_tensorize_reports_a_different_access() -> None:
    _refused(
        matmul_transposed,
        _tile_loop(),
        MM4,
        "index 0 of A / A differs: `vi` in the intrinsic, `vk_o * 4 + vk_i` in the block "
        "(its offset in the region A[vk_o * 4:vk_o * 4 + 4, vi_o * 4:vi_o * 4 + 4] is `vk_i`)",
        "intrinsic (desc):\n        A[vi, vk]",
        "block 'C_o':\n        A[vk_o * 4 + vk_i, vi_o * 4 + vi_i]",
    )


def test_tensorize_reports_a_unit_loop() -> None:
    _refused(
        make_matmul(init=False),
        _tile_loop((16, 1)),
        MM4,
        "loop extents differ: 4 in the intrinsic, 1 in the block",
        "intrinsic (desc):\n        for i in range(4): ...",
        "block 'C_o':\n        for i_1 in range(1): ...",
        "likely fix: the block has a loop of extent 1 the intrinsic does not have: remove it",
    )


def test_tensorize_reports_padding_needed() -> None:
    _refused(
        make_matmul(n=12, init=False),
        _tile_loop((4, 3)),
        MM4,
        "loop extents differ: 4 in the intrinsic, 3 in the block",
        "likely fix: the block's extent is smaller than the intrinsic's: pad the computation (pad_einsum)",
    )


def test_tensorize_reports_a_vectorized_loop() -> None:
    def steps(sch: Schedule):  # type: ignore[no-untyped-def]
        loops = tile(sch)
        sch.vectorize(loops[4])
        return loops[3]

    _refused(
        make_matmul(init=False),
        steps,
        MM4,
        "loop kinds differ: serial in the intrinsic, vectorized in the block",
        "tensorize before parallelizing, vectorizing",
    )


def test_tensorize_reports_the_innermost_block() -> None:
    def steps(sch: Schedule):  # type: ignore[no-untyped-def]
        tile(sch)
        return sch.get_block("C")

    _refused(
        make_matmul(init=False),
        steps,
        MM4,
        "the intrinsic has a For where the block has a BufferStore",
        "likely fix: tensorize the loop at the top of the tile (or blockize it first)",
    )


def test_tensorize_refuses_an_unknown_intrinsic() -> None:
    _refused(
        make_matmul(init=False),
        _tile_loop(),
        "test_tensorize_mm5",
        "no tensor intrinsic named 'test_tensorize_mm5'; did you mean 'test_tensorize_mm4'",
    )


def test_tensorize_refuses_a_loop_blockize_refuses() -> None:
    def steps(sch: Schedule):  # type: ignore[no-untyped-def]
        return sch.get_loops(sch.get_block("C"))[0]

    @T.script
    def two_blocks(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
        for i in range(8):
            with T.block("C"):
                vi = T.remap("S", i)
                C[vi] = A[vi] + B[vi]
            with T.block("D"):
                vi = T.remap("S", i)
                B[vi] = A[vi]

    _refused(two_blocks, steps, VADD8, "tensorize: loop i: the loops from i inward must be perfectly nested")


def test_tensorize_refuses_the_root_block() -> None:
    _refused(vector_add, lambda sch: sch.get_block("root"), VADD8, "cannot tensorize the root block")


def test_tensorize_with_a_builtin_x86_intrinsic() -> None:
    name = "x86_avx2_fma_f32_4x16x4"
    if name not in TensorIntrin.list():
        pytest.skip(f"{name} is not registered")
    matmul = make_matmul(n=32, init=False)
    sch = Schedule(matmul, debug=True)
    i, j, k = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, [None, 4])
    j0, j1 = sch.split(j, [None, 16])
    k0, k1 = sch.split(k, [None, 4])
    sch.reorder(i0, j0, k0, i1, j1, k1)
    sch.tensorize(i1, name)
    assert "llvm.fma.v8f32" in sch.func.script()
    tir.assert_structural_equal(tir.parse(sch.func.script()), sch.func)
    # Fused multiply-adds round once per step: equal to the plain program up to float32 rounding.
    check_numerics(matmul, sch.func, llvm=TensorIntrin.get(name).available("llvm"), rtol=1e-4)
    check_replay(sch, matmul)
