"""``tir.build``: lower a program and compile it for a target.

    m = tir.build(f, target="llvm")           # this CPU: a JIT module, callable on numpy arrays
    m = tir.build(f, "llvm -mcpu=skylake-avx512")   # features this CPU lacks: source only
    m = tir.build(f, "llvm -mtriple=aarch64-linux-gnu -mattr=+neon,+dotprod")  # runs under qemu

The program goes through ``tir.transform.lower`` (docs/lowering.md), then through the LLVM code
generator (``tir.codegen.llvm.codegen_llvm``), then to the runtime module of the target:

- an x86-64 target this machine can run: ``tir.runtime.LLVMModule``, JIT-compiled in process;
- an x86-64 target with features this CPU lacks: the same class, whose ``get_source`` and
  ``export_library`` work and whose call raises ``RuntimeError`` naming the missing features;
- an AArch64 target: the module of ``tir.runtime.aarch64`` (run under qemu);
- a CUDA target (``"cuda -arch=sm_80"``): the GPU pipeline, CUDA C++ (``tir.codegen.cuda``),
  nvcc, and a ``tir.runtime.cuda.CUDAModule`` (``get_source("cuda")``, ``get_source("sass")``,
  ``.cubin``; its call runs the kernels where a GPU is present).
"""

from __future__ import annotations

from tir.ir import IRModule, PrimFunc
from tir.runtime.module import LLVMModule, Module
from tir.target import Target

__all__ = ["build"]


def build(
    func_or_mod: PrimFunc | IRModule,
    target: str | Target | None = "llvm",
    *,
    entry: str | None = None,
    checked: bool = False,
) -> Module:
    """Lower ``func_or_mod`` and compile it for ``target``; returns a callable ``Module``.

    ``entry`` names the function a call runs when the module has several (default: the
    first function that is not an outlined parallel body). Raises ``tir.codegen.CodegenError``
    for a program the code generator refuses (e.g. an intrinsic the target lacks), and
    ``tir.analysis.VerificationError`` for an access provably outside its buffer (the
    validator's ``out-of-bounds`` rule), before any code is generated.

    ``checked=True`` (CPU targets) tests every buffer access at run time
    (``tir.transform.insert_bounds_checks``): an access outside its buffer stops the call with
    an ``IndexError`` naming the buffer and the index instead of touching that memory.
    Parallel loops of a checked build run serially. It is a debugging aid: slower code.
    """
    from tir.codegen.llvm import codegen_llvm
    from tir.transform import lower

    resolved = Target.parse(target)
    if not isinstance(func_or_mod, (PrimFunc, IRModule)):
        raise TypeError(f"tir.build needs a PrimFunc or an IRModule, got {type(func_or_mod).__name__}")
    _refuse_out_of_bounds(func_or_mod)
    if checked and not resolved.is_cpu:
        raise ValueError(f"tir.build(checked=True) supports CPU (llvm) targets; got {resolved.text!r}")
    if resolved.is_cuda:
        return _build_cuda(func_or_mod, resolved)
    if not resolved.is_cpu:
        raise ValueError(f"tir.build supports CPU (llvm) targets here; got {resolved.text!r}")
    from tir.codegen import CodegenError
    from tir.transform._common import LoweringError

    try:
        lowered = _lower_checked(func_or_mod, resolved) if checked else lower(func_or_mod, resolved)
        ir_text = codegen_llvm(lowered, resolved)
    except (LoweringError, CodegenError) as error:
        # The message names the construct at fault; the compiler's own frames would bury it.
        raise error.with_traceback(None) from None
    if resolved.isa == "aarch64" and resolved.isa != Target.host().isa:
        from tir.runtime.aarch64 import build_aarch64_module

        return build_aarch64_module(ir_text, lowered, resolved, entry)
    return LLVMModule(lowered, resolved, ir_text, entry)


def _build_cuda(func_or_mod: PrimFunc | IRModule, target: Target) -> Module:
    from tir.codegen import CodegenError
    from tir.codegen.cuda import build_cuda
    from tir.transform._common import LoweringError

    try:
        return build_cuda(func_or_mod, target)  # type: ignore[return-value]
    except (LoweringError, CodegenError) as error:
        raise error.with_traceback(None) from None


def _refuse_out_of_bounds(func_or_mod: PrimFunc | IRModule) -> None:
    """Raise ``VerificationError`` when an access is provably outside its buffer: the built
    code would write or read memory it does not own (a segfault at best)."""
    from tir.analysis.verify import VerificationError, check_bounds

    funcs = [func_or_mod] if isinstance(func_or_mod, PrimFunc) else list(func_or_mod.functions.values())
    for func in funcs:
        violations = check_bounds(func)
        if violations:
            raise VerificationError(func.name, violations).with_traceback(None) from None


def _lower_checked(func_or_mod: PrimFunc | IRModule, target: Target) -> IRModule:
    """The CPU pipeline without ``lower_parallel`` (a failed check returns its status from the
    function, which an OpenMP worker could not), then ``insert_bounds_checks``."""
    from tir.transform import passes
    from tir.transform._common import as_module
    from tir.transform.insert_bounds_checks import FIRST_CODE, insert_bounds_checks

    mod = as_module(func_or_mod)
    for name, run in passes(target):
        if name != "lower_parallel":
            mod = run(mod)
    checked: dict[str, PrimFunc] = {}
    code = FIRST_CODE
    for name, func in mod.functions.items():
        checked[name] = insert_bounds_checks(func, first_code=code)
        code += len(checked[name].attrs.get("bounds_checks") or {})
    return IRModule(checked)
