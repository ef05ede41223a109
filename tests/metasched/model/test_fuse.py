"""Fusion groups (metasched/model/fuse.py): activations that read their input twice fuse into
the producer's epilogue, and the fused program still computes what onnxruntime computes."""

from __future__ import annotations

import re

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from model_testing import assert_close, make_model, ort_run  # noqa: E402
from onnx import helper  # noqa: E402

from metasched import model as msm  # noqa: E402
from metasched.model.fuse import partition  # noqa: E402

RNG = np.random.default_rng(0)


def r(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype("float32")


def _kernels(model) -> list[list[str]]:  # type: ignore[no-untyped-def]
    return [group.op_types for group in partition(msm.from_onnx(model)) if group.kind == "kernel"]


def _conv_then(activation: list, extra_outputs: tuple[str, ...] = ()):  # type: ignore[no-untyped-def]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), *activation]
    inits = {"w": r(16, 8, 3, 3), "b": r(16), "half": np.float32(0.5), "one": np.float32(1.0)}
    inits["root2"] = np.float32(np.sqrt(2.0))
    return make_model(nodes, {"x": r(1, 8, 6, 7)}, ["y", *extra_outputs], inits)


SILU = [helper.make_node("Sigmoid", ["c"], ["s"]), helper.make_node("Mul", ["c", "s"], ["y"])]
GELU = [
    helper.make_node("Div", ["c", "root2"], ["d"]),
    helper.make_node("Erf", ["d"], ["e"]),
    helper.make_node("Add", ["e", "one"], ["p"]),
    helper.make_node("Mul", ["c", "p"], ["q"]),
    helper.make_node("Mul", ["q", "half"], ["y"]),
]


@pytest.mark.parametrize("activation", [SILU, GELU], ids=["silu", "gelu"])
def test_an_activation_reading_its_input_twice_is_the_convolutions_epilogue(activation: list) -> None:
    model = _conv_then(activation)
    assert _kernels(model) == [["Conv", *[node.op_type for node in activation]]]
    inputs = {"x": r(1, 8, 6, 7)}
    want = ort_run(model, inputs)["y"]
    for layout in ("NHWC", "NCHW"):
        got = msm.compile(msm.from_onnx(model), threads=1, layout=layout).run(inputs)["y"]
        assert_close(got, want, name=f"{layout} y")


def test_a_value_read_outside_the_activation_is_not_fused_away() -> None:
    # the convolution's output is also a graph output: it must be written, so the SiLU stays
    # a kernel of its own
    model = _conv_then([*SILU, helper.make_node("Identity", ["c"], ["c_out"])], extra_outputs=("c_out",))
    kernels = _kernels(model)
    assert ["Conv"] in kernels and ["Sigmoid", "Mul"] in kernels, kernels
    inputs = {"x": r(1, 8, 6, 7)}
    want = ort_run(model, inputs)
    got = msm.compile(msm.from_onnx(model), threads=1).run(inputs)
    for name in ("y", "c_out"):
        assert_close(got[name], want[name], name=name)


def test_a_gate_broadcast_over_pixels_is_computed_once_per_channel() -> None:
    """Squeeze-and-excitation: ``x * sigmoid(conv(mean(x)))``. The gate (one sigmoid per
    channel) is a stage of its own in the group and stays one in the default schedule, instead
    of a sigmoid per pixel and channel inside the multiplication."""
    from metasched.model.fuse import lower_group
    from metasched.model.layout import for_target
    from metasched.space.default import default_candidate
    from tir.target import Target

    nodes = [
        helper.make_node("Conv", ["x", "w0"], ["a"], pads=[1, 1, 1, 1]),
        helper.make_node("ReduceMean", ["a"], ["m"], axes=[2, 3], keepdims=1),
        helper.make_node("Conv", ["m", "w", "b"], ["e"]),
        helper.make_node("Sigmoid", ["e"], ["g"]),
        helper.make_node("Mul", ["a", "g"], ["y"]),
    ]
    inits = {"w0": r(32, 8, 3, 3), "w": r(32, 32, 1, 1), "b": r(32)}
    model = make_model(nodes, {"x": r(1, 8, 12, 12)}, ["y"], inits)
    graph = for_target(msm.from_onnx(model), Target.parse("llvm"))
    (group,) = [g for g in partition(graph) if "Sigmoid" in g.op_types]
    func = lower_group(graph, group)
    candidate = default_candidate(func, "llvm")
    assert candidate is not None
    text = candidate.func.script()
    gates = [line for line in text.splitlines() if "T.sigmoid" in line]
    assert len(gates) == 1 and "out0" not in gates[0].split("=")[0], text
    inputs = {"x": r(1, 8, 12, 12)}
    want = ort_run(model, inputs)["y"]
    got = msm.compile(msm.from_onnx(model), threads=1).run(inputs)["y"]
    assert_close(got, want, name="y")


def test_a_depthwise_convolution_reads_its_padding_inline() -> None:
    """A 3x3 depthwise convolution reduces 9 elements per output (``LIGHT_REDUCTION``): its
    default schedule reads the input through the padding condition instead of a padding stage
    (a whole extra pass over memory), with one pixel per register tile and its window unrolled."""
    from metasched.model.fuse import lower_group
    from metasched.model.layout import for_target
    from metasched.space.default import default_candidate, light_reduction
    from tir.target import Target

    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], group=64, pads=[1, 1, 1, 1], strides=[2, 2])]
    model = make_model(nodes, {"x": r(1, 64, 20, 20)}, ["y"], {"w": r(64, 1, 3, 3), "b": r(64)})
    graph = for_target(msm.from_onnx(model), Target.parse("llvm"))
    (group,) = [g for g in partition(graph) if "Conv" in g.op_types]
    func = lower_group(graph, group)
    assert light_reduction(func)
    candidate = default_candidate(func, "llvm")
    assert candidate is not None
    assert "compute_inline" in {inst.kind for inst in candidate.trace.instructions}
    blocks = re.findall(r'T\.block\("(\w+)"\)', candidate.func.script())
    assert not any(name.endswith("_pad") for name in blocks), blocks
    inputs = {"x": r(1, 64, 20, 20)}
    want = ort_run(model, inputs)["y"]
    got = msm.compile(msm.from_onnx(model), threads=1).run(inputs)["y"]
    assert_close(got, want, name="y")


def test_identical_gates_with_other_node_names_are_one_task() -> None:
    """The gate's stage is named for what it is, not for its node: two squeeze-and-excitation
    blocks of one shape stay one task (weight 2) instead of two tasks to tune."""
    nodes = [helper.make_node("Conv", ["x", "w0"], ["a0"], pads=[1, 1, 1, 1])]
    source = "a0"
    for k in range(2):
        nodes += [
            helper.make_node("ReduceMean", [source], [f"m{k}"], axes=[2, 3], keepdims=1),
            helper.make_node("Conv", [f"m{k}", "w", "b"], [f"e{k}"]),
            helper.make_node("Sigmoid", [f"e{k}"], [f"g{k}"]),
            helper.make_node("Mul", [source, f"g{k}"], [f"s{k}"]),
        ]
        source = f"s{k}"
    nodes.append(helper.make_node("Identity", [source], ["y"]))
    inits = {"w0": r(32, 8, 3, 3), "w": r(32, 32, 1, 1), "b": r(32)}
    model = make_model(nodes, {"x": r(1, 8, 12, 12)}, ["y"], inits)
    gates = [task for task in msm.extract_tasks(msm.from_onnx(model)) if "sigmoid" in task.name]
    assert [task.weight for task in gates] == [2], [(task.name, task.weight) for task in gates]


def _scores_softmax(axis: int, mask: bool = False):  # type: ignore[no-untyped-def]
    nodes = [helper.make_node("MatMul", ["q", "k"], ["s"])]
    if mask:
        nodes.append(helper.make_node("Add", ["s", "m"], ["sm"]))
    nodes.append(helper.make_node("Softmax", ["sm" if mask else "s"], ["y"], axis=axis))
    inputs = {"q": r(1, 2, 30, 16), "k": r(1, 2, 16, 37)}
    return make_model(nodes, inputs, ["y"], {"m": r(1, 1, 1, 37)} if mask else {}), inputs


@pytest.mark.parametrize("mask", [False, True], ids=["scores", "masked"])
def test_a_softmax_over_the_last_axis_joins_the_scores_matmul(mask: bool) -> None:
    """Attention's scores are normalized per row tile in the matmul's kernel (the tiling's
    ``+rows`` sketch), not written out whole and read back by a softmax kernel."""
    model, inputs = _scores_softmax(-1, mask)
    assert _kernels(model) == [["MatMul", *(["Add"] if mask else []), "Softmax"]]
    from metasched.space.default import default_candidate
    from metasched.space.rules.multi_level_tiling import ROWS_SUFFIX

    (task,) = msm.extract_tasks(msm.from_onnx(model), "llvm")
    candidate = default_candidate(task.func, "llvm")
    assert candidate is not None
    assert any(str(inst.kwargs.get("ann_val", "")).endswith(ROWS_SUFFIX) for inst in candidate.trace.instructions)
    want = ort_run(model, inputs)["y"]
    for threads in (1, 2):
        assert_close(msm.compile(msm.from_onnx(model), threads=threads).run(inputs)["y"], want, name="y")


def test_a_softmax_over_another_axis_stays_a_kernel_of_its_own() -> None:
    model, inputs = _scores_softmax(2)
    assert _kernels(model) == [["MatMul"], ["Softmax"]]
    assert_close(msm.compile(msm.from_onnx(model), threads=1).run(inputs)["y"], ort_run(model, inputs)["y"], name="y")
