"""Tensorization matching: whether a registered tensor intrinsic fits a block, and the plan to
use it (see the package docstring for the method).

``match_intrin`` analyses one block against one intrinsic: the expression pattern names each
block buffer by the parameter it plays, the characteristic vectors map the block's iterators
onto the intrinsic's, and the result is a ``TensorizeCandidate`` (with the plan that
``apply.py`` carries out) or a ``TensorizeMismatch`` saying why not. ``tensorize_candidates``
lists, per block, the intrinsics that fit and those that do not.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from tir.intrin import IntrinError, TensorIntrin
from tir.ir import (
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferStore,
    Cast,
    FloatImm,
    For,
    IntImm,
    IterKind,
    PrimExpr,
    PrimFunc,
    Var,
    free_vars,
    post_order_visit,
)
from tir.schedule import Schedule, ScheduleError
from tir.target import Target

#: Function attribute declaring value ranges of parameters: ``{"A": [0, 127]}`` (inclusive).
#: An intrinsic exact only on a range (``operand_contracts``) fits only operands declared inside it.
VALUE_RANGES_ATTR = "value_ranges"


def operand_contracts(intrin: TensorIntrin) -> dict[str, tuple[int, int]]:
    """Value ranges (inclusive) a parameter of ``intrin`` must keep for it to be exact.

    ``x86_avx2_u7s8s32_dot_8x4`` saturates pair sums unless its uint8 operand is below 128
    (see tir/intrin/x86.py); an intrinsic may state such ranges itself as an attribute
    ``operand_ranges`` (``{"A": (0, 127)}``). An intrinsic with a contract is matched only to
    operands declared within it (``T.func_attr({"value_ranges": {"A": [0, 127]}})``)."""
    stated = getattr(intrin, "operand_ranges", None)
    if stated:
        return {name: (int(low), int(high)) for name, (low, high) in dict(stated).items()}
    from tir.intrin.x86 import AVX2_U7S8_DOT, U7_MAX

    if intrin.name == AVX2_U7S8_DOT:
        return {"A": (0, U7_MAX)}
    return {}


# ===================================================================== results


@dataclass(frozen=True)
class IterGroup:
    """Block iterators sharing a characteristic vector, fused into one iterator.

    ``iters`` / ``extents``: the block's iterators, outermost first; ``operands``: the roles
    (intrinsic parameter names) they index; ``intrin_iter`` / ``intrin_extent``: the
    intrinsic's iterator they map to, None when the group stays outside the intrinsic."""

    iters: tuple[str, ...]
    extents: tuple[int, ...]
    kind: str  # "S" spatial, "R" reduction
    operands: tuple[str, ...]
    intrin_iter: str | None = None
    intrin_extent: int | None = None

    @property
    def extent(self) -> int:
        return math.prod(self.extents)

    @property
    def padded_extent(self) -> int:
        step = self.intrin_extent or 1
        return -(-self.extent // step) * step

    def __str__(self) -> str:
        fused = " * ".join(self.iters) if len(self.iters) > 1 else self.iters[0]
        vector = "{" + ", ".join(self.operands) + "}"
        if self.intrin_iter is None:
            return f"({fused}) [{self.extent}] {vector} -> outside the intrinsic"
        pad = f", padded to {self.padded_extent}" if self.padded_extent != self.extent else ""
        return f"({fused}) [{self.extent}{pad}] {vector} -> its {self.intrin_iter} [{self.intrin_extent}]"


@dataclass(frozen=True)
class TensorizeCandidate:
    """An intrinsic that fits a block: the roles of the block's buffers and the iterator mapping."""

    block: str
    intrin: str
    operands: tuple[tuple[str, str], ...]  # (intrinsic parameter, block buffer)
    groups: tuple[IterGroup, ...]
    plan: _Plan = field(repr=False, compare=False)

    @property
    def padded(self) -> bool:
        return any(g.padded_extent != g.extent for g in self.groups)

    def __str__(self) -> str:
        roles = ", ".join(f"{param}={buffer}" for param, buffer in self.operands)
        groups = "; ".join(str(g) for g in self.groups)
        return f"fits {self.intrin}: {roles}; {groups}"


@dataclass(frozen=True)
class TensorizeMismatch:
    """An intrinsic that does not fit a block, and why (``kind``: "target", "form", "combiner",
    "dtype", "iterators", "range", "schedule")."""

    block: str
    intrin: str
    kind: str
    reason: str

    def __str__(self) -> str:
        return f"no {self.intrin} ({self.kind}): {self.reason}"


@dataclass
class BlockCandidates:
    """One block: the intrinsics that fit and those that do not."""

    block: str
    fits: list[TensorizeCandidate] = field(default_factory=list)
    misses: list[TensorizeMismatch] = field(default_factory=list)

    def __str__(self) -> str:
        lines = [f"block {self.block}:"]
        lines += [f"  {item}" for item in self.fits]
        lines += [f"  {item}" for item in self.misses]
        return "\n".join(lines)


class TensorizeReport(dict):  # type: ignore[type-arg]
    """Block name -> ``BlockCandidates``, in program order; prints as a readable list."""

    def candidates(self) -> list[TensorizeCandidate]:
        return [c for entry in self.values() for c in entry.fits]

    def __str__(self) -> str:
        return "\n".join(str(entry) for entry in self.values())


# ===================================================================== analysis


class _Miss(ValueError):
    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason


@dataclass(frozen=True)
class _Desc:
    """The description's update block, read once."""

    params: tuple[Buffer, ...]
    store: BufferStore
    iters: tuple[Var, ...]  # desc iterators, block order
    kinds: tuple[IterKind, ...]
    extents: tuple[int, ...]
    loop_order: tuple[int, ...]  # desc iterator index per loop, outermost first


def _read_desc(intrin: TensorIntrin) -> _Desc:
    root = intrin.desc.root_block
    if root is None:
        raise _Miss("form", "its description has no root block")
    loops: list[For] = []
    node: Any = root.body
    while isinstance(node, For):
        loops.append(node)
        node = node.body
    if not isinstance(node, BlockRealize):
        raise _Miss("form", "its description is not a loop nest around one block")
    block = node.block
    if not isinstance(block.body, BufferStore) or block.init is not None:
        raise _Miss("form", "its description's block is not one store without an init")
    iters: list[Var] = []
    kinds: list[IterKind] = []
    extents: list[int] = []
    for iv in block.iter_vars:
        if iv.kind not in (IterKind.SPATIAL, IterKind.REDUCE):
            raise _Miss("form", f"its description's iterator {iv.var.name} is opaque")
        if not (_const(iv.dom.min) == 0 and _const(iv.dom.extent) is not None):
            raise _Miss("form", f"its description's iterator {iv.var.name} has no constant domain from 0")
        iters.append(iv.var)
        kinds.append(iv.kind)
        extents.append(cast(int, _const(iv.dom.extent)))  # constant: checked above
    loop_vars = [loop.loop_var for loop in loops]
    order = []
    for value in node.iter_values:
        if not isinstance(value, Var) or value not in loop_vars:
            raise _Miss("form", "its description binds an iterator to something other than one loop")
    for loop in loops:
        position = [k for k, value in enumerate(node.iter_values) if value is loop.loop_var]
        if len(position) != 1 or _const(loop.extent) != extents[position[0]] or _const(loop.min) != 0:
            raise _Miss("form", "its description's loops do not bind its iterators one to one")
        order.append(position[0])
    return _Desc(intrin.desc.buffer_params, block.body, tuple(iters), tuple(kinds), tuple(extents), tuple(order))


def _const(expr: Any) -> int | None:
    return expr.value if isinstance(expr, IntImm) else None


_COMMUTATIVE = ("Add", "Mul", "Max", "Min")


def _strip_casts(expr: PrimExpr) -> PrimExpr:
    while isinstance(expr, Cast):
        expr = expr.value
    return expr


class _Pattern:
    """The block's update against the description's: roles (description parameter -> block
    buffer) and the first difference, classified."""

    def __init__(self, params: Sequence[Buffer]) -> None:
        self.params = {id(p): p for p in params}
        self.roles: dict[int, Buffer] = {}  # id(desc param) -> block buffer
        self.back: dict[int, Buffer] = {}  # id(block buffer) -> desc param
        self.loads: dict[int, tuple[PrimExpr, ...]] = {}  # id(desc param) -> block indices

    def bind(self, desc: BufferLoad | BufferStore, block: BufferLoad | BufferStore) -> None:
        param = desc.buffer
        if id(param) not in self.params:
            raise _Miss("form", f"its description accesses {param.name}, which is not a parameter")
        known = self.roles.get(id(param))
        if known is not None and known is not block.buffer:
            raise _Miss("form", f"its {param.name} would stand for both {known.name} and {block.buffer.name}")
        other = self.back.get(id(block.buffer))
        if other is not None and other is not param:
            raise _Miss(
                "form",
                f"the block uses {block.buffer.name} as both {other.name} and {param.name} of the intrinsic",
            )
        indices = self.loads.get(id(param))
        if indices is not None and not _same_indices(indices, block.indices):
            raise _Miss("form", f"the block accesses {block.buffer.name} at two different indices")
        self.roles[id(param)] = block.buffer
        self.back[id(block.buffer)] = param
        self.loads[id(param)] = block.indices
        if param.dtype != block.buffer.dtype:
            raise _Miss(
                "dtype",
                f"the intrinsic's {param.name} is {param.dtype}, the block's {block.buffer.name} is {block.buffer.dtype}",
            )

    def compare(self, desc: PrimExpr, block: PrimExpr, top: bool = False) -> None:
        if isinstance(desc, BufferLoad) and isinstance(block, BufferLoad):
            self.bind(desc, block)
            return
        if isinstance(desc, Cast) or isinstance(block, Cast):
            if isinstance(desc, Cast) and isinstance(block, Cast):
                if desc.dtype != block.dtype:
                    raise _Miss("dtype", f"the intrinsic casts to {desc.dtype} where the block casts to {block.dtype}")
                self.compare(desc.value, block.value)
                return
            # Up to casts: find the roles first, then say which cast differs.
            self.compare(_strip_casts(desc), _strip_casts(block))
            where = "the intrinsic" if isinstance(desc, Cast) else "the block"
            cast = desc if isinstance(desc, Cast) else block
            raise _Miss("dtype", f"{where} casts `{_strip_casts(cast)}` to {cast.dtype} and the other does not")
        if type(desc) is not type(block):
            kind = "combiner" if top else "form"
            raise _Miss(kind, f"the intrinsic computes `{desc}` where the block computes `{block}`")
        if desc.dtype != block.dtype:
            raise _Miss(
                "dtype", f"the intrinsic computes `{desc}` in {desc.dtype}, the block `{block}` in {block.dtype}"
            )
        if isinstance(desc, (IntImm, FloatImm)):
            if desc.value != block.value:  # type: ignore[attr-defined]
                raise _Miss("form", f"constant {desc} in the intrinsic, {block} in the block")
            return
        if isinstance(desc, Var):
            raise _Miss("form", f"the intrinsic's update uses the variable {desc.name} outside an index")
        children = [(name, getattr(desc, name), getattr(block, name)) for name in type(desc).child_fields()]
        for name, d_value, b_value in children:
            if isinstance(d_value, PrimExpr) != isinstance(b_value, PrimExpr):
                raise _Miss("form", f"`{desc}` and `{block}` differ in {name}")
            if isinstance(d_value, tuple):
                if len(d_value) != len(b_value):
                    raise _Miss("form", f"`{desc}` and `{block}` have different numbers of operands")
                for d_item, b_item in zip(d_value, b_value):
                    if isinstance(d_item, PrimExpr) and isinstance(b_item, PrimExpr):
                        self.compare(d_item, b_item)
                    elif d_item != b_item:
                        raise _Miss("form", f"`{desc}` and `{block}` differ in {name}")
            elif isinstance(d_value, PrimExpr):
                try:
                    self.compare(d_value, b_value)
                except _Miss as miss:
                    if type(desc).__name__ in _COMMUTATIVE and miss.kind == "form" and name == "a":
                        raise _Miss(
                            "form",
                            f"{miss.reason} (the operands of `{block}` may be in the other order: "
                            "tensorize compares node by node)",
                        ) from None
                    raise
            elif d_value != b_value:
                raise _Miss("form", f"`{desc}` and `{block}` differ in {name}")


def _same_indices(a: tuple[PrimExpr, ...], b: tuple[PrimExpr, ...]) -> bool:
    from tir.ir.structural import structural_equal

    return len(a) == len(b) and all(structural_equal(x, y) for x, y in zip(a, b))


@dataclass(frozen=True)
class _RolePlan:
    """What happens to one role's buffer."""

    param: str  # the description parameter
    buffer: str  # the block's buffer (at analysis time)
    is_write: bool
    reindex: bool
    fuse_map: str | None  # reindexed buffer -> fused dims (None: already fused)
    final_map: str | None  # fused (padded) dims -> the description's layout (None: identity)


@dataclass(frozen=True)
class _Plan:
    roles: tuple[_RolePlan, ...]
    block_map: str | None  # block iterators -> fused groups (None: identity)
    padding: tuple[int, ...]  # per group
    inner_order: tuple[int, ...]  # group positions of the intrinsic's loops, outermost first


def match_intrin(func: PrimFunc, block_name: str, intrin: TensorIntrin) -> TensorizeCandidate | TensorizeMismatch:
    """The analysis of one block against one intrinsic (no target check, nothing applied)."""
    try:
        return _match(func, block_name, intrin)
    except _Miss as miss:
        return TensorizeMismatch(block_name, intrin.name, miss.kind, miss.reason)


def _find_block(func: PrimFunc, name: str) -> tuple[BlockRealize, list[For]]:
    from tir.analysis.tree import TreeIndex

    index = TreeIndex(func)
    realize = index.blocks.get(name)
    if realize is None:
        raise _Miss("form", f"no block named {name!r}")
    return realize, index.loops_above(realize)


def _match(func: PrimFunc, block_name: str, intrin: TensorIntrin) -> TensorizeCandidate:
    desc = _read_desc(intrin)
    realize, loops = _find_block(func, block_name)
    block: Block = realize.block
    store = block.body
    if not isinstance(store, BufferStore):
        raise _Miss("form", "the block's body is not one store")
    if block.match_buffers or block.alloc_buffers:
        raise _Miss("form", "the block has match_buffer views or allocations")
    if any(iv.kind not in (IterKind.SPATIAL, IterKind.REDUCE) for iv in block.iter_vars):
        raise _Miss("form", "the block has opaque iterators")
    extents: list[int] = []
    for iv in block.iter_vars:
        if _const(iv.dom.min) != 0 or _const(iv.dom.extent) is None:
            raise _Miss("form", f"iterator {iv.var.name} has no constant domain from 0")
        extents.append(cast(int, _const(iv.dom.extent)))  # constant: checked above
    if not _perfect_nest(realize, loops):
        raise _Miss(
            "schedule", "the block's loops are not a perfect nest binding one iterator each (schedule it before tiling)"
        )
    reduces = any(kind is IterKind.REDUCE for kind in desc.kinds)
    if reduces and block.init is None:
        raise _Miss("form", "the intrinsic reduces but the block has no T.init()")

    # 1. expression pattern
    pattern = _Pattern(desc.params)
    d_store = desc.store
    pattern.bind(d_store, store)
    pattern.compare(d_store.value, store.value, top=True)
    unused = [p.name for p in desc.params if id(p) not in pattern.roles]
    if unused:
        raise _Miss("form", f"its description never uses {', '.join(unused)}")
    _check_contracts(func, intrin, pattern)

    # 2. characteristic vectors
    param_order = [p for p in desc.params]
    names = {id(p): p.name for p in param_order}

    def vector_of(var: Var, accesses: Mapping[int, tuple[PrimExpr, ...]]) -> frozenset[str]:
        return frozenset(names[pid] for pid, indices in accesses.items() if any(v is var for v in free_vars(indices)))

    desc_access = dict(_accesses_of(desc.store, desc.params))
    block_access = {pid: pattern.loads[pid] for pid in pattern.loads}
    block_access[id(d_store.buffer)] = store.indices
    desc_vectors = [vector_of(v, desc_access) for v in desc.iters]
    if len(set(desc_vectors)) != len(desc_vectors):
        raise _Miss("form", "two of its iterators index the same parameters (the mapping would be ambiguous)")
    out_name = d_store.buffer.name
    for var, kind, vector in zip(desc.iters, desc.kinds, desc_vectors):
        if (kind is IterKind.SPATIAL) != (out_name in vector):
            raise _Miss("form", f"its iterator {var.name} is {kind.name.lower()} but indexes {sorted(vector)}")
    block_vectors = [vector_of(iv.var, block_access) for iv in block.iter_vars]
    for iv, vector in zip(block.iter_vars, block_vectors):
        if (iv.kind is IterKind.SPATIAL) != (out_name in vector):
            raise _Miss(
                "iterators",
                f"iterator {iv.var.name} is {iv.kind.name.lower()} but indexes {_show_vector(vector)}",
            )
    groups_by_vector: dict[frozenset[str], list[int]] = {}
    for k, vector in enumerate(block_vectors):
        groups_by_vector.setdefault(vector, []).append(k)
    roles = {names[pid]: buf for pid, buf in pattern.roles.items()}
    missing = [(desc.iters[t].name, vector) for t, vector in enumerate(desc_vectors) if vector not in groups_by_vector]
    if missing:
        text = "; ".join(
            f"its iterator {name} indexes {_show_vector(vector, roles)}, no iterator of the block indexes exactly those"
            for name, vector in missing
        )
        extra = [
            f"{', '.join(block.iter_vars[k].var.name for k in members)} index {_show_vector(vector, roles)}"
            for vector, members in groups_by_vector.items()
            if vector not in desc_vectors
        ]
        if extra:
            text += " (the block's " + "; ".join(extra) + ")"
        raise _Miss("iterators", text)
    extra_groups = [members for vector, members in groups_by_vector.items() if vector not in desc_vectors]
    extra_groups.sort(key=lambda members: members[0])
    mapped = [groups_by_vector[vector] for vector in desc_vectors]
    order = extra_groups + mapped  # extra groups outermost, then the intrinsic's iterators in its order
    groups = []
    for members in order:
        vector = block_vectors[members[0]]
        t = desc_vectors.index(vector) if vector in desc_vectors else None
        groups.append(
            IterGroup(
                iters=tuple(block.iter_vars[k].var.name for k in members),
                extents=tuple(extents[k] for k in members),
                kind="S" if block.iter_vars[members[0]].kind is IterKind.SPATIAL else "R",
                operands=tuple(sorted(vector, key=[p.name for p in param_order].index)),
                intrin_iter=desc.iters[t].name if t is not None else None,
                intrin_extent=desc.extents[t] if t is not None else None,
            )
        )

    # 3. the plan: fused form, padding, layouts
    group_of_iter = {members_k: g for g, members in enumerate(order) for members_k in members}
    identity_block = all(len(m) == 1 for m in order) and [m[0] for m in order] == list(range(len(order)))
    block_map = None
    if not identity_block:
        params = [f"v{k}" for k in range(len(block.iter_vars))]
        results = [_mixed_radix([f"v{k}" for k in members], [extents[k] for k in members]) for members in order]
        block_map = f"lambda {', '.join(params)}: ({', '.join(results)},)"
    padding = tuple(g.intrin_extent or 1 for g in groups)
    desc_iter_index = {id(v): t for t, v in enumerate(desc.iters)}
    group_of_desc = {desc_vectors.index(block_vectors[m[0]]): g for g, m in enumerate(order) if g >= len(extra_groups)}
    role_plans = []
    written = d_store.buffer
    for param in param_order:
        buffer = pattern.roles[id(param)]
        indices = pattern.loads[id(param)]
        index_vars = {id(v) for v in free_vars(indices)}
        used = sorted({group_of_iter[k] for k, iv in enumerate(block.iter_vars) if id(iv.var) in index_vars})
        dims_order = _fused_dims(indices, block, group_of_iter, order, used, buffer)
        layout_args = (param, desc_access[id(param)])
        layout_rest = (groups, group_of_desc, desc_iter_index, desc)
        # mypy mis-maps a second *tuple that follows a positional argument (a checker limitation)
        final = _final_layout(*layout_args, dims_order or used, *layout_rest)  # type: ignore[arg-type]
        padded = any(groups[g].padded_extent != groups[g].extent for g in used)
        is_param = any(buffer is p for p in func.params)
        reindex = dims_order is None or (final is not None and not padded and is_param)
        if reindex:  # the copy's dimensions are the groups in order (fuse_map below)
            final = _final_layout(*layout_args, used, *layout_rest)  # type: ignore[arg-type]  # as above
        fuse_map = None
        if reindex:
            dims = [k for k in range(len(block.iter_vars)) if group_of_iter[k] in used]
            if [group_of_iter[k] for k in dims] != sorted(group_of_iter[k] for k in dims) or any(
                len(order[g]) > 1 for g in used
            ):
                position = {k: f"d{p}" for p, k in enumerate(dims)}
                results = [_mixed_radix([position[k] for k in order[g]], [extents[k] for k in order[g]]) for g in used]
                fuse_map = f"lambda {', '.join(position[k] for k in dims)}: ({', '.join(results)},)"
        role_plans.append(_RolePlan(param.name, buffer.name, param is written, reindex, fuse_map, final))
    inner_order = tuple(group_of_desc[t] for t in desc.loop_order)
    plan = _Plan(tuple(role_plans), block_map, padding, inner_order)
    operands = tuple((p.name, pattern.roles[id(p)].name) for p in param_order)
    return TensorizeCandidate(block_name, intrin.name, operands, tuple(groups), plan)


def _perfect_nest(realize: BlockRealize, loops: list[For]) -> bool:
    """Each iterator bound to its own loop (of constant extent from 0), no other loop, nothing
    beside the block under them -- what ``transform_block_layout`` and ``pad_einsum`` need."""
    by_var = {id(loop.loop_var): loop for loop in loops}
    seen: set[int] = set()
    for value in realize.iter_values:
        if not isinstance(value, Var) or id(value) not in by_var or id(value) in seen:
            return False
        seen.add(id(value))
    if len(seen) != len(loops):
        return False
    for outer, inner in zip(loops, [*loops[1:], realize]):
        if outer.body is not inner:
            return False
    return all(_const(loop.min) == 0 and _const(loop.extent) is not None for loop in loops) and (
        _const(realize.predicate) == 1
    )


def _accesses_of(store: BufferStore, params: Sequence[Buffer]) -> Iterable[tuple[int, tuple[PrimExpr, ...]]]:
    yield id(store.buffer), store.indices
    loads: list[BufferLoad] = []
    post_order_visit(store.value, lambda n: loads.append(n) if isinstance(n, BufferLoad) else None)
    for load in loads:
        yield id(load.buffer), load.indices


def _show_vector(vector: Iterable[str], roles: Mapping[str, Buffer] | None = None) -> str:
    items = sorted(vector)
    if roles:
        items = [f"{name} ({roles[name].name})" if name in roles else name for name in items]
    return "{" + ", ".join(items) + "}" if items else "no operand"


def _mixed_radix(names: Sequence[str], extents: Sequence[int]) -> str:
    text = names[0]
    for name, extent in zip(names[1:], extents[1:]):
        text = f"({text}) * {extent} + {name}" if "+" in text else f"{text} * {extent} + {name}"
    return text


def _fused_dims(
    indices: tuple[PrimExpr, ...],
    block: Block,
    group_of_iter: Mapping[int, int],
    order: list[list[int]],
    used: list[int],
    buffer: Buffer,
) -> list[int] | None:
    """The group of each dimension when the access is already one plain index per fused
    iterator (in any order) over the whole buffer -- it needs no copy to be in fused form --
    else None."""
    if len(indices) != len(used):
        return None
    position = {id(iv.var): k for k, iv in enumerate(block.iter_vars)}
    dims = []
    for index, size in zip(indices, buffer.shape):
        k = position.get(id(index)) if isinstance(index, Var) else None
        if k is None:
            return None
        g = group_of_iter[k]
        if len(order[g]) != 1 or _const(size) != _const(block.iter_vars[k].dom.extent):
            return None
        dims.append(g)
    return dims if sorted(dims) == used else None


def _final_layout(
    param: Buffer,
    desc_indices: tuple[PrimExpr, ...],
    used: list[int],
    groups: list[IterGroup],
    group_of_desc: Mapping[int, int],
    desc_iter_index: Mapping[int, int],
    desc: _Desc,
) -> str | None:
    """The map from the fused, padded dims of a role's buffer (one per group in ``used``) to
    the layout the description reads; None when it is the identity.

    Dimension p of the description's parameter is indexed by ``e_p`` (of the intrinsic's
    iterators). Each fused iterator ``F`` of a group mapped to intrinsic iterator ``t`` splits
    into ``F // e_t`` (outside) and ``F % e_t`` (inside, what ``e_p`` reads). Outside parts go to
    the dimension where the description indexes by ``t`` alone; the others (and the groups
    that stay outside the intrinsic) go to the dimensions the description holds at 0, or are
    folded into the last of them (into the first dimension when it has none):
    ``index_p = outside_p * shape_p + e_p``."""
    from tir.ir import substitute

    shape = [_const(s) for s in param.shape]
    if any(s is None for s in shape):
        raise _Miss("form", f"its parameter {param.name} has a symbolic shape")
    names = {g: f"d{p}" for p, g in enumerate(used)}
    direct: dict[int, int] = {}  # group -> dim
    unit_dims = []
    for p, index in enumerate(desc_indices):
        if isinstance(index, IntImm):
            if index.value != 0 or shape[p] != 1:
                raise _Miss("form", f"its parameter {param.name} is indexed by the constant {index} in dimension {p}")
            unit_dims.append(p)
        elif isinstance(index, Var) and id(index) in desc_iter_index:
            t = desc_iter_index[id(index)]
            if desc.extents[t] == shape[p] and group_of_desc[t] not in direct:
                direct[group_of_desc[t]] = p
    outside: dict[int, list[tuple[str, int]]] = {p: [] for p in range(len(shape))}
    rest: list[tuple[str, int]] = []
    for g in used:
        group = groups[g]
        if group.intrin_extent is None:
            rest.append((names[g], group.padded_extent))
            continue
        count = group.padded_extent // group.intrin_extent
        if g in direct:
            outside[direct[g]].append((f"{names[g]} // {group.intrin_extent}", count))
        elif count > 1:
            rest.append((f"{names[g]} // {group.intrin_extent}", count))
    if rest:
        if unit_dims:
            for p, item in zip(unit_dims[:-1], rest):
                outside[p].append(item)
            outside[unit_dims[-1]].extend(rest[len(unit_dims) - 1 :])
        else:
            outside[0] = rest + outside[0]
    results = []
    for p, index in enumerate(desc_indices):
        parts = outside[p]
        outer = None
        if parts:
            outer = parts[0][0] if " // " not in parts[0][0] else f"({parts[0][0]})"
            for text, count in parts[1:]:
                term = text if " // " not in text else f"({text})"
                outer = f"({outer}) * {count} + {term}"
        # the inner part: e_p with each intrinsic iterator t replaced by F % e_t
        mapping: dict[Var, PrimExpr] = {}
        for v in desc.iters:
            t = desc_iter_index[id(v)]
            g = group_of_desc[t]
            if g in names:
                mapping[v] = Var(f"({names[g]} % {desc.extents[t]})", v.dtype)
        if isinstance(index, IntImm):
            inner = None
        else:
            inner = index_text(substitute(index, mapping))
        direct_group = next((g for g, dim in direct.items() if dim == p), None)
        if direct_group is not None and len(parts) == 1 and parts[0][0].startswith(names[direct_group] + " //"):
            results.append(names[direct_group])  # (F // e) * e + F % e
        elif outer is None:
            results.append(inner if inner is not None else "0")
        elif inner is None:
            results.append(outer)
        else:
            results.append(f"({outer}) * {shape[p]} + {inner}")
    inputs = [names[g] for g in used]
    if results == inputs:
        return None
    return f"lambda {', '.join(inputs)}: ({', '.join(results)},)"


def index_text(expr: PrimExpr) -> str:
    """An index expression (``+ - * // %`` of variables and integers) as index-map text;
    raises ``ValueError`` for anything else."""
    from tir.ir.expr import Add, FloorDiv, FloorMod, Mul, Sub

    if isinstance(expr, Var):
        return expr.name
    if isinstance(expr, IntImm):
        return str(expr.value)
    ops = {Add: "+", Sub: "-", Mul: "*", FloorDiv: "//", FloorMod: "%"}
    for cls, op in ops.items():
        if isinstance(expr, cls):
            return f"({index_text(expr.a)} {op} {index_text(expr.b)})"
    raise _Miss("form", f"its description indexes a parameter by `{expr}`, which a layout map cannot state")


def _check_contracts(func: PrimFunc, intrin: TensorIntrin, pattern: _Pattern) -> None:
    contracts = operand_contracts(intrin)
    if not contracts:
        return
    binding = {p.name: pattern.roles[id(p)] for p in intrin.desc.buffer_params if id(p) in pattern.roles}
    if getattr(intrin, "operand_ranges", None):
        try:
            from tir.intrin.ranges import check_operand_ranges
        except ImportError:
            pass
        else:
            problem = check_operand_ranges(intrin, func, binding)
            if problem is not None:
                raise _Miss("range", problem)
            return
    declared = func.attrs.get(VALUE_RANGES_ATTR) or {}
    for name, (low, high) in sorted(contracts.items()):
        buffer = binding.get(name)
        if buffer is None:
            continue
        stated = declared.get(buffer.name)
        if stated is None or not any(buffer is p for p in func.params):
            raise _Miss(
                "range",
                f"it is exact only for {name} in [{low}, {high}] and the range of {buffer.name} is not declared "
                f"(T.func_attr({{{VALUE_RANGES_ATTR!r}: {{{buffer.name!r}: [{low}, {high}]}}}}) declares it)",
            )
        s_low, s_high = (int(x) for x in stated)
        if s_low < low or s_high > high:
            raise _Miss(
                "range",
                f"it is exact only for {name} in [{low}, {high}]; {buffer.name} is declared in [{s_low}, {s_high}]",
            )


# ===================================================================== listing


def tensorize_candidates(
    func: PrimFunc,
    target: str | Target = "llvm",
    intrinsics: Sequence[str] | None = None,
    blocks: Sequence[str] | None = None,
) -> TensorizeReport:
    """Per block, the registered intrinsics that fit (with the mapping) and those that do not
    (with the reason).

    ``intrinsics``: the names to consider (default: every intrinsic the target can run,
    ``TensorIntrin.list(target=target)``); a named one the target cannot run is listed as a
    mismatch. ``blocks``: the block names to look at (default: every block but the root).
    An intrinsic is listed as fitting only when ``apply_candidate`` went through on a copy of
    the program, ``tensorize`` included, and the result verifies.

    Before (a uint8 x int8 matmul, on an AVX2 machine, A declared below 128)::

        C[vi, vj] = C[vi, vj] + T.cast(A[vi, vk], "int32") * T.cast(B[vk, vj], "int32")

    After (``print(tensorize_candidates(f, "llvm"))``; lines wrapped here)::

        block C:
          fits x86_avx2_u7s8s32_dot_8x4: A=A, B=B, C=C; (vi) [64] {A, C} -> outside the intrinsic;
              (vj) [64] {B, C} -> its vi [8]; (vk) [64] {A, B} -> its vk [4]
          no x86_avx2_fma_f32_4x16x4 (dtype): the intrinsic's C is float32, the block's C is int32
          no x86_avx2_s8s8s32_dot_8x4 (dtype): the intrinsic's A is int8, the block's A is uint8

    A depthwise convolution (``Out[n, h, w, c] += D[n, h + rh, w + rw, c] * W[rh, rw, c]``)::

        no x86_avx2_u8s8s32_dot_8x4 (iterators): its iterator vi indexes {B (W), C (Out)}, no
            iterator of the block indexes exactly those (the block's vn, vh, vw index {A (D),
            C (Out)}; vc index {A (D), B (W), C (Out)})
    """
    parsed = Target.parse(target)
    names = list(intrinsics) if intrinsics is not None else TensorIntrin.list(target=parsed)
    report = TensorizeReport()
    from tir.analysis.tree import TreeIndex

    index = TreeIndex(func)
    wanted = list(blocks) if blocks is not None else [n for n, r in index.blocks.items() if r is not func.body]
    for block_name in wanted:
        entry = BlockCandidates(block_name)
        for name in names:
            try:
                intrin = TensorIntrin.get(name)
            except IntrinError as error:
                entry.misses.append(TensorizeMismatch(block_name, name, "target", str(error)))
                continue
            if not intrin.available(parsed):
                needs = ", ".join(intrin.required_features) or "nothing more"
                entry.misses.append(
                    TensorizeMismatch(
                        block_name,
                        name,
                        "target",
                        f"{parsed.text!r} cannot run it (isa {intrin.isa or 'any'}, features: {needs})",
                    )
                )
                continue
            found = match_intrin(func, block_name, intrin)
            if isinstance(found, TensorizeCandidate):
                problem = _try_apply(func, found)
                if problem is not None:
                    found = TensorizeMismatch(block_name, name, "schedule", problem)
            (entry.fits if isinstance(found, TensorizeCandidate) else entry.misses).append(found)  # type: ignore[arg-type]
        report[block_name] = entry
    return report


def _try_apply(func: PrimFunc, candidate: TensorizeCandidate) -> str | None:
    # Imported here: the application module imports this one (it applies what matching found).
    from metasched.space.tensorize.apply import apply_candidate
    from tir.analysis import verify

    sch = Schedule(func)
    try:
        apply_candidate(sch, candidate.block, candidate)
    except ScheduleError as error:
        return str(error).strip().splitlines()[0]
    problems = verify(sch.func)
    if problems:
        return f"the tensorized program fails validation: {problems[0]}"
    return None
