"""The script dialect: ``import tir.script as T`` and write ``@T.script`` kernels.

Every name here is a marker the parser recognises by identity (see ``tir.script.dialect``),
so ``T.grid`` and a bare ``from tir.script import grid`` both work. ``docs/dialect.md`` is
the reference of the language.
"""

from __future__ import annotations

from typing import Any

from tir.script import dialect
from tir.script.diagnostics import ScriptError
from tir.script.parser import parse, prim_func, script

_m = dialect.MARKERS

# Types: parameter annotations, typed constants, casts, variable declarations.
Buffer = _m["Buffer"]
handle = _m["handle"]
bool = _m["bool"]  # noqa: A001 - the dialect's name for the bool dtype
int8 = _m["int8"]
int16 = _m["int16"]
int32 = _m["int32"]
int64 = _m["int64"]
uint8 = _m["uint8"]
float16 = _m["float16"]
bfloat16 = _m["bfloat16"]
float32 = _m["float32"]
float64 = _m["float64"]

# Loops.
grid = _m["grid"]
serial = _m["serial"]
parallel = _m["parallel"]
vectorized = _m["vectorized"]
unroll = _m["unroll"]
thread_binding = _m["thread_binding"]

# Blocks.
block = _m["block"]
init = _m["init"]
spatial_axis = _m["spatial_axis"]
reduce_axis = _m["reduce_axis"]
opaque_axis = _m["opaque_axis"]
remap = _m["remap"]
axis = dialect.axis
reads = _m["reads"]
writes = _m["writes"]
where = _m["where"]
block_attr = _m["block_attr"]
alloc_buffer = _m["alloc_buffer"]
allocate_const = _m["allocate_const"]
decl_buffer = _m["decl_buffer"]
match_buffer = _m["match_buffer"]
func_attr = _m["func_attr"]
evaluate = _m["evaluate"]

# Expressions.
cast = _m["cast"]
min = _m["min"]  # noqa: A001 - T.min is the IR minimum
max = _m["max"]  # noqa: A001 - T.max is the IR maximum
select = _m["select"]
truncdiv = _m["truncdiv"]
floordiv = _m["floordiv"]
floormod = _m["floormod"]
ramp = _m["ramp"]
broadcast = _m["broadcast"]
allocate = _m["allocate"]
let = _m["let"]

# TVM's spellings (TVMScript as TVM prints it; docs/dialect.md has the table).
Cast = _m["Cast"]
Select = _m["Select"]
min_value = _m["min_value"]
max_value = _m["max_value"]
shift_left = _m["shift_left"]
shift_right = _m["shift_right"]
ceildiv = _m["ceildiv"]
likely = _m["likely"]
sblock = _m["sblock"]
sblock_alloc_buffer = _m["sblock_alloc_buffer"]
sblock_attr = _m["sblock_attr"]


def _op(name: str) -> dialect.Marker:
    marker = dialect.op_marker(name)
    assert marker is not None, name
    return marker


# Registered operations (tir.ir.ops): math, if_then_else, target calls.
exp = _op("exp")
exp2 = _op("exp2")
log = _op("log")
log2 = _op("log2")
log10 = _op("log10")
sqrt = _op("sqrt")
rsqrt = _op("rsqrt")
tanh = _op("tanh")
sigmoid = _op("sigmoid")
erf = _op("erf")
sin = _op("sin")
cos = _op("cos")
floor = _op("floor")
ceil = _op("ceil")
round = _op("round")  # noqa: A001 - T.round is the IR rounding
trunc = _op("trunc")
abs = _op("abs")  # noqa: A001 - T.abs is the IR absolute value
pow = _op("pow")  # noqa: A001 - T.pow is the IR power
fma = _op("fma")
isnan = _op("isnan")
bitwise_and = _op("bitwise_and")
bitwise_or = _op("bitwise_or")
bitwise_xor = _op("bitwise_xor")
bitwise_not = _op("bitwise_not")
if_then_else = _op("if_then_else")
call_llvm_intrin = _op("call_llvm_intrin")
call_llvm_pure_intrin = _op("call_llvm_pure_intrin")
call_extern = _op("call_extern")

del _m


def __getattr__(name: str) -> Any:
    """Operations registered after import (target intrinsics) and vector dtypes (``T.float32x8``)."""
    marker = dialect.dynamic_marker(name)
    if marker is None:
        raise AttributeError(f"module 'tir.script' has no attribute {name!r}")
    return marker


__all__ = [
    "Buffer",
    "Cast",
    "Select",
    "ceildiv",
    "likely",
    "max_value",
    "min_value",
    "sblock",
    "sblock_alloc_buffer",
    "sblock_attr",
    "shift_left",
    "shift_right",
    "ScriptError",
    "abs",
    "alloc_buffer",
    "allocate",
    "allocate_const",
    "decl_buffer",
    "axis",
    "bfloat16",
    "bitwise_and",
    "bitwise_not",
    "bitwise_or",
    "bitwise_xor",
    "block",
    "block_attr",
    "bool",
    "broadcast",
    "call_extern",
    "call_llvm_intrin",
    "call_llvm_pure_intrin",
    "cast",
    "ceil",
    "cos",
    "erf",
    "evaluate",
    "exp",
    "exp2",
    "float16",
    "float32",
    "float64",
    "floor",
    "floordiv",
    "floormod",
    "fma",
    "func_attr",
    "grid",
    "handle",
    "if_then_else",
    "init",
    "int8",
    "int16",
    "int32",
    "int64",
    "isnan",
    "let",
    "log",
    "log2",
    "log10",
    "match_buffer",
    "max",
    "min",
    "opaque_axis",
    "parallel",
    "parse",
    "pow",
    "prim_func",
    "ramp",
    "reads",
    "reduce_axis",
    "remap",
    "round",
    "rsqrt",
    "script",
    "select",
    "serial",
    "sigmoid",
    "sin",
    "spatial_axis",
    "sqrt",
    "tanh",
    "thread_binding",
    "trunc",
    "truncdiv",
    "uint8",
    "unroll",
    "vectorized",
    "where",
    "writes",
]
