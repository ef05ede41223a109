"""The named operations a ``Call`` may carry, and how the script spells them.

Each op has an arity range and a dtype rule:
- ``"same"``: the result has the dtype of the first value argument (math functions);
- ``"explicit"``: the script gives the result dtype as the first argument
  (``T.call_llvm_intrin("float32x8", "llvm.fma.v8f32", a, b, c)``);
- ``"branch"``: ``if_then_else(cond, a, b)`` has the dtype of ``a``.

A Call with an explicit dtype stores the callee name as a leading ``StringImm`` argument.
Registering a new op is one ``register_op`` call (target intrinsics do this).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OpInfo:
    name: str
    min_args: int
    max_args: int | None  # None: variadic
    dtype_rule: str  # "same", "explicit", "branch", "bool"
    float_only: bool = False
    pure: bool = True
    doc: str = ""


_OPS: dict[str, OpInfo] = {}


def register_op(info: OpInfo) -> OpInfo:
    _OPS[info.name] = info
    return info


def get_op(name: str) -> OpInfo | None:
    return _OPS.get(name)


def all_ops() -> dict[str, OpInfo]:
    return dict(_OPS)


#: Unary float math functions: result dtype = argument dtype.
FLOAT_UNARY = (
    "exp",
    "exp2",
    "log",
    "log2",
    "log10",
    "sqrt",
    "rsqrt",
    "tanh",
    "sigmoid",
    "erf",
    "sin",
    "cos",
    "floor",
    "ceil",
    "round",
    "trunc",
)

for _name in FLOAT_UNARY:
    register_op(OpInfo(_name, 1, 1, "same", float_only=True))
register_op(OpInfo("abs", 1, 1, "same"))
register_op(OpInfo("pow", 2, 2, "same", float_only=True))
register_op(OpInfo("fma", 3, 3, "same", float_only=True, doc="a * b + c, rounded once"))
register_op(OpInfo("if_then_else", 3, 3, "branch", doc="evaluates only the taken branch"))
register_op(OpInfo("isnan", 1, 1, "bool", float_only=True))
register_op(OpInfo("call_llvm_intrin", 1, None, "explicit", pure=False, doc="an LLVM intrinsic by name"))
register_op(OpInfo("call_llvm_pure_intrin", 1, None, "explicit", doc="a side-effect-free LLVM intrinsic"))
register_op(OpInfo("call_extern", 1, None, "explicit", pure=False, doc="an external C function"))
register_op(
    OpInfo(
        "tir.parallel_launch",
        3,
        None,
        "explicit",
        pure=False,
        doc="run the outlined parallel loop body NAME over [min, min + extent) on a thread pool: "
        "(NAME, min, extent, captured...); captured buffers are passed as tir.address_of(B[0])",
    )
)
register_op(OpInfo("tir.address_of", 1, 1, "explicit", doc="the address of a buffer element: (B[i],)"))
