"""The CUDA runtime module: argument checks, launch dimensions, the no-device error, and GPU runs.

Most tests need no GPU: they build ``CUDAModule`` by hand from a parsed PrimFunc (the host's
parameters) and ``KernelSpec``s, and either expect an error before any device work or run the
module on a fake driver (``FakeDriver``, which keeps "device memory" in numpy arrays and runs
each kernel as a Python function). Tests marked ``cuda`` build real kernels with
``tir.build(..., "cuda -arch=sm_80")`` and run them on the GPU; tests/conftest.py skips them
when this machine has no device.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tir
import tir.runtime.cuda as cuda_runtime
import tir.runtime.cuda_driver as cuda_driver
import tir.script as T
from tir.ir import IntImm, Max, Min, Select
from tir.runtime.cuda import CUDADeviceError, CUDAModule, LaunchConfig, evaluate_launch_expr
from tir.runtime.cuda_spec import KernelSpec
from tir.target import Target

TARGET = "cuda -arch=sm_80"


@T.script
def scale(A: T.Buffer((n,), "float32"), B: T.Buffer((n,), "float32"), n: T.int32, alpha: T.float32):  # noqa: F821
    for i in range(n):
        with T.block("B"):
            vi = T.axis.spatial(n, i)
            B[vi] = A[vi] * alpha


A_BUF, B_BUF, N_VAR, ALPHA_VAR = scale.params


def scale_module(**kernel_fields: Any) -> CUDAModule:
    """``scale`` as a CUDA module with one kernel ``scale_kernel(B, A, n, alpha)`` of 128-thread blocks."""
    fields: dict[str, Any] = {
        "name": "scale_kernel",
        "params": [B_BUF, A_BUF, N_VAR, ALPHA_VAR],
        "grid": ((N_VAR + 127) // 128, 1, 1),
        "block": (128, 1, 1),
        "shared_bytes": 0,
    }
    fields.update(kernel_fields)
    return CUDAModule(scale, [KernelSpec(**fields)], b"not a real cubin", "// source", Target.parse(TARGET))


class FakeDevicePointer:
    """An array on the 'device' of FakeDriver, seen through ``__cuda_array_interface__``."""

    def __init__(self, pointer: int, shape: tuple[int, ...], typestr: str, strides: Any = None) -> None:
        self.__cuda_array_interface__ = {
            "shape": shape,
            "typestr": typestr,
            "data": (pointer, False),
            "strides": strides,
            "version": 3,
        }


class FakeDriver(cuda_driver._Driver):
    """Device memory as numpy byte arrays at made-up addresses; kernels as Python functions."""

    name = "fake"

    def __init__(self, kernels: dict[str, Callable[..., None]]) -> None:
        self.kernels = kernels
        self.memory: dict[int, np.ndarray] = {}
        self.next_pointer = 0x10000
        self.launches: list[tuple[str, tuple[int, ...], tuple[int, ...], list[Any]]] = []
        self.freed: list[int] = []
        self.loaded: list[bytes] = []

    def active(self) -> Any:
        import contextlib

        return contextlib.nullcontext()

    def load(self, image: bytes) -> Any:
        self.loaded.append(image)
        return "module"

    def unload(self, module: Any) -> None:
        pass

    def function(self, module: Any, name: str) -> Any:
        return name

    def alloc(self, nbytes: int) -> Any:
        pointer = self.next_pointer
        self.next_pointer += max(nbytes, 1) + 256
        self.memory[pointer] = np.zeros(max(nbytes, 1), np.uint8)
        return pointer

    def free(self, allocation: Any) -> None:
        self.freed.append(allocation)
        del self.memory[allocation]

    def view(self, pointer: int, dtype: Any) -> np.ndarray:
        return self.memory[pointer].view(dtype)

    def to_device(self, allocation: Any, array: np.ndarray) -> None:
        self.memory[allocation][: array.nbytes] = array.reshape(-1).view(np.uint8)

    def to_host(self, array: np.ndarray, allocation: Any) -> None:
        array.reshape(-1).view(np.uint8)[:] = self.memory[allocation][: array.nbytes]

    def launch(self, function: Any, config: LaunchConfig, args: list[np.generic]) -> None:
        self.launches.append((function, config.grid, config.block, list(args)))
        self.kernels[function](self, config, *args)

    def synchronize(self) -> None:
        pass

    def event(self) -> Any:
        return object()

    def record(self, event: Any) -> None:
        pass

    def elapsed_ms(self, start: Any, end: Any) -> float:
        return 2.0


def scale_kernel(driver: FakeDriver, config: LaunchConfig, b: np.uint64, a: np.uint64, n: Any, alpha: Any) -> None:
    assert config.grid[0] * config.block[0] >= n
    count = int(n)
    driver.view(int(b), np.float32)[:count] = driver.view(int(a), np.float32)[:count] * alpha


@pytest.fixture
def fake_driver(monkeypatch: pytest.MonkeyPatch) -> FakeDriver:
    driver = FakeDriver({"scale_kernel": scale_kernel})
    monkeypatch.setattr(cuda_runtime, "_driver", lambda: driver)
    return driver


@pytest.fixture
def no_device_work(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if the module reaches for the driver."""

    def refuse() -> Any:
        pytest.fail("the module touched the device before rejecting its arguments")

    monkeypatch.setattr(cuda_runtime, "_driver", refuse)


# ---------------------------------------------------------------- imports and the no-device error


def test_importing_the_module_imports_no_cuda_package() -> None:
    code = (
        "import sys, tir, tir.runtime, tir.runtime.cuda\n"
        "loaded = [m for m in sys.modules if m.split('.')[0] in ('pycuda', 'cuda')]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_no_driver_library_raises_cuda_device_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cuda_driver, "_DRIVER", None)
    monkeypatch.setattr(cuda_driver, "_load_driver_library", lambda: None)
    cuda_runtime.device_missing_reason.cache_clear()
    try:
        module = scale_module()
        a = np.ones(10, np.float32)
        with pytest.raises(CUDADeviceError, match=r"no CUDA device: .*libcuda") as caught:
            module(a, np.zeros(10, np.float32), 10, 2.0)
        assert isinstance(caught.value, RuntimeError)
        assert "the module was compiled (get_source('cuda'), .cubin) but cannot run here" in str(caught.value)
        assert caught.value.__cause__ is None
        with pytest.raises(CUDADeviceError, match="no CUDA device"):
            module.time(a, np.zeros(10, np.float32), 10, 2.0)
    finally:
        cuda_runtime.device_missing_reason.cache_clear()
    assert not [name for name in sys.modules if name.split(".")[0] == "pycuda"]


def test_device_missing_reason_on_this_machine() -> None:
    reason = cuda_runtime.device_missing_reason()
    if cuda_driver._load_driver_library() is None:
        assert reason is not None and "libcuda" in reason
    else:
        assert reason is None or isinstance(reason, str)


def test_missing_python_binding_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cuda_driver, "_DRIVER", None)
    monkeypatch.setattr(cuda_driver, "device_missing_reason", lambda: None)
    for name in ("pycuda", "pycuda.driver", "cuda", "cuda.bindings", "cuda.bindings.driver", "cuda.cuda"):
        monkeypatch.setitem(sys.modules, name, None)  # import fails with ImportError
    with pytest.raises(CUDADeviceError, match=r"no CUDA Python binding: install pycuda or cuda-python"):
        scale_module()(np.ones(4, np.float32), np.zeros(4, np.float32), 4, 1.0)


# ---------------------------------------------------------------- arguments are checked first


def test_wrong_argument_count(no_device_work: None) -> None:
    with pytest.raises(TypeError, match=r"scale\(\) takes 4 arguments \(A, B, n, alpha\), 2 given"):
        scale_module()(np.ones(4, np.float32), np.zeros(4, np.float32))


def test_wrong_dtype(no_device_work: None) -> None:
    with pytest.raises(TypeError, match="parameter A: expected dtype float32, got float64"):
        scale_module()(np.ones(4), np.zeros(4, np.float32), 4, 1.0)


def test_wrong_shape(no_device_work: None) -> None:
    with pytest.raises(ValueError, match=r"parameter A: expected shape \(5,\), got \(4,\)"):
        scale_module()(np.ones(4, np.float32), np.zeros(5, np.float32), 5, 1.0)


def test_not_contiguous(no_device_work: None) -> None:
    a = np.ones(8, np.float32)[::2]
    with pytest.raises(ValueError, match="C-contiguous"):
        scale_module()(a, np.zeros(4, np.float32), 4, 1.0)


def test_scalar_of_wrong_type(no_device_work: None) -> None:
    with pytest.raises(TypeError, match="parameter n: expected an integer"):
        scale_module()(np.ones(4, np.float32), np.zeros(4, np.float32), 4.0, 1.0)


def test_device_array_checks(no_device_work: None) -> None:
    module = scale_module()
    b = np.zeros(4, np.float32)
    with pytest.raises(TypeError, match="parameter A: expected dtype float32, got float64"):
        module(FakeDevicePointer(0x1000, (4,), "<f8"), b, 4, 1.0)
    with pytest.raises(ValueError, match=r"parameter A: expected shape \(4,\), got \(3,\)"):
        module(FakeDevicePointer(0x1000, (3,), "<f4"), b, 4, 1.0)
    with pytest.raises(ValueError, match="C-contiguous"):
        module(FakeDevicePointer(0x1000, (4,), "<f4", strides=(8,)), b, 4, 1.0)
    with pytest.raises(ValueError, match="share memory"):
        module(FakeDevicePointer(0x1000, (4,), "<f4"), FakeDevicePointer(0x1000, (4,), "<f4"), 4, 1.0)
    with pytest.raises(ValueError, match=r"parameter A: the device array starts at 0x1008, not on a 16-byte boundary"):
        module(FakeDevicePointer(0x1008, (4,), "<f4"), b, 4, 1.0)


# ---------------------------------------------------------------- launch dimensions


def test_grid_and_block_from_scalar_parameters() -> None:
    module = scale_module(shared_bytes=N_VAR * 4)
    configs = module.launch_configs(np.ones(1000, np.float32), np.zeros(1000, np.float32), 1000, 1.0)
    assert configs == [LaunchConfig("scale_kernel", (8, 1, 1), (128, 1, 1), 4000)]
    configs = module.launch_configs(np.ones(128, np.float32), np.zeros(128, np.float32), 128, 1.0)
    assert configs[0].grid == (1, 1, 1)
    assert module.launch_configs(np.ones(0, np.float32), np.zeros(0, np.float32), 0, 1.0)[0].empty


def test_evaluate_launch_expr() -> None:
    n = N_VAR
    assert evaluate_launch_expr(7, {}) == 7
    assert evaluate_launch_expr((n + 31) // 32, {"n": 33}) == 2
    assert evaluate_launch_expr(Min(n, IntImm(1024)), {"n": 5000}) == 1024
    assert evaluate_launch_expr(Max(n % 7, IntImm(1)), {"n": 14}) == 1
    assert evaluate_launch_expr(Select(n < 10, n * 2, n - 10), {"n": 4}) == 8
    with pytest.raises(ValueError, match="cannot evaluate the launch dimension"):
        evaluate_launch_expr(n + 1, {})
    # the simplifier fallback: an expression the small evaluator does not know, over constants
    assert cuda_runtime._evaluate_by_simplify(n * 2, {"n": 21}) == 42


# ---------------------------------------------------------------- the call path, on a fake driver


def test_call_copies_in_launches_and_copies_back(fake_driver: FakeDriver) -> None:
    module = scale_module()
    a = np.arange(300, dtype=np.float32)
    b = np.zeros(300, np.float32)
    module(a, b, 300, 1.5)
    np.testing.assert_array_equal(b, a * np.float32(1.5))
    ((name, grid, block, args),) = fake_driver.launches
    assert (name, grid, block) == ("scale_kernel", (3, 1, 1), (128, 1, 1))
    # kernel order B, A, n, alpha: pointers as uint64, scalars by value in their dtypes
    assert [type(arg) for arg in args] == [np.uint64, np.uint64, np.int32, np.float32]
    assert fake_driver.memory == {}, "device memory must be freed"
    assert len(fake_driver.freed) == 2
    assert fake_driver.loaded == [b"not a real cubin"]


def test_empty_launch_is_skipped(fake_driver: FakeDriver) -> None:
    scale_module()(np.ones(0, np.float32), np.zeros(0, np.float32), 0, 1.0)
    assert fake_driver.launches == []


def test_device_arrays_are_passed_without_copies(fake_driver: FakeDriver) -> None:
    a_pointer, b_pointer = fake_driver.alloc(16), fake_driver.alloc(16)
    fake_driver.view(a_pointer, np.float32)[:4] = [1, 2, 3, 4]
    module = scale_module()
    module(FakeDevicePointer(a_pointer, (4,), "<f4"), FakeDevicePointer(b_pointer, (4,), "<f4"), 4, 3.0)
    np.testing.assert_array_equal(fake_driver.view(b_pointer, np.float32)[:4], [3, 6, 9, 12])
    ((_, _, _, args),) = fake_driver.launches
    assert [int(args[0]), int(args[1])] == [b_pointer, a_pointer]
    assert fake_driver.freed == []


def test_time_uses_events_and_writes_results(fake_driver: FakeDriver) -> None:
    module = scale_module()
    a = np.arange(8, dtype=np.float32)
    b = np.zeros(8, np.float32)
    seconds = module.time(a, b, 8, 2.0, repeat=3, number=4, warmup=2)
    assert seconds == pytest.approx(2.0 / 1000 / 4)
    assert len(fake_driver.launches) == 2 + 3 * 4
    np.testing.assert_array_equal(b, a * 2)
    assert fake_driver.memory == {}
    with pytest.raises(ValueError, match="repeat >= 1"):
        module.time(a, b, 8, 2.0, repeat=0)


def test_kernel_buffer_matched_by_name_when_not_identical(fake_driver: FakeDriver) -> None:
    from dataclasses import replace

    module = scale_module(params=[replace(B_BUF), replace(A_BUF), N_VAR, ALPHA_VAR])
    a = np.ones(3, np.float32)
    b = np.zeros(3, np.float32)
    module(a, b, 3, 4.0)
    np.testing.assert_array_equal(b, [4, 4, 4])


# ---------------------------------------------------------------- artifacts


def test_sources_and_export(tmp_path: Any) -> None:
    module = scale_module()
    assert module.get_source("cuda") == "// source"
    assert module.cubin == b"not a real cubin"
    with pytest.raises(ValueError, match="binary"):
        module.get_source("cubin")
    path = module.export_library(tmp_path / "out" / "scale.cubin")
    assert open(path, "rb").read() == b"not a real cubin"
    assert repr(module).startswith("<CUDAModule scale(") and repr(module).endswith("for cuda -arch=sm_80>")


class LimitedFakeDriver(FakeDriver):
    """A fake GPU whose kernels allow 256 threads per block and 1000 bytes of shared memory."""

    def limits(self, function: Any) -> cuda_runtime.LaunchLimits:
        return cuda_runtime.LaunchLimits(
            device="Fake GPU",
            max_threads=256,
            max_block=(1024, 1024, 64),
            max_grid=(2**31 - 1, 65535, 65535),
            max_shared_bytes=1000,
            static_shared_bytes=100,
            registers=128,
        )


@pytest.mark.parametrize(
    "fields,n,message",
    [
        (
            {"block": (512, 1, 1)},
            300,
            r"a block of 512x1x1 = 512 threads; the GPU allows at most 256 threads per "
            r"block \(this kernel uses 128 registers per thread\)",
        ),
        (
            {"shared_bytes": N_VAR * 4},
            300,
            r"1300 bytes of shared memory per block \(100 static \+ 1200 dynamic\); "
            r"the GPU allows at most 1000",
        ),
        ({"grid": (1, 70000, 1)}, 4, r"blockIdx.y extent 70000 exceeds the GPU's maximum grid dimension 65535"),
        ({"block": (1, 1, 128)}, 4, r"threadIdx.z extent 128 exceeds the GPU's maximum block dimension 64"),
    ],
    ids=["threads", "shared", "grid", "block-z"],
)
def test_launch_beyond_the_device_limits_is_refused_before_any_copy(
    monkeypatch: pytest.MonkeyPatch, fields: dict[str, Any], n: int, message: str
) -> None:
    driver = LimitedFakeDriver({"scale_kernel": scale_kernel})
    monkeypatch.setattr(cuda_runtime, "_driver", lambda: driver)
    module = scale_module(**fields)
    with pytest.raises(cuda_runtime.CUDALaunchError, match="kernel scale_kernel cannot launch on Fake GPU: " + message):
        module(np.ones(n, np.float32), np.zeros(n, np.float32), n, 1.0)
    assert driver.launches == [] and driver.memory == {}
    assert isinstance(cuda_runtime.CUDALaunchError("x"), ValueError)


def test_launch_within_the_device_limits_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    driver = LimitedFakeDriver({"scale_kernel": scale_kernel})
    monkeypatch.setattr(cuda_runtime, "_driver", lambda: driver)
    a = np.arange(300, dtype=np.float32)
    b = np.zeros(300, np.float32)
    scale_module(block=(256, 1, 1), grid=((N_VAR + 255) // 256, 1, 1), shared_bytes=900)(a, b, 300, 2.0)
    np.testing.assert_array_equal(b, a * 2)


class NewerFakeDriver(FakeDriver):
    """A fake sm_90 GPU that loads only images compiled for it."""

    def arch(self) -> str:
        return "sm_90"

    def load(self, image: bytes) -> Any:
        self.loaded.append(image)
        if not image.startswith(b"sm_90"):
            raise CUDADeviceError("cuModuleLoadData failed: CUDA_ERROR_NO_BINARY_FOR_GPU")
        return "module"


def test_a_cubin_for_an_older_architecture_is_compiled_again_for_the_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    import tir.codegen.cuda_compile as cuda_compile

    driver = NewerFakeDriver({"scale_kernel": scale_kernel})
    monkeypatch.setattr(cuda_runtime, "_driver", lambda: driver)
    compiled: list[tuple[str, str]] = []
    monkeypatch.setattr(
        cuda_compile, "compile_cuda", lambda source, arch: compiled.append((source, arch)) or b"sm_90 image"
    )
    module = scale_module()
    assert module.loaded_arch is None
    a = np.arange(10, dtype=np.float32)
    b = np.zeros(10, np.float32)
    module(a, b, 10, 2.0)
    np.testing.assert_array_equal(b, a * 2)
    assert compiled == [("// source", "sm_90")] and driver.loaded == [b"not a real cubin", b"sm_90 image"]
    assert module.loaded_arch == "sm_90"


def test_a_cubin_that_does_not_load_names_both_architectures(monkeypatch: pytest.MonkeyPatch) -> None:
    driver = NewerFakeDriver({"scale_kernel": scale_kernel})
    monkeypatch.setattr(driver, "arch", lambda: "sm_80")  # no newer architecture to compile for
    monkeypatch.setattr(cuda_runtime, "_driver", lambda: driver)
    with pytest.raises(
        CUDADeviceError, match=r"cannot load the cubin built for sm_80 on this GPU \(sm_80\): .*NO_BINARY"
    ):
        scale_module()(np.ones(4, np.float32), np.zeros(4, np.float32), 4, 1.0)


# ---------------------------------------------------------------- on a GPU


@T.script
def add_one(A: T.Buffer((64, 128), "float32"), B: T.Buffer((64, 128), "float32")):
    for i in T.thread_binding(64, thread="blockIdx.x"):
        for j in T.thread_binding(128, thread="threadIdx.x"):
            with T.block("B"):
                vi, vj = T.remap("SS", i, j)
                B[vi, vj] = A[vi, vj] + 1.0


def build_for_cuda(func: Any) -> CUDAModule:
    """``tir.build(func, TARGET)``; skips without the CUDA code generator or without nvcc."""
    if importlib.util.find_spec("tir.codegen.cuda") is None:
        pytest.skip("tir.codegen.cuda (the CUDA code generator) is not available")
    if shutil.which("nvcc") is None:
        pytest.skip("building for CUDA needs nvcc on PATH")
    module = tir.build(func, TARGET)
    assert isinstance(module, CUDAModule)
    return module


def test_built_module_checks_arguments_and_exports_without_a_gpu(tmp_path: Any) -> None:
    module = build_for_cuda(add_one)
    assert module.kernels[0].name in module.get_source("cuda")
    with pytest.raises(ValueError, match=r"parameter A: expected shape \(64, 128\), got \(64, 127\)"):
        module(np.zeros((64, 127), np.float32), np.zeros((64, 128), np.float32))
    [config] = module.launch_configs(np.zeros((64, 128), np.float32), np.zeros((64, 128), np.float32))
    assert (config.grid, config.block) == ((64, 1, 1), (128, 1, 1))
    path = module.export_library(tmp_path / "add_one.cubin")
    assert open(path, "rb").read(4) == b"\x7fELF"
    if cuda_runtime.device_missing_reason() is not None:
        with pytest.raises(CUDADeviceError, match="no CUDA device"):
            module(np.zeros((64, 128), np.float32), np.zeros((64, 128), np.float32))


@pytest.mark.cuda
def test_elementwise_kernel_on_the_gpu() -> None:
    module = build_for_cuda(add_one)
    a = np.random.default_rng(0).standard_normal((64, 128)).astype(np.float32)
    b = np.zeros_like(a)
    module(a, b)
    np.testing.assert_array_equal(b, a + np.float32(1))
    assert module.time(a, b, repeat=3) > 0


@pytest.mark.cuda
def test_elementwise_kernel_on_device_arrays() -> None:
    cupy = pytest.importorskip("cupy", reason="device-array test needs cupy")
    module = build_for_cuda(add_one)
    a = cupy.arange(64 * 128, dtype=cupy.float32).reshape(64, 128)
    b = cupy.zeros_like(a)
    module(a, b)
    np.testing.assert_array_equal(cupy.asnumpy(b), cupy.asnumpy(a) + 1)


@pytest.mark.cuda
def test_launch_limits_read_from_the_gpu() -> None:
    import dataclasses

    module = build_for_cuda(add_one)
    a = np.zeros((64, 128), np.float32)
    module(a, np.zeros_like(a))
    [limits] = module._limits.values()
    assert limits is not None and limits.device
    assert 128 <= limits.max_threads <= 1024 and limits.max_block[0] >= 1024 and limits.max_grid[0] >= 65535
    assert limits.max_shared_bytes >= 48 * 1024 and limits.registers > 0
    # the same cubin asked for more dynamic shared memory than any GPU has: refused, clearly
    module.kernels = [dataclasses.replace(module.kernels[0], shared_bytes=limits.max_shared_bytes + 1)]
    with pytest.raises(
        cuda_runtime.CUDALaunchError, match=r"bytes of shared memory per block .* the GPU allows at most"
    ):
        module(a, np.zeros_like(a))


# ---------------------------------------------------------------- the tuner's runner on a GPU


@T.script
def increment(A: T.Buffer((64,), "float32"), B: T.Buffer((64,), "float32")):
    for i in range(64):
        with T.block("B"):
            vi = T.axis.spatial(64, i)
            B[vi] = A[vi] + 1.0


def increment_kernel(driver: FakeDriver, config: LaunchConfig, b: np.uint64, a: np.uint64) -> None:
    driver.view(int(b), np.float32)[:64] = driver.view(int(a), np.float32)[:64] + 1


@pytest.mark.parametrize("outcome", ["right", "wrong"])
def test_tuner_times_a_cuda_candidate_with_its_arguments_resident(
    fake_driver: FakeDriver, monkeypatch: pytest.MonkeyPatch, outcome: str
) -> None:
    """The runner copies a CUDA candidate's arguments to the GPU once per run, not once per
    timed sample, brings the outputs back for the check, and frees the memory after."""
    import types

    from metasched.measure import runner
    from metasched.measure.builder import Built, Job

    a_param, b_param = increment.params
    spec = KernelSpec(name="increment_kernel", params=[b_param, a_param], grid=(1, 1, 1), block=(64, 1, 1))
    module = CUDAModule(increment, [spec], b"not a real cubin", "// source", Target.parse(TARGET))
    fake_driver.kernels["increment_kernel"] = increment_kernel
    copies: list[int] = []
    to_device = fake_driver.to_device
    monkeypatch.setattr(
        fake_driver, "to_device", lambda alloc, array: (copies.append(array.nbytes), to_device(alloc, array))[1]
    )
    a = np.arange(64, dtype=np.float32)
    monkeypatch.setattr(
        runner, "make_arguments", lambda func, nan_outputs=True: ([a, np.full(64, np.nan, np.float32)], [1])
    )
    want = a + 1 if outcome == "right" else a + 2
    reference = types.SimpleNamespace(outputs=[want], nan_outputs=True)
    job = Job(program=b"", target=TARGET, reference_key=None, reference=None, num_threads=None, repeat=5)
    reply = runner._run_built(Built(increment, module), job, reference)  # type: ignore[arg-type]
    if outcome == "right":
        assert reply.get("error_kind") is None, reply
        assert reply["seconds"] == pytest.approx(0.002)  # FakeDriver's events: 2 ms a run
        assert len(fake_driver.launches) >= 6  # the checked run and five timed samples
    else:
        assert reply["error_kind"] == "wrong" and len(fake_driver.launches) == 1
    assert copies == [256, 256]  # A and B, once each
    assert fake_driver.memory == {}, "device memory must be freed"
