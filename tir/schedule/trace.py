"""Traces: the replayable history of a schedule.

Every primitive call is an ``Instruction``: the primitive's name, its arguments (handles and
plain values), its outputs, and, for sampling primitives, the decision taken. A trace prints as
the Python that reproduces the schedule, saves to JSON, and replays on a fresh ``Schedule`` of
the same program, with its recorded decisions or with some of them changed (how the tuner
mutates a program).
"""

from __future__ import annotations

import difflib
import functools
import inspect
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from tir.schedule.handles import BlockRV, ExprRV, LoopRV

if TYPE_CHECKING:
    from tir.schedule.schedule import Schedule

#: The Schedule methods a trace may call: every schedule primitive and getter, nothing else.
TRACEABLE_PRIMITIVES = frozenset(
    {
        "get_block", "get_loops", "get_child_blocks", "get_producers", "get_consumers",
        "split", "fuse", "reorder", "add_unit_loop", "loop_partition", "merge",
        "parallel", "vectorize", "unroll", "bind", "annotate", "unannotate", "annotate_buffer_access",
        "compute_at", "reverse_compute_at", "compute_inline", "reverse_compute_inline",
        "cache_read", "cache_write", "reindex", "set_scope", "storage_align", "set_axis_separator", "cache_index", "reindex_cache_read", "reindex_cache_write", "read_at", "write_at",
        "transform_layout", "transform_block_layout", "pad_einsum", "reorder_block_iter_var", "unsafe_set_dtype",
        "decompose_reduction", "merge_reduction", "rfactor", "fuse_reduction_epilogue", "decompose_padding", "blockize", "tensorize",
        "rolling_buffer",
        "sample_perfect_tile", "sample_categorical", "sample_compute_location", "apply_compute_location",
    }
)  # fmt: skip

_RV_NAME = re.compile(r"[blv][0-9]+")


class TraceError(ValueError):
    """A trace that cannot be loaded or replayed as it is: names the instruction at fault."""


#: Primitives that take a sampling decision (replay passes ``decision=``).
SAMPLING_PRIMITIVES = frozenset({"sample_perfect_tile", "sample_categorical", "sample_compute_location"})


@dataclass(frozen=True)
class Instruction:
    """One primitive call. ``args``/``kwargs`` may hold handles (nested in lists too)."""

    kind: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    outputs: tuple[Any, ...] = ()
    output_is_list: bool = False
    decision: Any = None

    def as_python(self) -> str:
        parts = [_py(arg) for arg in self.args]
        parts += [f"{key}={_py(value)}" for key, value in self.kwargs.items()]
        if self.kind in SAMPLING_PRIMITIVES:
            parts.append(f"decision={_py(self.decision)}")
        call = f"sch.{self.kind}({', '.join(parts)})"
        if not self.outputs:
            return call
        names = ", ".join(rv.rv_name for rv in self.outputs)
        if self.output_is_list and len(self.outputs) == 1:
            names += ","
        return f"{names} = {call}"


def _py(value: Any) -> str:
    if isinstance(value, (BlockRV, LoopRV, ExprRV)):
        return value.rv_name
    if isinstance(value, list):
        return "[" + ", ".join(_py(v) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(_py(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_py(k)}: {_py(v)}" for k, v in value.items()) + "}"
    return repr(value)


class Trace:
    """An ordered list of instructions."""

    def __init__(self, instructions: Sequence[Instruction] = ()) -> None:
        self.instructions: list[Instruction] = list(instructions)

    def __len__(self) -> int:
        return len(self.instructions)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.instructions)

    def append(self, instruction: Instruction) -> None:
        self.instructions.append(instruction)

    def copy(self) -> Trace:
        return Trace(self.instructions)

    # ---------------------------------------------------------------- printing

    def as_python(self) -> str:
        return "\n".join(inst.as_python() for inst in self.instructions)

    def show(self) -> None:
        """Print the Python that reproduces this schedule (``sch`` is the Schedule)."""
        print(self.as_python())

    def __str__(self) -> str:
        return self.as_python()

    # ---------------------------------------------------------------- decisions

    @property
    def decisions(self) -> dict[int, Any]:
        """Instruction position -> decision, for every sampling instruction."""
        return {i: inst.decision for i, inst in enumerate(self.instructions) if inst.kind in SAMPLING_PRIMITIVES}

    def with_decision(self, position: int, decision: Any) -> Trace:
        """A copy whose sampling instruction at ``position`` takes ``decision``."""
        inst = self.instructions[position]
        if inst.kind not in SAMPLING_PRIMITIVES:
            raise ValueError(f"instruction {position} ({inst.kind}) is not a sampling instruction")
        instructions = list(self.instructions)
        instructions[position] = replace(inst, decision=decision)
        return Trace(instructions)

    # ---------------------------------------------------------------- replay

    def apply_to(self, sch: Schedule, decisions: dict[int, Any] | None = None) -> None:
        """Replay on ``sch`` (a fresh schedule of the same program), in order.

        ``decisions`` overrides recorded decisions by instruction position; ``None`` entries
        (or a missing decision) let the schedule sample anew.
        """
        rv_map: dict[str, Any] = {}
        for position, inst in enumerate(self.instructions):
            args = [_map(arg, rv_map) for arg in inst.args]
            kwargs = {key: _map(value, rv_map) for key, value in inst.kwargs.items()}
            if inst.kind in SAMPLING_PRIMITIVES:
                decision = inst.decision
                if decisions is not None and position in decisions:
                    decision = decisions[position]
                kwargs["decision"] = decision
            if inst.kind not in TRACEABLE_PRIMITIVES:
                raise TraceError(f"instruction {position}: {inst.kind!r} is not a schedule primitive")
            try:
                _signature(type(sch), inst.kind).bind(sch, *args, **kwargs)
            except TypeError as error:
                raise TraceError(f"instruction {position} ({inst.kind}): {error}") from None
            result = getattr(sch, inst.kind)(*args, **kwargs)
            if inst.outputs:
                produced = list(result) if isinstance(result, (list, tuple)) else [result]
                if len(produced) != len(inst.outputs):
                    raise TraceError(
                        f"replaying {inst.kind} gave {len(produced)} outputs, the trace recorded {len(inst.outputs)}"
                    )
                for old, new in zip(inst.outputs, produced):
                    rv_map[old.rv_name] = new

    # ---------------------------------------------------------------- JSON

    def to_json(self) -> str:
        return json.dumps({"version": 1, "instructions": [_inst_to_json(inst) for inst in self.instructions]})

    @staticmethod
    def from_json(text: str) -> Trace:
        """Load a trace saved by ``to_json``. Nothing in it runs here, and it is checked first:
        every instruction must name a schedule primitive and hold only plain values and handles,
        or ``TraceError`` names the instruction at fault (traces travel between machines)."""
        try:
            data = json.loads(text)
        except (TypeError, ValueError) as error:
            raise TraceError(f"not a tensorir trace: invalid JSON ({error})") from None
        if not isinstance(data, dict) or data.get("version") != 1:
            raise TraceError("not a tensorir trace (expected a JSON object with version 1)")
        items = data.get("instructions")
        if not isinstance(items, list):
            raise TraceError("not a tensorir trace: 'instructions' must be a list")
        return Trace([_inst_from_json(item, position) for position, item in enumerate(items)])


@functools.cache
def _signature(cls: type, kind: str) -> inspect.Signature:
    return inspect.signature(getattr(cls, kind))


def _map(value: Any, rv_map: dict[str, Any]) -> Any:
    if isinstance(value, (BlockRV, LoopRV, ExprRV)):
        if value.rv_name not in rv_map:
            raise TraceError(f"trace uses {value.rv_name} before an instruction defines it")
        return rv_map[value.rv_name]
    if isinstance(value, list):
        return [_map(v, rv_map) for v in value]
    if isinstance(value, tuple):
        return tuple(_map(v, rv_map) for v in value)
    return value


def _value_to_json(value: Any) -> Any:
    if isinstance(value, (BlockRV, LoopRV, ExprRV)):
        return {"rv": value.rv_name}
    if isinstance(value, (list, tuple)):
        return [_value_to_json(v) for v in value]
    if isinstance(value, dict):
        return {"dict": [[_value_to_json(k), _value_to_json(v)] for k, v in value.items()]}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"cannot save {type(value).__name__} {value!r} in a trace")


def _value_from_json(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"rv"} and isinstance(value["rv"], str) and _RV_NAME.fullmatch(value["rv"]):
            return _placeholder(value["rv"])
        pairs = value.get("dict") if set(value) == {"dict"} else None
        if isinstance(pairs, list) and all(isinstance(p, list) and len(p) == 2 for p in pairs):
            result = {}
            for k, v in pairs:
                key = _value_from_json(k)
                if isinstance(key, (list, dict)):
                    raise TraceError(f"a dictionary key must be a plain value, got {k!r}")
                result[key] = _value_from_json(v)
            return result
        raise TraceError(f"unexpected object {json.dumps(value)[:80]} (a handle is {{'rv': 'l3'}})")
    if isinstance(value, list):
        return [_value_from_json(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TraceError(f"unexpected value {value!r}")


def _placeholder(name: str) -> Any:
    from tir.ir import Var

    if name.startswith("b"):
        return BlockRV("", name)
    if name.startswith("l"):
        return LoopRV(Var(name), name)
    return ExprRV(0, name)


def _inst_to_json(inst: Instruction) -> dict[str, Any]:
    return {
        "kind": inst.kind,
        "args": _value_to_json(list(inst.args)),
        "kwargs": {k: _value_to_json(v) for k, v in inst.kwargs.items()},
        "outputs": [rv.rv_name for rv in inst.outputs],
        "output_is_list": inst.output_is_list,
        "decision": _value_to_json(inst.decision),
    }


def _inst_from_json(item: Any, position: int) -> Instruction:
    def fail(reason: str) -> TraceError:
        return TraceError(f"instruction {position}: {reason}")

    if not isinstance(item, dict):
        raise fail(f"expected a JSON object, got {type(item).__name__}")
    missing = [key for key in ("kind", "args", "kwargs", "outputs") if key not in item]
    if missing:
        raise fail(f"missing {', '.join(map(repr, missing))}")
    kind = item["kind"]
    if not isinstance(kind, str) or kind not in TRACEABLE_PRIMITIVES:
        close = difflib.get_close_matches(str(kind), sorted(TRACEABLE_PRIMITIVES), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise fail(f"{kind!r} is not a schedule primitive{hint}")
    if not isinstance(item["args"], list):
        raise fail("'args' must be a list")
    kwargs = item["kwargs"]
    if not isinstance(kwargs, dict) or not all(isinstance(k, str) and k.isidentifier() for k in kwargs):
        raise fail("'kwargs' must map argument names to values")
    outputs = item["outputs"]
    if not isinstance(outputs, list) or not all(isinstance(n, str) and _RV_NAME.fullmatch(n) for n in outputs):
        raise fail("'outputs' must be a list of handle names such as 'b0', 'l3', 'v7'")
    try:
        return Instruction(
            kind=kind,
            args=tuple(_value_from_json(item["args"])),
            kwargs={k: _value_from_json(v) for k, v in kwargs.items()},
            outputs=tuple(_placeholder(name) for name in outputs),
            output_is_list=bool(item.get("output_is_list", False)),
            decision=_value_from_json(item.get("decision")),
        )
    except TraceError as error:
        raise fail(str(error)) from None
