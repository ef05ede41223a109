"""ONNX import: load, check every operator is supported, bind symbolic input dimensions,
shape inference, constant folding, BatchNormalization folded into Conv/Gemm, dead-node removal.

    graph = from_onnx("m.onnx", input_shapes={"x": (1, 3, 224, 224)})
    graph = from_onnx("m.onnx", symbolic={"N": 8})   # dim_param "N" stays symbolic

A ``dim_param`` named in ``symbolic`` stays a shape variable (``metasched.model.symbolic``):
every shape that depends on it is an expression, the compiled model runs for every size, and
its schedules are chosen for the representative size given (``{"N": 8}``). A ``Shape`` or
``Size`` of a tensor with a symbolic dimension cannot be folded and is refused with its name.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from metasched.model.graph import Graph, Node, TensorInfo, lower_nodes
from metasched.model.ops import OPS, OpError
from metasched.model.ops.elementwise import np_batch_norm_fold
from metasched.model.symbolic import Dim, free_vars, is_symbolic, shape_text
from metasched.model.te import FuncBuilder
from tir.ir import Var

__all__ = ["ModelImportError", "UnsupportedOperatorError", "from_onnx"]

MIN_OPSET, MAX_OPSET = 6, 21
#: Folding stops producing constants larger than this (a big broadcast stays a kernel).
FOLD_LIMIT = 1 << 26


class ModelImportError(ValueError):
    """The model cannot be imported: a broken file, a missing input binding, a bad shape."""


class UnsupportedOperatorError(ModelImportError):
    """An operator the library does not have."""


def from_onnx(
    model: Any,
    input_shapes: Mapping[str, Sequence[int | str | None]] | None = None,
    fold_constants: bool = True,
    symbolic: Mapping[str, int] | None = None,
) -> Graph:
    """The ``Graph`` of an ONNX model (a path or a ``ModelProto``).

    ``input_shapes`` binds the inputs' dimensions (required for symbolic ones; a fixed one must
    agree). ``symbolic`` maps ``dim_param`` names that stay symbolic to the representative size
    schedules are chosen for (``{"N": 8}``); an ``input_shapes`` entry may leave such a
    dimension as its name or None. Raises ``UnsupportedOperatorError`` naming the operator,
    node and opset before any other work, and ``ModelImportError`` for a broken file, a missing
    binding or an operator that cannot take a symbolic dimension."""
    import onnx

    proto = _load(model)
    opset = _opset(proto)
    _check_supported(proto, opset)
    input_shapes = dict(input_shapes or {})
    shape_vars = _shape_vars(proto, symbolic or {})
    initializers = {init.name for init in proto.graph.initializer}
    graph_inputs = [i for i in proto.graph.input if i.name not in initializers]
    unknown = set(input_shapes) - {i.name for i in graph_inputs}
    if unknown:
        raise ModelImportError(
            f"input_shapes names {sorted(unknown)}, which are not inputs of the model "
            f"(its inputs: {[i.name for i in graph_inputs]})"
        )
    infos: dict[str, TensorInfo] = {}
    for value in graph_inputs:
        infos[value.name] = _bind_input(value, input_shapes.get(value.name), shape_vars)
    constants: dict[str, np.ndarray] = {}
    for init in proto.graph.initializer:
        constants[init.name] = onnx.numpy_helper.to_array(init)
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
    _propagate(graph, fold_constants)
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
        try:
            return onnx.load(path)
        except Exception as error:  # protobuf raises DecodeError and friends
            raise ModelImportError(f"cannot read ONNX file {path!r}: {type(error).__name__}: {error}") from None
    if isinstance(model, (bytes, bytearray)):
        try:
            return onnx.load_from_string(bytes(model))
        except Exception as error:
            raise ModelImportError(f"cannot parse ONNX bytes: {error}") from None
    raise TypeError(f"from_onnx needs a path or an onnx.ModelProto, got {type(model).__name__}")


def _opset(proto: Any) -> int:
    for entry in proto.opset_import:
        if entry.domain in ("", "ai.onnx"):
            return int(entry.version)
    return MAX_OPSET


def _check_supported(proto: Any, opset: int) -> None:
    if not MIN_OPSET <= opset <= MAX_OPSET:
        raise UnsupportedOperatorError(f"the model uses opset {opset}; supported are {MIN_OPSET} to {MAX_OPSET}")
    for k, node in enumerate(proto.graph.node):
        name = node.name or f"#{k}"
        if node.domain not in ("", "ai.onnx"):
            raise UnsupportedOperatorError(
                f"unsupported operator {node.domain}::{node.op_type} (node {name!r}, opset {opset}): "
                "only the default ONNX domain is supported"
            )
        if node.op_type not in OPS:
            raise UnsupportedOperatorError(
                f"unsupported operator {node.op_type!r} (node {name!r}, opset {opset}); "
                f"supported operators: {', '.join(sorted(OPS))}"
            )


def _shape_vars(proto: Any, symbolic: Mapping[str, int]) -> dict[str, Var]:
    """One int32 shape variable per ``dim_param`` named in ``symbolic``."""
    params = {
        dim.dim_param
        for value in proto.graph.input
        for dim in value.type.tensor_type.shape.dim
        if not dim.HasField("dim_value") and dim.dim_param
    }
    for name, size in symbolic.items():
        if name not in params:
            raise ModelImportError(
                f"symbolic names {name!r}, which is no dim_param of the model's inputs "
                f"(their dim_params: {sorted(params) or 'none'})"
            )
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
            raise ModelImportError(
                f"symbolic[{name!r}] must be the representative size to schedule for (an int >= 1), got {size!r}"
            )
    return {name: Var(name, "int32") for name in symbolic}


def _bind_input(value: Any, given: Sequence[int | str | None] | None, shape_vars: Mapping[str, Var]) -> TensorInfo:
    from onnx.helper import tensor_dtype_to_np_dtype

    ttype = value.type.tensor_type
    dtype = str(np.dtype(tensor_dtype_to_np_dtype(ttype.elem_type)))
    dims = list(ttype.shape.dim)
    if given is not None:
        if dims and len(given) != len(dims):
            raise ModelImportError(f"input {value.name!r} has rank {len(dims)} but input_shapes gives {tuple(given)}")
        bound: list[Dim] = []
        for k, extent in enumerate(given):
            param = dims[k].dim_param if dims and not dims[k].HasField("dim_value") else ""
            if param in shape_vars:
                if extent is not None and extent != param:
                    raise ModelImportError(
                        f"input {value.name!r} dimension {k} is the symbolic {param!r}; input_shapes gives "
                        f"{extent!r} (leave it as {param!r} or None, or drop {param!r} from symbolic)"
                    )
                bound.append(shape_vars[param])
                continue
            if extent is None or isinstance(extent, str):
                raise ModelImportError(
                    f"input {value.name!r} dimension {k}: input_shapes gives {extent!r}, "
                    "which names no symbolic dimension; give its size"
                )
            bound.append(int(extent))
            if dims and dims[k].HasField("dim_value") and dims[k].dim_value != int(extent):
                raise ModelImportError(
                    f"input {value.name!r} dimension {k} is fixed at {dims[k].dim_value}, input_shapes gives {extent}"
                )
        return TensorInfo(tuple(bound), dtype)
    shape: list[Dim] = []
    for k, dim in enumerate(dims):
        if not dim.HasField("dim_value") and dim.dim_param in shape_vars:
            shape.append(shape_vars[dim.dim_param])
            continue
        if not dim.HasField("dim_value"):
            label = f"{dim.dim_param!r}" if dim.dim_param else "(unnamed)"
            keep = f" or keep it symbolic with symbolic={{{dim.dim_param!r}: size}}" if dim.dim_param else ""
            raise ModelImportError(
                f"input {value.name!r} dimension {k} {label} is symbolic: bind it with "
                f"input_shapes={{{value.name!r}: (...)}}{keep}"
            )
        shape.append(int(dim.dim_value))
    return TensorInfo(tuple(shape), dtype)


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


def _evaluate(node: Node, inputs: list[np.ndarray | None], opset: int) -> list[np.ndarray]:
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    names = [f"in{k}" if value is not None else "" for k, value in enumerate(inputs)]
    proto = helper.make_node(node.op_type, names, [f"out{k}" for k in range(len(node.outputs))])
    if node.source is not None:
        proto.attribute.extend(node.source.attribute)
    else:
        proto = helper.make_node(node.op_type, names, [f"out{k}" for k in range(len(node.outputs))], **node.attrs)
    feeds = {n: v for n, v in zip(names, inputs, strict=True) if n}
    from onnx import TensorProto

    def value_info(name: str, value: np.ndarray | None) -> Any:
        elem = helper.np_dtype_to_tensor_dtype(value.dtype) if value is not None else TensorProto.FLOAT
        return helper.make_tensor_value_info(name, elem, None)

    graph = helper.make_graph(
        [proto],
        "fold",
        [value_info(n, feeds[n]) for n in names if n],
        [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in proto.output],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
    results = ReferenceEvaluator(model).run(None, feeds)
    return [np.asarray(r) for r in results]


def _propagate(graph: Graph, fold: bool) -> None:
    """Shapes of every value, in node order; nodes whose inputs are all constant become constants."""
    kept = []
    for node in graph.nodes:
        try:
            if node.op_type == "Constant":
                value = node.attrs.get("value")
                if value is None:
                    for key in ("value_float", "value_int", "value_floats", "value_ints"):
                        if key in node.attrs:
                            value = np.array(node.attrs[key], dtype=np.float32 if "float" in key else np.int64)
                if value is None:
                    raise OpError(f"Constant node {node.name!r}: unsupported value attribute {list(node.attrs)}")
                graph.constants[node.outputs[0]] = np.asarray(value)
                continue
            if fold and _foldable(graph, node):
                inputs = [graph.constants[n] if n else None for n in node.inputs]
                outputs = _evaluate(node, inputs, graph.opset)
                if node.op_type == "ConstantOfShape" or all(o.size <= FOLD_LIMIT for o in outputs):
                    for name, value in zip(node.outputs, outputs, strict=False):
                        if name:
                            graph.constants[name] = value
                    continue
            if fold and node.op_type == "Shape" and node.inputs[0] in graph.infos:
                full = graph.infos[node.inputs[0]].shape
                start, end = node.attrs.get("start", 0), node.attrs.get("end")
                _refuse_symbolic_shape(node, full[start:end], graph.inputs)
                graph.constants[node.outputs[0]] = np.array(full[start:end], dtype=np.int64)
                continue
            if fold and node.op_type == "Size" and node.inputs[0] in graph.infos:
                _refuse_symbolic_shape(node, graph.infos[node.inputs[0]].shape, graph.inputs)
                graph.constants[node.outputs[0]] = np.array(int(np.prod(graph.infos[node.inputs[0]].shape)), np.int64)
                continue
            for name in node.inputs:
                if name and name not in graph.constants and name not in graph.infos:
                    raise OpError(f"{node.op_type} node {node.name!r}: input {name!r} is produced by no node")
            infos = dict(graph.infos)
            for name, value in graph.constants.items():
                if name in node.inputs:
                    infos[name] = TensorInfo(tuple(value.shape), str(value.dtype))
            env = lower_nodes(FuncBuilder("probe"), graph.opset, [node], infos, graph.constants)
            for name in node.outputs:
                if name:
                    if name not in env:
                        continue  # an optional output (Dropout's mask): refused below if used
                    graph.infos[name] = TensorInfo(tuple(env[name].shape), env[name].dtype)
            kept.append(node)
        except OpError as error:
            raise ModelImportError(str(error)) from None
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
    return all(not n or n in graph.constants for n in node.inputs) and bool(
        node.inputs or node.op_type != "RandomNormal"
    )


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
