"""Rules ``thread-binding``, ``shared-memory`` and ``intrinsic-scope``: GPU launches.

A *kernel* is the subtree under an outermost thread-bound loop (``blockIdx.*``,
``threadIdx.*`` or ``vthread.*``): one launch.

``thread-binding``:
- within a kernel every thread tag has one extent: all loops bound to ``threadIdx.x`` have
  the same extent. (A loop may be bound to a tag an enclosing loop binds too, with the same
  extent: a cache block computed under the thread loops and fetched cooperatively is written
  that way, and lowering merges the two into one thread index.);
- with a CUDA target, each tag's extent is within ``target.max_thread_extent(tag)``
  (``threadIdx.z`` <= 64, ``blockIdx.y`` <= 65535, ...) and the product of the
  ``threadIdx.x/y/z`` extents of a kernel is at most ``target.max_threads_per_block``
  (symbolic extents are not judged);
- with a CPU target, no loop is thread-bound at all.
Without a target only the first point is checked.

``shared-memory`` (CUDA target only): the bytes of the ``shared`` / ``shared.dyn`` buffers a
kernel uses are at most ``target.max_shared_memory_per_block``. A buffer allocated inside the
kernel counts whole; one allocated outside it (a ``cache_read`` into shared memory allocates at
the root) counts the part one launch block touches: the hull of the kernel's accesses with
the ``blockIdx`` loops held fixed, as allocation compaction will shrink it. A size that cannot
be bounded is not counted.

``intrinsic-scope``: a call of a warp-level operation (see ``register_warp_level_op``; by
default names starting with ``wmma.``, ``mma.``, ``ldmatrix`` or ``mma_sync``) runs under
exactly one warp's threads: it sits inside a kernel, either under a ``threadIdx.x`` loop whose
extent is the warp size (``target.warp_size``, 32 without a target) or outside every
``threadIdx.x`` loop of a kernel whose ``threadIdx.x`` extent is the warp size (then every lane
of the warp runs it), and under no ``parallel`` or ``vectorized`` loop. ``threadIdx.y`` / ``threadIdx.z`` loops may enclose it: each of their
values selects a different warp.
"""

from __future__ import annotations

from tir import registrations
from tir.analysis.verify._context import (
    Kernel,
    Program,
    Violation,
    call_name,
    fragment,
    is_shared_scope,
    is_thread_loop,
    loop_target,
)
from tir.arith.int_set import eval_interval
from tir.arith.simplify import Analyzer
from tir.ir.buffer import Buffer, Range
from tir.ir.expr import IntImm, Max, Min, PrimExpr, Var
from tir.ir.functor import substitute
from tir.ir.stmt import For, ForKind
from tir.target import Target

THREAD_RULE = "thread-binding"
SHARED_RULE = "shared-memory"
INTRINSIC_RULE = "intrinsic-scope"

_WARP_LEVEL_OPS: set[str] = set()
_WARP_LEVEL_PREFIXES: list[str] = ["wmma.", "mma.", "ldmatrix", "mma_sync"]
#: Registered by tensorir's own modules (every process has them): (name, prefix) pairs.
_BUILTIN_WARP_LEVEL: set[tuple[str, bool]] = {(name, True) for name in _WARP_LEVEL_PREFIXES}


def register_warp_level_op(name: str, prefix: bool = False, builtin: bool = False) -> None:
    """Declare that calls of ``name`` (or, with ``prefix=True``, of every name starting with it)
    run collectively on one warp; the validator then checks where they sit. ``builtin`` is for
    tensorir's own modules: any other declaration reaches the tuner's worker processes
    (``tir.registrations``)."""
    if prefix:
        if name not in _WARP_LEVEL_PREFIXES:
            _WARP_LEVEL_PREFIXES.append(name)
    else:
        _WARP_LEVEL_OPS.add(name)
    if builtin:
        _BUILTIN_WARP_LEVEL.add((name, prefix))
    registrations.changed()


def runtime_registrations() -> list[tuple[str, tuple[str, bool]]]:
    """The warp-level declarations made at run time (``tir.registrations`` ships them)."""
    declared = [(name, False) for name in sorted(_WARP_LEVEL_OPS)] + [(name, True) for name in _WARP_LEVEL_PREFIXES]
    return [
        (f"warp-level {'prefix' if prefix else 'operation'} {name!r}", (name, prefix))
        for name, prefix in declared
        if (name, prefix) not in _BUILTIN_WARP_LEVEL
    ]


def install_registration(item: tuple[str, bool]) -> None:
    register_warp_level_op(*item)


registrations.add_provider(__name__)


def is_warp_level_op(name: str) -> bool:
    """Whether calls of ``name`` are warp-level (registered, or a registered prefix)."""
    return name in _WARP_LEVEL_OPS or name.startswith(tuple(_WARP_LEVEL_PREFIXES))


def _const(expr: PrimExpr) -> int | None:
    return expr.value if isinstance(expr, IntImm) else None


def _same(a: PrimExpr, b: PrimExpr) -> bool | None:
    """Whether two extents are equal: True / False when decided, None when unknown."""
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        return a.value == b.value
    analyzer = Analyzer()
    if analyzer.can_prove_equal(a, b):
        return True
    if analyzer.can_prove((a - b).not_equal(0)):
        return False
    return None


def _check_kernel_threads(kernel: Kernel, target: Target | None, out: list[Violation]) -> None:
    extents: dict[str, For] = {}
    for loop in kernel.thread_loops:
        tag = loop.thread_tag or ""
        first = extents.get(tag)
        if first is None:
            extents[tag] = loop
        elif first is not loop and _same(first.extent, loop.extent) is False:
            out.append(
                Violation(
                    THREAD_RULE,
                    loop_target(loop),
                    f"{tag} has extent {loop.extent} here but {first.extent} at loop {first.loop_var.name} "
                    "of the same kernel; a thread tag has one extent per launch",
                    fragment(loop),
                )
            )
    if target is None or not target.is_cuda:
        return
    for tag, loop in extents.items():
        value = _const(loop.extent)
        if value is not None and value > target.max_thread_extent(tag):
            out.append(
                Violation(
                    THREAD_RULE,
                    loop_target(loop),
                    f"{tag} has extent {value}, more than the {target.max_thread_extent(tag)} {target} allows",
                    fragment(loop),
                )
            )
    threads = 1
    for tag in ("threadIdx.x", "threadIdx.y", "threadIdx.z"):
        loop = extents.get(tag)
        if loop is None:
            continue
        value = _const(loop.extent)
        if value is None:
            return
        threads *= value
    if threads > target.max_threads_per_block:
        shown = " * ".join(
            f"{tag}={extents[tag].extent}" for tag in ("threadIdx.x", "threadIdx.y", "threadIdx.z") if tag in extents
        )
        out.append(
            Violation(
                THREAD_RULE,
                loop_target(kernel.root),
                f"the kernel launches {threads} threads per block ({shown}), more than the "
                f"{target.max_threads_per_block} {target} allows",
                fragment(kernel.root),
            )
        )


# ---------------------------------------------------------------- shared memory


def buffer_bytes(buffer: Buffer, extents: list[int]) -> int:
    """Bytes of ``buffer`` over ``extents`` (the shared-memory size the verifier and
    ``plan_dynamic_shared_memory`` both count)."""
    count = 1
    for extent in extents:
        count *= extent
    return count * max(1, buffer.dtype.bits * buffer.dtype.lanes // 8)


def _kernel_shared_bytes(kernel: Kernel) -> tuple[int, list[str]]:
    inside = {id(b) for b in kernel.allocations}
    total = 0
    parts: list[str] = []
    counted: set[int] = set()
    for buffer in kernel.allocations:
        if not is_shared_scope(buffer) or id(buffer) in counted:
            continue
        counted.add(id(buffer))
        shape = buffer.const_shape()
        if shape is None:
            continue
        size = buffer_bytes(buffer, list(shape))
        total += size
        parts.append(f"{buffer.name} {size} B")
    outside: dict[int, Buffer] = {}
    for info in kernel.blocks:
        for region in (*info.block.reads, *info.block.writes):
            buffer = region.buffer
            if is_shared_scope(buffer) and id(buffer) not in inside:
                outside.setdefault(id(buffer), buffer)
    for buffer in outside.values():
        extents = _touched_extents(kernel, buffer)
        if extents is None:
            continue
        size = buffer_bytes(buffer, extents)
        total += size
        parts.append(f"{buffer.name} {size} B")
    return total, parts


def _touched_extents(kernel: Kernel, buffer: Buffer) -> list[int] | None:
    """Per dimension, the most elements of ``buffer`` one launch block touches."""
    hulls: list[tuple[PrimExpr, PrimExpr]] | None = None
    analyzer = Analyzer()
    fixed: dict[Var, Range] = {}
    for info in kernel.blocks:
        regions = [r.region for r in (*info.block.reads, *info.block.writes) if r.buffer is buffer]
        if not regions or info.realize is None:
            continue
        ranges: dict[Var, Range] = {}
        values: dict[Var, PrimExpr] = {}
        for loop in info.all_loops:
            if loop.kind is ForKind.THREAD_BINDING and (loop.thread_tag or "").startswith("blockIdx"):
                fixed[loop.loop_var] = Range(loop.min, loop.extent)
                continue
            if _inside(kernel, info, loop):
                ranges[loop.loop_var] = Range(loop.min, loop.extent)
        chain = []
        node = info
        while node is not None and node.realize is not None and node.kernel is kernel:
            chain.append(node)
            node = node.parent
        for block_info in reversed(chain):
            assert block_info.realize is not None
            for iv, binding in zip(block_info.block.iter_vars, block_info.realize.iter_values):
                value = substitute(binding, values) if values else binding
                low, high = eval_interval(value, ranges)
                if isinstance(low, IntImm) and isinstance(high, IntImm) and low.value == high.value:
                    values[iv.var] = low
                elif _is_extreme(low) or _is_extreme(high):
                    ranges[iv.var] = iv.dom
                else:
                    ranges[iv.var] = Range(low, analyzer.simplify(high - low + 1))
        for region in regions:
            dims = []
            for dom in region:
                start = substitute(dom.min, values) if values else dom.min
                low, _ = eval_interval(start, ranges)
                _, high = eval_interval(start + (substitute(dom.extent, values) if values else dom.extent) - 1, ranges)
                if _is_extreme(low) or _is_extreme(high):
                    return None
                dims.append((low, high))
            if hulls is None:
                hulls = dims
            else:
                hulls = [
                    (analyzer.simplify(Min(a[0], b[0])), analyzer.simplify(Max(a[1], b[1])))
                    for a, b in zip(hulls, dims)
                ]
    if hulls is None:
        return None
    for var, dom in fixed.items():
        analyzer.bind(var, dom)
    extents = []
    for dim, (low, high) in enumerate(hulls):
        bound = analyzer.const_int_bound(analyzer.simplify(high - low + 1))
        limit = _const(buffer.shape[dim])
        if bound.max_value >= 2**31 - 1:
            if limit is None:
                return None
            extents.append(limit)
        else:
            extents.append(int(bound.max_value) if limit is None else min(int(bound.max_value), limit))
    return extents


def _is_extreme(expr: PrimExpr) -> bool:
    return isinstance(expr, IntImm) and not (expr.dtype.min_value() < expr.value < expr.dtype.max_value())


def _inside(kernel: Kernel, info: object, loop: For) -> bool:
    all_loops = info.all_loops  # type: ignore[attr-defined]
    index = next((k for k, x in enumerate(all_loops) if x is kernel.root), None)
    return index is not None and any(x is loop for x in all_loops[index:])


def _check_shared_memory(kernel: Kernel, target: Target | None, out: list[Violation]) -> None:
    if target is None or not target.is_cuda:
        return
    total, parts = _kernel_shared_bytes(kernel)
    limit = target.max_shared_memory_per_block
    if total > limit:
        out.append(
            Violation(
                SHARED_RULE,
                loop_target(kernel.root),
                f"the kernel uses {total} bytes of shared memory ({', '.join(parts)}), more than the "
                f"{limit} bytes per block {target} allows",
                fragment(kernel.root),
            )
        )


# ---------------------------------------------------------------- intrinsics


def _kernel_lane_extent(program: Program, loops: list[For]) -> PrimExpr | None:
    """The threadIdx.x extent of the kernel enclosing ``loops`` (None: no threadIdx.x there)."""
    for kernel in program.kernels:
        if any(loop is kernel.root for loop in loops):
            for loop in kernel.thread_loops:
                if loop.thread_tag == "threadIdx.x":
                    return loop.extent
            return None
    return None


def _check_intrinsics(program: Program, target: Target | None, out: list[Violation]) -> None:
    warp = target.warp_size if target is not None and target.is_cuda else 32
    for call, loops in program.calls:
        name = call_name(call)
        if not is_warp_level_op(name):
            continue
        problem = None
        lanes = [loop for loop in loops if loop.thread_tag == "threadIdx.x"]
        if not any(is_thread_loop(loop) for loop in loops):
            problem = "is not inside a kernel (no thread-bound loop encloses it)"
        elif not lanes:
            # Outside every threadIdx.x loop, all threadIdx.x lanes of the launch run the call:
            # one whole warp exactly when the kernel's threadIdx.x extent is the warp size.
            extent = _kernel_lane_extent(program, loops)
            if extent is None:
                problem = (
                    f"runs in a kernel without threadIdx.x; a warp-level operation needs the 32 lanes of one "
                    f"warp: threadIdx.x of extent {warp} in the kernel or around the call"
                )
            elif _const(extent) != warp:
                problem = (
                    f"runs in a kernel whose threadIdx.x extent is {extent}; a warp-level operation needs "
                    f"exactly one warp: threadIdx.x of extent {warp}"
                )
        elif _const(lanes[-1].extent) != warp:
            problem = (
                f"runs under threadIdx.x of extent {lanes[-1].extent}; a warp-level operation needs exactly "
                f"one warp: threadIdx.x of extent {warp}"
            )
        else:
            serial = [loop for loop in loops if loop.kind in (ForKind.PARALLEL, ForKind.VECTORIZED)]
            if serial:
                problem = f"is inside the {serial[-1].kind.value} {loop_target(serial[-1])}"
        if problem is not None:
            where = loops[-1] if loops else None
            out.append(
                Violation(
                    INTRINSIC_RULE,
                    f"call {name}",
                    f"the warp-level operation {name} {problem}",
                    fragment(where) if where is not None else str(call),
                )
            )


def check_gpu(program: Program, target: Target | None) -> list[Violation]:
    """The ``thread-binding``, ``shared-memory`` and ``intrinsic-scope`` violations."""
    out: list[Violation] = []
    if target is not None and target.is_cpu:
        for kernel in program.kernels:
            for loop in kernel.thread_loops:
                out.append(
                    Violation(
                        THREAD_RULE,
                        loop_target(loop),
                        f"is bound to {loop.thread_tag}, but the target {target} is a CPU",
                        fragment(loop),
                    )
                )
    for kernel in program.kernels:
        _check_kernel_threads(kernel, target, out)
        _check_shared_memory(kernel, target, out)
    _check_intrinsics(program, target, out)
    return out
