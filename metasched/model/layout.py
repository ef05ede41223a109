"""Channels-last layout for CPU targets: 1-D and 2-D convolutions and pooling run NWC / NHWC.

ONNX images are NCHW (and audio NCW). A convolution tiled for a CPU vectorizes its innermost
output axis; in NCHW that is the image width (7 or 14 in a ResNet's last stages: no vector
fits), in NHWC it is the output channels (64 to 2048: always whole vectors), and the weights'
output channels are contiguous too. A 1-D convolution is the same story told louder: in NCW its
innermost axis is an audio frame count such as 1599 (3 * 13 * 41: no vector divides it), read
with the convolution's stride (2 or 5 in a wav2vec2 feature extractor), where NWC reads 512
contiguous channels. So ``channels_last(graph)`` rewrites every 1-D and 2-D ``Conv`` to
channels-last (its weights transposed once, here, at compile time), carries the channels-last
values through the operators that do not care about the layout (pooling, InstanceNormalization,
elementwise and broadcast operators, channel Concat and Split, a Slice of constant axes,
reductions over constant axes, Identity, a Reshape to the same shape, ShuffleNet's channel
shuffle) and transposes back to NCHW only where something needs NCHW: an
operator outside that set (a Flatten, a Reshape, a Softmax), or a graph output.

    NCHW:  x -> Conv -> Relu -> MaxPool -> Conv -> Add(., skip) -> Flatten
    NHWC:  x -> T -> Conv' -> Relu -> MaxPool' -> Conv' -> Add(., skip') -> T^-1 -> Flatten

``T`` is a Transpose node (perm 0,2,3,1; 0,2,1 for NCW), fused like any injective operator;
primed operators carry the attribute ``LAYOUT_ATTR = "NHWC"`` their lowerings read (for any
number of spatial axes: "channels last"). Values keep their names where they are materialized
channels-first; a channels-last twin is named ``<value>.nhwc`` (``<value>.nwc`` for 1-D).

Transposes the model makes itself meet the twins instead of the values: a speech encoder's
``Conv1d -> Gelu -> Transpose(0, 2, 1)`` (NCW -> NWC, to feed the transformer) loses its
Transpose: the readers read the twin, which is that (and what they add to it fuses into the
convolution's epilogue); a Transpose of a twin by another permutation reads the twin with the
composed permutation; and a ``Transpose(0, 2, 1)`` into a convolution (a positional
convolution over a transformer's (N, T, C) activations) is not run either: the convolution
reads its input, already channels-last.

A 3x3 convolution with stride 1, padding 1, one group and an even output size becomes a
``WinogradConv`` node instead (Winograd F(2x2, 3x3), ``metasched.model.ops.conv``): its weights
are transformed here, once (``<weight>.winograd``, (4, 4, C, M)), and it computes the same
with 2.25 times fewer multiplications in its matrix products. Measured on a Zen 1 at 2 threads
(ResNet-50's 28x28 128 -> 128 layer, each stage tuned): 2.35 ms against onnxruntime's direct
3.08 ms and our tuned direct 3.38 ms; its result differs from the direct sum by rounding only
(about 5e-7 relative).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from metasched.model.graph import Graph, Node, TensorInfo
from metasched.model.ops import OPS
from metasched.model.ops.conv import LAYOUT_ATTR
from tir.target import Target

__all__ = ["TO_FIRST", "TO_LAST", "channels_last", "to_first_perm", "to_last_perm"]

TO_LAST = [0, 2, 3, 1]  # NCHW -> NHWC
TO_FIRST = [0, 3, 1, 2]  # NHWC -> NCHW

#: Ranks the pass moves: (N, C, W) and (N, C, H, W) -- 1-D and 2-D convolutions.
_RANKS = (3, 4)
#: Operators whose lowering reads ``LAYOUT_ATTR`` (the channel axis moves).
_LAYOUT_AWARE = {"Conv", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "InstanceNormalization"}
#: Elementwise and broadcasting operators: the same in any layout once every operand is permuted.
_ELEMENTWISE_EXTRA = {
    "Add", "Sub", "Mul", "Div", "Pow", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual",
    "And", "Or", "Xor", "PRelu", "Sum", "Max", "Min", "Mean", "Where", "Clip", "Cast", "Not", "IsNaN",
    "Identity", "Dropout",
}  # fmt: skip
#: Reductions over constant axes: channels-last with the axes permuted (a squeeze-and-excitation
#: block's ReduceMean over H and W read the NCHW value through a transpose of its own).
_REDUCTIONS = {
    "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare", "ReduceL1", "ReduceL2",
    "ReduceLogSum", "ReduceLogSumExp",
}  # fmt: skip


def to_last_perm(rank: int) -> list[int]:
    """The Transpose permutation channels-first -> channels-last: (0, 2, ..., rank - 1, 1)."""
    return [0, *range(2, rank), 1]


def to_first_perm(rank: int) -> list[int]:
    """The inverse of ``to_last_perm``: (0, rank - 1, 1, ..., rank - 2)."""
    return [0, rank - 1, *range(1, rank - 1)]


def _suffix(rank: int) -> str:
    return ".nwc" if rank == 3 else ".nhwc"


def _elementwise() -> set[str]:
    from metasched.model.ops.elementwise import UNARY

    return set(UNARY) | _ELEMENTWISE_EXTRA


def _permute(shape: tuple, perm: list[int]) -> tuple:  # type: ignore[type-arg]
    return tuple(shape[p] for p in perm)


class _Rewriter:
    def __init__(self, graph: Graph, winograd: bool = False) -> None:
        self.graph = graph
        self.use_winograd = winograd
        self.nodes: list[Node] = []
        self.infos = dict(graph.infos)
        self.constants = dict(graph.constants)
        self.twin: dict[str, str] = {}  # channels-first value -> its channels-last twin
        self.materialized: set[str] = set(graph.inputs) | set(graph.constants)
        self.elementwise = _elementwise()
        self.users = graph.consumers()
        self.alias: dict[str, str] = {}  # a Transpose's output -> the twin it equals
        self.skipped: set[int] = set()  # ids of nodes a rewrite already stands for

    # ------------------------------------------------------------ values

    def rank(self, name: str) -> int | None:
        info = self.infos.get(name)
        return None if info is None else len(info.shape)

    def movable(self, name: str) -> bool:
        """Whether ``name`` is a value of a rank the pass moves (N, C, spatial...)."""
        return self.rank(name) in _RANKS

    def new_twin(self, name: str) -> str:
        """Name (and describe) the channels-last twin of the channels-first value ``name``."""
        info = self.infos[name]
        rank = len(info.shape)
        twin = f"{name}{_suffix(rank)}"
        self.infos[twin] = TensorInfo(_permute(info.shape, to_last_perm(rank)), info.dtype)
        self.twin[name] = twin
        return twin

    def to_last(self, name: str) -> str:
        """The channels-last twin of ``name``, transposing the channels-first value when there is none."""
        if name not in self.twin:
            shape = self.infos[name].shape
            twin = self.new_twin(name)
            # one channel (a waveform, a grey image): the same bytes, a view
            if shape[1] == 1 and all(isinstance(d, int) for d in shape):
                target = self.int64_constant(f"{twin}.shape", self.infos[twin].shape)
                self.nodes.append(Node("Reshape", f"{name}.to_last", [name, target], [twin]))
            else:
                perm = to_last_perm(len(shape))
                self.nodes.append(Node("Transpose", f"{name}.to_last", [name], [twin], {"perm": perm}))
        return self.twin[name]

    def to_first(self, name: str) -> None:
        """Make the channels-first ``name`` exist (a transpose of its twin) before a node that reads it."""
        if name in self.materialized or name not in self.twin:
            return
        perm = to_first_perm(len(self.infos[name].shape))
        self.nodes.append(Node("Transpose", f"{name}.to_first", [self.twin[name]], [name], {"perm": perm}))
        self.materialized.add(name)

    def int64_constant(self, name: str, values: object) -> str:
        """A new 1-D int64 constant ``name`` (a Reshape's shape, a Slice's or reduction's axes)."""
        self.constants[name] = np.array(values, np.int64).reshape(-1)
        self.infos[name] = TensorInfo(self.constants[name].shape, "int64")
        return name

    def last_constant(self, name: str, rank: int) -> str:
        """A constant operand of a broadcast, permuted like the rank-``rank`` values it meets."""
        value = self.constants[name]
        if value.size == 1:  # a scalar broadcasts the same way in any layout
            return name
        twin = f"{name}{_suffix(rank)}"
        if twin not in self.constants:
            full = value.reshape((1,) * (rank - value.ndim) + value.shape)
            self.constants[twin] = np.ascontiguousarray(full.transpose(to_last_perm(rank)))
            self.infos[twin] = TensorInfo(self.constants[twin].shape, str(value.dtype))
        return twin

    # ------------------------------------------------------------ nodes

    def live(self, name: str) -> bool:
        """Whether a node's output is read by a node or is a graph output (Dropout's mask is
        neither in an inference graph: it must not keep the data channels-first)."""
        return bool(name) and (bool(self.users.get(name)) or name in self.graph.outputs)

    def convertible(self, node: Node) -> bool:
        if node.op_type in _REDUCTIONS:
            return self.reduce_axes(node) is not None
        outputs = [o for o in node.outputs if self.live(o)]
        if not outputs or not all(self.movable(o) for o in outputs):
            return False
        rank = self.rank(outputs[0])
        data = [n for n in node.inputs if n and n not in self.constants]
        if node.op_type == "Conv":
            # constant weights: transposed here once; the stem convolution takes the image
            # through one transpose (cheap: 3 channels), every later one finds a twin
            return (
                len(node.inputs) > 1
                and node.inputs[1] in self.constants
                and self.rank(node.inputs[0]) == rank
                and self.constants[node.inputs[1]].ndim == rank
            )
        if not data or not any(n in self.twin for n in data):
            return False  # nothing channels-last to carry
        if node.op_type == "InstanceNormalization":
            # scale and bias are per channel, (C,): the same in either layout
            return len(outputs) == 1 and data[0] == node.inputs[0] and data[0] in self.twin
        if node.op_type in _LAYOUT_AWARE:
            return len(outputs) == 1
        if node.op_type == "Concat":
            axis = int(node.attrs.get("axis", 0))
            return axis % rank == 1 and all(n in self.twin and self.rank(n) == rank for n in data)  # type: ignore[operator]
        if node.op_type == "Slice":
            return self.slice_axes(node) is not None
        if node.op_type == "Split":
            axis = int(node.attrs.get("axis", 0))
            sizes = node.inputs[1] if len(node.inputs) > 1 else ""
            every_output = len(outputs) == len(node.outputs)  # a dropped output would change an even split
            fits = axis % rank == 1 and data[0] in self.twin and (not sizes or sizes in self.constants)  # type: ignore[operator]
            return every_output and fits
        if node.op_type == "Reshape":
            # a Reshape to the shape it has (the dynamo exporter writes some): an Identity
            source = self.infos.get(node.inputs[0])
            shape = self.infos[outputs[0]].shape
            fixed = source is not None and all(isinstance(d, int) for d in (*source.shape, *shape))
            return fixed and tuple(source.shape) == tuple(shape)  # type: ignore[union-attr]
        if node.op_type in self.elementwise:
            if OPS[node.op_type].value_inputs:
                return False
            constants_fit = all(self.constants[n].ndim <= rank for n in node.inputs if n in self.constants)  # type: ignore[operator]
            return constants_fit and all(self.rank(n) == rank for n in data)
        return False

    def slice_axes(self, node: Node) -> list[int] | None:
        """A Slice's axes (normalized), when its starts, ends, axes and steps are constants."""
        if self.graph.opset < 10 or node.inputs[0] not in self.twin or len(node.inputs) < 3:
            return None
        if not all(name in self.constants for name in node.inputs[1:] if name):
            return None
        rank = len(self.infos[node.inputs[0]].shape)
        count = self.constants[node.inputs[1]].size
        if len(node.inputs) > 3 and node.inputs[3]:
            axes = [int(a) for a in self.constants[node.inputs[3]].reshape(-1)]
        else:
            axes = list(range(count))
        if any(not -rank <= a < rank for a in axes):
            return None
        return [a % rank for a in axes]

    def reduce_axes(self, node: Node) -> tuple[list[int], bool] | None:
        """A reduction's axes (normalized, channels-first) and keepdims, when it can read the
        twin of its input: constant axes, and without keepdims every spatial axis reduced (the
        kept axes then come out in the same order in either layout)."""
        source = node.inputs[0]
        rank = self.rank(source)
        if source not in self.twin or rank not in _RANKS or len(node.outputs) != 1:
            return None
        if "axes" in node.attrs:
            axes = [int(a) for a in node.attrs["axes"]]
        elif len(node.inputs) > 1 and node.inputs[1]:
            if node.inputs[1] not in self.constants:
                return None
            axes = [int(a) for a in self.constants[node.inputs[1]].reshape(-1)]
        else:
            axes = []
        if not axes or any(not -rank <= a < rank for a in axes):  # type: ignore[operator]
            return None  # every axis, or none (noop_with_empty_axes): left as it is
        normalized = sorted({a % rank for a in axes})  # type: ignore[operator]
        keepdims = bool(node.attrs.get("keepdims", 1))
        if not keepdims and not set(range(2, rank)) <= set(normalized):  # type: ignore[arg-type]
            return None
        return normalized, keepdims

    def convert_reduction(self, node: Node) -> None:
        found = self.reduce_axes(node)
        assert found is not None
        axes, keepdims = found
        rank = self.rank(node.inputs[0])
        assert rank is not None
        moved = sorted(to_last_perm(rank).index(a) for a in axes)
        attrs = dict(node.attrs)
        inputs = [self.twin[node.inputs[0]], *node.inputs[1:]]
        if "axes" in attrs:
            attrs["axes"] = moved
        else:
            inputs[1] = self.int64_constant(f"{node.name}.axes{_suffix(rank)}", moved)
        (output,) = node.outputs
        if keepdims:
            output = self.new_twin(output)
        else:
            self.materialized.add(output)  # (N, C) or (C,): the same values in either layout
        self.nodes.append(replace(node, inputs=inputs, outputs=[output], attrs=attrs))

    def channel_shuffle(self, node: Node) -> bool:
        """Rewrite a channel shuffle on a twin; False to leave ``node`` as it is.

        ShuffleNet shuffles channels as ``Reshape (N, C, H, W) -> (N, g, C/g, H, W)``,
        ``Transpose (0, 2, 1, 3, 4)``, ``Reshape -> (N, C, H, W)``: not layout-agnostic
        operators, so every shuffle cost a transpose to NCHW and one back (ShuffleNet v2: 24 of
        them). On the twin the same permutation of the channels is ``Reshape (N, H, W, g, C/g)``,
        ``Transpose (0, 1, 2, 4, 3)``, ``Reshape (N, H, W, C)``: the last one's output is the
        twin of the shuffled value."""
        source, (shaped,) = node.inputs[0], node.outputs
        if source not in self.twin or self.rank(source) != 4 or len(node.inputs) < 2:
            return False
        shape = self.infos[source].shape
        target = self.infos.get(shaped)
        if target is None or not all(isinstance(d, int) for d in (*shape, *target.shape)):
            return False
        n, c, h, w = shape
        if len(target.shape) != 5 or target.shape[0] != n or tuple(target.shape[3:]) != (h, w):
            return False
        groups, per_group = target.shape[1], target.shape[2]
        transposes = self.users.get(shaped, [])
        if len(transposes) != 1 or transposes[0].op_type != "Transpose" or shaped in self.graph.outputs:
            return False
        transpose = transposes[0]
        if [int(p) for p in transpose.attrs.get("perm", [])] != [0, 2, 1, 3, 4]:
            return False
        backs = self.users.get(transpose.outputs[0], [])
        if len(backs) != 1 or backs[0].op_type != "Reshape" or transpose.outputs[0] in self.graph.outputs:
            return False
        back = backs[0]
        result = self.infos.get(back.outputs[0])
        if result is None or tuple(result.shape) != tuple(shape):
            return False
        twin = self.twin[source]
        split_shape = (n, h, w, groups, per_group)
        swapped_shape = (n, h, w, per_group, groups)
        names = [f"{shaped}.nhwc", f"{transpose.outputs[0]}.nhwc"]
        self.infos[names[0]] = TensorInfo(split_shape, self.infos[source].dtype)
        self.infos[names[1]] = TensorInfo(swapped_shape, self.infos[source].dtype)
        split_to = self.int64_constant(f"{names[0]}.shape", split_shape)
        back_to = self.int64_constant(f"{back.outputs[0]}.nhwc.shape", (n, h, w, c))
        self.nodes.append(Node("Reshape", node.name, [twin, split_to], [names[0]]))
        self.nodes.append(Node("Transpose", transpose.name, [names[0]], [names[1]], {"perm": [0, 1, 2, 4, 3]}))
        last = self.new_twin(back.outputs[0])
        self.nodes.append(Node("Reshape", back.name, [names[1], back_to], [last]))
        self.skipped.update((id(transpose), id(back)))
        return True

    def fits_winograd(self, node: Node) -> bool:
        """Whether a channels-last Conv runs as Winograd F(2x2, 3x3) (``WinogradConv``): 3x3,
        stride 1, no dilation, one group, padding 1 on every side, float32 constant weights,
        an even output height and width (whole 2x2 tiles)."""
        weight = self.constants.get(node.inputs[1])
        info = self.infos.get(node.inputs[0])
        if weight is None or info is None or weight.dtype != np.float32 or weight.shape[2:] != (3, 3):
            return False
        attrs = node.attrs
        if list(attrs.get("kernel_shape", [3, 3])) != [3, 3] or int(attrs.get("group", 1)) != 1:
            return False
        if list(attrs.get("strides", [1, 1])) != [1, 1] or list(attrs.get("dilations", [1, 1])) != [1, 1]:
            return False
        if attrs.get("auto_pad", "NOTSET") != "NOTSET" or list(attrs.get("pads", [0] * 4)) != [1, 1, 1, 1]:
            return False
        height, width = info.shape[2], info.shape[3]
        return isinstance(height, int) and isinstance(width, int) and height % 2 == 0 and width % 2 == 0

    def convert_winograd(self, node: Node) -> None:
        weight = node.inputs[1]
        transformed = f"{weight}.winograd"
        if transformed not in self.constants:
            self.constants[transformed] = winograd_weights(self.constants[weight])
            self.infos[transformed] = TensorInfo(self.constants[transformed].shape, "float32")
        for name, value in (("winograd.Bt", WINOGRAD_BT), ("winograd.At", WINOGRAD_AT)):
            if name not in self.constants:
                self.constants[name] = value
                self.infos[name] = TensorInfo(value.shape, "float32")
        inputs = [self.to_last(node.inputs[0]), transformed, "winograd.Bt", "winograd.At", *node.inputs[2:3]]
        self.nodes.append(Node("WinogradConv", node.name, inputs, [self.new_twin(node.outputs[0])], {}))

    def last_weight(self, weight: str) -> str:
        """Conv weights (M, C / group, k...) transposed once to (k..., C / group, M): the
        output channels contiguous."""
        w = self.constants[weight]
        twin = f"{weight}{_suffix(w.ndim)}"
        if twin not in self.constants:
            self.constants[twin] = np.ascontiguousarray(w.transpose(*range(2, w.ndim), 1, 0))
            self.infos[twin] = TensorInfo(self.constants[twin].shape, str(w.dtype))
        return twin

    def convert(self, node: Node) -> None:
        if node.op_type in _REDUCTIONS:
            self.convert_reduction(node)
            return
        attrs = dict(node.attrs)
        inputs = list(node.inputs)
        rank = self.rank(next(o for o in node.outputs if self.live(o)))
        assert rank is not None
        if node.op_type == "Conv" and self.use_winograd and self.fits_winograd(node):
            self.convert_winograd(node)
            return
        if node.op_type == "Reshape":
            self.nodes.append(Node("Identity", node.name, [self.twin[inputs[0]]], [self.new_twin(node.outputs[0])]))
            return
        if node.op_type == "Conv":
            inputs[0] = self.to_last(inputs[0])
            if "kernel_shape" not in attrs:
                attrs["kernel_shape"] = list(self.constants[inputs[1]].shape[2:])
            inputs[1] = self.last_weight(inputs[1])
        elif node.op_type == "InstanceNormalization":
            inputs[0] = self.to_last(inputs[0])
        elif node.op_type == "Split":
            inputs[0] = self.twin[inputs[0]]  # the split sizes (input 1) stay as they are
            attrs["axis"] = rank - 1
        elif node.op_type == "Slice":
            axes = self.slice_axes(node)
            assert axes is not None
            moved = [to_last_perm(rank).index(a) for a in axes]
            name = self.int64_constant(f"{node.name}.axes{_suffix(rank)}", moved)
            inputs[0] = self.twin[inputs[0]]
            while len(inputs) < 4:
                inputs.append("")
            inputs[3] = name
        else:
            for k, name in enumerate(inputs):
                if not name:
                    continue
                if name in self.constants:
                    inputs[k] = self.last_constant(name, rank)
                else:
                    inputs[k] = self.to_last(name)
            if node.op_type == "Concat":
                attrs["axis"] = rank - 1
        if node.op_type in _LAYOUT_AWARE:
            attrs[LAYOUT_ATTR] = "NHWC"
        outputs = []
        for name in node.outputs:
            if not self.live(name):
                outputs.append("")  # an optional output nothing reads (Dropout's mask): not made
                continue
            outputs.append(self.new_twin(name))
        self.nodes.append(replace(node, inputs=inputs, outputs=outputs, attrs=attrs))

    def transpose(self, node: Node) -> bool:
        """Rewrite a Transpose of the model's own that meets a twin; False to leave it as is.

        A Transpose of a value that has a twin reads the twin instead, with the composed
        permutation; with none at all for ``to_last_perm`` (the NCW -> NWC transpose a speech
        encoder feeds its transformer with), the Transpose's readers read the twin. A ``to_first_perm`` Transpose
        into a convolution is not run: its input is the convolution input's twin."""
        source, target = node.inputs[0], node.outputs[0]
        rank = self.rank(source)
        perm = [int(p) for p in node.attrs.get("perm", [])]
        if rank is None or sorted(perm) != list(range(rank)):
            return False
        if source in self.twin:
            # output = first(twin).transpose(perm) = twin.transpose(to_first[perm])
            composed = [to_first_perm(rank)[p] for p in perm]
            if composed == list(range(rank)):
                # no node at all: the readers read the twin (an epilogue still fuses into
                # its producer); a graph output gets an Identity at the end
                self.alias[target] = self.twin[source]
                return True
            if source in self.materialized:
                return False
            else:
                self.nodes.append(replace(node, inputs=[self.twin[source]], attrs={**node.attrs, "perm": composed}))
            self.materialized.add(target)
            return True
        if rank in _RANKS and perm == to_first_perm(rank) and target not in self.graph.outputs:
            into_conv = any(
                user.op_type == "Conv" and user.inputs[0] == target and self.convertible(user)
                for user in self.users.get(target, [])
            )
            if into_conv:
                self.twin[target] = source  # made channels-first only if someone asks (to_first)
                return True
        return False

    def run(self) -> Graph:
        for node in self.graph.nodes:
            if id(node) in self.skipped:
                continue
            if any(name in self.alias for name in node.inputs):
                node = replace(node, inputs=[self.alias.get(name, name) for name in node.inputs])
            if node.op_type == "Reshape" and self.channel_shuffle(node):
                continue
            if node.op_type == "Transpose" and self.transpose(node):
                continue
            if self.convertible(node):
                self.convert(node)
                continue
            for name in node.inputs:
                if name:
                    self.to_first(name)
            self.nodes.append(node)
            self.materialized.update(o for o in node.outputs if o)
        for name in self.graph.outputs:
            if name in self.alias:
                self.nodes.append(Node("Identity", f"{name}.alias", [self.alias[name]], [name]))
            self.to_first(name)
        used = {n for node in self.nodes for n in node.inputs}
        constants = {k: v for k, v in self.constants.items() if k in used or k in self.graph.outputs}
        infos = {k: v for k, v in self.infos.items() if k not in self.constants or k in constants}
        return Graph(
            self.graph.name,
            list(self.graph.inputs),
            list(self.graph.outputs),
            self.nodes,
            constants,
            infos,
            self.graph.opset,
            dict(self.graph.symbolic),
        )


#: Winograd F(2x2, 3x3) (Lavin and Gray, 2016): a 4x4 input tile d gives the 2x2 outputs
#: At (U * (Bt d Bt^T)) At^T, U = G g G^T the 3x3 filter g transformed once at compile time.
WINOGRAD_BT = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]], np.float32)
WINOGRAD_G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float32)
WINOGRAD_AT = np.array([[1, 1, 1, 0], [0, 1, -1, -1]], np.float32)


def winograd_weights(weight: np.ndarray) -> np.ndarray:
    """ONNX 3x3 weights (M, C, 3, 3) transformed for F(2x2, 3x3): U (4, 4, C, M) = G g G^T."""
    g = weight.astype(np.float64)
    G = WINOGRAD_G.astype(np.float64)
    return np.ascontiguousarray(np.einsum("ei,mcij,nj->encm", G, g, G).astype(np.float32))


def channels_last(graph: Graph, winograd: bool = False) -> Graph:
    """``graph`` with its 1-D and 2-D convolutions (and what follows them) channels-last; a new
    Graph, ``graph`` is not changed. A graph without a convolution comes back equal. With
    ``winograd``, the 3x3 convolutions that fit become ``WinogradConv`` (module docstring)."""
    if not any(node.op_type == "Conv" for node in graph.nodes):
        return graph
    return _Rewriter(graph, winograd).run()


def for_target(graph: Graph, target: Target, layout: str = "auto", winograd: bool = False) -> Graph:
    """The graph ``compile`` and ``extract_tasks`` lower for ``target``: ``layout="auto"``
    (channels-last on CPU targets), ``"NHWC"`` or ``"NCHW"`` (the graph as imported);
    ``winograd``: channels-last 3x3 convolutions that fit run as Winograd F(2x2, 3x3)."""
    if layout not in ("auto", "NHWC", "NCHW"):
        raise ValueError(f"layout must be 'auto', 'NHWC' or 'NCHW', got {layout!r}")
    if layout == "NCHW" or (layout == "auto" and not target.is_cpu):
        return graph
    return channels_last(graph, winograd)
