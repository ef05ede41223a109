"""Building candidates inside a measuring worker, and the plain data a candidate travels as.

A program whose attribute ``"layout_free_buffers"`` names constant parameters (a model's
weights) is built as two modules (``tir.transform.split_prepack``): the packing of those
parameters, run once before the timing, and the rest, which is timed -- as a compiled model
packs its weights once when it is loaded.

A candidate crosses the process boundary as a ``Job``: the program pickled (IR nodes are frozen
dataclasses; one ``pickle.dumps`` keeps every shared ``Var`` and ``Buffer`` shared), or, when it
does not pickle, printed (printing round-trips). Pickling was measured the cheaper of the two on
the hand-scheduled 1024 GEMM: 0.5 ms to pickle + 0.45 ms to unpickle, against 0.9 ms to print +
3.2 ms to parse; it also keeps the printer and parser out of the measurement path.

    job = Job(encode_program(func), "llvm", None, None, num_threads=2, repeat=5)
    build_job(7, job)          # {"build_seconds": 0.21}; the module waits here under key 7
"""

from __future__ import annotations

import pickle
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, cast

__all__ = [
    "Built",
    "Job",
    "build_job",
    "build_program",
    "built_modules",
    "decode_program",
    "encode_program",
    "first_line",
    "run_prepack",
]


@dataclass(frozen=True)
class Job:
    """One candidate to measure, as plain data (what an executor's unit of work receives)."""

    program: bytes | str  # the scheduled program: pickled, or printed
    target: str
    reference_key: str | None  # structural hash of the unscheduled program (outputs are checked against it)
    reference: bytes | str | None  # the unscheduled program, encoded like ``program``
    num_threads: int | None
    repeat: int
    best: float | None = None  # the best seconds so far: a candidate far slower is timed once
    budget: float = 1.0  # seconds of timed runs at most (fewer repeats for slow candidates)
    flush_cache: bool = False  # evict the caches before every timed run (cold operands)
    # What the tuning process registered at run time (``tir.registrations``): the measuring
    # process installs it before building. The jobs of a batch share one object.
    registrations: Any = None


@dataclass(frozen=True)
class Built:
    """A built candidate: ``module`` is what is timed; ``prepack`` (when the program packs
    layout-free parameters) runs once on its arguments first."""

    func: Any  # the program: its buffer parameters are the arguments a caller makes
    module: Any
    prepack: Any = None
    split: Any = None  # the PrepackSplit, with prepack

    def set_num_threads(self, threads: int) -> None:
        self.module.set_num_threads(threads)
        if self.prepack is not None:
            self.prepack.set_num_threads(threads)

    def arguments(self, arrays: list[Any]) -> list[Any]:
        """The timed module's arguments from the program's (one array per buffer parameter):
        the layout-free ones packed (once, here)."""
        if self.prepack is None:
            return arrays
        named = {buffer.name: array for buffer, array in zip(self.func.buffer_params, arrays)}
        return self.split.main_arguments(named, run_prepack(self.prepack, self.split, named))


def run_prepack(module: Any, split: Any, arguments: Any) -> dict[str, Any]:
    """The packed buffers (name -> new array) that ``module`` (the built ``split.prepack``)
    makes from ``arguments`` (the program's, by parameter name)."""

    from tir.runtime.aligned import aligned_zeros
    from tir.runtime.module import param_specs

    specs = {spec.name: spec for spec in param_specs(split.prepack)}
    # packed parameters are buffers: their shape is not None
    packed = {name: aligned_zeros(tuple(cast(tuple, specs[name].shape)), specs[name].storage) for name in split.packed}
    module(*[arguments[name] for name in split.inputs], *packed.values())
    return packed


def build_program(func: Any, target: str) -> Built:
    """Build ``func`` for ``target``, its layout-free packing split off when it has some."""
    import tir
    from tir.transform.split_prepack import split_prepack

    split = split_prepack(func)
    if split.prepack is None:
        return Built(func, tir.build(func, target))
    return Built(func, tir.build(split.main, target), tir.build(split.prepack, target), split)


#: Modules built in this worker, waiting for their run: key -> Built.
built_modules: dict[int, Built] = {}


def encode_program(func: Any) -> bytes | str:
    """The program as plain data: pickled when it pickles, else its printed script."""
    try:
        return pickle.dumps(func, protocol=pickle.HIGHEST_PROTOCOL)
    except (pickle.PicklingError, TypeError, AttributeError, RecursionError):
        return str(func.script())


def decode_program(data: bytes | str) -> Any:
    if isinstance(data, bytes):
        return pickle.loads(data)
    import tir

    return tir.parse(data)


def first_line(error: BaseException) -> str:
    """``Kind: message``, first line only: what a result records of an exception."""
    text = f"{type(error).__name__}: {error}".strip().splitlines()
    return text[0][:300] if text else type(error).__name__


#: Modules this worker built last, by (structural hash, target), least recently used first.
BUILD_CACHE_SIZE = 32
_build_cache: OrderedDict[tuple[int, str], Built] = OrderedDict()


def build_job(key: int, job: Job) -> dict[str, Any]:
    """Decode and build; the module stays in this worker under ``key`` until it is run. A
    program this worker built before (same structural hash and target: the best few re-timed at
    the end of a tune, say) is taken from its build cache: ``build_seconds`` 0, ``cached``."""
    from tir.ir.structural import structural_hash

    start = time.perf_counter()
    try:
        func = decode_program(job.program)
        cache_key = (structural_hash(func), job.target)
        built = _build_cache.get(cache_key)
        if built is not None:
            _build_cache.move_to_end(cache_key)
            built_modules[key] = built
            return {"build_seconds": 0.0, "cached": True}
        built = build_program(func, job.target)
    except Exception as error:  # noqa: BLE001 - every failure is a result, never fatal
        return {"error_kind": "build", "error_msg": first_line(error), "build_seconds": time.perf_counter() - start}
    built_modules[key] = _build_cache[cache_key] = built
    while len(_build_cache) > BUILD_CACHE_SIZE:
        _build_cache.popitem(last=False)
    return {"build_seconds": time.perf_counter() - start}
