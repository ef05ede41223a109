"""Running candidates inside a measuring worker: inputs, the output check, the timing.

Inputs are made from the signature alone, deterministically (the same for a candidate and its
reference): floats standard normal, narrow integers (quantized data) in [-8, 8), 32- and 64-bit
integers (mostly indices and shapes) in [0, 8), so that neither overflows nor an index read
from data leaves a buffer; a parameter whose value range the program declares
(``T.func_attr({"value_ranges": {"A": (0, 127)}})``, ``tir.intrin.ranges``) takes values from
all of that range, so a candidate relying on the declaration is checked where it matters.
Outputs start as NaN, so an element a wrong schedule never writes shows up -- unless the
unscheduled program itself leaves NaN in an output (it reads its output before writing it, or
skips elements, or computes NaN): then the outputs of the reference and of every candidate
start from their random values instead.

    reference = compute_reference(encode_program(unscheduled), "llvm")
    run_job(7, job, reference)     # {"seconds": 1.2e-3, "load": 0.0, "stall": 0.0} or {"error_kind": "wrong", ...}

``load`` and ``stall`` say how long other processes kept the timed threads waiting for a CPU
(``metasched.measure.noise``; absent where the OS does not count it).

A module built for AArch64 on another machine runs under qemu (``tir.runtime.aarch64``): it is
checked like any other, and its timing comes back marked ``"emulated": True`` (it measures this
machine translating AArch64 code, not an AArch64 CPU; the cache flush is skipped there).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from metasched.measure.builder import Job, built_modules, decode_program, first_line
from metasched.measure.noise import SampleWatch, ThreadWaits, undisturbed
from tir.runtime.aligned import aligned_copy

__all__ = ["Reference", "compare_outputs", "compute_reference", "make_arguments", "run_job"]

#: A candidate whose first (checked) run is this many times slower than the best so far is
#: reported with that one time.
GIVE_UP_FACTOR = 4.0

#: A candidate whose two timed runs are both this many times slower than the best so far (its
#: one timed run twice that) is reported with their median instead of ``repeat`` runs: the
#: search needs to know it is slower, not by how much to the percent.
CLOSE_FACTOR = 1.25

#: Seconds above which the checked first run counts as a timed run: what makes a first run cold
#: (waking the thread pool, faulting in code pages) costs well under a millisecond.
WARM_ENOUGH = 0.02

#: Seconds above which a first run is not merely cold: a candidate that slow and far slower than
#: the best is reported after it.
COLD_LIMIT = 0.05

#: How many samples, in multiples of the repeats asked for, a candidate is run at most while
#: other tasks keep disturbing its samples (``metasched.measure.noise``).
DISTURBED_PATIENCE = 4

#: Seconds one timed sample lasts at least: a kernel of a few microseconds is called several
#: times per sample, since one call's time is mostly the clock's and the scheduler's jitter
#: (a 3.5 us kernel once took 44 us on two warm calls in a row).
MIN_SAMPLE = 2e-4


@dataclass(frozen=True)
class Reference:
    """The unscheduled program's outputs on the deterministic inputs."""

    outputs: tuple[np.ndarray, ...]  # one per written buffer parameter, in parameter order
    nan_outputs: bool  # whether outputs start as NaN (else as their random values)


def _random_array(rng: np.random.Generator, shape: tuple[int, ...], dtype_text: str, storage: np.dtype) -> np.ndarray:
    if dtype_text == "bfloat16":  # stored as the upper 16 bits of a float32
        values = rng.standard_normal(shape).astype(np.float32)
        return (values.view(np.uint32) >> 16).astype(np.uint16)
    if np.issubdtype(storage, np.floating):
        return rng.standard_normal(shape).astype(storage)
    if storage == np.bool_:
        return rng.integers(0, 2, shape).astype(storage)
    low = -8 if np.issubdtype(storage, np.signedinteger) and storage.itemsize <= 2 else 0
    return rng.integers(low, 8, shape).astype(storage)


def _as_values(array: np.ndarray, dtype_text: str) -> np.ndarray:
    """The numbers an argument holds (bfloat16 bits widened to float32)."""
    if dtype_text == "bfloat16":
        return (array.astype(np.uint32) << 16).view(np.float32)
    return array


def output_positions(func: Any) -> list[int]:
    """Positions (among buffer parameters) of the buffers some block writes."""
    from tir.ir import Block
    from tir.ir.functor import post_order_visit

    written: set[int] = set()

    def visit(node: Any) -> None:
        if isinstance(node, Block):
            written.update(id(region.buffer) for region in node.writes)

    post_order_visit(func.body, visit)
    return [i for i, buffer in enumerate(func.buffer_params) if id(buffer) in written]


#: Arguments made in this process, by signature: the candidates of a task share them, and making
#: a large operand's random values costs more than a fast candidate's whole timing.
_ARGUMENT_CACHE: OrderedDict[Any, tuple[list[np.ndarray], list[int]]] = OrderedDict()
_ARGUMENT_CACHE_SIZE = 4


def make_arguments(func: Any, nan_outputs: bool = True) -> tuple[list[np.ndarray], list[int]]:
    """Deterministic arguments of ``func`` (see the module docstring) and its output positions.

    Fresh arrays every call (a candidate writes its outputs, and a wrong one may write more);
    their values come from a copy of those made for the last signatures seen."""
    from tir.runtime.module import param_specs

    specs = param_specs(func)
    declared = _declared_ranges(func)
    signature: tuple[Any, ...] | None = (
        nan_outputs,
        tuple((s.name, s.shape, str(s.dtype), str(s.storage), s.from_shapes, s.is_buffer) for s in specs),
        tuple(sorted(declared.items())),
        tuple(output_positions(func)),
    )
    try:
        hit = _ARGUMENT_CACHE.get(signature)
    except TypeError:  # an unhashable shape: no cache
        signature, hit = None, None
    if hit is None:
        hit = _make_arguments(func, specs, declared, nan_outputs)
        if signature is not None:
            _ARGUMENT_CACHE[signature] = hit
            while len(_ARGUMENT_CACHE) > _ARGUMENT_CACHE_SIZE:
                _ARGUMENT_CACHE.popitem(last=False)
    else:
        _ARGUMENT_CACHE.move_to_end(signature)
    arrays, outputs = hit
    # Fresh copies, each on a cache line (``tir.runtime.aligned``: a copy wherever numpy put
    # it timed the same program up to 1.4x slower).
    return [aligned_copy(array, fresh=True) for array in arrays], list(outputs)


def _make_arguments(
    func: Any, specs: Any, declared: dict[str, tuple[int, int]], nan_outputs: bool
) -> tuple[list[np.ndarray], list[int]]:
    rng = np.random.default_rng(0)
    arrays = []
    for spec in specs:
        if spec.from_shapes:
            continue  # bound from the arrays' shapes, not passed
        if not spec.is_buffer:
            raise ValueError(f"parameter {spec.name} is a scalar: measuring needs buffer parameters only")
        if not all(isinstance(d, int) for d in spec.shape):  # type: ignore[union-attr]
            raise ValueError(f"parameter {spec.name} has a symbolic shape {spec.shape}: measuring needs static shapes")
        if spec.name in declared:
            low, high = declared[spec.name]
            arrays.append(rng.integers(low, high + 1, tuple(spec.shape)).astype(spec.storage))  # type: ignore[arg-type]
            continue
        arrays.append(_random_array(rng, tuple(spec.shape), str(spec.dtype), spec.storage))  # type: ignore[arg-type]
    outputs = output_positions(func)
    if nan_outputs:
        for position in outputs:
            dtype_text = str(func.buffer_params[position].dtype)
            if dtype_text == "bfloat16":
                arrays[position][...] = 0x7FC0  # a bfloat16 NaN
            elif np.issubdtype(arrays[position].dtype, np.floating):
                arrays[position][...] = np.nan
    return arrays, outputs


def _declared_ranges(func: Any) -> dict[str, tuple[int, int]]:
    """The value ranges ``func`` declares for its parameters (only those it names)."""
    from tir.intrin.ranges import VALUE_RANGES_ATTR, declared_value_ranges

    declared = func.attrs.get(VALUE_RANGES_ATTR)
    if not declared:
        return {}
    ranges = declared_value_ranges(func)
    names = [buffer.name for buffer in func.buffer_params]
    named = (key if isinstance(key, str) else names[key] for key in declared)
    return {name: ranges[name] for name in named}


def is_emulated(module: Any) -> bool:
    """Whether ``module`` runs under an emulator here (an AArch64 module on another machine)."""
    from tir.runtime.aarch64 import AArch64Module

    return isinstance(module, AArch64Module)


def _has_nan(func: Any, arrays: list[np.ndarray], outputs: list[int]) -> bool:
    for position in outputs:
        values = _as_values(arrays[position], str(func.buffer_params[position].dtype))
        if np.issubdtype(values.dtype, np.floating) and np.isnan(values).any():
            return True
    return False


def compute_reference(data: bytes | str, target: str) -> Reference:
    """Build and run the unscheduled program once (raises on failure: the caller records it).

    For a GPU target the program runs on the host CPU instead (unscheduled, it binds no thread
    and cannot build for a GPU), under the default CPU schedule where one applies: a 4096^3
    GEMM takes minutes unscheduled and seconds so; its outputs are compared the same way."""
    import tir
    from tir.target import Target

    func = decode_program(data)
    if Target.parse(target).is_cuda:
        from metasched.space.default import default_schedule

        target = "llvm"
        try:
            func = default_schedule(func, target)
        except Exception:  # noqa: BLE001 - the unscheduled program computes the same, slowly
            pass
    module = tir.build(func, target)
    arrays, outputs = make_arguments(func, nan_outputs=True)
    module(*arrays)
    nan_outputs = True
    if _has_nan(func, arrays, outputs):
        arrays, outputs = make_arguments(func, nan_outputs=False)
        module(*arrays)
        nan_outputs = False
    return Reference(tuple(arrays[i] for i in outputs), nan_outputs)


def compare_outputs(got: np.ndarray, want: np.ndarray, dtype_text: str) -> str | None:
    """None when ``got`` matches ``want``: integers exactly, floats within a tolerance that
    allows reassociated sums (relative, plus absolute relative to the output's largest value);
    NaN matches NaN. Else a description of the first difference."""
    got, want = _as_values(got, dtype_text), _as_values(want, dtype_text)
    if np.issubdtype(want.dtype, np.floating):
        finite = want[np.isfinite(want)]
        scale = max(float(np.abs(finite).max()) if finite.size else 0.0, 1.0)
        low_precision = dtype_text in ("float16", "bfloat16")
        rtol = 2e-2 if low_precision else 1e-3
        atol = (2e-2 if low_precision else 1e-4) * scale
        bad = ~np.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    else:
        bad = got != want
    if not bad.any():
        return None
    where = tuple(int(i) for i in np.argwhere(bad)[0])
    return (
        f"output differs from the unscheduled program at {where}: {got[where]!r} vs {want[where]!r} "
        f"({int(bad.sum())} of {bad.size} elements)"
    )


_EVICTION: np.ndarray | None = None


def last_level_cache_bytes() -> int:
    """The largest CPU cache of this machine (sysfs; 32 MiB when it cannot be read)."""
    from pathlib import Path

    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    sizes = []
    for path in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        sizes.append(int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text))
    return max(sizes, default=32 << 20)


def evict_caches() -> None:
    """Read a buffer twice the size of the last-level cache (at most 512 MiB), so that the next
    run finds its operands in memory, as a model's layer finds its weights."""
    global _EVICTION
    if _EVICTION is None:
        size = min(max(2 * last_level_cache_bytes(), 16 << 20), 512 << 20)
        _EVICTION = np.ones(size // 8, dtype=np.uint64)
    _EVICTION.sum()


def _activations(func: Any, arrays: list[Any], outputs: list[int]) -> list[np.ndarray]:
    """The inputs of ``func`` that are not declared layout-free: in a model, the activations a
    layer reads were just written by the layers before it (in the caches), while its weights
    (layout-free, constants) come from memory. A cold-cache timing reads them back first."""
    from tir.transform.split_prepack import layout_free_names

    constant = set(layout_free_names(func))
    return [
        array
        for position, (buffer, array) in enumerate(zip(func.buffer_params, arrays))
        if position not in outputs and buffer.name not in constant and isinstance(array, np.ndarray)
    ]


def _calls_per_sample(seconds: float, flush_cache: bool) -> int:
    """Calls per timed sample for a kernel whose one call took ``seconds``: enough for the sample
    to last ``MIN_SAMPLE`` (at most 100); one when each call must start from cold caches."""
    if flush_cache or seconds >= MIN_SAMPLE:
        return 1
    return min(100, math.ceil(MIN_SAMPLE / max(seconds, 1e-9)))


def run_job(key: int, job: Job, reference: Reference | None) -> dict[str, Any]:
    """Run the module built under ``key``: the first run is checked against ``reference`` (when
    given), then timed: median of up to ``job.repeat`` runs after that first one (the warm-up),
    within ``job.budget``, fewer for a candidate clearly slower than ``job.best`` (with
    ``job.flush_cache``: each run after ``evict_caches``)."""
    built = built_modules.pop(key)
    reply = _run_built(built, job, reference)
    if is_emulated(built.module):
        reply["emulated"] = True
        # qemu's threads are not the target's: their waits say nothing of the target's timing.
        reply.pop("load", None)
        reply.pop("stall", None)
    return reply


def _run_built(built: Any, job: Job, reference: Reference | None) -> dict[str, Any]:
    func, module = built.func, built.module
    # Evicting this machine's caches says nothing about an emulated CPU's: not done there.
    flush_cache = job.flush_cache and not is_emulated(module)
    resident: list[Any] | None = None
    try:
        if job.num_threads is not None:
            built.set_num_threads(job.num_threads)
        arrays, outputs = make_arguments(func, nan_outputs=reference is None or reference.nan_outputs)
        timed = built.arguments(arrays)  # packs layout-free parameters (not timed)
        resident = _resident_on_gpu(module, timed)
        timed = resident or timed
        # How long other processes kept this worker's threads waiting while it was timed
        # (``noise``): a disturbed timing does not decide the best program.
        watch = ThreadWaits.start()

        def result(seconds: float, quiet: bool = False) -> dict[str, Any]:
            if watch is None:
                return {"seconds": seconds}
            load, stall = (0.0, 0.0) if quiet else watch.stop(disturbed=True)
            return {"seconds": seconds, "load": load, "stall": stall}

        def timed_run(number: int) -> tuple[float, bool]:
            """One timed sample, and whether it ran undisturbed (no thread the sample kept
            runnable -- the kernel's -- waited for a CPU longer than a quiet machine makes it;
            unknown where the OS does not say: yes)."""
            sample_watch = SampleWatch.start() if watch is not None else None
            seconds = module.time(*timed, repeat=1, number=number, warmup=0)
            if sample_watch is None:
                return seconds, True
            return seconds, undisturbed(seconds, sample_watch.longest_wait(sample_watch.runnable_threads()))

        # Timed like the repeats below (the arguments checked outside the clock), so that the
        # first run compares with them.
        first, first_quiet = timed_run(1)
        if resident is not None:
            for position in outputs:
                resident[position].copy_to(arrays[position])  # the check reads the outputs on the host
        if reference is not None:
            if len(reference.outputs) != len(outputs):
                return {"error_kind": "wrong", "error_msg": "writes other parameters than the unscheduled program"}
            for position, want in zip(outputs, reference.outputs):
                buffer = func.buffer_params[position]
                problem = compare_outputs(arrays[position], want, str(buffer.dtype))
                if problem is not None:
                    return {"error_kind": "wrong", "error_msg": f"{buffer.name}: {problem}"}
        if first >= job.budget:
            # Slower than the whole timing budget: its exact time cannot matter, and timing it
            # again would cost the search more than all else.
            return result(first, first_quiet)
        if job.best is not None and first > GIVE_UP_FACTOR * job.best:
            # Far slower than the best so far -- or only cold (a thread pool's start, code pages):
            # a fast kernel's first run can take many times its time; a slow one's cannot. A
            # second, warm run decides for a fast one; slow in both, it is reported as it is.
            if first >= COLD_LIMIT:
                return result(first, first_quiet)
            second, second_quiet = timed_run(_calls_per_sample(first, flush_cache))
            if second > GIVE_UP_FACTOR * job.best:
                return result(min(first, second), first_quiet and second_quiet)
            first, first_quiet = second, second_quiet
        number = _calls_per_sample(first, flush_cache)
        repeat = max(1, min(job.repeat, int(job.budget / max(first * number, 1e-9))))
        activations = _activations(func, arrays, outputs) if flush_cache else []
        # The first run was the warm-up (caches, pages, the thread pool's start); one long
        # enough that those are noise is a timed run too, unless each run starts from cold caches.
        first_counted = first >= WARM_ENOUGH and not flush_cache
        resized = False
        samples = [first] if first_counted else []
        quiet = [first] if samples and first_quiet else []
        # Samples another task disturbed are taken again, up to DISTURBED_PATIENCE times the
        # repeats: on a busy machine the undisturbed ones are the program's own timing.
        attempts = len(samples)
        while len(quiet) < repeat and attempts < DISTURBED_PATIENCE * repeat:
            # One run may be unlucky: a single sample must be twice as far from the best.
            close = CLOSE_FACTOR * (2 if len(samples) == 1 else 1)
            if samples and job.best is not None and min(samples) > close * job.best:
                break  # clearly not the best: its exact time matters less than the search's
            if flush_cache:
                evict_caches()
                for array in activations:
                    array.sum()  # read back into the caches, as the layer before left them
            seconds, calm = timed_run(number)
            too_short = not flush_cache and seconds * number < MIN_SAMPLE / 2
            if not resized and (too_short or (first_counted and first > 2 * CLOSE_FACTOR * seconds)):
                # The first run was cold (a fresh worker's thread pool, its pages): the calls per
                # sample follow from this warm run, and the samples start again. Else a 50 us
                # kernel timed one call at a time has its samples "disturbed" by a woken thread's
                # wait, and the few slow ones, where such a wait is a small share, are what is
                # left as quiet (the demo's 20 us pooling kernels were timed at 4-7 ms).
                resized = True
                samples.clear()
                quiet.clear()
                attempts = 0
                number = _calls_per_sample(seconds, flush_cache)
                repeat = max(1, min(job.repeat, int(job.budget / max(seconds * number, 1e-9))))
                continue
            samples.append(seconds)
            attempts += 1
            if calm:
                quiet.append(seconds)
        if quiet:
            return result(float(np.median(quiet)), quiet=True)
        return result(float(np.median(samples)))
    except Exception as error:  # noqa: BLE001 - every failure is a result, never fatal
        return {"error_kind": "run", "error_msg": first_line(error)}
    finally:
        for buffer in resident or ():
            if hasattr(buffer, "free"):
                buffer.free()


def _resident_on_gpu(module: Any, arguments: list[Any]) -> list[Any] | None:
    """For a CUDA module, its numpy arguments copied to the GPU once (``DeviceBuffer``), so a timed
    run launches the kernels and nothing else; None for any other module. Else every sample
    copies all arguments in and out (192 MB for a 4096^3 GEMM), so a candidate near the best,
    timed the most often, runs the longest: on an H200 the run limit (twice the shortest run,
    which a candidate timed once sets) stopped 16 of a tune's 33 candidates."""
    from tir.runtime.cuda import CUDAModule, DeviceBuffer

    if not isinstance(module, CUDAModule):
        return None
    return [DeviceBuffer(a) if isinstance(a, np.ndarray) else a for a in arguments]
