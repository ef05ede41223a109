"""The AArch64 runtime on hand-written LLVM IR: compile, link, run under qemu, report failures.

These tests need neither the lowering passes nor the LLVM code generator: each kernel is LLVM
IR text following the entry ABI (``int32_t NAME(void **args)``), with a PrimFunc whose body is
empty describing its parameters. Tests that run code need qemu-aarch64 and the cross toolchain
(marker ``aarch64``); the assembly and error-message tests need only llvmlite.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tir.ir import Buffer, Evaluate, IntImm, IRModule, PrimFunc, Var
from tir.runtime.aarch64 import (
    DEBIAN_PACKAGES,
    AArch64Module,
    AArch64RunError,
    AArch64ToolchainError,
    build_aarch64_module,
    find_toolchain,
    harness_source,
    toolchain_missing_reason,
)
from tir.target import Target

TARGET = Target.parse("llvm -mtriple=aarch64-linux-gnu -mattr=+neon,+dotprod")

_MISSING = toolchain_missing_reason()
needs_qemu = pytest.mark.skipif(_MISSING is not None, reason=f"AArch64 tools missing: {_MISSING}")

# ---------------------------------------------------------------- kernels

#: C[0:4] += sdot(A, B) + s: sixteen int8 pairs, four int32 lanes, one scalar parameter.
SDOT_IR = """
define i32 @sdot4(ptr %args) {
entry:
  %pa = load ptr, ptr %args
  %q1 = getelementptr ptr, ptr %args, i64 1
  %pb = load ptr, ptr %q1
  %q2 = getelementptr ptr, ptr %args, i64 2
  %pc = load ptr, ptr %q2
  %q3 = getelementptr ptr, ptr %args, i64 3
  %ps = load ptr, ptr %q3
  %s = load i32, ptr %ps
  %a = load <16 x i8>, ptr %pa, align 1
  %b = load <16 x i8>, ptr %pb, align 1
  %c = load <4 x i32>, ptr %pc, align 4
  %d = call <4 x i32> @llvm.aarch64.neon.sdot.v4i32.v16i8(<4 x i32> %c, <16 x i8> %a, <16 x i8> %b)
  %one = insertelement <4 x i32> poison, i32 %s, i64 0
  %splat = shufflevector <4 x i32> %one, <4 x i32> poison, <4 x i32> zeroinitializer
  %e = add <4 x i32> %d, %splat
  store <4 x i32> %e, ptr %pc, align 4
  ret i32 0
}
declare <4 x i32> @llvm.aarch64.neon.sdot.v4i32.v16i8(<4 x i32>, <16 x i8>, <16 x i8>)
"""

#: B[i] = A[i] * x for i < 64 (float32 buffers, a float64 scalar narrowed to float32), four lanes
#: at a time, as the code generator writes a vectorized loop.
SCALE_IR = """
define i32 @scale(ptr %args) {
entry:
  %pa = load ptr, ptr %args
  %q1 = getelementptr ptr, ptr %args, i64 1
  %pb = load ptr, ptr %q1
  %q2 = getelementptr ptr, ptr %args, i64 2
  %px = load ptr, ptr %q2
  %x64 = load double, ptr %px
  %x = fptrunc double %x64 to float
  %one = insertelement <4 x float> poison, float %x, i64 0
  %splat = shufflevector <4 x float> %one, <4 x float> poison, <4 x i32> zeroinitializer
  br label %loop
loop:
  %i = phi i64 [ 0, %entry ], [ %next, %loop ]
  %src = getelementptr float, ptr %pa, i64 %i
  %v = load <4 x float>, ptr %src, align 4
  %w = fmul <4 x float> %v, %splat
  %dst = getelementptr float, ptr %pb, i64 %i
  store <4 x float> %w, ptr %dst, align 4
  %next = add i64 %i, 4
  %done = icmp eq i64 %next, 64
  br i1 %done, label %exit, label %loop
exit:
  ret i32 0
}
"""

#: Returns status 7 without touching its buffer.
STATUS_IR = """
define i32 @fails(ptr %args) {
entry:
  ret i32 7
}
"""

#: Executes a trap instruction: the emulated process dies of a signal.
TRAP_IR = """
define i32 @traps(ptr %args) {
entry:
  call void @llvm.trap()
  unreachable
}
declare void @llvm.trap()
"""

#: Never returns (a volatile store keeps the loop alive).
SPIN_IR = """
define i32 @spins(ptr %args) {
entry:
  %p = load ptr, ptr %args
  br label %loop
loop:
  store volatile i32 1, ptr %p
  br label %loop
}
"""

#: A[t] = t + 1 for every thread t of a GOMP_parallel launch with 4 threads (libgomp, linked statically).
PARALLEL_IR = """
%closure = type { ptr }
declare void @GOMP_parallel(ptr, ptr, i32, i32)
declare i32 @omp_get_thread_num()

define internal void @body(ptr %data) {
entry:
  %pa = load ptr, ptr %data
  %t = call i32 @omp_get_thread_num()
  %t64 = sext i32 %t to i64
  %dst = getelementptr i32, ptr %pa, i64 %t64
  %v = add i32 %t, 1
  store i32 %v, ptr %dst
  ret void
}

define i32 @threads(ptr %args) {
entry:
  %pa = load ptr, ptr %args
  %c = alloca %closure
  store ptr %pa, ptr %c
  call void @GOMP_parallel(ptr @body, ptr %c, i32 4, i32 0)
  ret i32 0
}
"""

#: Two entries: ``threads_seen`` stores the runtime's thread setting, ``negate`` negates in place.
TWO_ENTRIES_IR = """
@__tir_num_threads = global i32 0, align 4

define i32 @threads_seen(ptr %args) {
entry:
  %pa = load ptr, ptr %args
  %n = load i32, ptr @__tir_num_threads
  store i32 %n, ptr %pa
  ret i32 0
}

define i32 @negate(ptr %args) {
entry:
  %pa = load ptr, ptr %args
  %v = load <2 x double>, ptr %pa, align 8
  %w = fneg <2 x double> %v
  store <2 x double> %w, ptr %pa, align 8
  ret i32 0
}
"""


def describe(name: str, *params: Buffer | Var) -> IRModule:
    """An IRModule whose one function has ``params`` and an empty body: what the runtime reads."""
    return IRModule({name: PrimFunc(name, tuple(params), Evaluate(IntImm(0)))})


def sdot_module() -> AArch64Module:
    a, b = Buffer("A", (16,), "int8"), Buffer("B", (16,), "int8")
    c, s = Buffer("C", (4,), "int32"), Var("s", "int32")
    return build_aarch64_module(SDOT_IR, describe("sdot4", a, b, c, s), TARGET)


def scale_module() -> AArch64Module:
    a, b, x = Buffer("A", (8, 8), "float32"), Buffer("B", (8, 8), "float32"), Var("x", "float64")
    return build_aarch64_module(SCALE_IR, describe("scale", a, b, x), TARGET)


def sdot_reference(a: np.ndarray, b: np.ndarray, c: np.ndarray, s: int) -> np.ndarray:
    return c + (a.astype(np.int32) * b.astype(np.int32)).reshape(4, 4).sum(axis=1) + s


@pytest.fixture(scope="module")
def sdot() -> AArch64Module:
    return sdot_module()


# ---------------------------------------------------------------- compiling (llvmlite only)


def test_sdot_assembly_uses_the_dot_product_instruction(sdot: AArch64Module) -> None:
    asm = sdot.get_source("asm")
    assert "sdot\tv" in asm and ".16b" in asm, asm
    assert sdot.get_source("ll-unopt") == SDOT_IR
    assert "llvm.aarch64.neon.sdot" in sdot.get_source("ll")
    with pytest.raises(ValueError, match="unknown source format"):
        sdot.get_source("ptx")


def test_vector_loop_uses_neon_registers() -> None:
    asm = scale_module().get_source("asm")
    assert "fmul\tv" in asm and ".4s" in asm, asm


def test_object_is_an_aarch64_elf(sdot: AArch64Module) -> None:
    obj = sdot.object_code
    assert obj[:4] == b"\x7fELF"
    assert int.from_bytes(obj[16:18], "little") == 1  # e_type: ET_REL
    assert int.from_bytes(obj[18:20], "little") == 183  # e_machine: EM_AARCH64


def test_non_aarch64_target_is_refused() -> None:
    with pytest.raises(ValueError, match="needs an AArch64 target"):
        build_aarch64_module(STATUS_IR, describe("fails"), Target.parse("llvm -mtriple=x86_64-linux-gnu"))


def test_harness_source_calls_each_entry_through_its_symbol() -> None:
    text = harness_source({"my_kernel": [True, False], "other.fn": []}, align=128)
    assert 'extern int32_t tir_entry_0(void **args) __asm__("my_kernel");' in text
    assert '{"my_kernel", tir_entry_0, 2, "10"},' in text
    assert '{"other.fn", tir_entry_1, 0, ""},' in text
    assert "posix_memalign(&data, 128," in text
    with pytest.raises(ValueError, match="not a valid symbol"):
        harness_source({'bad"name': []})
    with pytest.raises(ValueError, match="power of two"):
        harness_source({}, align=24)


def test_missing_tools_name_the_debian_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIR_QEMU_AARCH64", "no-such-qemu-aarch64")
    monkeypatch.setenv("TIR_AARCH64_GCC", "no-such-aarch64-gcc")
    with pytest.raises(AArch64ToolchainError) as info:
        find_toolchain()
    message = str(info.value)
    for package in DEBIAN_PACKAGES:
        assert package in message
    assert "no-such-qemu-aarch64" in message and "no-such-aarch64-gcc" in message
    assert "bash scripts/install.sh --test" in message


def test_call_without_tools_raises_the_toolchain_error(monkeypatch: pytest.MonkeyPatch) -> None:
    module = sdot_module()  # compiling needs no tools
    monkeypatch.setenv("TIR_AARCH64_GCC", "no-such-aarch64-gcc")
    c = np.zeros(4, np.int32)
    with pytest.raises(AArch64ToolchainError, match="gcc-aarch64-linux-gnu"):
        module(np.zeros(16, np.int8), np.zeros(16, np.int8), c, 0)


# ---------------------------------------------------------------- running under qemu


@pytest.mark.aarch64
@needs_qemu
def test_sdot_runs_and_matches_numpy(sdot: AArch64Module) -> None:
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, 16, dtype=np.int8)
    b = rng.integers(-128, 128, 16, dtype=np.int8)
    a[:4], b[:4] = -128, -128  # the largest products
    c = rng.integers(-1000, 1000, 4, dtype=np.int32)
    want = sdot_reference(a, b, c, 5)
    a_before, b_before = a.copy(), b.copy()
    sdot(a, b, c, 5)
    np.testing.assert_array_equal(c, want)
    np.testing.assert_array_equal(a, a_before)
    np.testing.assert_array_equal(b, b_before)


@pytest.mark.aarch64
@needs_qemu
def test_vectorized_float_kernel_with_a_scalar_runs() -> None:
    module = scale_module()
    a = np.random.default_rng(1).standard_normal((8, 8)).astype(np.float32)
    b = np.zeros((8, 8), np.float32)
    module(a, b, 0.5)
    np.testing.assert_array_equal(b, a * np.float32(0.5))


@pytest.mark.aarch64
@needs_qemu
def test_parallel_launch_links_libgomp_statically() -> None:
    module = build_aarch64_module(PARALLEL_IR, describe("threads", Buffer("A", (4,), "int32")), TARGET)
    a = np.zeros(4, np.int32)
    module(a)
    np.testing.assert_array_equal(a, [1, 2, 3, 4])


@pytest.mark.aarch64
@needs_qemu
def test_thread_setting_reaches_the_kernel_and_other_entries_run() -> None:
    seen = Buffer("A", (1,), "int32")
    mod = IRModule(
        {
            "threads_seen": PrimFunc("threads_seen", (seen,), Evaluate(IntImm(0))),
            "negate": PrimFunc("negate", (Buffer("X", (2,), "float64"),), Evaluate(IntImm(0))),
        }
    )
    module = build_aarch64_module(TWO_ENTRIES_IR, mod, TARGET)
    assert module.entry_names == ("threads_seen", "negate")
    a = np.zeros(1, np.int32)
    module.set_num_threads(3)
    module(a)
    assert a[0] == 3
    x = np.array([1.5, -2.0])
    module["negate"](x)
    np.testing.assert_array_equal(x, [-1.5, 2.0])
    with pytest.raises(TypeError, match="takes 1 arguments"):
        module["negate"](x, x)
    assert build_aarch64_module(TWO_ENTRIES_IR, mod, TARGET, entry_name="negate").entry_name == "negate"


@pytest.mark.aarch64
@needs_qemu
def test_non_zero_status_raises_with_the_harness_message() -> None:
    module = build_aarch64_module(STATUS_IR, describe("fails", Buffer("A", (2,), "float32")), TARGET)
    a = np.ones(2, np.float32)
    with pytest.raises(AArch64RunError, match=r"exit status 7(.|\n)*fails returned status 7"):
        module(a)


@pytest.mark.aarch64
@needs_qemu
def test_crash_raises_naming_the_signal() -> None:
    module = build_aarch64_module(TRAP_IR, describe("traps", Buffer("A", (2,), "float32")), TARGET)
    with pytest.raises(AArch64RunError, match=r"traps on AArch64 .* crashed with signal SIG"):
        module(np.ones(2, np.float32))


@pytest.mark.aarch64
@needs_qemu
def test_a_run_past_the_timeout_is_killed() -> None:
    module = AArch64Module(SPIN_IR, describe("spins", Buffer("A", (1,), "int32")), TARGET, timeout_s=1.0)
    with pytest.raises(AArch64RunError, match="longer than 1 s and was killed"):
        module(np.zeros(1, np.int32))


@pytest.mark.aarch64
@needs_qemu
def test_time_reports_seconds_per_call(sdot: AArch64Module) -> None:
    c = np.zeros(4, np.int32)
    seconds = sdot.time(np.ones(16, np.int8), np.ones(16, np.int8), c, 0, number=5, repeat=2)
    assert isinstance(seconds, float) and 0.0 <= seconds < 1.0


@pytest.mark.aarch64
@needs_qemu
def test_export_library_writes_an_aarch64_shared_object(sdot: AArch64Module, tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = sdot.export_library(tmp_path / "lib" / "sdot4.so")
    data = Path(path).read_bytes()
    assert data[:4] == b"\x7fELF"
    assert int.from_bytes(data[16:18], "little") == 3  # e_type: ET_DYN
    assert int.from_bytes(data[18:20], "little") == 183  # EM_AARCH64
    assert b"sdot4" in data  # the entry is in the dynamic symbol table


@pytest.mark.aarch64
@needs_qemu
def test_exported_executable_runs_under_qemu(sdot: AArch64Module, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import subprocess

    program = sdot.export_executable(tmp_path / "sdot4")
    a = np.arange(16, dtype=np.int8)
    files = []
    for index, value in enumerate([a, a, np.zeros(4, np.int32), np.int32(1)]):
        path = tmp_path / f"arg{index}.bin"
        path.write_bytes(np.asarray(value).tobytes())
        files.append(str(path))
    qemu = find_toolchain().qemu
    command = [qemu, "-cpu", "max", program, "sdot4", "1", "1", "1", "0", *files]
    result = subprocess.run(command, capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr
    c = np.frombuffer((tmp_path / "arg2.bin").read_bytes(), np.int32)
    np.testing.assert_array_equal(c, sdot_reference(a, a, np.zeros(4, np.int32), 1))
