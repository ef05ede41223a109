"""The model graph: nodes, tensors (shape and dtype of every value), constants, fusion groups.

A ``Graph`` is what ``from_onnx`` returns: every shape is concrete (or, for the ``dim_param``s
named in ``symbolic``, an expression over their shape variables), constants are folded, dead
nodes removed. ``fuse.partition(graph)`` groups its nodes; ``compile`` turns groups into tasks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from metasched.model.ops import OPS, OpContext, constant_tensor
from metasched.model.symbolic import Dim, SymbolicShapeError, is_symbolic, prod, shape_text
from metasched.model.te import FuncBuilder, Tensor

__all__ = ["Graph", "Node", "TensorInfo", "lower_nodes"]

#: Constants up to this many elements are inlined as literals instead of becoming parameters.
INLINE_LIMIT = 1


@dataclass(frozen=True)
class TensorInfo:
    shape: tuple[Dim, ...]  # ints, or expressions over the graph's symbolic dimensions
    dtype: str

    @property
    def nbytes(self) -> Dim:
        return prod(self.shape) * np.dtype(self.dtype).itemsize


@dataclass
class Node:
    op_type: str
    name: str
    inputs: list[str]  # "" for an absent optional input
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    source: Any = field(default=None, repr=False)  # the onnx NodeProto, for constant folding

    def __repr__(self) -> str:
        return f"Node({self.op_type} {self.name!r}: {self.inputs} -> {self.outputs})"


@dataclass
class Graph:
    name: str
    inputs: list[str]
    outputs: list[str]
    nodes: list[Node]
    constants: dict[str, np.ndarray]
    infos: dict[str, TensorInfo]
    opset: int
    #: dim_param -> representative size, for the dimensions kept symbolic (see ``from_onnx``)
    symbolic: dict[str, int] = field(default_factory=dict)

    def consumers(self) -> dict[str, list[Node]]:
        users: dict[str, list[Node]] = {}
        for node in self.nodes:
            for name in node.inputs:
                if name:
                    users.setdefault(name, []).append(node)
        return users

    def producers(self) -> dict[str, Node]:
        return {out: node for node in self.nodes for out in node.outputs}

    def summary(self) -> str:
        counts: dict[str, int] = {}
        for node in self.nodes:
            counts[node.op_type] = counts.get(node.op_type, 0) + 1
        ops = ", ".join(f"{k} x{v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1]))
        return f"Graph {self.name!r}: {len(self.nodes)} nodes ({ops}), {len(self.constants)} constants"

    def __repr__(self) -> str:
        return self.summary()


def _computed_once(builder: FuncBuilder, tensor: Any, node: Node, infos: dict[str, TensorInfo]) -> Any:
    """``tensor`` as a stage of its own when ``node`` broadcasts it and it calls costly math.

    Values stay expressions (inlined into their readers) inside a group; broadcast into a
    larger output they are recomputed for every element of it: a squeeze-and-excitation gate
    ``sigmoid(conv(s))`` (1x1x144) times a 60x60x144 activation computed its sigmoid 3600 times
    per channel (0.13 ms against 0.03 ms for the multiplication alone). Computed once into a
    buffer, the broadcast reads it."""
    from metasched.model.te import LazyTensor

    if not isinstance(tensor, LazyTensor) or not node.outputs or node.outputs[0] not in infos:
        return tensor
    size, output = tensor.size, prod(infos[node.outputs[0]].shape)
    if not (isinstance(size, int) and isinstance(output, int) and size < output):
        return tensor
    from tir.ir import Var
    from tir.ir.ops import calls_costly_math

    if not calls_costly_math(tensor.load(tuple(Var(f"i{d}") for d in range(tensor.ndim)))):
        return tensor
    # a name of its own, not the node's: tasks that differ only in node names stay one task
    return builder.materialize("broadcast_operand", tensor)


def lower_nodes(
    builder: FuncBuilder,
    graph_opset: int,
    nodes: list[Node],
    infos: dict[str, TensorInfo],
    constants: dict[str, np.ndarray],
    env: dict[str, Tensor] | None = None,
    param_order: list[str] | None = None,
) -> dict[str, Tensor]:
    """Lower ``nodes`` in order into ``builder``; values not produced inside become builder inputs
    (recorded in ``param_order``), single-element constants become literals."""
    env = {} if env is None else env
    for node in nodes:
        op = OPS[node.op_type]
        values: dict[int, np.ndarray | None] = {}
        tensors: list[Any] = []
        for position, name in enumerate(node.inputs):
            if not name:
                tensors.append(None)
                continue
            if name in constants:
                values[position] = constants[name]
            if position in op.value_inputs:
                tensors.append(None)
                continue
            if name not in env:
                if name in constants and constants[name].size <= INLINE_LIMIT:
                    env[name] = constant_tensor(constants[name])
                else:
                    info = infos[name]
                    env[name] = builder.input(name, info.shape, info.dtype)
                    if param_order is not None:
                        param_order.append(name)
            tensors.append(env[name])
        while tensors and tensors[-1] is None:
            tensors.pop()
        if op.kind == "injective":
            tensors = [_computed_once(builder, tensor, node, infos) for tensor in tensors]
        ctx = OpContext(
            builder,
            node.op_type,
            node.name,
            node.attrs,
            graph_opset,
            values,
            num_outputs=len([o for o in node.outputs if o]),
        )
        try:
            outs = op.lower(ctx, tensors)
        except (TypeError, SymbolicShapeError) as error:
            shapes = [t.shape for t in tensors if t is not None]
            if not any(is_symbolic(s) for s in shapes):
                raise
            # a Python decision on a symbolic extent (PrimExpr has no truth value)
            raise ctx.fail(
                f"cannot take the symbolic input shape(s) {', '.join(shape_text(s) for s in shapes)} "
                f"({error}); bind the symbolic dimension to a size instead"
            ) from None
        for name, tensor in zip(node.outputs, outs, strict=False):
            if name:
                env[name] = tensor
    return env
