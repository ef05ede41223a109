"""Compile CUDA C++ with nvcc (cached by source hash) and disassemble cubins with cuobjdump.

    cubin = compile_cuda(source, "sm_80")     # bytes; ~/.cache/tensorir/cuda/<hash>.cubin
    sass = disassemble(cubin)                 # text, via cuobjdump -sass

``find_nvcc`` looks at ``$TIR_NVCC``, the PATH, ``$CUDA_HOME/bin`` and ``/usr/local/cuda/bin``;
``find_cuobjdump`` at the PATH and at the ``nvidia-cuda-cuobjdump`` wheel
(``site-packages/nvidia/cu*/bin``). The cache directory is ``$TIR_CACHE_DIR/cuda`` when set.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tir.codegen.features import CodegenError

__all__ = [
    "CudaCompileError",
    "compile_cuda",
    "disassemble",
    "find_cuobjdump",
    "find_nvcc",
    "find_nvdisasm",
    "run_cuobjdump",
]


class CudaCompileError(CodegenError):
    """nvcc is missing, or refused the source (the message holds its stderr)."""


def find_nvcc() -> str:
    """The path of nvcc; raises ``CudaCompileError("nvcc not found ...")`` when there is none."""
    candidates = [os.environ.get("TIR_NVCC"), shutil.which("nvcc")]
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            candidates.append(str(Path(home) / "bin" / "nvcc"))
    for candidate in candidates:
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise CudaCompileError(
        "nvcc not found: install the CUDA toolkit and put nvcc on the PATH (or set CUDA_HOME or TIR_NVCC)"
    )


def _nvidia_tool(name: str) -> str | None:
    """``name`` from the PATH or from an ``nvidia-cuda-*`` wheel (``nvidia/cu*/bin`` or ``nvidia/*/bin``)."""
    found = shutil.which(name)
    if found:
        return found
    spec = importlib.util.find_spec("nvidia")
    roots = list(spec.submodule_search_locations or []) if spec is not None else []
    for root in roots:
        for candidate in sorted(Path(root).glob(f"*/bin/{name}")):
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
    return None


def find_cuobjdump() -> str | None:
    """The path of cuobjdump, or None (``pip install nvidia-cuda-cuobjdump``)."""
    return _nvidia_tool("cuobjdump")


def find_nvdisasm() -> str | None:
    """The path of nvdisasm, or None (``pip install nvidia-cuda-nvdisasm``)."""
    return _nvidia_tool("nvdisasm")


def _cache_dir() -> Path:
    base = os.environ.get("TIR_CACHE_DIR")
    root = Path(base) if base else Path.home() / ".cache" / "tensorir"
    return root / "cuda"


def compile_cuda(source: str, arch: str = "sm_80", options: tuple[str, ...] = ("-O3",)) -> bytes:
    """Compile ``source`` to a cubin for ``arch`` with ``nvcc -cubin``; cached by content hash."""
    nvcc = find_nvcc()
    key = hashlib.sha256("\0".join([source, arch, *options]).encode()).hexdigest()[:32]
    cache = _cache_dir()
    cached = cache / f"{key}.cubin"
    if cached.is_file():
        return cached.read_bytes()
    with tempfile.TemporaryDirectory(prefix="tir_cuda_") as tmp:
        src = Path(tmp) / "kernel.cu"
        out = Path(tmp) / "kernel.cubin"
        src.write_text(source)
        command = [nvcc, f"-arch={arch}", "-cubin", *options, "-o", str(out), str(src)]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0 or not out.is_file():
            numbered = "\n".join(f"{n:4d}  {line}" for n, line in enumerate(source.splitlines(), 1))
            raise CudaCompileError(
                f"nvcc failed ({' '.join(command[:-3])}):\n{result.stderr.strip()}\n--- source ---\n{numbered}"
            )
        data = out.read_bytes()
    try:
        cache.mkdir(parents=True, exist_ok=True)
        partial = cache / f"{key}.{os.getpid()}.tmp"
        partial.write_bytes(data)
        partial.replace(cached)  # atomic: a concurrent reader sees all of it or nothing
    except OSError:
        pass  # a read-only home still compiles, just without the cache
    return data


def disassemble(cubin: bytes) -> str:
    """The SASS of ``cubin`` (``cuobjdump -sass``); raises ``CudaCompileError`` without cuobjdump."""
    return run_cuobjdump(cubin, "-sass")


def run_cuobjdump(cubin: bytes, option: str) -> str:
    """``cuobjdump option`` on ``cubin`` (``-sass``, ``-res-usage``): its output; raises
    ``CudaCompileError`` without cuobjdump or when it fails."""
    tool = find_cuobjdump()
    if tool is None:
        raise CudaCompileError("cuobjdump not found: pip install nvidia-cuda-cuobjdump")
    with tempfile.TemporaryDirectory(prefix="tir_cuobjdump_") as tmp:
        path = Path(tmp) / "kernel.cubin"
        path.write_bytes(cubin)
        result = subprocess.run([tool, option, str(path)], capture_output=True, text=True)
    if result.returncode != 0:
        raise CudaCompileError(f"cuobjdump {option} failed:\n{result.stderr.strip()}")
    return result.stdout
