"""``tir.build`` for AArch64: every example, vector code, sdot, parallel loops, run under qemu.

Each program is built for ``llvm -mtriple=aarch64-linux-gnu -mattr=+neon,+dotprod``, run under
``qemu-aarch64 -cpu max`` on random inputs, and compared with numpy and with the interpreter.
The examples are built once per session (a module-scoped fixture): linking and starting qemu
take a few tenths of a second each.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from examples_testing import load_example

import tir
import tir.script as T
from tir.runtime.aarch64 import AArch64Module, toolchain_missing_reason
from tir.target import Target

TARGET = "llvm -mtriple=aarch64-linux-gnu -mattr=+neon,+dotprod"
EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples"
EXAMPLE_NAMES = sorted(path.stem for path in EXAMPLES_DIR.glob("*.py") if not path.stem.startswith("_"))

_MISSING = toolchain_missing_reason()
pytestmark = [
    pytest.mark.aarch64,
    pytest.mark.skipif(_MISSING is not None, reason=f"AArch64 tools missing: {_MISSING}"),
]


def for_another_isa(name: str) -> bool:
    """An example for another CPU or a GPU names its TARGET (int8_matmul_x86: x86-64, matmul_tensorcore: CUDA)."""
    target = getattr(load_example(name), "TARGET", None)
    return target is not None and Target.parse(target).isa != "aarch64"


@pytest.fixture(scope="module")
def built_examples() -> dict[str, AArch64Module]:
    modules = {}
    for name in EXAMPLE_NAMES:
        if for_another_isa(name):
            continue
        module = tir.build(load_example(name).KERNEL, TARGET)
        assert isinstance(module, AArch64Module)
        modules[name] = module
    return modules


def test_every_example_is_found() -> None:
    assert len(EXAMPLE_NAMES) >= 11 and "int8_matmul" in EXAMPLE_NAMES


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_example_matches_numpy_and_the_interpreter(name: str, built_examples: dict[str, AArch64Module]) -> None:
    if for_another_isa(name):
        pytest.skip(f"{name} is tensorized for {load_example(name).TARGET}")
    example = load_example(name)
    func = example.KERNEL
    args = example.make_args(np.random.default_rng(0))
    expected = example.reference(*[array.copy() for array in args])
    interpreted = [array.copy() for array in args]
    tir.interpret(func, *interpreted)
    inputs_before = [array.copy() for array in args]
    built_examples[name](*args)
    outputs = {buffer.name: position for position, buffer in enumerate(func.buffer_params)}
    for out_name, want in expected.items():
        got = args[outputs[out_name]]
        np.testing.assert_allclose(got, want, rtol=0, atol=example.ATOL, err_msg=f"{name}: {out_name} vs numpy")
        np.testing.assert_allclose(
            got, interpreted[outputs[out_name]], rtol=0, atol=example.ATOL, err_msg=f"{name}: {out_name} vs interp"
        )
    for position, (after, before) in enumerate(zip(args, inputs_before)):
        if func.buffer_params[position].name not in expected:
            np.testing.assert_array_equal(after, before, err_msg=f"{name}: input {position} changed")


def test_examples_compile_to_aarch64_assembly(built_examples: dict[str, AArch64Module]) -> None:
    for name, module in built_examples.items():
        asm = module.get_source("asm")
        assert f"{module.entry_name}:" in asm, name
        assert "%rax" not in asm and "xmm" not in asm  # not x86 by mistake


# ---------------------------------------------------------------- vector code


@T.script
def scaled_add(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"), alpha: T.float32):
    for i, jo in T.grid(16, 4):
        for ji in T.vectorized(4):
            with T.block("B"):
                vi = T.spatial_axis(16, i)
                vj = T.spatial_axis(16, jo * 4 + ji)
                B[vi, vj] = B[vi, vj] + A[vi, vj] * alpha


def test_vectorized_loop_uses_neon_registers_and_runs() -> None:
    module = tir.build(scaled_add, TARGET)
    asm = module.get_source("asm")
    assert "v0" in asm or "q0" in asm, asm
    assert ".4s" in asm, asm  # four float32 lanes
    rng = np.random.default_rng(3)
    a = rng.standard_normal((16, 16)).astype(np.float32)
    b = rng.standard_normal((16, 16)).astype(np.float32)
    interpreted = b.copy()
    tir.interpret(scaled_add, a, interpreted, 1.5)
    module(a, b, 1.5)
    np.testing.assert_allclose(b, interpreted, rtol=1e-6, atol=1e-6)


@T.script
def sdot_rows(A: T.Buffer((4, 64), "int8"), B: T.Buffer((4, 64), "int8"), C: T.Buffer((4, 4), "int32")):
    for i in range(4):
        C[i, T.ramp(0, 1, 4)] = T.broadcast(T.int32(0), 4)
        for g in range(4):
            C[i, T.ramp(0, 1, 4)] = T.call_llvm_pure_intrin(
                "int32x4",
                "llvm.aarch64.neon.sdot.v4i32.v16i8",
                C[i, T.ramp(0, 1, 4)],
                A[i, T.ramp(g * 16, 1, 16)],
                B[i, T.ramp(g * 16, 1, 16)],
            )


def sdot_rows_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Lane ``l`` of row ``i`` sums ``A[i, 16g + 4l + k] * B[i, 16g + 4l + k]`` over g and k < 4."""
    products = a.astype(np.int32) * b.astype(np.int32)
    return products.reshape(4, 4, 4, 4).sum(axis=(1, 3))


def test_sdot_intrinsic_runs_under_qemu() -> None:
    module = tir.build(sdot_rows, TARGET)
    asm = module.get_source("asm")
    assert "sdot\tv" in asm and ".16b" in asm, asm
    rng = np.random.default_rng(4)
    a = rng.integers(-128, 128, (4, 64), dtype=np.int8)
    b = rng.integers(-128, 128, (4, 64), dtype=np.int8)
    a[:, :16], b[:, :16] = -128, -128  # the largest products
    c = np.full((4, 4), 77, np.int32)
    module(a, b, c)
    np.testing.assert_array_equal(c, sdot_rows_reference(a, b))


# ---------------------------------------------------------------- parallel loops, scalars, failures


@T.script
def parallel_scale(A: T.Buffer((64, 32), "float32"), B: T.Buffer((64, 32), "float32"), n: T.int32):
    for i in T.parallel(64):
        for j in range(32):
            with T.block("B"):
                vi, vj = T.remap("SS", i, j)
                B[vi, vj] = A[vi, vj] * T.cast(n, "float32")


def test_parallel_loop_runs_on_libgomp_threads() -> None:
    module = tir.build(parallel_scale, TARGET)
    assert "GOMP_parallel" in module.get_source("ll")
    a = np.random.default_rng(5).standard_normal((64, 32)).astype(np.float32)
    for threads in (1, 3):
        module.set_num_threads(threads)
        b = np.zeros((64, 32), np.float32)
        module(a, b, -3)
        np.testing.assert_array_equal(b, a * np.float32(-3))


@T.script
def symbolic_fill(A: T.Buffer((n, 4), "int64"), n: T.int32):  # noqa: F821 - n is a later parameter
    for i, j in T.grid(n, 4):
        with T.block("A"):
            vi, vj = T.remap("SS", i, j)
            A[vi, vj] = T.cast(vi * 4 + vj, "int64") * T.int64(1000000000000)


def test_symbolic_shape_and_scalar_parameter() -> None:
    module = tir.build(symbolic_fill, TARGET)
    for rows in (0, 1, 5):
        a = np.zeros((rows, 4), np.int64)
        module(a, rows)
        np.testing.assert_array_equal(a, np.arange(rows * 4, dtype=np.int64).reshape(rows, 4) * 10**12)
    with pytest.raises(ValueError, match="shape"):
        module(np.zeros((3, 4), np.int64), 2)


def test_argument_errors_come_before_qemu_runs() -> None:
    module = tir.build(scaled_add, TARGET)
    good = np.zeros((16, 16), np.float32)
    with pytest.raises(TypeError, match="takes 3 arguments"):
        module(good, good.copy())
    with pytest.raises(TypeError, match="float32"):
        module(good, np.zeros((16, 16), np.float64), 1.0)
    with pytest.raises(ValueError, match="share memory"):
        module(good, good, 1.0)
    with pytest.raises(ValueError, match="C-contiguous"):
        module(good, np.zeros((16, 32), np.float32)[:, ::2], 1.0)


def test_read_only_inputs_are_accepted() -> None:
    module = tir.build(scaled_add, TARGET)
    a = np.ones((16, 16), np.float32)
    a.flags.writeable = False
    b = np.zeros((16, 16), np.float32)
    module(a, b, 2.0)
    np.testing.assert_array_equal(b, np.full((16, 16), 2.0, np.float32))


@T.script
def half_axpy(
    A: T.Buffer((32,), "float16"),
    B: T.Buffer((32,), "bfloat16"),
    C: T.Buffer((32,), "float16"),
    D: T.Buffer((32,), "bfloat16"),
    h: T.float16,
    g: T.bfloat16,
):
    for i in range(32):
        with T.block("C"):
            vi = T.spatial_axis(32, i)
            C[vi] = A[vi] * h + T.float16(1.0)
            D[vi] = B[vi] * g + T.bfloat16(0.5)


def test_float16_and_bfloat16_buffers_and_scalars_match_the_interpreter() -> None:
    module = tir.build(half_axpy, TARGET)
    rng = np.random.default_rng(6)
    a = rng.standard_normal(32).astype(np.float16)
    b = (rng.standard_normal(32).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)  # bfloat16 bits
    args = [a, b, np.zeros(32, np.float16), np.zeros(32, np.uint16), 0.3, 1.7]
    interpreted = [x.copy() if isinstance(x, np.ndarray) else x for x in args]
    tir.interpret(half_axpy, *interpreted)
    module(*args)
    np.testing.assert_array_equal(args[2], interpreted[2])
    np.testing.assert_array_equal(args[3], interpreted[3])
