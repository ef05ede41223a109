"""The public names of docs/design.md section 2 exist and behave as described there."""

from __future__ import annotations

import numpy as np

import tir
import tir.script as T


@T.script
def scale(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.block("B"):
            vi = T.spatial_axis(8, i)
            B[vi] = A[vi] * 2.0


def test_script_makes_a_prim_func_that_prints() -> None:
    assert isinstance(scale, tir.PrimFunc)
    text = scale.script()
    assert text.startswith("@T.script")
    assert str(scale) == text
    assert "T.reads(A[vi])" in text and "T.writes(B[vi])" in text


def test_parse_round_trips() -> None:
    again = tir.parse(scale.script())
    assert isinstance(again, tir.PrimFunc)
    assert tir.structural_equal(again, scale)
    tir.assert_structural_equal(again, scale)
    assert tir.structural_hash(again) == tir.structural_hash(scale)


def test_parse_of_two_functions_is_a_module() -> None:
    text = scale.script() + "\n\n" + scale.script().replace("def scale", "def scale2")
    mod = tir.parse(text)
    assert isinstance(mod, tir.IRModule)
    assert sorted(mod.functions) == ["scale", "scale2"]
    assert tir.structural_equal(mod["scale2"], scale)


def test_interpret_writes_outputs_in_place() -> None:
    a = np.arange(8, dtype="float32")
    b = np.zeros(8, dtype="float32")
    assert tir.interpret(scale, a, b) is None
    np.testing.assert_array_equal(b, a * 2)


def test_design_section_2_names_exist() -> None:
    assert callable(tir.build) and callable(tir.analysis.verify)
    assert callable(tir.TensorIntrin.register) and callable(tir.TensorIntrin.get)
    sch = tir.Schedule(scale)
    sch.get_loops(sch.get_block("B"))
    assert isinstance(sch.mod, tir.IRModule)
    assert "sch.get_block('B')" in sch.trace.as_python()
    m = tir.build(scale, "llvm")
    assert "define" in m.get_source("ll")
