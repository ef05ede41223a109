"""Selection and scan operators against onnxruntime: ArgMax / ArgMin (keepdims,
select_last_index, ties), Hardmax (both opset semantics), TopK (largest / smallest, sorted,
ties, both algorithms), CumSum (exclusive, reverse, dtypes), ReduceProd / ReduceLogSum /
ReduceLogSumExp (empty axes, noop_with_empty_axes)."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from model_testing import assert_close, make_model, ort_run  # noqa: E402
from onnx import helper  # noqa: E402

from metasched import model as msm  # noqa: E402
from metasched.model.ops import selection  # noqa: E402

RNG = np.random.default_rng(11)


def run_both(node, inputs, inits=(), opset=18, outputs=("y",)):  # type: ignore[no-untyped-def]
    model = make_model([node], inputs, list(outputs), inits, opset)
    want = ort_run(model, inputs)
    got = msm.compile(msm.from_onnx(model), schedule="none", threads=1).run(inputs)
    return got, want


def check(node, inputs, inits=(), opset=18, outputs=("y",)):  # type: ignore[no-untyped-def]
    got, want = run_both(node, inputs, inits, opset, outputs)
    for name in outputs:
        assert got[name].shape == want[name].shape, name
        assert got[name].dtype == want[name].dtype, name
        if want[name].dtype.kind == "f" and np.isfinite(want[name]).all():
            assert_close(got[name], want[name], name=name)
        else:
            np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def ties(*shape, dtype="float32"):  # type: ignore[no-untyped-def]
    """Few distinct values: every row has ties."""
    return RNG.integers(-2, 3, shape).astype(dtype)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize(
    "attrs",
    [
        {},
        {"axis": 1, "keepdims": 0},
        {"axis": -1, "select_last_index": 1},
        {"axis": 0, "keepdims": 0, "select_last_index": 1},
    ],
)
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_arg_extremes(op, attrs, dtype):  # type: ignore[no-untyped-def]
    check(helper.make_node(op, ["x"], ["y"], **attrs), {"x": ties(3, 5, 4, dtype=dtype)}, opset=13)


def test_arg_extremes_1d():  # type: ignore[no-untyped-def]
    check(helper.make_node("ArgMax", ["x"], ["y"], keepdims=0), {"x": ties(7)}, opset=13)
    check(helper.make_node("ArgMin", ["x"], ["y"]), {"x": ties(7)}, opset=11)


@pytest.mark.parametrize("opset,attrs", [(13, {}), (13, {"axis": 1}), (11, {}), (11, {"axis": 2}), (11, {"axis": 0})])
def test_hardmax(opset, attrs):  # type: ignore[no-untyped-def]
    check(helper.make_node("Hardmax", ["x"], ["y"], **attrs), {"x": ties(2, 3, 4)}, opset=opset)


@pytest.mark.parametrize("k", [1, 2, 3, 12])  # K passes for 1 and 2, ranking beyond
@pytest.mark.parametrize("largest", [1, 0])
@pytest.mark.parametrize("axis", [-1, 0])
def test_topk(k, largest, axis):  # type: ignore[no-untyped-def]
    assert selection.TOPK_PASSES_LIMIT == 2
    x = ties(13, 13) if axis == 0 else ties(2, 3, 13)
    node = helper.make_node("TopK", ["x", "k"], ["y", "i"], axis=axis, largest=largest)
    check(node, {"x": x}, inits={"k": np.array([k], np.int64)}, opset=11, outputs=("y", "i"))


def test_topk_int64_opsets_whole_axis_and_none():  # type: ignore[no-untyped-def]
    x = ties(4, 6, dtype="int64")
    check(
        helper.make_node("TopK", ["x", "k"], ["y", "i"]),
        {"x": x},
        inits={"k": np.array([6], np.int64)},
        opset=11,
        outputs=("y", "i"),
    )
    check(
        helper.make_node("TopK", ["x", "k"], ["y", "i"]),
        {"x": ties(4, 6)},
        inits={"k": np.array([2], np.int64)},
        opset=10,
        outputs=("y", "i"),
    )
    check(helper.make_node("TopK", ["x"], ["y", "i"], k=2, axis=0), {"x": ties(4, 6)}, opset=9, outputs=("y", "i"))
    check(
        helper.make_node("TopK", ["x", "k"], ["y", "i"]),
        {"x": ties(4, 6)},
        inits={"k": np.array([0], np.int64)},
        opset=11,
        outputs=("y", "i"),
    )
    x = np.array([[1.0, -np.inf, 3.0, -np.inf]], np.float32)  # infinities are values too
    check(
        helper.make_node("TopK", ["x", "k"], ["y", "i"]),
        {"x": x},
        inits={"k": np.array([4], np.int64)},
        opset=11,
        outputs=("y", "i"),
    )


@pytest.mark.parametrize("largest", [1, 0])
def test_topk_passes_on_a_long_axis(largest):  # type: ignore[no-untyped-def]
    n = selection.TOPK_LONG_AXIS + 3
    x = RNG.integers(-40, 40, (2, n)).astype(np.float32)  # many ties
    node = helper.make_node("TopK", ["x", "k"], ["y", "i"], largest=largest)
    check(node, {"x": x}, inits={"k": np.array([5], np.int64)}, opset=11, outputs=("y", "i"))


@pytest.mark.parametrize("k", [2, 12])
def test_topk_unsorted(k):  # type: ignore[no-untyped-def]
    """sorted=0 leaves the order open: the same (value, index) pairs."""
    x = ties(2, 13)
    node = helper.make_node("TopK", ["x", "k"], ["y", "i"], sorted=0)
    got, want = run_both(node, {"x": x}, inits={"k": np.array([k], np.int64)}, opset=11, outputs=("y", "i"))
    for row in range(2):
        assert sorted(zip(got["y"][row], got["i"][row])) == sorted(zip(want["y"][row], want["i"][row]))


@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize("dtype,axis", [("float32", 1), ("int64", -1), ("int32", 0)])
def test_cumsum(exclusive, reverse, dtype, axis):  # type: ignore[no-untyped-def]
    node = helper.make_node("CumSum", ["x", "a"], ["y"], exclusive=exclusive, reverse=reverse)
    check(node, {"x": ties(3, 6, dtype=dtype)}, inits={"a": np.array(axis, np.int64)}, opset=14)


def test_cumsum_defaults_and_int32_axis():  # type: ignore[no-untyped-def]
    check(
        helper.make_node("CumSum", ["x", "a"], ["y"]),
        {"x": RNG.standard_normal(9).astype(np.float32)},
        inits={"a": np.array(0, np.int32)},
        opset=11,
    )


@pytest.mark.parametrize("op", ["ReduceProd", "ReduceLogSum", "ReduceLogSumExp"])
@pytest.mark.parametrize("axes,keepdims", [([1], 1), ([0, -1], 0), (None, 1), (None, 0)])
def test_new_reductions(op, axes, keepdims):  # type: ignore[no-untyped-def]
    x = RNG.uniform(0.5, 1.5, (3, 4, 5)).astype(np.float32)
    if op == "ReduceLogSumExp":
        x = x * 40  # exp overflows float32 without the shift by the maximum
    inputs = ["x"] if axes is None else ["x", "axes"]
    inits = {} if axes is None else {"axes": np.array(axes, np.int64)}
    check(helper.make_node(op, inputs, ["y"], keepdims=keepdims), {"x": x}, inits=inits, opset=18)


@pytest.mark.parametrize(
    "op", ["ReduceProd", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "ReduceL1", "ReduceL2", "ReduceMean"]
)
def test_reductions_attribute_axes_and_noop(op):  # type: ignore[no-untyped-def]
    x = RNG.uniform(0.5, 1.5, (3, 4)).astype(np.float32)
    if op in ("ReduceSumSquare", "ReduceL1", "ReduceL2"):
        x = x - 1.0  # negative elements: the noop still squares / takes the absolute value
    check(helper.make_node(op, ["x"], ["y"], axes=[-1]), {"x": x}, opset=13)
    check(
        helper.make_node(op, ["x", "axes"], ["y"], noop_with_empty_axes=1),
        {"x": x},
        inits={"axes": np.array([], np.int64)},
        opset=18,
    )


def test_reduce_prod_int64():  # type: ignore[no-untyped-def]
    check(
        helper.make_node("ReduceProd", ["x"], ["y"], axes=[1], keepdims=0), {"x": ties(3, 5, dtype="int64")}, opset=13
    )


def test_default_schedules_and_tuning_features():  # type: ignore[no-untyped-def]
    """The multi-stage lowerings run under the default schedules, and the tuner's features
    cover every task they make."""
    from metasched.cost import FEATURE_NAMES, extract_features

    nodes = [
        helper.make_node("TopK", ["x", "k"], ["tv", "ti"]),
        helper.make_node("TopK", ["x", "k12"], ["rv", "ri"], largest=0),
        helper.make_node("ArgMin", ["x"], ["am"], axis=1, keepdims=0),
        helper.make_node("CumSum", ["x", "a"], ["cs"], exclusive=1),
        helper.make_node("ReduceProd", ["x"], ["rp"], axes=[0], keepdims=0),
        helper.make_node("Hardmax", ["x"], ["hm"]),
    ]
    inputs = {"x": ties(6, 20)}
    inits = {"k": np.array([3], np.int64), "k12": np.array([12], np.int64), "a": np.array(1, np.int64)}
    outputs = ["tv", "ti", "rv", "ri", "am", "cs", "rp", "hm"]
    model = make_model(nodes, inputs, outputs, inits, 13)
    want = ort_run(model, inputs)
    graph = msm.from_onnx(model)
    got = msm.compile(graph, threads=1).run(inputs)
    for name in outputs:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, err_msg=name)
    incomplete = FEATURE_NAMES.index("misc.features_incomplete")
    for task in msm.extract_tasks(graph):
        rows = extract_features(task.func, "llvm")
        assert np.isfinite(rows).all() and not rows[:, incomplete].any(), task.name
