"""Tensorization application: a block reorganized around an intrinsic that ``match.py`` found
fitting -- reindexed operands, fused iterators, padding, the description's layouts, the
intrinsic-sized loops split off, blockized and tensorized -- every step a schedule primitive.
"""

from __future__ import annotations

from metasched.space.tensorize.match import (
    TensorizeCandidate,
    TensorizeMismatch,
    _Miss,
    _Pattern,
    _read_desc,
    _RolePlan,
    match_intrin,
)
from tir.intrin import TensorIntrin
from tir.ir import Block, Buffer, BufferStore
from tir.schedule import Schedule, ScheduleError
from tir.schedule.handles import BlockRV, LoopRV


def apply_candidate(
    sch: Schedule,
    block: BlockRV | str,
    candidate: TensorizeCandidate | str,
    tensorize: bool = True,
) -> BlockRV:
    """Reorganize ``block`` around an intrinsic; returns the blockized block (tensorized, unless
    ``tensorize=False``: then ``sch.tensorize(returned, name)`` finishes it), whose loops are
    the ones left to tile: the groups that stay outside the intrinsic, then the outer part of
    each intrinsic iterator.

    ``candidate`` is one of ``tensorize_candidates(...)[block].fits``, or an intrinsic's name
    (the match is made on the current program). Raises ``ScheduleError`` when the block does
    not fit or a primitive refuses. Every step is a schedule primitive, so the trace replays.

    Before (a 64^3 uint8 x int8 matmul, ``x86_avx2_u7s8s32_dot_8x4``)::

        for i, j, k in T.grid(64, 64, 64):
            with T.block("C"):
                vi, vj, vk = T.remap("SSR", i, j, k)
                with T.init():
                    C[vi, vj] = 0
                C[vi, vj] = C[vi, vj] + T.cast(A[vi, vk], "int32") * T.cast(B[vk, vj], "int32")

    After (B copied into the packed layout the intrinsic reads; each 8 x 4 step its body)::

        B_reindex = T.alloc_buffer((8, 16, 32), "int8")
        for ax0, ax1 in T.grid(64, 64):
            with T.block("B_reindex"):
                vj, vk = T.remap("SS", ax0, ax1)
                B_reindex[vj // 8, vk // 4, vj % 8 * 4 + vk % 4] = B[vk, vj]
        for i, j_0, r_0 in T.grid(64, 8, 16):
            with T.block("C_o"):
                vi_o, vj_o, vk_o = T.remap("SSR", i, j_0, r_0)
                A_1 = T.match_buffer(A[vi_o, vk_o * 4:vk_o * 4 + 4], (1, 4), "uint8")
                B_1 = T.match_buffer(B_reindex[vj_o, vk_o, 0:32], (1, 1, 32), "int8")
                C_1 = T.match_buffer(C[vi_o, vj_o * 8:vj_o * 8 + 8], (1, 8), "int32")
                with T.init():
                    for j_1 in range(8):
                        C[vi_o, vj_o * 8 + j_1] = 0
                C_1[0, T.ramp(0, 1, 8)] = C_1[0, T.ramp(0, 1, 8)] + ...  # vpmaddubsw, vpmaddwd
    """
    realize = sch.resolve_block(block, "apply_candidate")
    name = realize.block.name
    block_rv = sch.get_block(name) if isinstance(block, str) else block
    intrin_name = candidate if isinstance(candidate, str) else candidate.intrin
    found = match_intrin(sch.func, name, TensorIntrin.get(intrin_name))
    if isinstance(found, TensorizeMismatch):
        raise ScheduleError("apply_candidate", f"block {name!r}", f"intrinsic {intrin_name!r}: {found.reason}")
    plan = found.plan
    # 1-4. the fused form; the block's iterators are the groups, in order, each on its own loop
    loops = to_fused_form(sch, block_rv, found)
    # 5. intrinsic-sized loops innermost, in the description's order
    outer, inner = [], {}
    for g, loop in enumerate(loops):
        if found.groups[g].intrin_extent is None:
            outer.append(loop)
            continue
        parts = sch.split(loop, [None, plan.padding[g]])
        outer.append(parts[0])
        inner[g] = parts[1]
    sch.reorder(*outer, *(inner[g] for g in plan.inner_order))
    blockized = sch.blockize(inner[plan.inner_order[0]])
    if tensorize:
        sch.tensorize(blockized, intrin_name)
    return blockized


def to_fused_form(sch: Schedule, block: BlockRV, candidate: TensorizeCandidate) -> list[LoopRV]:
    """The first steps of ``apply_candidate``, before the intrinsic-sized loops are split off:
    returns the loops of ``block``, one per group of ``candidate.groups`` (in that order: the
    groups outside the intrinsic, then the intrinsic's iterators in its description's order).

    ``candidate``: a match made on the current program (``match_intrin``, or
    ``tensorize_candidates``); its plan is applied as it is. The steps, each a schedule
    primitive: ``reindex`` each operand whose access is not one plain index per fused iterator,
    ``transform_block_layout`` to the fused iterators and ``transform_layout`` of the copies to
    match, ``pad_einsum`` to multiples of the intrinsic's extents, and ``transform_layout`` into
    the layout the description reads. Raises ``ScheduleError`` when a primitive refuses.

    Before (an fp16 dense ``Y = X @ W.T``; the candidate: ``wmma_sync_16x16x16_f16f16f32``, a
    16 x 16 x 16 ``C += A @ B``)::

        for i, j, k in T.grid(64, 64, 64):
            with T.block("Y"):
                vi, vj, vk = T.remap("SSR", i, j, k)
                with T.init():
                    Y[vi, vj] = T.cast(0, "float32")
                Y[vi, vj] = Y[vi, vj] + T.cast(X[vi, vk], "float32") * T.cast(W[vj, vk], "float32")

    After (``reindex`` of W, then ``transform_layout`` of the copy into the ``[k, n]`` matrix
    the description reads; the returned loops are ``i``, ``j``, ``k``)::

        W_reindex = T.alloc_buffer((64, 64), "float16")
        for ax0, ax1 in T.grid(64, 64):
            with T.block("W_reindex"):
                vj, vk = T.remap("SS", ax0, ax1)
                W_reindex[vk, vj] = W[vj, vk]
        for i, j, k in T.grid(64, 64, 64):
            with T.block("Y"):
                vi, vj, vk = T.remap("SSR", i, j, k)
                with T.init():
                    Y[vi, vj] = T.cast(0, "float32")
                Y[vi, vj] = Y[vi, vj] + T.cast(X[vi, vk], "float32") * T.cast(W_reindex[vk, vj], "float32")
    """
    intrin = TensorIntrin.get(candidate.intrin)
    plan = candidate.plan

    def where(role: _RolePlan) -> tuple[str, int]:
        kind = "write" if role.is_write else "read"
        return kind, _position(sch, block, intrin, role.param, role.is_write, "apply_candidate")

    # 1. operands into fused form: copies indexed by the block's iterators
    for role in plan.roles:
        if role.reindex:
            sch.reindex(block, where(role))
    # 2. the block's iterators fused by characteristic vector, the copies' layouts to match
    if plan.block_map is not None:
        sch.transform_block_layout(block, plan.block_map)
    for role in plan.roles:
        if role.reindex and role.fuse_map is not None:
            sch.transform_layout(block, where(role), role.fuse_map)
    # 3. pad to multiples of the intrinsic's extents
    if candidate.padded:
        sch.pad_einsum(block, list(plan.padding))
    # 4. the layouts the intrinsic reads (of copies only: transforming a parameter would change
    # the function's signature, which a tuned kernel must keep)
    for role in plan.roles:
        if role.final_map is not None:
            kind, position = where(role)
            realize = sch.resolve_block(block, "apply_candidate")
            regions = realize.block.writes if kind == "write" else realize.block.reads
            if any(regions[position].buffer is param for param in sch.func.params):
                raise ScheduleError(
                    "apply_candidate", f"block {realize.block.name!r}", "the layout change would reach a parameter"
                )
            sch.transform_layout(block, (kind, position), role.final_map)
    realize = sch.resolve_block(block, "apply_candidate")
    nest = sch.index.loops_above(realize)
    handles = sch.get_loops(block)
    # the block's iterators are the groups, in order; each bound to its own loop
    return [handles[next(k for k, f in enumerate(nest) if f.loop_var is value)] for value in realize.iter_values]


def operand_position(sch: Schedule, block: BlockRV | str, intrin: TensorIntrin | str, param: str) -> int:
    """Where the block's buffer playing ``param`` (a parameter of ``intrin``'s description) is
    now: its position among the block's writes for the parameter the description stores to,
    among its reads otherwise -- the buffer index ``cache_read`` / ``cache_write`` take. The
    roles are read off the block's expression, so they follow the copies and the padding of
    ``to_fused_form``. Raises ``ScheduleError`` when the block no longer has the form of the
    description."""
    found = TensorIntrin.get(intrin) if isinstance(intrin, str) else intrin
    try:
        written = _read_desc(found).store.buffer.name
    except _Miss as miss:
        raise ScheduleError("operand_position", f"intrinsic {found.name!r}", miss.reason) from None
    return _position(sch, block, found, param, param == written, "operand_position")


def _roles_now(block: Block, intrin: TensorIntrin) -> dict[str, Buffer]:
    """Description parameter name -> the block buffer playing it now (copies and padding
    replace buffers; the expression's form stays)."""
    desc = _read_desc(intrin)
    store = block.body
    if not isinstance(store, BufferStore):
        raise _Miss("form", "the block's body is not one store")
    pattern = _Pattern(desc.params)
    pattern.bind(desc.store, store)
    pattern.compare(desc.store.value, store.value, top=True)
    return {p.name: pattern.roles[id(p)] for p in desc.params if id(p) in pattern.roles}


def _position(
    sch: Schedule, block: BlockRV | str, intrin: TensorIntrin, param: str, is_write: bool, primitive: str
) -> int:
    """Where the buffer playing ``param`` is among the block's reads (writes) now."""
    b = sch.resolve_block(block, primitive).block
    try:
        buffer = _roles_now(b, intrin)[param]
    except (_Miss, KeyError):
        raise ScheduleError(
            primitive, f"block {b.name!r}", f"the block no longer has the form of {intrin.name!r}"
        ) from None
    regions = b.writes if is_write else b.reads
    for k, region in enumerate(regions):
        if region.buffer is buffer:
            return k
    raise ScheduleError(primitive, f"block {b.name!r}", f"no region of {buffer.name} ({param})")
