"""This CPU's peak arithmetic rates at 1 thread, to read the other benchmarks' GFLOP/s against.

Two loops compiled with llvmlite for the host CPU, each with 10 independent accumulators held in
registers (so only the execution units limit them):
- float32: ``vfmadd231ps`` on 8 lanes (2 flops per lane);
- int8: ``vpmaddubsw`` (uint8 x int8 products summed in pairs to int16) then ``vpmaddwd`` with
  ones and ``vpaddd`` into int32 -- the sequence of the ``x86_avx2_u7s8s32_dot_8x4`` intrinsic,
  32 multiply-adds (64 ops) per 256-bit step.

    python benchmarks/cpu_peak.py [--seconds 1.0]

On a 2-core Zen 1 EPYC both came out near 40 G(FL)OP/s: ``vpmaddubsw`` and ``vpmaddwd`` each
issue once per two cycles, and on the same unit, so an int8 GEMM there can at best match the
float32 one. Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import time
from collections.abc import Callable

ACCUMULATORS = 10


def _accumulating_loop(
    declarations: list[str],
    params: str,
    setup: list[str],
    vector: str,
    lane: str,
    add: str,
    first: Callable[[int], str],
    step: Callable[[int], list[str]],
) -> str:
    """LLVM IR of ``@peak(i64 %n, params) -> lane``: ``n`` steps, each updating every
    accumulator ``%a{i}`` (a ``vector``, first ``first(i)``) into ``%b{i}`` with ``step(i)``; lane
    0 of the accumulators summed with ``add`` is returned, so no step is dead code."""
    phis = [f"  %a{i} = phi {vector} [ {first(i)}, %entry ], [ %b{i}, %loop ]" for i in range(ACCUMULATORS)]
    steps = [line for i in range(ACCUMULATORS) for line in step(i)]
    sums = [f"  %s0 = extractelement {vector} %b0, i32 0"]
    for i in range(1, ACCUMULATORS):
        sums.append(f"  %e{i} = extractelement {vector} %b{i}, i32 0")
        sums.append(f"  %s{i} = {add} {lane} %s{i - 1}, %e{i}")
    return "\n".join(
        [
            *declarations,
            f"define {lane} @peak(i64 %n, {params}) {{",
            "entry:",
            *setup,
            "  br label %loop",
            "loop:",
            "  %k = phi i64 [ 0, %entry ], [ %k1, %loop ]",
            *phis,
            *steps,
            "  %k1 = add i64 %k, 1",
            "  %more = icmp ult i64 %k1, %n",
            "  br i1 %more, label %loop, label %exit",
            "exit:",
            *sums,
            f"  ret {lane} %s{ACCUMULATORS - 1}",
            "}",
        ]
    )


def _fma_loop() -> str:
    return _accumulating_loop(
        ["declare <8 x float> @llvm.fma.v8f32(<8 x float>, <8 x float>, <8 x float>)"],
        "float %xs, float %ys",
        [
            "  %xi = insertelement <8 x float> poison, float %xs, i32 0",
            "  %x = shufflevector <8 x float> %xi, <8 x float> poison, <8 x i32> zeroinitializer",
            "  %yi = insertelement <8 x float> poison, float %ys, i32 0",
            "  %y = shufflevector <8 x float> %yi, <8 x float> poison, <8 x i32> zeroinitializer",
        ],
        "<8 x float>",
        "float",
        "fadd",
        lambda i: f"<float {float(i)!r}, " + ", ".join(["float 1.0"] * 7) + ">",
        lambda i: [f"  %b{i} = call <8 x float> @llvm.fma.v8f32(<8 x float> %a{i}, <8 x float> %x, <8 x float> %y)"],
    )


def _int8_loop() -> str:
    return _accumulating_loop(
        [
            "declare <16 x i16> @llvm.x86.avx2.pmadd.ub.sw(<32 x i8>, <32 x i8>)",
            "declare <8 x i32> @llvm.x86.avx2.pmadd.wd(<16 x i16>, <16 x i16>)",
        ],
        "i8 %ws",
        [
            "  %wi = insertelement <32 x i8> poison, i8 %ws, i32 0",
            "  %w = shufflevector <32 x i8> %wi, <32 x i8> poison, <32 x i32> zeroinitializer",
            "  %ones = shufflevector <16 x i16> <i16 1, " + ", ".join(["i16 poison"] * 15) + ">, "
            "<16 x i16> poison, <16 x i32> zeroinitializer",
        ],
        "<8 x i32>",
        "i32",
        "add",
        lambda i: f"<i32 {i}, " + ", ".join(f"i32 {lane}" for lane in range(1, 8)) + ">",
        # The uint8 operand is the accumulator's bytes: each step depends on the last, so no
        # product can be hoisted out of the loop.
        lambda i: [
            f"  %u{i} = bitcast <8 x i32> %a{i} to <32 x i8>",
            f"  %p{i} = call <16 x i16> @llvm.x86.avx2.pmadd.ub.sw(<32 x i8> %u{i}, <32 x i8> %w)",
            f"  %q{i} = call <8 x i32> @llvm.x86.avx2.pmadd.wd(<16 x i16> %p{i}, <16 x i16> %ones)",
            f"  %b{i} = add <8 x i32> %a{i}, %q{i}",
        ],
    )


def _compile(ir_text: str, engines: list) -> int:  # type: ignore[type-arg]
    import llvmlite.binding as llvm

    module = llvm.parse_assembly(ir_text)
    module.verify()
    target = llvm.Target.from_default_triple()
    machine = target.create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3
    )
    engine = llvm.create_mcjit_compiler(module, machine)
    engine.finalize_object()
    engines.append(engine)  # kept alive: the code lives in it
    return engine.get_function_address("peak")


def _rate(function, per_step: float, seconds: float, *args) -> float:  # type: ignore[no-untyped-def]
    """Operations per second of ``function(n, *args)``, ``per_step`` operations per loop step."""
    steps = 1 << 20
    while True:
        start = time.perf_counter()
        function(steps, *args)
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return steps * per_step / elapsed
        steps *= 2


def main() -> None:
    import llvmlite.binding as llvm

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="at least this long per loop")
    args = parser.parse_args()
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    features = llvm.get_host_cpu_features()
    if not (features.get("avx2") and features.get("fma")):
        raise SystemExit("cpu_peak.py measures AVX2 and FMA instructions; this CPU lacks them")
    engines: list = []  # type: ignore[type-arg]
    fma = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_int64, ctypes.c_float, ctypes.c_float)(
        _compile(_fma_loop(), engines)
    )
    int8 = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int64, ctypes.c_int8)(_compile(_int8_loop(), engines))
    fp32_rate = max(_rate(fma, ACCUMULATORS * 8 * 2, args.seconds, 1.0, 0.0) for _ in range(3))
    int8_rate = max(_rate(int8, ACCUMULATORS * 32 * 2, args.seconds, 1) for _ in range(3))
    print(f"{llvm.get_host_cpu_name()}, 1 thread:")
    print(f"  float32 FMA (8 lanes)                     {fp32_rate / 1e9:6.1f} GFLOP/s")
    print(f"  int8 vpmaddubsw + vpmaddwd (32 per step) {int8_rate / 1e9:6.1f} GOP/s  ({int8_rate / fp32_rate:.2f}x)")
    print(
        json.dumps(
            {
                "benchmark": "cpu_peak",
                "cpu": llvm.get_host_cpu_name(),
                "fp32_gflops": round(fp32_rate / 1e9, 1),
                "int8_gops": round(int8_rate / 1e9, 1),
                "int8_over_fp32": round(int8_rate / fp32_rate, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
