"""Tensorize matching: a block's body compared with a tensor intrinsic's description, node by
node, modulo the renaming of loop variables and iterators, each access ``X[e]`` of the block read
as ``X_view[e - region.min]`` (``region``: the block's region of ``X``). A mismatch is a
``MatchFailure`` naming the first pair of nodes that differ and a hint.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tir.arith import Analyzer
from tir.ir import (
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferRegion,
    BufferStore,
    Cast,
    Evaluate,
    FloatImm,
    For,
    IfThenElse,
    IntImm,
    IterVar,
    Let,
    LetStmt,
    Node,
    PrimExpr,
    Ramp,
    Range,
    SeqStmt,
    Stmt,
    StringImm,
    Var,
    post_order_visit,
    substitute,
)
from tir.schedule.primitives._expr_util import is_int, prove_equal, var_ids


class MatchFailure(Exception):
    """The first pair of nodes where a block and an intrinsic description differ."""

    def __init__(self, desc: Any, block: Any, reason: str, hint: str) -> None:
        super().__init__(reason)
        self.desc = desc
        self.block = block
        self.reason = reason
        self.hint = hint


HINT_EXPR = "the block computes something else than the intrinsic; pick an intrinsic that computes the same thing"
HINT_UNIT_LOOP = (
    "the block has a loop of extent 1 the intrinsic does not have: remove it (fuse it with its neighbour, "
    "or split with factors that leave no unit loop) before tensorizing"
)
HINT_PAD = (
    "the block's extent is smaller than the intrinsic's: pad the computation (pad_einsum) or split the loops "
    "so the tile the intrinsic covers is whole"
)
HINT_SPLIT = (
    "the block's loop nest has another shape than the intrinsic's: split and reorder the loops so the tile matches"
)
HINT_NDIM = (
    "the intrinsic's parameter and the block's region must have the same dimensions (unit dimensions are not dropped): "
    "reshape the buffer (transform_layout) or register the intrinsic for this rank"
)
HINT_DTYPE = "the data types differ: cast the operands, or use an intrinsic for these types"
HINT_SCOPE = (
    "the storage scopes differ: stage the buffer in the intrinsic's scope first (cache_read / cache_write / set_scope)"
)
HINT_BLOCKIZE = "tensorize the loop at the top of the tile (or blockize it first), not the innermost block itself"


def show(node: Any) -> str:
    if node is None:
        return "(nothing)"
    if isinstance(node, Buffer):
        shape = ", ".join(str(s) for s in node.shape)
        return f"buffer {node.name}: {node.dtype}, shape ({shape}), scope {node.scope!r}"
    if isinstance(node, BufferRegion):
        ranges = ", ".join(_show_range(r) for r in node.region)
        return f"{node.buffer.name}[{ranges}]"
    if isinstance(node, IterVar):
        return f"iterator {node.var.name}: {node.kind.name.lower()}, domain {_show_range(node.dom)}"
    if isinstance(node, For):
        kind = "" if node.kind.value == "serial" else f" ({node.kind.value})"
        bounds = f"{node.extent}" if is_int(node.min, 0) else f"{node.min}, {node.min} + {node.extent}"
        return f"for {node.loop_var.name} in range({bounds}){kind}: ..."
    try:
        return str(node)
    except Exception:  # never let printing hide the mismatch
        return repr(node)


def _noted(node: Any, note: Any) -> str:
    """An access, and below it what it accesses."""
    return f"{show(node)}\n    # {note if isinstance(note, str) else show(note)}"


def _show_range(rng: Range) -> str:
    if is_int(rng.extent, 1):
        return str(rng.min)
    return (
        f"{rng.min}:{rng.min} + {rng.extent}"
        if not (is_int(rng.min) and is_int(rng.extent))
        else (
            f"{rng.min.value}:{rng.min.value + rng.extent.value}"  # type: ignore[attr-defined]
        )
    )


def buffer_regions(block: Block) -> dict[int, tuple[Buffer, tuple[Range, ...]]]:
    """Per buffer of the block's signature, the hull of its read and write regions."""
    from tir.arith import union_regions

    found: dict[int, tuple[Buffer, tuple[Range, ...]]] = {}
    for region in (*block.reads, *block.writes):
        seen = found.get(id(region.buffer))
        if seen is None:
            found[id(region.buffer)] = (region.buffer, region.region)
        else:
            hull = union_regions(seen[1], region.region, region.buffer.shape)
            assert isinstance(hull, tuple)
            found[id(region.buffer)] = (region.buffer, hull)
    return found


class Matcher:
    """Compares an intrinsic description's body with a block's body (see module docstring).

    ``params``: the description's buffer parameters; ``regions``: per buffer of the block,
    the region its view would cover. After ``match``, ``buffer_map`` maps each description
    buffer (by id) to the block's buffer.
    """

    def __init__(self, params: Sequence[Buffer], regions: dict[int, tuple[Buffer, tuple[Range, ...]]]) -> None:
        self.params = {id(p): p for p in params}
        self.regions = regions
        self.var_map: dict[Var, PrimExpr] = {}
        self.var_ids: dict[int, Var] = {}
        self.buffer_map: dict[int, Buffer] = {}
        self.buffer_back: dict[int, Buffer] = {}
        self.analyzer = Analyzer()

    # ------------------------------------------------------------ definitions

    def bind_var(self, desc: Var, block: Var) -> None:
        if desc.dtype != block.dtype:
            raise MatchFailure(
                desc, block, f"variable {desc.name} is {desc.dtype}, {block.name} is {block.dtype}", HINT_DTYPE
            )
        self.var_map[desc] = block
        self.var_ids[id(desc)] = block

    def translate(self, expr: PrimExpr) -> PrimExpr:
        return substitute(expr, self.var_map)

    def same_value(self, desc: PrimExpr, block: PrimExpr) -> bool:
        if desc.dtype != block.dtype and not (is_int(desc) or is_int(block)):
            return False
        foreign = var_ids(desc) - {id(v) for v in self.var_map}
        if foreign:
            return False
        return prove_equal(self.analyzer, self.translate(desc), block)

    def buffer(self, desc: Buffer, block: Buffer, access: tuple[Any, Any]) -> None:
        mapped = self.buffer_map.get(id(desc))
        if mapped is not None:
            if mapped is not block:
                raise MatchFailure(
                    access[0],
                    access[1],
                    f"the intrinsic accesses {desc.name} where the block accesses {block.name}, but {desc.name} "
                    f"already stands for {mapped.name}",
                    HINT_EXPR,
                )
            return
        back = self.buffer_back.get(id(block))
        if back is not None:
            raise MatchFailure(
                access[0],
                access[1],
                f"the block accesses {block.name} where the intrinsic accesses {desc.name}, but {block.name} "
                f"already stands for the intrinsic's {back.name}",
                HINT_EXPR,
            )
        if id(desc) not in self.params:
            raise MatchFailure(
                access[0],
                access[1],
                f"the intrinsic's description uses buffer {desc.name}, which is not its parameter",
                HINT_EXPR,
            )
        if desc.dtype != block.dtype:
            raise MatchFailure(
                _noted(access[0], desc),
                _noted(access[1], block),
                f"dtype mismatch: the intrinsic's parameter {desc.name} is {desc.dtype}, the block's buffer {block.name} is {block.dtype}",
                HINT_DTYPE,
            )
        if desc.scope != "global" and desc.scope != block.scope:
            raise MatchFailure(
                _noted(access[0], desc),
                _noted(access[1], block),
                f"scope mismatch: the intrinsic's parameter {desc.name} is in scope {desc.scope!r}, the block's buffer {block.name} in {block.scope!r}",
                HINT_SCOPE,
            )
        found = self.regions.get(id(block))
        if found is None:
            raise MatchFailure(
                access[0],
                access[1],
                f"the block's signature (T.reads / T.writes) does not name {block.name}",
                HINT_EXPR,
            )
        region = found[1]
        shown_region = show(BufferRegion(block, region))
        if len(region) != len(desc.shape):
            raise MatchFailure(
                _noted(access[0], desc),
                _noted(access[1], f"region {shown_region}"),
                f"shape mismatch: the intrinsic's parameter {desc.name} has {len(desc.shape)} dimensions, the block's "
                f"buffer {block.name} {len(region)}",
                HINT_NDIM,
            )
        for dim, (extent, rng) in enumerate(zip(desc.shape, region)):
            if not prove_equal(self.analyzer, rng.extent, extent):
                smaller = is_int(rng.extent) and is_int(extent) and rng.extent.value < extent.value  # type: ignore[attr-defined]
                raise MatchFailure(
                    _noted(access[0], desc),
                    _noted(access[1], f"region {shown_region}"),
                    f"shape mismatch: the block accesses {rng.extent} elements of {block.name} in dimension {dim}, "
                    f"the intrinsic's parameter {desc.name} has {extent}",
                    HINT_PAD if smaller else HINT_SPLIT,
                )
        self.buffer_map[id(desc)] = block
        self.buffer_back[id(block)] = desc

    # ------------------------------------------------------------ statements

    def match(self, desc: Stmt | None, block: Stmt | None) -> None:
        if desc is None or block is None:
            if desc is not block:
                raise MatchFailure(desc, block, "one side has a statement the other lacks", HINT_SPLIT)
            return
        if type(desc) is not type(block):
            hint = HINT_EXPR
            if isinstance(block, For) and is_int(block.extent, 1):
                hint = HINT_UNIT_LOOP
            elif isinstance(desc, For) or isinstance(block, For):
                hint = HINT_SPLIT
            if isinstance(desc, For) and isinstance(block, (BufferStore, SeqStmt)):
                hint = HINT_BLOCKIZE
            raise MatchFailure(
                desc,
                block,
                f"the intrinsic has a {type(desc).__name__} where the block has a {type(block).__name__}",
                hint,
            )
        method: Callable[[Any, Any], None] = getattr(self, "match_" + type(desc).__name__, self.unsupported)
        method(desc, block)

    def unsupported(self, desc: Stmt, block: Stmt) -> None:
        raise MatchFailure(desc, block, f"tensorize cannot compare {type(desc).__name__} statements", HINT_EXPR)

    def match_For(self, desc: For, block: For) -> None:
        if not self.same_value(desc.min, block.min) or not self.same_value(desc.extent, block.extent):
            hint = HINT_SPLIT
            if is_int(block.extent, 1):
                hint = HINT_UNIT_LOOP
            elif is_int(block.extent) and is_int(desc.extent) and block.extent.value < desc.extent.value:  # type: ignore[attr-defined]
                hint = HINT_PAD
            raise MatchFailure(
                show(desc),
                show(block),
                f"loop extents differ: {desc.extent} in the intrinsic, {block.extent} in the block",
                hint,
            )
        if desc.kind is not block.kind or desc.thread_tag != block.thread_tag:
            raise MatchFailure(
                show(desc),
                show(block),
                f"loop kinds differ: {desc.kind.value} in the intrinsic, {block.kind.value} in the block",
                "tensorize before parallelizing, vectorizing, unrolling or binding the loops of the tile",
            )
        self.bind_var(desc.loop_var, block.loop_var)
        # Index comparisons need the ranges: (v_o * 8 + v_i) // 8 - v_o is 0 for v_i in [0, 8).
        self.analyzer.bind(block.loop_var, Range(block.min, block.extent))
        self.match(desc.body, block.body)

    def match_SeqStmt(self, desc: SeqStmt, block: SeqStmt) -> None:
        if len(desc.stmts) != len(block.stmts):
            raise MatchFailure(
                desc,
                block,
                f"the intrinsic has {len(desc.stmts)} statements in sequence, the block {len(block.stmts)}",
                HINT_EXPR,
            )
        for d, b in zip(desc.stmts, block.stmts):
            self.match(d, b)

    def match_BlockRealize(self, desc: BlockRealize, block: BlockRealize) -> None:
        d_block, b_block = desc.block, block.block
        if len(d_block.iter_vars) != len(b_block.iter_vars):
            raise MatchFailure(
                desc,
                block,
                f"the intrinsic's block has {len(d_block.iter_vars)} iterators, block {b_block.name!r} {len(b_block.iter_vars)}",
                HINT_SPLIT,
            )
        for d_iv, b_iv, d_value, b_value in zip(
            d_block.iter_vars, b_block.iter_vars, desc.iter_values, block.iter_values
        ):
            if d_iv.kind is not b_iv.kind:
                raise MatchFailure(
                    show(d_iv), show(b_iv), f"iterator kinds differ: {d_iv.kind.name} vs {b_iv.kind.name}", HINT_EXPR
                )
            if not (self.same_value(d_iv.dom.min, b_iv.dom.min) and self.same_value(d_iv.dom.extent, b_iv.dom.extent)):
                smaller = (
                    is_int(b_iv.dom.extent)
                    and is_int(d_iv.dom.extent)
                    and b_iv.dom.extent.value < d_iv.dom.extent.value  # type: ignore[attr-defined]
                )
                raise MatchFailure(
                    show(d_iv), show(b_iv), "iterator domains differ", HINT_PAD if smaller else HINT_SPLIT
                )
            if not self.same_value(d_value, b_value):
                raise MatchFailure(
                    f"{d_iv.var.name} = {d_value}",
                    f"{b_iv.var.name} = {b_value}",
                    f"the bindings of iterator {d_iv.var.name} / {b_iv.var.name} differ",
                    HINT_SPLIT,
                )
            self.bind_var(d_iv.var, b_iv.var)
            self.analyzer.bind(b_iv.var, b_iv.dom)
        if not self.same_value(desc.predicate, block.predicate):
            raise MatchFailure(
                f"T.where({desc.predicate})",
                f"T.where({block.predicate})",
                "the block predicates differ",
                HINT_PAD,
            )
        self.match_block_body(d_block, b_block)

    def match_Block(self, desc: Block, block: Block) -> None:
        if desc.iter_vars or block.iter_vars:
            raise MatchFailure(desc, block, "a block with iterators must be realized", HINT_EXPR)
        self.match_block_body(desc, block)

    def match_block_body(self, desc: Block, block: Block) -> None:
        if desc.match_buffers or block.match_buffers:
            raise MatchFailure(desc, block, "tensorize cannot compare blocks with match_buffer views", HINT_EXPR)
        if len(desc.alloc_buffers) != len(block.alloc_buffers):
            raise MatchFailure(desc, block, "the blocks allocate different numbers of buffers", HINT_EXPR)
        for d_buf, b_buf in zip(desc.alloc_buffers, block.alloc_buffers):
            same_shape = len(d_buf.shape) == len(b_buf.shape) and all(
                self.same_value(a, b) for a, b in zip(d_buf.shape, b_buf.shape)
            )
            if d_buf.dtype != b_buf.dtype or d_buf.scope != b_buf.scope or not same_shape:
                raise MatchFailure(show(d_buf), show(b_buf), "the blocks allocate different buffers", HINT_EXPR)
            self.buffer_map[id(d_buf)] = b_buf
            self.buffer_back[id(b_buf)] = d_buf
            self.regions.setdefault(id(b_buf), (b_buf, ()))
        if block.init is not None and desc.init is None:
            raise MatchFailure(
                desc.init,
                block.init,
                f"block {block.name!r} has an init (T.init) that the intrinsic's block lacks",
                "decompose_reduction first, so the init is a block of its own",
            )
        if desc.init is not None and block.init is None:
            raise MatchFailure(
                desc.init,
                block.init,
                f"the intrinsic's block has an init (T.init) that block {block.name!r} lacks",
                "the intrinsic initializes its output itself; use one that accumulates, or tensorize a block "
                "that keeps its own T.init",
            )
        self.match(desc.init, block.init)
        self.match(desc.body, block.body)

    def match_BufferStore(self, desc: BufferStore, block: BufferStore) -> None:
        self.buffer(desc.buffer, block.buffer, (desc, block))
        self.indices(desc.buffer, desc.indices, block.indices, (desc, block))
        self.expr(desc.value, block.value, (desc, block))

    def match_IfThenElse(self, desc: IfThenElse, block: IfThenElse) -> None:
        self.expr(desc.condition, block.condition, (desc, block))
        self.match(desc.then_case, block.then_case)
        self.match(desc.else_case, block.else_case)

    def match_Evaluate(self, desc: Evaluate, block: Evaluate) -> None:
        self.expr(desc.value, block.value, (desc, block))

    def match_LetStmt(self, desc: LetStmt, block: LetStmt) -> None:
        self.expr(desc.value, block.value, (desc, block))
        self.bind_var(desc.var, block.var)
        self.match(desc.body, block.body)

    # ------------------------------------------------------------ expressions

    def indices(
        self, desc_buffer: Buffer, desc: tuple[PrimExpr, ...], block: tuple[PrimExpr, ...], context: tuple[Any, Any]
    ) -> None:
        target = self.buffer_map[id(desc_buffer)]
        region = self.regions[id(target)][1]
        local = id(desc_buffer) not in self.params
        for dim, (d, b) in enumerate(zip(desc, block)):
            start = None if local else region[dim].min
            if not self.same_index(d, b, start):
                offset = (
                    ""
                    if start is None or is_int(start, 0)
                    else f" (its offset in the region {show(BufferRegion(target, region))} is `{self.analyzer.simplify(b - start) if not isinstance(b, Ramp) else b}`)"
                )
                raise MatchFailure(
                    context[0],
                    context[1],
                    f"index {dim} of {desc_buffer.name} / {target.name} differs: `{d}` in the intrinsic, `{b}` in the block{offset}",
                    HINT_EXPR,
                )

    def same_index(self, desc: PrimExpr, block: PrimExpr, start: PrimExpr | None) -> bool:
        if isinstance(desc, Ramp) or isinstance(block, Ramp):
            if not (isinstance(desc, Ramp) and isinstance(block, Ramp)) or desc.lanes != block.lanes:
                return False
            return self.same_value(desc.stride, block.stride) and self.same_index(desc.base, block.base, start)
        if start is not None and not is_int(start, 0):
            block = self.analyzer.simplify(block - start)
        return self.same_value(desc, block)

    def expr(self, desc: PrimExpr, block: PrimExpr, context: tuple[Any, Any]) -> None:
        if desc.dtype != block.dtype:
            raise MatchFailure(
                desc,
                block,
                f"dtype mismatch: `{desc}` is {desc.dtype} in the intrinsic, `{block}` is {block.dtype}",
                HINT_DTYPE,
            )
        if isinstance(desc, BufferLoad) and isinstance(block, BufferLoad):
            self.buffer(desc.buffer, block.buffer, (desc, block))
            self.indices(desc.buffer, desc.indices, block.indices, (desc, block))
            return
        if (
            not _has_load(desc)
            and not _has_load(block)
            and (desc.dtype.is_int or desc.dtype.is_uint or desc.dtype.is_bool)
        ):
            if self.same_value(desc, block):
                return
            raise MatchFailure(
                desc, block, f"the expressions differ: `{desc}` in the intrinsic, `{block}` in the block", HINT_EXPR
            )
        if type(desc) is not type(block):
            # A float constant written two ways (``T.cast(0, "float32")`` in an intrinsic's
            # fill, ``T.float32(0)`` in a workload's init) is the same value.
            desc_value, block_value = _float_constant(desc), _float_constant(block)
            if desc_value is not None and desc_value == block_value:
                return
            raise MatchFailure(
                desc, block, f"the expressions differ: `{desc}` in the intrinsic, `{block}` in the block", HINT_EXPR
            )
        if isinstance(desc, Var):
            if self.var_ids.get(id(desc)) is not block:
                raise MatchFailure(
                    desc, block, f"variables differ: `{desc}` in the intrinsic, `{block}` in the block", HINT_EXPR
                )
            return
        if isinstance(desc, (IntImm, FloatImm, StringImm)):
            if desc.value != block.value:  # type: ignore[attr-defined]
                raise MatchFailure(
                    desc, block, f"constants differ: {desc} in the intrinsic, {block} in the block", HINT_EXPR
                )
            return
        if isinstance(desc, Let):
            assert isinstance(block, Let)
            self.expr(desc.value, block.value, context)
            self.bind_var(desc.var, block.var)
            self.expr(desc.body, block.body, context)
            return
        for name in type(desc).child_fields():
            d_value, b_value = getattr(desc, name), getattr(block, name)
            if isinstance(d_value, PrimExpr) and isinstance(b_value, PrimExpr):
                self.expr(d_value, b_value, (desc, block))
            elif isinstance(d_value, tuple) and isinstance(b_value, tuple):
                if len(d_value) != len(b_value):
                    raise MatchFailure(desc, block, "the expressions have different numbers of operands", HINT_EXPR)
                for d_item, b_item in zip(d_value, b_value):
                    if isinstance(d_item, PrimExpr) and isinstance(b_item, PrimExpr):
                        self.expr(d_item, b_item, (desc, block))
                    elif d_item != b_item:
                        raise MatchFailure(desc, block, f"the expressions differ in {name}", HINT_EXPR)
            elif d_value != b_value and not (isinstance(d_value, Node) or isinstance(b_value, Node)):
                raise MatchFailure(
                    desc, block, f"the expressions differ: `{desc}` in the intrinsic, `{block}` in the block", HINT_EXPR
                )


def _float_constant(expr: PrimExpr) -> float | None:
    """The value of a float constant or of a float cast of a small int constant (exact in every
    float type, float16 included), else None."""
    if isinstance(expr, FloatImm):
        return float(expr.value)
    if isinstance(expr, Cast) and expr.dtype.is_float and isinstance(expr.value, IntImm):
        if abs(expr.value.value) <= 2048:
            return float(expr.value.value)
    return None


def _has_load(expr: PrimExpr) -> bool:
    found = False

    def note(node: Node) -> None:
        nonlocal found
        found = found or isinstance(node, BufferLoad)

    post_order_visit(expr, note)
    return found
