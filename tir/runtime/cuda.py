"""CUDA modules: kernels compiled to a cubin, launched from Python on an NVIDIA GPU.

``tir.build(func, "cuda -arch=sm_80")`` ends here: the CUDA builder hands over the lowered
host function, one :class:`~tir.runtime.cuda_spec.KernelSpec` per kernel (launch order), the
cubin and the CUDA C++ source.

    m = tir.build(f, "cuda -arch=sm_80")
    m(a, b, c)                      # numpy arrays: copied to the GPU, run, copied back in place
    m(da, db, dc)                   # device arrays (``__cuda_array_interface__``: cupy, torch):
                                    # their pointers are passed directly, nothing is copied
    m.time(a, b, c, repeat=10)      # median seconds of one call, measured with CUDA events
    m.get_source("cuda")            # the CUDA C++ source; m.cubin holds the binary
    m.export_library("f.cubin")     # the cubin, loadable with cuModuleLoad

A call:

1. checks its arguments against the host function's parameters before touching any device
   (their number; for a buffer its dtype, original shape (``attrs["param_shapes"]``) and
   C-contiguity; the checks of :class:`tir.runtime.Module`, extended to device arrays);
2. evaluates each kernel's grid, block and dynamic shared memory from the integer scalar
   arguments (and the extents that bare shape variables take from the arrays);
3. copies every numpy buffer to freshly allocated device memory, launches the kernels in order
   (buffers by device pointer, scalars by value), synchronizes, copies every numpy buffer back
   into its array and frees the device memory.

The driver (``tir.runtime.cuda_driver``: device detection, one adapter per Python binding) is
reached through pycuda (``pycuda.driver``) where it is installed, otherwise through cuda-python
(``cuda.bindings.driver``, or ``cuda.cuda`` in older releases): both are optional
(``pip install 'tensorir[cuda]'`` installs cuda-python). Importing this module imports neither;
the first call does. Without the NVIDIA driver library (``libcuda.so``), without a device or
without a binding, a call raises :class:`CUDADeviceError`: the module is compiled
(``get_source("cuda")``, ``.cubin``, ``export_library``) but cannot run on this machine.
"""

from __future__ import annotations

import dataclasses
import numbers
import os
import statistics
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tir.ir import (
    EQ,
    GE,
    GT,
    LE,
    LT,
    NE,
    Add,
    And,
    Cast,
    Div,
    FloorDiv,
    FloorMod,
    IntImm,
    IRModule,
    Max,
    Min,
    Mul,
    Not,
    Or,
    PrimExpr,
    PrimFunc,
    Select,
    Sub,
    Var,
)
from tir.ir.buffer import Buffer
from tir.runtime.cuda_driver import (
    CUDADeviceError,
    CUDALaunchError,
    LaunchConfig,
    LaunchLimits,
    _Driver,
    _driver,
    device_missing_reason,
)
from tir.runtime.module import (
    Module,
    ParamSpec,
    _array_argument,
    _evaluate_extent,
    _shape_text,
    check_arguments,
)

__all__ = [
    "CUDADeviceError",
    "CUDALaunchError",
    "LaunchLimits",
    "CUDAModule",
    "DeviceArray",
    "DeviceBuffer",
    "LaunchConfig",
    "device_missing_reason",
    "evaluate_launch_expr",
]

#: The alignment the compiled kernels assume of every buffer argument (16-byte vector copies and
#: ``cp.async``); numpy arguments get fresh allocations (256-byte aligned), device arrays are checked.
DEVICE_ALIGNMENT = 16


# ---------------------------------------------------------------- launch dimensions


def evaluate_launch_expr(expr: int | PrimExpr, env: dict[str, int]) -> int:
    """The integer value of a grid/block/shared-memory expression given ``env`` (variable name -> value).

    Handles integer arithmetic (``+ - *``, floor division and modulo, truncating division, min,
    max, casts, ``Select`` on comparisons) directly; anything else is substituted and simplified with
    ``tir.arith.simplify``. Raises ``ValueError`` naming the expression when it does not reduce
    to a constant (a variable that is no scalar parameter nor shape variable).
    """
    value = _evaluate(expr, env)
    if value is None:
        value = _evaluate_by_simplify(expr, env)
    if value is None:
        raise ValueError(
            f"cannot evaluate the launch dimension {expr} from the scalar arguments {sorted(env)}: "
            "it uses a variable that is neither a scalar parameter nor a buffer's shape variable"
        )
    return int(value)


#: Integer semantics of the binary expressions a launch dimension may contain.
_BINARY_OPERATIONS: dict[type, Callable[[int, int], int | bool]] = {
    Add: lambda a, b: a + b,
    Sub: lambda a, b: a - b,
    Mul: lambda a, b: a * b,
    FloorDiv: lambda a, b: a // b,
    FloorMod: lambda a, b: a % b,
    Div: lambda a, b: abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1),
    Min: min,
    Max: max,
    EQ: lambda a, b: a == b,
    NE: lambda a, b: a != b,
    LT: lambda a, b: a < b,
    LE: lambda a, b: a <= b,
    GT: lambda a, b: a > b,
    GE: lambda a, b: a >= b,
    And: lambda a, b: bool(a) and bool(b),
    Or: lambda a, b: bool(a) or bool(b),
}


def _evaluate(expr: Any, env: dict[str, int]) -> int | bool | None:
    if isinstance(expr, (bool, np.bool_)):
        return bool(expr)
    if isinstance(expr, numbers.Integral):
        return int(expr)
    if isinstance(expr, IntImm):
        return int(expr.value)
    if isinstance(expr, Var):
        return env.get(expr.name)
    if isinstance(expr, Cast):
        inner = _evaluate(expr.value, env)
        if inner is None or not (expr.dtype.is_integer or expr.dtype.is_bool):
            return None
        return bool(inner) if expr.dtype.is_bool else int(inner)
    if isinstance(expr, Not):
        inner = _evaluate(expr.a, env)
        return None if inner is None else not inner
    if isinstance(expr, Select):
        condition = _evaluate(expr.condition, env)
        if condition is None:
            return None
        return _evaluate(expr.true_value if condition else expr.false_value, env)
    operation = _BINARY_OPERATIONS.get(type(expr))
    if operation is None:
        return None
    a, b = _evaluate(expr.a, env), _evaluate(expr.b, env)
    if a is None or b is None:
        return None
    if type(expr) in (FloorDiv, FloorMod, Div) and b == 0:
        raise ValueError(f"the launch dimension {expr} divides by zero for the arguments {env}")
    return operation(a, b)


def _evaluate_by_simplify(expr: Any, env: dict[str, int]) -> int | None:
    from tir.arith import simplify
    from tir.ir.functor import substitute

    if not isinstance(expr, PrimExpr):
        return None
    variables: dict[Var, PrimExpr] = {}

    def collect(node: Any) -> None:
        if isinstance(node, Var):
            if node.name in env:
                variables[node] = IntImm(env[node.name], node.dtype)
            return
        for field in dataclasses.fields(node):
            value = getattr(node, field.name)
            if isinstance(value, PrimExpr):
                collect(value)

    collect(expr)
    try:
        result = simplify(substitute(expr, variables))
    except Exception:  # the fallback only; the caller reports the expression
        return None
    return int(result.value) if isinstance(result, IntImm) else None


# ---------------------------------------------------------------- device arrays


@dataclass(frozen=True)
class DeviceArray:
    """An argument already on the GPU: what its ``__cuda_array_interface__`` says."""

    pointer: int
    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    @staticmethod
    def from_interface(arg: Any) -> DeviceArray:
        """Read ``arg.__cuda_array_interface__``; raises ValueError for strided or masked arrays."""
        interface = arg.__cuda_array_interface__
        shape = tuple(int(extent) for extent in interface["shape"])
        dtype = np.dtype(interface["typestr"])
        if interface.get("mask") is not None:
            raise ValueError("masked device arrays are not supported")
        strides = interface.get("strides")
        if strides is not None and not _c_contiguous(shape, tuple(strides), dtype.itemsize):
            raise ValueError(f"the device array must be C-contiguous; got strides {tuple(strides)}")
        return DeviceArray(int(interface["data"][0]), shape, dtype)


class DeviceBuffer:
    """A copy of a numpy array in GPU memory that this object owns: a device array (it has
    ``__cuda_array_interface__``) which any ``CUDAModule`` call or ``time`` takes as it is, with
    no copy in or out. The tuner keeps a candidate's arguments on the GPU this way while it
    times it (a 4096^3 GEMM's 192 MB would otherwise cross the bus on every timed run).

        x = DeviceBuffer(a)          # allocated and copied to the GPU once
        m(x, y, z); m.time(x, y, z)  # no copies
        z.copy_to(c)                 # results back into a numpy array
        x.free()                     # or when collected
    """

    def __init__(self, array: np.ndarray) -> None:
        self.shape = tuple(array.shape)
        self.dtype = array.dtype
        self._driver = _driver()
        with self._driver.active():
            self._allocation: Any = self._driver.alloc(max(array.nbytes, 1))
            if array.nbytes:
                self._driver.to_device(self._allocation, np.ascontiguousarray(array))
            self.pointer = int(self._driver.pointer(self._allocation))
        self._finalizer = weakref.finalize(self, _free_in_context, self._driver, self._allocation)

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        if not self._finalizer.alive:
            raise ValueError("the DeviceBuffer was freed")
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.pointer, False), "version": 3}

    def copy_to(self, out: np.ndarray) -> np.ndarray:
        """Copy the GPU's contents into ``out`` (a C-contiguous numpy array of this shape and dtype)."""
        if out.shape != self.shape or out.dtype != self.dtype or not out.flags.c_contiguous:
            raise ValueError(f"copy_to needs a C-contiguous {self.dtype} array of shape {self.shape}")
        if out.nbytes:
            with self._driver.active():
                self._driver.to_host(out, self._allocation)
        return out

    def free(self) -> None:
        """Release the GPU memory now (the object is unusable afterwards)."""
        self._finalizer()


def _free_in_context(driver: _Driver, allocation: Any) -> None:
    try:
        with driver.active():
            driver.free(allocation)
    except Exception:  # at interpreter exit the context may already be gone
        pass


def _c_contiguous(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> bool:
    expected = itemsize
    for extent, stride in zip(reversed(shape), reversed(strides)):
        if extent > 1 and stride != expected:
            return False
        expected *= extent
    return True


def is_device_array(arg: Any) -> bool:
    """Whether ``arg`` lives on a GPU (exposes ``__cuda_array_interface__``) rather than being numpy."""
    return not isinstance(arg, np.ndarray) and hasattr(arg, "__cuda_array_interface__")


def _device_array_argument(func: PrimFunc, spec: ParamSpec, arg: Any, known: dict[str, int]) -> DeviceArray:
    """The checks of ``_array_argument`` (dtype, shape, contiguity) for an array on the GPU."""
    where = f"{func.name}() parameter {spec.name}"
    assert spec.shape is not None
    try:
        array = DeviceArray.from_interface(arg)
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"{where}: unusable __cuda_array_interface__: {error}") from None
    if array.dtype != spec.storage:
        raise TypeError(f"{where}: expected dtype {spec.dtype}, got {array.dtype}")
    if array.pointer % DEVICE_ALIGNMENT and array.nbytes:
        raise ValueError(
            f"{where}: the device array starts at {array.pointer:#x}, not on a {DEVICE_ALIGNMENT}-byte boundary; the "
            f"kernels copy up to {DEVICE_ALIGNMENT} bytes at a time (pass an array that starts its own allocation, "
            "e.g. a fresh cupy/torch array or a .copy() / .clone() of a view)"
        )
    if len(array.shape) != len(spec.shape):
        raise ValueError(
            f"{where}: expected shape {_shape_text(spec.shape)} ({len(spec.shape)} dimensions), got {array.shape}"
        )
    expected = []
    for extent, actual in zip(spec.shape, array.shape):
        value = _evaluate_extent(extent, known)
        if value is None and isinstance(extent, Var):
            known[extent.name] = actual
            value = actual
        expected.append(value if value is not None else actual)
    if tuple(expected) != array.shape:
        raise ValueError(f"{where}: expected shape {_shape_text(expected)}, got {array.shape}")
    return array


def check_cuda_arguments(func: PrimFunc, specs: Sequence[ParamSpec], args: Sequence[Any]) -> list[Any]:
    """``tir.runtime.check_arguments``, also accepting device arrays (returned as :class:`DeviceArray`)."""

    def buffer_argument(func: PrimFunc, spec: ParamSpec, arg: Any, known: dict[str, int]) -> Any:
        if is_device_array(arg):
            return _device_array_argument(func, spec, arg, known)
        return _array_argument(func, spec, arg, known)

    values = check_arguments(func, specs, args, buffer_argument)
    device_arrays = [(spec, v) for spec, v in zip(specs, values) if isinstance(v, DeviceArray) and v.nbytes]
    for i, (spec_a, a) in enumerate(device_arrays):
        for spec_b, b in device_arrays[i + 1 :]:
            if a.pointer < b.pointer + b.nbytes and b.pointer < a.pointer + a.nbytes:
                raise ValueError(
                    f"{func.name}() parameters {spec_a.name} and {spec_b.name} share memory; the compiled "
                    "code assumes distinct buffers (pass a copy)"
                )
    return values


def _known_extents(specs: Sequence[ParamSpec], values: Sequence[Any]) -> dict[str, int]:
    """Name -> value of every integer scalar argument and of every bare shape variable."""
    known: dict[str, int] = {}
    for spec, value in zip(specs, values):
        if not spec.is_buffer and spec.dtype.is_integer:
            known[spec.name] = int(value)
    for spec, value in zip(specs, values):
        if spec.shape is not None:
            for extent, actual in zip(spec.shape, value.shape):
                if isinstance(extent, Var) and extent.name not in known:
                    known[extent.name] = int(actual)
    return known


# ---------------------------------------------------------------- the module


class CUDAModule(Module):
    """A host function whose kernels run on an NVIDIA GPU (see the module docstring).

    ``host`` is the lowered host PrimFunc (its parameters are the call's arguments);
    ``kernels`` the launches in order; ``cubin`` the compiled kernels; ``source`` their CUDA
    C++ source.
    """

    def __init__(self, host: PrimFunc, kernels: Sequence[Any], cubin: bytes, source: str, target: Any) -> None:
        super().__init__(IRModule(functions={host.name: host}), target, host.name)
        self.host = host
        self.kernels = list(kernels)
        self.cubin = bytes(cubin)
        self.source = source
        self._module_handle: Any = None
        self._functions: dict[str, Any] = {}
        self._limits: dict[str, LaunchLimits | None] = {}
        self.loaded_arch: str | None = None  # the architecture of the machine code loaded (after a first call)
        self._load_lock = threading.Lock()
        self._kernel_arguments = [self._match_params(kernel) for kernel in self.kernels]

    # ------------------------------------------------------------ describing the launches

    def _match_params(self, kernel: Any) -> list[tuple[str, int | str, Any]]:
        """Each kernel parameter as ("buffer", host position, buffer) or ("scalar", host position or name, var).

        Buffers match the host's by identity, else by name; scalars likewise, a scalar that is
        no host parameter (a shape variable) by name at call time.
        """
        host_params = list(self.host.params)
        matched: list[tuple[str, int | str, Any]] = []
        for param in kernel.params:
            position = next((i for i, p in enumerate(host_params) if p is param), None)
            if isinstance(param, Buffer):
                if position is None:
                    position = next(
                        (i for i, p in enumerate(host_params) if isinstance(p, Buffer) and p.name == param.name), None
                    )
                if position is None:
                    raise ValueError(
                        f"kernel {kernel.name}: buffer parameter {param.name} is not a parameter of {self.host.name}"
                    )
                matched.append(("buffer", position, param))
            elif isinstance(param, Var):
                if position is None:
                    position = next(
                        (i for i, p in enumerate(host_params) if isinstance(p, Var) and p.name == param.name), None
                    )
                matched.append(("scalar", param.name if position is None else position, param))
            else:
                raise TypeError(f"kernel {kernel.name}: parameter {param!r} is neither a Buffer nor a Var")
        return matched

    def launch_configs(self, *args: Any) -> list[LaunchConfig]:
        """The evaluated launch of every kernel for these arguments (checked, nothing runs)."""
        values = self.check_arguments(args)
        return self._launch_configs(_known_extents(self.param_specs, values))

    def _launch_configs(self, known: dict[str, int]) -> list[LaunchConfig]:
        configs = []
        for kernel in self.kernels:
            grid = tuple(evaluate_launch_expr(e, known) for e in kernel.grid)
            block = tuple(evaluate_launch_expr(e, known) for e in kernel.block)
            shared = evaluate_launch_expr(kernel.shared_bytes, known)
            if min(grid + block) < 0 or shared < 0:
                raise ValueError(
                    f"kernel {kernel.name}: negative launch dimensions grid={grid} block={block} shared={shared} "
                    f"for the arguments {known}"
                )
            configs.append(LaunchConfig(kernel.name, grid, block, shared))  # type: ignore[arg-type]
        return configs

    def _kernel_args(
        self, index: int, pointers: dict[int, int], scalars: dict[int, Any], known: dict[str, int]
    ) -> list[np.generic]:
        args: list[np.generic] = []
        for kind, where, param in self._kernel_arguments[index]:
            if kind == "buffer":
                args.append(np.uint64(pointers[where]))
            elif isinstance(where, int):
                args.append(scalars[where])
            else:
                if where not in known:
                    raise ValueError(f"kernel {self.kernels[index].name}: no value for the scalar {where}")
                args.append(ParamSpec(param.name, param.dtype, None).storage.type(known[where]))
        return args

    # ------------------------------------------------------------ running

    def check_arguments(self, args: Sequence[Any], name: str | None = None) -> list[Any]:
        """The base class's checks; buffers may also be device arrays (``__cuda_array_interface__``)."""
        return check_cuda_arguments(self.host, self.param_specs, args)

    def _load(self, driver: _Driver) -> dict[str, Any]:
        with self._load_lock:
            if self._module_handle is None:
                handle = self._load_image(driver)
                self._functions = {kernel.name: driver.function(handle, kernel.name) for kernel in self.kernels}
                self._limits = {name: driver.limits(function) for name, function in self._functions.items()}
                self._module_handle = handle
                weakref.finalize(self, _unload_quietly, driver, handle)
            return self._functions

    def _load_image(self, driver: _Driver) -> Any:
        """The loaded cubin; built for an older architecture than this GPU's, the source is
        compiled again for the GPU's own (a cubin holds machine code of one architecture
        family: sm_80 code does not load on an sm_90 device) -- ``loaded_arch`` says which ran."""
        from tir.target import Target

        built_for = getattr(self.target, "arch", "") or "sm_80"
        try:
            handle = driver.load(self.cubin)
            self.loaded_arch = built_for
            return handle
        except CUDADeviceError as error:
            failure = error
        native = driver.arch()
        newer = (
            native is not None
            and Target.parse(f"cuda -arch={native}").compute_capability
            > Target.parse(f"cuda -arch={built_for}").compute_capability
        )
        if newer:
            from tir.codegen.cuda_compile import compile_cuda

            image = compile_cuda(self.source, native)
            try:
                handle = driver.load(image)
            except CUDADeviceError as error:
                failure = error
            else:
                self.loaded_arch = native
                return handle
        raise CUDADeviceError(
            f"cannot load the cubin built for {built_for} on this GPU ({native or 'architecture unknown'}): {failure}"
        ) from None

    def _run(self, name: str, values: list[Any]) -> None:
        self._execute(values, timing=None)

    def _time(self, values: list[Any], repeat: int, number: int, warmup: int) -> float:
        return self._execute(values, timing=(repeat, number, warmup))

    def _execute(self, values: list[Any], timing: tuple[int, int, int] | None) -> float:
        specs = self.param_specs
        known = _known_extents(specs, values)
        configs = self._launch_configs(known)
        driver = _driver()
        with driver.active():
            functions = self._load(driver)
            for config in configs:
                limits = self._limits.get(config.name)
                if limits is not None and not config.empty:
                    limits.check(config)
            allocations: dict[int, Any] = {}
            try:
                pointers: dict[int, int] = {}
                scalars: dict[int, Any] = {}
                for position, value in enumerate(values):
                    if isinstance(value, DeviceArray):
                        pointers[position] = value.pointer
                    elif isinstance(value, np.ndarray):
                        allocations[position] = driver.alloc(value.nbytes)
                        driver.to_device(allocations[position], value)
                        pointers[position] = driver.pointer(allocations[position])
                    else:
                        scalars[position] = value
                launches = [
                    (functions[config.name], config, self._kernel_args(i, pointers, scalars, known))
                    for i, config in enumerate(configs)
                    if not config.empty
                ]

                def run_once() -> None:
                    for function, config, args in launches:
                        driver.launch(function, config, args)

                seconds = 0.0
                if timing is None:
                    run_once()
                    driver.synchronize()
                else:
                    seconds = self._measure(driver, run_once, *timing)
                for position, allocation in allocations.items():
                    driver.to_host(values[position], allocation)
            except BaseException:
                # A faulting kernel poisons the context: freeing then fails too, and that
                # error must not hide the first one (the launch or synchronize that failed).
                for allocation in allocations.values():
                    _free_quietly(driver, allocation)
                raise
            for allocation in allocations.values():
                driver.free(allocation)
        return seconds

    @staticmethod
    def _measure(driver: _Driver, run_once: Callable[[], None], repeat: int, number: int, warmup: int) -> float:
        for _ in range(warmup):
            run_once()
        driver.synchronize()
        start, end = driver.event(), driver.event()
        try:
            samples = []
            for _ in range(repeat):
                driver.record(start)
                for _ in range(number):
                    run_once()
                driver.record(end)
                samples.append(driver.elapsed_ms(start, end) / 1000.0 / number)
        finally:
            driver.destroy_event(start)
            driver.destroy_event(end)
        return float(statistics.median(samples))

    def time(self, *args: Any, repeat: int = 10, number: int = 1, warmup: int = 1) -> float:
        """Median seconds of one call's kernels over ``repeat`` measurements of ``number`` calls each.

        Measured with CUDA events around the launches only: device buffers are allocated and
        numpy inputs copied once, before timing; numpy buffers get the results afterwards.
        """
        return super().time(*args, repeat=repeat, number=number, warmup=warmup)

    # ------------------------------------------------------------ artifacts

    def get_source(self, fmt: str = "cuda") -> str:
        """``"cuda"`` (or ``"cu"``): the CUDA C++ source; ``"sass"``: the cubin disassembled by cuobjdump.

        The cubin itself is binary: read ``module.cubin`` or write it with ``export_library``.
        """
        if fmt in ("cuda", "cu"):
            return self.source
        if fmt == "sass":
            return _disassemble(self.cubin)
        if fmt == "cubin":
            raise ValueError("the cubin is binary: read module.cubin (bytes) or write it with export_library(path)")
        raise ValueError(f"unknown source format {fmt!r}; expected 'cuda' or 'sass'")

    def export_library(self, path: str | os.PathLike[str]) -> str:
        """Write the cubin to ``path``; returns the path.

        The file holds the kernels only (``extern "C"`` names: ``[k.name for k in
        module.kernels]``), loadable with ``cuModuleLoad`` / ``pycuda.driver.module_from_file``;
        the launch dimensions and argument order are in ``module.kernels``.
        """
        destination = Path(path)
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.write_bytes(self.cubin)
        return str(destination)


def _free_quietly(driver: _Driver, allocation: Any) -> None:
    try:
        driver.free(allocation)
    except Exception:  # the error already propagating says what went wrong
        pass


def _unload_quietly(driver: _Driver, handle: Any) -> None:
    try:
        driver.unload(handle)
    except Exception:  # at interpreter exit the context may already be gone
        pass


def _disassemble(cubin: bytes) -> str:
    from tir.codegen.cuda_compile import disassemble  # one place knows where cuobjdump lives

    return disassemble(cubin)
