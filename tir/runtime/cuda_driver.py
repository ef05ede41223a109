"""The CUDA driver, reached from Python: device detection, the launch limits a device reports,
and one adapter per Python binding behind the few calls ``tir.runtime.cuda.CUDAModule`` makes.

The driver is reached through pycuda (``pycuda.driver``) where it is installed, otherwise
through cuda-python (``cuda.bindings.driver``, or ``cuda.cuda`` in older releases): both are
optional (``pip install 'tensorir[cuda]'`` installs cuda-python). Importing this module imports
neither; the first ``_driver()`` call does. Without the NVIDIA driver library (``libcuda.so``),
without a device or without a binding, that call raises :class:`CUDADeviceError`; a driver
call that fails raises it too, with the ``CUresult`` name and the driver's error text.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

#: Dynamic shared memory a kernel may use without opting in (``cuFuncSetAttribute``).
_DEFAULT_SHARED_LIMIT = 48 * 1024

#: The hint every "cannot run here" message ends with.
_COMPILED_BUT = "the module was compiled (get_source('cuda'), .cubin) but cannot run here"

#: Names of the CUresult codes cuInit / cuDeviceGetCount commonly return.
_CU_RESULT_NAMES = {
    1: "CUDA_ERROR_INVALID_VALUE",
    2: "CUDA_ERROR_OUT_OF_MEMORY",
    3: "CUDA_ERROR_NOT_INITIALIZED",
    4: "CUDA_ERROR_DEINITIALIZED",
    34: "CUDA_ERROR_STUB_LIBRARY",
    35: "CUDA_ERROR_INSUFFICIENT_DRIVER",
    46: "CUDA_ERROR_DEVICES_UNAVAILABLE",
    100: "CUDA_ERROR_NO_DEVICE",
    101: "CUDA_ERROR_INVALID_DEVICE",
    304: "CUDA_ERROR_OPERATING_SYSTEM",
    999: "CUDA_ERROR_UNKNOWN",
}


class CUDADeviceError(RuntimeError):
    """CUDA code cannot run here: no driver library, no device, no Python binding, or a driver failure."""


class CUDALaunchError(ValueError):
    """A kernel's launch exceeds what this GPU (or the compiled kernel) allows: threads per block,
    block or grid extents, shared memory. Raised before anything is copied or launched."""


@dataclass(frozen=True)
class LaunchLimits:
    """What one compiled kernel may be launched with on this device (the driver's attributes).

    ``max_threads`` is the kernel's own limit (``CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK``: the
    device's 1024, or fewer when the kernel's registers per thread do not fit more);
    ``max_shared_bytes`` the device's opt-in maximum of shared memory per block, which the static
    shared memory of the kernel (``static_shared_bytes``) and the launch's dynamic part share.
    """

    device: str
    max_threads: int
    max_block: tuple[int, int, int]
    max_grid: tuple[int, int, int]
    max_shared_bytes: int
    static_shared_bytes: int = 0
    registers: int = 0

    def check(self, config: LaunchConfig) -> None:
        """Raise :class:`CUDALaunchError` naming the kernel, the value and the limit it exceeds."""
        where = f"kernel {config.name} cannot launch on {self.device}"
        threads = config.block[0] * config.block[1] * config.block[2]
        if threads > self.max_threads:
            why = f"at most {self.max_threads} threads per block"
            if self.registers:
                why += f" (this kernel uses {self.registers} registers per thread)"
            raise CUDALaunchError(
                f"{where}: a block of {_dims(config.block)} = {threads} threads; the GPU allows {why}"
            )
        for axis, (extent, limit) in enumerate(zip(config.block, self.max_block)):
            if extent > limit:
                raise CUDALaunchError(
                    f"{where}: threadIdx.{'xyz'[axis]} extent {extent} exceeds the GPU's maximum block dimension {limit}"
                )
        for axis, (extent, limit) in enumerate(zip(config.grid, self.max_grid)):
            if extent > limit:
                raise CUDALaunchError(
                    f"{where}: blockIdx.{'xyz'[axis]} extent {extent} exceeds the GPU's maximum grid dimension {limit}"
                )
        shared = self.static_shared_bytes + config.shared_bytes
        if shared > self.max_shared_bytes:
            raise CUDALaunchError(
                f"{where}: {shared} bytes of shared memory per block ({self.static_shared_bytes} static + "
                f"{config.shared_bytes} dynamic); the GPU allows at most {self.max_shared_bytes}"
            )


def _dims(extents: tuple[int, int, int]) -> str:
    return "x".join(str(extent) for extent in extents)


# ---------------------------------------------------------------- detecting a device (ctypes only)


def _load_driver_library() -> Any:
    """``libcuda`` loaded with ctypes, or None when the NVIDIA driver library is not installed."""
    candidates = ["libcuda.so.1", "libcuda.so"]
    found = ctypes.util.find_library("cuda")
    if found is not None:
        candidates.append(found)
    for name in candidates:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


@functools.cache
def device_missing_reason() -> str | None:
    """Why CUDA code cannot run on this machine (a sentence), or None when a device is usable.

    Cheap: loads ``libcuda`` with ctypes and calls ``cuInit`` and ``cuDeviceGetCount``; imports
    no CUDA Python package. The answer is cached for the process (pytest uses it to skip the
    ``cuda``-marked tests).
    """
    library = _load_driver_library()
    if library is None:
        return "the NVIDIA driver library libcuda.so is not installed (no GPU driver on this machine)"
    try:
        status = int(library.cuInit(0))
        if status != 0:
            return f"cuInit failed with {_CU_RESULT_NAMES.get(status, 'CUresult')} ({status})"
        count = ctypes.c_int(0)
        status = int(library.cuDeviceGetCount(ctypes.byref(count)))
    except AttributeError as error:  # a library named libcuda without the driver API
        return f"libcuda does not export the driver API ({error})"
    if status != 0:
        return f"cuDeviceGetCount failed with {_CU_RESULT_NAMES.get(status, 'CUresult')} ({status})"
    if count.value < 1:
        return "the NVIDIA driver sees no CUDA device"
    return None


def _no_device_error(reason: str) -> CUDADeviceError:
    return CUDADeviceError(f"no CUDA device: {reason}; {_COMPILED_BUT}")


# ---------------------------------------------------------------- launches


@dataclass(frozen=True)
class LaunchConfig:
    """One kernel launch with evaluated dimensions."""

    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int

    @property
    def empty(self) -> bool:
        """Whether the launch has no thread (a zero grid or block extent): it is skipped."""
        return 0 in self.grid or 0 in self.block


# ---------------------------------------------------------------- drivers


class _Driver:
    """The few driver calls the module needs; one subclass per Python binding."""

    name = ""

    @contextmanager
    def active(self) -> Iterator[None]:
        """Make the device's primary context current for the duration."""
        raise NotImplementedError

    def load(self, image: bytes) -> Any:
        raise NotImplementedError

    def unload(self, module: Any) -> None:
        raise NotImplementedError

    def function(self, module: Any, name: str) -> Any:
        raise NotImplementedError

    def limits(self, function: Any) -> LaunchLimits | None:
        """The launch limits of a loaded kernel on this device; None where the binding cannot tell."""
        return None

    def arch(self) -> str | None:
        """The device's architecture as nvcc names it (``"sm_90"``); None where the binding cannot tell."""
        return None

    def alloc(self, nbytes: int) -> Any:
        raise NotImplementedError

    def free(self, allocation: Any) -> None:
        raise NotImplementedError

    def pointer(self, allocation: Any) -> int:
        return int(allocation)

    def to_device(self, allocation: Any, array: np.ndarray) -> None:
        raise NotImplementedError

    def to_host(self, array: np.ndarray, allocation: Any) -> None:
        raise NotImplementedError

    def launch(self, function: Any, config: LaunchConfig, args: list[np.generic]) -> None:
        raise NotImplementedError

    def synchronize(self) -> None:
        raise NotImplementedError

    def event(self) -> Any:
        raise NotImplementedError

    def record(self, event: Any) -> None:
        raise NotImplementedError

    def elapsed_ms(self, start: Any, end: Any) -> float:
        """Milliseconds between two recorded events (waits for ``end``)."""
        raise NotImplementedError

    def destroy_event(self, event: Any) -> None:
        pass


class _PyCudaDriver(_Driver):
    """``pycuda.driver`` on the primary context of device 0."""

    name = "pycuda"

    def __init__(self, cuda: Any) -> None:
        self.cuda = cuda
        cuda.init()
        self.context = cuda.Device(0).retain_primary_context()

    @contextmanager
    def active(self) -> Iterator[None]:
        self.context.push()
        try:
            yield
        finally:
            self.cuda.Context.pop()

    def load(self, image: bytes) -> Any:
        return self.cuda.module_from_buffer(image)

    def unload(self, module: Any) -> None:
        pass  # pycuda unloads a module when its object is collected

    def function(self, module: Any, name: str) -> Any:
        return module.get_function(name)

    def arch(self) -> str | None:
        major, minor = self.cuda.Device(0).compute_capability()
        return f"sm_{major}{minor}"

    def limits(self, function: Any) -> LaunchLimits | None:
        device, attribute = self.cuda.Device(0), self.cuda.device_attribute
        function_attribute = self.cuda.function_attribute
        return LaunchLimits(
            device=device.name(),
            max_threads=function.get_attribute(function_attribute.MAX_THREADS_PER_BLOCK),
            max_block=tuple(device.get_attribute(getattr(attribute, f"MAX_BLOCK_DIM_{a}")) for a in "XYZ"),
            max_grid=tuple(device.get_attribute(getattr(attribute, f"MAX_GRID_DIM_{a}")) for a in "XYZ"),
            max_shared_bytes=device.get_attribute(attribute.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
            static_shared_bytes=function.get_attribute(function_attribute.SHARED_SIZE_BYTES),
            registers=function.get_attribute(function_attribute.NUM_REGS),
        )

    def alloc(self, nbytes: int) -> Any:
        return self.cuda.mem_alloc(max(nbytes, 1))

    def free(self, allocation: Any) -> None:
        allocation.free()

    def to_device(self, allocation: Any, array: np.ndarray) -> None:
        self.cuda.memcpy_htod(allocation, array)

    def to_host(self, array: np.ndarray, allocation: Any) -> None:
        self.cuda.memcpy_dtoh(array, allocation)

    def launch(self, function: Any, config: LaunchConfig, args: list[np.generic]) -> None:
        if config.shared_bytes > _DEFAULT_SHARED_LIMIT:
            attribute = self.cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES
            function.set_attribute(attribute, config.shared_bytes)
        # pycuda packs numpy scalars by value with C alignment; bool is not a numpy number there.
        packed = [np.uint8(arg) if isinstance(arg, np.bool_) else arg for arg in args]
        function(*packed, grid=config.grid, block=config.block, shared=config.shared_bytes)

    def synchronize(self) -> None:
        self.cuda.Context.synchronize()

    def event(self) -> Any:
        return self.cuda.Event()

    def record(self, event: Any) -> None:
        event.record()

    def elapsed_ms(self, start: Any, end: Any) -> float:
        end.synchronize()
        return float(start.time_till(end))


class _CudaPythonDriver(_Driver):
    """cuda-python's driver API (``cuda.bindings.driver`` or ``cuda.cuda``) on device 0's primary context."""

    name = "cuda-python"

    def __init__(self, driver: Any) -> None:
        self.driver = driver
        self.check(driver.cuInit(0), "cuInit")
        self.device = self.check(driver.cuDeviceGet(0), "cuDeviceGet")
        self.context = self.check(driver.cuDevicePrimaryCtxRetain(self.device), "cuDevicePrimaryCtxRetain")

    def check(self, result: Any, what: str) -> Any:
        """The values of a driver call (``(CUresult, *values)``); raises CUDADeviceError on failure."""
        status, *values = result if isinstance(result, tuple) else (result,)
        if status != self.driver.CUresult.CUDA_SUCCESS:
            name = getattr(status, "name", str(status))
            try:
                _, text = self.driver.cuGetErrorString(status)
                detail = text.decode() if isinstance(text, bytes) else str(text)
            except Exception:  # the error text is a courtesy
                detail = ""
            raise CUDADeviceError(f"{what} failed: {name}" + (f" ({detail})" if detail else ""))
        if not values:
            return None
        return values[0] if len(values) == 1 else tuple(values)

    @contextmanager
    def active(self) -> Iterator[None]:
        self.check(self.driver.cuCtxPushCurrent(self.context), "cuCtxPushCurrent")
        try:
            yield
        finally:
            self.check(self.driver.cuCtxPopCurrent(), "cuCtxPopCurrent")

    def load(self, image: bytes) -> Any:
        data = np.frombuffer(image, dtype=np.uint8)
        return self.check(self.driver.cuModuleLoadData(data.ctypes.data), "cuModuleLoadData")

    def unload(self, module: Any) -> None:
        with self.active():
            self.check(self.driver.cuModuleUnload(module), "cuModuleUnload")

    def function(self, module: Any, name: str) -> Any:
        return self.check(self.driver.cuModuleGetFunction(module, name.encode()), f"cuModuleGetFunction({name})")

    def _device_attribute(self, name: str) -> int:
        attribute = getattr(self.driver.CUdevice_attribute, f"CU_DEVICE_ATTRIBUTE_{name}")
        return int(
            self.check(self.driver.cuDeviceGetAttribute(attribute, self.device), f"cuDeviceGetAttribute({name})")
        )

    def arch(self) -> str | None:
        return f"sm_{self._device_attribute('COMPUTE_CAPABILITY_MAJOR')}{self._device_attribute('COMPUTE_CAPABILITY_MINOR')}"

    def limits(self, function: Any) -> LaunchLimits | None:
        driver = self.driver
        device_attribute = self._device_attribute

        def function_attribute(name: str) -> int:
            attribute = getattr(driver.CUfunction_attribute, f"CU_FUNC_ATTRIBUTE_{name}")
            return int(self.check(driver.cuFuncGetAttribute(attribute, function), f"cuFuncGetAttribute({name})"))

        raw_name = self.check(driver.cuDeviceGetName(256, self.device), "cuDeviceGetName")
        name = raw_name.split(b"\0", 1)[0].decode(errors="replace") if isinstance(raw_name, bytes) else str(raw_name)
        return LaunchLimits(
            device=name,
            max_threads=function_attribute("MAX_THREADS_PER_BLOCK"),
            max_block=tuple(device_attribute(f"MAX_BLOCK_DIM_{a}") for a in "XYZ"),  # type: ignore[arg-type]
            max_grid=tuple(device_attribute(f"MAX_GRID_DIM_{a}") for a in "XYZ"),  # type: ignore[arg-type]
            max_shared_bytes=device_attribute("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
            static_shared_bytes=function_attribute("SHARED_SIZE_BYTES"),
            registers=function_attribute("NUM_REGS"),
        )

    def alloc(self, nbytes: int) -> Any:
        return self.check(self.driver.cuMemAlloc(max(nbytes, 1)), "cuMemAlloc")

    def free(self, allocation: Any) -> None:
        self.check(self.driver.cuMemFree(allocation), "cuMemFree")

    def to_device(self, allocation: Any, array: np.ndarray) -> None:
        if array.nbytes:
            self.check(self.driver.cuMemcpyHtoD(allocation, array.ctypes.data, array.nbytes), "cuMemcpyHtoD")

    def to_host(self, array: np.ndarray, allocation: Any) -> None:
        if array.nbytes:
            self.check(self.driver.cuMemcpyDtoH(array.ctypes.data, allocation, array.nbytes), "cuMemcpyDtoH")

    def launch(self, function: Any, config: LaunchConfig, args: list[np.generic]) -> None:
        if config.shared_bytes > _DEFAULT_SHARED_LIMIT:
            attribute = self.driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            self.check(self.driver.cuFuncSetAttribute(function, attribute, config.shared_bytes), "cuFuncSetAttribute")
        # kernelParams is a void** array: one pointer per argument, to memory holding its value.
        holders = [np.array(arg) for arg in args]
        pointers = np.array([holder.ctypes.data for holder in holders] or [0], dtype=np.uint64)
        self.check(
            self.driver.cuLaunchKernel(
                function, *config.grid, *config.block, config.shared_bytes, 0, pointers.ctypes.data, 0
            ),
            f"cuLaunchKernel({config.name})",
        )

    def synchronize(self) -> None:
        self.check(self.driver.cuCtxSynchronize(), "cuCtxSynchronize")

    def event(self) -> Any:
        return self.check(self.driver.cuEventCreate(0), "cuEventCreate")

    def record(self, event: Any) -> None:
        self.check(self.driver.cuEventRecord(event, 0), "cuEventRecord")

    def elapsed_ms(self, start: Any, end: Any) -> float:
        self.check(self.driver.cuEventSynchronize(end), "cuEventSynchronize")
        return float(self.check(self.driver.cuEventElapsedTime(start, end), "cuEventElapsedTime"))

    def destroy_event(self, event: Any) -> None:
        self.check(self.driver.cuEventDestroy(event), "cuEventDestroy")


_DRIVER_LOCK = threading.Lock()
_DRIVER: _Driver | None = None


def _import_binding() -> tuple[str, Any]:
    """The first Python CUDA binding installed: pycuda, then cuda-python (new, then old import path)."""
    import importlib

    for kind, module_name in (
        ("pycuda", "pycuda.driver"),
        ("cuda-python", "cuda.bindings.driver"),
        ("cuda-python", "cuda.cuda"),
    ):
        try:
            return kind, importlib.import_module(module_name)
        except ImportError:
            continue
    raise CUDADeviceError(
        "no CUDA Python binding: install pycuda or cuda-python (pip install 'tensorir[cuda]'); " + _COMPILED_BUT
    )


def _driver() -> _Driver:
    """The process-wide driver, created on first use; raises CUDADeviceError when CUDA cannot run here."""
    global _DRIVER
    with _DRIVER_LOCK:
        if _DRIVER is not None:
            return _DRIVER
        reason = device_missing_reason()
        if reason is not None:
            raise _no_device_error(reason)
        kind, binding = _import_binding()
        try:
            _DRIVER = _PyCudaDriver(binding) if kind == "pycuda" else _CudaPythonDriver(binding)
        except CUDADeviceError as error:
            raise _no_device_error(str(error)) from None
        except Exception as error:  # the binding's own error types differ; the message says enough
            raise _no_device_error(f"{kind} could not initialize the driver: {error}") from None
        return _DRIVER
