"""``compile``: a Graph -> groups -> tasks (deduplicated by structural hash) -> schedules (default
rules, or the database's best) -> one shared library -> ``CompiledModel``.

``CompiledModel`` runs the plan: kernels called through ctypes with argument arrays prepared once,
intermediates in one pre-allocated arena (lifetimes planned, memory reused), views as aliases.
``save(dir)`` writes ``model.so``, ``graph.json`` and ``constants.npz``; ``load(dir)`` needs
only numpy and a C loader.

Symbolic dimensions (``compile(path, symbolic={"N": 8})``, see ``metasched.model.symbolic``):
the model is built once; kernels take the symbolic sizes as trailing int32 arguments and are
scheduled for the representative sizes (``metasched.model.symbolic_schedule``). Every run binds
the sizes from the inputs' shapes (inputs that disagree, or a fixed dimension that does not
match, are refused naming the input and dimension), and the arena is laid out again for those
sizes (cached: the same sizes reuse the layout; the arena only grows).
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from metasched.model.plan import (
    FORMAT_VERSION,
    AssembledStep,
    CallStep,
    Plan,
    Step,
    ViewStep,
    in_place,
    layout_arena,
    plan_memory,
    shape_at,
)
from tir.runtime.aligned import aligned_copy, aligned_zeros

if TYPE_CHECKING:  # imported where used: ``load`` needs only numpy and a C loader
    from metasched.model.fuse import Group
    from metasched.model.graph import Graph
    from metasched.task import Task
    from tir.target import Target

__all__ = [
    "CompileReport",
    "CompiledModel",
    "KernelTime",
    "TaskReport",
    "compile",
    "group_tasks",
    "load",
]
#: A kernel of fewer arithmetic operations (``count_flops``: copies count one) runs on one
#: thread: its parallel loops become serial. Such a kernel takes microseconds to a few tens of
#: them on one core: about what starting a parallel region costs when libgomp's threads sleep
#: (15-20 us, ``metasched.measure.executors``), and far less than it can cost on cores other
#: processes use too: with libgomp's default spin-waiting (GOMP_SPINCOUNT), the region's start
#: and end then wait a scheduler time slice for the other thread. On a 2-core AVX-512 Xeon that
#: two other processes loaded, a wav2vec2 encoder's 49-token transformer ran transposes, layer
#: norms and softmaxes of 3 to 70 us on one thread in 8 to 48 ms each on two (onnxruntime:
#: 0.2 ms; OMP_WAIT_POLICY=passive: 0.1 ms).
SERIAL_FLOPS = 1 << 20


@dataclass(frozen=True)
class TaskReport:
    """One task of a compiled model: its name (that of its kernel), weight (the fused groups that
    run it), FLOPs, database key and where its schedule came from (``"default"``,
    ``"database"``, ``"unscheduled"``, ``"default (N=8)"``, a fallback with its reason)."""

    name: str
    weight: float
    flops: float
    schedule: str
    key: str


@dataclass
class CompileReport:
    """What ``compile`` did: tasks, where each schedule came from, times and the memory plan.
    ``warnings``: what fell back to a default without failing the model (a database record
    that did not replay), one line each naming the kernel."""

    tasks: list[TaskReport] = field(default_factory=list)
    compile_seconds: float = 0.0
    build_seconds: float = 0.0
    schedule_seconds: float = 0.0
    arena_bytes: int = 0
    intermediate_bytes: int = 0
    warnings: list[str] = field(default_factory=list)

    def sources(self) -> dict[str, int]:
        """How many tasks took their schedule from each source, in the order first met."""
        counts: dict[str, int] = {}
        for task in self.tasks:
            counts[task.schedule] = counts.get(task.schedule, 0) + 1
        return counts

    def summary(self) -> str:
        warned = f"; {len(self.warnings)} warning(s): {self.warnings[0]}" if self.warnings else ""
        return (
            f"{len(self.tasks)} tasks ({', '.join(f'{v} {k}' for k, v in self.sources().items())}); "
            f"compile {self.compile_seconds:.1f} s (schedules {self.schedule_seconds:.1f} s, "
            f"build {self.build_seconds:.1f} s); arena {self.arena_bytes / 2**20:.1f} MiB for "
            f"{self.intermediate_bytes / 2**20:.1f} MiB of intermediates{warned}"
        )


@dataclass(frozen=True)
class KernelTime:
    """One kernel call's median time in ``CompiledModel.profile``, and its share of the sum."""

    func: str
    group: str
    seconds: float
    share: float


# ---------------------------------------------------------------- compiling


def compile(  # noqa: A001 - the public name the design gives it
    graph: Any,
    target: str | Target = "llvm",
    database: Any = None,
    threads: int | None = 2,
    schedule: str = "default",
    work_dir: str | os.PathLike[str] | None = None,
    symbolic: Mapping[str, int] | None = None,
    layout: str = "auto",
    winograd: bool | None = None,
) -> CompiledModel:
    """Compile a ``Graph`` (or an ONNX path / ModelProto) for ``target``.

    ``schedule``: ``"default"`` (rule-based schedules, zero trials) or ``"none"`` (unscheduled
    programs: slow, for debugging). A ``database`` (path or ``metasched.Database``) overrides
    the schedule of every task it has a record for (a record that does not replay is a line
    in ``report.warnings``, and the task keeps its default schedule). ``symbolic`` (with an
    ONNX path or proto; a Graph carries its own from ``from_onnx``) keeps the named
    ``dim_param``s symbolic: one build runs every size, scheduled for the representative sizes
    given (``{"N": 8}``).
    ``layout``: ``"auto"`` runs 1-D and 2-D convolutions and pooling channels-last on CPU targets
    (``metasched.model.layout``), ``"NCHW"`` keeps the ONNX layout. ``winograd``: run the
    channels-last 3x3 convolutions that fit as Winograd F(2x2, 3x3); by default when a
    ``database`` is given (``extract_tasks`` gives the tuner those tasks): tuned, they beat the
    direct convolution, but their default schedules are slower than its."""
    import tir
    from metasched.model.fuse import partition
    from metasched.model.graph import Graph
    from tir.target import Target

    start = time.perf_counter()
    target = Target.parse(target)
    if not isinstance(graph, Graph):
        from metasched.model.onnx import from_onnx

        graph = from_onnx(graph, symbolic=symbolic)
    elif symbolic is not None and dict(symbolic) != graph.symbolic:
        raise ValueError(
            f"compile(symbolic={dict(symbolic)}) but the graph was imported with symbolic={graph.symbolic}; "
            "pass symbolic to from_onnx (or give compile the ONNX file)"
        )
    from metasched.model.layout import for_target

    graph = for_target(graph, target, layout, database is not None if winograd is None else winograd)
    report = CompileReport()
    groups = partition(graph)
    task_of = group_tasks(graph, groups, target)
    tasks = {task.name: task for task in task_of.values()}  # distinct, in the order first met
    steps: list[Step] = []
    slices = _slice_layouts(graph, groups)
    variants: dict[tuple[str, tuple[tuple[int, ...], ...]], str] = {}  # (task, strides per buffer) -> kernel
    for group in groups:
        if group.kind == "view":
            steps.append(ViewStep(group.nodes[0].inputs[0], group.outputs[0]))
            continue
        if group.kind == "assembled":  # its producers wrote it
            steps.append(AssembledStep(tuple(group.nodes[0].inputs), group.outputs[0]))
            continue
        task = task_of[group.name]
        kernel = task.name
        strides = tuple(slices[name][2] if name in slices else () for name in [*group.inputs, *group.outputs])
        if any(strides):  # a kernel of its own: values that live in a Concat's output have its strides
            kernel = variants.setdefault((task.name, strides), f"{kernel}_at{len(variants)}")
        args = (*group.inputs, *group.outputs)
        steps.append(CallStep(kernel, args, len(group.outputs), group.name, tuple(shape_params(task.kernel))))
    db = _open_database(database)
    t0 = time.perf_counter()
    scheduled: dict[str, Any] = {}
    for name, task in tasks.items():
        if task.symbolic_func is not None:
            from metasched.model.symbolic_schedule import schedule_symbolic

            func, source = schedule_symbolic(task.symbolic_func, task.func, graph.symbolic, target, db, schedule)
            failure = _replay_failure(task, db) if db is not None and not source.startswith("database") else None
            if failure is not None:
                report.warnings.append(f"{name}: {failure}; schedule: {source}")
        else:
            func, source = _schedule(task, target, db, schedule, report.warnings)
        if task.flops < SERIAL_FLOPS:
            func = serial_loops(func)
        scheduled[name] = with_shape_params(replace(func, name=name))
        report.tasks.append(TaskReport(name, task.weight, task.flops, source, task.key))
    report.schedule_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    directory = Path(work_dir) if work_dir is not None else Path(tempfile.mkdtemp(prefix="metasched_model_"))
    directory.mkdir(parents=True, exist_ok=True)
    originals = {name: with_shape_params(task.kernel) for name, task in tasks.items()}
    for (base, strides), kernel in variants.items():
        scheduled[kernel] = replace(with_strides(scheduled[base], strides), name=kernel)
        originals[kernel] = replace(with_strides(originals[base], strides), name=kernel)
    called = {step.func for step in steps if isinstance(step, CallStep)}
    scheduled = {name: func for name, func in scheduled.items() if name in called}
    kernels, hoisted = _hoist_weight_packing(scheduled, steps)
    library, fallen = _build_library(kernels, originals, target, directory, report)
    constants = dict(graph.constants)
    prepacks = {name: tir.build(h.split.prepack, target) for name, h in hoisted.items() if name not in fallen}
    steps = [
        _with_packed_weights(step, hoisted[step.func], prepacks[step.func], constants)
        if isinstance(step, CallStep) and step.func in prepacks
        else step
        for step in steps
    ]
    report.build_seconds = time.perf_counter() - t0
    built = {name: originals[name] if name in fallen else kernels[name] for name in kernels}
    placed = {
        name: (root, offset * np.dtype(graph.infos[name].dtype).itemsize) for name, (root, offset, _) in slices.items()
    }
    shared = in_place(graph, steps, built, constants, {*slices, *(root for root, _, _ in slices.values())})
    plan = replace(
        plan_memory(graph, steps, constants, shared, placed),
        symbolic=dict(graph.symbolic),
        functions={name: len(f.params) for name, f in built.items()},
    )
    model = CompiledModel(plan, {k: constants[k] for k in plan.constants}, library, threads)
    report.arena_bytes = plan.arena_bytes
    report.intermediate_bytes = plan.intermediate_bytes
    report.compile_seconds = time.perf_counter() - start
    model.report = report
    del tir
    return model


def group_tasks(graph: Graph, groups: Sequence[Group], target: Target) -> dict[str, Task]:
    """The task of each kernel group of ``groups`` (``fuse.partition(graph)``), by group name:
    one ``metasched.Task`` per structurally distinct program, named after the first group that
    runs it (``g12_conv_relu``), ``pattern`` its operator pattern (``conv_relu``), ``weight``
    the number of groups that run it (they share the Task object). In a graph with symbolic
    dimensions, groups are one task when the programs the model runs (``Task.kernel``) are
    equal; ``func`` is that program at the representative sizes (what is tuned and looked up in
    the database). ``extract_tasks`` and ``compile`` both take their tasks from here."""
    from metasched.model.fuse import lower_group
    from metasched.task import Task, workload_hash

    representative = representative_graph(graph) if graph.symbolic else None
    by_key: dict[str, Task] = {}
    task_of: dict[str, Task] = {}
    for group in groups:
        if group.kind != "kernel":
            continue
        fixed = lower_group(representative, group) if representative is not None else None
        func = lower_group(graph, group)
        key = workload_hash(func)
        task = by_key.get(key)
        if task is None:
            symbolic = fixed is not None and bool(shape_params(func))
            pattern = group.name.partition("_")[2] or group.name
            task = Task.from_func(
                fixed if fixed is not None and symbolic else func,
                target,
                weight=0,
                name=group.name,
                pattern=pattern,
                symbolic_func=func if symbolic else None,
            )
            by_key[key] = task
        task.weight += 1
        task_of[group.name] = task
    return task_of


def representative_graph(graph: Any) -> Any:
    """A copy of ``graph`` with every symbolic dimension at its representative size."""
    from metasched.model.graph import Graph, TensorInfo
    from metasched.model.symbolic import substitute

    infos = {
        name: TensorInfo(tuple(substitute(d, graph.symbolic) for d in info.shape), info.dtype)
        for name, info in graph.infos.items()
    }
    return Graph(graph.name, graph.inputs, graph.outputs, graph.nodes, graph.constants, infos, graph.opset)


def shape_params(func: Any) -> list[str]:
    """Names of the shape variables ``func``'s buffers use (parameters' and allocations'), sorted."""
    from metasched.model.symbolic import free_vars

    extents = [e for b in func.buffer_params for e in b.shape]
    return sorted(free_vars(extents))


def with_shape_params(func: Any) -> Any:
    """``func`` with its shape variables as trailing int32 scalar parameters, sorted by name (the
    plan passes the sizes bound from the inputs; derived extents such as ``(W - 3) // 2 + 1``
    could not be bound from an argument's shape)."""
    from metasched.model.symbolic import free_vars

    found = free_vars([e for b in func.buffer_params for e in b.shape])
    if not found:
        return func
    present = {p.name for p in func.params if not hasattr(p, "shape")}
    extra = tuple(found[name] for name in sorted(found) if name not in present)
    return replace(func, params=(*func.params, *extra)) if extra else func


def _slice_layouts(graph: Any, groups: list[Any]) -> dict[str, tuple[str, int, tuple[int, ...]]]:
    """Where each value that lives in a Concat's output is (``fuse.Group.slice_of``, nested
    Concats resolved): ``{value: (outermost Concat output, element offset, strides)}``, the
    strides (in elements) those of that output, which every level shares."""
    parent = {group.outputs[0]: group.slice_of for group in groups if group.slice_of is not None}
    layouts: dict[str, tuple[str, int, tuple[int, ...]]] = {}
    for name in parent:
        levels = []
        root = name
        while root in parent:
            levels.append(parent[root])
            root = levels[-1][0]
        shape = [int(extent) for extent in graph.infos[root].shape]
        strides = [int(np.prod(shape[axis + 1 :], dtype=np.int64)) for axis in range(len(shape))]
        offset = sum(start * strides[axis] for _, axis, start in levels)
        layouts[name] = (root, offset, tuple(strides))
    return layouts


def with_strides(func: Any, strides: tuple[tuple[int, ...], ...]) -> Any:
    """``func`` addressing its buffer parameters through ``strides`` (elements; one tuple per
    buffer parameter, empty for compact): slices of bigger arrays. Only addressing changes; a
    schedule made for compact buffers still holds."""
    from tir.ir import const, replace_buffers

    mapping = {}
    for buffer, given in zip(func.buffer_params, strides, strict=True):
        if not given:
            continue
        if len(given) != len(buffer.shape):
            raise ValueError(f"{func.name}: {len(given)} strides for the {len(buffer.shape)}-d buffer {buffer.name}")
        mapping[buffer] = buffer.replace(strides=tuple(const(s, buffer.shape[0].dtype) for s in given))
    return replace_buffers(func, mapping)


def serial_loops(func: Any) -> Any:
    """``func`` with its parallel loops serial (the same object when it has none)."""
    from tir.ir.functor import IRMutator
    from tir.ir.stmt import For, ForKind

    class _Serial(IRMutator):
        def visit_For(self, loop: For) -> For:
            loop = self.generic_visit(loop)  # type: ignore[assignment]
            return loop.replace(kind=ForKind.SERIAL) if loop.kind is ForKind.PARALLEL else loop

    body = _Serial().visit(func.body)
    return func if body is func.body else replace(func, body=body)


def _open_database(database: Any) -> Any:
    if database is None:
        return None
    from metasched.database import Database

    return database if isinstance(database, Database) else Database(database)


def _schedule(task: Task, target: Target, db: Any, mode: str, warnings: list[str]) -> tuple[Any, str]:
    """``task.func`` scheduled by the database's best record, else by the default rules (``mode``
    ``"none"``: unscheduled), and where the schedule came from. A database that has records of
    the task none of which replays is a line in ``warnings`` naming the task (its kernel) and
    the error; the model still compiles, with the default schedule."""
    func = task.func
    if db is not None:
        from metasched import apply_database

        try:
            tuned = apply_database(func, db, target)
        except Exception as error:  # noqa: BLE001 - a record that cannot be read: fall back, never fail the model
            tuned = None
            warnings.append(f"{task.name}: the database's record failed ({_error_line(error)}); default schedule used")
        else:
            failure = _replay_failure(task, db) if tuned is None else None
            if failure is not None:
                warnings.append(f"{task.name}: {failure}; default schedule used")
        if tuned is not None:
            return tuned, "database"
    if mode == "none":
        return func, "unscheduled"
    from metasched.space.default import default_schedule

    scheduled = default_schedule(func, target)
    return scheduled, "default" if scheduled is not func else "unscheduled"


def _error_line(error: BaseException) -> str:
    lines = str(error).splitlines()
    return f"{type(error).__name__}: {lines[0][:160]}" if lines else type(error).__name__


def _replay_failure(task: Task, db: Any) -> str | None:
    """Why the database gives no program for ``task`` although it has valid records of it
    (``apply_database`` and ``schedule_symbolic`` skip a record that does not replay): the best
    record's error, replayed on the program the model runs. None when it has no valid record."""
    from tir.schedule import Schedule, Trace

    best = db.get_top_k(task.func, task.target, 1)
    if not best:
        return None
    try:
        Trace.from_json(best[0].trace_json).apply_to(Schedule(task.kernel))
    except Exception as error:  # noqa: BLE001 - the reason, reported
        reason = _error_line(error)
    else:
        reason = "the best one replays here: another was chosen and did not"
    return f"the database's records of it do not replay ({reason})"


@dataclass(frozen=True)
class _Hoisted:
    """A kernel whose weight packing runs once, at compile time: ``main`` takes the packed
    weights (after the other inputs, before the outputs) instead of the weights."""

    split: Any  # tir.transform.PrepackSplit
    main: Any
    params: tuple[str, ...]  # the scheduled kernel's buffer parameter names, in order


def _hoist_weight_packing(
    scheduled: dict[str, Any], steps: Sequence[Step]
) -> tuple[dict[str, Any], dict[str, _Hoisted]]:
    """The kernels to build, with the packing of weights (layout-free parameters) split off
    where a schedule packs them (``tir.transform.split_prepack``), and those splits by name."""
    from tir.ir import Buffer
    from tir.transform import split_prepack

    outputs = {step.func: step.outputs for step in steps if isinstance(step, CallStep)}
    kernels = dict(scheduled)
    hoisted: dict[str, _Hoisted] = {}
    for name, func in scheduled.items():
        split = split_prepack(func)
        if split.prepack is None or name not in outputs:
            continue
        buffers = [p for p in split.main.params if isinstance(p, Buffer)]
        scalars = [p for p in split.main.params if not isinstance(p, Buffer)]
        packed = [b for b in buffers if b.name in split.packed]
        rest = [b for b in buffers if b.name not in split.packed]
        count = outputs[name]
        main = replace(split.main, params=(*rest[:-count], *packed, *rest[-count:], *scalars))
        kernels[name] = main
        hoisted[name] = _Hoisted(split, main, tuple(b.name for b in func.buffer_params))
    return kernels, hoisted


def _with_packed_weights(
    step: CallStep, hoisted: _Hoisted, prepack: Any, constants: dict[str, np.ndarray]
) -> CallStep:
    """``step`` calling the kernel without its weight packing: the packed weights are made now
    (``prepack``: the built packing), from this step's constants, as new constants
    ``<group>:<packed buffer>``."""
    from metasched.measure.builder import run_prepack

    by_param = dict(zip(hoisted.params, step.args))
    missing = [by_param[name] for name in hoisted.split.inputs if by_param[name] not in constants]
    if missing:  # cannot happen: only constants are layout-free (fuse.lower_group)
        raise ValueError(f"{step.group}: {missing[0]!r} is packed once but is not a constant of the model")
    # A folded constant can be a strided view (a transposed weight); the packing reads it row-major.
    weights = {name: np.ascontiguousarray(constants[by_param[name]]) for name in hoisted.split.inputs}
    packed = run_prepack(prepack, hoisted.split, weights)
    for name, array in packed.items():
        by_param[name] = f"{step.group}:{name}"
        constants[by_param[name]] = array
    return replace(step, args=tuple(by_param[b.name] for b in hoisted.main.buffer_params))


def _build_library(
    kernels: dict[str, Any], originals: dict[str, Any], target: Target, directory: Path, report: CompileReport
) -> tuple[str, set[str]]:
    """One shared library with every kernel, and the names of those that failed to build and
    were rebuilt unscheduled."""
    import tir
    from tir.ir import IRModule

    funcs = dict(kernels)
    fallen: set[str] = set()
    try:
        module = tir.build(IRModule(funcs), target)
    except Exception:
        for name, func in list(funcs.items()):
            try:
                tir.build(func, target)
            except Exception:
                funcs[name] = replace(originals[name], name=name)
                fallen.add(name)
                report.tasks = [
                    replace(task, schedule="unscheduled (default failed to build)") if task.name == name else task
                    for task in report.tasks
                ]
        module = tir.build(IRModule(funcs), target)
    path = directory / "model.so"
    module.export_library(path)
    return str(path), fallen


def _launch(function: Any, pointers: Any) -> None:
    """Call one kernel of the library; a nonzero status is an error naming it."""
    status = function(pointers)
    if status != 0:
        raise RuntimeError(f"kernel {function.__name__} failed with status {status}")


class CompiledModel:
    """A compiled model: ``run({"x": array}) -> {output name: array}``."""

    def __init__(
        self, plan: Plan, constants: Mapping[str, np.ndarray], library: str, threads: int | None = None
    ) -> None:
        self.plan = plan
        self.library_path = library
        self.report: CompileReport | None = None
        self.symbolic: dict[str, int] = dict(plan.symbolic)
        self._lib = ctypes.CDLL(library)
        # on cache lines: the kernels read weights in whole vectors (``tir.runtime.aligned``)
        self._constants = {k: aligned_copy(v) for k, v in constants.items()}
        # One int32 cell per symbolic size: the kernels' trailing scalar arguments point here.
        self._size_cells = {name: np.zeros((), np.int32) for name in self.symbolic}
        self._arena = np.zeros(0, dtype=np.uint8)
        self._sizes: dict[str, int] | None = None
        self._functions = []
        for step in plan.calls:
            function = getattr(self._lib, step.func)
            function.restype = ctypes.c_int32
            function.argtypes = [ctypes.c_void_p]
            self._functions.append(function)
        if not self.symbolic:
            self._prepare({})
        self.threads = threads
        self.set_threads(threads)

    # ------------------------------------------------------------ memory

    def _prepare(self, sizes: dict[str, int]) -> None:
        """Arrays and argument pointers for these symbolic sizes (the arena laid out for them)."""
        if self._sizes == sizes:
            return
        tensors = self.plan.tensors
        self._shapes = {name: shape_at(tensor, sizes) for name, tensor in tensors.items()}
        if self.symbolic:
            for name, shape in self._shapes.items():
                if any(extent < 1 for extent in shape):
                    given = ", ".join(f"{k}={v}" for k, v in sizes.items())
                    raise ValueError(
                        f"{given} is too small for this model: the value {name!r} would have shape {shape}"
                    )
            offsets, arena_bytes, _ = layout_arena(tensors, sizes)
        else:
            offsets = {n: t.offset for n, t in tensors.items() if t.storage == "arena" and t.offset is not None}
            arena_bytes = self.plan.arena_bytes
        if self._arena.size < arena_bytes:
            self._arena = aligned_zeros(max(arena_bytes, 1), np.uint8)
        self._arrays: dict[str, np.ndarray] = {}
        for name, tensor in tensors.items():
            if tensor.storage == "arena":
                self._arrays[name] = self._view(offsets[name], name)
            elif tensor.storage == "const":
                self._arrays[name] = self._constants[name].reshape(self._shapes[name])
        self._calls: list[tuple[Any, Any, list[tuple[int, str]]]] = []
        for function, step in zip(self._functions, self.plan.calls, strict=True):
            names = step.shape_vars
            pointers = (ctypes.c_void_p * max(len(step.args) + len(names), 1))()
            late = []
            for slot, name in enumerate(step.args):
                fixed = self._fixed_array(name)
                if fixed is None:
                    late.append((slot, name))
                else:
                    pointers[slot] = fixed.ctypes.data + (tensors[name].byte_offset or 0)
            for slot, name in enumerate(names, start=len(step.args)):
                pointers[slot] = self._size_cells[name].ctypes.data
            self._calls.append((function, pointers, late))
        self._sizes = dict(sizes)

    def _view(self, offset: int, name: str) -> np.ndarray:
        dtype = np.dtype(self.plan.tensors[name].dtype)
        shape = self._shapes[name]
        count = int(np.prod(shape, dtype=np.int64))
        return self._arena[offset : offset + count * dtype.itemsize].view(dtype).reshape(shape)

    def _root(self, name: str) -> str:
        tensor = self.plan.tensors[name]
        return tensor.base if tensor.storage == "alias" and tensor.base is not None else name

    def _fixed_array(self, name: str) -> np.ndarray | None:
        root = self._root(name)
        return self._arrays.get(root)

    @property
    def arena_bytes(self) -> int:
        """Bytes of the arena (for the representative sizes when the model is symbolic)."""
        return int(self.plan.arena_bytes)

    @property
    def intermediate_bytes(self) -> int:
        return int(self.plan.intermediate_bytes)

    # ------------------------------------------------------------ running

    def set_threads(self, threads: int | None) -> None:
        """Pin the thread count of every parallel loop (None: libgomp's default)."""
        self.threads = threads
        try:
            ctypes.c_int32.in_dll(self._lib, "__tir_num_threads").value = int(threads or 0)
        except ValueError:
            pass  # no parallel loop in the library

    @property
    def input_specs(self) -> dict[str, tuple[tuple[int | str, ...], str]]:
        """Input name -> (shape, dtype); a symbolic dimension is given by its name."""
        return {n: (self.plan.tensors[n].shape, self.plan.tensors[n].dtype) for n in self.plan.inputs}

    def _check_inputs(self, inputs: Mapping[str, Any]) -> tuple[dict[str, np.ndarray], dict[str, int]]:
        """The inputs as contiguous arrays, and the symbolic sizes their shapes give."""
        expected = self.input_specs
        unknown = [n for n in inputs if n not in expected]
        if unknown:
            raise ValueError(f"unknown input(s) {unknown}; the model's inputs are {list(expected)}")
        checked = {}
        sizes: dict[str, int] = {}
        source: dict[str, str] = {}
        for name, (shape, dtype) in expected.items():
            if name not in inputs:
                raise ValueError(f"missing input {name!r} (shape {shape}, dtype {dtype})")
            array = inputs[name]
            if not isinstance(array, np.ndarray):
                raise TypeError(f"input {name!r} must be a numpy array, got {type(array).__name__}")
            if array.dtype != np.dtype(dtype):
                raise TypeError(f"input {name!r} has dtype {array.dtype}, the model expects {dtype}")
            if array.ndim != len(shape):
                raise ValueError(
                    f"input {name!r} has shape {tuple(array.shape)} (rank {array.ndim}), the model expects "
                    f"rank {len(shape)}: {shape}"
                )
            for axis, (got, want) in enumerate(zip(array.shape, shape, strict=True)):
                if isinstance(want, str):
                    if got < 1:
                        raise ValueError(f"input {name!r} dimension {axis} ({want}) is {got}; it must be at least 1")
                    if want in sizes and sizes[want] != got:
                        raise ValueError(
                            f"input {name!r} dimension {axis} ({want}) is {got}, but input {source[want]!r} "
                            f"gives {want} = {sizes[want]}"
                        )
                    sizes[want], source[want] = int(got), name
                elif isinstance(want, int) and got != want:
                    raise ValueError(
                        f"input {name!r} has shape {tuple(array.shape)}, the model expects {shape}: "
                        f"dimension {axis} must be {want}"
                    )
            checked[name] = np.ascontiguousarray(array)
        return checked, sizes

    def _start(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Check ``inputs``, lay the arena out for their sizes, set the size cells and point the
        kernels' input arguments at the checked arrays (returned by name)."""
        arrays, sizes = self._check_inputs(inputs)
        self._prepare(sizes)
        for name, value in sizes.items():
            self._size_cells[name][...] = value
        for _, pointers, late in self._calls:
            for slot, name in late:
                pointers[slot] = arrays[self._root(name)].ctypes.data
        return arrays

    def run(self, inputs: Mapping[str, Any]) -> dict[str, np.ndarray]:
        """Run the model on numpy arrays; returns a dict of output name -> array (fresh copies)."""
        arrays = self._start(inputs)
        for function, pointers, _ in self._calls:
            _launch(function, pointers)
        outputs = {}
        for name in self.plan.outputs:
            root = self._root(name)
            source = arrays[root] if root in arrays else self._arrays[root]
            outputs[name] = source.reshape(self._shapes[name]).copy()
        return outputs

    __call__ = run

    def benchmark(self, inputs: Mapping[str, Any], repeat: int = 10, warmup: int = 2) -> float:
        """Median seconds of one run."""
        for _ in range(warmup):
            self.run(inputs)
        samples = []
        for _ in range(repeat):
            start = time.perf_counter()
            self.run(inputs)
            samples.append(time.perf_counter() - start)
        return float(np.median(samples))

    def profile(self, inputs: Mapping[str, Any], repeat: int = 5) -> list[KernelTime]:
        """Median seconds of each kernel call over ``repeat`` runs, slowest first, with its
        kernel, its fused group and its share of the summed kernel time."""
        arrays = self._start(inputs)  # kept alive: the kernels' pointers lead into it
        for function, pointers, _ in self._calls:  # a warm-up run
            _launch(function, pointers)
        steps = self.plan.calls
        samples: list[list[float]] = [[] for _ in steps]
        for _ in range(max(repeat, 1)):
            for index, (function, pointers, _) in enumerate(self._calls):
                start = time.perf_counter()
                _launch(function, pointers)
                samples[index].append(time.perf_counter() - start)
        del arrays
        medians = [float(np.median(s)) for s in samples]
        total = sum(medians) or 1.0
        rows = [
            KernelTime(step.func, step.group, seconds, seconds / total)
            for step, seconds in zip(steps, medians, strict=True)
        ]
        return sorted(rows, key=lambda row: -row.seconds)

    # ------------------------------------------------------------ artifacts

    def save(self, directory: str | os.PathLike[str]) -> str:
        """``model.so``, ``graph.json`` and ``constants.npz`` in ``directory``."""
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        if Path(self.library_path).resolve() != (path / "model.so").resolve():
            shutil.copyfile(self.library_path, path / "model.so")
        keys = {name: f"c{k}" for k, name in enumerate(self.plan.constants)}
        # numpy's stub matches the **arrays against savez's allow_pickle: bool (keys here are c0, c1...)
        np.savez(path / "constants.npz", **{keys[n]: self._constants[n] for n in self.plan.constants})  # type: ignore[arg-type]
        plan = dict(self.plan.to_json(), constant_keys=keys, threads=self.threads)
        (path / "graph.json").write_text(json.dumps(plan, indent=1))
        return str(path)


def load(directory: str | os.PathLike[str], threads: int | None = None) -> CompiledModel:
    """A model saved by ``CompiledModel.save``."""
    path = Path(directory)
    graph_file = path / "graph.json"
    if not graph_file.exists():
        raise FileNotFoundError(f"{path} holds no saved model (no graph.json)")
    plan = json.loads(graph_file.read_text())
    if plan.get("version") != FORMAT_VERSION:
        raise ValueError(f"{graph_file}: format version {plan.get('version')}, this library reads {FORMAT_VERSION}")
    keys = plan.pop("constant_keys", {})
    saved_threads = plan.pop("threads", None)
    with np.load(path / "constants.npz") as data:
        constants = {name: data[key] for name, key in keys.items()}
    return CompiledModel(
        Plan.from_json(plan), constants, str(path / "model.so"), threads if threads is not None else saved_threads
    )
