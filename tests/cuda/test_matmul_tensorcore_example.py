"""examples/matmul_tensorcore.py: its KERNEL compiles for sm_80 and sm_90 with HMMA in the SASS."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

import tir
from tir.runtime.cuda import CUDAModule

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples"


def _example() -> ModuleType:
    if str(EXAMPLES_DIR) not in sys.path:
        sys.path.insert(0, str(EXAMPLES_DIR))  # examples import their harness as `_common`
    name = "tir_cuda_examples_matmul_tensorcore"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, EXAMPLES_DIR / "matmul_tensorcore.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_example_kernel_compiles_to_hmma(arch: str, nvcc: str, sass_tool: str) -> None:
    example = _example()
    assert example.TARGET == "cuda -arch=sm_80"
    module = tir.build(example.KERNEL, f"cuda -arch={arch}")
    assert isinstance(module, CUDAModule)
    source = module.get_source()
    assert "wmma::mma_sync" in source or "mma_sync" in source
    # storage_align's padding survives compaction: rows of 32 + 8 and 64 + 8 halves.
    assert "A_shared[" in source and "* 40)" in source and "* 72)" in source
    sass = module.get_source("sass")
    assert "HMMA" in sass


@pytest.mark.parametrize("pipelined", [True, False], ids=["pipelined", "not-pipelined"])
def test_fragment_loads_use_the_compacted_padded_row_stride(pipelined: bool) -> None:
    """WMMA loads read shared rows with the stride they have after compaction (32 + 8 and
    64 + 8 halves), not the padded stride of the whole row (1024 + 8) that storage_align set
    before the k tile was cut out; the staging of pipelining must not shift it either."""
    import re

    from tir.codegen.cuda import codegen_cuda
    from tir.transform import lower

    example = _example()
    func = example.schedule_matmul(example.make_matmul(1024), pipelined=pipelined).func
    source = codegen_cuda(lower(func, example.TARGET), example.TARGET)
    strides = set(re.findall(r"load_matrix_sync\([^;]*?, (\d+)\);", source))
    assert strides == {"40", "72"}, strides


@pytest.mark.cuda
def test_example_kernel_runs_on_the_gpu() -> None:
    import numpy as np

    example = _example()
    module = example.build(512)
    args = example.make_args(np.random.default_rng(3), 512)
    args[2][:] = np.nan
    module(*args)
    np.testing.assert_allclose(args[2], example.reference(*args)["C"], atol=example.ATOL * 4, rtol=1e-3)


@pytest.mark.parametrize(
    "fields",
    [
        {"raster": 2},
        {"mma": True, "stages": 3, "raster": 2},
        {"mma": True, "stages": 4, "fragment_pipeline": True},
        {"mma": True, "interleave": True},
    ],
    ids=["wmma-raster", "mma-3-stages-raster", "mma-4-stages-fragments", "mma-interleaved"],
)
def test_tilings_compute_the_matmul_in_the_interpreter(fields: dict[str, object]) -> None:
    """The benchmark's tiling knobs change the schedule, never the result (128^3, interpreted)."""
    import numpy as np

    example = _example()
    func = example.schedule_matmul(example.make_matmul(128), tiling=example.Tiling(**fields)).func
    args = example.make_args(np.random.default_rng(5), 128)
    tir.interpret(func, *args)
    np.testing.assert_allclose(args[2], example.reference(*args)["C"], atol=example.ATOL, rtol=1e-5)
