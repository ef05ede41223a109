"""The runtime plan of a compiled model: where every value lives and the steps that run.

``Plan`` is what ``compile`` produces and ``CompiledModel`` runs: the steps (``CallStep`` a
kernel call, ``ViewStep`` a value shown through another's memory, ``AssembledStep`` a Concat its
producers wrote in place), each value's ``TensorSpec`` (an input, a constant, an arena slot
with its lifetime, or an alias), the constants and the arena's size. ``plan_memory`` makes it
(``in_place`` first decides which outputs may take an input's memory); ``layout_arena`` places
the arena's values for given symbolic sizes. ``Plan.to_json`` / ``Plan.from_json`` write and
read the layout of ``graph.json``: models saved by earlier versions (the plan was a dict then)
load unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from tir.runtime.aligned import ALIGN

__all__ = [
    "FORMAT_VERSION",
    "AssembledStep",
    "CallStep",
    "Plan",
    "Step",
    "TensorSpec",
    "ViewStep",
    "in_place",
    "layout_arena",
    "plan_memory",
    "shape_at",
]

#: The layout version of ``graph.json``.
FORMAT_VERSION = 1


@dataclass(frozen=True)
class TensorSpec:
    """Where one value lives: ``storage`` ``"input"`` (the caller's array), ``"const"``,
    ``"arena"`` (``offset`` bytes into the arena, alive from step ``first`` to step ``last``)
    or ``"alias"`` (the memory of ``base``, ``byte_offset`` bytes in when it is a slice of a
    Concat's output). ``shape``: ints, symbolic dimensions as ``symbolic.to_json`` trees."""

    shape: tuple[Any, ...]
    dtype: str
    storage: str
    base: str | None = None
    byte_offset: int | None = None
    first: int | None = None
    last: int | None = None
    offset: int | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"shape": list(self.shape), "dtype": self.dtype, "storage": self.storage}
        for name in ("base", "byte_offset", "first", "last", "offset"):
            value = getattr(self, name)
            if value is not None:
                data[name] = value
        return data

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> TensorSpec:
        return TensorSpec(
            tuple(data["shape"]),
            data["dtype"],
            data["storage"],
            data.get("base"),
            data.get("byte_offset"),
            data.get("first"),
            data.get("last"),
            data.get("offset"),
        )


@dataclass(frozen=True)
class ViewStep:
    """``dst`` shows the memory of ``src`` (a reshape): nothing runs."""

    src: str
    dst: str

    @property
    def reads(self) -> tuple[str, ...]:
        return (self.src,)

    @property
    def writes(self) -> tuple[str, ...]:
        return (self.dst,)


@dataclass(frozen=True)
class AssembledStep:
    """``dst``, a Concat's output, is whole: the producers of ``srcs`` wrote it, each its slice."""

    srcs: tuple[str, ...]
    dst: str

    @property
    def reads(self) -> tuple[str, ...]:
        return self.srcs

    @property
    def writes(self) -> tuple[str, ...]:
        return (self.dst,)


@dataclass(frozen=True)
class CallStep:
    """A call of the kernel ``func`` for the fused group ``group``: ``args`` are the values it
    reads then the ``outputs`` values it writes; ``shape_vars`` the symbolic sizes passed after
    them (``with_shape_params``)."""

    func: str
    args: tuple[str, ...]
    outputs: int
    group: str
    shape_vars: tuple[str, ...] = ()

    @property
    def reads(self) -> tuple[str, ...]:
        return self.args[: len(self.args) - self.outputs]

    @property
    def writes(self) -> tuple[str, ...]:
        return self.args[len(self.args) - self.outputs :]


Step = ViewStep | AssembledStep | CallStep


def _step_to_json(step: Step) -> dict[str, Any]:
    if isinstance(step, ViewStep):
        return {"kind": "view", "src": step.src, "dst": step.dst}
    if isinstance(step, AssembledStep):
        return {"kind": "assembled", "srcs": list(step.srcs), "dst": step.dst}
    return {
        "kind": "call",
        "func": step.func,
        "args": list(step.args),
        "outputs": step.outputs,
        "group": step.group,
        "shape_vars": list(step.shape_vars),
    }


def _step_from_json(data: Mapping[str, Any]) -> Step:
    if data["kind"] == "view":
        return ViewStep(data["src"], data["dst"])
    if data["kind"] == "assembled":
        return AssembledStep(tuple(data["srcs"]), data["dst"])
    if data["kind"] != "call":
        raise ValueError(f"a step of unknown kind {data['kind']!r}")
    return CallStep(
        data["func"],
        tuple(data["args"]),
        int(data.get("outputs", 1)),
        data["group"],
        tuple(data.get("shape_vars", ())),
    )


@dataclass(frozen=True)
class Plan:
    """How a compiled model runs: its ``steps`` in order and where each value lives
    (``tensors``); ``constants`` names the constants the steps read, ``arena_bytes`` the arena
    (for the representative sizes when ``symbolic``), ``intermediate_bytes`` what the
    intermediates would take unshared, ``functions`` each kernel's parameter count."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    tensors: dict[str, TensorSpec]
    steps: tuple[Step, ...]
    constants: tuple[str, ...]
    arena_bytes: int
    intermediate_bytes: int
    symbolic: dict[str, int] = field(default_factory=dict)
    functions: dict[str, int] = field(default_factory=dict)

    @property
    def calls(self) -> list[CallStep]:
        """The kernel calls, in order."""
        return [step for step in self.steps if isinstance(step, CallStep)]

    def to_json(self) -> dict[str, Any]:
        """The plan as ``graph.json`` holds it."""
        return {
            "version": FORMAT_VERSION,
            "inputs": list(self.inputs),
            "outputs": list(self.outputs),
            "tensors": {name: tensor.to_json() for name, tensor in self.tensors.items()},
            "steps": [_step_to_json(step) for step in self.steps],
            "constants": list(self.constants),
            "arena_bytes": self.arena_bytes,
            "intermediate_bytes": self.intermediate_bytes,
            "symbolic": dict(self.symbolic),
            "functions": dict(self.functions),
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> Plan:
        """A plan read from ``graph.json`` (its ``version`` checked by the caller)."""
        return Plan(
            tuple(data["inputs"]),
            tuple(data["outputs"]),
            {name: TensorSpec.from_json(tensor) for name, tensor in data["tensors"].items()},
            tuple(_step_from_json(step) for step in data["steps"]),
            tuple(data["constants"]),
            int(data["arena_bytes"]),
            int(data["intermediate_bytes"]),
            dict(data.get("symbolic") or {}),
            dict(data.get("functions") or {}),
        )


def root_of(name: str, bases: Mapping[str, str]) -> str:
    """The value ``name`` shares memory with, through aliases of aliases."""
    while name in bases:
        name = bases[name]
    return name


def in_place(
    graph: Any,
    steps: Sequence[Step],
    funcs: Mapping[str, Any],
    known: Mapping[str, np.ndarray],
    sliced: set[str] | frozenset[str] = frozenset(),
) -> dict[str, str]:
    """Outputs to write over an input of the same call: ``{output: input}`` where the kernel
    allows it (``tir.analysis.in_place_pairs``: a residual add's epilogue reads and writes
    each element once, at one index) and nothing reads the input, or a view of it, afterwards.
    ``sliced``: values that live in a Concat's output, and those outputs (their places are
    taken)."""
    from tir.analysis import in_place_pairs

    views: dict[str, str] = {}

    def group(name: str) -> str:  # the value a view shows, through views of views
        return root_of(name, views)

    last: dict[str, int] = {}
    for index, step in enumerate(steps):
        for name in step.reads:
            last[group(name)] = index
        if isinstance(step, ViewStep):
            views[step.dst] = step.src
    for name in graph.outputs:
        last[group(name)] = len(steps)
    chosen: dict[str, str] = {}
    for index, step in enumerate(steps):
        if not isinstance(step, CallStep):
            continue
        reads = step.reads
        for source_slot, output_slot in in_place_pairs(funcs[step.func]):
            source, output = step.args[source_slot], step.args[output_slot]
            value = group(source)
            if (
                source_slot >= len(reads)  # another output of the call
                or output in chosen
                or output in sliced
                or value in sliced
                or last.get(value) != index  # read later
                or value in graph.inputs  # the caller's array
                or value in known
                or output in graph.outputs
                or sum(group(name) == value for name in reads) != 1  # also passed as another argument
                or graph.infos[source].shape != graph.infos[output].shape
                or graph.infos[source].dtype != graph.infos[output].dtype
            ):
                continue
            chosen[output] = source
            break
    return chosen


def plan_memory(
    graph: Any,
    steps: Sequence[Step],
    known: Mapping[str, np.ndarray],
    in_place: Mapping[str, str] | None = None,
    placed: Mapping[str, tuple[str, int]] | None = None,
) -> Plan:
    """Where every value lives: inputs (the caller's arrays), constants, or the arena (offsets
    from lifetimes: a value's bytes are reused once its last reader has run); views alias.
    ``known``: the constants by name (the graph's and the packed weights); ``in_place``: outputs
    that take the memory of an input (``_in_place``), aliases like views; ``placed``: values
    written into a Concat's output, ``{value: (that output, byte offset)}``, aliases at an
    offset (``byte_offset``), the Concat's output alive from its first slice's writer on.
    Symbolic shapes are kept as ``symbolic.to_json`` trees; offsets are for the representative
    sizes (``_layout`` places the arena again for the sizes of each run)."""
    from metasched.model.symbolic import to_json

    in_place = in_place or {}
    placed = placed or {}
    tensors: dict[str, TensorSpec] = {}
    for name in graph.inputs:
        info = graph.infos[name]
        tensors[name] = TensorSpec(tuple(to_json(d) for d in info.shape), info.dtype, "input")
    constants = []
    base: dict[str, str] = {}
    first: dict[str, int] = {}
    last: dict[str, int] = {}

    def root(name: str) -> str:
        return root_of(name, base)

    def constant(name: str) -> None:
        value = known[name]
        tensors[name] = TensorSpec(tuple(value.shape), str(value.dtype), "const")
        constants.append(name)

    for index, step in enumerate(steps):
        for name in step.reads:
            if name in known and name not in tensors:
                constant(name)
            last[root(name)] = index
        for name in step.writes:
            info = graph.infos[name]
            shape = tuple(to_json(d) for d in info.shape)
            if name in tensors:  # a Concat's output, made when its first slice was written
                last[root(name)] = index
            elif name in placed:
                whole, byte_offset = placed[name]
                if whole not in tensors:
                    tensors[whole] = TensorSpec(tuple(graph.infos[whole].shape), graph.infos[whole].dtype, "arena")
                    first[whole] = index
                base[name] = whole
                tensors[name] = TensorSpec(shape, info.dtype, "alias", base=whole, byte_offset=byte_offset)
                last[whole] = index
            elif isinstance(step, ViewStep) or name in in_place:
                base[name] = step.src if isinstance(step, ViewStep) else in_place[name]
                tensors[name] = TensorSpec(shape, info.dtype, "alias", base=root(base[name]))
                last[root(name)] = index
            else:
                tensors[name] = TensorSpec(shape, info.dtype, "arena")
                first[name] = index
                last[name] = index
    for name in graph.outputs:
        if name in known and name not in tensors:
            constant(name)
        last[root(name)] = len(steps)
    for name, tensor in tensors.items():
        if tensor.storage == "arena":
            tensors[name] = replace(tensor, first=first[name], last=last.get(name, first[name]))
    offsets, arena_bytes, intermediate_bytes = layout_arena(tensors, dict(graph.symbolic))
    # An output written over its input is an intermediate of its own, in borrowed memory.
    intermediate_bytes += sum(nbytes_at(tensors[name], dict(graph.symbolic)) for name in in_place)
    for name, offset in offsets.items():
        tensors[name] = replace(tensors[name], offset=offset)
    return Plan(
        tuple(graph.inputs),
        tuple(graph.outputs),
        tensors,
        tuple(steps),
        tuple(constants),
        int(arena_bytes),
        int(intermediate_bytes),
    )


def layout_arena(tensors: Mapping[str, TensorSpec], sizes: Mapping[str, int]) -> tuple[dict[str, int], int, int]:
    """Arena offsets (biggest first, first fit among values alive at the same time), the arena's
    bytes and the intermediates' total bytes, for the given symbolic sizes."""
    arena = [n for n, t in tensors.items() if t.storage == "arena"]
    nbytes = {n: nbytes_at(tensors[n], sizes) for n in arena}
    offsets: dict[str, int] = {}
    placed: list[tuple[int, int, int, int]] = []  # offset, size, first, last
    for name in sorted(arena, key=lambda n: -nbytes[n]):
        size = -(-max(nbytes[name], 1) // ALIGN) * ALIGN
        lo, hi = tensors[name].first, tensors[name].last
        assert lo is not None and hi is not None  # every arena value has its lifetime (``_plan``)
        busy = sorted((o, s) for o, s, f, la in placed if not (la < lo or f > hi))
        offset = 0
        for o, s in busy:
            if offset + size <= o:
                break
            offset = max(offset, o + s)
        offsets[name] = offset
        placed.append((offset, size, lo, hi))
    arena_bytes = max((o + s for o, s, _, _ in placed), default=0)
    return offsets, int(arena_bytes), int(sum(nbytes.values()))


def shape_at(tensor: TensorSpec, sizes: Mapping[str, int]) -> tuple[int, ...]:
    from metasched.model.symbolic import evaluate

    return tuple(evaluate(d, sizes) for d in tensor.shape)


def nbytes_at(tensor: TensorSpec, sizes: Mapping[str, int] | None = None) -> int:
    shape = shape_at(tensor, sizes or {})
    return int(np.prod(shape, dtype=np.int64)) * np.dtype(tensor.dtype).itemsize


