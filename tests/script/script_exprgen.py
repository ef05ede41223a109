"""Random well-typed IR expressions for the printer round-trip test (seeded, no hypothesis)."""

from __future__ import annotations

import random

from tir.ir import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    Block,
    BlockRealize,
    Buffer,
    BufferLoad,
    BufferStore,
    Call,
    Cast,
    Div,
    FloatImm,
    FloorDiv,
    FloorMod,
    For,
    ForKind,
    IntImm,
    Max,
    Min,
    Mul,
    Not,
    Or,
    PrimExpr,
    PrimFunc,
    Select,
    SeqStmt,
    Sub,
    Var,
)
from tir.ir.dtype import as_dtype

DTYPES = ("int32", "int64", "int8", "float32", "float16", "float64", "bool")


class ExprGen:
    """Builds random expressions over a loop variable, two scalar params and loads."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.i = Var("i", "int32")
        self.n = Var("n", "int32")
        self.m = Var("m", "int64")
        self.buffers = {name: Buffer(f"In_{name}", (IntImm(8),), name) for name in DTYPES}
        self.outs = {name: Buffer(f"Out_{name}", (IntImm(8),), name) for name in DTYPES}

    def const(self, dtype: str) -> PrimExpr:
        dt = as_dtype(dtype)
        rng = self.rng
        if dt.is_bool:
            return IntImm(rng.randint(0, 1), dt)
        if dt.is_float:
            return FloatImm(rng.choice([0.0, 1.0, -2.5, 0.1, 1e-05, 3.0, 1e20, float("inf"), -float("inf")]), dt)
        return IntImm(rng.choice([0, 1, -1, 2, 7, -100, 127]), dt)

    def leaf(self, dtype: str) -> PrimExpr:
        rng = self.rng
        choice = rng.random()
        if choice < 0.35:
            return self.const(dtype)
        if dtype == "int32" and choice < 0.7:
            return rng.choice([self.i, self.n])
        if dtype == "int64" and choice < 0.6:
            return self.m
        return BufferLoad(self.buffers[dtype], (self.i,))

    def expr(self, dtype: str, depth: int) -> PrimExpr:
        rng = self.rng
        if depth <= 0 or rng.random() < 0.2:
            return self.leaf(dtype)
        dt = as_dtype(dtype)
        sub = depth - 1
        if dt.is_bool:
            kind = rng.choice(["cmp", "and", "or", "not", "cmp"])
            if kind == "cmp":
                operand = rng.choice(["int32", "int64", "float32", "float16"])
                cls = rng.choice([EQ, NE, LT, LE, GT, GE])
                return cls(self.expr(operand, sub), self.expr(operand, sub))
            if kind == "not":
                return Not(self.expr("bool", sub))
            cls2 = And if kind == "and" else Or
            return cls2(self.expr("bool", sub), self.expr("bool", sub))
        kinds = ["add", "sub", "mul", "min", "max", "select", "cast", "neg"]
        kinds += ["fdiv", "exp", "ite"] if dt.is_float else ["floordiv", "floormod", "truncdiv"]
        kind = rng.choice(kinds)
        a, b = self.expr(dtype, sub), self.expr(dtype, sub)
        simple = {"add": Add, "sub": Sub, "mul": Mul, "min": Min, "max": Max, "fdiv": Div}
        simple.update({"floordiv": FloorDiv, "floormod": FloorMod, "truncdiv": Div})
        if kind in simple:
            return simple[kind](a, b)
        if kind == "neg":
            zero = FloatImm(0.0, dt) if dt.is_float else IntImm(0, dt)
            return Sub(zero, a)
        if kind == "select":
            return Select(self.expr("bool", sub), a, b)
        if kind == "ite":
            return Call(dt, "if_then_else", (self.expr("bool", sub), a, b))
        if kind == "exp":
            return Call(dt, "exp", (a,))
        source = rng.choice([d for d in DTYPES if d != "bool"])
        return Cast(dt, self.expr(source, sub))

    def func(self, count: int, depth: int) -> PrimFunc:
        """A function storing ``count`` random expressions of every dtype."""
        stores = []
        for _ in range(count):
            for dtype in DTYPES:
                stores.append(BufferStore(self.outs[dtype], self.expr(dtype, depth), (self.i,)))
        loop = For(self.i, IntImm(0), IntImm(8), ForKind.SERIAL, SeqStmt(tuple(stores)))
        root = Block("root", (), (), (), loop)
        params = (self.n, self.m, *self.buffers.values(), *self.outs.values())
        return PrimFunc("random_exprs", params, BlockRealize((), IntImm(1, "bool"), root))
