"""``NumberingBuilder`` (tir.codegen.llvm_numbering): an equal pure integer instruction is emitted
once per dominating region, and never reused where its block does not dominate the use.

The unit tests drive the builder on a hand-made function; the end-to-end tests compile programs
whose statements repeat index arithmetic across an unrolled tile, around loops, ``if`` statements
and ``T.if_then_else``, verify the generated IR with LLVM and compare the results with numpy.
"""

from __future__ import annotations

import llvmlite.binding as llvm
import numpy as np
import pytest
from llvmlite import ir

import tir
import tir.codegen.llvm
import tir.script as T
import tir.transform
from tir.codegen.llvm_numbering import NumberingBuilder
from tir.target import Target

I1 = ir.IntType(1)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
F32 = ir.FloatType()
PTR = ir.PointerType()


def verify(text: str) -> None:
    """LLVM's verifier accepts ``text`` (every use is dominated by its definition)."""
    llvm.parse_assembly(text).verify()


def unoptimized_ir(func: tir.PrimFunc) -> str:
    target = Target.parse("llvm")
    return tir.codegen.llvm.codegen_llvm(tir.transform.lower(func, target), target)


# ------------------------------------------------------------------------------ unit tests


class Function:
    """``f(i32 x, i32 y, ptr p, float z)`` with an entry block and a NumberingBuilder on it."""

    def __init__(self) -> None:
        self.module = ir.Module(name="numbering")
        fn_type = ir.FunctionType(I32, [I32, I32, PTR, F32])
        self.fn = ir.Function(self.module, fn_type, name="f")
        self.x, self.y, self.p, self.z = self.fn.args
        self.entry = self.fn.append_basic_block("entry")
        self.b = NumberingBuilder(self.entry)

    def instructions(self) -> int:
        return sum(len(block.instructions) for block in self.fn.blocks)

    def finish(self, value: ir.Value) -> None:
        """Return ``value`` (as i32) from the insertion block and verify the function."""
        b = self.b
        if value.type != I32:
            value = b.zext(value, I32) if value.type.width < 32 else b.trunc(value, I32)
        b.ret(value)
        verify(str(self.module))


def test_equal_integer_operations_are_emitted_once() -> None:
    f = Function()
    b, x, y = f.b, f.x, f.y
    # Equal constants made separately are the same operand.
    assert b.add(x, ir.Constant(I32, 3)) is b.add(x, ir.Constant(I32, 3), name="again")
    assert b.mul(x, y) is b.mul(x, y)
    assert b.udiv(x, ir.Constant(I32, 4)) is b.udiv(x, ir.Constant(I32, 4))
    assert b.urem(x, ir.Constant(I32, 4)) is b.urem(x, ir.Constant(I32, 4))
    assert b.icmp_signed("<", x, y) is b.icmp_signed("<", x, y)
    assert b.sext(x, I64) is b.sext(x, I64)
    index = b.sext(x, I64)
    first = b.gep(f.p, [index], inbounds=True, source_etype=I32)
    assert b.gep(f.p, [b.sext(x, I64)], inbounds=True, source_etype=I32) is first
    count = f.instructions()
    b.add(x, ir.Constant(I32, 3))
    b.icmp_signed("<", x, y)
    assert f.instructions() == count  # nothing new was emitted
    f.finish(b.add(b.udiv(x, ir.Constant(I32, 4)), b.zext(b.icmp_signed("<", x, y), I32)))


def test_different_operations_operands_or_flags_are_not_merged() -> None:
    f = Function()
    b, x, y = f.b, f.x, f.y
    plain = b.add(x, y)
    assert b.add(x, y, flags=("nsw",)) is not plain
    assert b.add(x, y, flags=("nsw",)) is b.add(x, y, flags=("nsw",))
    assert b.add(y, x) is not plain  # operand order is part of the key
    assert b.sub(x, y) is not plain
    assert b.add(x, ir.Constant(I32, 3)) is not b.add(x, ir.Constant(I32, 4))
    assert b.add(x, ir.Constant(I32, 3)) is not b.add(x, ir.Constant(I32, 3), flags=("nuw",))
    assert b.icmp_signed("<", x, y) is not b.icmp_signed("<=", x, y)
    assert b.icmp_signed("<", x, y) is not b.icmp_unsigned("<", x, y)
    assert b.udiv(x, y) is not b.sdiv(x, y)
    assert b.sext(x, I64) is not b.zext(x, I64)
    assert b.gep(f.p, [ir.Constant(I64, 1)], source_etype=I32) is not b.gep(
        f.p, [ir.Constant(I64, 1)], source_etype=I64
    )
    assert b.gep(f.p, [ir.Constant(I64, 1)], source_etype=I32) is not b.gep(
        f.p, [ir.Constant(I64, 1)], inbounds=True, source_etype=I32
    )
    f.finish(plain)


def test_floating_point_operations_are_never_reused() -> None:
    f = Function()
    b, z = f.b, f.z
    one = ir.Constant(F32, 1.0)
    assert b.fadd(z, one) is not b.fadd(z, one)
    assert b.fmul(z, z, flags=("contract",)) is not b.fmul(z, z, flags=("contract",))
    # A select of floats has a float result: not numbered either.
    condition = b.icmp_signed("<", f.x, f.y)
    assert b.select(condition, z, one) is not b.select(condition, z, one)
    # ...while a select of integers is.
    assert b.select(condition, f.x, f.y) is b.select(condition, f.x, f.y)
    f.finish(f.x)


def test_a_value_of_a_block_left_by_restore_is_not_reused() -> None:
    f = Function()
    b, x, y = f.b, f.x, f.y
    outer = b.mul(x, y)  # in the entry block, which dominates everything below
    then = f.fn.append_basic_block("then")
    merge = f.fn.append_basic_block("merge")
    b.cbranch(b.icmp_signed("<", x, y), then, merge)

    b.position_at_end(then)
    mark = b.mark()
    b.entered()
    inner = b.add(x, ir.Constant(I32, 7))
    assert b.add(x, ir.Constant(I32, 7)) is inner  # reused inside the branch
    assert b.mul(x, y) is outer  # a value of a block still declared is reused
    b.branch(merge)
    b.restore(mark)

    b.position_at_end(merge)
    b.entered()
    again = b.add(x, ir.Constant(I32, 7))
    assert again is not inner  # `then` does not dominate `merge`: a new instruction
    assert again.parent is merge
    assert b.mul(x, y) is outer  # the entry block still dominates
    assert b.add(x, ir.Constant(I32, 7)) is again  # and the new one is reused from now on
    f.finish(b.add(again, outer))


def test_a_value_of_an_undeclared_block_is_not_reused() -> None:
    f = Function()
    b, x = f.b, f.x
    other = f.fn.append_basic_block("other")
    b.branch(other)
    b.position_at_end(other)  # not declared with entered(): dominance unknown
    first = b.add(x, ir.Constant(I32, 1))
    assert b.add(x, ir.Constant(I32, 1)) is not first
    f.finish(first)


def test_a_loop_body_value_is_not_reused_after_the_loop() -> None:
    """The pattern of FunctionCodegen.stmt_For: header and body declared inside, then the
    header and the exit after ``restore``."""
    f = Function()
    b, x, y = f.b, f.x, f.y
    before = b.shl(x, ir.Constant(I32, 2))
    preheader = b.block
    mark = b.mark()
    header = f.fn.append_basic_block("header")
    body = f.fn.append_basic_block("body")
    exit_block = f.fn.append_basic_block("exit")
    b.branch(header)
    b.position_at_end(header)
    b.entered()
    index = b.phi(I32)
    index.add_incoming(ir.Constant(I32, 0), preheader)
    in_header = b.icmp_signed("<", index, y)
    b.cbranch(in_header, body, exit_block)
    b.position_at_end(body)
    b.entered()
    in_body = b.udiv(x, ir.Constant(I32, 3))
    assert b.shl(x, ir.Constant(I32, 2)) is before
    assert b.icmp_signed("<", index, y) is in_header  # the header dominates the body
    step = b.add(index, ir.Constant(I32, 1), flags=("nsw",))
    index.add_incoming(step, b.block)
    b.branch(header)
    b.position_at_end(exit_block)
    b.restore(mark)
    b.entered(header)
    b.entered()
    after = b.udiv(x, ir.Constant(I32, 3))
    assert after is not in_body and after.parent is exit_block
    assert b.icmp_signed("<", index, y) is in_header  # the header dominates the exit
    assert b.shl(x, ir.Constant(I32, 2)) is before
    f.finish(b.add(after, before))


def test_a_later_value_of_the_insertion_block_is_not_reused() -> None:
    f = Function()
    b, x = f.b, f.x
    later = b.add(x, ir.Constant(I32, 5))
    b.position_before(later)
    earlier = b.add(x, ir.Constant(I32, 5))
    assert earlier is not later
    assert f.entry.instructions.index(earlier) < f.entry.instructions.index(later)
    b.position_at_end(f.entry)
    f.finish(b.add(earlier, later))


def test_integer_vector_operations_are_numbered() -> None:
    f = Function()
    b, x = f.b, f.x
    undef = ir.Constant(ir.VectorType(I32, 4), ir.Undefined)
    inserted = b.insert_element(undef, x, ir.Constant(I32, 0))
    assert b.insert_element(undef, x, ir.Constant(I32, 0)) is inserted
    zero_mask = ir.Constant(ir.VectorType(I32, 4), 0)
    splat = b.shuffle_vector(inserted, undef, zero_mask)
    assert b.shuffle_vector(inserted, undef, ir.Constant(ir.VectorType(I32, 4), 0)) is splat
    steps = ir.Constant(ir.VectorType(I32, 4), [ir.Constant(I32, lane) for lane in range(4)])
    ramp = b.add(splat, steps)
    assert b.add(splat, ir.Constant(ir.VectorType(I32, 4), [ir.Constant(I32, lane) for lane in range(4)])) is ramp
    f.finish(b.extract_element(ramp, ir.Constant(I32, 3)))


# ------------------------------------------------------------------------------ end to end


@T.script
def unrolled_tile(A: T.Buffer((16, 32), "float32"), B: T.Buffer((16, 32), "float32")):
    for f in range(16):
        for i in T.unroll(4):
            for j in T.unroll(8):
                with T.block("B"):
                    vi = T.spatial_axis(16, f // 4 * 4 + i)
                    vj = T.spatial_axis(32, f % 4 * 8 + j)
                    B[vi, vj] = A[vi, vj] * 2.0 + 1.0


def test_an_unrolled_tile_divides_the_fused_loop_variable_once() -> None:
    text = unoptimized_ir(unrolled_tile)
    verify(text)
    statements = text.count("store float")
    assert statements == 32  # the body was copied: one store per statement
    divisions = text.count(" udiv ") + text.count(" urem ")
    assert 0 < divisions < statements, f"{divisions} udiv/urem for {statements} statements"
    assert text.count(" udiv ") == 1 and text.count(" urem ") == 1

    module = tir.build(unrolled_tile, "llvm")
    a = np.random.default_rng(0).standard_normal((16, 32)).astype(np.float32)
    b = np.zeros_like(a)
    module(a, b)
    np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)


# ``k = n // 4 * 8 + n % 4`` (n signed: sdiv, srem and the floor adjustment) is computed first
# where it does not dominate what follows (a loop body, one branch of an if, one side of an
# if_then_else), then again where it is needed after the construct: reusing the first copy would
# be an LLVM verifier error ("Instruction does not dominate all uses").
@T.script
def around_constructs(A: T.Buffer((64,), "int32"), B: T.Buffer((8,), "int32"), n: T.int32, m: T.int32):
    for i in range(m):
        B[0] = B[0] + A[n // 4 * 8 + n % 4] + i
    B[1] = A[n // 4 * 8 + n % 4]
    if n > 20:
        B[2] = A[n // 4 * 8 + n % 4 + 1]
    else:
        B[2] = A[n // 4 * 8 + n % 4 + 2] * 3
    B[3] = A[n // 4 * 8 + n % 4 + 1] + A[n // 4 * 8 + n % 4 + 2]
    if n % 2 == 0:
        B[4] = A[n // 4 * 8 + n % 4 + 5]
    B[5] = A[n // 4 * 8 + n % 4 + 5]
    B[6] = (
        T.if_then_else(n > 10, A[n // 4 * 8 + n % 4 + 3], A[n // 4 * 8 + n % 4 + 4])
        + A[n // 4 * 8 + n % 4 + 3] * A[n // 4 * 8 + n % 4 + 4]
    )
    B[7] = T.if_then_else(n > 12, A[n // 4 * 8 + n % 4 + 6], 0) + A[n // 4 * 8 + n % 4 + 6]


def around_constructs_reference(a: np.ndarray, n: int, m: int) -> np.ndarray:
    k = n // 4 * 8 + n % 4
    b = np.zeros(8, np.int32)
    for i in range(m):
        b[0] = b[0] + a[k] + i
    b[1] = a[k]
    b[2] = a[k + 1] if n > 20 else a[k + 2] * 3
    b[3] = a[k + 1] + a[k + 2]
    if n % 2 == 0:
        b[4] = a[k + 5]
    b[5] = a[k + 5]
    b[6] = (a[k + 3] if n > 10 else a[k + 4]) + a[k + 3] * a[k + 4]
    b[7] = (a[k + 6] if n > 12 else 0) + a[k + 6]
    return b


def test_values_are_recomputed_after_loops_and_branches() -> None:
    text = unoptimized_ir(around_constructs)
    verify(text)
    body = text.split('define i32 @"around_constructs"')[0]
    # Once in the loop body, once after the loop; every later use (the branches, the merges,
    # the sides of if_then_else) is dominated by the copy after the loop.
    assert body.count(" sdiv ") == 2, body


@pytest.mark.parametrize("checked", [False, True])
def test_values_around_loops_and_branches_compute_what_numpy_does(checked: bool) -> None:
    module = tir.build(around_constructs, "llvm", checked=checked)
    a = (np.arange(64, dtype=np.int32) * 7 + 3) % 50
    for n in (0, 3, 11, 13, 21, 26):  # every branch of every condition; k + 6 < 64
        for m in (0, 1, 5):  # a loop that may not run at all
            b = np.zeros(8, np.int32)
            module(a, b, n, m)
            np.testing.assert_array_equal(b, around_constructs_reference(a, n, m), err_msg=f"n={n} m={m}")


# Nested: the expression inside an if inside a loop inside an if, then at every level on the way out.
@T.script
def nested_constructs(A: T.Buffer((64,), "int32"), B: T.Buffer((4, 8), "int32"), n: T.int32):
    if n > 2:
        for i in range(8):
            if i < n % 8:
                B[0, i] = A[n // 4 * 8 + n % 4 + i]
            else:
                B[0, i] = -A[n // 4 * 8 + n % 4]
            B[1, i] = A[n // 4 * 8 + n % 4] + T.if_then_else(i > 3, A[n // 4 * 8 + i], A[n // 4 * 8 + 7 - i])
        B[2, 0] = A[n // 4 * 8 + n % 4]
    for j in range(8):
        B[3, j] = A[n // 4 * 8 + n % 4] + A[n // 4 * 8 + j]


def nested_constructs_reference(a: np.ndarray, n: int) -> np.ndarray:
    k = n // 4 * 8 + n % 4
    b = np.zeros((4, 8), np.int32)
    if n > 2:
        for i in range(8):
            b[0, i] = a[k + i] if i < n % 8 else -a[k]
            b[1, i] = a[k] + (a[n // 4 * 8 + i] if i > 3 else a[n // 4 * 8 + 7 - i])
        b[2, 0] = a[k]
    for j in range(8):
        b[3, j] = a[k] + a[n // 4 * 8 + j]
    return b


def test_nested_loops_and_branches_compute_what_numpy_does() -> None:
    verify(unoptimized_ir(nested_constructs))
    module = tir.build(nested_constructs, "llvm")
    a = np.arange(64, dtype=np.int32) * 5 - 17
    for n in (0, 2, 3, 6, 9, 20, 22):
        b = np.zeros((4, 8), np.int32)
        module(a, b, n)
        np.testing.assert_array_equal(b, nested_constructs_reference(a, n), err_msg=f"n={n}")


# A vector condition: each side of if_then_else is computed under its own `if any lane`.
@T.script
def vector_select(A: T.Buffer((64,), "int32"), C: T.Buffer((8,), "int32"), n: T.int32):
    C[T.ramp(0, 1, 8)] = (
        T.if_then_else(
            T.ramp(0, 1, 8) < T.broadcast(n % 8, 8), A[T.ramp(n // 4 * 8, 1, 8)], A[T.ramp(n // 4 * 8 + 1, 1, 8)]
        )
        + A[T.ramp(n // 4 * 8, 1, 8)]
    )


def test_vector_if_then_else_computes_what_numpy_does() -> None:
    text = unoptimized_ir(vector_select)
    verify(text)
    assert "llvm.vector.reduce.or" in text  # the guarded (per-side) form was generated
    module = tir.build(vector_select, "llvm")
    a = np.arange(64, dtype=np.int32) * 3 + 1
    lanes = np.arange(8)
    for n in (0, 1, 7, 8, 13, 27):
        c = np.zeros(8, np.int32)
        module(a, c, n)
        base = n // 4 * 8
        expected = np.where(lanes < n % 8, a[base + lanes], a[base + lanes + 1]) + a[base + lanes]
        np.testing.assert_array_equal(c, expected, err_msg=f"n={n}")


# Blocks the code generator does not declare (a heap allocation's failure check, a parallel
# launch's `if extent > 0`) only lose reuse: values from before them are still reused after them.
@T.script
def undeclared_blocks(A: T.Buffer((64,), "int32"), B: T.Buffer((8, 8), "int32"), n: T.int32):
    big = T.alloc_buffer((20000,), "int32")  # past the stack limit: aligned_alloc
    B[0, 0] = A[n // 4 * 8 + n % 4]
    for i in range(20000):
        big[i] = A[i % 64] + n // 4
    for i in T.parallel(8):
        for j in range(8):
            if j < n % 8:
                B[i, j] = big[i * 2000 + n // 4 * 8 + n % 4] + i
            else:
                B[i, j] = A[n // 4 * 8 + j]
    B[0, 1] = A[n // 4 * 8 + n % 4] + B[0, 1]


def undeclared_blocks_reference(a: np.ndarray, n: int) -> np.ndarray:
    k = n // 4 * 8 + n % 4
    big = a[np.arange(20000) % 64] + n // 4
    b = np.zeros((8, 8), np.int32)
    b[0, 0] = a[k]
    for i in range(8):
        for j in range(8):
            b[i, j] = big[i * 2000 + k] + i if j < n % 8 else a[n // 4 * 8 + j]
    b[0, 1] = a[k] + b[0, 1]
    return b


def test_undeclared_blocks_compute_what_numpy_does() -> None:
    text = unoptimized_ir(undeclared_blocks)
    verify(text)
    assert "aligned_alloc" in text and "GOMP_parallel" in text
    module = tir.build(undeclared_blocks, "llvm")
    a = np.arange(64, dtype=np.int32) * 11 - 100
    for n in (0, 5, 22):
        b = np.zeros((8, 8), np.int32)
        module(a, b, n)
        np.testing.assert_array_equal(b, undeclared_blocks_reference(a, n), err_msg=f"n={n}")
