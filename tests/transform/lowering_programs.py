"""Small programs the lowering-pass tests share, each with a way to make its arguments.

``PROGRAMS`` maps a name to ``(kernel, make_args)``; ``make_args(rng)`` returns one argument per
parameter (numpy arrays for buffers, Python numbers for scalars). ``run_both`` interprets two
programs on copies of the same arguments and returns both results.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import tir
import tir.script as T
from tir.ir import IRVisitor, Node
from tir.transform import passes

N = 16


@T.script
def matmul_init(A: T.Buffer((8, 6), "float32"), B: T.Buffer((6, 4), "float32"), C: T.Buffer((8, 4), "float32")):
    for i, j, k in T.grid(8, 4, 6):
        with T.block("C"):
            vi, vj, vk = T.remap("SSR", i, j, k)
            with T.init():
                C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]


@T.script
def init_spatial_only(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B"):
            vi = T.spatial_axis(8, i)
            with T.init():
                B[vi] = 1.0
            B[vi] = B[vi] + A[vi]


@T.script
def two_reduce_axes(A: T.Buffer((4, 3, 5), "float32"), B: T.Buffer((4,), "float32")):
    for i, k0, k1 in T.grid(4, 3, 5):
        with T.block("B"):
            vi, vk0, vk1 = T.remap("SRR", i, k0, k1)
            with T.init():
                B[vi] = T.float32("-inf")
            B[vi] = T.max(B[vi], A[vi, vk0, vk1])


@T.script
def split_predicate(A: T.Buffer((10,), "float32"), B: T.Buffer((10,), "float32")):
    for io, ii in T.grid(3, 4):
        with T.block("B"):
            vi = T.spatial_axis(10, io * 4 + ii)
            T.where(io * 4 + ii < 10)
            B[vi] = A[vi] * 2.0 + 1.0


@T.script
def nested_blocks(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16,), "float32")):
    with T.block("outer"):
        S = T.alloc_buffer((4, 4), "float32")
        for i in range(4):
            with T.block("inner"):
                vi = T.spatial_axis(4, i)
                Asub = T.match_buffer(A[vi * 4 : vi * 4 + 4, 0:4], (4, 4), "float32")
                for j in range(4):
                    with T.block("leaf"):
                        vj = T.spatial_axis(4, j)
                        S[vi, vj] = Asub[vj, 0] + Asub[0, vj]
        for i, j in T.grid(4, 4):
            with T.block("out"):
                vi, vj = T.remap("SS", i, j)
                B[vi * 4 + vj] = S[vi, vj]


@T.script
def match_unit_dims(A: T.Buffer((4, 8, 8), "float32"), B: T.Buffer((4, 8), "float32")):
    for b, i in T.grid(4, 2):
        with T.block("tile"):
            vb, vi = T.remap("SS", b, i)
            Asub = T.match_buffer(A[vb, vi * 4 : vi * 4 + 4, 2:3], (4,), "float32")
            Bsub = T.match_buffer(B[vb : vb + 1, vi * 4 : vi * 4 + 4], (1, 4), "float32")
            for k in range(4):
                with T.block("copy"):
                    vk = T.spatial_axis(4, k)
                    Bsub[0, vk] = Asub[vk] * 3.0


@T.script
def elementwise_vec(A: T.Buffer((4, 8), "float32"), C: T.Buffer((4,), "float32"), B: T.Buffer((4, 8), "float32")):
    for i in range(4):
        for j in T.vectorized(8):
            with T.block("B"):
                vi, vj = T.remap("SS", i, j)
                B[vi, vj] = T.exp(A[vi, vj]) * 0.5 + C[vi] + T.cast(vj, "float32")


@T.script
def select_vec(A: T.Buffer((32,), "float32"), B: T.Buffer((32,), "float32")):
    for i in range(8):
        for j in T.vectorized(4):
            with T.block("B"):
                vi = T.spatial_axis(32, i * 4 + j)
                B[vi] = T.select(A[vi] > 0.0, A[vi], A[vi] * 0.1) + T.if_then_else(i < 4, 1.0, 2.0)


@T.script
def reduce_vec_fallback(A: T.Buffer((4, 8), "float32"), C: T.Buffer((4,), "float32")):
    for i in range(4):
        for k in T.vectorized(8):
            with T.block("C"):
                vi, vk = T.remap("SR", i, k)
                with T.init():
                    C[vi] = 0.0
                C[vi] = C[vi] + A[vi, vk]


@T.script
def cond_vec_fallback(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in T.vectorized(16):
        with T.block("B"):
            vi = T.spatial_axis(16, i)
            if vi % 2 == 0:
                B[vi] = A[vi]
            else:
                B[vi] = 0.0


@T.script
def shifted_vec_fallback(A: T.Buffer((17,), "float32")):
    for i in T.vectorized(16):
        with T.block("A"):
            vi = T.spatial_axis(16, i)
            A[vi + 1] = A[vi] + 1.0


@T.script
def unrolled(A: T.Buffer((4, 3), "float32"), B: T.Buffer((4, 3), "float32"), n: T.int32):
    for i in range(4):
        for j in T.unroll(3):
            with T.block("B"):
                vi, vj = T.remap("SS", i, j)
                B[vi, vj] = A[vi, vj] * 2.0
    for k in T.unroll(n):
        with T.block("C"):
            vk = T.spatial_axis(4, k)
            B[vk, 0] = B[vk, 0] + 1.0


@T.script
def unrolled_alloc(A: T.Buffer((4, 8), "float32"), B: T.Buffer((4, 8), "float32")):
    for i in T.unroll(4):
        with T.block("t"):
            vi = T.spatial_axis(4, i)
            S = T.alloc_buffer((8,), "float32")
            for j in range(8):
                with T.block("s"):
                    vj = T.spatial_axis(8, j)
                    S[vj] = A[vi, vj] * 2.0
            for j in T.vectorized(8):
                with T.block("o"):
                    vj = T.spatial_axis(8, j)
                    B[vi, vj] = S[vj] + 1.0


@T.script
def parallel_cache(A: T.Buffer((N, N), "float32"), B: T.Buffer((N, N), "float32")):
    C = T.alloc_buffer((N, N), "float32")
    for i in T.parallel(N):
        for j in range(N):
            with T.block("C"):
                vi, vj = T.remap("SS", i, j)
                C[vi, vj] = A[vi, vj] * 2.0
        for j in T.vectorized(N):
            with T.block("B"):
                vi, vj = T.remap("SS", i, j)
                B[vi, vj] = C[vi, vj] + 1.0


@T.script
def carried_buffer(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    acc = T.alloc_buffer((1,), "float32")
    for i in range(8):
        with T.block("acc"):
            vi = T.reduce_axis(8, i)
            with T.init():
                acc[0] = 0.0
            acc[0] = acc[0] + A[vi]
            B[vi] = acc[0]


@T.script
def big_and_small(A: T.Buffer((256, 128), "float32"), B: T.Buffer((256, 128), "float32")):
    big = T.alloc_buffer((256, 128), "float32")
    for i, j in T.grid(256, 128):
        with T.block("big"):
            vi, vj = T.remap("SS", i, j)
            big[vi, vj] = A[vi, vj] + 1.0
    for i, j in T.grid(256, 128):
        with T.block("out"):
            vi, vj = T.remap("SS", i, j)
            B[vi, vj] = big[255 - vi, vj]


@T.script
def symbolic_param(A: T.Buffer((n, 4), "float32"), B: T.Buffer((n, 4), "float32"), n: T.int32):  # noqa: F821
    T_tmp = T.alloc_buffer((n, 4), "float32")
    for i, j in T.grid(n, 4):
        with T.block("t"):
            vi, vj = T.remap("SS", i, j)
            T_tmp[vi, vj] = A[vi, vj] * 2.0
    for i in range(n):
        for j in T.vectorized(4):
            with T.block("b"):
                vi, vj = T.remap("SS", i, j)
                B[vi, vj] = T_tmp[vi, vj] + 1.0


@T.script
def symbolic_declared(a: T.handle, b: T.handle):
    m = T.int32()
    A = T.match_buffer(a, (m, 3), "float32")
    B = T.match_buffer(b, (m,), "float32")
    for i in range(m):
        for k in T.unroll(3):
            with T.block("B"):
                vi, vk = T.remap("SR", i, k)
                with T.init():
                    B[vi] = 0.0
                B[vi] = B[vi] + A[vi, vk]


@T.script
def tiled_boundary(A: T.Buffer((10,), "float32"), B: T.Buffer((10,), "float32")):
    for io in range(3):
        with T.block("tile"):
            vio = T.spatial_axis(3, io)
            T.reads(A[vio * 4 : vio * 4 + 4])
            T.writes(B[vio * 4 : vio * 4 + 4])
            local = T.alloc_buffer((10,), "float32")
            for ii in range(4):
                with T.block("load"):
                    vi = T.spatial_axis(10, vio * 4 + ii)
                    T.where(vio * 4 + ii < 10)
                    local[vi] = A[vi]
            for ii in range(4):
                with T.block("store"):
                    vi = T.spatial_axis(10, vio * 4 + ii)
                    T.where(vio * 4 + ii < 10)
                    B[vi] = local[vi] * local[vi]


def _floats(*shape: int) -> Callable[[np.random.Generator], np.ndarray]:
    return lambda rng: rng.standard_normal(shape).astype(np.float32)


def _zeros(*shape: int) -> Callable[[np.random.Generator], np.ndarray]:
    return lambda rng: np.zeros(shape, np.float32)


def _args(*makers: Any) -> Callable[[np.random.Generator], list[Any]]:
    return lambda rng: [maker(rng) if callable(maker) else maker for maker in makers]


PROGRAMS: dict[str, tuple[tir.PrimFunc, Callable[[np.random.Generator], list[Any]]]] = {
    "matmul_init": (matmul_init, _args(_floats(8, 6), _floats(6, 4), _zeros(8, 4))),
    "init_spatial_only": (init_spatial_only, _args(_floats(8), _zeros(8))),
    "two_reduce_axes": (two_reduce_axes, _args(_floats(4, 3, 5), _zeros(4))),
    "split_predicate": (split_predicate, _args(_floats(10), _zeros(10))),
    "nested_blocks": (nested_blocks, _args(_floats(16, 16), _zeros(16))),
    "match_unit_dims": (match_unit_dims, _args(_floats(4, 8, 8), _zeros(4, 8))),
    "elementwise_vec": (elementwise_vec, _args(_floats(4, 8), _floats(4), _zeros(4, 8))),
    "select_vec": (select_vec, _args(_floats(32), _zeros(32))),
    "reduce_vec_fallback": (reduce_vec_fallback, _args(_floats(4, 8), _zeros(4))),
    "cond_vec_fallback": (cond_vec_fallback, _args(_floats(16), _zeros(16))),
    "shifted_vec_fallback": (shifted_vec_fallback, _args(_floats(17))),
    "unrolled": (unrolled, _args(_floats(4, 3), _zeros(4, 3), 4)),
    "unrolled_alloc": (unrolled_alloc, _args(_floats(4, 8), _zeros(4, 8))),
    "parallel_cache": (parallel_cache, _args(_floats(N, N), _zeros(N, N))),
    "carried_buffer": (carried_buffer, _args(_floats(8), _zeros(8))),
    "big_and_small": (big_and_small, _args(_floats(256, 128), _zeros(256, 128))),
    "symbolic_param": (symbolic_param, _args(_floats(5, 4), _zeros(5, 4), 5)),
    "symbolic_declared": (symbolic_declared, _args(_floats(7, 3), _zeros(7))),
    "tiled_boundary": (tiled_boundary, _args(_floats(10), _zeros(10))),
}


def lower_before(func: tir.PrimFunc, pass_name: str | None = None) -> tir.PrimFunc:
    """``func`` after the pipeline's passes that come before ``pass_name`` (None: all of them).

    ``lower_parallel`` is left out: it outlines parallel loops into launches of other
    functions, which the interpreter does not run; its own tests check it.
    """
    mod = tir.IRModule({func.name: func})
    for name, run_pass in passes():
        if name == pass_name:
            return mod[func.name]
        if name != "lower_parallel":
            mod = run_pass(mod)
    if pass_name is not None:
        raise ValueError(f"no pass named {pass_name!r}")
    return mod[func.name]


class _Inventory(IRVisitor):
    def __init__(self) -> None:
        self.nodes: list[Node] = []

    def generic_visit(self, node: Node) -> None:
        self.nodes.append(node)
        super().generic_visit(node)

    def visit_Buffer(self, buffer: tir.Buffer) -> None:
        self.nodes.append(buffer)


def nodes_of(node: Node) -> list[Node]:
    """Every node under ``node`` (buffers included)."""
    inventory = _Inventory()
    inventory.visit(node)
    return inventory.nodes


def assert_lowered(mod: tir.IRModule, entry: str) -> None:
    """The contract of docs/lowering.md: no blocks, 1-D buffers, no vectorized / unrolled loops."""
    assert "param_shapes" in mod[entry].attrs
    for func in mod.functions.values():
        for param in func.params:
            if isinstance(param, tir.Buffer):
                assert param.ndim == 1, param
        for node in nodes_of(func.body):
            assert not isinstance(node, (tir.Block, tir.BlockRealize)), node
            if isinstance(node, tir.Buffer):
                assert node.ndim == 1 and not node.strides, node
            if isinstance(node, tir.For):
                assert node.kind in (tir.ForKind.SERIAL, tir.ForKind.PARALLEL, tir.ForKind.THREAD_BINDING), node


def run(func: tir.PrimFunc | tir.IRModule, args: list[Any], flat: bool = False) -> list[Any]:
    """Interpret ``func`` on copies of ``args``; ``flat`` passes arrays as 1-D views."""
    copies = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    passed = [a.reshape(-1) if flat and isinstance(a, np.ndarray) else a for a in copies]
    tir.interpret(func, *passed)
    return copies


def assert_same_results(
    before: tir.PrimFunc, after: tir.PrimFunc | tir.IRModule, make_args: Any, flat: bool = False, seed: int = 0
) -> None:
    """``before`` and ``after`` compute the same outputs (exactly: the same operations run)."""
    args = make_args(np.random.default_rng(seed))
    expected = run(before, args)
    got = run(after, args, flat=flat)
    for want, have in zip(expected, got):
        if isinstance(want, np.ndarray):
            np.testing.assert_allclose(have, want, rtol=1e-6, atol=1e-6)
