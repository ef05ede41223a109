"""Lower cross-thread reductions: a reduce loop bound to ``threadIdx.x`` becomes warp shuffles.

``sch.bind(k_inner, "threadIdx.x")`` on a loop that drives the reduce iterator of a reduction
block (sum, product, max or min with an identity init) annotates the block
``{"cross_thread_reduction": True}``. Run serially (the interpreter), the block is an ordinary
reduction; on a GPU its threads would race on the output, so this pass (the first of the GPU
pipeline: it needs the block, its init and its bindings) rewrites it. For a row sum with 256
threads::

    for i in T.thread_binding(128, thread="blockIdx.x"):
        for ko in range(4):
            for tx in T.thread_binding(256, thread="threadIdx.x"):
                with T.block("B"):
                    vi = T.axis.spatial(128, i)
                    vk = T.axis.reduce(1024, ko * 256 + tx)
                    T.block_attr({"cross_thread_reduction": True})
                    with T.init():
                        B[vi] = T.float32(0)
                    B[vi] = B[vi] + A[vi, vk]

becomes (``red``: two registers per thread, ``red_warps``: one partial per warp)::

    for i in T.thread_binding(128, thread="blockIdx.x"):
        with T.block("B_cross_thread"):
            T.reads(A[i, 0:1024])
            T.writes(B[i])
            B_red = T.alloc_buffer((2,), "float32", scope="local")
            B_red_warps = T.alloc_buffer((8,), "float32", scope="shared")
            for tx in T.thread_binding(256, thread="threadIdx.x"):
                B_red[0] = T.float32(0)                      # each thread: its partial
                for ko in range(4):
                    B_red[0] = B_red[0] + A[i, ko * 256 + tx]
                B_red[1] = T.cuda_shfl_down_sync("float32", -1, B_red[0], 16, 32)
                B_red[0] = B_red[0] + B_red[1]               # ... offsets 16, 8, 4, 2, 1
                if tx % 32 == 0:
                    B_red_warps[tx // 32] = B_red[0]
                T.cuda_syncthreads("handle")
                if tx // 32 == 0:                            # warp 0 combines the warps
                    B_red[0] = T.if_then_else(tx % 32 < 8, B_red_warps[tx % 32], T.float32(0))
                    ...                                      # offsets 4, 2, 1
                if tx == 0:
                    B[i] = B_red[0]

The threadIdx.x loop may run other statements before the reduction when it is the outermost
reduce loop: TVM's recipe (rfactor the inner part of the split reduction, bind it to threadIdx.x,
``reverse_compute_at`` the write-back under it) leaves each thread's partials computed first,
then the write-back over them; those statements stay in front of the shuffles. Statements after
the reduction in that loop are refused (they would run before thread 0 stored the result).

An extent that is not a multiple of 32 leaves the last warp partial: its shuffles name only its
active lanes in the mask, and a lane adds what it received only when the sending lane is active
(the shuffle itself runs on every active lane: ``__shfl_down_sync`` must). ``cuda_shfl_down_sync``
has no interpreter semantics (thread loops run one after another there, so no lane can read
another's register): interpret the program before this pass; the CUDA tests compile the result
and look for ``SHFL.DOWN`` in the SASS.
"""

from __future__ import annotations

from tir.analysis.block_access import infer_block_access
from tir.analysis.reduction import match_reduction
from tir.analysis.tree import TreeIndex, replace_stmt
from tir.ir import (
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferStore,
    Call,
    Evaluate,
    FloorDiv,
    FloorMod,
    For,
    ForKind,
    IfThenElse,
    IntImm,
    IterKind,
    Node,
    PrimExpr,
    PrimFunc,
    SeqStmt,
    Stmt,
    Var,
    as_dtype,
    post_order_visit,
    substitute,
)
from tir.transform._common import LoweringError, uses_buffer

#: The block annotation that ``bind`` sets (and the validator accepts).
CROSS_THREAD_REDUCTION = "cross_thread_reduction"
#: The shuffle op: ``T.cuda_shfl_down_sync(dtype, mask, value, offset, width)``.
SHFL_DOWN_OP = "cuda_shfl_down_sync"
WARP_SIZE = 32
MAX_THREADS = 1024


def _uses(node: Node, variables: set[Var]) -> bool:
    found = False

    def note(n: Node) -> None:
        nonlocal found
        if isinstance(n, Var) and n in variables:
            found = True

    post_order_visit(node, note)
    return found


def shfl_down(mask: PrimExpr, value: PrimExpr, offset: int) -> Call:
    """``__shfl_down_sync(mask, value, offset, 32)``: the value of lane ``lane + offset``."""
    i32 = as_dtype("int32")
    return Call(value.dtype, SHFL_DOWN_OP, (mask, value, IntImm(offset, i32), IntImm(WARP_SIZE, i32)))


def lower_cross_thread_reduction(func: PrimFunc) -> PrimFunc:
    """Rewrite every block annotated ``cross_thread_reduction`` (see the module docstring)."""
    while True:
        index = TreeIndex(func)
        pending = [r for r in index.blocks.values() if r.block.annotations.get(CROSS_THREAD_REDUCTION) is True]
        if not pending:
            return func
        func = _lower_one(func, index, pending[0])


def _fail(block: Block, why: str) -> LoweringError:
    return LoweringError(f"lower_cross_thread_reduction: block {block.name!r}: {why}")


def _lower_one(func: PrimFunc, index: object, realize: BlockRealize) -> PrimFunc:
    assert isinstance(index, TreeIndex)
    block = realize.block
    form = match_reduction(block)
    if form is None:
        raise _fail(block, "not a sum / product / max / min reduction with an identity init")
    if block.alloc_buffers or block.match_buffers:
        raise _fail(block, "the block allocates or matches buffers")
    loops = index.loops_above(realize)
    loop_vars = {loop.loop_var for loop in loops}
    spatial_vars: set[Var] = set()
    reduce_vars: set[Var] = set()
    for iv, value in zip(block.iter_vars, realize.iter_values):
        used = {v for v in loop_vars if _uses(value, {v})}
        if iv.kind is IterKind.SPATIAL:
            spatial_vars |= used
        elif iv.kind is IterKind.REDUCE:
            reduce_vars |= used
        else:
            raise _fail(block, f"iterator {iv.var.name} is opaque")
    first = next((k for k, loop in enumerate(loops) if loop.loop_var in reduce_vars), None)
    if first is None:
        raise _fail(block, "no loop drives its reduce iterators")
    chain = loops[first:]
    top = chain[0]
    for loop in chain:
        if loop.loop_var in spatial_vars or loop.loop_var not in reduce_vars:
            raise _fail(block, f"loop {loop.loop_var.name} under the outermost reduce loop is not a reduce loop")
        if _uses(loop.min, loop_vars) or _uses(loop.extent, loop_vars):
            raise _fail(block, f"the bounds of loop {loop.loop_var.name} depend on other loops")
    # Statements the thread loop runs before the reduction (an rfactor's partials, each thread
    # its own, with the write-back moved under the loop by reverse_compute_at) stay in front.
    prefix: tuple[Stmt, ...] = ()
    child: Node = realize  # the statement on the way up from the block, below ``node``
    for node in index.ancestors(realize):
        if node is top:
            break
        if isinstance(node, SeqStmt) and top.body is node:
            *before, final = node.stmts
            if final is not child:
                raise _fail(block, "statements follow its reduction in the threadIdx.x loop")
            if any(uses_buffer(stmt, form.update.buffer) for stmt in before):
                raise _fail(block, f"the statements before it in its loops touch {form.update.buffer.name}")
            prefix = tuple(before)
        elif not isinstance(node, For):
            raise _fail(block, f"a {type(node).__name__} lies between its reduce loops")
        child = node
    threads = [loop for loop in chain if loop.kind is ForKind.THREAD_BINDING]
    if len(threads) != 1 or threads[0].thread_tag != "threadIdx.x":
        raise _fail(block, "exactly one of its reduce loops must be bound to threadIdx.x")
    tx = threads[0]
    if prefix and tx is not top:
        raise _fail(block, "statements before it lie under a reduce loop outside its threadIdx.x loop")
    serial = [loop for loop in chain if loop is not tx]
    bad = [loop for loop in serial if loop.kind not in (ForKind.SERIAL, ForKind.UNROLLED)]
    if bad:
        raise _fail(block, f"reduce loop {bad[0].loop_var.name} is {bad[0].kind.value}")
    if not isinstance(tx.extent, IntImm) or not 1 <= tx.extent.value <= MAX_THREADS:
        raise _fail(block, f"the threadIdx.x extent must be a constant in [1, {MAX_THREADS}], got {tx.extent}")
    if not (isinstance(tx.min, IntImm) and tx.min.value == 0):
        raise _fail(block, "the threadIdx.x loop must start at 0")
    extent = tx.extent.value
    other_axes = [
        n for n in index.ancestors(top) if isinstance(n, For) and n.thread_tag in ("threadIdx.y", "threadIdx.z")
    ]
    if other_axes and extent != WARP_SIZE:
        # Warps would span several threadIdx.y rows (or need per-row warp partials).
        raise _fail(block, "with threadIdx.y / threadIdx.z loops around it the threadIdx.x extent must be 32")

    bindings = {iv.var: value for iv, value in zip(block.iter_vars, realize.iter_values)}
    dtype = form.update.buffer.dtype
    name = form.update.buffer.name
    i32 = as_dtype("int32")
    red = Buffer(f"{name}_red", (IntImm(2, i32),), dtype, scope="local")
    acc, received = BufferLoad(red, (IntImm(0, i32),)), BufferLoad(red, (IntImm(1, i32),))
    identity = form.init.value

    def set_acc(value: PrimExpr) -> Stmt:
        return BufferStore(red, value, (IntImm(0, i32),))

    # Each thread's partial value, serially over the other reduce loops.
    update: Stmt = set_acc(form.combine(acc, substitute(form.rhs, bindings)))
    predicate = substitute(realize.predicate, bindings)
    if not (isinstance(predicate, IntImm) and predicate.value == 1):
        update = IfThenElse(predicate, update)
    for loop in reversed(serial):
        update = loop.replace(body=update)
    stmts: list[Stmt] = [set_acc(identity), update]

    t = tx.loop_var
    lane = FloorMod(t, IntImm(WARP_SIZE, i32))
    warp = FloorDiv(t, IntImm(WARP_SIZE, i32))
    full_warps, tail = divmod(extent, WARP_SIZE)
    full_mask = IntImm(-1, i32)  # 0xffffffff
    if tail == 0:
        mask: PrimExpr = full_mask
        active: PrimExpr | None = None
    elif full_warps == 0:
        mask, active = IntImm((1 << tail) - 1, i32), IntImm(tail, i32)
    else:
        last = warp.equal(IntImm(full_warps, i32))
        mask = Call(i32, "if_then_else", (last, IntImm((1 << tail) - 1, i32), full_mask))
        active = Call(i32, "if_then_else", (last, IntImm(tail, i32), IntImm(WARP_SIZE, i32)))

    def warp_stage(lanes: int, mask: PrimExpr, active: PrimExpr | None) -> list[Stmt]:
        """Lane 0 of each warp ends with the combination of the warp's first ``lanes`` lanes."""
        out: list[Stmt] = []
        offset = WARP_SIZE // 2
        while offset >= 1:
            if offset < lanes:
                # Every active lane runs the shuffle; a lane combines only a value that an
                # active lane sent.
                out.append(BufferStore(red, shfl_down(mask, acc, offset), (IntImm(1, i32),)))
                step: Stmt = set_acc(form.combine(acc, received))
                if active is not None:
                    step = IfThenElse(lane + IntImm(offset, i32) < active, step)
                out.append(step)
            offset //= 2
        return out

    stmts += warp_stage(min(extent, WARP_SIZE), mask, active)
    alloc = [red]
    if extent > WARP_SIZE:
        warps = full_warps + (1 if tail else 0)
        partial = Buffer(f"{name}_red_warps", (IntImm(warps, i32),), dtype, scope="shared")
        alloc.append(partial)
        zero = IntImm(0, i32)
        stmts.append(IfThenElse(lane.equal(zero), BufferStore(partial, acc, (warp,))))
        stmts.append(Evaluate(Call(as_dtype("handle"), "cuda_syncthreads", ())))
        gather = set_acc(
            Call(dtype, "if_then_else", (lane < IntImm(warps, i32), BufferLoad(partial, (lane,)), identity))
        )
        second = [gather, *warp_stage(warps, full_mask, None)]
        stmts.append(IfThenElse(warp.equal(zero), SeqStmt(tuple(second))))
    out_indices = tuple(substitute(i, bindings) for i in form.update.indices)
    stmts.append(IfThenElse(t.equal(IntImm(0, i32)), BufferStore(form.update.buffer, acc, out_indices)))

    threaded = tx.replace(body=SeqStmt((*prefix, *stmts)), annotations={})
    wrapper = Block(
        name=f"{block.name}_cross_thread",
        iter_vars=(),
        reads=(),
        writes=(),
        body=threaded,
        alloc_buffers=tuple(alloc),
    )
    reads, writes = infer_block_access(wrapper)
    wrapper = wrapper.replace(reads=reads, writes=writes)
    new = BlockRealize((), IntImm(1, as_dtype("bool")), wrapper)
    return replace_stmt(index, top, new)


__all__ = [
    "CROSS_THREAD_REDUCTION",
    "SHFL_DOWN_OP",
    "lower_cross_thread_reduction",
    "shfl_down",
]
