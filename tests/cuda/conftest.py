"""Fixtures of the CUDA code-generation tests: skip compile tests without nvcc."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture
def nvcc() -> str:
    """The nvcc path; skips the test (with the reason) where there is none."""
    from tir.codegen.cuda_compile import CudaCompileError, find_nvcc

    try:
        return find_nvcc()
    except CudaCompileError as error:
        pytest.skip(str(error))


@pytest.fixture
def sass_tool() -> str:
    from tir.codegen.cuda_compile import find_cuobjdump

    tool = find_cuobjdump()
    if tool is None:
        pytest.skip("cuobjdump not found: pip install nvidia-cuda-cuobjdump")
    return tool
