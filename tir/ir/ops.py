"""The named operations a ``Call`` may carry, and how the script spells them.

Each op has an arity range and a dtype rule:
- ``"same"``: the result has the dtype of the first value argument (math functions);
- ``"explicit"``: the script gives the result dtype as the first argument
  (``T.call_llvm_intrin("float32x8", "llvm.fma.v8f32", a, b, c)``);
- ``"branch"``: ``if_then_else(cond, a, b)`` has the dtype of ``a``.

A Call with an explicit dtype stores the callee name as a leading ``StringImm`` argument.
Registering a new op is one ``register_op`` call (target intrinsics do this).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OpInfo:
    name: str
    min_args: int
    max_args: int | None  # None: variadic
    dtype_rule: str  # "same", "explicit", "branch", "bool"
    float_only: bool = False
    pure: bool = True
    int_only: bool = False
    doc: str = ""


_OPS: dict[str, OpInfo] = {}


def register_op(info: OpInfo) -> OpInfo:
    _OPS[info.name] = info
    return info


def get_op(name: str) -> OpInfo | None:
    return _OPS.get(name)


def all_ops() -> dict[str, OpInfo]:
    return dict(_OPS)


#: Unary float math functions: result dtype = argument dtype.
FLOAT_UNARY = (
    "exp",
    "exp2",
    "log",
    "log2",
    "log10",
    "sqrt",
    "rsqrt",
    "tanh",
    "sigmoid",
    "erf",
    "sin",
    "cos",
    "floor",
    "ceil",
    "round",
    "trunc",
)

#: Math calls as cheap as an arithmetic operation (one instruction or close); the others
#: (exp, tanh, erf, sigmoid, log, ...) cost tens of instructions a vector.
CHEAP_MATH = frozenset({"fabs", "abs", "floor", "ceil", "trunc", "round", "sqrt", "nearbyint"})


def calls_costly_math(node: object) -> bool:
    """Whether an expression or statement calls a float math function that is not in ``CHEAP_MATH``."""
    from tir.ir.expr import Call
    from tir.ir.functor import post_order_visit

    found = False

    def visit(item: object) -> None:
        nonlocal found
        if isinstance(item, Call) and item.op in FLOAT_UNARY and item.op not in CHEAP_MATH:
            found = True

    post_order_visit(node, visit)
    return found


for _name in FLOAT_UNARY:
    register_op(OpInfo(_name, 1, 1, "same", float_only=True))
register_op(OpInfo("abs", 1, 1, "same"))
register_op(OpInfo("pow", 2, 2, "same", float_only=True))
register_op(OpInfo("fma", 3, 3, "same", float_only=True, doc="a * b + c, rounded once"))
register_op(OpInfo("if_then_else", 3, 3, "branch", doc="evaluates only the taken branch"))
register_op(OpInfo("isnan", 1, 1, "bool", float_only=True))
#: Bitwise operations on integers (two's complement): ``a & b``, ``a | b``, ``a ^ b``, ``~a``.
BITWISE = ("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not")
for _name in BITWISE:
    register_op(
        OpInfo(_name, 1 if _name == "bitwise_not" else 2, 1 if _name == "bitwise_not" else 2, "same", int_only=True)
    )
register_op(OpInfo("call_llvm_intrin", 1, None, "explicit", pure=False, doc="an LLVM intrinsic by name"))
register_op(OpInfo("call_llvm_pure_intrin", 1, None, "explicit", doc="a side-effect-free LLVM intrinsic"))
register_op(OpInfo("call_extern", 1, None, "explicit", pure=False, doc="an external C function"))
register_op(
    OpInfo(
        "tir.parallel_launch",
        3,
        None,
        "explicit",
        pure=False,
        doc="run the outlined parallel loop body NAME over [min, min + extent) on a thread pool: "
        "(NAME, min, extent, captured...); captured buffers are passed as tir.address_of(B[0])",
    )
)
register_op(OpInfo("tir.address_of", 1, 1, "explicit", doc="the address of a buffer element: (B[i],)"))
register_op(
    OpInfo(
        "tir.buffer_stride",
        2,
        2,
        "explicit",
        doc="the stride (in elements) of dimension D of buffer B, as laid out after allocation "
        "compaction: (B[0, ...], D); flatten_buffers replaces it by the number",
    )
)

# ---------------------------------------------------------------- CUDA: barriers and warp-level tile ops
#
# The tile ops name a fragment by a load of its first element (``frag[i, j]``: the 16 x 16, or
# 16 x 8, tile of a fragment-scoped buffer that starts there) and a shared or global matrix by
# a load of its first element plus a leading dimension (``A[i, k]``, ``stride``): the loads are
# references, never evaluated. They print as ``nvcuda::wmma::...`` calls or inline PTX in the
# CUDA source (tir.codegen.cuda); the interpreter runs them on plain arrays (tir.interp).
# Lowering passes ask ``tile_accesses`` which elements each reference really touches.

register_op(OpInfo("cuda_syncthreads", 0, 0, "explicit", pure=False, doc="__syncthreads(): a block-wide barrier"))
register_op(
    OpInfo(
        "cuda_shfl_down_sync",
        4,
        4,
        "explicit",
        pure=False,
        doc="(mask, value, offset, width): __shfl_down_sync, the value of lane + offset in the warp; warp-level "
        "(every lane of mask runs it), no interpreter semantics (lower_cross_thread_reduction)",
    )
)
register_op(
    OpInfo("wmma_fill_fragment", 2, 2, "explicit", pure=False, doc="(frag[i, j], value): fill a 16x16 fragment")
)
register_op(
    OpInfo(
        "wmma_load_matrix_sync",
        3,
        3,
        "explicit",
        pure=False,
        doc="(frag[i, j], src[r, c], stride): load the 16x16 tile at src (row-major, leading dimension stride)",
    )
)
register_op(
    OpInfo("wmma_mma_sync", 4, 4, "explicit", pure=False, doc="(d[..], a[..], b[..], c[..]): d = a @ b + c, 16x16x16")
)
register_op(
    OpInfo(
        "wmma_store_matrix_sync",
        3,
        3,
        "explicit",
        pure=False,
        doc="(dst[r, c], frag[i, j], stride): store a 16x16 accumulator fragment row-major",
    )
)
register_op(
    OpInfo(
        "ptx_ldmatrix",
        4,
        4,
        "explicit",
        pure=False,
        doc="(frag[i, j], src[r, c], stride, trans): ldmatrix of a 16x16 A tile (trans=0) or 16x8 B tile (trans=1)",
    )
)
register_op(
    OpInfo("ptx_mma_sync", 4, 4, "explicit", pure=False, doc="(d[..], a[..], b[..], c[..]): mma.sync m16n8k16 f32")
)
register_op(OpInfo("ptx_mma_fill", 2, 2, "explicit", pure=False, doc="(frag[i, j], value): fill a 16x8 accumulator"))
register_op(
    OpInfo(
        "ptx_mma_store",
        3,
        3,
        "explicit",
        pure=False,
        doc="(dst[r, c], frag[i, j], stride): store a 16x8 m16n8k16 accumulator row-major",
    )
)

#: Tile shape of one fragment, by storage scope.
FRAGMENT_TILES: dict[str, tuple[int, int]] = {
    "wmma.matrix_a": (16, 16),
    "wmma.matrix_b": (16, 16),
    "wmma.accumulator": (16, 16),
    "m16n8k16.matrixA": (16, 16),
    "m16n8k16.matrixB": (16, 8),
    "m16n8k16.matrixC": (16, 8),
}

#: For each tile op: for each argument position (after the dtype) that is a reference, the index
#: of the argument whose tile shape it has (a fragment reference has its own scope's tile).
_TILE_REFERENCES: dict[str, dict[int, int]] = {
    "wmma_fill_fragment": {0: 0},
    "wmma_load_matrix_sync": {0: 0, 1: 0},
    "wmma_mma_sync": {0: 0, 1: 1, 2: 2, 3: 3},
    "wmma_store_matrix_sync": {0: 1, 1: 1},
    "ptx_ldmatrix": {0: 0, 1: 0},
    "ptx_mma_sync": {0: 0, 1: 1, 2: 2, 3: 3},
    "ptx_mma_fill": {0: 0},
    "ptx_mma_store": {0: 1, 1: 1},
}


def is_tile_op(name: str) -> bool:
    """Whether ``name`` is a warp-level tile op whose buffer loads are tile references."""
    return name in _TILE_REFERENCES


def tile_accesses(call: object) -> list[tuple[int, tuple[int, int]]]:
    """For a tile-op ``Call``: ``(argument position, (rows, cols))`` of each tile reference.

    Positions count the call's ``args`` (the leading dtype is not an argument). A reference
    ``B[..., r, c]`` touches ``B[..., r:r + rows, c:c + cols]``.
    """
    from tir.ir.expr import BufferLoad, Call

    assert isinstance(call, Call)
    refs = _TILE_REFERENCES.get(call.op)
    if refs is None:
        return []
    out = []
    for position, shaped_by in refs.items():
        fragment = call.args[shaped_by]
        if not isinstance(fragment, BufferLoad) or not isinstance(call.args[position], BufferLoad):
            continue
        tile = FRAGMENT_TILES.get(fragment.buffer.scope, (16, 16))
        out.append((position, tile))
    return out


# ---------------------------------------------------------------- CUDA: asynchronous copies (sm_80+)
#
# Emitted by tir.transform.software_pipeline. ``ptx_cp_async(dst[..], src[..], bytes)`` copies
# ``bytes`` contiguous bytes from a global element to a shared one (the loads are references,
# never evaluated); it completes only at a ``ptx_cp_async_wait_group``. The interpreter runs it
# as a plain copy and the commit / wait ops as nothing.

register_op(
    OpInfo(
        "ptx_cp_async",
        3,
        3,
        "explicit",
        pure=False,
        doc="(dst[..], src[..], bytes): cp.async of 4, 8 or 16 bytes from global src to shared dst",
    )
)
register_op(
    OpInfo("ptx_cp_async_commit_group", 0, 0, "explicit", pure=False, doc="cp.async.commit_group: close a group")
)
register_op(
    OpInfo(
        "ptx_cp_async_wait_group",
        1,
        1,
        "explicit",
        pure=False,
        doc="(n,): cp.async.wait_group n: wait until at most n committed groups are outstanding",
    )
)
