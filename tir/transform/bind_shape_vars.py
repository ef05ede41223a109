"""``bind_shape_vars``: shape variables become trailing scalar parameters, bound at call time.

A program written for every size declares its sizes as variables::

    @T.script
    def add_one(a: T.handle, b: T.handle):
        n = T.int32()
        A = T.match_buffer(a, (n, 64), "float32")
        B = T.match_buffer(b, (n, 64), "float32")
        ...

``n`` is no parameter: its value is the extent of the arrays passed for ``A`` and ``B``. The
code generators only know parameters, so this pass appends every such variable (in order of
first appearance in the buffer parameters' shapes) as a scalar parameter and records their
names in ``attrs["shape_vars"]``::

    def add_one(A: T.Buffer((n, 64), "float32"), B: T.Buffer((n, 64), "float32"), n: T.int32):
        T.func_attr({"shape_vars": ("n",)})
        ...

The runtime (``tir.runtime.check_arguments``) takes the user's arguments for the other
parameters and fills these from the arrays' shapes, refusing arrays that disagree on a
variable. A variable that appears in shapes only inside expressions (``(n * 2,)``) cannot be
bound from an array's extent; the pass refuses it and names it, as it refuses any other
variable the body uses that nothing defines.
"""

from __future__ import annotations

import dataclasses

from tir.ir import Buffer, PrimFunc, Var, free_vars
from tir.transform._common import LoweringError

__all__ = ["SHAPE_VARS_ATTR", "bind_shape_vars"]

#: ``attrs`` key naming the trailing parameters that the runtime binds from the arrays' shapes.
SHAPE_VARS_ATTR = "shape_vars"


def bind_shape_vars(func: PrimFunc) -> PrimFunc:
    """Append the bare shape variables of ``func``'s buffer parameters as scalar parameters.

    Returns ``func`` itself when it has none (every size constant, or given by scalar
    parameters). Raises ``LoweringError`` for a shape variable that no array extent gives.
    """
    if SHAPE_VARS_ATTR in func.attrs:
        return func  # already bound
    params: set[int] = {id(param) for param in func.params if isinstance(param, Var)}
    bound: dict[int, Var] = {}
    compound: dict[int, tuple[Var, Buffer]] = {}
    for buffer in func.buffer_params:
        for extent in buffer.shape:
            if isinstance(extent, Var):
                if id(extent) not in params:
                    bound.setdefault(id(extent), extent)
            else:
                for var in free_vars(extent):
                    if id(var) not in params:
                        compound.setdefault(id(var), (var, buffer))
    unbound = [(var, buffer) for key, (var, buffer) in compound.items() if key not in bound]
    if unbound:
        var, buffer = unbound[0]
        raise LoweringError(
            f"function {func.name}: shape variable {var.name} appears only inside an expression of "
            f"{buffer.name}'s shape {_shape_text(buffer)}, so no argument's extent gives its value; "
            f"use it alone as some buffer's extent, or make it a scalar parameter ({var.name}: T.int32)"
        )
    if not bound:
        return func
    names = tuple(var.name for var in bound.values())
    duplicates = {name for name in names if names.count(name) > 1}
    if duplicates:
        raise LoweringError(
            f"function {func.name}: two different shape variables are named {sorted(duplicates)[0]}; "
            "rename one (the runtime binds shape variables by name)"
        )
    return dataclasses.replace(
        func, params=(*func.params, *bound.values()), attrs={**func.attrs, SHAPE_VARS_ATTR: names}
    )


def _shape_text(buffer: Buffer) -> str:
    return "(" + ", ".join(str(extent) for extent in buffer.shape) + ("," if len(buffer.shape) == 1 else "") + ")"
