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
  allocated), tensor intrinsic use, whether the store is a reduction's init.

Footprints come from the index expressions with block bindings substituted: affine indices
(the common case) give exact spans from their coefficients, other indices (``v // 16``,
``v % 16`` of packed layouts) from interval arithmetic over the loops inside each level. The
walk is direct (no lowering passes): the tiled and packed 1024^3 matmul of
examples/matmul_schedule.py takes about 0.33 ms (median of 200 runs).

A call statement (a tensor intrinsic writing through pointers, e.g. WMMA) is a row too, its
buffer operands covering their whole match_buffer regions; accesses through a match_buffer
view are described as accesses of the viewed buffer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

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
)

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
        """Count the integer arithmetic of an index expression (addresses cost instructions too)."""
        stack = [expr]
        ops = 0
        while stack:
            node = stack.pop()
            if isinstance(node, (Add, Sub, Mul, FloorDiv, FloorMod, Div, Min, Max)):
                ops += 1
                stack.append(node.a)
                stack.append(node.b)
            elif isinstance(node, Ramp):
                stack.append(node.base)
            elif isinstance(node, BufferLoad):
                self.visit(node)
        self.counts[_A["index_op"]] += ops

    def visit(self, expr: PrimExpr) -> None:
        # Explicit dispatch on the class: this runs for every candidate the tuner scores.
        cls = type(expr)
        if cls is BufferLoad:
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
            operand_lanes = expr.a.dtype.lanes
            self.counts[_A["float_cmp" if expr.a.dtype.is_float else "int_cmp"]] += operand_lanes
        elif cls in (And, Or, Not):
            self.counts[_A["bool_op"]] += lanes
        elif cls is Select:
            self.counts[_A["select"]] += lanes
        elif cls is Cast:
            self.counts[_A["cast"]] += lanes
        elif cls is Call:
            if self._call(expr, lanes):
                return
        elif cls is Ramp:
            self.visit(expr.base)
            return
        elif cls is Broadcast:
            self.visit(expr.value)
            return
        elif cls is Let:
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


def _children(expr: PrimExpr) -> tuple[PrimExpr, ...]:
    cls = type(expr)
    if cls is Select:
        return (expr.condition, expr.true_value, expr.false_value)
    if cls is Cast or cls is Not:
        return (expr.value,) if cls is Cast else (expr.a,)
    if cls is Call:
        return tuple(arg for arg in expr.args if not isinstance(arg, StringImm))
    return (expr.a, expr.b)


def _extent(expr: PrimExpr) -> int:
    return expr.value if isinstance(expr, IntImm) else SYMBOLIC_EXTENT


class _Walker:
    def __init__(self, ctx: _Context) -> None:
        self.ctx = ctx

    def stmt(self, node: Stmt, init_skip: frozenset[int] = frozenset()) -> None:
        ctx = self.ctx
        cls = type(node)
        if cls is SeqStmt:
            for item in node.stmts:
                self.stmt(item, init_skip)
        elif cls is For:
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
            self.block(node.block, node.iter_values)
        elif cls is BufferStore:
            self.store(node, init_skip)
        elif cls is IfThenElse:
            # The condition is evaluated per iteration; both branches are described (one runs).
            self.stmt(node.then_case, init_skip)
            if node.else_case is not None:
                self.stmt(node.else_case, init_skip)
        elif cls is LetStmt:
            ctx.env[node.var] = node.value
            self.stmt(node.body, init_skip)
        elif cls is Allocate:
            ctx.allocated[node.buffer] = _buffer_bytes(node.buffer)
            self.stmt(node.body, init_skip)
        elif cls is Evaluate:
            if type(node.value) is Call:
                self.call(node.value, init_skip)
        elif cls is Block:  # a bare root block
            self.block(node, ())

    def block(self, block: Block, iter_values: tuple[PrimExpr, ...]) -> None:
        ctx = self.ctx
        reduce_vars: set[int] = set()
        spatial_vars: set[int] = set()
        for iter_var, value in zip(block.iter_vars, iter_values):
            ctx.env[iter_var.var] = value
            used = _vars_of(value, ctx.env)
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
        stats.visit(node.value)
        lanes = node.value.dtype.lanes
        stats.access(node.buffer, node.indices, True, lanes)
        for index in node.indices:
            stats.index(index)
        self.ctx.rows.append(_row(self.ctx, node.buffer, stats, init_skip))

    def call(self, call: Call, init_skip: frozenset[int]) -> None:
        """A call statement (a tensor intrinsic writing through pointers) is a row of its own."""
        stats = _ExprStats(self.ctx.views)
        stats.visit(call)
        if stats.accesses:
            written = next((a.buffer for a in stats.accesses.values() if a.write), None)
            self.ctx.rows.append(_row(self.ctx, written, stats, init_skip))


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


def _vars_of(expr: PrimExpr, env: dict[Var, PrimExpr]) -> set[int]:
    """ids of the loop variables an expression depends on (block bindings followed)."""
    found: set[int] = set()
    stack = [expr]
    while stack:
        node = stack.pop()
        cls = type(node)
        if cls is Var:
            bound = env.get(node)
            if bound is None:
                found.add(id(node))
            else:
                stack.append(bound)
        elif cls in (IntImm, FloatImm, StringImm):
            continue
        elif cls is Ramp:
            stack.append(node.base)
            stack.append(node.stride)
        elif cls is Broadcast:
            stack.append(node.value)
        elif cls is BufferLoad:
            stack.extend(node.indices)
        elif cls is Let:
            stack.append(node.value)
            stack.append(node.body)
        else:
            stack.extend(_children(node))
    return found


# ---------------------------------------------------------------- index analysis


_LANE = object()  # the pseudo-loop of a vector access's lanes (a Ramp index)


def _linear(expr: PrimExpr, env: dict[Var, PrimExpr]) -> tuple[int, dict[object, int]] | None:
    """``expr`` as ``constant + sum(coef * var)`` over loop variables (keys: id of the var; the
    lanes of a Ramp under the key ``_LANE``), or None when it is not affine."""
    cls = type(expr)
    if cls is IntImm:
        return expr.value, {}
    if cls is Var:
        bound = env.get(expr)
        if bound is not None:
            return _linear(bound, env)
        return 0, {id(expr): 1}
    if cls is Add or cls is Sub:
        left = _linear(expr.a, env)
        right = _linear(expr.b, env)
        if left is None or right is None:
            return None
        sign = 1 if cls is Add else -1
        coefs = dict(left[1])
        for key, coef in right[1].items():
            coefs[key] = coefs.get(key, 0) + sign * coef
        return left[0] + sign * right[0], coefs
    if cls is Mul:
        left = _linear(expr.a, env)
        right = _linear(expr.b, env)
        if left is None or right is None:
            return None
        if not right[1]:
            factor, (base, coefs) = right[0], left
        elif not left[1]:
            factor, (base, coefs) = left[0], right
        else:
            return None
        return base * factor, {key: coef * factor for key, coef in coefs.items()}
    if cls is Ramp:
        base = _linear(expr.base, env)
        stride = _linear(expr.stride, env)
        if base is None or stride is None or stride[1]:
            return None
        coefs = dict(base[1])
        coefs[_LANE] = stride[0]
        return base[0], coefs
    if cls is Cast:
        return _linear(expr.value, env)
    return None


def _interval(expr: PrimExpr, env: dict[Var, PrimExpr], ranges: dict[object, int]) -> tuple[int, int]:
    """Integer interval of ``expr`` with each loop variable in ``ranges`` (id -> extent) over
    ``[0, extent)`` and every other variable at 0."""
    cls = type(expr)
    if cls is IntImm:
        return expr.value, expr.value
    if cls is Var:
        bound = env.get(expr)
        if bound is not None:
            return _interval(bound, env, ranges)
        extent = ranges.get(id(expr), 1)
        return 0, extent - 1
    if cls is Ramp:
        lo, hi = _interval(expr.base, env, ranges)
        slo, shi = _interval(expr.stride, env, ranges)
        lanes = ranges.get(_LANE, 1) - 1
        return lo + min(0, slo * lanes), hi + max(0, shi * lanes)
    if cls is Broadcast or cls is Cast:
        return _interval(expr.value, env, ranges)
    if cls in (IntImm, FloatImm, StringImm, BufferLoad, Call):
        return 0, 0
    a_lo, a_hi = _interval(expr.a, env, ranges)
    b_lo, b_hi = _interval(expr.b, env, ranges)
    if cls is Add:
        return a_lo + b_lo, a_hi + b_hi
    if cls is Sub:
        return a_lo - b_hi, a_hi - b_lo
    if cls is Mul:
        corners = (a_lo * b_lo, a_lo * b_hi, a_hi * b_lo, a_hi * b_hi)
        return min(corners), max(corners)
    if cls is FloorDiv or cls is Div:
        if b_lo == b_hi and b_lo > 0:
            return a_lo // b_lo, a_hi // b_lo
        return min(a_lo, 0), max(a_hi, 0)
    if cls is FloorMod:
        if b_lo == b_hi and b_lo > 0:
            if a_hi - a_lo + 1 >= b_lo or a_lo // b_lo != a_hi // b_lo:
                return 0, b_lo - 1
            return a_lo % b_lo, a_hi % b_lo
        return 0, max(b_hi - 1, 0)
    if cls is Min:
        return min(a_lo, b_lo), min(a_hi, b_hi)
    if cls is Max:
        return max(a_lo, b_lo), max(a_hi, b_hi)
    return 0, 1


def _evaluate(expr: PrimExpr, env: dict[Var, PrimExpr], values: dict[object, int]) -> int:
    cls = type(expr)
    if cls is IntImm:
        return expr.value
    if cls is Var:
        bound = env.get(expr)
        if bound is not None:
            return _evaluate(bound, env, values)
        return values.get(id(expr), 0)
    if cls is Ramp:
        return _evaluate(expr.base, env, values) + _evaluate(expr.stride, env, values) * values.get(_LANE, 0)
    if cls is Broadcast or cls is Cast:
        return _evaluate(expr.value, env, values)
    if cls in (FloatImm, StringImm, BufferLoad, Call):
        return 0
    a = _evaluate(expr.a, env, values)
    b = _evaluate(expr.b, env, values)
    if cls is Add:
        return a + b
    if cls is Sub:
        return a - b
    if cls is Mul:
        return a * b
    if cls is FloorDiv or cls is Div:
        return a // b if b else 0
    if cls is FloorMod:
        return a % b if b else 0
    if cls is Min:
        return min(a, b)
    if cls is Max:
        return max(a, b)
    return 0


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
    access: _Access, loops: list[tuple[object, int]], trips: float, env: dict[Var, PrimExpr]
) -> _AccessInfo:
    """Footprints per loop level, innermost stride and reuse of one buffer access.

    ``loops`` are (key, extent) outermost first, the lanes pseudo-loop last when the access is
    a vector one; level ``i`` is the footprint of loops ``i..`` with the outer ones fixed."""
    buffer = access.buffer
    element_bytes = buffer.dtype.bytes
    n = len(loops)
    shape = [_extent(s) for s in buffer.shape]
    depends: set[object] = set()
    spans_per_dim: list[list[int]] = []
    linears = []
    for dim, index in enumerate(access.indices):
        form = _linear(index, env)
        linears.append(form)
        spans = [1] * (n + 1)
        if form is not None:
            coefs = form[1]
            depends.update(key for key, coef in coefs.items() if coef)
            total = 0
            for level in range(n - 1, -1, -1):
                key, extent = loops[level]
                coef = coefs.get(key, 0)
                if coef:
                    total += abs(coef) * (extent - 1)
                spans[level] = total + 1
        else:
            used = _vars_of(index, env)
            if any(type(node) is Ramp for node in _ramps(index)):
                used.add(_LANE)  # type: ignore[arg-type]
            depends.update(used)
            ranges: dict[object, int] = {}
            previous = 1
            for level in range(n - 1, -1, -1):
                key, extent = loops[level]
                if key in used and extent > 1:
                    ranges[key] = extent
                    lo, hi = _interval(index, env, ranges)
                    previous = hi - lo + 1
                spans[level] = previous
        if dim < len(shape):
            limit = shape[dim]
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

    def stride_along(key: object) -> int:
        total = 0
        for dim, index in enumerate(access.indices):
            form = linears[dim]
            if form is not None:
                delta = form[1].get(key, 0)
            else:
                delta = _evaluate(index, env, {key: 1}) - _evaluate(index, env, {})
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


def _ramps(expr: PrimExpr) -> list[PrimExpr]:
    found = []
    stack = [expr]
    while stack:
        node = stack.pop()
        if type(node) is Ramp:
            found.append(node)
        elif isinstance(node, (Add, Sub, Mul, FloorDiv, FloorMod, Div, Min, Max)):
            stack.append(node.a)
            stack.append(node.b)
    return found


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
    for access in stats.accesses.values():
        keyed: list[tuple[object, int]] = [(id(loop.var), loop.extent) for loop in loops]
        if access.lanes > 1 and any(_ramps(index) for index in access.indices):
            keyed.append((_LANE, access.lanes))
        keyed.extend((id(var), extent) for var, extent in access.region_loops)
        infos.append(_analyse_access(access, keyed, trips, ctx.env))
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

    ops = sum(stats.counts[_A[name]] for name in ("float_addsub", "float_mul", "float_divmod", "float_math"))
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
    return row


# ---------------------------------------------------------------- entry point


def extract_features(func: PrimFunc, target: object = "llvm") -> np.ndarray:
    """Features of a scheduled program: one row per buffer store, ``NUM_FEATURES`` columns.

    ``target`` (a string or ``tir.Target``) gives the vector width and the core count the
    vectorization and parallelism columns are measured against. The result is a float32 array
    of shape ``(number of stores, NUM_FEATURES)``; a program without stores gives one zero row
    (so that every program has a prediction). The packing of layout-free parameters is left
    out: it runs once, not on every call (``tir.transform.split_prepack``).
    """
    from tir.target import Target
    from tir.transform.split_prepack import LAYOUT_FREE_ATTR, split_prepack

    if func.attrs.get(LAYOUT_FREE_ATTR):
        func = split_prepack(func).main

    parsed = Target.parse(target) if isinstance(target, (str, Target)) or target is None else Target.parse(str(target))
    vector_bytes = parsed.vector_bytes if parsed.is_cpu else 16
    cores = parsed.num_cores if parsed.is_cpu else 1
    ctx = _Context(target_lanes_bytes=vector_bytes, cores=cores)
    walker = _Walker(ctx)
    # Allocations anywhere in the program count for the whole program (they all live at once
    # in the common case of a root block allocating the intermediates).
    walker.stmt(func.body)
    rows = ctx.rows or [np.zeros(NUM_FEATURES, dtype=np.float64)]
    table = np.stack(rows)
    table[:, _R["log_allocated_bytes"]] = _log(sum(ctx.allocated.values()))
    table[:, _R["num_allocations"]] = len(ctx.allocated)
    table[:, _R["log_num_rows"]] = _log(len(rows))
    table[:, _R["target_vector_bytes"]] = vector_bytes
    table[:, _R["log_target_cores"]] = _log(cores)
    return table.astype(np.float32)


def describe(row: Sequence[float]) -> dict[str, float]:
    """The non-zero columns of one row by name (for reading features while debugging)."""
    return {name: float(value) for name, value in zip(FEATURE_NAMES, row) if value}
