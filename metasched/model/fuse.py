"""Fusion: the graph's nodes partitioned into groups, each group one PrimFunc.

Rules, in node order: an injective node (elementwise, broadcast, transpose, slice, ...) joins the
group that produced one of its inputs when that value has no other consumer and is not a model
output -- so ``Conv + bias + BN + Relu + residual Add`` is one group, its epilogue one block
after the convolution; complex nodes (convolutions, matmuls, pooling, reductions, softmax,
normalization) start a group; opaque nodes (Concat, Split) are a group of their own; view nodes
(Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout) run no kernel at all: their output
is the input's memory under another shape. Then a group of injective nodes that holds every
consumer of a kernel group's one output absorbs that group (SiLU, GELU: an activation reading
the convolution's output twice is its epilogue). A Softmax over the last axis of a matmul's
result joins the matmul's group like an injective node (``_softmax_of_scores``). Last,
Concats whose inputs can be written in place, into slices of the output, run no kernel
(``_assemble_concats``: the groups are ``"assembled"``, the values' places are
``Group.slice_of``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

from metasched.model.graph import Graph, Node, TensorInfo, lower_nodes
from metasched.model.ops import OPS, OpError
from metasched.model.te import FuncBuilder
from tir.ir import PrimFunc
from tir.transform.split_prepack import LAYOUT_FREE_ATTR

__all__ = ["Group", "lower_group", "partition"]


@dataclass
class Group:
    name: str
    kind: str  # "kernel", "view" or "assembled" (a Concat its producers write in place)
    nodes: list[Node]
    outputs: list[str]
    closed: bool = False  # opaque groups take no consumers
    has_complex: bool = False
    inputs: list[str] = field(default_factory=list)
    func: PrimFunc | None = None
    #: (Concat output, axis, start): the group's one output lives in that slice of the Concat's
    slice_of: tuple[str, int, int] | None = None

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
        if kind == "injective" or _softmax_of_scores(graph, node, owner):
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
    _assemble_concats(graph, groups, owner, users)
    for k, group in enumerate(groups):
        ops = "_".join(dict.fromkeys(t.lower() for t in group.op_types))
        group.name = f"g{k}_{ops}"[:48]
    return groups


#: The complex nodes a last-axis Softmax joins (attention's scores).
SCORES = ("MatMul", "Gemm")


def _softmax_of_scores(graph: Graph, node: Node, owner: dict[str, Group]) -> bool:
    """Whether ``node`` is a Softmax over the last axis of a value a matmul's group produces:
    it then joins that group (when the value has no other consumer) as an injective node would,
    so that the scores (Whisper's 4 x 750 x 750 per layer) are normalized per row tile while the
    tile is in cache instead of written out whole and read back (the tiling's ``+rows``
    sketches)."""
    if node.op_type != "Softmax" or not node.inputs:
        return False
    info = graph.infos.get(node.inputs[0])
    group = owner.get(node.inputs[0])
    if info is None or group is None or not any(n.op_type in SCORES for n in group.nodes):
        return False
    rank = len(info.shape)
    axis = int(node.attrs.get("axis", -1 if graph.opset >= 13 else 1))
    return rank >= 2 and axis % rank == rank - 1


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


def _assemble_concats(graph: Graph, groups: list[Group], owner: dict[str, Group], users: dict[str, list[Node]]) -> None:
    """Concats that copy nothing: their inputs are written in place, into slices of the output.

    A Concat as a kernel reads every input back and writes it again: SqueezeNet's fire modules
    and Inception's branches spend a tenth of the model there, and DenseNet, whose every layer
    concatenates all the features before it, copies quadratically. Two cases, the latest Concat
    first so that outer Concats place their inputs before inner ones look:
    - every input is the one output of a group whose values are placed nowhere yet: each is
      placed in its slice of the output (``Group.slice_of``); its writer, and its other readers,
      address it through the output's strides (``compile`` gives the kernels those strides);
    - every input is already placed, in one value, side by side along the Concat's axis in the
      Concat's order (DenseNet: the features of a block, placed by the block's last Concat):
      the Concat's output is that stretch of the value, placed there itself.
    Either way the group is ``"assembled"`` and runs no kernel. Only for constant shapes (a
    symbolic extent would make the strides symbolic), and never for a value a view reads (a
    reshape of a strided value is not a view) or that the caller gives or gets."""
    if graph.symbolic:
        return
    for group in reversed(groups):
        if group.kind != "kernel" or len(group.nodes) != 1 or group.nodes[0].op_type != "Concat":
            continue
        node = group.nodes[0]
        output = graph.infos[node.outputs[0]]
        if not _plain_shape(output.shape):
            continue
        axis = int(node.attrs.get("axis", 0)) % len(output.shape)
        producers = [owner.get(name) for name in node.inputs]
        if all(
            _placeable(graph, name, producer, output, users)
            for name, producer in zip(node.inputs, producers, strict=True)
        ) and len(set(node.inputs)) == len(node.inputs):
            start = 0
            for name, producer in zip(node.inputs, producers, strict=True):
                assert producer is not None
                producer.slice_of = (node.outputs[0], axis, start)
                start += int(cast(int, graph.infos[name].shape[axis]))  # not graph.symbolic: static extents
            group.kind = "assembled"
            continue
        places = [producer.slice_of if producer is not None else None for producer in producers]
        if (
            group.slice_of is None
            and places[0] is not None
            and node.outputs[0] not in graph.outputs
            and not _read_by_a_view(node.outputs[0], users)
        ):
            parent, _, first = places[0]
            expected = first
            for name, place in zip(node.inputs, places, strict=True):
                if place != (parent, axis, expected):
                    break
                expected += int(cast(int, graph.infos[name].shape[axis]))  # as above
            else:
                group.slice_of = (parent, axis, first)
                group.kind = "assembled"


def _plain_shape(shape: tuple[object, ...]) -> bool:
    return all(isinstance(extent, int) and extent > 0 for extent in shape)


def _read_by_a_view(name: str, users: dict[str, list[Node]]) -> bool:
    """Whether a view node reads ``name`` (a reshape of a strided value is no view)."""
    return any(OPS[user.op_type].kind == "view" for user in users.get(name, []))


def _placeable(
    graph: Graph, name: str, producer: Group | None, whole: TensorInfo, users: dict[str, list[Node]]
) -> bool:
    """Whether the value ``name`` can live in a slice of a Concat's output ``whole``."""
    info = graph.infos.get(name)
    return (
        bool(name)
        and info is not None
        and producer is not None
        and producer.kind in ("kernel", "assembled")
        and producer.outputs == [name]
        and producer.slice_of is None
        and name not in graph.outputs
        and name not in graph.inputs
        and name not in graph.constants
        and info.dtype == whole.dtype
        and len(info.shape) == len(whole.shape)
        and _plain_shape(info.shape)
        and not _read_by_a_view(name, users)
    )


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
