"""Features of a scheduled program for the cost model: one row per buffer store.

``extract_features(func, target)`` walks the scheduled ``PrimFunc`` (before lowering) once and
describes every ``BufferStore`` (a block's body and its init each give one) by a fixed number of
float32 columns, ``NUM_FEATURES``; ``FEATURE_NAMES`` names them. Counts are given as
``log2(1 + x)``: run times span orders of magnitude and trees split better on logs.

What a row holds:

- arithmetic by kind (float add/sub, mul, fma-able mul-under-add, div/mod, math calls,
  comparisons and min/max; the same for integers; boolean ops, selects, casts, target intrinsic
  calls, index arithmetic), each multiplied by the trip count of the loops around the store and
  by the vector lanes of the operation;
- the loop nest: number of loops, total trip count, vectorized extent and its ratio to the
  target's vector lanes, parallel extent and its ratio to the cores, unrolled extents, the
  ``pragma_auto_unroll_max_step`` / ``meta_schedule.unroll_explicit`` pragma in force, the
  innermost serial extent;
- per buffer access (the ``MAX_ACCESSES`` largest by bytes touched; accesses of one buffer in
  one store are merged): read/write, bytes touched, unique bytes (the footprint of the whole nest),
  unique cache lines, reuse ratio, the stride class of the innermost non-trivial loop (0, 1,
  other), the footprint of the innermost loop, the loop that carries reuse (its extent and the
  bytes touched between two uses), estimated traffic through a 32 KiB and a 1 MiB cache;
- arithmetic intensity (operations per unique byte and per estimated cache traffic);
- allocations (the stored buffer's size and scope when the program allocates it, and the total
  allocated), tensor intrinsic use, whether the store is a reduction's init;
- ``misc.features_incomplete``: 1 where a feature could not be computed (see below).

Footprints come from the index expressions with block bindings substituted, whatever their
kind (affine, ``v // 16`` and ``v % 16`` of packed layouts, the clamped ``Select`` of a gather,
a ``BufferLoad`` of an indirect index): their spans from ``tir.arith``'s constant bounds over
the loops inside each level (an unbounded index spans its whole dimension; an affine index
with a variable in two terms is first put in the simplifier's canonical form, so that its
bounds are exact), their strides from evaluating them at two points (``tir.arith``'s
evaluator, its simplifier where that falls short; an index that depends on loaded data is
assumed to move by one element per iteration). The walk is direct (no lowering passes): the
tiled and packed 1024^3 matmul of examples/matmul_schedule.py takes about 0.7 ms (best of 200
runs).

Extraction never stops a tune: an exception while describing one access, one statement or one
block degrades that part (a whole-buffer footprint, an empty row, the block left out) and sets
``misc.features_incomplete`` on the rows concerned (every row when the block walk failed); the
width of a row never changes. The exception is logged at debug level (logger
``metasched.cost.features``).

A call statement (a tensor intrinsic writing through pointers, e.g. WMMA) is a row too, its
buffer operands covering their whole match_buffer regions; accesses through a match_buffer
view are described as accesses of the viewed buffer.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from tir.arith import Analyzer, simplify
from tir.arith.bound import BoundEvaluator, ConstIntBound
from tir.arith.evaluate import evaluate_int
from tir.ir import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    Allocate,
    And,
    BinaryOp,
    Block,
    BlockRealize,
    Broadcast,
    Buffer,
    BufferLoad,
    BufferStore,
    Call,
    Cast,
    Div,
    Evaluate,
    FloatImm,
    FloorDiv,
    FloorMod,
    For,
    ForKind,
    IfThenElse,
    IntImm,
    IRMutator,
    IterKind,
    Let,
    LetStmt,
    Max,
    Min,
    Mul,
    Not,
    Or,
    PrimExpr,
    PrimFunc,
    Ramp,
    Select,
    SeqStmt,
    Stmt,
    StringImm,
    Sub,
    Var,
    as_dtype,
)
from tir.ir.functor import contains, free_vars
from tir.target import Target

__all__ = ["FEATURE_NAMES", "MAX_ACCESSES", "NUM_FEATURES", "extract_features"]

#: Buffer accesses described per row (the largest by bytes touched); missing ones are zeros.
MAX_ACCESSES = 5

#: Bytes of a cache line, and the two cache capacities the traffic estimates assume.
CACHE_LINE = 64
CACHE_SIZES = (32 * 1024, 1024 * 1024)

#: The extent assumed for a loop of symbolic extent (a typical dynamic size).
SYMBOLIC_EXTENT = 32

_ARITH = (
    "float_addsub",
    "float_mul",
    "float_fma",
    "float_divmod",
    "float_math",
    "float_cmp",
    "int_addsub",
    "int_mul",
    "int_divmod",
    "int_cmp",
    "bool_op",
    "select",
    "cast",
    "intrin_call",
    "other_call",
    "index_op",
)
_A = {name: position for position, name in enumerate(_ARITH)}

_LOOP = (
    "num_loops",
    "log_trip_count",
    "log_innermost_extent",
    "log_innermost_serial_extent",
    "vec_num",
    "log_vec_extent",
    "vec_ratio_to_lanes",
    "vec_multiple_of_lanes",
    "vec_is_innermost",
    "log_expr_lanes",
    "parallel_num",
    "log_parallel_extent",
    "parallel_ratio_to_cores",
    "parallel_multiple_of_cores",
    "parallel_depth",
    "unroll_num",
    "log_unroll_extent",
    "log_auto_unroll_max_step",
    "unroll_explicit",
    "thread_num",
    "log_thread_extent",
)

_ACCESS = (
    "is_read",
    "is_write",
    "log_bytes",
    "log_unique_bytes",
    "log_unique_lines",
    "log_reuse_ratio",
    "stride_zero",
    "stride_one",
    "stride_other",
    "log_stride",
    "log_moving_stride",
    "log_innermost_footprint",
    "log_reuse_count",
    "log_reuse_distance_bytes",
    "log_traffic_l1",
    "log_traffic_l2",
    "is_allocated",
)

_REST = (
    "log_intensity_unique",
    "log_intensity_l1",
    "log_intensity_l2",
    "log_total_unique_bytes",
    "log_total_traffic_l1",
    "log_total_traffic_l2",
    "num_accesses",
    "store_is_allocated",
    "log_store_alloc_bytes",
    "store_scope_global",
    "store_scope_local",
    "store_scope_shared",
    "log_allocated_bytes",
    "num_allocations",
    "uses_intrinsic",
    "is_tensorized_block",
    "is_init",
    "log_num_rows",
    "target_vector_bytes",
    "log_target_cores",
    "features_incomplete",
)

FEATURE_NAMES: tuple[str, ...] = (
    tuple(f"arith.{name}" for name in _ARITH)
    + tuple(f"loop.{name}" for name in _LOOP)
    + tuple(f"access{slot}.{name}" for slot in range(MAX_ACCESSES) for name in _ACCESS)
    + tuple(f"misc.{name}" for name in _REST)
)
NUM_FEATURES = len(FEATURE_NAMES)

_ARITH_AT = 0
_LOOP_AT = _ARITH_AT + len(_ARITH)
_ACCESS_AT = _LOOP_AT + len(_LOOP)
_REST_AT = _ACCESS_AT + MAX_ACCESSES * len(_ACCESS)
_L = {name: _LOOP_AT + position for position, name in enumerate(_LOOP)}
_AC = {name: position for position, name in enumerate(_ACCESS)}
_R = {name: _REST_AT + position for position, name in enumerate(_REST)}

_CMP = (EQ, NE, LT, LE, GT, GE)
_MATH_CALLS = frozenset(
    "exp exp2 log log2 log10 sqrt rsqrt tanh sigmoid erf sin cos pow floor ceil round trunc abs isnan".split()
)
_INTRIN_CALLS = frozenset(("call_llvm_intrin", "call_llvm_pure_intrin"))


_log_errors = logging.getLogger(__name__)


def _log(x: float) -> float:
    return math.log2(1.0 + x) if x > 0 else 0.0


# ---------------------------------------------------------------- the walk


@dataclass
class _Loop:
    var: Var
    extent: int
    kind: ForKind
    unroll_hint: bool


@dataclass
class _Access:
    buffer: Buffer
    indices: tuple[PrimExpr, ...]
    read: bool
    write: bool
    count: int  # loads/stores of this buffer in the statement
    lanes: int  # elements per access (a vector access moves several)
    # An intrinsic call's operand covers a whole region: (pseudo variable, extent) per dimension.
    region_loops: tuple[tuple[Var, int], ...] = ()


@dataclass
class _Context:
    """What the walk knows at a statement: loops around it, block bindings, pragmas."""

    target_lanes_bytes: int
    cores: int
    loops: list[_Loop] = field(default_factory=list)
    env: dict[Var, PrimExpr] = field(default_factory=dict)
    allocated: dict[Buffer, int] = field(default_factory=dict)  # buffer -> bytes
    # match_buffer views -> (the viewed buffer, the region's start and extent per dimension)
    views: dict[Buffer, tuple[Buffer, tuple[PrimExpr, ...], tuple[int, ...]]] = field(default_factory=dict)
    auto_unroll: list[int] = field(default_factory=list)
    unroll_explicit: list[bool] = field(default_factory=list)
    tensorized: list[bool] = field(default_factory=list)
    rows: list[np.ndarray] = field(default_factory=list)
    # Set when a block could not be walked: every row is then flagged incomplete.
    incomplete: bool = False

    def marks(self) -> tuple[int, int, int, int]:
        """The depths of the stacks, to restore after a block whose walk failed."""
        return (len(self.loops), len(self.auto_unroll), len(self.unroll_explicit), len(self.tensorized))

    def restore(self, marks: tuple[int, int, int, int]) -> None:
        stacks: tuple[list[Any], ...] = (self.loops, self.auto_unroll, self.unroll_explicit, self.tensorized)
        for stack, depth in zip(stacks, marks):
            del stack[depth:]


class _ExprStats:
    """Operation counts and buffer accesses of one statement's expressions."""

    __slots__ = ("accesses", "counts", "intrinsic", "max_lanes", "views")

    def __init__(self, views: dict[Buffer, tuple[Buffer, tuple[PrimExpr, ...], tuple[int, ...]]]) -> None:
        self.counts = [0] * len(_ARITH)
        self.accesses: dict[int, _Access] = {}
        self.intrinsic = False
        self.max_lanes = 1
        self.views = views

    def access(
        self, buffer: Buffer, indices: tuple[PrimExpr, ...], write: bool, lanes: int, whole_region: bool = False
    ) -> None:
        region_loops: tuple[tuple[Var, int], ...] = ()
        view = self.views.get(buffer)
        if view is not None:
            # Through a match_buffer view: index the viewed buffer (offset by the region start);
            # an intrinsic's operand covers the whole region.
            source, starts, extents = view
            if len(indices) == len(starts):
                if whole_region:
                    region_loops = tuple((Var(f"region{d}"), extent) for d, extent in enumerate(extents))
                    indices = tuple(start + var for start, (var, _) in zip(starts, region_loops))
                    lanes = math.prod(extents)
                else:
                    indices = tuple(start + index for start, index in zip(starts, indices))
                buffer = source
        found = self.accesses.get(id(buffer))
        if found is None:
            self.accesses[id(buffer)] = _Access(buffer, indices, not write, write, 1, lanes, region_loops)
            return
        found.count += 1
        found.read |= not write
        found.write |= write
        found.lanes = max(found.lanes, lanes)

    def index(self, expr: PrimExpr) -> None:
        """Count the integer arithmetic of an index expression (addresses cost instructions too):
        every operation, select, cast and call; a load inside the index (an indirect index, a
        gather) is an access of its own."""
        stack = [expr]
        ops = 0
        while stack:
            node = stack.pop()
            cls = type(node)
            if cls in (Var, IntImm, FloatImm, StringImm):
                continue
            if cls is BufferLoad:
                self.visit(node)
            elif cls is Ramp:
                stack.append(cast(Ramp, node).base)
            elif cls is Broadcast or cls is Let:
                stack.extend(_children(node))
            else:
                ops += 1
                stack.extend(_children(node))
        self.counts[_A["index_op"]] += ops

    def visit(self, expr: PrimExpr) -> None:
        # Explicit dispatch on the class: this runs for every candidate the tuner scores.
        cls = type(expr)
        if cls is BufferLoad:
            expr = cast(BufferLoad, expr)
            lanes = expr.dtype.lanes
            self.max_lanes = max(self.max_lanes, lanes)
            self.access(expr.buffer, expr.indices, False, lanes)
            for index in expr.indices:
                self.index(index)
            return
        if cls in (IntImm, FloatImm, Var, StringImm):
            return
        lanes = expr.dtype.lanes
        if lanes > 1:
            self.max_lanes = max(self.max_lanes, lanes)
        if cls is Add or cls is Sub:
            expr = cast(BinaryOp, expr)
            if expr.dtype.is_float:
                self.counts[_A["float_addsub"]] += lanes
                if type(expr.a) is Mul or type(expr.b) is Mul:
                    self.counts[_A["float_fma"]] += lanes
            else:
                self.counts[_A["int_addsub"]] += lanes
        elif cls is Mul:
            self.counts[_A["float_mul" if expr.dtype.is_float else "int_mul"]] += lanes
        elif cls in (Div, FloorDiv, FloorMod):
            self.counts[_A["float_divmod" if expr.dtype.is_float else "int_divmod"]] += lanes
        elif cls in (Min, Max):
            self.counts[_A["float_cmp" if expr.dtype.is_float else "int_cmp"]] += lanes
        elif cls in _CMP:
            expr = cast(BinaryOp, expr)
            operand_lanes = expr.a.dtype.lanes
            self.counts[_A["float_cmp" if expr.a.dtype.is_float else "int_cmp"]] += operand_lanes
        elif cls in (And, Or, Not):
            self.counts[_A["bool_op"]] += lanes
        elif cls is Select:
            self.counts[_A["select"]] += lanes
        elif cls is Cast:
            self.counts[_A["cast"]] += lanes
        elif cls is Call:
            if self._call(cast(Call, expr), lanes):
                return
        elif cls is Ramp:
            self.visit(cast(Ramp, expr).base)
            return
        elif cls is Broadcast:
            self.visit(cast(Broadcast, expr).value)
            return
        elif cls is Let:
            expr = cast(Let, expr)
            self.visit(expr.value)
            self.visit(expr.body)
            return
        for child in _children(expr):
            self.visit(child)

    def _call(self, call: Call, lanes: int) -> bool:
        """Count a call; True when its operands were recorded as accesses already."""
        op = call.op
        if op in _MATH_CALLS:
            self.counts[_A["float_math" if call.dtype.is_float else "int_cmp"]] += lanes
        elif op == "fma":
            for name in ("float_addsub", "float_mul", "float_fma"):
                self.counts[_A[name]] += lanes
        elif op == "if_then_else":
            self.counts[_A["select"]] += lanes
        elif op == "call_extern":
            self.counts[_A["other_call"]] += lanes
        elif op in _INTRIN_CALLS:
            self.intrinsic = True
            self.counts[_A["intrin_call"]] += lanes
            name = call.args[0].value if call.args and isinstance(call.args[0], StringImm) else ""
            if ".fma." in name or "fmadd" in name:
                for key in ("float_addsub", "float_mul", "float_fma"):
                    self.counts[_A[key]] += lanes
        else:
            # A target operation (WMMA fragments, copies): its buffer operands are pointers to
            # whole regions, read and written by the operation.
            self.intrinsic = True
            self.counts[_A["other_call"]] += lanes
            for arg in call.args:
                if type(arg) is BufferLoad:
                    self.access(arg.buffer, arg.indices, False, 1, whole_region=True)
                    self.access(arg.buffer, arg.indices, True, 1, whole_region=True)
            return True
        return False


#: Expression class -> the names of its fields that hold expressions (or tuples of them).
_EXPR_FIELDS: dict[type, tuple[str, ...]] = {}


def _children(expr: PrimExpr) -> tuple[PrimExpr, ...]:
    """The operand expressions of any expression node (string arguments left out)."""
    if isinstance(expr, BinaryOp):
        return (expr.a, expr.b)
    cls = type(expr)
    names = _EXPR_FIELDS.get(cls)
    if names is None:
        names = tuple(name for name in cls.child_fields() if name not in ("dtype", "lanes", "buffer"))
        _EXPR_FIELDS[cls] = names
    found: list[PrimExpr] = []
    for name in names:
        value = getattr(expr, name)
        if isinstance(value, tuple):
            found.extend(item for item in value if isinstance(item, PrimExpr) and type(item) is not StringImm)
        elif isinstance(value, PrimExpr) and type(value) is not StringImm:
            found.append(value)
    return tuple(found)


def _extent(expr: PrimExpr) -> int:
    return expr.value if isinstance(expr, IntImm) else SYMBOLIC_EXTENT


class _Walker:
    def __init__(self, ctx: _Context) -> None:
        self.ctx = ctx

    def stmt(self, node: Stmt, init_skip: frozenset[int] = frozenset()) -> None:
        ctx = self.ctx
        cls = type(node)
        if cls is SeqStmt:
            for item in cast(SeqStmt, node).stmts:
                self.stmt(item, init_skip)
        elif cls is For:
            node = cast(For, node)
            hint = "pragma_unroll" in node.annotations
            ctx.loops.append(_Loop(node.loop_var, _extent(node.extent), node.kind, hint))
            step = node.annotations.get("pragma_auto_unroll_max_step")
            if step is not None:
                ctx.auto_unroll.append(_as_int(step))
            self.stmt(node.body, init_skip)
            if step is not None:
                ctx.auto_unroll.pop()
            ctx.loops.pop()
        elif cls is BlockRealize:
            node = cast(BlockRealize, node)
            marks = ctx.marks()
            try:
                self.block(node.block, node.iter_values)
            except Exception:
                # The block's stores keep the rows made before the failure; the program's rows
                # say that some are missing.
                _log_errors.debug("features: block %s left out", node.block.name, exc_info=True)
                ctx.restore(marks)
                ctx.incomplete = True
        elif cls is BufferStore:
            self.store(cast(BufferStore, node), init_skip)
        elif cls is IfThenElse:
            # The condition is evaluated per iteration; both branches are described (one runs).
            node = cast(IfThenElse, node)
            self.stmt(node.then_case, init_skip)
            if node.else_case is not None:
                self.stmt(node.else_case, init_skip)
        elif cls is LetStmt:
            node = cast(LetStmt, node)
            ctx.env[node.var] = node.value
            self.stmt(node.body, init_skip)
        elif cls is Allocate:
            node = cast(Allocate, node)
            ctx.allocated[node.buffer] = _buffer_bytes(node.buffer)
            self.stmt(node.body, init_skip)
        elif cls is Evaluate:
            node = cast(Evaluate, node)
            if type(node.value) is Call:
                self.call(node.value, init_skip)
        elif cls is Block:  # a bare root block
            self.block(cast(Block, node), ())

    def block(self, block: Block, iter_values: tuple[PrimExpr, ...]) -> None:
        ctx = self.ctx
        reduce_vars: set[int] = set()
        spatial_vars: set[int] = set()
        for iter_var, value in zip(block.iter_vars, iter_values):
            ctx.env[iter_var.var] = value
            # The loops the binding reads, through the bindings of the blocks around.
            used = {id(var) for var in free_vars(_Resolve(ctx.env).visit(value))}
            (reduce_vars if iter_var.kind is IterKind.REDUCE else spatial_vars).update(used)
        for buffer in block.alloc_buffers:
            ctx.allocated[buffer] = _buffer_bytes(buffer)
        for match in block.match_buffers:
            source = match.source
            target, starts, extents = source.buffer, tuple(r.min for r in source.region), None
            outer = ctx.views.get(target)
            if outer is not None and len(outer[1]) == len(starts):  # a view of a view
                target, starts = outer[0], tuple(a + b for a, b in zip(outer[1], starts))
            extents = tuple(_extent(r.extent) for r in source.region)
            ctx.views[match.buffer] = (target, starts, extents)
        annotations = block.annotations
        step = annotations.get("pragma_auto_unroll_max_step")
        explicit = annotations.get("meta_schedule.unroll_explicit")
        if step is None and explicit is not None:
            step = explicit
        if step is not None:
            ctx.auto_unroll.append(_as_int(step))
        ctx.unroll_explicit.append(explicit is not None or (bool(ctx.unroll_explicit) and ctx.unroll_explicit[-1]))
        tensorized = any("tensor_intrin" in key or "tensorize" in key for key in annotations)
        ctx.tensorized.append(tensorized or (bool(ctx.tensorized) and ctx.tensorized[-1]))
        if block.init is not None:
            # The init runs once per spatial point: loops feeding only reduce iterators do not count.
            self.stmt(block.init, frozenset(reduce_vars - spatial_vars))
        self.stmt(block.body)
        ctx.tensorized.pop()
        ctx.unroll_explicit.pop()
        if step is not None:
            ctx.auto_unroll.pop()

    def store(self, node: BufferStore, init_skip: frozenset[int]) -> None:
        stats = _ExprStats(self.ctx.views)
        try:
            stats.visit(node.value)
            lanes = node.value.dtype.lanes
            stats.access(node.buffer, node.indices, True, lanes)
            for index in node.indices:
                stats.index(index)
            row = _row(self.ctx, node.buffer, stats, init_skip)
        except Exception:
            _log_errors.debug("features: store into %s degraded", node.buffer.name, exc_info=True)
            row = _degraded_row(self.ctx, node.buffer, init_skip)
        self.ctx.rows.append(row)

    def call(self, call: Call, init_skip: frozenset[int]) -> None:
        """A call statement (a tensor intrinsic writing through pointers) is a row of its own."""
        stats = _ExprStats(self.ctx.views)
        try:
            stats.visit(call)
            if not stats.accesses:
                return
            written = next((a.buffer for a in stats.accesses.values() if a.write), None)
            row = _row(self.ctx, written, stats, init_skip)
        except Exception:
            _log_errors.debug("features: call %s degraded", call.op, exc_info=True)
            row = _degraded_row(self.ctx, None, init_skip)
        self.ctx.rows.append(row)


def _as_int(value: object) -> int:
    if isinstance(value, IntImm):
        return value.value
    if isinstance(value, (bool, int, float)):
        return int(value)
    return 0


def _buffer_bytes(buffer: Buffer) -> int:
    count = 1
    for extent in buffer.shape:
        count *= _extent(extent)
    return count * buffer.dtype.bytes


# ---------------------------------------------------------------- index analysis


#: The pseudo-variable of a vector access's lanes (a Ramp index); ``_LANE`` is its key among the
#: loops (loops are keyed by the id of their variable).
_LANE_VAR = Var("lane", as_dtype("int32"))
_LANE = id(_LANE_VAR)


class _Resolve(IRMutator):
    """An index over loop variables only: block bindings (and let-bound values) substituted,
    each ``Ramp`` written as ``base + stride * lane`` over ``_LANE_VAR``, broadcasts unwrapped,
    so that ``tir.arith`` bounds and evaluates it as a scalar."""

    def __init__(self, env: dict[Var, PrimExpr]) -> None:
        self.env = env

    def visit_Var(self, var: Var) -> PrimExpr:
        bound = self.env.get(var)
        return var if bound is None else self.visit(bound)

    def visit_Ramp(self, ramp: Ramp) -> PrimExpr:
        base, stride = self.visit(ramp.base), self.visit(ramp.stride)
        lane = _LANE_VAR if base.dtype == _LANE_VAR.dtype else Cast(base.dtype, _LANE_VAR)
        return Add(base, Mul(stride, lane))

    def visit_Broadcast(self, broadcast: Broadcast) -> PrimExpr:
        return self.visit(broadcast.value)


def _affine_terms(expr: PrimExpr) -> int | None:
    """The number of variable terms of ``expr`` when it is affine: built of variables and
    constants by sums, differences, casts and products with a side free of variables
    (``i * 8 + j - 3``: 2); None otherwise (``i * j``, ``i // 4``, a select, a load). A product
    by anything but a non-zero literal counts one term more: only the canonical form folds its
    factor (``i * 0`` does not depend on ``i``)."""
    cls = type(expr)
    if cls is Var:
        return 1
    if cls is IntImm:
        return 0
    if cls is Cast:
        return _affine_terms(cast(Cast, expr).value)
    if cls is Add or cls is Sub or cls is Mul:
        expr = cast(BinaryOp, expr)
        a = _affine_terms(expr.a)
        b = None if a is None else _affine_terms(expr.b)
        if a is None or b is None:
            return None
        if cls is Mul and (a or b):
            if a and b:
                return None
            factor = expr.b if a else expr.a
            if type(factor) is not IntImm or factor.value == 0:
                return a + b + 1
        return a + b
    return None


def _resolve_index(index: PrimExpr, env: dict[Var, PrimExpr]) -> tuple[PrimExpr, dict[int, Var]]:
    """``index`` over loop variables only (``_Resolve``) and those variables by id. An affine
    index with a variable in two terms (``vi - vo * 8`` with ``vi = i * 8 + j`` and ``vo = i``)
    comes in ``tir.arith``'s canonical form, one term per variable (``j``): interval bounds
    of it are then exact, and a variable whose terms cancel is not a dependence."""
    scalar = _Resolve(env).visit(index)
    free = free_vars(scalar)
    terms = _affine_terms(scalar)
    if terms is not None and terms > len(free):
        scalar = simplify(scalar)
        free = free_vars(scalar)
    return scalar, {id(var): var for var in free}


def _span(expr: PrimExpr, free: dict[int, Var], extents: dict[int, int], limit: int) -> int:
    """How many values ``expr`` takes (a bound of it, at most ``limit``) with each loop of
    ``extents`` (key -> extent) over ``[0, extent)`` and every other variable at 0."""
    bounds = {var: ConstIntBound(0, extents.get(key, 1) - 1) for key, var in free.items()}
    bound = BoundEvaluator(var_bounds=bounds).bound(expr)
    if not bound.is_bounded:
        return limit
    return min(int(bound.max_value) - int(bound.min_value) + 1, limit)


def _value_at(expr: PrimExpr, free: dict[int, Var], values: dict[int, int]) -> int | None:
    """``expr`` with the loops of ``values`` at those values and every other variable at 0;
    None when it depends on more than the loops (a loaded value)."""
    # evaluate_int takes plain ints as well as arrays (its annotation names arrays only).
    point: dict[int, Any] = {key: values.get(key, 0) for key in free}
    value = evaluate_int(expr, point)
    if value is not None:
        return int(value)
    if contains(expr, BufferLoad):
        return None
    # Beyond evaluate_int's operations (a select, if_then_else, a let): the simplifier folds
    # the expression at the point.
    analyzer = Analyzer()
    for key, var in free.items():
        analyzer.bind(var, point[key])
    folded = analyzer.simplify(expr)
    return folded.value if type(folded) is IntImm else None


def _strides(buffer: Buffer) -> list[int]:
    if buffer.strides:
        return [_extent(stride) for stride in buffer.strides]
    strides = [1] * len(buffer.shape)
    for dim in range(len(buffer.shape) - 2, -1, -1):
        strides[dim] = strides[dim + 1] * _extent(buffer.shape[dim + 1])
    return strides


@dataclass
class _AccessInfo:
    access: _Access
    bytes: float
    lines: list[float]  # unique cache lines of the footprint under each level (0 = the whole nest)
    elements: list[float]  # unique elements under each level
    stride: int
    moving_stride: int
    reuse_count: int
    reuse_distance_bytes: float


def _analyse_access(
    access: _Access, loops: list[tuple[int, int]], trips: float, env: dict[Var, PrimExpr]
) -> _AccessInfo:
    """Footprints per loop level, innermost stride and reuse of one buffer access.

    ``loops`` are (key, extent) outermost first, the lanes pseudo-loop last when the access is
    a vector one; level ``i`` is the footprint of loops ``i..`` with the outer ones fixed."""
    buffer = access.buffer
    element_bytes = buffer.dtype.bytes
    n = len(loops)
    shape = [_extent(s) for s in buffer.shape]
    depends: set[int] = set()
    spans_per_dim: list[list[int]] = []
    # Each index over loop variables only, and the variables it reads (by id).
    resolved: list[tuple[PrimExpr, dict[int, Var]]] = []
    for dim, index in enumerate(access.indices):
        scalar, free = _resolve_index(index, env)
        resolved.append((scalar, free))
        depends.update(free)
        limit = shape[dim] if dim < len(shape) else SYMBOLIC_EXTENT
        spans = [1] * (n + 1)
        extents: dict[int, int] = {}
        previous = 1
        for level in range(n - 1, -1, -1):
            key, extent = loops[level]
            if key in free and extent > 1:
                extents[key] = extent
                previous = _span(scalar, free, extents, limit)
            spans[level] = previous
        if dim < len(shape):
            spans = [min(span, limit) for span in spans]
        spans_per_dim.append(spans)
    elements = []
    lines = []
    for level in range(n + 1):
        count = 1.0
        outer = 1.0
        for dim, spans in enumerate(spans_per_dim):
            count *= spans[level]
            if dim < len(spans_per_dim) - 1:
                outer *= spans[level]
        last = spans_per_dim[-1][level] if spans_per_dim else 1
        elements.append(count)
        lines.append(outer * math.ceil(last * element_bytes / CACHE_LINE))

    # Strides, in elements of the flat buffer: along the innermost loop that iterates (0 when
    # the access does not move with it: a broadcast), and along the innermost loop it moves with.
    flat = _strides(buffer)

    origins: dict[int, int | None] = {}  # indices at the origin

    def stride_along(key: int) -> int:
        total = 0
        for dim, (scalar, free) in enumerate(resolved):
            delta = 0
            if key in free:
                if dim not in origins:
                    origins[dim] = _value_at(scalar, free, {})
                after, before = _value_at(scalar, free, {key: 1}), origins[dim]
                # A data-dependent index (a gather): assume it moves to the next element.
                delta = 1 if after is None or before is None else after - before
            total += delta * (flat[dim] if dim < len(flat) else 1)
        return total

    stride = 0
    inner = next((level for level in range(n - 1, -1, -1) if loops[level][1] > 1), None)
    if inner is not None and loops[inner][0] in depends:
        stride = stride_along(loops[inner][0])
    moving = next((level for level in range(n - 1, -1, -1) if loops[level][1] > 1 and loops[level][0] in depends), None)
    moving_stride = stride if moving == inner else (stride_along(loops[moving][0]) if moving is not None else 0)

    # Reuse: the innermost iterating loop the access does not depend on.
    reuse_count = 0
    reuse_distance = 0.0
    for level in range(n - 1, -1, -1):
        key, extent = loops[level]
        if extent > 1 and key not in depends:
            reuse_count = extent
            reuse_distance = elements[level + 1] * element_bytes
            break
    return _AccessInfo(
        access=access,
        bytes=trips * access.count * element_bytes * access.lanes,
        lines=lines,
        elements=elements,
        stride=stride,
        moving_stride=moving_stride,
        reuse_count=reuse_count,
        reuse_distance_bytes=reuse_distance,
    )


def _degraded_access(access: _Access, levels: int, trips: float) -> _AccessInfo:
    """An access whose analysis failed: the whole buffer at every level, no stride or reuse."""
    shape = [_extent(s) for s in access.buffer.shape]
    element_bytes = access.buffer.dtype.bytes
    elements = float(math.prod(shape))
    rows = float(math.prod(shape[:-1])) if shape else 1.0
    lines = rows * math.ceil((shape[-1] if shape else 1) * element_bytes / CACHE_LINE)
    return _AccessInfo(
        access=access,
        bytes=trips * access.count * element_bytes * access.lanes,
        lines=[lines] * levels,
        elements=[elements] * levels,
        stride=0,
        moving_stride=0,
        reuse_count=0,
        reuse_distance_bytes=0.0,
    )


# ---------------------------------------------------------------- one row


def _row(ctx: _Context, stored: Buffer | None, stats: _ExprStats, init_skip: frozenset[int]) -> np.ndarray:
    row = np.zeros(NUM_FEATURES, dtype=np.float64)
    loops = [loop for loop in ctx.loops if id(loop.var) not in init_skip]
    trips = 1.0
    for loop in loops:
        trips *= loop.extent
    element_bytes = stored.dtype.bytes if stored is not None else 4
    target_lanes = max(1, ctx.target_lanes_bytes // max(1, element_bytes))

    # Arithmetic, per run of the whole nest.
    for position, count in enumerate(stats.counts):
        row[_ARITH_AT + position] = _log(count * trips)

    # The loop nest.
    vec = [loop for loop in loops if loop.kind is ForKind.VECTORIZED]
    par = [loop for loop in loops if loop.kind is ForKind.PARALLEL]
    unr = [loop for loop in loops if loop.kind is ForKind.UNROLLED]
    thr = [loop for loop in loops if loop.kind is ForKind.THREAD_BINDING]
    serial = [loop for loop in loops if loop.kind is ForKind.SERIAL and loop.extent > 1]
    vec_extent = math.prod(loop.extent for loop in vec)
    par_extent = math.prod(loop.extent for loop in par)
    row[_L["num_loops"]] = len(loops)
    row[_L["log_trip_count"]] = _log(trips)
    row[_L["log_innermost_extent"]] = _log(loops[-1].extent) if loops else 0.0
    row[_L["log_innermost_serial_extent"]] = _log(serial[-1].extent) if serial else 0.0
    row[_L["vec_num"]] = len(vec)
    row[_L["log_vec_extent"]] = _log(vec_extent) if vec else 0.0
    if vec or stats.max_lanes > 1:
        lanes_in_use = vec_extent * stats.max_lanes
        row[_L["vec_ratio_to_lanes"]] = min(lanes_in_use / target_lanes, 16.0)
        row[_L["vec_multiple_of_lanes"]] = float(lanes_in_use % target_lanes == 0)
    row[_L["vec_is_innermost"]] = float(bool(loops) and loops[-1].kind is ForKind.VECTORIZED)
    row[_L["log_expr_lanes"]] = _log(stats.max_lanes - 1)
    row[_L["parallel_num"]] = len(par)
    row[_L["log_parallel_extent"]] = _log(par_extent) if par else 0.0
    if par:
        row[_L["parallel_ratio_to_cores"]] = min(par_extent / ctx.cores, 64.0)
        row[_L["parallel_multiple_of_cores"]] = float(par_extent % ctx.cores == 0)
        row[_L["parallel_depth"]] = next(d for d, loop in enumerate(loops) if loop.kind is ForKind.PARALLEL)
    row[_L["unroll_num"]] = len(unr) + sum(loop.unroll_hint for loop in loops)
    row[_L["log_unroll_extent"]] = _log(math.prod(loop.extent for loop in unr)) if unr else 0.0
    row[_L["log_auto_unroll_max_step"]] = _log(ctx.auto_unroll[-1]) if ctx.auto_unroll else 0.0
    row[_L["unroll_explicit"]] = float(bool(ctx.unroll_explicit) and ctx.unroll_explicit[-1])
    row[_L["thread_num"]] = len(thr)
    row[_L["log_thread_extent"]] = _log(math.prod(loop.extent for loop in thr)) if thr else 0.0

    # Buffer accesses.
    infos = []
    incomplete = False
    for access in stats.accesses.values():
        keyed: list[tuple[int, int]] = [(id(loop.var), loop.extent) for loop in loops]
        if access.lanes > 1 and any(contains(index, Ramp) for index in access.indices):
            keyed.append((_LANE, access.lanes))
        keyed.extend((id(var), extent) for var, extent in access.region_loops)
        try:
            infos.append(_analyse_access(access, keyed, trips, ctx.env))
        except Exception:
            _log_errors.debug("features: access of %s degraded", access.buffer.name, exc_info=True)
            infos.append(_degraded_access(access, len(keyed) + 1, trips))
            incomplete = True
    infos.sort(key=lambda info: (-info.bytes, not info.access.write, info.access.buffer.name))
    levels = len(loops) + 1
    traffic_levels = []
    for capacity in CACHE_SIZES:
        # The outermost level whose footprint (all accesses together) fits in the cache. One run
        # of the loop just outside it fetches each line its iterations touch once (consecutive
        # iterations' overlap hits in an LRU cache); the loops further out repeat that run.
        fits = levels - 1
        for level in range(levels):
            if sum(info.lines[min(level, len(info.lines) - 1)] for info in infos) * CACHE_LINE <= capacity:
                fits = level
                break
        run_level = max(fits - 1, 0)
        traffic_levels.append((run_level, math.prod(loop.extent for loop in loops[:run_level])))
    totals = [0.0, 0.0, 0.0]
    for slot, info in enumerate(infos):
        traffic = [
            info.lines[min(level, len(info.lines) - 1)] * CACHE_LINE * repeats for level, repeats in traffic_levels
        ]
        unique = info.elements[0] * info.access.buffer.dtype.bytes
        totals[0] += unique
        totals[1] += traffic[0]
        totals[2] += traffic[1]
        if slot >= MAX_ACCESSES:
            continue
        at = _ACCESS_AT + slot * len(_ACCESS)
        row[at + _AC["is_read"]] = float(info.access.read)
        row[at + _AC["is_write"]] = float(info.access.write)
        row[at + _AC["log_bytes"]] = _log(info.bytes)
        row[at + _AC["log_unique_bytes"]] = _log(unique)
        row[at + _AC["log_unique_lines"]] = _log(info.lines[0])
        row[at + _AC["log_reuse_ratio"]] = _log(info.bytes / max(unique, 1.0))
        stride = abs(info.stride)
        row[at + _AC["stride_zero"]] = float(stride == 0)
        row[at + _AC["stride_one"]] = float(stride == 1)
        row[at + _AC["stride_other"]] = float(stride > 1)
        row[at + _AC["log_stride"]] = _log(stride)
        row[at + _AC["log_moving_stride"]] = _log(abs(info.moving_stride))
        row[at + _AC["log_innermost_footprint"]] = _log(
            info.elements[max(0, len(info.elements) - 2)] * info.access.buffer.dtype.bytes
        )
        row[at + _AC["log_reuse_count"]] = _log(info.reuse_count)
        row[at + _AC["log_reuse_distance_bytes"]] = _log(info.reuse_distance_bytes)
        row[at + _AC["log_traffic_l1"]] = _log(traffic[0])
        row[at + _AC["log_traffic_l2"]] = _log(traffic[1])
        row[at + _AC["is_allocated"]] = float(info.access.buffer in ctx.allocated)

    ops: float = sum(stats.counts[_A[name]] for name in ("float_addsub", "float_mul", "float_divmod", "float_math"))
    ops += sum(stats.counts[_A[name]] for name in ("int_addsub", "int_mul", "int_divmod"))
    ops = max(ops, 1) * trips
    row[_R["log_intensity_unique"]] = _log(ops / max(totals[0], 1.0))
    row[_R["log_intensity_l1"]] = _log(ops / max(totals[1], 1.0))
    row[_R["log_intensity_l2"]] = _log(ops / max(totals[2], 1.0))
    row[_R["log_total_unique_bytes"]] = _log(totals[0])
    row[_R["log_total_traffic_l1"]] = _log(totals[1])
    row[_R["log_total_traffic_l2"]] = _log(totals[2])
    row[_R["num_accesses"]] = len(infos)

    # Allocations.
    if stored is not None and stored in ctx.allocated:
        row[_R["store_is_allocated"]] = 1.0
        row[_R["log_store_alloc_bytes"]] = _log(ctx.allocated[stored])
    scope = stored.scope if stored is not None else ""
    row[_R["store_scope_global"]] = float(scope == "global")
    row[_R["store_scope_local"]] = float(scope == "local")
    row[_R["store_scope_shared"]] = float(scope.startswith("shared"))
    row[_R["uses_intrinsic"]] = float(stats.intrinsic)
    row[_R["is_tensorized_block"]] = float(bool(ctx.tensorized) and ctx.tensorized[-1])
    row[_R["is_init"]] = float(bool(init_skip))
    row[_R["features_incomplete"]] = float(incomplete)
    return row


def _degraded_row(ctx: _Context, stored: Buffer | None, init_skip: frozenset[int]) -> np.ndarray:
    """The row of a statement whose description failed: its loop nest alone when that much can
    be described, zeros otherwise; flagged incomplete."""
    try:
        row = _row(ctx, stored, _ExprStats(ctx.views), init_skip)
    except Exception:
        row = np.zeros(NUM_FEATURES, dtype=np.float64)
    row[_R["features_incomplete"]] = 1.0
    return row


# ---------------------------------------------------------------- entry point


def extract_features(func: PrimFunc, target: str | Target = "llvm") -> np.ndarray:
    """Features of a scheduled program: one row per buffer store, ``NUM_FEATURES`` columns.

    ``target`` (a string or ``tir.Target``) gives the vector width and the core count the
    vectorization and parallelism columns are measured against. The result is a float32 array
    of shape ``(number of stores, NUM_FEATURES)``; a program without stores gives one zero row
    (so that every program has a prediction). The packing of layout-free parameters is left
    out: it runs once, not on every call (``tir.transform.split_prepack``). It never raises
    for a program it cannot fully describe: ``misc.features_incomplete`` flags the rows whose
    features it could not all compute (see the module docstring).
    """
    from tir.transform.split_prepack import LAYOUT_FREE_ATTR, split_prepack

    parsed = Target.parse(target)
    vector_bytes = parsed.vector_bytes if parsed.is_cpu else 16
    cores = parsed.num_cores if parsed.is_cpu else 1
    ctx = _Context(target_lanes_bytes=vector_bytes, cores=cores)
    try:
        if func.attrs.get(LAYOUT_FREE_ATTR):
            func = split_prepack(func).main
        # Allocations anywhere in the program count for the whole program (they all live at
        # once in the common case of a root block allocating the intermediates).
        _Walker(ctx).stmt(func.body)
    except Exception:
        _log_errors.debug("features: walk of %s stopped", func.attrs.get("global_symbol", "a program"), exc_info=True)
        ctx.incomplete = True
    rows = ctx.rows or [np.zeros(NUM_FEATURES, dtype=np.float64)]
    table = np.stack(rows)
    if ctx.incomplete:
        table[:, _R["features_incomplete"]] = 1.0
    table[:, _R["log_allocated_bytes"]] = _log(sum(ctx.allocated.values()))
    table[:, _R["num_allocations"]] = len(ctx.allocated)
    table[:, _R["log_num_rows"]] = _log(len(rows))
    table[:, _R["target_vector_bytes"]] = vector_bytes
    table[:, _R["log_target_cores"]] = _log(cores)
    return table.astype(np.float32)


def describe(row: Sequence[float]) -> dict[str, float]:
    """The non-zero columns of one row by name (for reading features while debugging)."""
    return {name: float(value) for name, value in zip(FEATURE_NAMES, row) if value}
