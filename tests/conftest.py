"""Shared test setup: the golden-snapshot fixture, hypothesis profiles, the tool fixtures (nvcc,
cuobjdump, qemu for AArch64) that skip without the tool, skipping ``cuda`` tests without a GPU."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

GOLDEN_DIR = Path(__file__).parent / "golden"

# CI runs hypothesis with a fixed seed (derandomize) so failures reproduce.
settings.register_profile(
    "ci", derandomize=True, max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("dev", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite the printed-IR snapshots under tests/golden instead of comparing with them",
    )


class Golden:
    """Compares text with ``tests/golden/<name>.txt``; ``--update-golden`` rewrites it."""

    def __init__(self, update: bool) -> None:
        self.update = update

    def check(self, name: str, text: str) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_.\-/]+", name):
            raise ValueError(f"golden name {name!r} must be a plain relative path")
        path = GOLDEN_DIR / f"{name}.txt"
        text = text.rstrip("\n") + "\n"
        if self.update:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            return
        if not path.exists():
            pytest.fail(f"missing golden file {path}; run pytest with --update-golden to create it")
        expected = path.read_text()
        if expected != text:
            import difflib

            diff = "".join(
                difflib.unified_diff(
                    expected.splitlines(keepends=True),
                    text.splitlines(keepends=True),
                    fromfile=f"golden/{name}.txt",
                    tofile="printed now",
                )
            )
            pytest.fail(f"printed IR differs from golden {path} (rerun with --update-golden if intended):\n{diff}")


@pytest.fixture
def golden(request: pytest.FixtureRequest) -> Golden:
    return Golden(bool(request.config.getoption("--update-golden")))


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


@pytest.fixture(scope="session")
def qemu_aarch64() -> None:
    """Skips the test (with the reason) unless AArch64 code runs here under emulation: the cross
    toolchain and qemu-aarch64 are installed and this machine is not AArch64 itself (there
    nothing is emulated)."""
    from tir.runtime.aarch64 import toolchain_missing_reason
    from tir.target import Target

    if Target.host().isa == "aarch64":
        pytest.skip("this machine is AArch64: nothing is emulated")
    reason = toolchain_missing_reason()
    if reason is not None:
        pytest.skip(reason)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip ``@pytest.mark.cuda`` tests when this machine has no usable CUDA device.

    Detection is cheap (ctypes: libcuda, cuInit, cuDeviceGetCount) and runs only when some
    collected test carries the marker; no CUDA Python package is imported.
    """
    marked = [item for item in items if item.get_closest_marker("cuda") is not None]
    if not marked:
        return
    from tir.runtime.cuda import device_missing_reason

    reason = device_missing_reason()
    if reason is None:
        return
    skip = pytest.mark.skip(reason=f"needs an NVIDIA GPU: {reason}")
    for item in marked:
        item.add_marker(skip)
