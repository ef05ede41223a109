"""Fusion: the graph's nodes partitioned into groups, each group one PrimFunc.

Rules, in node order: an injective node (elementwise, broadcast, transpose, slice, ...) joins the
group that produced one of its inputs when that value has no other consumer and is not a model
output -- so ``Conv + bias + BN + Relu + residual Add`` is one group, its epilogue one block
after the convolution; complex nodes (convolutions, matmuls, pooling, reductions, softmax,
normalization) start a group; opaque nodes (Concat, Split) are a group of their own; view nodes
(Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout) run no kernel at all: their output
is the input's memory under another shape. Then a group of injective nodes that holds every
consumer of a kernel group's one output absorbs that group (SiLU, GELU: an activation reading
the convolution's output twice is its epilogue).
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
    groups = _merge_diamonds(graph, groups, owner, users, last_index)
    groups.sort(key=lambda g: last_index[id(g)])
    for k, group in enumerate(groups):
        ops = "_".join(dict.fromkeys(t.lower() for t in group.op_types))
        group.name = f"g{k}_{ops}"[:48]
    return groups


def _merge_diamonds(
    graph: Graph,
    groups: list[Group],
    owner: dict[str, Group],
    users: dict[str, list[Node]],
    last_index: dict[int, int],
) -> list[Group]:
    """Groups of injective nodes that read every use of a kernel group's one output join it.

    An activation that reads its input twice -- SiLU ``x * sigmoid(x)``, GELU ``x * (1 +
    erf(x / sqrt 2)) / 2``, HardSwish written out -- gives that value two consumers, so the node
    order rule above leaves the activation a kernel of its own that reads the convolution's
    output back from memory (EfficientNet's SiLU kernels: a fifth of its time). When one
    injective group holds all the consumers, the value never needs to exist outside a merged
    group: the activation is the convolution's epilogue."""
    position = {id(node): index for index, node in enumerate(graph.nodes)}
    merged_away: set[int] = set()
    for group in groups:
        if group.kind != "kernel" or group.closed or group.has_complex or id(group) in merged_away:
            continue
        members = {id(node) for node in group.nodes}
        produced = {name for node in group.nodes for name in node.outputs}
        for name in dict.fromkeys(name for node in group.nodes for name in node.inputs if name):
            producer = owner.get(name)
            if (
                name in produced
                or producer is None
                or producer is group
                or id(producer) in merged_away
                or producer.kind != "kernel"
                or producer.closed
                or producer.outputs != [name]
                or name in graph.outputs
                or len(users.get(name, [])) < 2
                or not all(id(user) in members for user in users[name])
            ):
                continue
            # The producer's nodes move into this group (node order keeps them topological).
            group.nodes = sorted([*producer.nodes, *group.nodes], key=lambda node: position[id(node)])
            group.has_complex = producer.has_complex
            for node in producer.nodes:
                for out in node.outputs:
                    if out:
                        owner[out] = group
            last_index[id(group)] = max(last_index[id(group)], last_index[id(producer)])
            merged_away.add(id(producer))
            break  # one producer per group: a second complex node would not fit in one kernel
    return [group for group in groups if id(group) not in merged_away]


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
