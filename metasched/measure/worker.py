"""What runs inside a measuring worker process: build, check, time one candidate.

The parent sends plain data (the printed programs: printing round-trips), so nothing here
depends on pickling IR. A worker keeps the modules it built until told to run them, and caches
the reference outputs of each unscheduled program it has seen.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Job", "build_job", "random_inputs", "run_job", "serve"]


@dataclass(frozen=True)
class Job:
    """One candidate to measure, as plain data."""

    script: str  # the scheduled program, printed
    target: str
    reference: str | None  # the unscheduled program, printed (outputs are checked against it)
    num_threads: int | None
    repeat: int
    best: float | None = None  # the best seconds so far: a candidate far slower is timed once
    budget: float = 1.0  # seconds of timed runs at most (fewer repeats for slow candidates)


#: A candidate whose first (checked) run is this many times slower than the best so far is
#: reported with that one time.
_GIVE_UP_FACTOR = 4.0

_modules: dict[int, Any] = {}
_references: dict[str, list[np.ndarray]] = {}


def _first_line(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}".strip().splitlines()
    return text[0][:300] if text else type(error).__name__


def random_inputs(func: Any) -> list[np.ndarray]:
    """Deterministic arguments for a program: floats standard normal, integers in a small range
    (no overflow in sums), outputs too (they are overwritten; NaN where floats, so an element
    a wrong schedule never writes shows up)."""
    from tir.runtime.module import param_specs

    rng = np.random.default_rng(0)
    arrays = []
    for spec in param_specs(func):
        if not spec.is_buffer:
            raise ValueError(f"parameter {spec.name} is a scalar: measuring needs buffer parameters only")
        shape = tuple(int(d) for d in spec.shape)  # type: ignore[arg-type, union-attr]
        dtype = spec.storage
        if np.issubdtype(dtype, np.floating):
            arrays.append(rng.standard_normal(shape).astype(dtype))
        elif dtype == np.bool_:
            arrays.append(rng.integers(0, 2, shape).astype(dtype))
        else:
            low = 0 if np.issubdtype(dtype, np.unsignedinteger) else -8
            arrays.append(rng.integers(low, 8, shape).astype(dtype))
    return arrays


def _outputs(func: Any) -> list[int]:
    """Positions of the buffer parameters some block writes."""
    from tir.ir import Block
    from tir.ir.functor import post_order_visit

    written: set[int] = set()

    def visit(node: Any) -> None:
        if isinstance(node, Block):
            written.update(id(region.buffer) for region in node.writes)

    post_order_visit(func.body, visit)
    return [i for i, buffer in enumerate(func.buffer_params) if id(buffer) in written]


def _fresh_arguments(func: Any) -> tuple[list[np.ndarray], list[int]]:
    arrays = random_inputs(func)
    outputs = _outputs(func)
    for position in outputs:
        if np.issubdtype(arrays[position].dtype, np.floating):
            arrays[position][...] = np.nan
    return arrays, outputs


def _reference_outputs(script: str, target: str) -> list[np.ndarray]:
    found = _references.get(script)
    if found is None:
        import tir

        func = tir.parse(script)
        module = tir.build(func, target)
        arrays, outputs = _fresh_arguments(func)
        module(*arrays)
        found = _references[script] = [arrays[i] for i in outputs]
    return found


def _compare(got: np.ndarray, want: np.ndarray) -> str | None:
    if np.issubdtype(want.dtype, np.floating):
        scale = float(np.nanmax(np.abs(want))) if want.size else 0.0
        bad = ~np.isclose(got, want, rtol=1e-3, atol=1e-4 * max(scale, 1.0))
    else:
        bad = got != want
    if not bad.any():
        return None
    where = tuple(int(i) for i in np.argwhere(bad)[0])
    return f"output differs from the unscheduled program at {where}: {got[where]!r} vs {want[where]!r} ({int(bad.sum())} elements)"


def build_job(key: int, job: Job) -> dict[str, Any]:
    """Parse and build; the module stays here under ``key`` until ``run_job``."""
    start = time.perf_counter()
    try:
        import tir

        func = tir.parse(job.script)
        module = tir.build(func, job.target)
    except Exception as error:  # noqa: BLE001 - every failure is a result, never fatal
        return {"error_kind": "build", "error_msg": _first_line(error), "build_seconds": time.perf_counter() - start}
    _modules[key] = (func, module)
    return {"build_seconds": time.perf_counter() - start}


def run_job(key: int, job: Job) -> dict[str, Any]:
    """Check the outputs (when there is a reference), then time: median of ``repeat`` runs."""
    func, module = _modules.pop(key)
    try:
        if job.num_threads is not None:
            module.set_num_threads(job.num_threads)
        arrays, outputs = _fresh_arguments(func)
        start = time.perf_counter()
        module(*arrays)
        first = time.perf_counter() - start
        if job.reference is not None:
            expected = _reference_outputs(job.reference, job.target)
            for position, want in zip(outputs, expected):
                problem = _compare(arrays[position], want)
                if problem is not None:
                    return {"error_kind": "wrong", "error_msg": f"{func.buffer_params[position].name}: {problem}"}
        if job.best is not None and first > _GIVE_UP_FACTOR * job.best:
            # Far slower than the best so far: its exact time cannot matter, and timing it
            # repeatedly would cost the search more than everything else.
            return {"seconds": first}
        repeat = max(1, min(job.repeat, int(job.budget / max(first, 1e-9))))
        seconds = module.time(*arrays, repeat=repeat, warmup=1 if first < job.budget / 4 else 0)
    except Exception as error:  # noqa: BLE001
        return {"error_kind": "run", "error_msg": _first_line(error)}
    return {"seconds": seconds}


def serve(connection: Any) -> None:
    """The worker's loop: ("build", key, job) / ("run", key, job) / ("drop", key) until closed."""
    import tir  # noqa: F401 - import once, before the first job is timed

    while True:
        try:
            message = connection.recv()
        except (EOFError, OSError):
            return
        kind = message[0]
        try:
            if kind == "build":
                reply = build_job(message[1], message[2])
            elif kind == "run":
                reply = run_job(message[1], message[2])
            elif kind == "drop":
                _modules.pop(message[1], None)
                continue
            else:
                return
        except Exception:  # noqa: BLE001 - a bug here must not hang the parent
            reply = {"error_kind": "run", "error_msg": traceback.format_exc(limit=3).splitlines()[-1]}
        connection.send(reply)


def serve_fd(fd: int) -> None:
    """Entry point of a worker process: serve over the socket ``fd`` until the parent goes."""
    from multiprocessing.connection import Connection

    serve(Connection(fd))
