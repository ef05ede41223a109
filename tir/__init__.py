"""tir: tensor programs as blocks and loops, transformed by schedule primitives.

Public names (DESIGN section 2)::

    import tir
    import tir.script as T
    f.script()                         # printed program; print(f) shows the same
    tir.parse(text)                    # script text -> PrimFunc (or IRModule)
    tir.structural_equal(a, b)         # modulo renaming of variables and buffers
    tir.assert_structural_equal(a, b)  # raises, naming the first mismatch
    tir.structural_hash(a)
    tir.interpret(f, *arrays)          # reference run on numpy arrays, outputs in place
"""

from __future__ import annotations

from tir import ir
from tir.build import build
from tir.interp import interpret
from tir.ir import (
    Block,
    BlockRealize,
    Buffer,
    BufferRegion,
    DataType,
    For,
    ForKind,
    IRModule,
    IterKind,
    IterVar,
    PrimExpr,
    PrimFunc,
    Range,
    Stmt,
    Var,
)
from tir.ir.structural import StructuralMismatch, assert_structural_equal, structural_equal, structural_hash
from tir.schedule import Schedule, ScheduleError
from tir.script.parser import parse

__version__ = "0.1.0"

__all__ = [
    "Block",
    "BlockRealize",
    "Buffer",
    "BufferRegion",
    "DataType",
    "For",
    "ForKind",
    "IRModule",
    "IterKind",
    "IterVar",
    "PrimExpr",
    "PrimFunc",
    "Range",
    "Schedule",
    "ScheduleError",
    "Stmt",
    "StructuralMismatch",
    "Var",
    "assert_structural_equal",
    "build",
    "interpret",
    "ir",
    "parse",
    "structural_equal",
    "structural_hash",
]
