"""Code generation: lowered programs to LLVM IR (CPU targets).

``codegen_llvm(mod, target)`` gives the LLVM IR text of a lowered IRModule (entry ABI
``int32_t NAME(void **args)``, see docs/lowering.md); ``CodegenError`` is what every refusal
raises, before LLVM could abort the process.
"""

from __future__ import annotations

from tir.codegen.features import CodegenError, check_intrinsic, check_module_intrinsics, missing_features
from tir.codegen.llvm import codegen_llvm

__all__ = ["CodegenError", "check_intrinsic", "check_module_intrinsics", "codegen_llvm", "missing_features"]
