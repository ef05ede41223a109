"""Rules ``region-cover`` and ``cooperative-access``: what is read was written before.

Both compare a consumer block's declared read region of a buffer with the union (per
dimension hull) of the declared write regions of the blocks before it in program order. Each
region is taken over the loops that separate the two blocks: the loops enclosing both stay
symbolic (a read must be covered by writes of the same iteration of them), the others are
relaxed over their ranges; a block's iterators range over their bindings' values cut to their
domains (which is how ``T.where`` predicates of split loops are honoured). A miss is reported
only when it is provable for every value of the symbolic loops; a region the analysis cannot
bound is not judged. Read regions are cut to the buffer's shape first: a guarded read of
padding declares indices outside the buffer that are never read.

``region-cover``: for every buffer allocated by a block (function parameters are inputs, and
are not judged), each child block of that block that reads the buffer, and does not write it
itself (a reduction reads its own output), reads only what earlier child blocks wrote. A read
with no earlier writer at all is reported too, unless a later writer shares a loop with the
reader (the value may come from an earlier iteration). Loads and stores outside child
blocks in the allocating block exempt the buffer. Shared-scope buffers read inside a kernel
are left to ``cooperative-access``. Common ``threadIdx`` / ``vthread`` loops are relaxed for
buffers the threads share (any scope but ``local`` and warp fragments), since another thread
may have written the element.

``cooperative-access``: in each kernel, for every block under the kernel that reads a
``shared*``-scope buffer (and does not write it), the blocks of the same kernel before it that
write the buffer, across all threads, cover the read across all threads: common
``threadIdx`` / ``vthread`` loops are relaxed, common ``blockIdx`` and serial loops stay
symbolic. Shared memory does not outlive a kernel, so a read with no writer in the kernel is
reported. A shared buffer that a non-leaf block of the kernel loads or stores outside its
child blocks is not judged.
"""

from __future__ import annotations

from tir.analysis.verify._context import (
    BlockInfo,
    Kernel,
    Program,
    Violation,
    block_target,
    fragment,
    is_per_thread_scope,
    is_shared_scope,
    is_thread_idx,
)
from tir.arith.int_set import eval_interval
from tir.arith.simplify import Analyzer
from tir.ir.buffer import Buffer, Range
from tir.ir.expr import Cast, IntImm, Max, Min, PrimExpr, Var
from tir.ir.functor import substitute
from tir.ir.stmt import For

RULE = "region-cover"
COOPERATIVE_RULE = "cooperative-access"

# One dimension of a relaxed region: inclusive (low, high), or None when it cannot be bounded.
Dim = tuple[PrimExpr, PrimExpr] | None


def _bounded(expr: PrimExpr) -> bool:
    if not isinstance(expr, IntImm):
        return True
    dtype = expr.dtype
    return dtype.min_value() < expr.value < dtype.max_value()


def _uses(expr: PrimExpr, variables: dict[int, Var]) -> bool:
    if isinstance(expr, Var):
        return id(expr) in variables
    for name in type(expr).child_fields():
        value = getattr(expr, name)
        for item in value if isinstance(value, tuple) else (value,):
            if isinstance(item, PrimExpr) and _uses(item, variables):
                return True
    return False


class _Relaxer:
    """Ranges of the iterators and loops of a chain of blocks, some loops kept symbolic."""

    def __init__(self, chain: list[BlockInfo], loops: list[For], keep: set[int]) -> None:
        self.ranges: dict[Var, Range] = {}
        self.values: dict[Var, PrimExpr] = {}
        self.analyzer = Analyzer()
        by_var: dict[int, Var] = {}
        for loop in loops:
            if id(loop) in keep:
                self.analyzer.bind(loop.loop_var, Range(loop.min, loop.extent))
                continue
            self.ranges[loop.loop_var] = Range(self.subst(loop.min), self.subst(loop.extent))
            by_var[id(loop.loop_var)] = loop.loop_var
        for info in chain:
            if info.realize is None:
                continue
            for iv, binding in zip(info.block.iter_vars, info.realize.iter_values):
                value = self.subst(binding)
                if not _uses(value, by_var):
                    self.values[iv.var] = value
                    continue
                low, high = eval_interval(value, self.ranges)
                dom_last = iv.dom.min + iv.dom.extent - 1
                low = self._tighter(low, iv.dom.min, take_max=True)
                high = self._tighter(high, dom_last, take_max=False)
                self.ranges[iv.var] = Range(low, self.analyzer.simplify(high - low + 1))
                by_var[id(iv.var)] = iv.var

    def _tighter(self, a: PrimExpr, b: PrimExpr, take_max: bool) -> PrimExpr:
        """The tighter of a relaxed end and a domain end."""
        if not _bounded(a):
            return b
        if self.analyzer.can_prove(a <= b):
            return b if take_max else a
        if self.analyzer.can_prove(b <= a):
            return a if take_max else b
        return self.analyzer.simplify(Max(a, b) if take_max else Min(a, b))

    def subst(self, expr: PrimExpr) -> PrimExpr:
        return substitute(expr, self.values) if self.values else expr

    def region(self, region: tuple[Range, ...]) -> list[Dim]:
        dims: list[Dim] = []
        for dom in region:
            start = self.subst(dom.min)
            last = (
                start
                if isinstance(dom.extent, IntImm) and dom.extent.value == 1
                else start + self.subst(dom.extent) - 1
            )
            low, _ = eval_interval(start, self.ranges)
            _, high = eval_interval(last, self.ranges)
            if _bounded(low) and _bounded(high):
                dims.append((self.analyzer.simplify(low), self.analyzer.simplify(high)))
            else:
                dims.append(None)
        return dims


def _declared(info: BlockInfo, buffer: Buffer, writes: bool) -> list[tuple[Range, ...]]:
    regions = info.block.writes if writes else info.block.reads
    return [region.region for region in regions if region.buffer is buffer]


def _chain(info: BlockInfo, top: BlockInfo | None) -> list[BlockInfo]:
    """The blocks from just below ``top`` down to ``info`` (outermost first)."""
    chain: list[BlockInfo] = []
    node: BlockInfo | None = info
    while node is not None and node is not top:
        chain.append(node)
        node = node.parent
    return list(reversed(chain))


def _union(regions: list[list[Dim]], analyzer: Analyzer) -> list[Dim]:
    result = list(regions[0])
    for region in regions[1:]:
        for d, dim in enumerate(region):
            old = result[d]
            if old is None or dim is None:
                result[d] = None
                continue
            result[d] = (
                analyzer.simplify(Min(old[0], dim[0])),
                analyzer.simplify(Max(old[1], dim[1])),
            )
    return result


def _clip(dims: list[Dim], buffer: Buffer, analyzer: Analyzer) -> list[Dim]:
    """A region cut to the buffer: a guarded read (``T.if_then_else`` around padding) declares
    indices outside the buffer that are never read."""
    clipped: list[Dim] = []
    for dim, extent in zip(dims, buffer.shape):
        if dim is None:
            clipped.append(None)
            continue
        low, high = dim
        zero = IntImm(0, low.dtype)
        last = analyzer.simplify(extent - 1)
        if analyzer.can_prove(low < zero):
            low = zero
        if last.dtype == high.dtype and analyzer.can_prove(high > last):
            high = last
        clipped.append((low, high))
    return clipped


def _provable_miss(read: list[Dim], written: list[Dim], analyzer: Analyzer) -> int | None:
    """A dimension where the read provably leaves the written hull, or None."""
    for d, (r, w) in enumerate(zip(read, written)):
        if r is None or w is None:
            continue
        if analyzer.can_prove(_lt(*_widened(r[0], w[0]))) or analyzer.can_prove(_lt(*_widened(w[1], r[1]))):
            return d
    return None


def _widened(a: PrimExpr, b: PrimExpr) -> tuple[PrimExpr, PrimExpr]:
    """``a`` and ``b`` in one integer type: indices of an int64-shaped buffer may be int32."""
    if a.dtype == b.dtype:
        return a, b
    wide = a.dtype if a.dtype.bits >= b.dtype.bits else b.dtype
    return (a if a.dtype == wide else Cast(wide, a)), (b if b.dtype == wide else Cast(wide, b))


def _lt(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    return a < b


def _show(dims: list[Dim], analyzer: Analyzer) -> str:
    parts = []
    for dim in dims:
        parts.append("?" if dim is None else f"{dim[0]}:{analyzer.simplify(dim[1] + 1)}")
    return "[" + ", ".join(parts) + "]"


def _analyzer_for(loops: list[For], keep: set[int], outer: list[BlockInfo]) -> Analyzer:
    analyzer = Analyzer()
    for loop in loops:
        if id(loop) in keep:
            analyzer.bind(loop.loop_var, Range(loop.min, loop.extent))
    for info in outer:
        for iv in info.block.iter_vars:
            analyzer.bind(iv.var, iv.dom)
    return analyzer


def _ancestors(info: BlockInfo) -> list[BlockInfo]:
    found = []
    node = info.parent
    while node is not None:
        found.append(node)
        node = node.parent
    return found


def _is_below(info: BlockInfo, other: BlockInfo) -> bool:
    node = info.parent
    while node is not None:
        if node is other:
            return True
        node = node.parent
    return False


# ---------------------------------------------------------------- region-cover


def _scope_cover(scope: BlockInfo, program: Program, out: list[Violation], staged: bool) -> None:
    raw = program.raw_access.get(id(scope.block), set())
    children = scope.children
    constants = program.func.constants  # T.allocate_const: covered by its values
    for buffer in scope.block.alloc_buffers:
        if id(buffer) in raw or buffer in constants:
            continue
        writers = [c for c in children if any(r.buffer is buffer for r in c.block.writes)]
        for consumer in children:
            reads = _declared(consumer, buffer, writes=False)
            if not reads or any(w is consumer for w in writers):
                continue
            if is_shared_scope(buffer) and consumer.kernel is not None:
                if not staged or _kernel_producers(consumer, buffer):
                    continue  # cooperative-access judges shared memory inside kernels
            producers = [w for w in writers if w.order < consumer.order]
            if not producers:
                later = [w for w in writers if w.order > consumer.order and _common(w, consumer)]
                if not later:
                    out.append(
                        Violation(
                            RULE,
                            block_target(consumer.block),
                            f"reads {buffer.name}, which no block before it in {block_target(scope.block)} writes",
                            fragment(consumer.realize or consumer.block),
                        )
                    )
                continue
            _judge(consumer, producers, buffer, scope, RULE, out, threads_shared=not is_per_thread_scope(buffer))


def _common(a: BlockInfo, b: BlockInfo) -> list[For]:
    common: list[For] = []
    for x, y in zip(a.all_loops, b.all_loops):
        if x is not y:
            break
        common.append(x)
    return common


def _judge(
    consumer: BlockInfo,
    producers: list[BlockInfo],
    buffer: Buffer,
    top: BlockInfo | None,
    rule: str,
    out: list[Violation],
    threads_shared: bool,
) -> None:
    """Report when the producers' writes provably miss part of the consumer's read."""
    top_depth = len(top.all_loops) if top is not None else 0
    outer = _ancestors(consumer) if top is None else [top, *_ancestors(top)]
    written: list[list[Dim]] = []
    keep_all: set[int] = set()
    for producer in producers:
        common = _common(producer, consumer)[top_depth:]
        keep = {id(loop) for loop in common if not (threads_shared and is_thread_idx(loop))}
        keep_all |= keep
        relaxer = _Relaxer(_chain(producer, top), producer.all_loops[top_depth:], keep)
        for region in _declared(producer, buffer, writes=True):
            written.append(relaxer.region(region))
    if not written:
        return
    analyzer = _analyzer_for(consumer.all_loops, keep_all, outer)
    hull = _union(written, analyzer)
    for region in _declared(consumer, buffer, writes=False):
        # Relax the consumer over every loop some producer does not share with it.
        keep = {id(loop) for loop in consumer.all_loops[top_depth:] if id(loop) in keep_all}
        read = _Relaxer(_chain(consumer, top), consumer.all_loops[top_depth:], keep).region(region)
        read = _clip(read, buffer, analyzer)
        miss = _provable_miss(read, hull, analyzer)
        if miss is not None:
            names = ", ".join(p.name for p in producers)
            out.append(
                Violation(
                    rule,
                    block_target(consumer.block),
                    f"reads {buffer.name}{_show(read, analyzer)} but the blocks before it ({names}) write only "
                    f"{buffer.name}{_show(hull, analyzer)}: dimension {miss} is not covered",
                    fragment(consumer.realize or consumer.block),
                )
            )
            return


# ---------------------------------------------------------------- cooperative-access


def _kernel_producers(consumer: BlockInfo, buffer: Buffer) -> list[BlockInfo]:
    """The blocks of ``consumer``'s kernel before it (not enclosing it) that write ``buffer``."""
    kernel = consumer.kernel
    assert kernel is not None
    return [
        p
        for p in kernel.blocks
        if p.order < consumer.order and not _is_below(consumer, p) and any(r.buffer is buffer for r in p.block.writes)
    ]


def _kernel_cover(kernel: Kernel, program: Program, out: list[Violation], staged: bool) -> None:
    raw: set[int] = set()
    for info in kernel.blocks:
        if info.children:  # a leaf's own loads and stores are what its signature says
            raw |= program.raw_access.get(id(info.block), set())
    top = _kernel_top(kernel)
    if top is not None:
        raw |= program.raw_access.get(id(top.block), set())
    for consumer in kernel.blocks:
        for region in consumer.block.reads:
            buffer = region.buffer
            if not is_shared_scope(buffer) or id(buffer) in raw:
                continue
            if any(r.buffer is buffer for r in consumer.block.writes):
                continue
            producers = _kernel_producers(consumer, buffer)
            if not producers:
                if staged:
                    continue  # written outside the kernel, for now: region-cover judges it
                out.append(
                    Violation(
                        COOPERATIVE_RULE,
                        block_target(consumer.block),
                        f"reads the shared buffer {buffer.name}, which no block of its kernel "
                        f"(under {kernel.root.loop_var.name}) writes before it",
                        fragment(consumer.realize or consumer.block),
                    )
                )
                continue
            _judge(consumer, producers, buffer, top, COOPERATIVE_RULE, out, threads_shared=True)


def _kernel_top(kernel: Kernel) -> BlockInfo | None:
    """The innermost block enclosing the kernel's root loop."""
    if not kernel.blocks:
        return None
    node = kernel.blocks[0].parent
    while node is not None and any(loop is kernel.root for loop in node.all_loops):
        node = node.parent
    return node


def check_regions(program: Program, staged: bool = False) -> list[Violation]:
    """The ``region-cover`` and ``cooperative-access`` violations of the walked program
    (``staged``: a schedule's intermediate state, see ``verify``)."""
    out: list[Violation] = []
    for info in program.blocks:
        if info.block.alloc_buffers:
            _scope_cover(info, program, out, staged)
    for kernel in program.kernels:
        _kernel_cover(kernel, program, out, staged)
    return out
