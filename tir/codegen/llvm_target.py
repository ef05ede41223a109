"""LLVM target machines for a ``Target``, the optimization pipeline, and assembly / object emission.

The machine always uses the target's triple, CPU and features (``Target.llvm_features()``) at
optimization level 3. Three flavours: ``"jit"`` (the in-process JIT), ``"object"``
(position-independent code for a shared library) and ``"asm"`` (readable assembly).
"""

from __future__ import annotations

import functools
import threading

import llvmlite.binding as llvm

from tir.codegen.features import CodegenError
from tir.target import Target

_LOCK = threading.Lock()


@functools.cache
def _initialize() -> None:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    llvm.initialize_native_asmparser()
    # LLVM's LoopIdiomRecognize takes time exponential in the length of a chain of float
    # max/min selects inside a loop (an unrolled max reduction: one sampled softmax schedule
    # with 32 in a row took 507 s at O3 on a Zen 3; 24 take 0.25 s, 20 take 0.02 s). What it
    # would find here, loops that are a memset or a memcpy, our schedules already write as
    # vector loops (tests/codegen/test_llvm_options.py keeps the chain fast).
    llvm.set_option("tensorir", "-disable-loop-idiom-all")


def _cpu_name(target: Target) -> str:
    return target.cpu or "generic"


def target_machine(target: Target, flavour: str = "asm") -> llvm.TargetMachine:
    """A TargetMachine for ``target``: ``flavour`` is ``"jit"``, ``"object"`` or ``"asm"``."""
    _initialize()
    return _target_machine_cached(target.triple, _cpu_name(target), target.llvm_features(), flavour)


@functools.cache
def _target_machine_cached(triple: str, cpu: str, features: str, flavour: str) -> llvm.TargetMachine:
    try:
        llvm_target = llvm.Target.from_triple(triple)
    except RuntimeError as exc:
        raise CodegenError(f"LLVM has no backend for triple {triple!r}: {exc}") from None
    if flavour == "jit":
        return llvm_target.create_target_machine(cpu=cpu, features=features, opt=3, jit=True)
    reloc = "pic" if flavour == "object" else "default"
    return llvm_target.create_target_machine(cpu=cpu, features=features, opt=3, reloc=reloc, codemodel="default")


def data_layout(target: Target) -> str:
    """The LLVM data layout string of ``target``."""
    return str(target_machine(target).target_data)


def parse_ir(text: str, what: str = "the generated LLVM IR") -> llvm.ModuleRef:
    """Parse and verify LLVM IR text; errors become ``CodegenError`` (never a process abort)."""
    _initialize()
    try:
        module = llvm.parse_assembly(text)
        module.verify()
    except RuntimeError as exc:
        raise CodegenError(f"LLVM rejected {what}: {str(exc).strip()}") from None
    return module


def optimize(module: llvm.ModuleRef, target: Target, speed_level: int = 3, llvm_unroll: bool = False) -> llvm.ModuleRef:
    """Run LLVM's default ``O<speed_level>`` pipeline for ``target`` on ``module`` (in place).

    LLVM's own loop unroller is off unless ``llvm_unroll``: programs unroll explicitly
    (``T.unroll``, the tuner's unroll decision, ``tir.transform.unroll_loops``), and LLVM's
    heuristic unrolling of the already tiled and vectorized loops is most of the O3 time (the
    hand-scheduled 1024 matmul: ~400 of ~470 ms of CPU) without making those kernels faster
    (``benchmarks/build_speed.py`` measures both). Loop and SLP vectorization stay on: they are
    cheap on code that is already vector code, and they still help loops left scalar.
    """
    tm = target_machine(target, "jit")
    options = llvm.create_pipeline_tuning_options(speed_level=speed_level)
    options.loop_vectorization = speed_level >= 2
    options.slp_vectorization = speed_level >= 2
    options.loop_unrolling = llvm_unroll and speed_level >= 2
    with _LOCK:
        builder = llvm.create_pass_builder(tm, options)
        manager = builder.getModulePassManager()
        manager.run(module, builder)
    return module


def emit_assembly(ir_text: str, target: Target) -> str:
    """Assembly for optimized LLVM IR text."""
    module = parse_ir(ir_text)
    return target_machine(target, "asm").emit_assembly(module)


def emit_object(ir_text: str, target: Target) -> bytes:
    """A position-independent object file for optimized LLVM IR text."""
    module = parse_ir(ir_text)
    return target_machine(target, "object").emit_object(module)
