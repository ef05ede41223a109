"""LLVM's pipeline stays fast on what the tuner generates: a long chain of float max selects in
a loop (an unrolled max reduction) took LoopIdiomRecognize time exponential in its length."""

from __future__ import annotations

import time

from tir.codegen.llvm_target import optimize, parse_ir
from tir.target import Target


def _max_chain_in_loop(length: int) -> str:
    """``out = max(out, A[0]), ..., max(out, A[length - 1])`` (compare and select), 256 times."""
    lines = [
        "define void @f(ptr noalias %A, ptr noalias %out) {",
        "entry:",
        "  br label %loop",
        "loop:",
        "  %i = phi i64 [0, %entry], [%next, %loop]",
        "  %acc0 = load float, ptr %out",
    ]
    for k in range(length):
        lines += [
            f"  %p{k} = getelementptr float, ptr %A, i64 {k}",
            f"  %v{k} = load float, ptr %p{k}",
            f"  %c{k} = fcmp ogt float %acc{k}, %v{k}",
            f"  %acc{k + 1} = select i1 %c{k}, float %acc{k}, float %v{k}",
        ]
    lines += [
        f"  store float %acc{length}, ptr %out",
        "  %next = add i64 %i, 1",
        "  %done = icmp eq i64 %next, 256",
        "  br i1 %done, label %exit, label %loop",
        "exit:",
        "  ret void",
        "}",
    ]
    return "\n".join(lines)


def test_a_long_max_chain_in_a_loop_optimizes_quickly() -> None:
    # With LoopIdiomRecognize on: 24 selects took 0.25 s, 26 took 1.1 s; 64 would not end.
    module = parse_ir(_max_chain_in_loop(64))
    start = time.perf_counter()
    optimize(module, Target.parse("llvm"))
    assert time.perf_counter() - start < 30.0
    assert "select" in str(module) or "maxnum" in str(module)
