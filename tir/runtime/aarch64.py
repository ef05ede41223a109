"""AArch64 modules: code built for an AArch64 target, run on this machine under qemu.

``tir.build(func, "llvm -mtriple=aarch64-linux-gnu -mattr=+neon,+dotprod")`` ends here, in
:func:`build_aarch64_module`:

1. the LLVM IR text from the code generator is optimized (O3) and compiled to an AArch64 ELF
   object by llvmlite, for the target's triple, CPU and features; the object is position
   independent, so it links into an executable and into a shared library alike;
2. on the first call a small C harness (:func:`harness_source`) is linked with the object by
   the cross compiler, statically (``aarch64-linux-gnu-gcc -O2 -static harness.c kernel.o -o
   kernel -lgomp -lm -lpthread``), so that qemu needs no AArch64 sysroot at run time; the
   executable is kept for the module's lifetime;
3. each call checks its arguments as the host module does (``Module.check_arguments``), writes
   each one to a file (a buffer: the raw bytes of its C-contiguous array; a scalar: the bytes
   of its value), runs ``qemu-aarch64 -cpu max ./kernel ENTRY ... FILE...`` and reads every
   buffer back into its array: outputs are written in place, as with the host module.

The harness calls the entry with the ABI of docs/lowering.md, ``int32_t NAME(void **args)``;
buffers get fresh 64-byte aligned memory. A non-zero status, a crash (a signal) or a run longer
than ``timeout_s`` raises :class:`AArch64RunError` with what the program printed on stderr.

Emulation is for correctness only: :meth:`AArch64Module.time` measures this machine translating
AArch64 instructions, which says nothing about an AArch64 CPU.

The tools come from the Debian packages ``qemu-user``, ``gcc-aarch64-linux-gnu`` and
``libc6-dev-arm64-cross`` (``bash scripts/install.sh --test`` installs them as root). Compiling
and :meth:`AArch64Module.get_source` need only llvmlite; running and exporting need the tools
and raise :class:`AArch64ToolchainError`, naming the packages, when one is missing.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import statistics
import subprocess
import tempfile
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tir.ir import IRModule
from tir.runtime.module import Module, ParamSpec, llvm_source, param_specs
from tir.target import Target

__all__ = [
    "DEBIAN_PACKAGES",
    "AArch64Module",
    "AArch64RunError",
    "AArch64ToolchainError",
    "CrossToolchain",
    "build_aarch64_module",
    "find_toolchain",
    "harness_source",
    "toolchain_missing_reason",
]

#: The Debian packages that provide the emulator, the cross compiler and the AArch64 C library.
DEBIAN_PACKAGES = ("qemu-user", "gcc-aarch64-linux-gnu", "libc6-dev-arm64-cross")

#: Seconds one run under qemu may take before it is killed.
DEFAULT_TIMEOUT_S = 120.0

#: Where the cross C library lives on Debian and Ubuntu.
_SYSROOT = Path("/usr/aarch64-linux-gnu")

#: Exit status the harness uses for its own failures (unreadable file, bad command line).
_HARNESS_FAILURE = 125

#: Libraries every kernel is linked with: OpenMP (parallel loops), math, threads.
_LINK_LIBRARIES = ("-lgomp", "-lm", "-lpthread")

#: Byte alignment of the buffers the harness allocates (a cache line).
_BUFFER_ALIGN = 64


class AArch64ToolchainError(RuntimeError):
    """The cross compiler, the AArch64 C library or qemu-aarch64 is missing."""


class AArch64RunError(RuntimeError):
    """A run under qemu failed: non-zero status, crash, or timeout."""


# ---------------------------------------------------------------- tools


@dataclass(frozen=True)
class CrossToolchain:
    """The tools that link and run AArch64 code on this machine."""

    gcc: str
    qemu: str
    sysroot: Path


def find_toolchain() -> CrossToolchain:
    """The cross gcc, qemu-aarch64 and the AArch64 C library; raises AArch64ToolchainError naming what is missing.

    The environment variables ``TIR_AARCH64_GCC`` and ``TIR_QEMU_AARCH64`` override the tool names.
    """
    gcc_name = os.environ.get("TIR_AARCH64_GCC", "aarch64-linux-gnu-gcc")
    qemu_name = os.environ.get("TIR_QEMU_AARCH64", "qemu-aarch64")
    gcc, qemu = shutil.which(gcc_name), shutil.which(qemu_name)
    missing = []
    if gcc is None:
        missing.append(f"{gcc_name} (package gcc-aarch64-linux-gnu)")
    if not (_SYSROOT / "include" / "stdio.h").exists():
        missing.append(f"the AArch64 C library under {_SYSROOT} (package libc6-dev-arm64-cross)")
    if qemu is None:
        missing.append(f"{qemu_name} (package qemu-user)")
    if missing or gcc is None or qemu is None:
        packages = " ".join(DEBIAN_PACKAGES)
        raise AArch64ToolchainError(
            "running AArch64 code on this machine needs a cross toolchain and qemu; missing: "
            + "; ".join(missing)
            + f". Install the Debian packages {packages} (apt-get install {packages}), "
            "or run `bash scripts/install.sh --test` as root."
        )
    return CrossToolchain(gcc=gcc, qemu=qemu, sysroot=_SYSROOT)


def toolchain_missing_reason() -> str | None:
    """Why AArch64 code cannot run here (a message for pytest skips), or None when it can."""
    try:
        find_toolchain()
    except AArch64ToolchainError as exc:
        return str(exc)
    return None


def _run_tool(command: list[str], what: str, cwd: Path) -> None:
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        raise RuntimeError(f"{what} failed (exit status {result.returncode}): {' '.join(command)}\n{result.stderr}")


# ---------------------------------------------------------------- the harness

_SYMBOL_RE = re.compile(r"^[A-Za-z_.$][A-Za-z0-9_.$]*$")

_HARNESS_TEMPLATE = r"""/* Generated by tir.runtime.aarch64: runs an entry function on arguments read from files.
 *
 *   kernel ENTRY THREADS WARMUP NUMBER REPEAT FILE...
 *
 * One FILE per parameter of ENTRY, in parameter order, holding a buffer's bytes or a scalar's
 * bytes. THREADS (> 0) sets the thread count of parallel loops. ENTRY runs WARMUP times, then
 * REPEAT groups of NUMBER calls are timed, each printing "tir-time-ns <mean ns per call>".
 * Buffers are then written back to their files. The exit status is 0, the entry's non-zero
 * status (its low byte, or 1 when that is 0), or @FAILURE@ when the harness itself fails.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

@DECLARATIONS@
/* Defined by kernels with parallel loops; a weak reference is NULL when there is none. */
extern int32_t tir_num_threads __asm__("__tir_num_threads") __attribute__((weak));

struct entry {
    const char *name;
    int32_t (*function)(void **args);
    int num_args;
    const char *is_buffer; /* one '1' (buffer) or '0' (scalar) per parameter */
};

static const struct entry entries[] = {
@ENTRIES@
};

static void harness_fail(const char *what, const char *path) {
    fprintf(stderr, "tir-harness: %s %s\n", what, path);
    exit(@FAILURE@);
}

static void *read_file(const char *path, size_t *size) {
    FILE *file = fopen(path, "rb");
    if (file == NULL) harness_fail("cannot open", path);
    if (fseek(file, 0, SEEK_END) != 0) harness_fail("cannot seek in", path);
    long length = ftell(file);
    if (length < 0 || fseek(file, 0, SEEK_SET) != 0) harness_fail("cannot size", path);
    void *data = NULL;
    /* Never size 0, so an empty buffer still gets a valid, aligned pointer. */
    if (posix_memalign(&data, @ALIGN@, length > 0 ? (size_t)length : 1) != 0) harness_fail("out of memory reading", path);
    if (length > 0 && fread(data, 1, (size_t)length, file) != (size_t)length) harness_fail("cannot read", path);
    fclose(file);
    *size = (size_t)length;
    return data;
}

static void write_file(const char *path, const void *data, size_t size) {
    FILE *file = fopen(path, "wb");
    if (file == NULL) harness_fail("cannot open for writing", path);
    if (size > 0 && fwrite(data, 1, size, file) != size) harness_fail("cannot write", path);
    if (fclose(file) != 0) harness_fail("cannot close", path);
}

static int64_t now_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "tir-harness: usage: %s ENTRY THREADS WARMUP NUMBER REPEAT FILE...\n", argv[0]);
        return @FAILURE@;
    }
    const struct entry *entry = NULL;
    for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); i++)
        if (strcmp(entries[i].name, argv[1]) == 0) entry = &entries[i];
    if (entry == NULL) harness_fail("no entry function named", argv[1]);
    if (argc != 6 + entry->num_args) {
        fprintf(stderr, "tir-harness: %s takes %d arguments, got %d files\n", entry->name, entry->num_args, argc - 6);
        return @FAILURE@;
    }
    long threads = strtol(argv[2], NULL, 10), warmup = strtol(argv[3], NULL, 10);
    long number = strtol(argv[4], NULL, 10), repeat = strtol(argv[5], NULL, 10);
    if (threads > 0 && &tir_num_threads != NULL) tir_num_threads = (int32_t)threads;
    void **args = calloc((size_t)entry->num_args + 1, sizeof(void *));
    size_t *sizes = calloc((size_t)entry->num_args + 1, sizeof(size_t));
    if (args == NULL || sizes == NULL) harness_fail("out of memory for", "the argument array");
    for (int i = 0; i < entry->num_args; i++) args[i] = read_file(argv[6 + i], &sizes[i]);
    int32_t status = 0;
    for (long w = 0; status == 0 && w < warmup; w++) status = entry->function(args);
    for (long r = 0; status == 0 && r < repeat; r++) {
        int64_t start = now_ns();
        for (long n = 0; status == 0 && n < number; n++) status = entry->function(args);
        int64_t stop = now_ns();
        printf("tir-time-ns %lld\n", (long long)((stop - start) / (number > 0 ? number : 1)));
    }
    fflush(stdout);
    if (status != 0) {
        fprintf(stderr, "tir-harness: %s returned status %d%s\n", entry->name, (int)status,
                status == -1 ? " (a heap allocation failed)" : "");
        return (status & 0xff) != 0 ? (status & 0xff) : 1;
    }
    for (int i = 0; i < entry->num_args; i++)
        if (entry->is_buffer[i] == '1') write_file(argv[6 + i], args[i], sizes[i]);
    return 0;
}
"""


def harness_source(entries: Mapping[str, Sequence[bool]], align: int = _BUFFER_ALIGN) -> str:
    """C source of the program that runs entry functions on arguments read from files.

    ``entries`` maps each entry function's symbol to one flag per parameter: True for a buffer
    (the file's bytes are the data), False for a scalar (the file holds its value). ``align``
    is the byte alignment of buffer memory (a power of two, at least 8). The source's header
    comment gives the command line.
    """
    if align < 8 or align & (align - 1):
        raise ValueError(f"buffer alignment must be a power of two >= 8, got {align}")
    declarations, rows = [], []
    for index, (name, flags) in enumerate(entries.items()):
        if not _SYMBOL_RE.match(name):
            raise ValueError(f"entry function name {name!r} is not a valid symbol name")
        # An asm label binds the C name to the symbol, whatever C would make of the name.
        declarations.append(f'extern int32_t tir_entry_{index}(void **args) __asm__("{name}");')
        pattern = "".join("1" if is_buffer else "0" for is_buffer in flags)
        rows.append(f'    {{"{name}", tir_entry_{index}, {len(flags)}, "{pattern}"}},')
    replacements = {
        "@DECLARATIONS@": "\n".join(declarations),
        "@ENTRIES@": "\n".join(rows) if rows else '    {"", NULL, 0, ""},',
        "@ALIGN@": str(align),
        "@FAILURE@": str(_HARNESS_FAILURE),
    }
    text = _HARNESS_TEMPLATE
    for key, value in replacements.items():
        text = text.replace(key, value)
    return text


# ---------------------------------------------------------------- the module


class AArch64Module(Module):
    """A module compiled for AArch64, run under ``qemu-aarch64 -cpu max`` (see the module docstring).

    Call it like the host module: ``m(a, b, c)`` checks the arguments, runs the entry and writes
    outputs into the arrays in place; ``m["other"](...)`` runs another entry function.
    """

    def __init__(
        self,
        ir_text: str,
        ir_module: IRModule,
        target: Target | str,
        entry_name: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        from tir.codegen.llvm_target import emit_object, optimize, parse_ir

        target = Target.parse(target)
        if target.isa != "aarch64":
            raise ValueError(f"AArch64Module needs an AArch64 target, got {target.text!r} (triple {target.triple})")
        super().__init__(ir_module, target, entry_name)
        self.timeout_s = timeout_s
        self.unoptimized_ir = ir_text
        self.optimized_ir = str(optimize(parse_ir(ir_text), target))
        #: The AArch64 ELF relocatable object (position independent) compiled from the IR.
        self.object_code: bytes = emit_object(self.optimized_ir, target)
        self._asm: str | None = None
        self._workdir = Path(tempfile.mkdtemp(prefix=f"tir-aarch64-{self.entry_name}-"))
        self._cleanup = weakref.finalize(self, shutil.rmtree, self._workdir, True)
        self._link_lock = threading.Lock()
        self._executable: Path | None = None

    # ------------------------------------------------------------ linking

    def _buffer_align(self) -> int:
        align = max([_BUFFER_ALIGN, *(spec.align for name in self.entry_names for spec in self._specs_of(name))])
        return 1 << (align - 1).bit_length()  # a power of two, as posix_memalign needs

    def executable(self) -> Path:
        """The static AArch64 program running this module's entries (linked on first use, then kept).

        Its command line is ``ENTRY THREADS WARMUP NUMBER REPEAT FILE...`` (see :func:`harness_source`).
        """
        with self._link_lock:
            if self._executable is None:
                toolchain = find_toolchain()
                build = self._workdir / "build"
                build.mkdir(exist_ok=True)
                entries = {name: [spec.is_buffer for spec in self._specs_of(name)] for name in self.entry_names}
                (build / "harness.c").write_text(harness_source(entries, self._buffer_align()))
                (build / "kernel.o").write_bytes(self.object_code)
                command = [toolchain.gcc, "-O2", "-static", "harness.c", "kernel.o", "-o", "kernel", *_LINK_LIBRARIES]
                _run_tool(command, "linking the AArch64 harness", build)
                self._executable = build / "kernel"
            return self._executable

    def _specs_of(self, name: str) -> tuple[ParamSpec, ...]:
        return param_specs(self.ir_module[name])

    # ------------------------------------------------------------ running

    def _run(self, name: str, values: list[Any]) -> None:
        self._execute(name, values, warmup=1, number=1, repeat=0)

    def _time(self, values: list[Any], repeat: int, number: int, warmup: int) -> float:
        samples = self._execute(self.entry_name, values, warmup=warmup, number=number, repeat=repeat)
        return float(statistics.median(samples))

    def time(self, *args: Any, repeat: int = 10, number: int = 1, warmup: int = 1) -> float:
        """Median seconds of one call, measured inside the emulated program.

        Under qemu this measures this machine translating AArch64 instructions: the number says
        nothing about an AArch64 CPU. It is here so that code written for any module runs.
        """
        return super().time(*args, repeat=repeat, number=number, warmup=warmup)

    def _execute(self, name: str, values: list[Any], warmup: int, number: int, repeat: int) -> list[float]:
        """Run entry ``name`` on checked values under qemu; read buffers back; the timed seconds per call."""
        executable = self.executable()
        qemu = find_toolchain().qemu
        buffers = [spec.is_buffer for spec in self._specs_of(name)]
        with tempfile.TemporaryDirectory(dir=self._workdir, prefix="call-") as scratch:
            files = [Path(scratch) / f"arg{position}.bin" for position in range(len(values))]
            for path, value in zip(files, values):
                path.write_bytes(np.asarray(value).tobytes())  # C order: the arrays are C-contiguous
            settings = [name, str(self.num_threads), str(warmup), str(number), str(repeat)]
            command = [qemu, "-cpu", "max", str(executable), *settings, *map(str, files)]
            try:
                # In the scratch directory, so that a core file of a crash is deleted with it.
                result = subprocess.run(
                    command, capture_output=True, text=True, errors="replace", timeout=self.timeout_s, cwd=scratch
                )
            except subprocess.TimeoutExpired:
                raise AArch64RunError(
                    f"{name} on AArch64 (qemu-aarch64 -cpu max) ran longer than {self.timeout_s:g} s and was killed"
                ) from None
            if result.returncode != 0:
                raise AArch64RunError(_failure_message(name, result))
            for path, value, is_buffer in zip(files, values, buffers):
                if is_buffer:
                    _read_back(name, path, value)
        return [int(line.split()[1]) * 1e-9 for line in result.stdout.splitlines() if line.startswith("tir-time-ns ")]

    # ------------------------------------------------------------ artifacts

    def get_source(self, fmt: str = "ll") -> str:
        """``"ll"``: the optimized LLVM IR; ``"asm"``: AArch64 assembly; ``"ll-unopt"``: the IR as generated."""
        return llvm_source(self, fmt)

    def export_library(self, path: str | os.PathLike[str]) -> str:
        """Write an AArch64 shared library exporting ``int32_t NAME(void **args)``; returns its path.

        A shared object (``aarch64-linux-gnu-gcc -shared -o PATH kernel.o -lgomp -lm -lpthread``)
        for an AArch64 Linux machine, like the host module's export; it cannot be loaded here.
        :meth:`export_executable` writes the static program that runs under qemu instead.
        """
        toolchain = find_toolchain()
        destination = Path(path).resolve()
        destination.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=self._workdir, prefix="export-") as scratch:
            (Path(scratch) / "kernel.o").write_bytes(self.object_code)
            command = [toolchain.gcc, "-shared", "-o", str(destination), "kernel.o", *_LINK_LIBRARIES]
            _run_tool(command, "linking the AArch64 shared library", Path(scratch))
        return str(destination)

    def export_executable(self, path: str | os.PathLike[str]) -> str:
        """Copy the static AArch64 program of :meth:`executable` to ``path``; returns its path."""
        destination = Path(path)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self.executable(), destination)
        destination.chmod(0o755)
        return str(destination)


def _read_back(name: str, path: Path, array: np.ndarray) -> None:
    """Copy the bytes the harness wrote for a buffer into ``array``, if they changed."""
    data = path.read_bytes()
    if len(data) != array.nbytes:
        raise AArch64RunError(f"{name}: the harness wrote {len(data)} bytes to {path.name}, expected {array.nbytes}")
    if data != array.tobytes():  # inputs stay untouched (they may be read-only)
        array.reshape(-1)[...] = np.frombuffer(data, dtype=array.dtype)


def _failure_message(name: str, result: subprocess.CompletedProcess[str]) -> str:
    code = result.returncode
    if code < 0:
        try:
            how = f"crashed with signal {signal.Signals(-code).name}"
        except ValueError:
            how = f"crashed with signal {-code}"
    elif code == _HARNESS_FAILURE:
        how = "failed in the harness"
    else:
        how = f"failed with exit status {code}"
    stderr = result.stderr.strip() or "(nothing on stderr)"
    return f"{name} on AArch64 (qemu-aarch64 -cpu max) {how}:\n{stderr}"


def build_aarch64_module(
    ir_text: str, mod: IRModule, target: Target | str, entry_name: str | None = None
) -> AArch64Module:
    """Compile ``ir_text`` (``codegen_llvm(mod, target)``) for AArch64; the module runs under qemu.

    ``entry_name`` picks the function a plain call runs (default: the first entry function).
    """
    return AArch64Module(ir_text, mod, Target.parse(target), entry_name)
