"""Invalid programs for the validator: each breaks exactly one rule.

``CASES`` lists ``Case(name, rule, build, target)``: ``build()`` returns the program (most are
script text; the scoping errors the parser refuses are made by editing a parsed program),
``rule`` is the only rule ``tir.analysis.verify(program, target)`` may report.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import tir
from tir.ir import Block, BlockRealize, Buffer, BufferLoad, For, IRMutator, PrimFunc, Var
from tir.ir.functor import substitute


class Case(NamedTuple):
    """One invalid program (a NamedTuple: the repository's module sweep loads this file
    without registering it, which dataclasses cannot handle)."""

    name: str
    rule: str
    build: Callable[[], PrimFunc]
    target: str | None = None


def parse(text: str) -> Callable[[], PrimFunc]:
    def build() -> PrimFunc:
        func = tir.parse(text)
        assert isinstance(func, PrimFunc)
        return func

    return build


# ---------------------------------------------------------------- IR surgery helpers


class _EditBlock(IRMutator):
    def __init__(self, name: str, edit: Callable[[BlockRealize], BlockRealize]) -> None:
        self.name = name
        self.edit = edit

    def visit_BlockRealize(self, realize: BlockRealize) -> Any:
        realize = self.generic_visit(realize)  # type: ignore[assignment]
        if realize.block.name == self.name:
            return self.edit(realize)
        return realize


def edit_block(func: PrimFunc, name: str, edit: Callable[[BlockRealize], BlockRealize]) -> PrimFunc:
    return func.replace(body=_EditBlock(name, edit).visit(func.body))


def find_block(func: PrimFunc, name: str) -> Block:
    found: list[Block] = []

    class _Find(IRMutator):
        def visit_Block(self, block: Block) -> Any:
            if block.name == name:
                found.append(block)
            return self.generic_visit(block)

    _Find().visit(func.body)
    return found[0]


def substitute_in_body(realize: BlockRealize, vmap: dict[Var, Any]) -> BlockRealize:
    block = realize.block
    return realize.replace(block=block.replace(body=substitute(block.body, vmap)))


class _RemapBuffer(IRMutator):
    def __init__(self, mapping: dict[Buffer, Buffer]) -> None:
        self.mapping = mapping

    def visit_Buffer(self, buffer: Buffer) -> Buffer:
        return self.mapping.get(buffer, buffer)


ELEMENTWISE = """
@T.script
def f(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32"), C: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("B"):
            vi = T.spatial_axis(16, i)
            B[vi] = A[vi] * 2.0
    for j in range(16):
        with T.block("C"):
            vj = T.spatial_axis(16, j)
            C[vj] = A[vj] + 1.0
"""


def _iter_var_outside_block() -> PrimFunc:
    func = parse(ELEMENTWISE)()
    vi = find_block(func, "B").iter_vars[0].var
    vj = find_block(func, "C").iter_vars[0].var
    # C's body reads A[vi]: B's iterator, outside B.
    return edit_block(
        func, "C", lambda r: r.replace(block=r.block.replace(body=_swap_load_index(r.block.body, vj, vi)))
    )


def _swap_load_index(stmt: Any, old: Var, new: Var) -> Any:
    class _Swap(IRMutator):
        def visit_BufferLoad(self, load: BufferLoad) -> Any:
            return load.replace(indices=tuple(substitute(i, {old: new}) for i in load.indices))

    return _Swap().visit(stmt)


def _undefined_variable() -> PrimFunc:
    func = parse(ELEMENTWISE)()
    vj = find_block(func, "C").iter_vars[0].var
    ghost = Var("ghost")
    return edit_block(func, "C", lambda r: r.replace(block=r.block.replace(body=_swap_load_index(r.block.body, vj, ghost))))


def _undeclared_buffer() -> PrimFunc:
    func = parse(ELEMENTWISE)()
    a = func.params[0]
    assert isinstance(a, Buffer)
    stray = Buffer("Stray", a.shape, a.dtype)

    def edit(realize: BlockRealize) -> BlockRealize:
        return _RemapBuffer({a: stray}).visit(realize)  # type: ignore[no-any-return]

    return edit_block(func, "C", edit)


def _shadowed_loop_variable() -> PrimFunc:
    func = parse(
        """
@T.script
def f(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        for r in range(1):
            with T.block("B"):
                vi = T.spatial_axis(16, i)
                B[vi] = A[vi]
"""
    )()

    class _Shadow(IRMutator):
        def visit_For(self, loop: For) -> Any:
            inner = loop.body
            if isinstance(inner, For):
                return loop.replace(body=inner.replace(loop_var=loop.loop_var))
            return self.generic_visit(loop)

    return func.replace(body=_Shadow().visit(func.body))


def _allocated_twice() -> PrimFunc:
    func = parse(
        """
@T.script
def f(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    T_ = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("T"):
            vi = T.spatial_axis(16, i)
            T_[vi] = A[vi]
    for i in range(16):
        with T.block("B"):
            vi = T.spatial_axis(16, i)
            B[vi] = T_[vi]
"""
    )()
    root = func.body.block  # type: ignore[attr-defined]
    buffer = root.alloc_buffers[0]
    return edit_block(func, "B", lambda r: r.replace(block=r.block.replace(alloc_buffers=(buffer,))))


def _wrong_index_count() -> PrimFunc:
    func = parse(ELEMENTWISE)()

    class _Drop(IRMutator):
        def visit_BufferLoad(self, load: BufferLoad) -> Any:
            return load.replace(indices=(load.indices[0], load.indices[0]))

    return edit_block(func, "C", lambda r: r.replace(block=r.block.replace(body=_Drop().visit(r.block.body))))


# ---------------------------------------------------------------- script programs

KERNEL_HEADER = '''
@T.script
def f(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
'''

CASES: list[Case] = [
    # ------------------------------------------------------------ well-formed
    Case(
        "duplicate_block_names",
        "well-formed",
        parse(ELEMENTWISE.replace('T.block("C")', 'T.block("B")')),
    ),
    Case(
        "loop_var_used_inside_block",
        "well-formed",
        parse(
            """
@T.script
def f(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in range(16):
        with T.block("B"):
            vi = T.spatial_axis(16, i)
            B[vi] = A[vi] + T.cast(i, "float32")
"""
        ),
    ),
    Case("iter_var_outside_its_block", "well-formed", _iter_var_outside_block),
    Case("undefined_variable", "well-formed", _undefined_variable),
    Case("undeclared_buffer", "well-formed", _undeclared_buffer),
    Case("shadowed_loop_variable", "well-formed", _shadowed_loop_variable),
    Case("buffer_allocated_twice", "well-formed", _allocated_twice),
    Case("wrong_index_count", "well-formed", _wrong_index_count),
    Case(
        "reduce_iterator_in_write_index",
        "well-formed",
        parse(
            """
@T.script
def f(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32")):
    for i, k in T.grid(8, 8):
        with T.block("B"):
            vi = T.spatial_axis(8, i)
            vk = T.reduce_axis(8, k)
            B[vi, vk] = B[vi, vk] + A[vi, vk]
"""
        ),
    ),
    Case(
        "spatial_iterator_not_written",
        "well-formed",
        parse(
            """
@T.script
def f(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8,), "float32")):
    for i, j in T.grid(8, 8):
        with T.block("B"):
            vi = T.spatial_axis(8, i)
            vj = T.spatial_axis(8, j)
            B[vi] = A[vi, vj]
"""
        ),
    ),
    Case(
        "write_not_declared",
        "well-formed",
        parse(
            """
@T.script
def f(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B"):
            vi = T.spatial_axis(8, i)
            T.reads(A[vi])
            T.writes(B[vi])
            B[vi] = A[vi]
            C[vi] = A[vi]
"""
        ),
    ),
    # ------------------------------------------------------------ binding
    Case(
        "dependent_bindings_paper",
        "binding",
        parse(
            """
@T.script
def f(A: T.Buffer((32, 32), "float32"), B: T.Buffer((32, 32), "float32")):
    for i in range(16):
        with T.block("B"):
            v1 = T.spatial_axis(32, i)
            v2 = T.spatial_axis(32, i * 2)
            B[v1, v2] = A[v1, v2]
"""
        ),
    ),
    Case(
        "same_loop_bound_twice",
        "binding",
        parse(
            """
@T.script
def f(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32")):
    for i in range(16):
        with T.block("B"):
            vi = T.spatial_axis(16, i)
            vj = T.spatial_axis(16, i)
            B[vi, vj] = A[vi, vj]
"""
        ),
    ),
    Case(
        "non_affine_binding",
        "binding",
        parse(
            """
@T.script
def f(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i, j in T.grid(4, 4):
        with T.block("B"):
            vi = T.spatial_axis(16, i * j)
            B[vi] = A[vi]
"""
        ),
    ),
    Case(
        "binding_with_gaps",
        "binding",
        parse(
            """
@T.script
def f(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i, j in T.grid(4, 3):
        with T.block("B"):
            vi = T.spatial_axis(16, i * 4 + j)
            B[vi] = A[vi]
"""
        ),
    ),
    Case(
        "binding_outside_domain",
        "binding",
        parse(
            """
@T.script
def f(A: T.Buffer((20,), "float32"), B: T.Buffer((20,), "float32")):
    for i in range(20):
        with T.block("B"):
            vi = T.spatial_axis(16, i)
            B[vi] = A[vi]
"""
        ),
    ),
    Case(
        "split_without_predicate_exceeds_domain",
        "binding",
        parse(
            """
@T.script
def f(A: T.Buffer((100,), "float32"), B: T.Buffer((100,), "float32")):
    for i0, i1 in T.grid(4, 32):
        with T.block("B"):
            vi = T.spatial_axis(100, i0 * 32 + i1)
            B[vi] = A[vi]
"""
        ),
    ),
    Case(
        "reduction_incomplete",
        "binding",
        parse(
            """
@T.script
def f(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8,), "float32")):
    for i, k in T.grid(8, 8):
        with T.block("B"):
            vi = T.spatial_axis(8, i)
            vk = T.reduce_axis(16, k)
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] + A[vi, vk]
"""
        ),
    ),
    Case(
        "reduction_runs_twice",
        "binding",
        parse(
            """
@T.script
def f(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8,), "float32")):
    for i, k, r in T.grid(8, 16, 2):
        with T.block("B"):
            vi = T.spatial_axis(8, i)
            vk = T.reduce_axis(16, k)
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] + A[vi, vk]
"""
        ),
    ),
    Case(
        "reduction_overlaps_itself",
        "binding",
        parse(
            """
@T.script
def f(A: T.Buffer((8, 10), "float32"), B: T.Buffer((8,), "float32")):
    for i, k0, k1 in T.grid(8, 4, 4):
        with T.block("B"):
            vi = T.spatial_axis(8, i)
            vk = T.reduce_axis(10, k0 * 2 + k1)
            with T.init():
                B[vi] = 0.0
            B[vi] = B[vi] + A[vi, vk]
"""
        ),
    ),
    # ------------------------------------------------------------ reduction-binding
    Case(
        "reduce_loop_parallel",
        "reduction-binding",
        parse(
            """
@T.script
def f(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        for k in T.parallel(16):
            with T.block("B"):
                vi = T.spatial_axis(8, i)
                vk = T.reduce_axis(16, k)
                with T.init():
                    B[vi] = 0.0
                B[vi] = B[vi] + A[vi, vk]
"""
        ),
    ),
    Case(
        "reduce_loop_vectorized",
        "reduction-binding",
        parse(
            """
@T.script
def f(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        for k in T.vectorized(16):
            with T.block("B"):
                vi = T.spatial_axis(8, i)
                vk = T.reduce_axis(16, k)
                with T.init():
                    B[vi] = 0.0
                B[vi] = B[vi] + A[vi, vk]
"""
        ),
    ),
    Case(
        "reduce_loop_on_threads_without_annotation",
        "reduction-binding",
        parse(
            """
@T.script
def f(A: T.Buffer((8, 32), "float32"), B: T.Buffer((8,), "float32")):
    for i in T.thread_binding(8, thread="blockIdx.x"):
        for k in T.thread_binding(32, thread="threadIdx.x"):
            with T.block("B"):
                vi = T.spatial_axis(8, i)
                vk = T.reduce_axis(32, k)
                with T.init():
                    B[vi] = 0.0
                B[vi] = B[vi] + A[vi, vk]
"""
        ),
    ),
    Case(
        "reduce_loop_on_blocks_even_annotated",
        "reduction-binding",
        parse(
            """
@T.script
def f(A: T.Buffer((8, 32), "float32"), B: T.Buffer((8,), "float32")):
    for k in T.thread_binding(32, thread="blockIdx.x"):
        for i in T.thread_binding(8, thread="threadIdx.x"):
            with T.block("B"):
                vi = T.spatial_axis(8, i)
                vk = T.reduce_axis(32, k)
                T.block_attr({"cross_thread_reduction": True})
                with T.init():
                    B[vi] = 0.0
                B[vi] = B[vi] + A[vi, vk]
"""
        ),
    ),
    Case(
        "reduce_loop_on_vthread_even_annotated",
        "reduction-binding",
        parse(
            """
@T.script
def f(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8,), "float32")):
    for i in T.thread_binding(8, thread="threadIdx.x"):
        for ko in T.thread_binding(2, thread="vthread.x"):
            for ki in range(8):
                with T.block("B"):
                    vi = T.spatial_axis(8, i)
                    vk = T.reduce_axis(16, ko * 8 + ki)
                    T.block_attr({"cross_thread_reduction": True})
                    with T.init():
                        B[vi] = 0.0
                    B[vi] = B[vi] + A[vi, vk]
"""
        ),
    ),
    # ------------------------------------------------------------ region-cover
    Case(
        "producer_writes_half",
        "region-cover",
        parse(
            """
@T.script
def f(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    T_ = T.alloc_buffer((16,), "float32")
    for i in range(8):
        with T.block("T"):
            vi = T.spatial_axis(16, i)
            T_[vi] = A[vi]
    for i in range(16):
        with T.block("B"):
            vi = T.spatial_axis(16, i)
            B[vi] = T_[vi]
"""
        ),
    ),
    Case(
        "no_producer",
        "region-cover",
        parse(
            """
@T.script
def f(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    T_ = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("B"):
            vi = T.spatial_axis(16, i)
            B[vi] = T_[vi] + A[vi]
"""
        ),
    ),
    Case(
        "consumer_before_producer",
        "region-cover",
        parse(
            """
@T.script
def f(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    T_ = T.alloc_buffer((16,), "float32")
    for i in range(16):
        with T.block("B"):
            vi = T.spatial_axis(16, i)
            B[vi] = T_[vi]
    for i in range(16):
        with T.block("T"):
            vi = T.spatial_axis(16, i)
            T_[vi] = A[vi]
"""
        ),
    ),
    Case(
        "computed_at_wrong_tile",
        "region-cover",
        parse(
            """
@T.script
def f(A: T.Buffer((20,), "float32"), B: T.Buffer((16,), "float32")):
    T_ = T.alloc_buffer((20,), "float32")
    for i in range(4):
        for ax0 in range(4):
            with T.block("T"):
                vi = T.spatial_axis(20, i * 4 + ax0)
                T_[vi] = A[vi]
        for ii in range(4):
            with T.block("B"):
                vi = T.spatial_axis(16, i * 4 + ii)
                B[vi] = T_[vi + 4]
"""
        ),
    ),
    Case(
        "stencil_window_too_small",
        "region-cover",
        parse(
            """
@T.script
def f(A: T.Buffer((18,), "float32"), B: T.Buffer((16,), "float32")):
    T_ = T.alloc_buffer((18,), "float32")
    for i in range(16):
        for ax0 in range(2):
            with T.block("T"):
                vi = T.spatial_axis(18, i + ax0)
                T_[vi] = A[vi]
        with T.block("B"):
            vi = T.spatial_axis(16, i)
            B[vi] = T_[vi] + T_[vi + 1] + T_[vi + 2]
"""
        ),
    ),
    # ------------------------------------------------------------ cooperative-access
    Case(
        "shared_partly_loaded",
        "cooperative-access",
        parse(
            """
@T.script
def f(A: T.Buffer((256,), "float32"), B: T.Buffer((256,), "float32")):
    S = T.alloc_buffer((256,), "float32", scope="shared")
    for bx in T.thread_binding(4, thread="blockIdx.x"):
        for tx in T.thread_binding(16, thread="threadIdx.x"):
            with T.block("load"):
                vb, vt = T.remap("SS", bx, tx)
                S[vb * 64 + vt] = A[vb * 64 + vt]
        for tx in T.thread_binding(16, thread="threadIdx.x"):
            for j in range(4):
                with T.block("use"):
                    vb = T.spatial_axis(4, bx)
                    vt = T.spatial_axis(64, tx * 4 + j)
                    B[vb * 64 + vt] = S[vb * 64 + vt]
"""
        ),
    ),
    Case(
        "shared_strided_load_misses_last",
        "cooperative-access",
        parse(
            """
@T.script
def f(A: T.Buffer((32,), "float32"), B: T.Buffer((32,), "float32")):
    S = T.alloc_buffer((32,), "float32", scope="shared")
    for tx in T.thread_binding(16, thread="threadIdx.x"):
        with T.block("load"):
            vt = T.spatial_axis(16, tx)
            S[vt * 2] = A[vt * 2]
        with T.block("use"):
            vt = T.spatial_axis(16, tx)
            T.reads(S[0:32])
            B[vt * 2] = S[31 - vt * 2]
            B[vt * 2 + 1] = S[vt]
"""
        ),
    ),
    Case(
        "shared_written_by_another_kernel",
        "cooperative-access",
        parse(
            """
@T.script
def f(A: T.Buffer((32,), "float32"), B: T.Buffer((32,), "float32")):
    S = T.alloc_buffer((32,), "float32", scope="shared")
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        with T.block("load"):
            vt = T.spatial_axis(32, tx)
            S[vt] = A[vt]
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        with T.block("use"):
            vt = T.spatial_axis(32, tx)
            B[vt] = S[vt]
"""
        ),
    ),
    # ------------------------------------------------------------ thread-binding
    Case(
        "two_extents_for_one_tag",
        "thread-binding",
        parse(
            KERNEL_HEADER
            + """
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        for tx in T.thread_binding(32, thread="threadIdx.x"):
            with T.block("B"):
                vt = T.spatial_axis(64, tx)
                B[vt] = A[vt]
        for tx in T.thread_binding(64, thread="threadIdx.x"):
            with T.block("C"):
                vt = T.spatial_axis(64, tx)
                B[vt] = A[vt] + 1.0
"""
        ),
    ),
    Case(
        "thread_dimension_limit",
        "thread-binding",
        parse(
            KERNEL_HEADER
            + """
    for tz in T.thread_binding(128, thread="threadIdx.z"):
        with T.block("B"):
            vt = T.spatial_axis(64, tz // 2)
            T.where(tz % 2 == 0)
            B[vt] = A[vt]
"""
        ),
        target="cuda -arch=sm_80",
    ),
    Case(
        "too_many_threads",
        "thread-binding",
        parse(
            """
@T.script
def f(A: T.Buffer((2048,), "float32"), B: T.Buffer((2048,), "float32")):
    for ty in T.thread_binding(2, thread="threadIdx.y"):
        for tx in T.thread_binding(1024, thread="threadIdx.x"):
            with T.block("B"):
                vt = T.spatial_axis(2048, ty * 1024 + tx)
                B[vt] = A[vt]
"""
        ),
        target="cuda -arch=sm_80",
    ),
    Case(
        "threads_on_a_cpu",
        "thread-binding",
        parse(
            KERNEL_HEADER
            + """
    for tx in T.thread_binding(64, thread="threadIdx.x"):
        with T.block("B"):
            vt = T.spatial_axis(64, tx)
            B[vt] = A[vt]
"""
        ),
        target="llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64",
    ),
    # ------------------------------------------------------------ shared-memory
    Case(
        "shared_buffer_too_large",
        "shared-memory",
        parse(
            """
@T.script
def f(A: T.Buffer((65536,), "float32"), B: T.Buffer((65536,), "float32")):
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        with T.block("tile"):
            vb = T.spatial_axis(1, bx)
            T.reads(A[0:65536])
            T.writes(B[0:65536])
            S = T.alloc_buffer((65536,), "float32", scope="shared")
            for tx in T.thread_binding(256, thread="threadIdx.x"):
                for j in range(256):
                    with T.block("load"):
                        v = T.spatial_axis(65536, j * 256 + tx)
                        S[v] = A[v]
            for tx in T.thread_binding(256, thread="threadIdx.x"):
                for j in range(256):
                    with T.block("use"):
                        v = T.spatial_axis(65536, j * 256 + tx)
                        B[v] = S[v]
"""
        ),
        target="cuda -arch=sm_80",
    ),
    Case(
        "two_shared_caches_too_large",
        "shared-memory",
        parse(
            """
@T.script
def f(A: T.Buffer((128, 256), "float32"), B: T.Buffer((128, 256), "float32")):
    A_shared = T.alloc_buffer((128, 256), "float32", scope="shared")
    B_shared = T.alloc_buffer((128, 256), "float32", scope="shared")
    for bx in T.thread_binding(1, thread="blockIdx.x"):
        for tx in T.thread_binding(256, thread="threadIdx.x"):
            for i in range(128):
                with T.block("A_shared"):
                    vi, vj = T.remap("SS", i, tx)
                    A_shared[vi, vj] = A[vi, vj]
        for tx in T.thread_binding(256, thread="threadIdx.x"):
            for i in range(128):
                with T.block("B_shared"):
                    vi, vj = T.remap("SS", i, tx)
                    B_shared[vi, vj] = A_shared[vi, vj] * 2.0
        for tx in T.thread_binding(256, thread="threadIdx.x"):
            for i in range(128):
                with T.block("B"):
                    vi, vj = T.remap("SS", i, tx)
                    B[vi, vj] = B_shared[vi, vj]
"""
        ),
        target="cuda -arch=sm_80",
    ),
    # ------------------------------------------------------------ intrinsic-scope
    Case(
        "warp_op_outside_kernel",
        "intrinsic-scope",
        parse(
            """
@T.script
def f(A: T.Buffer((16,), "float32")):
    for i in range(4):
        T.evaluate(T.call_extern("int32", "wmma.mma_sync", i))
"""
        ),
    ),
    Case(
        "warp_op_under_two_warps",
        "intrinsic-scope",
        parse(
            """
@T.script
def f(A: T.Buffer((16,), "float32")):
    for tx in T.thread_binding(64, thread="threadIdx.x"):
        T.evaluate(T.call_extern("int32", "wmma.mma_sync", tx))
"""
        ),
    ),
    Case(
        "warp_op_without_lanes",
        "intrinsic-scope",
        parse(
            """
@T.script
def f(A: T.Buffer((16,), "float32")):
    for ty in T.thread_binding(4, thread="threadIdx.y"):
        T.evaluate(T.call_extern("int32", "mma.sync.m16n8k16", ty))
"""
        ),
        target="cuda -arch=sm_80",
    ),
    Case(
        "warp_op_vectorized",
        "intrinsic-scope",
        parse(
            """
@T.script
def f(A: T.Buffer((16,), "float32")):
    for tx in T.thread_binding(32, thread="threadIdx.x"):
        for v in T.vectorized(4):
            T.evaluate(T.call_extern("int32", "ldmatrix.x4", tx, v))
"""
        ),
    ),
    # ------------------------------------------------------------ out-of-bounds
    Case(
        "read_far_past_the_end",
        "out-of-bounds",
        parse(
            """
@T.script
def f(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block("B"):
            vi = T.spatial_axis(4, i)
            B[vi] = A[vi + 100000000]
"""
        ),
    ),
    Case(
        "write_before_the_start",
        "out-of-bounds",
        parse(
            """
@T.script
def f(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4, 8), "float32")):
    for i, j in T.grid(4, 8):
        with T.block("B"):
            vi, vj = T.remap("SS", i, j)
            T.reads(A[vi, vj])
            T.writes(B[vi, vj - 8])
            B[vi, vj - 8] = A[vi, vj]
"""
        ),
    ),
]
