"""ONNX import: load, check every operator is supported, bind dynamic input dimensions,
shape inference, constant folding, BatchNormalization folded into Conv/Gemm, dead-node removal.

    graph = from_onnx("m.onnx", input_shapes={"x": (1, 3, 224, 224)})
    graph = from_onnx("m.onnx", symbolic={"N": 8})   # dim_param "N" stays symbolic

An input dimension is dynamic when the model gives it a name (``dim_param``), writes it as a
negative ``dim_value`` (``-1``: paddle2onnx and others), or gives neither; onnxruntime accepts
any size there. A ``dim_value`` of 0 is a fixed, empty dimension (onnxruntime accepts only 0
there too). A dynamic dimension is bound by ``input_shapes``; a ``dim_param`` named in
``symbolic`` stays a shape variable (``metasched.model.symbolic``): every shape that depends on
it is an expression, the compiled model runs for every size, and its schedules are chosen for
the representative size given (``{"N": 8}``). A dimension without a name gets one in
``input_shapes``: ``input_shapes={"x": ("N", 4)}, symbolic={"N": 8}``. A ``Shape`` or ``Size``
of a tensor with a symbolic dimension cannot be folded and is refused with its name.

Constant folding evaluates every node whose inputs are all constant with numpy
(``metasched.model.fold``; onnx.reference for operators it lacks). A node that cannot be
folded stays in the graph as a kernel; one the library can only fold (``Range``, ``NonZero``,
an operator with no kernel) is an error naming it and the input that is not constant. Every
failure is a ``ModelImportError`` (``UnsupportedOperatorError`` for operators and opsets) with
one line that names the node, input or dimension at fault.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, cast

import numpy as np

from metasched.model.fold import FoldError, evaluate, has_kernel
from metasched.model.graph import Graph, Node, TensorInfo, lower_nodes
from metasched.model.ops import OPS, OpError
from metasched.model.ops.elementwise import np_batch_norm_fold
from metasched.model.qdq import fuse_qdq
from metasched.model.symbolic import Dim, free_vars, is_symbolic, shape_text
from metasched.model.te import FuncBuilder
from tir.ir import Var, as_dtype

__all__ = ["ModelImportError", "UnsupportedOperatorError", "from_onnx"]

MIN_OPSET, MAX_OPSET = 6, 21
#: Folding stops producing constants larger than this (a big broadcast stays a kernel).
FOLD_LIMIT = 1 << 26
#: Operators whose output shape depends on their input values: computed at import or refused.
DATA_DEPENDENT = frozenset({"NonZero", "Unique", "Compress", "NonMaxSuppression", "TopK"})


class ModelImportError(ValueError):
    """The model cannot be imported: a broken file, a missing input binding, a bad shape."""


class UnsupportedOperatorError(ModelImportError):
    """An operator (or an opset) the library does not have. ``op_type`` names the operator,
    None for an opset out of range."""

    def __init__(self, message: str, op_type: str | None = None) -> None:
        super().__init__(message)
        self.op_type = op_type


def from_onnx(
    model: Any,
    input_shapes: Mapping[str, Sequence[int | str | None]] | None = None,
    fold_constants: bool = True,
    symbolic: Mapping[str, int] | None = None,
) -> Graph:
    """The ``Graph`` of an ONNX model (a path, the file's bytes or a ``ModelProto``).

    ``input_shapes`` binds the inputs' dimensions (required for dynamic ones: a ``dim_param``,
    ``-1`` or a dimension without value or name; a fixed one must agree). ``symbolic`` maps
    ``dim_param`` names that stay symbolic to the representative size schedules are chosen for
    (``{"N": 8}``); an ``input_shapes`` entry may leave such a dimension as its name or None,
    or give a dynamic dimension without a name one of these names. ``fold_constants`` False
    keeps the nodes that could be kernels (those the library can only fold are folded anyway).

    Raises ``UnsupportedOperatorError`` naming the operator, node and opset before any other
    work, and ``ModelImportError`` for a broken file, a missing or wrong binding, a
    data-dependent shape or an operator that cannot take a symbolic dimension: one line each."""
    proto = _load(model)
    if not proto.graph.node and not proto.graph.output:
        raise ModelImportError("the model holds no graph (no nodes, no outputs): is it an ONNX model?")
    opset = _opset(proto)
    _check_supported(proto, opset)
    input_shapes = _check_input_shapes(input_shapes)
    initializers = {init.name for init in proto.graph.initializer}
    graph_inputs = [i for i in proto.graph.input if i.name not in initializers]
    unknown = set(input_shapes) - {i.name for i in graph_inputs}
    if unknown:
        raise ModelImportError(
            f"input_shapes names {', '.join(repr(n) for n in sorted(unknown))}, which "
            f"{'is not an input' if len(unknown) == 1 else 'are not inputs'} of the model "
            f"(its inputs: {', '.join(repr(i.name) for i in graph_inputs) or 'none'})"
        )
    shape_vars = _shape_vars(proto, symbolic or {}, input_shapes)
    infos: dict[str, TensorInfo] = {}
    for value in graph_inputs:
        infos[value.name] = _bind_input(value, input_shapes.get(value.name), shape_vars)
    constants = _initializers(proto)
    nodes = []
    for k, n in enumerate(proto.graph.node):
        attrs = {a.name: _attr(a) for a in n.attribute}
        nodes.append(Node(n.op_type, n.name or f"{n.op_type}_{k}", list(n.input), list(n.output), attrs, n))
    _check_shape_inference(proto, infos)
    graph = Graph(
        proto.graph.name or "model",
        [v.name for v in graph_inputs],
        [o.name for o in proto.graph.output],
        nodes,
        constants,
        infos,
        opset,
        {name: int(size) for name, size in (symbolic or {}).items()},
    )
    # Rewrites of the graph as written (before shapes and folding) go here. ``skip_fold(node)``
    # True keeps a node out of folding even when its inputs are all constant (a
    # DequantizeLinear of int8 weights that a quantized kernel reads as they are).
    fuse_qdq(graph)  # DequantizeLinear -> Conv/MatMul/Gemm -> QuantizeLinear -> integer kernels
    skip_fold: Callable[[Node], bool] | None = None
    _propagate(graph, fold_constants, skip_fold)
    if fold_constants:
        _fold_batch_norm(graph)
    _remove_dead(graph)
    return graph


# ---------------------------------------------------------------- loading and checks


def _load(model: Any) -> Any:
    import onnx

    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not os.path.exists(path):
            raise ModelImportError(f"ONNX file {path!r} does not exist")
        if os.path.isdir(path):
            raise ModelImportError(f"{path!r} is a directory, not an ONNX file")
        try:
            return onnx.load(path)
        except Exception as error:  # noqa: BLE001 - protobuf raises DecodeError and friends
            raise ModelImportError(f"cannot read ONNX file {path!r}: {_unreadable(error)}") from None
    if isinstance(model, (bytes, bytearray, memoryview)):
        try:
            return onnx.load_from_string(bytes(model))
        except Exception as error:  # noqa: BLE001
            raise ModelImportError(f"cannot parse the ONNX bytes: {_unreadable(error)}") from None
    raise TypeError(f"from_onnx needs a path, bytes or an onnx.ModelProto, got {type(model).__name__}")


def _unreadable(error: Exception) -> str:
    first = str(error).strip().splitlines()[0] if str(error).strip() else ""
    if type(error).__name__ == "DecodeError":
        return f"it is not an ONNX model, or it is truncated (protobuf: {first})"
    return f"{type(error).__name__}: {first}"


def _opset(proto: Any) -> int:
    for entry in proto.opset_import:
        if entry.domain in ("", "ai.onnx"):
            return int(entry.version)
    return MAX_OPSET


def _check_supported(proto: Any, opset: int) -> None:
    if not MIN_OPSET <= opset <= MAX_OPSET:
        target = MAX_OPSET if opset > MAX_OPSET else 13
        raise UnsupportedOperatorError(
            f"the model uses opset {opset}; supported are {MIN_OPSET} to {MAX_OPSET} (export it for another "
            f"opset, or convert it: onnx.version_converter.convert_version(model, {target}))"
        )
    for k, node in enumerate(proto.graph.node):
        name = node.name or f"#{k}"
        if node.domain not in ("", "ai.onnx"):
            raise UnsupportedOperatorError(
                f"unsupported operator {node.domain}::{node.op_type} (node {name!r}, opset {opset}): "
                "only the default ONNX domain is supported",
                f"{node.domain}::{node.op_type}",
            )
        if node.op_type not in OPS and not has_kernel(node.op_type):
            if node.op_type in DATA_DEPENDENT:
                raise UnsupportedOperatorError(
                    f"unsupported operator {node.op_type!r} (node {name!r}, opset {opset}): its output's shape "
                    "depends on the values of its inputs, a data-dependent shape; the library compiles static "
                    "shapes only",
                    node.op_type,
                )
            raise UnsupportedOperatorError(
                f"unsupported operator {node.op_type!r} (node {name!r}, opset {opset}); "
                f"supported operators: {', '.join(sorted(OPS))}",
                node.op_type,
            )


def _check_input_shapes(
    input_shapes: Mapping[str, Sequence[int | str | None]] | None,
) -> dict[str, tuple[int | str | None, ...]]:
    checked: dict[str, tuple[int | str | None, ...]] = {}
    for name, shape in dict(input_shapes or {}).items():
        if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
            raise ModelImportError(
                f"input_shapes[{name!r}] must be a sequence of sizes like (1, 3, 224, 224), got {shape!r}"
            )
        for k, extent in enumerate(shape):
            if extent is None or isinstance(extent, str):
                continue  # a dimension kept symbolic
            if isinstance(extent, bool) or not isinstance(extent, (int, np.integer)) or extent < 0:
                raise ModelImportError(
                    f"input_shapes[{name!r}] dimension {k} is {extent!r}: give a size (an int >= 0), "
                    "or a name from symbolic"
                )
        checked[name] = tuple(e if e is None or isinstance(e, str) else int(e) for e in shape)
    return checked


def _declared(dim: Any) -> int | str | None:
    """An input dimension as the model declares it: a fixed size, a ``dim_param`` name, or None
    (dynamic without a name: a negative ``dim_value``, or neither value nor name)."""
    if dim.HasField("dim_value"):
        return int(dim.dim_value) if dim.dim_value >= 0 else None
    return dim.dim_param or None


def _shape_vars(
    proto: Any, symbolic: Mapping[str, int], input_shapes: Mapping[str, Sequence[int | str | None]]
) -> dict[str, Var]:
    """One int32 shape variable per name in ``symbolic``: a ``dim_param`` of the inputs, or a
    name ``input_shapes`` gives a dynamic dimension."""
    params = {
        dim.dim_param
        for value in proto.graph.input
        for dim in value.type.tensor_type.shape.dim
        if not dim.HasField("dim_value") and dim.dim_param
    }
    named = {extent for shape in input_shapes.values() for extent in shape if isinstance(extent, str)}
    for name, size in symbolic.items():
        if name not in params | named:
            raise ModelImportError(
                f"symbolic names {name!r}, which is no dim_param of the model's inputs "
                f"(their dim_params: {sorted(params) or 'none'}; a dynamic dimension without a name "
                f"takes one in input_shapes, e.g. input_shapes={{'x': ({name!r}, 4)}})"
            )
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
            raise ModelImportError(
                f"symbolic[{name!r}] must be the representative size to schedule for (an int >= 1), got {size!r}"
            )
    return {name: Var(name, as_dtype("int32")) for name in symbolic}


def _input_dtype(value: Any) -> str:
    from onnx.helper import tensor_dtype_to_np_dtype

    if not value.type.HasField("tensor_type"):
        kind = value.type.WhichOneof("value") or "untyped"
        raise ModelImportError(f"input {value.name!r} is a {kind.replace('_type', '')}, not a tensor: not supported")
    elem = value.type.tensor_type.elem_type
    try:
        dtype = np.dtype(tensor_dtype_to_np_dtype(elem))
    except Exception:  # noqa: BLE001 - an unknown or undefined element type
        dtype = None
    if dtype is None or dtype.kind not in "biuf":
        raise ModelImportError(f"input {value.name!r} has element type {elem}, which is not supported")
    return str(dtype)


def _bind_input(value: Any, given: Sequence[int | str | None] | None, shape_vars: Mapping[str, Var]) -> TensorInfo:
    dtype = _input_dtype(value)
    ttype = value.type.tensor_type
    name = value.name
    if not ttype.HasField("shape"):  # not even a rank
        if given is None:
            raise ModelImportError(
                f"input {name!r} declares no shape (not even its rank): bind it with input_shapes={{{name!r}: (...)}}"
            )
        declared: list[int | str | None] = [None] * len(given)
    else:
        declared = [_declared(dim) for dim in ttype.shape.dim]
    if given is not None:
        if len(given) != len(declared):
            raise ModelImportError(f"input {name!r} has rank {len(declared)} but input_shapes gives {tuple(given)}")
        bound: list[Dim] = []
        for k, (decl, extent) in enumerate(zip(declared, given, strict=True)):
            if isinstance(decl, str) and decl in shape_vars:
                if extent is not None and extent != decl:
                    raise ModelImportError(
                        f"input {name!r} dimension {k} is the symbolic {decl!r}; input_shapes gives "
                        f"{extent!r} (leave it as {decl!r} or None, or drop {decl!r} from symbolic)"
                    )
                bound.append(shape_vars[decl])
            elif isinstance(extent, str) and isinstance(decl, int):
                raise ModelImportError(
                    f"input {name!r} dimension {k} is fixed at {decl}, input_shapes gives {extent!r} "
                    "(only a dynamic dimension can be symbolic)"
                )
            elif isinstance(extent, str) and extent in shape_vars:
                bound.append(shape_vars[extent])  # a dynamic dimension the user names
            elif extent is None or isinstance(extent, str):
                raise ModelImportError(
                    f"input {name!r} dimension {k}: input_shapes gives {extent!r}, "
                    "which names no symbolic dimension; give its size"
                    + (f" (or keep it symbolic with symbolic={{{extent!r}: size}})" if extent and decl is None else "")
                )
            elif isinstance(decl, int) and decl != extent:
                empty = " (an empty dimension: onnxruntime accepts only 0 there too)" if decl == 0 else ""
                raise ModelImportError(
                    f"input {name!r} dimension {k} is fixed at {decl}{empty}, input_shapes gives {extent}"
                )
            else:
                bound.append(int(extent))
        return TensorInfo(tuple(bound), dtype)
    shape: list[Dim] = []
    for k, decl in enumerate(declared):
        if isinstance(decl, int):
            shape.append(decl)
        elif decl in shape_vars:
            shape.append(shape_vars[cast(str, decl)])  # a key: not None
        elif decl:
            raise ModelImportError(
                f"input {name!r} dimension {k} {decl!r} is symbolic: bind it with "
                f"input_shapes={{{name!r}: (...)}} or keep it symbolic with symbolic={{{decl!r}: size}}"
            )
        else:
            dim = ttype.shape.dim[k]
            written = str(dim.dim_value) if dim.HasField("dim_value") else "without a size or name"
            example = ", ".join(str(d) if isinstance(d, int) else f"D{j}" for j, d in enumerate(declared))
            named = ", ".join(repr(d) if d is not None else f"'D{j}'" for j, d in enumerate(declared))
            raise ModelImportError(
                f"input {name!r} dimension {k} is dynamic (written {written}) and has no name: bind it with "
                f"input_shapes={{{name!r}: ({example})}}, or name it there to keep it symbolic: "
                f"input_shapes={{{name!r}: ({named})}}, symbolic={{'D{k}': size}}"
            )
    return TensorInfo(tuple(shape), dtype)


def _initializers(proto: Any) -> dict[str, np.ndarray]:
    from onnx import numpy_helper

    constants: dict[str, np.ndarray] = {}
    for init in proto.graph.initializer:
        try:
            constants[init.name] = numpy_helper.to_array(init)
        except Exception as error:  # noqa: BLE001 - missing external data, a truncated tensor
            first = str(error).strip().splitlines()[0] if str(error).strip() else ""
            raise ModelImportError(
                f"initializer {init.name!r} cannot be read ({type(error).__name__}: {first}); if its data is "
                "in a separate file, load the model from its path (or with onnx.load) next to that file"
            ) from None
    return constants


def _attr(attribute: Any) -> Any:
    from onnx import helper

    value = helper.get_attribute_value(attribute)
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode() for v in value]
    if hasattr(value, "dims") and hasattr(value, "data_type"):  # a TensorProto
        from onnx import numpy_helper

        return numpy_helper.to_array(value)
    return value


def _check_shape_inference(proto: Any, infos: dict[str, TensorInfo]) -> None:
    """onnx's own shape inference on the bound model (lenient: exported models often leave
    values untyped; our own propagation checks every shape, naming the node)."""
    import onnx

    bound = onnx.ModelProto()
    bound.CopyFrom(proto)
    for value in bound.graph.input:
        if value.name in infos:
            dims = value.type.tensor_type.shape.dim
            shape = infos[value.name].shape
            if not dims:  # an input declared without a shape: the one input_shapes gave
                for _ in shape:
                    dims.add()
            if len(dims) == len(shape):
                for dim, extent in zip(dims, shape, strict=True):
                    dim.Clear()
                    if is_symbolic(extent):
                        dim.dim_param = str(extent)
                    else:
                        dim.dim_value = extent
    try:
        onnx.shape_inference.infer_shapes(bound, strict_mode=False)
    except onnx.shape_inference.InferenceError as error:
        raise ModelImportError(f"ONNX shape inference failed: {error}") from None
    except Exception:  # older opsets or exotic models: our own propagation still checks shapes
        pass


# ---------------------------------------------------------------- propagation and folding

#: Never folded: a fresh value on every run.
_RANDOM = frozenset(
    {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"}
)


def _must_fold(op_type: str) -> bool:
    """An operator the library computes only at import: no kernel (``kind="fold"`` in the
    operator library, or only a folding kernel in ``metasched.model.fold``)."""
    op = OPS.get(op_type)
    return op is None or op.kind == "fold"


def _propagate(graph: Graph, fold: bool, skip_fold: Callable[[Node], bool] | None = None) -> None:
    """Shapes of every value, in node order; nodes whose inputs are all constant become
    constants (with ``fold``; those the library can only fold always, unless ``skip_fold``)."""
    producers = {out: node for node in graph.nodes for out in node.outputs if out}
    not_folded: dict[str, str] = {}  # value -> why its producer, on constants only, was not folded
    kept = []
    for node in graph.nodes:
        try:
            if _propagate_node(graph, node, fold, skip_fold, producers, not_folded):
                kept.append(node)
        except OpError as error:
            message = str(error)
            named = message.startswith((f"{node.op_type} node", f"unsupported operator {node.op_type!r}"))
            raise ModelImportError(message if named else f"{_where(graph, node)}: {message}") from None
        except ModelImportError:
            raise
        except Exception as error:  # noqa: BLE001 - one line naming the node, the cause chained for --debug
            raise ModelImportError(
                f"{_where(graph, node)}: the importer failed on it ({type(error).__name__}: {error}); "
                "a malformed node or a bug: please report it"
            ) from error
    graph.nodes = kept
    defined = set(graph.infos) | set(graph.constants)
    for node in kept:
        for name in node.inputs:
            if name and name not in defined:
                raise ModelImportError(
                    f"{node.op_type} node {node.name!r} reads {name!r}, an output this library does not produce"
                )
    for name, value in graph.constants.items():
        graph.infos.setdefault(name, TensorInfo(tuple(value.shape), str(value.dtype)))


def _propagate_node(
    graph: Graph,
    node: Node,
    fold: bool,
    skip_fold: Callable[[Node], bool] | None,
    producers: Mapping[str, Node],
    not_folded: dict[str, str],
) -> bool:
    """Fold ``node`` into constants (False) or record its outputs' shapes (True: it stays)."""
    if node.op_type == "Constant":
        graph.constants[node.outputs[0]] = _constant_value(node)
        return False
    for name in node.inputs:
        if name and name not in graph.constants and name not in graph.infos:
            raise OpError(f"{node.op_type} node {node.name!r}: input {name!r} is produced by no node")
    must_fold = _must_fold(node.op_type)
    folding = (fold or must_fold) and not (skip_fold is not None and skip_fold(node))
    reason = None
    if _foldable(graph, node):
        if folding:
            try:
                outputs = evaluate(
                    node.op_type,
                    [graph.constants[n] if n else None for n in node.inputs],
                    node.attrs,
                    graph.opset,
                    num_outputs=len(node.outputs),
                    limit=None if must_fold else FOLD_LIMIT,
                    source=node.source,
                )
            except FoldError as error:
                reason = str(error)
            else:
                for name, value in zip(node.outputs, outputs, strict=False):
                    if name:
                        graph.constants[name] = value
                return False
        else:
            reason = "it is kept out of folding"
    if folding and node.op_type in ("Shape", "Size") and node.inputs[0] in graph.infos:
        full = graph.infos[node.inputs[0]].shape
        if node.op_type == "Shape":
            start, end = node.attrs.get("start", 0), node.attrs.get("end")
            _refuse_symbolic_shape(node, full[start:end], graph.inputs)
            graph.constants[node.outputs[0]] = np.array(full[start:end], dtype=np.int64)
        else:
            _refuse_symbolic_shape(node, full, graph.inputs)
            # static: _refuse_symbolic_shape raised otherwise
            graph.constants[node.outputs[0]] = np.array(int(np.prod(cast("tuple[int, ...]", full))), np.int64)
        return False
    if must_fold:
        raise _not_computable(graph, node, reason, producers, not_folded)
    for position in sorted(OPS[node.op_type].value_inputs):
        name = node.inputs[position] if position < len(node.inputs) else ""
        if name and name not in graph.constants:
            raise ModelImportError(
                f"{_where(graph, node)}: its input {position}, {_origin(graph, name, producers, not_folded)}, "
                f"must be a constant known at import: it sets the output's shape or the kernel's parameters, "
                "and the library compiles static shapes only"
            )
    infos = dict(graph.infos)
    for name in node.inputs:
        if name in graph.constants:
            value = graph.constants[name]
            infos[name] = TensorInfo(tuple(value.shape), str(value.dtype))
    env = lower_nodes(FuncBuilder("probe"), graph.opset, [node], infos, graph.constants)
    for name in node.outputs:
        if name:
            if name not in env:
                continue  # an optional output (Dropout's mask): refused below if used
            graph.infos[name] = TensorInfo(tuple(env[name].shape), env[name].dtype)
    if reason is None:  # not folded only because an input was not: that input's reason
        upstream = [n for n in node.inputs if n in not_folded]
        if upstream and all(n in graph.constants or n in not_folded for n in node.inputs if n):
            reason = not_folded[upstream[0]]
    if reason is not None:
        not_folded.update((name, reason) for name in node.outputs if name)
    return True


def _constant_value(node: Node) -> np.ndarray:
    value = node.attrs.get("value")
    if value is None:
        for key in ("value_float", "value_int", "value_floats", "value_ints"):
            if key in node.attrs:
                value = np.array(node.attrs[key], dtype=np.float32 if "float" in key else np.int64)
    if value is None:
        raise OpError(f"Constant node {node.name!r}: unsupported value attribute {list(node.attrs)}")
    return np.asarray(value)


def _where(graph: Graph, node: Node) -> str:
    return f"{node.op_type} node {node.name!r} (opset {graph.opset})"


def _origin(graph: Graph, name: str, producers: Mapping[str, Node], not_folded: Mapping[str, str]) -> str:
    """Where a value that is not constant comes from, for messages."""
    if name in graph.inputs:
        return f"{name!r} (a model input)"
    producer = producers.get(name)
    if producer is None:
        return repr(name)
    if name in not_folded:
        return f"{name!r} (from {producer.op_type} node {producer.name!r}, which was not folded: {not_folded[name]})"
    return f"{name!r} (computed from the model's inputs by {producer.op_type} node {producer.name!r})"


def _not_computable(
    graph: Graph, node: Node, reason: str | None, producers: Mapping[str, Node], not_folded: Mapping[str, str]
) -> ModelImportError:
    """The error for an operator the library only folds, left with inputs it cannot fold."""
    where = _where(graph, node)
    dynamic = next((n for n in node.inputs if n and n not in graph.constants), None)
    if reason is not None or dynamic is None:
        return ModelImportError(
            f"{where}: cannot be computed at import ({reason or 'it is never folded'}), and the library has "
            "no kernel for it"
        )
    origin = _origin(graph, dynamic, producers, not_folded)
    if node.op_type in DATA_DEPENDENT:
        return ModelImportError(
            f"{where}: its output's shape depends on the values of {origin}, a data-dependent shape; the "
            f"library compiles static shapes only ({node.op_type} is computed at import when its inputs are constant)"
        )
    if node.op_type not in OPS:
        return UnsupportedOperatorError(
            f"unsupported operator {node.op_type!r} (node {node.name!r}, opset {graph.opset}) on values computed "
            f"at run time: the library computes it only at import, on constants, and its input {origin} is not one",
            node.op_type,
        )
    why = (
        ""
        if dynamic in not_folded
        else " (its output's shape would depend on the input data: dynamic shapes are not supported)"
    )
    return ModelImportError(
        f"{where}: its input {origin} is not a constant, and the library computes {node.op_type} only at import{why}"
    )


def _refuse_symbolic_shape(node: Node, shape: Sequence[Dim], inputs: Sequence[str]) -> None:
    if is_symbolic(shape):
        names = ", ".join(free_vars(shape))
        raise ModelImportError(
            f"{node.op_type} node {node.name!r} reads the shape {shape_text(shape)} of {node.inputs[0]!r}, "
            f"which depends on the symbolic {names}: shape computations on symbolic dimensions are not "
            f"supported (use Flatten, or Reshape with a constant shape using 0 / -1; or bind {names} "
            "with input_shapes)"
        )


def _foldable(graph: Graph, node: Node) -> bool:
    return all(not n or n in graph.constants for n in node.inputs) and node.op_type not in _RANDOM


def _fold_batch_norm(graph: Graph) -> None:
    """``BatchNormalization(Conv(x, W, b))`` with constant parameters -> ``Conv(x, W', b')``."""
    users = graph.consumers()
    producers = graph.producers()
    removed: set[int] = set()
    for node in graph.nodes:
        if node.op_type != "BatchNormalization" or len([o for o in node.outputs if o]) != 1:
            continue
        if not all(n in graph.constants for n in node.inputs[1:5]):
            continue
        source = producers.get(node.inputs[0])
        if source is None or source.op_type not in ("Conv", "Gemm") or len(users.get(source.outputs[0], [])) != 1:
            continue
        if source.outputs[0] in graph.outputs:
            continue
        if source.op_type == "Gemm" and (
            source.attrs.get("transB", 0) != 1
            or source.attrs.get("alpha", 1.0) != 1.0
            or source.attrs.get("beta", 1.0) != 1.0
        ):
            continue
        weight_name = source.inputs[1]
        if weight_name not in graph.constants or len(users.get(weight_name, [])) != 1:
            continue
        bias_name = source.inputs[2] if len(source.inputs) > 2 and source.inputs[2] else None
        if bias_name is not None and (bias_name not in graph.constants or len(users.get(bias_name, [])) != 1):
            continue
        scale, beta, mean, var = (graph.constants[n] for n in node.inputs[1:5])
        weight, bias = np_batch_norm_fold(
            graph.constants[weight_name],
            None if bias_name is None else graph.constants[bias_name],
            scale,
            beta,
            mean,
            var,
            float(node.attrs.get("epsilon", 1e-5)),
        )
        new_w, new_b = f"{weight_name}__bn", f"{node.name}__bias"
        graph.constants[new_w], graph.constants[new_b] = weight, bias
        graph.infos[new_w] = TensorInfo(weight.shape, str(weight.dtype))
        graph.infos[new_b] = TensorInfo(bias.shape, str(bias.dtype))
        source.inputs = [source.inputs[0], new_w, new_b]
        old = source.outputs[0]
        source.outputs = [node.outputs[0]]
        removed.add(id(node))
        del graph.infos[old]
    graph.nodes = [n for n in graph.nodes if id(n) not in removed]


def _remove_dead(graph: Graph) -> None:
    live = set(graph.outputs)
    kept = []
    for node in reversed(graph.nodes):
        if any(o in live for o in node.outputs if o):
            kept.append(node)
            live.update(n for n in node.inputs if n)
    graph.nodes = kept[::-1]
    graph.constants = {k: v for k, v in graph.constants.items() if k in live}
