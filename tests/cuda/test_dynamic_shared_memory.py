"""plan_dynamic_shared_memory: kernels over 48 KB of shared memory take it dynamically, and
deep pipelines (whose unrolled epilogue repeats declarations) compile."""

from __future__ import annotations

import numpy as np
import pytest
from test_matmul_tensorcore_example import _example

import tir
import tir.script as T
from tir.codegen.cuda import DYNAMIC_SHARED, codegen_cuda
from tir.ir import Allocate, IRVisitor
from tir.transform import lower
from tir.transform.dynamic_shared_memory import STATIC_SHARED_LIMIT, dynamic_shared_layout
from tir.transform.split_host_device import LAUNCH_OP

SM90 = "cuda -arch=sm_90"


def _deep_matmul(n: int = 512, stages: int = 3, mma: bool = True) -> tir.PrimFunc:
    example = _example()
    tiling = example.Tiling(block_m=128, block_n=128, mma=mma, stages=stages)
    return example.schedule_matmul(example.make_matmul(n), tiling=tiling).func.replace(name="deep")


def _kernel(mod: tir.IRModule) -> tir.PrimFunc:
    (kernel,) = [f for f in mod.functions.values() if f.attrs.get("kernel")]
    return kernel


def _launch_shared(mod: tir.IRModule) -> int:
    (host,) = [f for f in mod.functions.values() if not f.attrs.get("kernel")]
    found: list[int] = []

    class _Find(IRVisitor):
        def visit_Call(self, node: object) -> None:
            if node.op == LAUNCH_OP:  # type: ignore[attr-defined]
                found.append(node.args[-1].value)  # type: ignore[attr-defined]
            self.generic_visit(node)  # type: ignore[arg-type]

    _Find().visit(host.body)
    assert len(found) == 1
    return found[0]


def _shared_buffers(kernel: tir.PrimFunc) -> list[tir.Buffer]:
    found: list[tir.Buffer] = []

    class _Find(IRVisitor):
        def visit_Allocate(self, node: Allocate) -> None:
            if node.buffer.scope.startswith("shared") and node.buffer not in found:
                found.append(node.buffer)
            self.generic_visit(node)

    _Find().visit(kernel.body)
    return found


def test_small_kernel_keeps_static_shared_memory() -> None:
    example = _example()
    mod = lower(example.KERNEL, SM90)
    kernel = _kernel(mod)
    assert kernel.attrs["shared_bytes"] == 0 and _launch_shared(mod) == 0
    assert dynamic_shared_layout(kernel) == {}
    source = codegen_cuda(mod, SM90)
    assert DYNAMIC_SHARED not in source and "__shared__ __align__(16) half A_shared[" in source


@pytest.mark.parametrize("stages", [3, 4])
def test_deep_pipeline_takes_dynamic_shared_memory(stages: int) -> None:
    mod = lower(_deep_matmul(stages=stages), SM90)
    kernel = _kernel(mod)
    buffers = _shared_buffers(kernel)
    sizes = {b.name: int(np.prod(b.const_shape())) * 2 for b in buffers}  # float16
    # 128 rows of 32 + 8 halves (A) and 32 rows of 128 + 8 (B), once per stage; compaction
    # drops the padding after the last row.
    assert sizes == {"A_shared": (stages * 128 * 40 - 8) * 2, "B_shared": (stages * 32 * 136 - 8) * 2}
    total = kernel.attrs["shared_bytes"]
    assert total == sum(sizes.values()) > STATIC_SHARED_LIMIT
    assert _launch_shared(mod) == total
    layout = dynamic_shared_layout(kernel)
    spans = sorted((layout[id(b)], layout[id(b)] + sizes[b.name]) for b in buffers)
    assert all(start % 16 == 0 for start, _ in spans)
    assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:]))  # disjoint
    source = codegen_cuda(mod, SM90)
    assert f"extern __shared__ __align__(16) unsigned char {DYNAMIC_SHARED}[];" in source
    assert source.count("__shared__") == 1  # no static array left beside the dynamic one
    for b in buffers:
        assert f"half* {b.name} = (half*)({DYNAMIC_SHARED} + {layout[id(b)]});" in source


def test_declared_dynamic_buffer_is_dynamic_below_the_limit() -> None:
    @T.script
    def copy(A: T.Buffer((256,), "float32"), B: T.Buffer((256,), "float32")):
        for i in T.thread_binding(256, thread="threadIdx.x"):
            with T.block("S"):
                vi = T.axis.spatial(256, i)
                S = T.alloc_buffer((256,), "float32", scope="shared.dyn")
                S[vi] = A[vi]
                B[vi] = S[vi] * 2.0

    mod = lower(copy, SM90)
    assert _kernel(mod).attrs["shared_bytes"] == 4  # compacted to the element each block instance uses
    assert "float* S = (float*)(tir_dynamic_shared + 0);" in codegen_cuda(mod, SM90)


def test_repeated_declarations_in_an_unrolled_epilogue_get_their_own_scope() -> None:
    """A 3-stage pipeline unrolls its last two steps: each re-declares the warp indices."""
    source = codegen_cuda(lower(_deep_matmul(stages=3), SM90), SM90)
    assert source.count("int i_1 = (int)threadIdx.z;") == 3  # steady state, and twice in the epilogue
    assert "\n  {\n    int i_1 = (int)threadIdx.z;" in source  # the third in a block of its own


@pytest.mark.parametrize("mma", [True, False], ids=["mma", "wmma"])
def test_deep_pipeline_compiles_without_spills(mma: bool, nvcc: str) -> None:
    import subprocess
    import tempfile
    from pathlib import Path

    source = codegen_cuda(lower(_deep_matmul(4096, stages=4, mma=mma), SM90), SM90)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.cu"
        path.write_text(source)
        result = subprocess.run(
            [nvcc, "-arch=sm_90", "-cubin", "-O3", "-Xptxas", "-v", "-o", str(path.with_suffix(".cubin")), str(path)],
            capture_output=True,
            text=True,
        )
    assert result.returncode == 0, result.stderr
    assert "0 bytes spill stores" in result.stderr, result.stderr


@pytest.mark.cuda
@pytest.mark.parametrize("stages", [3, 4])
def test_deep_pipeline_runs_on_the_gpu(stages: int) -> None:
    from tir.runtime.cuda_driver import _driver

    example = _example()
    module = tir.build(_deep_matmul(512, stages=stages), f"cuda -arch={_driver().arch()}")
    args = example.make_args(np.random.default_rng(stages), 512)
    args[2][:] = np.nan
    module(*args)  # type: ignore[operator]
    np.testing.assert_allclose(args[2], example.reference(*args)["C"], atol=example.ATOL * 4, rtol=1e-3)
