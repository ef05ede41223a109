"""Compilation targets, parsed from strings, with the features and limits passes need.

    Target.parse("llvm")                                   # this machine: CPU and features detected
    Target.parse("llvm -mcpu=skylake-avx512")
    Target.parse("llvm -mtriple=aarch64-linux-gnu -mattr=+neon,+dotprod")
    Target.parse("cuda -arch=sm_90")

Features are kept without the leading ``+`` (``"avx2"``, ``"dotprod"``). They matter before code
generation: LLVM aborts the whole process when asked to select an instruction the target lacks,
so every use of a target-specific intrinsic is checked against ``target.features`` first.
"""

from __future__ import annotations

import functools
import os
import shlex
from dataclasses import dataclass, field

#: Features implied by a CPU name, for -mcpu without -mattr on a CPU other than the host's.
#: Only CPUs the project's intrinsics care about; the set lists what our codegen checks.
_X86_BASE = ("sse", "sse2", "cx8", "cmov", "fxsr", "mmx", "64bit")
_X86_V3 = _X86_BASE + ("sse3", "ssse3", "sse4.1", "sse4.2", "popcnt", "avx", "avx2", "fma", "f16c", "bmi", "bmi2")
_AVX512 = ("avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl")
_CPU_FEATURES: dict[str, tuple[str, ...]] = {
    "x86-64": _X86_BASE,
    "x86-64-v2": _X86_BASE + ("sse3", "ssse3", "sse4.1", "sse4.2", "popcnt"),
    "x86-64-v3": _X86_V3,
    "x86-64-v4": _X86_V3 + _AVX512,
    "haswell": _X86_V3,
    "broadwell": _X86_V3,
    "skylake": _X86_V3,
    "znver1": _X86_V3,
    "znver2": _X86_V3,
    "znver3": _X86_V3,
    "znver4": _X86_V3 + _AVX512 + ("avx512vnni", "avx512bf16"),
    "skylake-avx512": _X86_V3 + _AVX512,
    "cascadelake": _X86_V3 + _AVX512 + ("avx512vnni",),
    "icelake-server": _X86_V3 + _AVX512 + ("avx512vnni",),
    "sapphirerapids": _X86_V3 + _AVX512 + ("avx512vnni", "avx512bf16", "avxvnni", "amx-int8"),
    "generic": (),
    "cortex-a55": ("neon", "dotprod"),
    "cortex-a76": ("neon", "dotprod"),
    "neoverse-n1": ("neon", "dotprod"),
    "neoverse-v1": ("neon", "dotprod", "sve", "i8mm"),
    "apple-m1": ("neon", "dotprod"),
}

#: CUDA limits per compute capability family: (max shared memory per block in bytes with opt-in,
#: registers per thread).
_CUDA_SHARED_MEMORY = {70: 96 * 1024, 75: 64 * 1024, 80: 163 * 1024, 86: 99 * 1024, 89: 99 * 1024, 90: 227 * 1024}

#: CUDA limits on one launch dimension (vthread.* are virtual: only the 32-bit range).
_CUDA_THREAD_EXTENTS = {
    "threadIdx.x": 1024,
    "threadIdx.y": 1024,
    "threadIdx.z": 64,
    "blockIdx.x": 2**31 - 1,
    "blockIdx.y": 65535,
    "blockIdx.z": 65535,
}


class TargetError(ValueError):
    """A malformed target string or an unsupported target."""


@dataclass(frozen=True)
class Target:
    """A code-generation target. Build one with ``Target.parse``."""

    kind: str  # "llvm" or "cuda"
    triple: str = ""
    cpu: str = ""
    features: frozenset[str] = field(default_factory=frozenset)
    arch: str = ""  # CUDA: "sm_80"
    text: str = ""  # the string it was parsed from

    # ---------------------------------------------------------------- construction

    @staticmethod
    def parse(spec: str | Target | None) -> Target:
        if isinstance(spec, Target):
            return spec
        return _parse_cached("llvm" if spec is None else spec)

    @staticmethod
    def host() -> Target:
        return _parse_cached("llvm")

    def __str__(self) -> str:
        return self.text

    # ---------------------------------------------------------------- properties

    @property
    def is_cpu(self) -> bool:
        return self.kind == "llvm"

    @property
    def is_cuda(self) -> bool:
        return self.kind == "cuda"

    @property
    def isa(self) -> str:
        """``"x86_64"``, ``"aarch64"`` or ``"cuda"``."""
        if self.is_cuda:
            return "cuda"
        head = self.triple.split("-", 1)[0]
        return "aarch64" if head in ("aarch64", "arm64") else head

    @property
    def is_host(self) -> bool:
        """Whether code for this target runs natively in this process."""
        return self.is_cpu and self.triple == _host_triple() and self.features <= _host_features()

    def has(self, feature: str) -> bool:
        return feature.lstrip("+") in self.features

    @property
    def vector_bytes(self) -> int:
        """Width of the widest native vector register, in bytes."""
        if self.isa == "x86_64":
            if "avx512f" in self.features:
                return 64
            return 32 if "avx" in self.features else 16
        if self.isa == "aarch64":
            return 16
        return 16

    @property
    def num_cores(self) -> int:
        """Cores of this machine (CPU targets): the thread count parallel loops use by default."""
        return (os.cpu_count() or 1) if self.is_cpu else 1

    # CUDA limits (docs/design.md section 6 uses them in the validator).
    @property
    def compute_capability(self) -> int:
        if not self.is_cuda:
            return 0
        return int(self.arch.removeprefix("sm_").rstrip("a"))

    @property
    def max_threads_per_block(self) -> int:
        return 1024 if self.is_cuda else 1

    @property
    def warp_size(self) -> int:
        return 32 if self.is_cuda else 1

    def max_thread_extent(self, tag: str) -> int:
        """The largest extent of a loop bound to thread tag ``tag`` (CUDA launch limits; 0 on a CPU)."""
        if not self.is_cuda:
            return 0
        return _CUDA_THREAD_EXTENTS.get(tag, 2**31 - 1)

    @property
    def max_shared_memory_per_block(self) -> int:
        if not self.is_cuda:
            return 0
        best = 48 * 1024
        for capability, limit in sorted(_CUDA_SHARED_MEMORY.items()):
            if self.compute_capability >= capability:
                best = limit
        return best

    def llvm_features(self) -> str:
        """The ``-mattr`` string for LLVM: ``+avx2,+fma,...``."""
        return ",".join("+" + name for name in sorted(self.features))


@functools.cache
def _host_triple() -> str:
    import llvmlite.binding as llvm

    return _normalize_triple(llvm.get_process_triple())


@functools.cache
def _host_cpu() -> str:
    import llvmlite.binding as llvm

    return llvm.get_host_cpu_name()


@functools.cache
def _host_features() -> frozenset[str]:
    import llvmlite.binding as llvm

    try:
        features = llvm.get_host_cpu_features()
    except RuntimeError:  # some hosts do not report features
        return frozenset(_CPU_FEATURES.get(_host_cpu(), ()))
    return frozenset(name for name, enabled in features.items() if enabled)


def _normalize_triple(triple: str) -> str:
    parts = triple.split("-")
    arch = {"arm64": "aarch64", "amd64": "x86_64"}.get(parts[0], parts[0])
    if arch == "aarch64":
        return "aarch64-unknown-linux-gnu"
    if arch == "x86_64":
        return "x86_64-unknown-linux-gnu"
    return "-".join([arch, *parts[1:]])


@functools.cache
def _parse_cached(spec: str) -> Target:
    try:
        words = shlex.split(spec)
    except ValueError as exc:
        raise TargetError(f"malformed target string {spec!r}: {exc}") from None
    if not words:
        raise TargetError("empty target string; expected e.g. 'llvm' or 'cuda -arch=sm_80'")
    kind, options = words[0], words[1:]
    values: dict[str, str] = {}
    for option in options:
        if not option.startswith("-") or "=" not in option:
            raise TargetError(f"target option {option!r} in {spec!r} is not of the form -key=value")
        key, value = option.lstrip("-").split("=", 1)
        values[key] = value
    if kind == "llvm":
        return _parse_llvm(spec, values)
    if kind == "cuda":
        return _parse_cuda(spec, values)
    raise TargetError(f"unknown target kind {kind!r} in {spec!r}; expected 'llvm' or 'cuda'")


def _parse_llvm(spec: str, values: dict[str, str]) -> Target:
    unknown = set(values) - {"mcpu", "mtriple", "mattr"}
    if unknown:
        raise TargetError(f"unknown llvm target option(s) {sorted(unknown)} in {spec!r}; known: -mcpu, -mtriple, -mattr")
    triple = _normalize_triple(values.get("mtriple", _host_triple()))
    isa = triple.split("-", 1)[0]
    if isa not in ("x86_64", "aarch64"):
        raise TargetError(f"unsupported target triple {triple!r}; supported: x86_64 and aarch64 Linux")
    on_host = triple == _host_triple()
    cpu = values.get("mcpu", _host_cpu() if on_host else "generic")
    if "mcpu" not in values and on_host:
        features = set(_host_features())
    elif cpu == _host_cpu() and on_host:
        features = set(_host_features())
    elif cpu in _CPU_FEATURES:
        features = set(_CPU_FEATURES[cpu])
    else:
        features = set()
    if isa == "aarch64":
        features.add("neon")  # baseline of every AArch64 CPU
    elif isa == "x86_64":
        features.update(_X86_BASE)
    if "mcpu" in values:
        _check_llvm_name(spec, triple, "processor", cpu)
    for item in filter(None, values.get("mattr", "").split(",")):
        name = item.lstrip("+-")
        if not name:
            raise TargetError(f"empty feature in -mattr of {spec!r}")
        _check_llvm_name(spec, triple, "feature", name)
        if item.startswith("-"):
            features.discard(name)
        else:
            features.add(name)
    return Target("llvm", triple=triple, cpu=cpu, features=frozenset(features), text=spec)


_LLVM_HELP_SCRIPT = """
import llvmlite.binding as llvm
llvm.initialize_all_targets()
llvm.Target.from_triple({triple!r}).create_target_machine(cpu="help", features="")
"""


@functools.cache
def _llvm_names(triple: str) -> dict[str, frozenset[str]]:
    """The processor and feature names LLVM knows for ``triple``.

    LLVM lists them on stderr when asked for the processor "help"; that listing runs in a child
    process, because LLVM reports a bad name only as a warning, and some bad combinations abort
    the process ("LLVM ERROR: 64-bit code requested...") instead of raising.
    """
    import subprocess
    import sys

    try:
        done = subprocess.run(
            [sys.executable, "-c", _LLVM_HELP_SCRIPT.format(triple=triple)], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.SubprocessError):
        return {}
    names: dict[str, set[str]] = {"processor": set(), "feature": set()}
    section = None
    for line in (done.stderr + done.stdout).splitlines():
        if line.startswith("Available CPUs"):
            section = "processor"
        elif line.startswith("Available features"):
            section = "feature"
        elif section and line.startswith("  ") and line.strip():
            names[section].add(line.split()[0])
        elif line.strip() and not line.startswith(" "):
            section = None if not line.startswith("Available") else section
    if not names["processor"]:
        return {}  # no listing (an LLVM that does not print one): nothing to check against
    return {kind: frozenset(found) for kind, found in names.items()}


def _check_llvm_name(spec: str, triple: str, kind: str, name: str) -> None:
    """Refuse a processor or feature LLVM does not know for the triple, suggesting the closest."""
    if kind == "processor" and name in ("generic", _host_cpu()):
        return
    known = _llvm_names(triple).get(kind)
    if not known or name in known:
        return
    import difflib

    close = difflib.get_close_matches(name, sorted(known), n=3)
    hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
    option = "-mcpu" if kind == "processor" else "-mattr"
    raise TargetError(
        f"{option}: {name!r} is not a {kind} LLVM knows for {triple} in {spec!r}{hint} "
        f"(it knows {len(known)}: {', '.join(sorted(known)[:8])}, ...)"
    )


def _parse_cuda(spec: str, values: dict[str, str]) -> Target:
    unknown = set(values) - {"arch"}
    if unknown:
        raise TargetError(f"unknown cuda target option(s) {sorted(unknown)} in {spec!r}; known: -arch")
    arch = values.get("arch", "sm_80")
    if not arch.startswith("sm_") or not arch.removeprefix("sm_").rstrip("a").isdigit():
        raise TargetError(f"bad CUDA arch {arch!r} in {spec!r}; expected e.g. sm_80 or sm_90")
    return Target("cuda", arch=arch, text=spec)
