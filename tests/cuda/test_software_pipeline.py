"""inject_software_pipeline: structure, interpreter numerics, and cp.async in the compiled SASS."""

from __future__ import annotations

import numpy as np
import pytest
from cuda_kernels import make_matmul_f32, schedule_shared_tiled

import tir
from tir.codegen.cuda import codegen_cuda
from tir.codegen.cuda_compile import compile_cuda, disassemble
from tir.ir import Allocate, For, IRVisitor
from tir.target import Target
from tir.transform import compact_allocations, convert_blocks_to_loops, lower, lower_init
from tir.transform._common import LoweringError
from tir.transform.software_pipeline import inject_software_pipeline

SM80 = Target.parse("cuda -arch=sm_80")


def _pipelined_matmul(stages: list[int] | None = None) -> tir.PrimFunc:
    sch = schedule_shared_tiled(make_matmul_f32(64))
    ko = sch.get_loops(sch.get_block("A_shared"))[2]
    sch.annotate(ko, "software_pipeline_stage", stages or [0, 0, 1])
    sch.annotate(ko, "software_pipeline_order", [0, 1, 2])
    return sch.func


def _before_pipeline(func: tir.PrimFunc) -> tir.PrimFunc:
    return compact_allocations(convert_blocks_to_loops(lower_init(func)))


def _run(func: tir.PrimFunc) -> np.ndarray:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 64)).astype(np.float32)
    b = rng.standard_normal((64, 64)).astype(np.float32)
    c = np.zeros((64, 64), np.float32)
    tir.interpret(func, a, b, c)
    return c


@pytest.mark.parametrize("last", [1, 2, 3], ids=["2-stages", "3-stages", "4-stages"])
def test_interpreter_matches_unpipelined(last: int) -> None:
    func = _pipelined_matmul([0, 0, last])
    before = _before_pipeline(func)
    after = inject_software_pipeline(before, SM80)
    assert after is not before
    np.testing.assert_allclose(_run(after), _run(before), rtol=1e-6, atol=1e-5)
    np.testing.assert_allclose(_run(after), _run(make_matmul_f32(64)), rtol=1e-5, atol=1e-4)


def test_structure_double_buffered_with_cp_async() -> None:
    after = inject_software_pipeline(_before_pipeline(_pipelined_matmul()), SM80)
    shapes: dict[str, tuple[int, ...] | None] = {}
    loops: list[For] = []

    class _Find(IRVisitor):
        def visit_Allocate(self, node: Allocate) -> None:
            shapes[node.buffer.name] = node.buffer.const_shape()
            self.generic_visit(node)

        def visit_For(self, node: For) -> None:
            loops.append(node)
            self.generic_visit(node)

    _Find().visit(after.body)
    assert shapes["A_shared"] == (2, 16, 16) and shapes["B_shared"] == (2, 16, 16)
    steady = [loop for loop in loops if loop.loop_var.name == "k_0"]
    assert len(steady) == 1 and steady[0].min.value == 1 and steady[0].extent.value == 3  # type: ignore[attr-defined]
    assert "software_pipeline_stage" not in steady[0].annotations
    text = after.script()
    assert text.count("ptx_cp_async(") == 2 * 2  # A and B copies: prologue and steady state
    assert "ptx_cp_async_commit_group" in text and "ptx_cp_async_wait_group" in text


def test_no_cp_async_before_sm80() -> None:
    after = inject_software_pipeline(_before_pipeline(_pipelined_matmul()), Target.parse("cuda -arch=sm_70"))
    assert "ptx_cp_async" not in after.script()
    np.testing.assert_allclose(_run(after), _run(make_matmul_f32(64)), rtol=1e-5, atol=1e-4)


def test_bad_annotation_refused() -> None:
    with pytest.raises(LoweringError, match="one integer per statement"):
        inject_software_pipeline(_before_pipeline(_pipelined_matmul([0, 1])), SM80)


def test_read_before_write_stage_refused() -> None:
    with pytest.raises(LoweringError, match="at the later stage"):
        inject_software_pipeline(_before_pipeline(_pipelined_matmul([1, 1, 0])), SM80)


def test_compiles_for_sm80_with_ldgsts(nvcc: str) -> None:
    mod = lower(_pipelined_matmul(), SM80)
    source = codegen_cuda(mod, SM80)
    assert "cp.async" in source and "tir_cp_async<4>" in source
    cubin = compile_cuda(source, "sm_80")
    from tir.codegen.cuda_compile import find_cuobjdump

    if find_cuobjdump() is None:
        pytest.skip("cuobjdump not found: pip install nvidia-cuda-cuobjdump")
    sass = disassemble(cubin)
    assert "LDGSTS" in sass
