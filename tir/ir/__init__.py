"""The IR: node types, dtypes, visitors, structural equality."""

from __future__ import annotations

from tir.ir.buffer import KNOWN_SCOPES, Buffer, BufferRegion, IterVar, MatchBufferRegion, Range
from tir.ir.dtype import DataType, as_dtype
from tir.ir.expr import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    BinaryOp,
    Broadcast,
    BufferLoad,
    Call,
    Cast,
    CmpOp,
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    IntImm,
    IterKind,
    Let,
    Max,
    Min,
    Mul,
    Not,
    Or,
    PrimExpr,
    Ramp,
    Select,
    StringImm,
    Sub,
    Var,
    const,
    convert,
    is_const_int,
)
from tir.ir.function import IRModule, PrimFunc
from tir.ir.functor import (
    IRMutator,
    IRVisitor,
    buffer_loads,
    free_vars,
    post_order_visit,
    replace_buffers,
    substitute,
)
from tir.ir.node import Node, Span
from tir.ir.stmt import (
    THREAD_TAGS,
    Allocate,
    Block,
    BlockRealize,
    BufferStore,
    Evaluate,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    SeqStmt,
    Stmt,
)

__all__ = [
    "EQ", "GE", "GT", "LE", "LT", "NE", "Add", "Allocate", "And", "BinaryOp", "Block",
    "BlockRealize", "Broadcast", "Buffer", "BufferLoad", "BufferRegion", "BufferStore", "Call",
    "Cast", "CmpOp", "DataType", "Div", "Evaluate", "FloatImm", "FloorDiv", "FloorMod", "For",
    "ForKind", "IRModule", "IRMutator", "IRVisitor", "IfThenElse", "IntImm", "IterKind",
    "IterVar", "KNOWN_SCOPES", "Let", "LetStmt", "MatchBufferRegion", "Max", "Min", "Mul",
    "Node", "Not", "Or", "PrimExpr", "PrimFunc", "Ramp", "Range", "Select", "SeqStmt", "Span",
    "Stmt", "StringImm", "Sub", "THREAD_TAGS", "Var", "as_dtype", "buffer_loads", "const",
    "convert", "free_vars", "is_const_int", "post_order_visit", "replace_buffers", "substitute",
]
