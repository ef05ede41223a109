"""Fusion: the graph's nodes partitioned into groups, each group one PrimFunc.

Rules, in node order: an injective node (elementwise, broadcast, transpose, slice, ...) joins the
group that produced one of its inputs when that value has no other consumer and is not a model
output -- so ``Conv + bias + BN + Relu + residual Add`` is one group, its epilogue one block
after the convolution; complex nodes (convolutions, matmuls, pooling, reductions, softmax,
normalization) start a group; opaque nodes (Concat, Split) are a group of their own; view nodes
(Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout) run no kernel at all: their output
is the input's memory under another shape.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from metasched.model.graph import Graph, Node, lower_nodes
from metasched.model.ops import OPS, OpError
from metasched.model.te import FuncBuilder
from tir.ir import PrimFunc
from tir.transform.split_prepack import LAYOUT_FREE_ATTR

__all__ = ["Group", "lower_group", "partition"]


@dataclass
class Group:
    name: str
    kind: str  # "kernel" or "view"
    nodes: list[Node]
    outputs: list[str]
    closed: bool = False  # opaque groups take no consumers
    has_complex: bool = False
    inputs: list[str] = field(default_factory=list)
    func: PrimFunc | None = None

    @property
    def op_types(self) -> list[str]:
        return [n.op_type for n in self.nodes]


def partition(graph: Graph) -> list[Group]:
    """The fusion groups in an order that runs them (each after the groups it reads)."""
    users = graph.consumers()
    owner: dict[str, Group] = {}
    groups: list[Group] = []
    last_index: dict[int, int] = {}
    for index, node in enumerate(graph.nodes):
        kind = OPS[node.op_type].kind
        target: Group | None = None
        if kind == "injective":
            for name in node.inputs:
                group = owner.get(name)
                if (
                    group is not None
                    and group.kind == "kernel"
                    and not group.closed
                    and group.outputs == [name]
                    and len(users.get(name, [])) == 1
                    and name not in graph.outputs
                ):
                    target = group
                    break
        outputs = [o for o in node.outputs if o]
        if target is None:
            target = Group(
                "",
                "view" if kind == "view" else "kernel",
                [],
                outputs,
                closed=kind in ("opaque", "view"),
                has_complex=kind == "complex",
            )
            groups.append(target)
        target.nodes.append(node)
        target.outputs = outputs
        for name in outputs:
            owner[name] = target
        last_index[id(target)] = index
    groups.sort(key=lambda g: last_index[id(g)])
    for k, group in enumerate(groups):
        ops = "_".join(dict.fromkeys(t.lower() for t in group.op_types))
        group.name = f"g{k}_{ops}"[:48]
    return groups


def lower_group(graph: Graph, group: Group) -> PrimFunc:
    """The group's PrimFunc: parameters are the values it reads (first use first), then its outputs."""
    builder = FuncBuilder(group.name)
    order: list[str] = []
    try:
        env = lower_nodes(builder, graph.opset, group.nodes, graph.infos, graph.constants, param_order=order)
        func = builder.build([env[o] for o in group.outputs], [f"out{k}" for k in range(len(group.outputs))])
    except TypeError as error:
        if not graph.symbolic:
            raise
        # an operator that decided something about a symbolic extent in Python
        ops = ", ".join(f"{n.op_type} {n.name!r}" for n in group.nodes)
        raise OpError(
            f"{ops}: cannot be lowered with the symbolic dimension(s) {sorted(graph.symbolic)} ({error}); "
            "bind them to sizes with input_shapes instead"
        ) from None
    constant = [i for i, name in enumerate(order) if name in graph.constants]
    if constant:
        # The weights: a schedule may pack them into another layout once, when the model is
        # compiled, instead of on every call (tir.transform.split_prepack).
        func = func.replace(attrs={**func.attrs, LAYOUT_FREE_ATTR: constant})
    group.inputs = order
    group.func = func
    return func
