"""Built modules: the shared ``Module`` interface and the host (JIT) module.

``tir.build`` returns one of these: call it on numpy arrays, ``time`` it, ``export_library``
it, read its ``get_source``. AArch64 modules live in ``tir.runtime.aarch64``, CUDA modules in
``tir.runtime.cuda`` (imported on demand: it loads no CUDA package until a call).
"""

from __future__ import annotations

from tir.runtime.cuda import CUDADeviceError, CUDALaunchError, CUDAModule
from tir.runtime.module import LLVMModule, Module, ParamSpec, check_arguments, param_specs

__all__ = [
    "CUDADeviceError",
    "CUDALaunchError",
    "CUDAModule",
    "LLVMModule",
    "Module",
    "ParamSpec",
    "check_arguments",
    "param_specs",
]
