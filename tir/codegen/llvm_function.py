"""Code for the body of one PrimFunc: statements, expressions, buffer accesses, calls.

``FunctionCodegen`` emits ``i32 @"NAME.body"(...)`` of ``tir.codegen.llvm.ModuleCodegen``:
loops as phi-based natural loops, stack allocations as allocas in the entry block (never inside
a loop), heap allocations as ``aligned_alloc`` / ``free``, contiguous vector accesses as vector
loads and stores (aligned as far as provable), other vector accesses lane by lane.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import llvmlite.ir as ir

from tir.arith import const_int_bound, simplify
from tir.codegen import llvm_parallel
from tir.codegen.features import CodegenError
from tir.codegen.llvm_math import FLOAT_MATH_OPS, emit_float_math, emit_int_abs, emit_isnan, vector_reduce_or
from tir.codegen.llvm_numbering import NumberingBuilder
from tir.codegen.llvm_types import (
    I8,
    I32,
    I64,
    PTR,
    bf16_bits,
    bf16_from_bits,
    bf16_round,
    call_intrinsic,
    canonical_intrinsic_name,
    const,
    declare,
    emit_cast,
    lanes_of,
    like,
    round_float,
    storage_bytes,
    storage_type,
    value_type,
)
from tir.codegen.llvm_vectorizer_guard import vectorize_off_by_loop
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
    BlockRealize,
    Broadcast,
    Buffer,
    BufferLoad,
    BufferStore,
    Call,
    Cast,
    CmpOp,
    DataType,
    Div,
    Evaluate,
    FloatImm,
    FloorDiv,
    FloorMod,
    For,
    ForKind,
    IfThenElse,
    IntImm,
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
    Range,
    Select,
    SeqStmt,
    Stmt,
    StringImm,
    Sub,
    Var,
)
from tir.ir.functor import contains
from tir.transform.flatten_buffers import index_dtype
from tir.transform.insert_bounds_checks import BOUNDS_ERROR_OP

if TYPE_CHECKING:
    from tir.codegen.llvm import ModuleCodegen

__all__ = ["ALLOC_ALIGN", "BufferBinding", "FunctionCodegen", "from_storage", "to_storage"]

#: Byte alignment of stack and heap allocations (a cache line; covers AVX-512 vectors).
ALLOC_ALIGN = 64

#: Root-block allocations up to this many bytes live on the stack, bigger ones on the heap.
ROOT_STACK_LIMIT = 64 * 1024

_BIG = 1 << 30  # "a multiple of anything" for the alignment analysis

#: Nodes an index's ``nsw`` arithmetic passes through (anything else starts plain wrapping code).
_AFFINE_NODES = (Add, Sub, Mul, Ramp, Broadcast, Var, IntImm)
#: Nodes a 32-bit index is computed through in 64 bits (anything else is computed in 32 bits
#: and sign-extended).
_WIDE_NODES = (Add, Sub, Mul, FloorDiv, FloorMod, Min, Max, Ramp, Broadcast, Var, IntImm)


def _is_int32(dtype: DataType) -> bool:
    return dtype.is_int and dtype.bits == 32


_INT_CMP = {EQ: "==", NE: "!=", LT: "<", LE: "<=", GT: ">", GE: ">="}
_FLOAT_CMP = {EQ: "oeq", LT: "olt", LE: "ole", GT: "ogt", GE: "oge"}


@dataclass
class BufferBinding:
    """Where a buffer's element 0 lives, and the byte alignment known for that address."""

    ptr: ir.Value
    align: int


# ---------------------------------------------------------------- storage conversions


def from_storage(builder: ir.IRBuilder, value: ir.Value, dtype: DataType) -> ir.Value:
    """A loaded storage value (bool: i8, bfloat16: i16 bits) as a register value."""
    if dtype.kind == "bool":
        return builder.icmp_unsigned("!=", value, const(value.type, 0))
    if dtype.kind == "bfloat":
        return bf16_from_bits(builder, value)
    return value


def to_storage(builder: ir.IRBuilder, value: ir.Value, dtype: DataType) -> ir.Value:
    """A register value in its storage form."""
    if dtype.kind == "bool":
        return builder.zext(value, like(value.type, I8))
    if dtype.kind == "bfloat":
        return bf16_bits(builder, value)
    return value


def _lane_index(index: PrimExpr, lane: int) -> PrimExpr | None:
    """Lane ``lane`` of a vector index as a scalar expression, or None when the index is not
    built from Ramp, Broadcast, scalars and integer arithmetic."""
    if index.dtype.lanes == 1:
        return index
    if isinstance(index, Ramp):
        return Add(index.base, Mul(index.stride, IntImm(lane, index.stride.dtype)))
    if isinstance(index, Broadcast):
        return index.value
    if isinstance(index, (Add, Sub, Mul, FloorDiv, FloorMod)):
        a, b = _lane_index(index.a, lane), _lane_index(index.b, lane)
        return None if a is None or b is None else type(index)(a, b)
    return None


def _lowest_bit(value: int) -> int:
    """The largest power of two dividing ``value`` (an alignment LLVM accepts; 12 -> 4)."""
    return value & -value if value else _BIG


class FunctionCodegen:
    """Emits the body function of one PrimFunc."""

    def __init__(self, mcg: ModuleCodegen, func: PrimFunc, fn: ir.Function) -> None:
        self.mcg = mcg
        self.func = func
        self.fn = fn
        self.entry_block = fn.append_basic_block("entry")
        self.body_block = fn.append_basic_block("body")
        # Allocas go to the entry block (never inside a loop); code starts in "body".
        self.alloca_builder = ir.IRBuilder(self.entry_block)
        # Index arithmetic repeated across unrolled statements is emitted once per dominating
        # region (tir.codegen.llvm_numbering); the constructs below declare their blocks.
        self.builder = NumberingBuilder(self.body_block)
        self.vars: dict[Var, ir.Value] = {}
        self.buffers: dict[Buffer, BufferBinding] = {}
        self.dom: dict[Var, Range] = {}
        self.multiples: dict[Var, int] = {}
        # While emitting the affine top of a buffer index, signed add/sub/mul get ``nsw``: an
        # index that overflowed would be out of bounds anyway, and the flag lets LLVM's
        # address analysis reason about the index without wrapping.
        self._nsw = False
        # While emitting a buffer index, 32-bit integer arithmetic is emitted in 64 bits, and a
        # 32-bit loop counts in 64 bits (its uses elsewhere truncate). Indices sign-extended
        # at every access left LLVM's induction-variable widening a third of a candidate's
        # optimization time (a packed conv: 125 -> 90 ms, machine code 57 -> 43 ms), for the
        # same machine code speed.
        self._wide = False
        # Loops LLVM's loop vectorizer must leave alone (tir.codegen.llvm_vectorizer_guard).
        self.vectorize_off: dict[For, bool] = {}
        # A function the schedule vectorized (its body has vector code: vectorized loops were
        # lowered to Ramp / Broadcast) keeps LLVM's loop vectorizer off every loop: the
        # schedule decided which loops are vector loops, and LLVM's analysis of the others
        # was about a sixth of a tuner candidate's optimization time for no faster code.
        self.scheduled_vectors = contains(func.body, (Ramp, Broadcast))

    # ------------------------------------------------------------ helpers

    def error(self, message: str) -> CodegenError:
        return CodegenError(f"function {self.func.name}: {message}")

    def emit(self) -> None:
        for param, arg in zip(self.func.params, self.fn.args):
            if isinstance(param, Buffer):
                align = param.align if param.align > 0 else storage_bytes(param.dtype.element)
                self.buffers[param] = BufferBinding(arg, align)
            else:
                self.vars[param] = arg
        self._bound_parallel_chunk()
        self.stmt(self.func.body)
        if not self.builder.block.is_terminated:
            self.builder.ret(const(I32, 0))
        self.alloca_builder.branch(self.body_block)

    def _bound_parallel_chunk(self) -> None:
        """In an outlined parallel body, ``begin`` and ``end`` lie in the original loop's range."""
        bounds = self.func.attrs.get(llvm_parallel.PARALLEL_RANGE_ATTR)
        if bounds is None or len(self.func.params) < 2:
            return
        low, extent = bounds
        begin, end = self.func.params[0], self.func.params[1]
        if isinstance(low, IntImm) and isinstance(extent, IntImm) and isinstance(begin, Var) and isinstance(end, Var):
            self.dom[begin] = Range(low, extent)
            self.dom[end] = Range(IntImm(low.value + 1, low.dtype), extent)

    def alloca(self, ty: ir.Type, name: str, align: int) -> ir.Value:
        """Stack storage in the entry block."""
        slot = self.alloca_builder.alloca(ty, name=name)
        slot.align = align
        # llvmlite types an alloca as a typed pointer; the IR (and every GEP here) uses opaque ``ptr``.
        slot.type = PTR
        return slot

    def splat(self, value: ir.Value, lanes: int) -> ir.Value:
        vector_ty = ir.VectorType(value.type, lanes)
        if isinstance(value, ir.Constant):
            return ir.Constant(vector_ty, [value] * lanes)
        undef = ir.Constant(vector_ty, ir.Undefined)
        first = self.builder.insert_element(undef, value, const(I32, 0))
        return self.builder.shuffle_vector(first, undef, const(ir.VectorType(I32, lanes), 0))

    def to_i64(self, value: ir.Value, dtype: DataType) -> ir.Value:
        target_ty = like(value.type, I64)
        if dtype.bits == 64 or value.type == target_ty:
            return value
        if dtype.is_uint or dtype.is_bool:
            return self.builder.zext(value, target_ty)
        return self.builder.sext(value, target_ty)

    def known_multiple(self, expr: PrimExpr) -> int:
        """A positive integer ``expr`` is provably a multiple of (``_BIG``: of anything)."""
        if isinstance(expr, IntImm):
            return abs(expr.value) or _BIG
        if isinstance(expr, Var):
            return self.multiples.get(expr, 1)
        if isinstance(expr, (Add, Sub)):
            return math.gcd(self.known_multiple(expr.a), self.known_multiple(expr.b))
        if isinstance(expr, Mul):
            return min(self.known_multiple(expr.a) * self.known_multiple(expr.b), _BIG)
        if isinstance(expr, Cast) and expr.dtype.is_integer and expr.value.dtype.is_integer:
            return self.known_multiple(expr.value) if expr.dtype.bits >= expr.value.dtype.bits else 1
        return 1

    def nonnegative(self, expr: PrimExpr) -> bool:
        try:
            return const_int_bound(expr, self.dom).min_value >= 0
        except Exception:  # the bound analysis is an optimization only
            return False

    # ------------------------------------------------------------ statements

    def stmt(self, stmt: Stmt) -> None:
        method = getattr(self, "stmt_" + type(stmt).__name__, None)
        if method is None:
            raise self.error(
                f"cannot generate code for the statement {type(stmt).__name__}; "
                "lower the program first (tir.transform.lower)"
            )
        method(stmt)

    def stmt_SeqStmt(self, stmt: SeqStmt) -> None:
        for item in stmt.stmts:
            self.stmt(item)

    def stmt_Evaluate(self, stmt: Evaluate) -> None:
        if isinstance(stmt.value, (IntImm, FloatImm, StringImm)):
            return
        self.expr(stmt.value)

    def stmt_LetStmt(self, stmt: LetStmt) -> None:
        self.bind(stmt.var, stmt.value)
        self.stmt(stmt.body)
        self.unbind(stmt.var)

    def bind(self, var: Var, value: PrimExpr) -> None:
        if var in self.vars:
            raise self.error(f"variable {var.name} is defined twice")
        self.vars[var] = self.expr(value)
        self.multiples[var] = self.known_multiple(value)

    def unbind(self, var: Var) -> None:
        self.vars.pop(var, None)
        self.multiples.pop(var, None)
        self.dom.pop(var, None)

    def stmt_IfThenElse(self, stmt: IfThenElse) -> None:
        if stmt.condition.dtype != DataType("bool", 1):
            raise self.error(f"an if condition must be a scalar bool, got {stmt.condition.dtype}")
        condition = self.expr(stmt.condition)
        b = self.builder
        if stmt.else_case is None:
            with b.if_then(condition):
                self.branch(lambda: self.stmt(stmt.then_case))
            b.entered()  # the merge block
            return
        with b.if_else(condition) as (then, otherwise):
            with then:
                self.branch(lambda: self.stmt(stmt.then_case))
            with otherwise:
                self.branch(lambda: self.stmt(stmt.else_case))
        b.entered()

    def branch(self, emit: Callable[[], Any]) -> Any:
        """``emit()`` in a conditional block the builder has just entered: values it computes
        are reused inside it only (``NumberingBuilder``)."""
        mark = self.builder.mark()
        self.builder.entered()
        try:
            return emit()
        finally:
            self.builder.restore(mark)

    def stmt_For(self, loop: For) -> None:
        if loop.kind is ForKind.THREAD_BINDING:
            raise self.error(
                f"loop {loop.loop_var.name} is bound to {loop.thread_tag}; CPU targets have no threads to bind"
            )
        var = loop.loop_var
        if var in self.vars:
            raise self.error(f"loop variable {var.name} is defined twice")
        if not self.scheduled_vectors and loop not in self.vectorize_off:
            # The outermost loop of a nest (judged before its body is generated): one pass judges
            # it and every loop inside it.
            self.vectorize_off.update(vectorize_off_by_loop(loop))
        b = self.builder
        wide = _is_int32(var.dtype)
        ty = I64 if wide else value_type(var.dtype)
        emit = self.wide_expr if wide else self.expr
        start = emit(loop.min)
        end = b.add(start, emit(loop.extent), name=f"{var.name}.end")
        mark = b.mark()
        preheader = b.block
        header = self.fn.append_basic_block(f"{var.name}.header")
        body = self.fn.append_basic_block(f"{var.name}.body")
        exit_block = self.fn.append_basic_block(f"{var.name}.exit")
        b.branch(header)
        b.position_at_end(header)
        b.entered()
        index = b.phi(ty, name=var.name)
        index.add_incoming(start, preheader)
        compare = b.icmp_unsigned if var.dtype.is_uint else b.icmp_signed
        b.cbranch(compare("<", index, end), body, exit_block)
        b.position_at_end(body)
        b.entered()
        self.vars[var] = index
        self.dom[var] = Range(loop.min, loop.extent)
        self.multiples[var] = 1
        self.stmt(loop.body)
        # index < end: the step cannot wrap.
        step = b.add(index, const(ty, 1), name=f"{var.name}.next", flags=("nuw" if var.dtype.is_uint else "nsw",))
        index.add_incoming(step, b.block)
        back_edge = b.branch(header)
        unroll_full = loop.kind is ForKind.UNROLLED or bool(loop.annotations.get("pragma_unroll"))
        vectorize_off = self.scheduled_vectors or self.vectorize_off[loop]
        if unroll_full or vectorize_off:
            back_edge.set_metadata("llvm.loop", self.mcg.loop_id(unroll_full=unroll_full, vectorize_off=vectorize_off))
        b.position_at_end(exit_block)
        b.restore(mark)
        b.entered(header)  # the exit is reached through the header only
        b.entered()
        self.unbind(var)

    def stmt_Allocate(self, stmt: Allocate) -> None:
        buffer = stmt.buffer
        if stmt.data is not None:
            self.constant_buffer(buffer, stmt.data, lambda: self.stmt(stmt.body))
            return
        self.allocate(buffer, stmt.storage, lambda: self.stmt(stmt.body))

    def constant_buffer(self, buffer: Buffer, data: tuple[int | float, ...], emit_body: Callable[[], None]) -> None:
        """``T.allocate_const``: the values as a private read-only global, bound to ``buffer``."""
        if buffer in self.buffers:
            raise self.error(f"buffer {buffer.name} is allocated twice")
        elem_ty = storage_type(buffer.dtype)
        if buffer.dtype.lanes != 1:
            raise self.error(f"constant buffer {buffer.name} has vector dtype {buffer.dtype}")
        if isinstance(elem_ty, ir.IntType):
            # LLVM writes integer constants signed: an unsigned value past the sign bit wraps.
            bits = elem_ty.width
            items = [ir.Constant(elem_ty, int(v) - (1 << bits) if int(v) >= 1 << (bits - 1) else int(v)) for v in data]
        else:
            items = [ir.Constant(elem_ty, float(v)) for v in data]
        array_ty = ir.ArrayType(elem_ty, max(len(items), 1))
        module = self.mcg.module
        table = ir.GlobalVariable(module, array_ty, module.get_unique_name(f"{self.func.name}.{buffer.name}"))
        table.linkage = "private"
        table.global_constant = True
        table.align = ALLOC_ALIGN
        table.initializer = ir.Constant(array_ty, items or [ir.Constant(elem_ty, 0)])
        self.buffers[buffer] = BufferBinding(table, ALLOC_ALIGN)
        emit_body()
        del self.buffers[buffer]

    def allocate(self, buffer: Buffer, storage: str, emit_body: Callable[[], None]) -> None:
        """Storage for ``buffer`` (``"stack"``: an entry-block alloca; else the heap) around ``emit_body``."""
        if buffer in self.buffers:
            raise self.error(f"buffer {buffer.name} is allocated twice")
        elem_ty = storage_type(buffer.dtype)
        elem_bytes = storage_bytes(buffer.dtype.element) * buffer.dtype.lanes
        shape = buffer.const_shape()
        count = math.prod(shape) if shape is not None else None
        if storage == "stack" and count is not None:
            slot = self.alloca(ir.ArrayType(elem_ty, max(count, 1)), buffer.name, ALLOC_ALIGN)
            self.buffers[buffer] = BufferBinding(slot, ALLOC_ALIGN)
            emit_body()
            del self.buffers[buffer]
            return
        b = self.builder
        size = const(I64, elem_bytes)
        for extent in buffer.shape:
            size = b.mul(size, self.to_i64(self.expr(extent), extent.dtype))
        # aligned_alloc wants a multiple of the alignment; never ask for 0 bytes.
        rounded = b.and_(b.add(size, const(I64, ALLOC_ALIGN)), const(I64, -ALLOC_ALIGN))
        aligned_alloc = declare(self.mcg.module, "aligned_alloc", PTR, [I64, I64])
        pointer = b.call(aligned_alloc, [const(I64, ALLOC_ALIGN), rounded], name=buffer.name)
        failed = b.icmp_unsigned("==", pointer, ir.Constant(PTR, None))
        with b.if_then(failed, likely=False):
            b.ret(const(I32, -1))  # the runtime reports a failed allocation
        self.buffers[buffer] = BufferBinding(pointer, ALLOC_ALIGN)
        emit_body()
        del self.buffers[buffer]
        free = declare(self.mcg.module, "free", ir.VoidType(), [PTR])
        self.builder.call(free, [pointer])

    def stmt_BlockRealize(self, realize: BlockRealize) -> None:
        block = realize.block
        if realize.block is not getattr(self.func.body, "block", None) or block.iter_vars or block.init is not None:
            raise self.error(f"block {block.name!r} is still in the program; lower it first (tir.transform.lower)")
        if block.match_buffers:
            raise self.error(f"block {block.name!r} has match_buffers; lower it first (tir.transform.lower)")

        def emit_allocations(index: int) -> None:
            if index == len(block.alloc_buffers):
                self.stmt(block.body)
                return
            buffer = block.alloc_buffers[index]
            shape = buffer.const_shape()
            nbytes = math.prod(shape) * buffer.dtype.bytes if shape is not None else None
            storage = "stack" if nbytes is not None and nbytes <= ROOT_STACK_LIMIT else "heap"
            self.allocate(buffer, storage, lambda: emit_allocations(index + 1))

        emit_allocations(0)

    def stmt_BufferStore(self, stmt: BufferStore) -> None:
        buffer = stmt.buffer
        binding = self.binding(buffer)
        index = self.flat_index(buffer, stmt.indices)
        value = self.expr(stmt.value)
        stored = to_storage(self.builder, value, buffer.dtype)
        b = self.builder
        elem_bytes = storage_bytes(buffer.dtype.element) * buffer.dtype.lanes
        lanes = index.dtype.lanes
        if lanes == 1:
            pointer = self.element_pointer(binding, buffer, self.index_expr(index), index.dtype)
            b.store(stored, pointer, align=_lowest_bit(elem_bytes))
            return
        self.require_scalar_buffer(buffer)
        if lanes_of(stored.type) == 1:
            stored = self.splat(stored, lanes)
        if isinstance(index, Ramp) and isinstance(index.stride, IntImm) and index.stride.value == 1:
            pointer = self.element_pointer(binding, buffer, self.index_expr(index.base), index.base.dtype)
            b.store(stored, pointer, align=self.alignment(binding, index.base, elem_bytes, lanes))
            return
        # A scatter: lane by lane, in order (a later lane wins on a repeated index).
        indices = self.index_expr(index)
        for lane in range(lanes):
            lane_index = b.extract_element(indices, const(I32, lane))
            pointer = self.element_pointer(binding, buffer, lane_index, index.dtype.element)
            b.store(b.extract_element(stored, const(I32, lane)), pointer, align=_lowest_bit(elem_bytes))

    # ------------------------------------------------------------ buffer access

    def binding(self, buffer: Buffer) -> BufferBinding:
        binding = self.buffers.get(buffer)
        if binding is None:
            raise self.error(f"buffer {buffer.name} is used but is neither a parameter nor allocated")
        return binding

    def require_scalar_buffer(self, buffer: Buffer) -> None:
        if buffer.dtype.lanes != 1:
            raise self.error(f"vector access to buffer {buffer.name} of vector dtype {buffer.dtype}")

    def element_pointer(self, binding: BufferBinding, buffer: Buffer, index: ir.Value, dtype: DataType) -> ir.Value:
        return self.builder.gep(binding.ptr, [self.to_i64(index, dtype)], source_etype=storage_type(buffer.dtype))

    def alignment(self, binding: BufferBinding, base: PrimExpr, elem_bytes: int, lanes: int) -> int:
        """Byte alignment provable for a vector access starting at element ``base``.

        Always a power of two (LLVM rejects others, such as 24 for ``<6 x float>``): at least
        the element's, at most the vector's size rounded down to a power of two."""
        multiple = self.known_multiple(base)
        known = _lowest_bit(elem_bytes * multiple) if multiple < _BIG else _BIG
        vector = 1 << ((elem_bytes * lanes).bit_length() - 1)
        return max(_lowest_bit(elem_bytes), min(known, _lowest_bit(binding.align), vector))

    def flat_index(self, buffer: Buffer, indices: tuple[PrimExpr, ...]) -> PrimExpr:
        """The element offset of ``buffer[indices]`` (a Ramp for a vector access)."""
        if len(indices) == 1 and buffer.elem_offset is None:
            return indices[0]
        if len(indices) != len(buffer.shape):
            raise self.error(
                f"buffer {buffer.name} has {len(buffer.shape)} dimensions, accessed with {len(indices)} indices"
            )
        dtype = indices[0].dtype.element if indices else DataType("int", 32)
        if any(index.dtype.element != dtype for index in indices) or any(
            extent.dtype != dtype for extent in (*buffer.shape, *buffer.strides)
        ):
            dtype = DataType("int", 64)
        # A buffer that may span more than 2**31 - 1 elements needs 64-bit offsets.
        dtype = max(dtype, index_dtype(buffer), key=lambda d: d.bits)

        def as_index(expr: PrimExpr) -> PrimExpr:
            return expr if expr.dtype == dtype else Cast(dtype, expr)

        strides = list(buffer.strides)
        if not strides:
            running: PrimExpr = IntImm(1, dtype)
            for extent in reversed(buffer.shape):
                strides.insert(0, running)
                running = as_index(extent) * running
        total: PrimExpr = as_index(buffer.elem_offset) if buffer.elem_offset is not None else IntImm(0, dtype)
        vector: tuple[PrimExpr, int] | None = None
        for index, stride in zip(indices, strides):
            stride = as_index(stride)
            if isinstance(index, Broadcast):
                index = index.value
            if index.dtype.lanes == 1:
                total = total + as_index(index) * stride
            elif isinstance(index, Ramp) and vector is None:
                total = total + as_index(index.base) * stride
                vector = (as_index(index.stride) * stride, index.lanes)
            else:
                raise self.error(
                    f"vector index {index} of buffer {buffer.name} needs flattened buffers (run tir.transform.lower)"
                )
        total = simplify(total)
        if vector is None:
            return total
        return Ramp(total, simplify(vector[0]), vector[1])

    # ------------------------------------------------------------ expressions

    def expr(self, expr: PrimExpr) -> ir.Value:
        method = getattr(self, "expr_" + type(expr).__name__, None)
        if method is None:
            raise self.error(f"cannot generate code for the expression {type(expr).__name__}")
        if self._wide and not (isinstance(expr, _WIDE_NODES) and _is_int32(expr.dtype)):
            self._wide = False
            try:
                value = self.expr(expr)
            finally:
                self._wide = True
            return self.to_i64(value, expr.dtype) if _is_int32(expr.dtype) else value
        if self._nsw and not isinstance(expr, _AFFINE_NODES):
            self._nsw = False
            try:
                return method(expr)  # type: ignore[no-any-return]
            finally:
                self._nsw = True
        return method(expr)  # type: ignore[no-any-return]

    def index_expr(self, expr: PrimExpr) -> ir.Value:
        """An index expression: its top Add/Sub/Mul chain is emitted with ``nsw``, a 32-bit one
        in 64 bits."""
        saved, self._nsw = self._nsw, True
        try:
            return self.wide_expr(expr)
        finally:
            self._nsw = saved

    def wide_expr(self, expr: PrimExpr) -> ir.Value:
        """A 32-bit integer expression as a 64-bit value (others as they are): its arithmetic
        on loop variables and constants in 64 bits, anything else sign-extended."""
        if not _is_int32(expr.dtype):
            return self.expr(expr)
        saved, self._wide = self._wide, True
        try:
            return self.expr(expr)
        finally:
            self._wide = saved

    def expr_Var(self, var: Var) -> ir.Value:
        value = self.vars.get(var)
        if value is None:
            raise self.error(
                f"variable {var.name} is used where it is not defined (a shape variable must be a "
                "scalar parameter of the function)"
            )
        if _is_int32(var.dtype):
            # A loop counts in 64 bits; a let or parameter is 32 bits.
            if self._wide:
                return self.to_i64(value, var.dtype)
            if value.type == I64:
                return self.builder.trunc(value, I32)
        return value

    def expr_IntImm(self, imm: IntImm) -> ir.Value:
        if self._wide and _is_int32(imm.dtype):
            return const(I64, imm.value)
        return const(value_type(imm.dtype), imm.value)

    def expr_FloatImm(self, imm: FloatImm) -> ir.Value:
        return const(value_type(imm.dtype), round_float(imm.value, imm.dtype))

    def expr_StringImm(self, imm: StringImm) -> ir.Value:
        raise self.error(f"the string {imm.value!r} is only allowed as the name argument of a call")

    def _float_result(self, dtype: DataType, value: ir.Value) -> ir.Value:
        return bf16_round(self.builder, value) if dtype.kind == "bfloat" else value

    def _binary(self, expr: PrimExpr, int_op: str, float_op: str) -> ir.Value:
        a, b = self.expr(expr.a), self.expr(expr.b)  # type: ignore[attr-defined]
        if expr.dtype.is_float:
            # float32/float64 `a * b + c` may be contracted into one fused multiply-add (one
            # rounding instead of two), as C compilers do by default; docs/lowering.md says so.
            # Half types keep a rounding per operation.
            flags = ("contract",) if expr.dtype.bits >= 32 and float_op in ("fadd", "fsub", "fmul") else ()
            return self._float_result(expr.dtype, getattr(self.builder, float_op)(a, b, flags=flags))
        if self._nsw and expr.dtype.is_int and int_op in ("add", "sub", "mul"):
            return getattr(self.builder, int_op)(a, b, flags=("nsw",))  # type: ignore[no-any-return]
        return getattr(self.builder, int_op)(a, b)  # type: ignore[no-any-return]

    def expr_Add(self, expr: Add) -> ir.Value:
        return self._binary(expr, "add", "fadd")

    def expr_Sub(self, expr: Sub) -> ir.Value:
        return self._binary(expr, "sub", "fsub")

    def expr_Mul(self, expr: Mul) -> ir.Value:
        return self._binary(expr, "mul", "fmul")

    def expr_Div(self, expr: Div) -> ir.Value:
        if expr.dtype.is_float:
            return self._binary(expr, "sdiv", "fdiv")
        b = self.builder
        a, d = self.expr(expr.a), self.expr(expr.b)
        safe, special = self._guarded_divisor(expr, a, d)
        quotient = b.sdiv(a, safe) if expr.dtype.is_int else b.udiv(a, safe)
        return self._special_quotient(a, d, special, quotient)

    def _int_bound(self, expr: PrimExpr) -> tuple[float, float]:
        try:
            bound = const_int_bound(expr, self.dom)
        except Exception:  # the bound analysis is an optimization only
            return -math.inf, math.inf
        return bound.min_value, bound.max_value

    def _guarded_divisor(self, expr: PrimExpr, a: ir.Value, d: ir.Value) -> tuple[ir.Value, ir.Value | None]:
        """A divisor for ``sdiv``/``udiv``/``srem``/``urem`` that cannot trap, and the lanes where
        the real one is 0 or (signed, with a dividend that may be MIN) -1, or None when the
        bounds exclude both.

        x86 traps (SIGFPE) on a zero divisor and on ``MIN / -1``, and LLVM treats both as
        undefined. The defined results (numpy's, docs/dialect.md "Integer division") are:
        ``x // 0 == 0``, ``x % 0 == 0``, ``MIN // -1 == MIN`` (wrapped), ``MIN % -1 == 0``. On
        the special lanes the divisor becomes 1, so the remainder is already 0 and the
        quotient ``a`` is replaced by ``a * d`` (0, or ``-a`` wrapped) by ``_special_quotient``.
        Divisors known positive (the common ``i // 4``) pay nothing.
        """
        b = self.builder
        low, high = self._int_bound(expr.b)  # type: ignore[attr-defined]
        conditions = []
        if low <= 0 <= high:
            conditions.append(b.icmp_unsigned("==", d, const(d.type, 0)))
        if expr.dtype.is_int and low <= -1 <= high and self._int_bound(expr.a)[0] <= expr.dtype.min_value():  # type: ignore[attr-defined]
            conditions.append(b.icmp_signed("==", d, const(d.type, -1)))
        if not conditions:
            return d, None
        special = conditions[0] if len(conditions) == 1 else b.or_(conditions[0], conditions[1])
        return b.select(special, const(d.type, 1), d), special

    def _special_quotient(self, a: ir.Value, d: ir.Value, special: ir.Value | None, quotient: ir.Value) -> ir.Value:
        """The quotient with the lanes of ``_guarded_divisor``'s ``special`` set to ``a * d``."""
        if special is None:
            return quotient
        return self.builder.select(special, self.builder.mul(a, d), quotient)

    def _positive_constant(self, expr: PrimExpr) -> bool:
        if isinstance(expr, Broadcast):
            expr = expr.value
        return isinstance(expr, IntImm) and expr.value > 0

    def _floor_adjust(self, remainder: ir.Value, divisor: ir.Value) -> ir.Value:
        """Lanes where truncating division must be corrected: ``r != 0`` and ``sign(r) != sign(b)``."""
        b = self.builder
        zero = const(remainder.type, 0)
        nonzero = b.icmp_signed("!=", remainder, zero)
        signs_differ = b.icmp_signed("<", b.xor(remainder, divisor), zero)
        return b.and_(nonzero, signs_differ)

    def _floor(self, value: ir.Value) -> ir.Value:
        return call_intrinsic(self.builder, "llvm.floor", value.type, [value], [value.type])

    def expr_FloorDiv(self, expr: FloorDiv) -> ir.Value:
        b = self.builder
        a, d = self.expr(expr.a), self.expr(expr.b)
        if expr.dtype.is_float:
            return self._float_result(expr.dtype, self._floor(b.fdiv(a, d)))
        if self._positive_constant(expr.b) and self.nonnegative(expr.a):
            return b.udiv(a, d)  # non-negative by positive: floor = truncation, and udiv is cheaper
        safe, special = self._guarded_divisor(expr, a, d)
        if expr.dtype.is_uint or expr.dtype.is_bool:
            return self._special_quotient(a, d, special, b.udiv(a, safe))
        quotient = b.sdiv(a, safe)
        remainder = b.srem(a, safe)
        floor = b.sub(quotient, b.zext(self._floor_adjust(remainder, safe), a.type))
        return self._special_quotient(a, d, special, floor)

    def expr_FloorMod(self, expr: FloorMod) -> ir.Value:
        b = self.builder
        a, d = self.expr(expr.a), self.expr(expr.b)
        if expr.dtype.is_float:
            floor = self._floor(b.fdiv(a, d))
            return self._float_result(expr.dtype, b.fsub(a, b.fmul(floor, d)))
        if self._positive_constant(expr.b) and self.nonnegative(expr.a):
            return b.urem(a, d)
        # On _guarded_divisor's special lanes the divisor is 1: the remainder is 0, as defined.
        safe, _ = self._guarded_divisor(expr, a, d)
        if expr.dtype.is_uint or expr.dtype.is_bool:
            return b.urem(a, safe)
        remainder = b.srem(a, safe)
        return b.add(remainder, b.select(self._floor_adjust(remainder, safe), safe, const(a.type, 0)))

    def _min_max(self, expr: PrimExpr, op: str) -> ir.Value:
        b = self.builder
        a, c = self.expr(expr.a), self.expr(expr.b)  # type: ignore[attr-defined]
        dtype = expr.dtype
        if dtype.is_float:
            # a if a < b else b (a NaN operand gives b), exactly as the interpreter.
            chosen = b.fcmp_ordered("olt" if op == "<" else "ogt", a, c)
        elif dtype.is_int:
            chosen = b.icmp_signed(op, a, c)
        else:
            chosen = b.icmp_unsigned(op, a, c)
        return b.select(chosen, a, c)

    def expr_Min(self, expr: Min) -> ir.Value:
        return self._min_max(expr, "<")

    def expr_Max(self, expr: Max) -> ir.Value:
        return self._min_max(expr, ">")

    def _compare(self, expr: CmpOp) -> ir.Value:
        b = self.builder
        a, c = self.expr(expr.a), self.expr(expr.b)
        operand = expr.a.dtype
        kind = type(expr)
        if operand.is_float:
            if kind is NE:
                return b.fcmp_unordered("une", a, c)  # NaN != x is true, as in Python
            return b.fcmp_ordered(_FLOAT_CMP[kind], a, c)
        if operand.is_int:
            return b.icmp_signed(_INT_CMP[kind], a, c)
        return b.icmp_unsigned(_INT_CMP[kind], a, c)

    expr_EQ = expr_NE = expr_LT = expr_LE = expr_GT = expr_GE = _compare

    def expr_And(self, expr: And) -> ir.Value:
        return self.builder.and_(self.expr(expr.a), self.expr(expr.b))

    def expr_Or(self, expr: Or) -> ir.Value:
        return self.builder.or_(self.expr(expr.a), self.expr(expr.b))

    def expr_Not(self, expr: Not) -> ir.Value:
        return self.builder.not_(self.expr(expr.a))

    def expr_Select(self, expr: Select) -> ir.Value:
        condition = self.expr(expr.condition)
        return self.builder.select(condition, self.expr(expr.true_value), self.expr(expr.false_value))

    def expr_Cast(self, expr: Cast) -> ir.Value:
        return emit_cast(self.builder, self.expr(expr.value), expr.value.dtype, expr.dtype)

    def expr_Let(self, expr: Let) -> ir.Value:
        self.bind(expr.var, expr.value)
        value = self.expr(expr.body)
        self.unbind(expr.var)
        return value

    def expr_Ramp(self, expr: Ramp) -> ir.Value:
        base, stride = self.expr(expr.base), self.expr(expr.stride)
        lanes = expr.lanes
        vector_ty = ir.VectorType(base.type, lanes)
        if isinstance(stride, ir.Constant) and isinstance(expr.stride, IntImm):
            offsets = ir.Constant(vector_ty, [const(base.type, expr.stride.value * lane) for lane in range(lanes)])
        else:
            steps = ir.Constant(vector_ty, [const(base.type, lane) for lane in range(lanes)])
            offsets = self.builder.mul(self.splat(stride, lanes), steps)
        flags = ("nsw",) if self._nsw and expr.dtype.is_int else ()
        return self.builder.add(self.splat(base, lanes), offsets, flags=flags)

    def expr_Broadcast(self, expr: Broadcast) -> ir.Value:
        return self.splat(self.expr(expr.value), expr.lanes)

    def expr_BufferLoad(self, load: BufferLoad) -> ir.Value:
        buffer = load.buffer
        binding = self.binding(buffer)
        index = self.flat_index(buffer, load.indices)
        b = self.builder
        elem_ty = storage_type(buffer.dtype)
        elem_bytes = storage_bytes(buffer.dtype.element) * buffer.dtype.lanes
        lanes = index.dtype.lanes
        if lanes == 1:
            pointer = self.element_pointer(binding, buffer, self.index_expr(index), index.dtype)
            return from_storage(b, b.load(pointer, typ=elem_ty, align=_lowest_bit(elem_bytes)), buffer.dtype)
        self.require_scalar_buffer(buffer)
        if isinstance(index, Ramp) and isinstance(index.stride, IntImm) and index.stride.value == 1:
            pointer = self.element_pointer(binding, buffer, self.index_expr(index.base), index.base.dtype)
            align = self.alignment(binding, index.base, elem_bytes, lanes)
            raw = b.load(pointer, typ=ir.VectorType(elem_ty, lanes), align=align)
            return from_storage(b, raw, buffer.dtype.with_lanes(lanes))
        if isinstance(index, Broadcast):
            pointer = self.element_pointer(binding, buffer, self.index_expr(index.value), index.value.dtype)
            scalar = from_storage(b, b.load(pointer, typ=elem_ty, align=_lowest_bit(elem_bytes)), buffer.dtype)
            return self.splat(scalar, lanes)
        # A gather, lane by lane. When each lane's index can be written as a scalar expression
        # (Ramp / Broadcast arithmetic), it is emitted as one: lanes loading the same element
        # then share one load after LLVM's CSE, so ``A[i + T.ramp(0, 1, 32) % 4]`` becomes four
        # byte loads that LLVM recognizes as one broadcast 32-bit load. (Extracting the lanes
        # of a computed index vector hides that: LLVM keeps 32 separate loads.)
        lane_indices = [_lane_index(index, lane) for lane in range(lanes)]
        indices = None if all(e is not None for e in lane_indices) else self.index_expr(index)
        result: ir.Value = ir.Constant(ir.VectorType(elem_ty, lanes), ir.Undefined)
        for lane, lane_index in enumerate(lane_indices):
            position = const(I32, lane)
            if indices is None:
                assert lane_index is not None
                lane_index = simplify(lane_index)
                offset = self.index_expr(lane_index)
            else:
                offset = b.extract_element(indices, position)
            pointer = self.element_pointer(binding, buffer, offset, index.dtype.element)
            result = b.insert_element(result, b.load(pointer, typ=elem_ty, align=_lowest_bit(elem_bytes)), position)
        return from_storage(b, result, buffer.dtype.with_lanes(lanes))

    # ------------------------------------------------------------ calls

    def expr_Call(self, call: Call) -> ir.Value:
        op = call.op
        if op == "if_then_else":
            return self.if_then_else(call)
        if op in ("call_llvm_intrin", "call_llvm_pure_intrin"):
            return self.call_llvm_intrin(call)
        if op == "call_extern":
            return self.call_extern(call)
        if op == llvm_parallel.LAUNCH_OP:
            return llvm_parallel.emit_launch(self, call)
        if op == llvm_parallel.ADDRESS_OF_OP:
            return self.address_of(call)
        if op == BOUNDS_ERROR_OP:
            return self.bounds_error(call)
        args = [self.expr(arg) for arg in call.args]
        if op == "isnan":
            return emit_isnan(self.builder, args[0])
        if op == "abs" and not call.dtype.is_float:
            return emit_int_abs(self.builder, args[0], signed=call.dtype.is_int)
        if op == "bitwise_and":
            return self.builder.and_(args[0], args[1])
        if op == "bitwise_or":
            return self.builder.or_(args[0], args[1])
        if op == "bitwise_xor":
            return self.builder.xor(args[0], args[1])
        if op == "bitwise_not":
            return self.builder.not_(args[0])
        if op in FLOAT_MATH_OPS:
            target = self.mcg.target
            fused = target.isa == "aarch64" or target.has("fma")
            scalef = target.isa == "x86_64" and target.has("avx512f")
            return emit_float_math(self.builder, op, args, call.dtype, fused, scalef)
        raise self.error(f"no code generation for the call T.{op}")

    def if_then_else(self, call: Call) -> ir.Value:
        """``if_then_else(c, a, b)``: evaluates only the side(s) some lane takes."""
        b = self.builder
        condition_expr, true_expr, false_expr = call.args
        condition = self.expr(condition_expr)
        ty = value_type(call.dtype)
        if condition_expr.dtype.lanes == 1:
            with b.if_else(condition) as (then, otherwise):
                with then:
                    true_value = self.branch(lambda: self.expr(true_expr))
                    true_block = b.block
                with otherwise:
                    false_value = self.branch(lambda: self.expr(false_expr))
                    false_block = b.block
            b.entered()
            phi = b.phi(ty)
            phi.add_incoming(true_value, true_block)
            phi.add_incoming(false_value, false_block)
            return phi
        sides = []
        for side, mask in ((true_expr, condition), (false_expr, b.not_(condition))):
            before = b.block
            with b.if_then(vector_reduce_or(b, mask)):
                value = self.branch(lambda side=side: self.expr(side))
                computed_in = b.block
            b.entered()
            phi = b.phi(ty)
            phi.add_incoming(value, computed_in)
            phi.add_incoming(const(ty, 0), before)
            sides.append(phi)
        return b.select(condition, sides[0], sides[1])

    def bounds_error(self, call: Call) -> ir.Value:
        """``tir.bounds_error(code)`` (a checked build, tir.transform.insert_bounds_checks):
        the function returns ``code``; code after it is unreachable."""
        self.builder.ret(self.expr(call.args[0]))
        self.builder.position_at_end(self.fn.append_basic_block("after_bounds_error"))
        return const(I32, 0)

    def _callee(self, call: Call) -> tuple[str, list[ir.Value]]:
        if not call.args or not isinstance(call.args[0], StringImm):
            raise self.error(f"{call.op} needs the callee name as its first argument")
        return call.args[0].value, [self.expr(arg) for arg in call.args[1:]]

    def call_llvm_intrin(self, call: Call) -> ir.Value:
        name, args = self._callee(call)
        ret_ty = value_type(call.dtype)
        arg_types = [arg.type for arg in args]
        try:
            # ``llvm.fma`` on float32x8 operands is ``llvm.fma.v8f32``: LLVM names the overload.
            name = canonical_intrinsic_name(name, ret_ty, arg_types)
            fn = declare(self.mcg.module, name, ret_ty, arg_types)
        except CodegenError as exc:
            raise self.error(str(exc)) from None
        return self.builder.call(fn, args)

    def call_extern(self, call: Call) -> ir.Value:
        name, args = self._callee(call)
        try:
            fn = declare(self.mcg.module, name, value_type(call.dtype), [arg.type for arg in args])
        except CodegenError as exc:
            raise self.error(str(exc)) from None
        return self.builder.call(fn, args)

    def address_of(self, call: Call) -> ir.Value:
        """``tir.address_of(B[i])``: a pointer to the element (or to the first lane)."""
        (load,) = call.args
        if not isinstance(load, BufferLoad):
            raise self.error("tir.address_of needs a buffer element B[i]")
        index = self.flat_index(load.buffer, load.indices)
        if index.dtype.lanes != 1:
            index = index.base if isinstance(index, Ramp) else index
        if index.dtype.lanes != 1:
            raise self.error("tir.address_of of a vector access")
        return self.element_pointer(self.binding(load.buffer), load.buffer, self.index_expr(index), index.dtype)
