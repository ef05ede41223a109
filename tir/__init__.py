"""tir: tensor programs as blocks and loops, transformed by schedule primitives.

Public names (docs/design.md section 2)::

    import tir
    import tir.script as T
    f.script()                         # printed program; print(f) shows the same
    tir.parse(text)                    # script text -> PrimFunc (or IRModule)
    tir.structural_equal(a, b)         # modulo renaming of variables and buffers
    tir.assert_structural_equal(a, b)  # raises, naming the first mismatch
    tir.structural_hash(a)
    tir.interpret(f, *arrays)          # reference run on numpy arrays, outputs in place
    sch = tir.Schedule(f)              # sch.mod, sch.show(), sch.trace, sch.get_block("C"), ...
    tir.analysis.verify(f, target=None)
    tir.TensorIntrin.register(name, desc, impl)
    m = tir.build(f, target="llvm")    # m(*arrays), m.time(...), m.export_library(path), m.get_source()
"""

from __future__ import annotations

from tir import analysis, ir
from tir.build import build
from tir.interp import interpret
from tir.intrin import TensorIntrin
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
    "TensorIntrin",
    "analysis",
    "Var",
    "assert_structural_equal",
    "build",
    "interpret",
    "ir",
    "parse",
    "structural_equal",
    "structural_hash",
]
