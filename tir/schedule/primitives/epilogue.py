"""Schedule primitive: fuse_reduction_epilogue.

``R = sum(...)`` followed by ``E = R + X`` becomes one reduction that starts from ``X``:
``E`` is initialized with ``X`` and accumulates into it, and ``R`` disappears (TVM's primitive
of the same name: a bias added in the init instead of in a pass of its own). The sum is
reassociated (``X`` first), so float results change in the last bits, as with ``rfactor``.
"""

from __future__ import annotations

from tir.analysis import infer_block_access
from tir.analysis.reduction import identity_ok
from tir.analysis.tree import TreeIndex
from tir.arith import Analyzer, simplify
from tir.ir import (
    Add,
    Block,
    BlockRealize,
    BufferLoad,
    BufferStore,
    IRMutator,
    IterKind,
    PrimExpr,
    PrimFunc,
    Var,
    free_vars,
)
from tir.ir import post_order_visit as _visit
from tir.ir.functor import buffer_loads
from tir.ir.structural import structural_equal
from tir.schedule.errors import ScheduleError
from tir.schedule.handles import BlockRV
from tir.schedule.primitives._common import block_target, doc_from, find_block
from tir.schedule.primitives._location_util import (
    blocks_in_order,
    detachable_nest,
    point_index_map,
    reads_buffer,
    writes_buffer,
)
from tir.schedule.primitives.inline import _Rewriter


def fuse_reduction_epilogue(func: PrimFunc, reduction_name: str, epilogue_name: str) -> PrimFunc:
    """Fold an epilogue ``E[...] = R[...] + X`` into the sum reduction that writes ``R``: the
    reduction then writes ``E``, its init stores ``X`` (instead of 0), and the epilogue and
    ``R`` are gone.

    Preconditions: the reduction has the init ``R[...] = 0`` and the body
    ``R[...] = R[...] + f`` (one store each, same indices); the epilogue is spatial with one
    store ``E[...] = R[...] + X`` (or ``X + R[...]``), ``X`` reading neither ``R`` nor ``E``;
    the epilogue reads ``R`` at each of its iterators plus an offset (once each), and its
    domain is the reduction's spatial domain (one epilogue instance per element of ``R``);
    ``R`` is allocated in the function and read by no other block; no block between the two
    touches ``E`` or writes what ``X`` reads; ``E`` and ``R`` have one dtype.

    Before (``fuse_reduction_epilogue("C", "D")``)::

        for i, j, k in T.grid(16, 16, 16):
            with T.block("C"):
                vi, vj, vk = T.remap("SSR", i, j, k)
                with T.init():
                    C[vi, vj] = 0.0
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vj, vk]
        for i, j in T.grid(16, 16):
            with T.block("D"):
                vi, vj = T.remap("SS", i, j)
                D[vi, vj] = C[vi, vj] + bias[vj]

    After::

        for i, j, k in T.grid(16, 16, 16):
            with T.block("C"):
                vi, vj, vk = T.remap("SSR", i, j, k)
                with T.init():
                    D[vi, vj] = bias[vj]
                D[vi, vj] = D[vi, vj] + A[vi, vk] * B[vj, vk]
    """
    primitive = "fuse_reduction_epilogue"
    index = TreeIndex(func)
    reduction = find_block(index, reduction_name, primitive)
    epilogue = find_block(index, epilogue_name, primitive)
    target = block_target(reduction)
    block = reduction.block
    init, update = block.init, block.body
    if not (
        isinstance(init, BufferStore)
        and isinstance(update, BufferStore)
        and init.buffer is update.buffer
        and all(structural_equal(a, b) for a, b in zip(init.indices, update.indices))
    ):
        raise ScheduleError(primitive, target, "the reduction must be one init store and one update store of a buffer")
    out = update.buffer
    value = update.value
    own_load = BufferLoad(out, update.indices)
    if not (isinstance(value, Add) and structural_equal(value.a, own_load) and not _reads(value.b, out)):
        raise ScheduleError(primitive, target, f"the update must be {out.name}[...] = {out.name}[...] + f", update)
    zero_ok, _ = identity_ok(Add, init.value)
    if not zero_ok:
        raise ScheduleError(primitive, target, f"the init must store 0 to {out.name}", init)
    if any(param is out for param in func.params):
        raise ScheduleError(primitive, target, f"{out.name} is a parameter: its values are the function's result")

    epi_target = block_target(epilogue)
    epi_block = epilogue.block
    if any(iv.kind is not IterKind.SPATIAL for iv in epi_block.iter_vars) or epi_block.init is not None:
        raise ScheduleError(primitive, epi_target, "the epilogue must be a spatial block")
    store = epi_block.body
    if not isinstance(store, BufferStore) or epi_block.alloc_buffers or epi_block.match_buffers:
        raise ScheduleError(primitive, epi_target, "the epilogue's body must be a single store", epi_block)
    if store.buffer.dtype != out.dtype:
        raise ScheduleError(primitive, epi_target, f"{store.buffer.name} and {out.name} must have one dtype")
    epi_value = store.value
    if not isinstance(epi_value, Add):
        raise ScheduleError(primitive, epi_target, f"the epilogue must be {out.name}[...] + X", store)
    if isinstance(epi_value.a, BufferLoad) and epi_value.a.buffer is out:
        load, extra = epi_value.a, epi_value.b
    elif isinstance(epi_value.b, BufferLoad) and epi_value.b.buffer is out:
        load, extra = epi_value.b, epi_value.a
    else:
        raise ScheduleError(primitive, epi_target, f"the epilogue must add a load of {out.name}", store)
    if _reads(extra, out) or _reads(extra, store.buffer) or any(_reads(i, out) for i in store.indices):
        raise ScheduleError(
            primitive, epi_target, f"the added term may read neither {out.name} nor {store.buffer.name}", store
        )
    # Each epilogue iterator is a dimension of the R index minus an offset: invert it.
    simple, complex_dims = point_index_map(load.indices, epi_block, Analyzer())
    used = [entry.var for entry in simple]
    own = [iv.var for iv in epi_block.iter_vars]
    if complex_dims or len(set(used)) != len(used) or set(used) != set(own):
        raise ScheduleError(
            primitive,
            epi_target,
            f"the epilogue must read {out.name} at each of its iterators plus an offset, once each",
            load,
        )
    spatial = [(iv, v) for iv, v in zip(block.iter_vars, reduction.iter_values) if iv.kind is IterKind.SPATIAL]
    point = update.indices
    inverse: dict[Var, PrimExpr] = {entry.var: simplify(point[entry.dim] - entry.offset) for entry in simple}
    # One epilogue instance per element of R: its domain is the image of R's index.
    analyzer = Analyzer()
    for iv, _ in spatial:
        analyzer.bind(iv.var, iv.dom)
    for iv in epi_block.iter_vars:
        if not _covers_domain(analyzer, inverse[iv.var], iv, [s for s, _ in spatial]):
            raise ScheduleError(
                primitive,
                epi_target,
                f"the epilogue's iterator {iv.var.name} does not run exactly over the elements the reduction "
                f"writes of {out.name}",
            )
    if not _epilogue_runs_everywhere(epilogue):
        raise ScheduleError(primitive, epi_target, "the epilogue has a predicate: some of its instances do not run")

    order = blocks_in_order(index)
    first = next(k for k, other in enumerate(order) if other is reduction)
    last = next(k for k, other in enumerate(order) if other is epilogue)
    if last < first:
        raise ScheduleError(primitive, epi_target, "the epilogue comes before the reduction")
    extra_reads = [load_.buffer for load_ in buffer_loads(extra)]
    for other in order:
        if other is reduction or other is epilogue or other.block.name == "root":
            continue
        if reads_buffer(other.block, out):
            raise ScheduleError(
                primitive, target, f"block {other.block.name!r} reads {out.name} too; it would lose its values"
            )
    for other in order[first + 1 : last]:
        if reads_buffer(other.block, store.buffer) or writes_buffer(other.block, store.buffer):
            raise ScheduleError(
                primitive, epi_target, f"block {other.block.name!r}, between the two, accesses {store.buffer.name}"
            )
        if any(writes_buffer(other.block, b) for b in extra_reads):
            raise ScheduleError(
                primitive, epi_target, f"block {other.block.name!r}, between the two, writes what the epilogue adds"
            )
    nest = detachable_nest(index, epilogue, primitive)

    new_indices = tuple(simplify(_substitute(i, inverse)) for i in store.indices)
    new_init = BufferStore(store.buffer, simplify(_substitute(extra, inverse)), new_indices)
    new_load = BufferLoad(store.buffer, new_indices)
    new_update = BufferStore(store.buffer, Add(new_load, value.b), new_indices)
    new_block = block.replace(init=new_init, body=new_update)
    reads, writes = infer_block_access(new_block)
    new_block = new_block.replace(reads=tuple(reads), writes=tuple(writes))
    rewriter = _Rewriter(func, drop=nest, buffer=out, replace={id(reduction): reduction.replace(block=new_block)})
    result = func.replace(body=rewriter.visit(func.body))
    return _drop_allocation(result, out)


def _covers_domain(analyzer: Analyzer, image: PrimExpr, iv: object, spatial: list[object]) -> bool:
    """Whether ``image`` (an expression of the reduction's spatial iterators) takes exactly the
    values of the epilogue iterator's domain: it is one spatial iterator plus an offset, with
    the same extent, mapping domain start to domain start."""
    from tir.ir import IterVar

    assert isinstance(iv, IterVar)
    for candidate in spatial:
        assert isinstance(candidate, IterVar)
        offset = analyzer.simplify(image - candidate.var)
        if free_vars(offset):
            continue
        return analyzer.can_prove_equal(candidate.dom.min + offset, iv.dom.min) and analyzer.can_prove_equal(
            candidate.dom.extent, iv.dom.extent
        )
    return False


def _epilogue_runs_everywhere(realize: BlockRealize) -> bool:
    from tir.ir import IntImm

    return isinstance(realize.predicate, IntImm) and bool(realize.predicate.value)


def _reads(expr: object, buffer: object) -> bool:
    return any(load.buffer is buffer for load in buffer_loads(expr))


def _substitute(expr: PrimExpr, vmap: dict[Var, PrimExpr]) -> PrimExpr:
    from tir.ir import substitute

    return substitute(expr, vmap)


def _drop_allocation(func: PrimFunc, buffer: object) -> PrimFunc:
    """``func`` without the allocation of ``buffer`` when nothing uses it any more."""

    class Drop(IRMutator):
        def visit_Block(self, block: Block) -> Block:
            visited = self.generic_visit(block)
            assert isinstance(visited, Block)
            if any(b is buffer for b in visited.alloc_buffers):
                return visited.replace(alloc_buffers=tuple(b for b in visited.alloc_buffers if b is not buffer))
            return visited

    used = False

    def note(node: object) -> None:
        nonlocal used
        if isinstance(node, (BufferLoad, BufferStore)) and node.buffer is buffer:
            used = True

    _visit(func.body, note)
    return func if used else func.replace(body=Drop().visit(func.body))


class EpiloguePrimitives:
    """Schedule method for fuse_reduction_epilogue."""

    @doc_from(fuse_reduction_epilogue)
    def fuse_reduction_epilogue(self, reduction_block: BlockRV | str, epilogue_block: BlockRV | str) -> None:  # type: ignore[misc]
        reduction = self.resolve_block(reduction_block, "fuse_reduction_epilogue").block.name  # type: ignore[attr-defined]
        epilogue = self.resolve_block(epilogue_block, "fuse_reduction_epilogue").block.name  # type: ignore[attr-defined]
        self._apply(  # type: ignore[attr-defined]
            "fuse_reduction_epilogue",
            (reduction_block, epilogue_block),
            {},
            lambda func: fuse_reduction_epilogue(func, reduction, epilogue),
        )


__all__ = ["EpiloguePrimitives", "fuse_reduction_epilogue"]
