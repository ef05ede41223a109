"""Helpers of ``blockize`` and ``tensorize``.

- ``divide_binding``: one block binding as ``outer * factor + inner + base``, where ``outer``
  uses only loops outside the blockized loop and ``inner`` only loops from it inward, found
  through ``tir.arith.iter_map.detect_iter_map``.
- ``Matcher``: a block's body compared with a tensor intrinsic's description, node by node,
  modulo the renaming of loop variables and iterators, each access ``X[e]`` of the block read
  as ``X_view[e - region.min]`` (``region``: the block's region of ``X``).
- ``Instantiator``: a fresh copy of an intrinsic's implementation body, its buffer parameters
  replaced by views of the block's regions.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tir.arith import Analyzer, eval_interval
from tir.arith.iter_map import IterMark, IterSplit, IterSum, detect_iter_map
from tir.ir import (
    And,
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
    IRMutator,
    IterVar,
    Let,
    LetStmt,
    MatchBufferRegion,
    Node,
    PrimExpr,
    Ramp,
    Range,
    SeqStmt,
    Stmt,
    StringImm,
    Var,
    const,
    post_order_visit,
    substitute,
)

# ===================================================================== small helpers


def var_ids(node: Any) -> set[int]:
    """Ids of the variables ``node`` uses (definitions excluded)."""
    found: set[int] = set()

    def note(n: Node) -> None:
        if isinstance(n, Var):
            found.add(id(n))

    if isinstance(node, Var):
        return {id(node)}
    if isinstance(node, list):
        node = tuple(node)
    if isinstance(node, (Node, tuple)):
        post_order_visit(node, note)  # type: ignore[arg-type]
    return found


def uses_any(node: Any, variables: Iterable[Var]) -> bool:
    wanted = {id(v) for v in variables}
    return bool(wanted & var_ids(node))


def is_true(expr: PrimExpr) -> bool:
    return isinstance(expr, IntImm) and bool(expr.value)


def conjuncts(expr: PrimExpr) -> list[PrimExpr]:
    if isinstance(expr, And):
        return conjuncts(expr.a) + conjuncts(expr.b)
    return [] if is_true(expr) else [expr]


def is_int(expr: Any, value: int | None = None) -> bool:
    return isinstance(expr, IntImm) and (value is None or expr.value == value)


def analyzer_for(dom: Mapping[Var, Range]) -> Analyzer:
    analyzer = Analyzer()
    for var, rng in dom.items():
        analyzer.bind(var, rng)
    return analyzer


def prove_equal(analyzer: Analyzer, a: PrimExpr, b: PrimExpr) -> bool:
    try:
        if a.dtype != b.dtype:
            if isinstance(b, IntImm):
                b = IntImm(b.value, a.dtype)
            elif isinstance(a, IntImm):
                a = IntImm(a.value, b.dtype)
            else:
                return False
        return bool(analyzer.can_prove_equal(a, b))
    except (TypeError, ValueError):
        return False


# ===================================================================== binding division


class DivisionError(Exception):
    """A binding cannot be divided into an outer and an inner part; the message says why."""


@dataclass
class Division:
    """A block binding divided at a loop: ``value == outer * factor + inner + base``.

    ``kind`` is ``"outer"`` (the binding uses no loop from the blockized loop inward: it moves
    to the outer block, ``inner`` is None), ``"inner"`` (it uses only those loops: it stays
    on the inner block with the original iterator, ``outer`` is None) or ``"both"``.
    ``outer_dom`` / ``inner_dom`` are the domains of the new iterators.
    """

    kind: str
    outer: PrimExpr | None
    outer_dom: Range | None
    inner: PrimExpr | None
    inner_dom: Range | None
    factor: PrimExpr
    base: PrimExpr


@dataclass
class _Atom:
    """One digit of a binding: ``scale * expr`` with ``0 <= expr < extent``."""

    expr: PrimExpr
    extent: PrimExpr
    scale: PrimExpr
    inner: bool


def _digit(mark: IterMark, lower_factor: PrimExpr, extent: PrimExpr, dtype: Any) -> PrimExpr:
    return IterSplit(mark, lower_factor, extent, const(1, dtype)).to_expr()


def _mark_vars(mark: IterMark) -> list[Var]:
    if isinstance(mark.source, Var):
        return [mark.source]
    return mark.source.loop_vars()


class _Divider:
    def __init__(self, inner_ids: set[int], dom: Mapping[Var, Range], dtype: Any, show: str) -> None:
        self.inner_ids = inner_ids
        self.dom = dom
        self.dtype = dtype
        self.show = show

    def side(self, variables: Sequence[Var]) -> bool | None:
        """True: all inner; False: all outer; None: mixed."""
        flags = {id(v) in self.inner_ids for v in variables}
        if len(flags) == 1:
            return flags.pop()
        return None if flags else False

    def atoms(self, split: IterSplit, scale: PrimExpr) -> list[_Atom]:
        total = _mul(split.scale, scale)
        mark = split.mark
        side = self.side(_mark_vars(mark))
        if side is not None:
            return [_Atom(_digit(mark, split.lower_factor, split.extent, self.dtype), split.extent, total, side)]
        assert isinstance(mark.source, IterSum)
        return self.fused_atoms(split, mark, mark.source, total)

    def fused_atoms(self, split: IterSplit, mark: IterMark, source: IterSum, total: PrimExpr) -> list[_Atom]:
        """A split of a fused mark that mixes outer and inner loops, decomposed into splits of
        the marks it is fused from (possible when its digit positions align with theirs)."""
        refuse = DivisionError(
            f"{self.show} mixes loops outside and inside the blockized loop in `{split.to_expr()}`, "
            "which is not a sum of an outer and an inner part"
        )
        chain = sorted(source.args, key=lambda s: s.scale.value if isinstance(s.scale, IntImm) else -1)
        if not is_int(source.base, 0) or not all(is_int(s.scale) and is_int(s.extent) for s in chain):
            raise refuse
        bounds = [1]
        for item in chain:
            if item.scale.value != bounds[-1]:  # type: ignore[attr-defined]
                raise refuse
            bounds.append(bounds[-1] * item.extent.value)  # type: ignore[attr-defined]
        if not (is_int(split.lower_factor) and is_int(split.extent)):
            raise refuse
        low = split.lower_factor.value  # type: ignore[attr-defined]
        high = low * split.extent.value  # type: ignore[attr-defined]
        if is_int(mark.extent) and mark.extent.value <= high:  # type: ignore[attr-defined]
            high = bounds[-1]  # the top digit: no modulo
        high = min(high, bounds[-1])
        result: list[_Atom] = []
        for item, start, stop in zip(chain, bounds, bounds[1:]):
            piece_low, piece_high = max(low, start), min(high, stop)
            if piece_low >= piece_high:
                continue
            quotient = piece_low // start
            width = piece_high // piece_low
            digits = stop // start
            aligned = (
                piece_low % start == 0
                and piece_high % piece_low == 0
                and piece_low % low == 0
                and digits % quotient == 0
                and (piece_high == stop or (digits // quotient) % width == 0)
            )
            if not aligned:
                raise refuse
            lower = _mul(item.lower_factor, const(quotient, self.dtype))
            width_expr = const(width, self.dtype)
            piece = IterSplit(item.mark, lower, width_expr, const(piece_low // low, self.dtype))
            result.extend(self.atoms(piece, total))
        return result


def _mul(a: PrimExpr, b: PrimExpr) -> PrimExpr:
    if is_int(a) and is_int(b):
        return IntImm(a.value * b.value, a.dtype)  # type: ignore[attr-defined]
    if is_int(a, 1):
        return b
    if is_int(b, 1):
        return a
    return a * b


def _sum(atoms: Sequence[_Atom], divisor: PrimExpr | None, base: PrimExpr | None, dtype: Any) -> PrimExpr:
    result: PrimExpr | None = None
    for atom in atoms:
        scale = atom.scale
        if divisor is not None:
            scale = (
                IntImm(scale.value // divisor.value, dtype)  # type: ignore[attr-defined]
                if is_int(scale) and is_int(divisor)
                else scale // divisor
            )
        term = atom.expr if is_int(scale, 1) else atom.expr * scale
        result = term if result is None else result + term
    if base is not None and not is_int(base, 0):
        result = base if result is None else result + base
    return result if result is not None else const(0, dtype)


def divide_binding(
    value: PrimExpr, dom: Range, inner_loops: Sequence[Var], loop_dom: Mapping[Var, Range], show: str
) -> Division:
    """Divide one binding (see ``Division``); ``loop_dom`` holds the ranges of the loops of the
    block's scope (outside and inside), ``show`` names the binding in error messages."""
    inner_ids = {id(v) for v in inner_loops}
    used = var_ids(value)
    loop_ids = {id(v) for v in loop_dom}
    uses_inner = bool(used & inner_ids)
    uses_outer = bool((used & loop_ids) - inner_ids)
    dtype = value.dtype
    zero, one = const(0, dtype), const(1, dtype)
    if not uses_inner:
        return Division("outer", value, dom, None, None, one, zero)
    if not uses_outer:
        return Division("inner", None, None, value, dom, one, zero)
    result = detect_iter_map([value], loop_dom)
    if not result.ok or result.indices is None:
        raise DivisionError(f"{show} is not an affine map of the loops: {'; '.join(result.errors)}")
    iter_sum = result.indices[0]
    divider = _Divider(inner_ids, loop_dom, dtype, show)
    atoms: list[_Atom] = []
    for split in iter_sum.args:
        atoms.extend(divider.atoms(split, one))
    inner = [a for a in atoms if a.inner]
    outer = [a for a in atoms if not a.inner]
    analyzer = analyzer_for(loop_dom)
    if not outer:
        division = Division(
            "inner", None, None, analyzer.simplify(_sum(inner, None, iter_sum.base, dtype)), dom, one, zero
        )
    elif not inner:
        division = Division(
            "outer", analyzer.simplify(_sum(outer, None, iter_sum.base, dtype)), dom, None, None, one, zero
        )
    else:
        division = _divide_both(inner, outer, iter_sum.base, dtype, loop_dom, analyzer, show)
    if not _reconstructs(division, value, analyzer):
        raise DivisionError(f"{show}: could not prove that `{value}` equals its division into outer and inner parts")
    return division


def _divide_both(
    inner: list[_Atom],
    outer: list[_Atom],
    base: PrimExpr,
    dtype: Any,
    loop_dom: Mapping[Var, Range],
    analyzer: Analyzer,
    show: str,
) -> Division:
    everything = inner + outer
    constant = all(is_int(a.scale) and is_int(a.extent) for a in everything)
    if constant:
        if any(a.scale.value <= 0 for a in everything):  # type: ignore[attr-defined]
            raise DivisionError(f"{show} has a negatively scaled loop; it cannot be divided into outer and inner parts")
        inner_range = 1 + sum(a.scale.value * (a.extent.value - 1) for a in inner)  # type: ignore[attr-defined]
        factor_value = math.gcd(*(a.scale.value for a in outer))  # type: ignore[attr-defined]
        if inner_range > factor_value:
            raise DivisionError(
                f"{show}: its inner part `{_sum(inner, None, None, dtype)}` takes {inner_range} values, more than the "
                f"step {factor_value} of its outer part `{_sum(outer, None, None, dtype)}`, so it is not "
                "`outer * step + inner`"
            )
        factor: PrimExpr = const(factor_value, dtype)
        outer_extent = 1 + sum(a.scale.value // factor_value * (a.extent.value - 1) for a in outer)  # type: ignore[attr-defined]
        outer_dom = Range(const(0, dtype), const(outer_extent, dtype))
        inner_dom = Range(const(0, dtype), const(inner_range, dtype))
    else:
        if len(inner) != 1 or not prove_equal(analyzer, inner[0].scale, const(1, dtype)):
            raise DivisionError(f"{show}: its inner part is not a single loop of unit scale (symbolic extents)")
        factor = inner[0].extent
        for atom in outer:
            quotient = analyzer.simplify(atom.scale // factor)
            if not prove_equal(analyzer, quotient * factor, atom.scale):
                raise DivisionError(f"{show}: the scale {atom.scale} of its outer part is not a multiple of {factor}")
        inner_dom = Range(const(0, dtype), factor)
        outer_dom = None  # computed below
    outer_value = analyzer.simplify(_sum(outer, factor, None, dtype))
    inner_value = analyzer.simplify(_sum(inner, None, None, dtype))
    if outer_dom is None:
        low, high = eval_interval(outer_value, loop_dom)
        outer_dom = Range(low, analyzer.simplify(high - low + 1))
    return Division("both", outer_value, outer_dom, inner_value, inner_dom, factor, base)


def _reconstructs(division: Division, value: PrimExpr, analyzer: Analyzer) -> bool:
    total: PrimExpr = division.base
    if division.outer is not None:
        total = total + division.outer * division.factor
    if division.inner is not None:
        total = total + division.inner
    return prove_equal(analyzer, total, value)


def rebuilt(division: Division, outer_var: PrimExpr | None, inner_var: PrimExpr | None) -> PrimExpr:
    """The original iterator's value from the new outer and inner iterators."""
    parts: list[PrimExpr] = []
    if outer_var is not None:
        parts.append(outer_var if is_int(division.factor, 1) else outer_var * division.factor)
    if inner_var is not None:
        parts.append(inner_var)
    if not is_int(division.base, 0):
        parts.append(division.base)
    result = parts[0]
    for part in parts[1:]:
        result = result + part
    return result


# ===================================================================== tensorize matching


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


# ===================================================================== implementation copies


class Instantiator(IRMutator):
    """A fresh copy of an implementation body: loop variables, iterators, let variables and
    allocated buffers are new objects; ``buffer_map`` replaces the parameters; nested block
    names go through ``rename``."""

    def __init__(self, buffer_map: dict[int, Buffer], rename: Callable[[str], str]) -> None:
        self.buffers = dict(buffer_map)
        self.vars: dict[Var, PrimExpr] = {}
        self.rename = rename

    def fresh_var(self, var: Var) -> Var:
        new = Var(var.name, var.dtype)
        self.vars[var] = new
        return new

    def fresh_buffer(self, buffer: Buffer) -> Buffer:
        for expr in (*buffer.shape, *buffer.strides, buffer.elem_offset):
            if isinstance(expr, Var) and expr not in self.vars:
                self.fresh_var(expr)
        new = Buffer(
            buffer.name,
            tuple(substitute(s, self.vars) for s in buffer.shape),
            buffer.dtype,
            buffer.scope,
            tuple(substitute(s, self.vars) for s in buffer.strides),
            None if buffer.elem_offset is None else substitute(buffer.elem_offset, self.vars),
            buffer.align,
            buffer.offset_factor,
            axis_separators=buffer.axis_separators,
        )
        self.buffers[id(buffer)] = new
        return new

    def visit_Var(self, var: Var) -> PrimExpr:
        return self.vars.get(var, var)

    def visit_Buffer(self, buffer: Buffer) -> Buffer:
        return self.buffers.get(id(buffer), buffer)

    def visit_For(self, loop: For) -> Stmt:
        new_var = self.fresh_var(loop.loop_var)
        return For(
            new_var,
            self.visit(loop.min),
            self.visit(loop.extent),
            loop.kind,
            self.visit(loop.body),
            loop.thread_tag,
            dict(loop.annotations),
            span=loop.span,
        )

    def visit_IterVar(self, iv: IterVar) -> IterVar:
        return IterVar(self.fresh_var(iv.var), self.visit(iv.dom), iv.kind, span=iv.span)

    def visit_LetStmt(self, stmt: LetStmt) -> Stmt:
        value = self.visit(stmt.value)
        return LetStmt(self.fresh_var(stmt.var), value, self.visit(stmt.body), span=stmt.span)

    def visit_Let(self, expr: Let) -> PrimExpr:
        value = self.visit(expr.value)
        return Let(self.fresh_var(expr.var), value, self.visit(expr.body), span=expr.span)

    def visit_Block(self, block: Block) -> Stmt:
        allocs = tuple(self.fresh_buffer(b) for b in block.alloc_buffers)
        iter_vars = tuple(self.visit_IterVar(iv) for iv in block.iter_vars)
        matches = tuple(
            MatchBufferRegion(self.fresh_buffer(m.buffer), self.visit(m.source), span=m.span)
            for m in block.match_buffers
        )
        return block.replace(
            name=self.rename(block.name),
            iter_vars=iter_vars,
            reads=self.visit(block.reads),
            writes=self.visit(block.writes),
            body=self.visit(block.body),
            init=None if block.init is None else self.visit(block.init),
            alloc_buffers=allocs,
            match_buffers=matches,
        )

    def visit_BlockRealize(self, realize: BlockRealize) -> Stmt:
        values = tuple(self.visit(v) for v in realize.iter_values)
        predicate = self.visit(realize.predicate)
        block = self.visit(realize.block)
        return BlockRealize(values, predicate, block, span=realize.span)

    def visit_Allocate(self, stmt: Any) -> Stmt:
        new = self.fresh_buffer(stmt.buffer)
        return stmt.replace(buffer=new, body=self.visit(stmt.body))
