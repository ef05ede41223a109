"""Indexing operators against onnxruntime: GatherElements, GatherND, ScatterElements / Scatter,
ScatterND (every reduction), OneHot, Trilu, ReverseSequence; negative indices, batch_dims,
attribute defaults, several dtypes; and the refusal of operators whose output shape depends
on the data."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from model_testing import assert_close, make_model, ort_run  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

from metasched import model as msm  # noqa: E402
from metasched.model.onnx import ModelImportError  # noqa: E402

RNG = np.random.default_rng(7)


def check(node, inputs, inits=(), opset=18, outputs=("y",)):  # type: ignore[no-untyped-def]
    model = make_model([node], inputs, list(outputs), inits, opset)
    want = ort_run(model, inputs)
    got = msm.compile(msm.from_onnx(model), schedule="none", threads=1).run(inputs)
    for name in outputs:
        assert got[name].shape == want[name].shape, name
        assert got[name].dtype == want[name].dtype, name
        if want[name].dtype.kind == "f" and np.isfinite(want[name]).all():
            assert_close(got[name], want[name], name=name)
        else:
            np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def r(*shape, dtype="float32"):  # type: ignore[no-untyped-def]
    if np.dtype(dtype).kind in "iu":
        return RNG.integers(-50, 50, shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def idx(values):  # type: ignore[no-untyped-def]
    return np.array(values, dtype=np.int64)


@pytest.mark.parametrize(
    "data,indices,attrs",
    [
        (r(3, 4), idx([[0, -1, 2, 1], [2, 2, -3, 0]]), {}),  # axis 0 by default
        (r(3, 4), idx([[3, -4], [0, 1], [-1, 2]]), {"axis": 1}),
        (r(2, 3, 4, dtype="int64"), idx(RNG.integers(-3, 3, (2, 2, 4))), {"axis": -2}),
        (r(2, 5), np.array([[4, -5, 0]], np.int32), {"axis": 1}),  # int32 indices
    ],
)
def test_gather_elements(data, indices, attrs):  # type: ignore[no-untyped-def]
    check(helper.make_node("GatherElements", ["x", "i"], ["y"], **attrs), {"x": data, "i": indices})


@pytest.mark.parametrize(
    "data,indices,batch_dims",
    [
        (r(3, 4), idx([[0, 1], [2, -1], [-3, 0]]), 0),  # whole elements
        (r(3, 4, 5), idx([[1], [-1]]), 0),  # rows
        (r(2, 3, 4, dtype="int64"), idx([[[1, 2]], [[-1, 0]]]), 0),
        (r(2, 3, 4), idx([[1], [-2]]), 1),  # batch_dims=1: one index per batch
        (r(2, 3, 4, 5), idx(RNG.integers(-3, 3, (2, 3, 2, 1))), 2),
        (r(1, 8, 6), idx([[[0, 7]]]), 0),  # BERT's pooled-token pick (dynamo export)
    ],
)
def test_gather_nd(data, indices, batch_dims):  # type: ignore[no-untyped-def]
    check(helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=batch_dims), {"x": data, "i": indices})


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_scatter_elements(reduction, dtype):  # type: ignore[no-untyped-def]
    data = r(4, 5, dtype=dtype)
    updates = r(2, 5, dtype=dtype)
    # unique targets under "none" (ONNX leaves duplicates' order open); repeated ones otherwise
    indices = (
        idx([[0, 1, -1, 3, 2], [2, -4, 1, 0, 3]]) if reduction == "none" else idx([[0, 1, 3, 3, 2], [0, 1, -1, 3, 2]])
    )
    node = helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=0, reduction=reduction)
    check(node, {"x": data, "i": indices, "u": updates})


def test_scatter_elements_axis_and_opsets():  # type: ignore[no-untyped-def]
    data, updates = r(3, 6), r(3, 2)
    indices = idx([[5, -1 + 6 - 2], [0, -6], [1, 2]])
    check(helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=-1), {"x": data, "i": indices, "u": updates})
    check(
        helper.make_node("ScatterElements", ["x", "i", "u"], ["y"], axis=1),
        {"x": data, "i": indices, "u": updates},
        opset=11,
    )
    check(helper.make_node("Scatter", ["x", "i", "u"], ["y"], axis=1), {"x": data, "i": indices, "u": updates}, opset=9)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_nd(reduction):  # type: ignore[no-untyped-def]
    data = r(4, 3, 2)
    if reduction == "none":
        indices, updates = idx([[1], [-1]]), r(2, 3, 2)  # whole slices, unique
    else:
        indices, updates = idx([[1, 2], [-3, 2], [0, 0]]), r(3, 2)  # repeated target [1, 2]
    node = helper.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction=reduction)
    check(node, {"x": data, "i": indices, "u": updates})


def test_scatter_nd_elements_and_int64():  # type: ignore[no-untyped-def]
    data = r(3, 4, dtype="int64")
    check(
        helper.make_node("ScatterND", ["x", "i", "u"], ["y"]),
        {"x": data, "i": idx([[0, 0], [2, -1], [1, 3]]), "u": r(3, dtype="int64")},
        opset=11,
    )
    # a causal-mask style slice assignment (what the dynamo exporter emits for x[:, :2] = v)
    check(
        helper.make_node("ScatterND", ["x", "i", "u"], ["y"]),
        {"x": r(1, 4, 4), "i": idx([[[0, 0], [0, 1]]]), "u": r(1, 2, 4)},
    )


@pytest.mark.parametrize(
    "indices,depth,axis,values",
    [
        (idx([0, 2, -1, 5, -4]), np.int64(4), None, np.array([0, 1], np.float32)),  # out of range: all "off"
        (idx([[1, 0], [2, -3]]), np.array([3], np.int64), 0, np.array([-1, 7], np.int64)),
        (idx([[1, 0], [2, -3]]), np.int64(3), 1, np.array([2.5, -1.0], np.float32)),
        # float indices truncate; a float depth
        (np.array([1.7, 2.2, -1.2], np.float32), np.float32(3), -1, np.array([0, 1], np.float32)),
    ],
)
def test_one_hot(indices, depth, axis, values):  # type: ignore[no-untyped-def]
    attrs = {} if axis is None else {"axis": axis}
    node = helper.make_node("OneHot", ["i", "d", "v"], ["y"], **attrs)
    check(node, {"i": indices}, inits={"d": depth, "v": values})


@pytest.mark.parametrize("upper", [None, 0, 1])
@pytest.mark.parametrize("k", [None, 0, 2, -1, 7, -9])
def test_trilu(upper, k):  # type: ignore[no-untyped-def]
    attrs = {} if upper is None else {"upper": upper}
    inputs = ["x"] if k is None else ["x", "k"]
    inits = {} if k is None else {"k": np.array(k, np.int64)}
    check(helper.make_node("Trilu", inputs, ["y"], **attrs), {"x": r(2, 4, 5)}, inits=inits, opset=14)


def test_trilu_int64_and_k_as_input():  # type: ignore[no-untyped-def]
    check(
        helper.make_node("Trilu", ["x", "k"], ["y"], upper=0),
        {"x": r(5, 3, dtype="int64"), "k": np.array(1, np.int64)},
        opset=14,
    )


@pytest.mark.parametrize("batch_axis,time_axis", [(1, 0), (0, 1)])
def test_reverse_sequence(batch_axis, time_axis):  # type: ignore[no-untyped-def]
    shape = (5, 3, 2) if time_axis == 0 else (3, 5, 2)
    node = helper.make_node("ReverseSequence", ["x", "n"], ["y"], batch_axis=batch_axis, time_axis=time_axis)
    check(node, {"x": r(*shape), "n": idx([5, 1, 3])}, opset=10)


@pytest.mark.parametrize(
    "node,inputs",
    [
        (helper.make_node("NonZero", ["x"], ["y"], name="nz"), {"x": r(3, 4)}),
        (
            helper.make_node("Compress", ["x", "c"], ["y"], axis=0, name="nz"),
            {"x": r(3, 2), "c": np.array([True, False, True])},
        ),
        (helper.make_node("Unique", ["x"], ["y"], name="nz"), {"x": r(6)}),
        (helper.make_node("NonMaxSuppression", ["b", "s"], ["y"], name="nz"), {"b": r(1, 3, 4), "s": r(1, 1, 3)}),
    ],
)
def test_data_dependent_shapes_are_refused(node, inputs):  # type: ignore[no-untyped-def]
    """No kernel: the importer refuses them on values computed at run time, naming operator,
    node and opset (why, where it can fold them on constants; an unsupported operator where not)."""
    graph = helper.make_graph(
        [node],
        "t",
        [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
            for n, a in inputs.items()
        ],
        [helper.make_tensor_value_info("y", TensorProto.UNDEFINED, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    op = node.op_type
    with pytest.raises(
        ModelImportError, match=rf"({op} node .*shape depends on the|unsupported operator '{op}')"
    ) as error:
        msm.from_onnx(model)
    assert "'nz'" in str(error.value) and "opset 17" in str(error.value)


def test_data_dependent_shape_on_constants_folds():  # type: ignore[no-untyped-def]
    nodes = [
        helper.make_node("NonZero", ["c"], ["nz"]),
        helper.make_node("Cast", ["nz"], ["nzf"], to=TensorProto.FLOAT),
        helper.make_node("ReduceSum", ["nzf"], ["s"], keepdims=0),
        helper.make_node("Add", ["x", "s"], ["y"]),
    ]
    model = make_model(nodes, {"x": r(3)}, ["y"], {"c": np.array([[0, 1], [1, 1]], np.int64)}, 17)
    graph = msm.from_onnx(model)
    assert [n.op_type for n in graph.nodes] == ["Add"]
    x = r(3)
    assert_close(msm.compile(graph, schedule="none", threads=1).run({"x": x})["y"], ort_run(model, {"x": x})["y"])


def test_default_schedules():  # type: ignore[no-untyped-def]
    """The scatter's opaque update block and a fused gather survive the default schedules; the
    tuner's features cover both tasks."""
    nodes = [
        helper.make_node("GatherElements", ["x", "i"], ["g"], axis=1),
        helper.make_node("Relu", ["g"], ["y"]),
        helper.make_node("ScatterElements", ["x", "j", "u"], ["s"], axis=0, reduction="add"),
    ]
    inputs = {"x": r(4, 6), "i": idx(RNG.integers(-6, 6, (4, 3))), "j": idx(RNG.integers(0, 4, (3, 6))), "u": r(3, 6)}
    model = make_model(nodes, inputs, ["y", "s"], (), 18)
    want = ort_run(model, inputs)
    got = msm.compile(msm.from_onnx(model), threads=1).run(inputs)
    for name in ("y", "s"):
        assert_close(got[name], want[name], name=name)
    from metasched.cost import FEATURE_NAMES, extract_features

    incomplete = FEATURE_NAMES.index("misc.features_incomplete")
    for task in msm.extract_tasks(msm.from_onnx(model)):
        rows = extract_features(task.func, "llvm")
        assert np.isfinite(rows).all() and not rows[:, incomplete].any(), task.name
