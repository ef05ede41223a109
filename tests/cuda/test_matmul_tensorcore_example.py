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
