"""Built modules: the ``Module`` interface every backend shares, and the host JIT module.

    m = tir.build(f, target="llvm")
    m(a, b, c)                                 # numpy arrays (outputs written in place)
    m.time(a, b, c, repeat=10)                 # median seconds of one call
    m.export_library("libf.so")                # a shared library, loadable with ctypes
    m.get_source("ll") / m.get_source("asm")   # optimized LLVM IR / assembly

Arguments are checked before any native code runs: their number, and for each parameter a
``numpy.ndarray`` of exactly the buffer's dtype (bfloat16: ``uint16`` raw bits or an
``ml_dtypes.bfloat16`` array) and original shape, C-contiguous, not overlapping another buffer
argument (the generated code assumes distinct buffers), writable when the code writes it;
scalars are converted to the parameter's dtype. Errors are ``TypeError`` / ``ValueError`` naming the parameter. Shape
variables (``n = T.int32()`` with ``T.match_buffer(a, (n, 64))``) are not passed: the lowered
program takes them as trailing parameters (``attrs["shape_vars"]``) and the call binds them from
the arrays' shapes, refusing two arrays that disagree on one.

Parallel loops run on libgomp's thread pool with ``num_threads`` threads: the module's
``set_num_threads(n)`` setting, else the ``TIR_NUM_THREADS`` environment variable, else every
core of this machine.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import itertools
import numbers
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tir.ir import IntImm, IRModule, PrimExpr, PrimFunc, Var
from tir.ir.buffer import Buffer
from tir.ir.dtype import DataType

#: numpy dtype of each buffer dtype's storage (bfloat16: the raw bits).
STORAGE_DTYPES: dict[str, np.dtype] = {
    "bool": np.dtype(np.bool_),
    "int8": np.dtype(np.int8),
    "int16": np.dtype(np.int16),
    "int32": np.dtype(np.int32),
    "int64": np.dtype(np.int64),
    "uint8": np.dtype(np.uint8),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(np.uint16),
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
}


@dataclass(frozen=True)
class ParamSpec:
    """One parameter of a built function, as callers see it.

    ``shape`` is the buffer's original (pre-flattening) shape, entries ints or expressions of
    scalar parameters; ``None`` for a scalar parameter. ``align`` is the byte alignment the
    data pointer must have (0: the element's).
    """

    name: str
    dtype: DataType
    shape: tuple[int | PrimExpr, ...] | None
    align: int = 0
    #: A shape variable (``attrs["shape_vars"]``): not passed by the caller, bound from the arrays.
    from_shapes: bool = False

    @property
    def is_buffer(self) -> bool:
        return self.shape is not None

    @property
    def storage(self) -> np.dtype:
        """numpy dtype of the argument's memory (a buffer's elements, a scalar's value)."""
        text = str(self.dtype)
        if text not in STORAGE_DTYPES:
            raise TypeError(f"parameter {self.name}: dtype {text} has no numpy equivalent")
        return STORAGE_DTYPES[text]


def param_specs(func: PrimFunc) -> tuple[ParamSpec, ...]:
    """The parameters of ``func``, with original shapes from ``attrs["param_shapes"]``."""
    shapes = func.attrs.get("param_shapes") or {}
    shape_vars = set(func.attrs.get("shape_vars") or ())
    specs = []
    for position, param in enumerate(func.params):
        if isinstance(param, Buffer):
            shape = _lookup_shape(shapes, position, param)
            specs.append(ParamSpec(param.name, param.dtype, shape, param.align))
        else:
            specs.append(ParamSpec(param.name, param.dtype, None, from_shapes=param.name in shape_vars))
    return tuple(specs)


def _lookup_shape(shapes: Any, position: int, buffer: Buffer) -> tuple[int | PrimExpr, ...]:
    shape: Any = None
    if isinstance(shapes, dict):
        for key in (position, str(position), buffer.name, buffer):
            try:
                if key in shapes:
                    shape = shapes[key]
                    break
            except TypeError:
                continue
    elif isinstance(shapes, (list, tuple)) and position < len(shapes):
        shape = shapes[position]
    if shape is None:
        shape = buffer.shape
    return tuple(extent.value if isinstance(extent, IntImm) else extent for extent in shape)


def default_num_threads() -> int:
    """``TIR_NUM_THREADS`` when set, else the number of cores."""
    text = os.environ.get("TIR_NUM_THREADS", "").strip()
    if text:
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"TIR_NUM_THREADS must be a positive integer, got {text!r}") from None
        if value < 1:
            raise ValueError(f"TIR_NUM_THREADS must be a positive integer, got {text!r}")
        return value
    return os.cpu_count() or 1


class Module:
    """A built program. Subclasses implement ``_run`` (and may override timing and export)."""

    def __init__(self, ir_module: IRModule, target: Any, entry_name: str | None = None) -> None:
        from tir.codegen.llvm import is_entry_function

        self.ir_module = ir_module
        self.target = target
        entries = [name for name, func in ir_module.functions.items() if is_entry_function(func)]
        if entry_name is None:
            if not entries:
                raise ValueError("the module has no entry function")
            entry_name = entries[0]
        if entry_name not in ir_module.functions:
            raise ValueError(f"no function {entry_name!r} in the module; it has {list(ir_module.functions)}")
        self.entry_name = entry_name
        self.entry_names = tuple(entries)
        self._num_threads: int | None = None

    # ------------------------------------------------------------ description

    @property
    def entry_func(self) -> PrimFunc:
        return self.ir_module[self.entry_name]

    @property
    def param_specs(self) -> tuple[ParamSpec, ...]:
        return param_specs(self.entry_func)

    def __repr__(self) -> str:
        params = ", ".join(
            f"{spec.name}: {spec.dtype}[{', '.join(map(str, spec.shape))}]"
            if spec.shape is not None
            else f"{spec.name}: {spec.dtype}"
            for spec in self.param_specs
            if not spec.from_shapes
        )
        return f"<{type(self).__name__} {self.entry_name}({params}) for {self.target}>"

    # ------------------------------------------------------------ threads

    @property
    def num_threads(self) -> int:
        """Threads each parallel loop uses: ``set_num_threads``, ``TIR_NUM_THREADS`` or every core."""
        return self._num_threads if self._num_threads is not None else default_num_threads()

    def set_num_threads(self, count: int | None) -> None:
        """Use ``count`` threads for parallel loops (None: back to the default)."""
        if count is not None and (not isinstance(count, numbers.Integral) or count < 1):
            raise ValueError(f"set_num_threads needs a positive integer, got {count!r}")
        self._num_threads = None if count is None else int(count)

    # ------------------------------------------------------------ calling

    def __call__(self, *args: Any) -> None:
        """Run the entry function on numpy arrays and scalars; outputs are written in place."""
        self._run(self.entry_name, self.check_arguments(args))

    def __getitem__(self, name: str) -> Callable[..., None]:
        """Another entry function of the module, as a callable."""
        if name not in self.entry_names:
            raise KeyError(f"no entry function {name!r}; the module has {list(self.entry_names)}")

        def call(*args: Any) -> None:
            self._run(name, self.check_arguments(args, name))

        return call

    def check_arguments(self, args: Sequence[Any], name: str | None = None) -> list[Any]:
        """Check ``args`` against the parameters; returns arrays and numpy scalars ready to pass."""
        name = name or self.entry_name
        return check_arguments(self.ir_module[name], param_specs(self.ir_module[name]), args, written=self.written)

    @functools.cached_property
    def written(self) -> frozenset[str]:
        """Names of the buffer parameters the module may write (read-only arrays are refused)."""
        from tir.analysis.written import written_params

        return written_params(self.ir_module)

    def _run(self, name: str, values: list[Any]) -> None:
        raise NotImplementedError(f"{type(self).__name__} cannot run code")

    def time(self, *args: Any, repeat: int = 10, number: int = 1, warmup: int = 1) -> float:
        """Median seconds of one call over ``repeat`` measurements of ``number`` calls each."""
        if repeat < 1 or number < 1 or warmup < 0:
            raise ValueError(f"time() needs repeat >= 1, number >= 1, warmup >= 0; got {repeat}, {number}, {warmup}")
        values = self.check_arguments(args)
        return self._time(values, repeat, number, warmup)

    def _time(self, values: list[Any], repeat: int, number: int, warmup: int) -> float:
        for _ in range(warmup):
            self._run(self.entry_name, values)
        samples = []
        for _ in range(repeat):
            start = time.perf_counter()
            for _ in range(number):
                self._run(self.entry_name, values)
            samples.append((time.perf_counter() - start) / number)
        return float(statistics.median(samples))

    def time_evaluator(self, *args: Any, repeat: int = 10, number: int = 1, warmup: int = 1, **_: Any) -> Any:
        """Alias of ``time``; with a function name first (TVM style) returns a timing function.

        ``m.time_evaluator(a, b)`` is ``m.time(a, b)``; ``m.time_evaluator("main", number=5)``
        returns ``f`` with ``f(a, b) -> median seconds``.
        """
        if args and isinstance(args[0], str):

            def evaluate(*arrays: Any) -> float:
                return self.time(*arrays, repeat=repeat, number=number, warmup=warmup)

            return evaluate
        return self.time(*args, repeat=repeat, number=number, warmup=warmup)

    # ------------------------------------------------------------ artifacts

    def get_source(self, fmt: str = "ll") -> str:
        raise NotImplementedError(f"{type(self).__name__} has no {fmt!r} source")

    def export_library(self, path: str | os.PathLike[str]) -> str:
        raise NotImplementedError(f"{type(self).__name__} cannot export a library")


# ---------------------------------------------------------------- argument checking


def check_arguments(
    func: PrimFunc,
    specs: Sequence[ParamSpec],
    args: Sequence[Any],
    buffer_argument: Callable[[PrimFunc, ParamSpec, Any, dict[str, int]], Any] | None = None,
    written: frozenset[str] | None = None,
) -> list[Any]:
    """Check ``args`` for ``func``: see the module docstring. Returns the values to pass.

    ``buffer_argument`` checks one buffer argument (default: a numpy array); a runtime that also
    takes other array kinds (the CUDA module's device arrays) passes its own. Numpy arrays that
    share memory are refused either way, and so is a read-only numpy array (``writeable``
    False: ``setflags(write=False)``, a view of ``bytes``, a read-only ``np.memmap``) for a
    parameter in ``written`` (default: the buffers ``func`` itself writes,
    ``tir.analysis.written.written_params``).
    """
    check_buffer = buffer_argument or _array_argument
    # Shape variables (trailing, see tir.transform.bind_shape_vars) are not the caller's to pass.
    bound_specs = [spec for spec in specs if spec.from_shapes]
    specs = [spec for spec in specs if not spec.from_shapes]
    names = ", ".join(spec.name for spec in specs)
    if len(args) != len(specs):
        raise TypeError(f"{func.name}() takes {len(specs)} arguments ({names}), {len(args)} given")
    values: list[Any] = [None] * len(specs)
    known: dict[str, int] = {}
    for position, (spec, arg) in enumerate(zip(specs, args)):
        if not spec.is_buffer:
            values[position] = _scalar_argument(func, spec, arg)
            if spec.dtype.is_integer:
                known[spec.name] = int(values[position])
    _bind_shape_variables(func, specs, args, known)
    if written is None:
        from tir.analysis.written import written_params

        written = written_params(func)
    for position, (spec, arg) in enumerate(zip(specs, args)):
        if spec.is_buffer:
            values[position] = check_buffer(func, spec, arg, known)
            if spec.name in written and isinstance(values[position], np.ndarray):
                _refuse_read_only(func, spec.name, values[position])
    arrays = [(spec, value) for spec, value in zip(specs, values) if isinstance(value, np.ndarray) and value.size]
    for (spec_a, a), (spec_b, b) in itertools.combinations(arrays, 2):
        if np.may_share_memory(a, b):
            raise ValueError(
                f"{func.name}() parameters {spec_a.name} and {spec_b.name} share memory; the compiled code "
                "assumes distinct buffers (pass a copy)"
            )
    for spec in bound_specs:
        values.append(_shape_variable_value(func, spec, known))
    return values


def _refuse_read_only(func: PrimFunc, name: str, array: np.ndarray) -> None:
    """The code writes parameter ``name``: a read-only array would be overwritten in place
    (or, over read-only pages such as a read-only memmap, crash the process)."""
    if not array.flags.writeable:
        raise ValueError(
            f"{func.name}() parameter {name}: the array is read-only (flags.writeable is False: a "
            f"read-only view, memmap or buffer), but {func.name} writes {name}; pass a writable "
            "array (numpy.array(x) copies it)"
        )


def _bind_shape_variables(
    func: PrimFunc, specs: Sequence[ParamSpec], args: Sequence[Any], known: dict[str, int]
) -> None:
    """Bind the bare shape variables of the buffer parameters from the arguments' shapes.

    A variable already given by a scalar argument is left to the shape check (which shows the
    expected shape); two arrays that disagree on a variable are refused here, naming both.
    Arguments without a shape, or of the wrong rank, are left to the buffer check to refuse.
    """
    sources: dict[str, str] = {}
    for spec, arg in zip(specs, args):
        actual_shape = getattr(arg, "shape", None)
        if spec.shape is None or not isinstance(actual_shape, tuple) or len(actual_shape) != len(spec.shape):
            continue
        for extent, actual in zip(spec.shape, actual_shape):
            if not isinstance(extent, Var) or (extent.name in known and extent.name not in sources):
                continue
            if extent.name in sources and known[extent.name] != int(actual):
                raise ValueError(
                    f"{func.name}(): shape variable {extent.name} is {known[extent.name]} from "
                    f"{sources[extent.name]} but {int(actual)} from {spec.name} {tuple(actual_shape)}; "
                    f"the arrays must agree on {extent.name}"
                )
            if extent.name not in sources:
                known[extent.name] = int(actual)
                sources[extent.name] = f"{spec.name} {tuple(actual_shape)}"


def _shape_variable_value(func: PrimFunc, spec: ParamSpec, known: dict[str, int]) -> Any:
    """The value passed for shape variable ``spec`` (bound by ``_bind_shape_variables``)."""
    if spec.name not in known:
        raise ValueError(f"{func.name}(): no argument's shape gives shape variable {spec.name}")
    value = known[spec.name]
    if not spec.dtype.min_value() <= value <= spec.dtype.max_value():
        raise ValueError(f"{func.name}(): shape variable {spec.name} = {value} does not fit in {spec.dtype}")
    return spec.storage.type(value)


def _scalar_argument(func: PrimFunc, spec: ParamSpec, arg: Any) -> Any:
    where = f"{func.name}() parameter {spec.name}"
    dtype = spec.dtype
    if isinstance(arg, np.ndarray) and arg.ndim == 0:
        arg = arg[()]
    if dtype.is_bool:
        if not isinstance(arg, (bool, np.bool_)):
            raise TypeError(f"{where}: expected a bool, got {type(arg).__name__}")
        return np.bool_(arg)
    if dtype.is_integer:
        if isinstance(arg, (bool, np.bool_)) or not isinstance(arg, numbers.Integral):
            raise TypeError(f"{where}: expected an integer for {dtype}, got {type(arg).__name__}")
        value = int(arg)
        if not dtype.min_value() <= value <= dtype.max_value():
            raise ValueError(f"{where}: {value} does not fit in {dtype}")
        return spec.storage.type(value)
    if dtype.is_float:
        if isinstance(arg, (bool, np.bool_)) or not isinstance(arg, numbers.Real):
            raise TypeError(f"{where}: expected a number for {dtype}, got {type(arg).__name__}")
        if dtype.kind == "bfloat":
            from tir.interp.runtime import bf16_to_bits, to_bfloat16

            return np.uint16(bf16_to_bits(to_bfloat16(float(arg))))
        return spec.storage.type(float(arg))
    raise TypeError(f"{where}: parameters of dtype {dtype} are not supported")


def _shape_text(shape: Sequence[Any]) -> str:
    items = [str(extent) for extent in shape]
    return f"({items[0]},)" if len(items) == 1 else "(" + ", ".join(items) + ")"


def _array_argument(func: PrimFunc, spec: ParamSpec, arg: Any, known: dict[str, int]) -> np.ndarray:
    where = f"{func.name}() parameter {spec.name}"
    assert spec.shape is not None
    dtype_text = str(spec.dtype)
    if not isinstance(arg, np.ndarray):
        raise TypeError(
            f"{where}: expected a numpy.ndarray of dtype {dtype_text} and shape {_shape_text(spec.shape)}, "
            f"got {type(arg).__name__}"
        )
    if spec.dtype.kind == "bfloat" and arg.dtype.name == "bfloat16":
        arg = arg.view(np.uint16)  # ml_dtypes bfloat16: the same bits
    if arg.dtype != spec.storage:
        hint = " (bfloat16 buffers take a uint16 array of the raw bits)" if spec.dtype.kind == "bfloat" else ""
        raise TypeError(f"{where}: expected dtype {dtype_text}{hint}, got {arg.dtype}")
    if arg.ndim != len(spec.shape):
        raise ValueError(
            f"{where}: expected shape {_shape_text(spec.shape)} ({len(spec.shape)} dimensions), got {arg.shape}"
        )
    expected = []
    for extent, actual in zip(spec.shape, arg.shape):
        value = _evaluate_extent(extent, known)
        if value is None and isinstance(extent, Var):
            known[extent.name] = actual  # a bare shape variable takes the array's extent
            value = actual
        expected.append(value if value is not None else actual)
    if tuple(expected) != arg.shape:
        raise ValueError(f"{where}: expected shape {_shape_text(expected)}, got {arg.shape}")
    if not arg.flags.c_contiguous:
        raise ValueError(
            f"{where}: the array must be C-contiguous (use numpy.ascontiguousarray); got strides {arg.strides}"
        )
    if spec.align > 1 and arg.ctypes.data % spec.align:
        raise ValueError(f"{where}: the data must be aligned to {spec.align} bytes")
    return arg


def _evaluate_extent(extent: Any, known: dict[str, int]) -> int | None:
    """The value of a shape entry given the integer scalar arguments, or None."""
    from tir.ir import Add, FloorDiv, FloorMod, Max, Min, Mul, Sub

    if isinstance(extent, numbers.Integral):
        return int(extent)
    if isinstance(extent, IntImm):
        return extent.value
    if isinstance(extent, Var):
        return known.get(extent.name)
    operations: dict[type, Callable[[int, int], int]] = {
        Add: lambda a, b: a + b,
        Sub: lambda a, b: a - b,
        Mul: lambda a, b: a * b,
        FloorDiv: lambda a, b: a // b,
        FloorMod: lambda a, b: a % b,
        Min: min,
        Max: max,
    }
    operation = operations.get(type(extent))
    if operation is None:
        return None
    a, b = _evaluate_extent(extent.a, known), _evaluate_extent(extent.b, known)
    return None if a is None or b is None else operation(a, b)


# ---------------------------------------------------------------- the host JIT module

_JIT_LOCK = threading.Lock()
_LIBRARY_COUNTER = itertools.count()


@functools.cache
def _load_runtime_libraries() -> None:
    """libgomp (parallel loops) and libgcc_s (half-precision helpers), visible to the JIT."""
    import llvmlite.binding as llvm

    for name in ("gomp", "gcc_s", "m"):
        path = ctypes.util.find_library(name)
        if path is not None:
            llvm.load_library_permanently(path)


@functools.cache
def _jit_for(triple: str, cpu: str, features: str) -> Any:
    """One LLJIT per machine configuration, alive for the whole process.

    Libraries are added to it and removed (through their resource trackers) as modules come
    and go; keeping the JIT itself alive avoids disposing it before a tracker.
    """
    import llvmlite.binding as llvm

    from tir.codegen.llvm_target import _initialize

    _initialize()
    machine = llvm.Target.from_triple(triple).create_target_machine(cpu=cpu, features=features, opt=3, jit=True)
    return llvm.create_lljit_compiler(machine)


class LLVMModule(Module):
    """Code compiled by LLVM for a CPU target: JIT-run in this process when the target is the host."""

    def __init__(self, ir_module: IRModule, target: Any, ir_text: str, entry_name: str | None = None) -> None:
        from tir.codegen.llvm_parallel import NUM_THREADS_SYMBOL
        from tir.codegen.llvm_target import optimize, parse_ir

        super().__init__(ir_module, target, entry_name)
        llvm_module = optimize(parse_ir(ir_text), target)
        self.optimized_ir = str(llvm_module)
        self.unoptimized_ir = ir_text
        self._has_threads_global = NUM_THREADS_SYMBOL in {g.name for g in llvm_module.global_variables}
        self._externals = sorted(
            fn.name for fn in llvm_module.functions if fn.is_declaration and not fn.name.startswith("llvm.")
        )
        self._asm: str | None = None
        self._tracker: Any = None
        self._functions: dict[str, Any] = {}
        self._threads_address = 0
        self.missing_features = _missing_host_features(target)
        if not self.missing_features and target.is_host:
            self._link()

    # ------------------------------------------------------------ JIT

    def _link(self) -> None:
        import llvmlite.binding as llvm

        from tir.codegen.llvm_parallel import NUM_THREADS_SYMBOL

        _load_runtime_libraries()
        missing = [name for name in self._externals if not llvm.address_of_symbol(name)]
        if missing:
            raise RuntimeError(
                f"cannot run {self.entry_name}: external function(s) {', '.join(missing)} are not defined "
                "in this process (load their library with llvmlite.binding.load_library_permanently)"
            )
        jit = _jit_for(self.target.triple, self.target.cpu or "generic", self.target.llvm_features())
        builder = llvm.JITLibraryBuilder().add_ir(self.optimized_ir).add_current_process()
        for name in self.entry_names:
            builder.export_symbol(name)
        if self._has_threads_global:
            builder.export_symbol(NUM_THREADS_SYMBOL)
        with _JIT_LOCK:
            tracker = builder.link(jit, f"tir_{self.entry_name}_{next(_LIBRARY_COUNTER)}")
        self._tracker = tracker  # keeps the code alive as long as this module
        prototype = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)
        self._functions = {name: prototype(tracker[name]) for name in self.entry_names}
        if self._has_threads_global:
            self._threads_address = tracker[NUM_THREADS_SYMBOL]

    @property
    def runnable(self) -> bool:
        """Whether this process can run the code (the target is this CPU, with its features)."""
        return bool(self._functions)

    def _function(self, name: str) -> Any:
        if not self._functions:
            if self.missing_features:
                raise RuntimeError(
                    f"cannot run {self.entry_name} here: it was compiled for {self.target.text!r} "
                    f"(cpu {self.target.cpu}), which needs CPU feature(s) {', '.join(self.missing_features)} "
                    "that this machine lacks; get_source() and export_library() still work"
                )
            raise RuntimeError(
                f"cannot run {self.entry_name} here: the target {self.target.text!r} ({self.target.triple}) "
                "is not this machine"
            )
        return self._functions[name]

    @staticmethod
    def pack(values: list[Any]) -> tuple[Any, list[Any]]:
        """The ``void **args`` array for checked values, and the objects it points into."""
        keep: list[Any] = []
        pointers = (ctypes.c_void_p * max(len(values), 1))()
        for position, value in enumerate(values):
            if not isinstance(value, np.ndarray):
                value = np.array(value)  # a 0-d array owns the scalar's bytes
                keep.append(value)
            pointers[position] = value.ctypes.data
        return pointers, keep

    def _set_threads(self) -> None:
        if self._threads_address:
            ctypes.c_int32.from_address(self._threads_address).value = self.num_threads

    def _run(self, name: str, values: list[Any]) -> None:
        function = self._function(name)
        pointers, _keep = self.pack(values)
        self._set_threads()
        self._check_status(name, function(pointers))

    def _check_status(self, name: str, status: int) -> None:
        if status != 0:
            out_of_bounds = _bounds_check_message(self.ir_module, status)
            if out_of_bounds is not None:
                raise IndexError(f"{name}: out-of-bounds access: {out_of_bounds} (checked build)")
            reason = "a heap allocation failed" if status == -1 else f"status {status}"
            raise RuntimeError(f"{name} failed: {reason}")

    def _time(self, values: list[Any], repeat: int, number: int, warmup: int) -> float:
        function = self._function(self.entry_name)
        pointers, _keep = self.pack(values)
        self._set_threads()
        for _ in range(warmup):
            self._check_status(self.entry_name, function(pointers))
        samples = []
        for _ in range(repeat):
            start = time.perf_counter()
            for _ in range(number):
                function(pointers)
            samples.append((time.perf_counter() - start) / number)
        return float(statistics.median(samples))

    # ------------------------------------------------------------ artifacts

    def get_source(self, fmt: str = "ll") -> str:
        """``"ll"``: the optimized LLVM IR; ``"asm"``: assembly; ``"ll-unopt"``: the IR before optimization."""
        return llvm_source(self, fmt)

    def export_library(self, path: str | os.PathLike[str]) -> str:
        """Write a shared library exporting ``int32_t NAME(void **args)``; returns its path.

        The object comes from LLVM (position-independent) and is linked with
        ``cc -shared -o PATH OBJ -lgomp -lm``. Parallel loops in the library use
        ``__tir_num_threads`` threads (an exported ``int32_t``; 0, the default, lets libgomp
        choose).
        """
        from tir.codegen.llvm_target import emit_object

        if self.target.isa != _host_isa():
            raise RuntimeError(
                f"export_library of a {self.target.isa} module needs a cross toolchain; "
                "build for that target with tir.build to get its module"
            )
        compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
        if compiler is None:
            raise RuntimeError("export_library needs a C compiler (cc) to link the shared library")
        destination = Path(path)
        destination.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="tir_export_") as scratch:
            obj = Path(scratch) / f"{self.entry_name}.o"
            obj.write_bytes(emit_object(self.optimized_ir, self.target))
            command = [compiler, "-shared", "-o", str(destination), str(obj), "-lgomp", "-lm"]
            result = subprocess.run(command, capture_output=True, text=True)
            if result.returncode != 0:
                raise RuntimeError(f"linking failed: {' '.join(command)}\n{result.stderr}")
        return str(destination)


def _bounds_check_message(ir_module: IRModule, status: int) -> str | None:
    """The message of the failed check ``status`` of a checked build, or None."""
    from tir.transform.insert_bounds_checks import BOUNDS_CHECKS_ATTR

    for func in ir_module.functions.values():
        messages = func.attrs.get(BOUNDS_CHECKS_ATTR) or {}
        if status in messages:
            return str(messages[status])
    return None


@functools.cache
def _host_isa() -> str:
    from tir.target import Target

    return Target.host().isa


def _missing_host_features(target: Any) -> tuple[str, ...]:
    from tir.target import Target

    host = Target.host()
    if target.triple != host.triple:
        return ()
    return tuple(sorted(set(target.features) - set(host.features)))


def llvm_source(module: Any, fmt: str) -> str:
    """``get_source`` of a module built through LLVM (host JIT or AArch64): it has
    ``optimized_ir``, ``unoptimized_ir``, ``target`` and an ``_asm`` cache."""
    from tir.codegen.llvm_target import emit_assembly

    if fmt in ("ll", "llvm"):
        return str(module.optimized_ir)
    if fmt == "ll-unopt":
        return str(module.unoptimized_ir)
    if fmt in ("asm", "s"):
        if module._asm is None:
            module._asm = emit_assembly(module.optimized_ir, module.target)
        return str(module._asm)
    raise ValueError(f"unknown source format {fmt!r}; expected 'll', 'll-unopt' or 'asm'")
