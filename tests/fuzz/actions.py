"""Random schedule primitives with plausible arguments drawn from the current program.

An action looks at the schedule (``get_block`` / ``get_loops`` / sampling calls, which the
trace records), draws arguments with a ``random.Random`` and returns the primitive call to
attempt as a ``Call`` (method name, arguments); ``None`` when the program offers nothing to
act on. Arguments are mostly ones the primitive has a chance to accept (a loop of the block's
consumer for ``compute_at``, divisors for ``split``, a reduction block for ``rfactor``), and
sometimes anything, so that refusals are exercised too.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tir.ir import Block, IntImm, IterKind
from tir.schedule import BlockRV, Instruction, LoopRV, Schedule


@dataclass
class Call:
    """One primitive call to attempt: ``getattr(sch, kind)(*args, **kwargs)``."""

    kind: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)

    def run(self, sch: Schedule) -> Any:
        return getattr(sch, self.kind)(*self.args, **self.kwargs)

    def instruction(self) -> Instruction:
        """The call as a trace instruction (for reproducers of calls that raised)."""
        return Instruction(self.kind, tuple(self.args), dict(self.kwargs))


Action = Callable[[Schedule, random.Random], "Call | None"]

SCOPES = ["global", "local"]
ANNOTATION_KEYS = ["pragma_auto_unroll_max_step", "pragma_unroll_explicit", "meta_note"]


# ---------------------------------------------------------------- handles from the program


class Drawer(random.Random):
    """The random source of one sequence. ``focus`` is the block the last applied step acted
    on: drawn again about a third of the time, so that sequences work on one block for a while
    (as a tuner's do: tile it, move its producer under it, decompose it...)."""

    focus: str | None = None


def _names(sch: Schedule, rng: random.Random) -> list[str]:
    names = sorted(sch.index.blocks)
    others = [name for name in names if name != "root"]
    return names if not others or rng.random() < 0.05 else others


def _focus(sch: Schedule, rng: random.Random) -> str | None:
    focus = getattr(rng, "focus", None)
    return focus if focus in sch.index.blocks and rng.random() < 0.35 else None


def draw_block(sch: Schedule, rng: random.Random) -> BlockRV:
    return sch.get_block(_focus(sch, rng) or rng.choice(_names(sch, rng)))


def block_node(sch: Schedule, block: BlockRV) -> Block:
    node = sch.get(block)
    assert isinstance(node, Block)
    return node


def is_reduction(sch: Schedule, block: BlockRV) -> bool:
    return any(iv.kind == IterKind.REDUCE for iv in block_node(sch, block).iter_vars)


def draw_reduction_block(sch: Schedule, rng: random.Random) -> BlockRV:
    """Mostly a block with a reduction iterator (when the program has one)."""
    focus = _focus(sch, rng)
    if focus is not None and is_reduction(sch, sch.get_block(focus)):
        return sch.get_block(focus)
    names = [n for n in sorted(sch.index.blocks) if n != "root"]
    rng.shuffle(names)
    if rng.random() < 0.85:
        for name in names:
            block = sch.get_block(name)
            if is_reduction(sch, block):
                return block
    return draw_block(sch, rng)


def focus_of(sch: Schedule, call: Call) -> str | None:
    """The block an applied call acted on (its first block argument), if it still exists."""
    for arg in call.args:
        if isinstance(arg, BlockRV):
            try:
                name = block_node(sch, arg).name
            except Exception:  # the handle died with the step (inlined, merged...)
                return None
            return name
    return None


def draw_loops(sch: Schedule, rng: random.Random) -> tuple[BlockRV, list[LoopRV]]:
    block = draw_block(sch, rng)
    return block, sch.get_loops(block)


def draw_loop(sch: Schedule, rng: random.Random, inner_bias: bool = False) -> LoopRV | None:
    _, loops = draw_loops(sch, rng)
    if not loops:
        return None
    if inner_bias and rng.random() < 0.7:
        return loops[-1]
    return rng.choice(loops)


def loop_extent(sch: Schedule, loop: LoopRV) -> int:
    extent = sch.get_loop_node(loop).extent
    return extent.value if isinstance(extent, IntImm) else 16


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def draw_factors(extent: int, rng: random.Random) -> list[int | None]:
    parts = rng.choice([2, 2, 2, 3])
    factors: list[int | None] = []
    for _ in range(parts):
        factors.append(rng.choice(divisors(extent)) if rng.random() < 0.7 else rng.randint(1, 9))
    if rng.random() < 0.8:
        factors[rng.randrange(parts)] = None
    return factors


# ---------------------------------------------------------------- the actions


def act_split(sch: Schedule, rng: random.Random) -> Call | None:
    loop = draw_loop(sch, rng)
    return None if loop is None else Call("split", (loop, draw_factors(loop_extent(sch, loop), rng)))


def act_loop_partition(sch: Schedule, rng: random.Random) -> Call | None:
    loop = draw_loop(sch, rng)
    if loop is None:
        return None
    extent = max(loop_extent(sch, loop), 1)
    factors: list[int | None] = [rng.randint(1, extent) for _ in range(rng.randint(1, 3))]
    if rng.random() < 0.5:
        factors[rng.randrange(len(factors))] = None
    return Call("loop_partition", (loop,), {"factors": factors})


def act_decompose_padding(sch: Schedule, rng: random.Random) -> Call | None:
    block, loops = draw_loops(sch, rng)
    if not loops:
        return None
    return Call("decompose_padding", (block, rng.choice(loops)))


def act_merge(sch: Schedule, rng: random.Random) -> Call | None:
    first = draw_loop(sch, rng)
    second = draw_loop(sch, rng)
    if first is None or second is None:
        return None
    return Call("merge", (first, second))


def act_sample_split(sch: Schedule, rng: random.Random) -> Call | None:
    loop = draw_loop(sch, rng)
    if loop is None:
        return None
    sizes = sch.sample_perfect_tile(loop, n=rng.randint(2, 4), max_innermost_factor=rng.choice([2, 4, 8, 16]))
    return Call("split", (loop, sizes))


def act_fuse(sch: Schedule, rng: random.Random) -> Call | None:
    _, loops = draw_loops(sch, rng)
    if not loops:
        return None
    if rng.random() < 0.1:
        chosen = [rng.choice(loops) for _ in range(rng.randint(1, 3))]
    else:
        start = rng.randrange(len(loops))
        chosen = loops[start : start + rng.randint(1, min(3, len(loops) - start))]
    return Call("fuse", tuple(chosen))


def act_reorder(sch: Schedule, rng: random.Random) -> Call | None:
    _, loops = draw_loops(sch, rng)
    if len(loops) < 2:
        return None
    order = rng.sample(loops, rng.randint(2, len(loops)))
    return Call("reorder", tuple(order))


def act_add_unit_loop(sch: Schedule, rng: random.Random) -> Call | None:
    target: BlockRV | LoopRV | None = draw_loop(sch, rng) if rng.random() < 0.5 else draw_block(sch, rng)
    return None if target is None else Call("add_unit_loop", (target,))


def _loop_kind(kind: str, inner_bias: bool) -> Action:
    def act(sch: Schedule, rng: random.Random) -> Call | None:
        loop = draw_loop(sch, rng, inner_bias)
        return None if loop is None else Call(kind, (loop,))

    return act


def act_annotate(sch: Schedule, rng: random.Random) -> Call | None:
    target: BlockRV | LoopRV | None = draw_loop(sch, rng) if rng.random() < 0.5 else draw_block(sch, rng)
    if target is None:
        return None
    value: Any = rng.choice([0, 1, 16, 64, "x"])
    return Call("annotate", (target, rng.choice(ANNOTATION_KEYS), value))


def act_sample_annotate(sch: Schedule, rng: random.Random) -> Call | None:
    block = draw_block(sch, rng)
    depth = sch.sample_categorical([0, 16, 64, 512], [0.25, 0.25, 0.25, 0.25])
    return Call("annotate", (block, "pragma_auto_unroll_max_step", depth))


def act_unannotate(sch: Schedule, rng: random.Random) -> Call | None:
    target: BlockRV | LoopRV | None = draw_loop(sch, rng) if rng.random() < 0.5 else draw_block(sch, rng)
    return None if target is None else Call("unannotate", (target, rng.choice(ANNOTATION_KEYS)))


def _compute_at(kind: str) -> Action:
    def act(sch: Schedule, rng: random.Random) -> Call | None:
        neighbours_of = sch.get_consumers if kind == "compute_at" else sch.get_producers
        block = draw_block(sch, rng)
        neighbours: list[BlockRV] = []
        for _ in range(4):
            neighbours = neighbours_of(block)
            if neighbours:
                break
            block = draw_block(sch, rng)
        loops = sch.get_loops(rng.choice(neighbours)) if neighbours else []
        loop = rng.choice(loops) if loops and rng.random() < 0.85 else draw_loop(sch, rng)
        if loop is None:
            return None
        return Call(kind, (block, loop), {"preserve_unit_loops": rng.random() < 0.5})

    return act


def _on_block(kind: str) -> Action:
    def act(sch: Schedule, rng: random.Random) -> Call | None:
        return Call(kind, (draw_block(sch, rng),))

    return act


def act_cache_read(sch: Schedule, rng: random.Random) -> Call | None:
    block = draw_block(sch, rng)
    reads = len(block_node(sch, block).reads)
    index = rng.randrange(reads) if reads and rng.random() < 0.9 else rng.randint(0, 3)
    return Call("cache_read", (block, index, rng.choice(SCOPES)))


def act_cache_write(sch: Schedule, rng: random.Random) -> Call | None:
    block = draw_block(sch, rng)
    writes = len(block_node(sch, block).writes)
    index = rng.randrange(writes) if writes and rng.random() < 0.9 else rng.randint(0, 2)
    return Call("cache_write", (block, index, rng.choice(SCOPES)))


def act_set_scope(sch: Schedule, rng: random.Random) -> Call | None:
    block = draw_block(sch, rng)
    return Call("set_scope", (block, rng.randint(0, 1), rng.choice(SCOPES)))


def act_storage_align(sch: Schedule, rng: random.Random) -> Call | None:
    block = draw_block(sch, rng)
    writes = block_node(sch, block).writes
    index = rng.randrange(len(writes)) if writes else 0
    ndim = len(writes[index].buffer.shape) if writes else 1
    axis = rng.randrange(ndim) if rng.random() < 0.9 else rng.choice([-1, ndim])
    factor = rng.choice([2, 4, 8, 16, 32]) if rng.random() < 0.9 else rng.randint(0, 3)
    offset = rng.randrange(factor) if factor > 0 else 0
    return Call("storage_align", (block, index, axis, factor, offset))


def act_decompose_reduction(sch: Schedule, rng: random.Random) -> Call | None:
    block = draw_reduction_block(sch, rng)
    loops = sch.get_loops(block)
    loop = rng.choice(loops) if loops and rng.random() < 0.9 else draw_loop(sch, rng)
    return None if loop is None else Call("decompose_reduction", (block, loop))


def act_merge_reduction(sch: Schedule, rng: random.Random) -> Call | None:
    names = sorted(sch.index.blocks)
    inits = [name for name in names if name.endswith("_init")]
    if inits and rng.random() < 0.9:
        init = rng.choice(inits)
        update = init[: -len("_init")]
        if update in names:
            return Call("merge_reduction", (sch.get_block(init), sch.get_block(update)))
    return Call("merge_reduction", (draw_block(sch, rng), draw_block(sch, rng)))


def act_rfactor(sch: Schedule, rng: random.Random) -> Call | None:
    block = draw_reduction_block(sch, rng)
    loops = sch.get_loops(block)
    if not loops:
        return None
    loop = rng.choice(loops)
    ndim = max((len(w.buffer.shape) for w in block_node(sch, block).writes), default=0)
    return Call("rfactor", (loop, rng.randint(0, ndim)))


def act_blockize(sch: Schedule, rng: random.Random) -> Call | None:
    loop = draw_loop(sch, rng, inner_bias=rng.random() < 0.5)
    return None if loop is None else Call("blockize", (loop,))


def act_compute_location(sch: Schedule, rng: random.Random) -> Call | None:
    block = draw_block(sch, rng)
    location = sch.sample_compute_location(block)
    return Call("apply_compute_location", (block, location))


def _draw_buffer_ref(sch: Schedule, block: BlockRV, rng: random.Random) -> tuple[list[Any], int] | None:
    """``["read" | "write", index]`` of one of the block's buffers, and that buffer's rank."""
    node = block_node(sch, block)
    options = [("read", i, r) for i, r in enumerate(node.reads)] + [("write", i, w) for i, w in enumerate(node.writes)]
    if not options:
        return None
    kind, index, region = rng.choice(options)
    return [kind, index], len(region.buffer.shape)


def act_reindex(sch: Schedule, rng: random.Random) -> Call | None:
    block = draw_block(sch, rng)
    ref = _draw_buffer_ref(sch, block, rng)
    return None if ref is None else Call("reindex", (block, ref[0]))


def _index_map(rank: int, shape: list[int], rng: random.Random) -> tuple[str, bool]:
    """A transpose, a split of one axis (shifted or not) or a fuse of two neighbours, as lambda
    text, and whether it shifts (leaves padding before the data as well as after it)."""
    names = [f"i{k}" for k in range(rank)]
    params = ", ".join(names)
    how = rng.choice(
        ["permute", "split", "fuse", "shifted split"] if rank > 1 else ["split", "split", "identity", "shifted split"]
    )
    if how == "permute":
        results = rng.sample(names, rank)
    elif how == "split":
        axis = rng.randrange(rank)
        extent = shape[axis] if axis < len(shape) else 8
        factor = rng.choice([d for d in divisors(extent) if d > 1] or [2]) if rng.random() < 0.8 else rng.randint(2, 5)
        results = names[:axis] + [f"{names[axis]} // {factor}", f"{names[axis]} % {factor}"] + names[axis + 1 :]
    elif how == "shifted split":
        # (i + c) // f: padding before the data and after it (a pad_value fills both).
        axis, shift, factor = rng.randrange(rank), rng.randint(1, 3), rng.choice([2, 4])
        shifted = f"({names[axis]} + {shift})"
        results = names[:axis] + [f"{shifted} // {factor}", f"{shifted} % {factor}"] + names[axis + 1 :]
    elif how == "fuse":
        axis = rng.randrange(rank - 1)
        inner = shape[axis + 1] if axis + 1 < len(shape) else 4
        results = names[:axis] + [f"{names[axis]} * {inner} + {names[axis + 1]}"] + names[axis + 2 :]
    else:
        results = names
    return f"lambda {params}: ({', '.join(results)},)", how == "shifted split"


def act_transform_layout(sch: Schedule, rng: random.Random) -> Call | None:
    block = draw_block(sch, rng)
    ref = _draw_buffer_ref(sch, block, rng)
    if ref is None:
        return None
    (kind, index), rank = ref
    regions = block_node(sch, block).reads if kind == "read" else block_node(sch, block).writes
    buffer = regions[index].buffer
    if any(param is buffer for param in sch.func.params):
        # A parameter's new layout changes the signature: the engine's comparison passes arrays
        # of the original shapes (tests/schedule/test_prim_transform_layout.py checks those).
        return None
    shape = [s.value if isinstance(s, IntImm) else 8 for s in buffer.shape]
    index_map, shifted = _index_map(rank, shape, rng)
    if shifted and rng.random() < 0.5:
        # A map with padding may name a value for it (a program that reads the padding must).
        return Call("transform_layout", (block, [kind, index], index_map), {"pad_value": 0})
    return Call("transform_layout", (block, [kind, index], index_map))


def act_transform_block_layout(sch: Schedule, rng: random.Random) -> Call | None:
    block = draw_block(sch, rng)
    iters = block_node(sch, block).iter_vars
    if not iters:
        return None
    shape = [iv.dom.extent.value if isinstance(iv.dom.extent, IntImm) else 8 for iv in iters]
    return Call("transform_block_layout", (block, _index_map(len(iters), shape, rng)[0]))


def act_pad_einsum(sch: Schedule, rng: random.Random) -> Call | None:
    block = draw_block(sch, rng)
    iters = block_node(sch, block).iter_vars
    padding = [rng.choice([1, 1, 2, 4, 8, 3]) for _ in iters]
    return Call("pad_einsum", (block, padding))


ACTIONS: dict[str, Action] = {
    "split": act_split,
    "sample_perfect_tile+split": act_sample_split,
    "fuse": act_fuse,
    "reorder": act_reorder,
    "add_unit_loop": act_add_unit_loop,
    "parallel": _loop_kind("parallel", inner_bias=False),
    "vectorize": _loop_kind("vectorize", inner_bias=True),
    "unroll": _loop_kind("unroll", inner_bias=False),
    "annotate": act_annotate,
    "sample_categorical+annotate": act_sample_annotate,
    "unannotate": act_unannotate,
    "compute_at": _compute_at("compute_at"),
    "reverse_compute_at": _compute_at("reverse_compute_at"),
    "compute_inline": _on_block("compute_inline"),
    "reverse_compute_inline": _on_block("reverse_compute_inline"),
    "cache_read": act_cache_read,
    "cache_write": act_cache_write,
    "set_scope": act_set_scope,
    "storage_align": act_storage_align,
    "decompose_reduction": act_decompose_reduction,
    "merge_reduction": act_merge_reduction,
    "rfactor": act_rfactor,
    "blockize": act_blockize,
    "sample_compute_location": act_compute_location,
    "reindex": act_reindex,
    "transform_layout": act_transform_layout,
    "loop_partition": act_loop_partition,
    "decompose_padding": act_decompose_padding,
    "merge": act_merge,
    "transform_block_layout": act_transform_block_layout,
    "pad_einsum": act_pad_einsum,
}

#: How often each action is drawn, relative to 1.
WEIGHTS: dict[str, float] = {
    "split": 3.0,
    "sample_perfect_tile+split": 2.0,
    "fuse": 2.0,
    "reorder": 2.0,
    "add_unit_loop": 0.5,
    "parallel": 1.5,
    "vectorize": 1.5,
    "annotate": 0.5,
    "sample_categorical+annotate": 0.5,
    "unannotate": 0.3,
    "compute_at": 2.0,
    "reverse_compute_at": 2.0,
    "compute_inline": 1.5,
    "reverse_compute_inline": 1.5,
    "cache_read": 1.5,
    "cache_write": 1.5,
    "set_scope": 0.5,
    "storage_align": 0.7,
    "decompose_reduction": 1.5,
    "merge_reduction": 0.5,
    "rfactor": 1.5,
    "blockize": 1.0,
    "sample_compute_location": 1.0,
    "transform_block_layout": 0.7,
}


#: A focus on the primitives that change the order in which a reduction's instances run, for the
#: reduction kernels with a ``T.init()`` (``INIT_ORDER_KERNELS``): fuse a spatial with a reduce
#: loop, split the fused loop, reorder the parts, move or blockize the block; the init must still
#: run before every update of its output element.
INIT_ORDER_WEIGHTS: dict[str, float] = {
    "split": 3.0,
    "fuse": 3.0,
    "reorder": 4.0,
    "blockize": 0.5,
    "compute_at": 0.5,
    "reverse_compute_at": 0.5,
    "decompose_reduction": 0.3,
    "merge_reduction": 0.3,
    "rfactor": 0.3,
    "transform_block_layout": 0.3,
    "sample_compute_location": 0.3,
}


def draw_action(rng: random.Random, weights: dict[str, float] | None = None) -> str:
    """An action name, drawn by ``weights`` (default ``WEIGHTS``; with ``weights`` given, only
    the actions it names)."""
    if weights is not None:
        names = [name for name in ACTIONS if name in weights]
        return rng.choices(names, weights=[weights[name] for name in names])[0]
    names = list(ACTIONS)
    return rng.choices(names, weights=[WEIGHTS.get(name, 1.0) for name in names])[0]
