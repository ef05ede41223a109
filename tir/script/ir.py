"""TVM's ``I`` namespace: ``@I.ir_module`` on a class of ``@T.prim_func`` functions.

    from tir.script import ir as I      # or, in text for tir.parse: from tvm.script import ir as I
    import tir.script as T

    @I.ir_module
    class Module:
        @T.prim_func
        def main(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
            ...

    Module                              # an IRModule with the function "main"
"""

from __future__ import annotations

from typing import Any

from tir.ir import IRModule, PrimFunc

__all__ = ["ir_module"]


def ir_module(cls: type) -> IRModule:
    """The class's ``PrimFunc`` attributes (its ``@T.prim_func`` methods) as an ``IRModule``."""
    if not isinstance(cls, type):
        raise TypeError(f"@I.ir_module decorates a class, got {type(cls).__name__}")
    functions: dict[str, Any] = {
        name: value.replace(name=name) for name, value in vars(cls).items() if isinstance(value, PrimFunc)
    }
    if not functions:
        raise ValueError(f"@I.ir_module class {cls.__name__} has no @T.prim_func function")
    return IRModule(functions)
