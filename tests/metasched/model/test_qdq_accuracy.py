"""QDQ models against onnxruntime where its integer arithmetic depends on the CPU.

onnxruntime's uint8 x int8 kernels (QLinearConv, QGemm, QLinearMatMul: what its QDQ fusion runs)
sum the products exactly with VNNI, but with ``vpmaddubsw`` on x86-64 without it (AVX2, AVX512
without VNNI): each pair of adjacent products saturated to int16 first. A quantized ResNet-50
on such a CPU came out 0.2% of its logits more than one step from onnxruntime's and up to 13
steps apart in its last residual block (``metasched.model.qdq``). These tests hold the
``int16_pairs`` accumulation to a numpy model of MLAS's order, this machine's onnxruntime to
the rule that picks it, and -- where ``qemu-x86_64`` can run onnxruntime on a CPU without VNNI
-- the accumulation to onnxruntime's own results there, bit for bit.
"""

from __future__ import annotations

import platform
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from model_testing import make_model  # noqa: E402
from onnx import helper  # noqa: E402

from metasched import model as msm  # noqa: E402
from metasched.model.qdq import INT16_PAIRS_ENV, QCONV, QMATMUL, onnxruntime_saturates_pairs  # noqa: E402

# ---------------------------------------------------------------- onnxruntime's arithmetic in numpy


def _pair_sum(products: np.ndarray) -> np.ndarray:
    """``sum_j saturate_int16(p[2j] + p[2j+1])`` over the last axis (an odd last one with 0)."""
    if products.shape[-1] % 2:
        products = np.concatenate([products, np.zeros((*products.shape[:-1], 1), products.dtype)], -1)
    return np.clip(products[..., 0::2] + products[..., 1::2], -32768, 32767).sum(-1)


def _conv_acc(x, w, x_zero, pads, strides, group, pairs):  # type: ignore[no-untyped-def]
    """The raw int32 ``sum x * w`` of a 2-D convolution (padding reads ``x_zero``); ``pairs``:
    MLAS's ``vpmaddubsw`` kernels, K in NHWC im2col order (kernel position, channel) per group.
    Depthwise convolutions stay exact (MLAS's depthwise kernels widen)."""
    n, c, h, wd = x.shape
    m, cpg, kh, kw = w.shape
    xp = np.full((n, c, h + pads[0] + pads[2], wd + pads[1] + pads[3]), x_zero, np.int64)
    xp[:, :, pads[0] : pads[0] + h, pads[1] : pads[1] + wd] = x
    oh, ow = (xp.shape[2] - kh) // strides[0] + 1, (xp.shape[3] - kw) // strides[1] + 1
    mpg = m // group
    out = np.zeros((n, m, oh, ow), np.int64)
    for g in range(group):
        cols = np.empty((n, oh, ow, kh, kw, cpg), np.int64)
        for i in range(kh):
            for j in range(kw):
                window = xp[
                    :,
                    g * cpg : (g + 1) * cpg,
                    i : i + strides[0] * oh : strides[0],
                    j : j + strides[1] * ow : strides[1],
                ]
                cols[:, :, :, i, j, :] = window.transpose(0, 2, 3, 1)
        weights = w[g * mpg : (g + 1) * mpg].astype(np.int64).transpose(0, 2, 3, 1).reshape(mpg, -1)
        products = cols.reshape(n, oh, ow, 1, -1) * weights
        depthwise = cpg == 1 and mpg == 1
        acc = _pair_sum(products) if pairs and not depthwise else products.sum(-1)
        out[:, g * mpg : (g + 1) * mpg] = acc.transpose(0, 3, 1, 2)
    return out


def _requantize(acc, scale, y_zero):  # type: ignore[no-untyped-def]
    """``y_zero`` a numpy uint8 or int8 scalar: the output's type."""
    info = np.iinfo(y_zero.dtype)
    return np.clip(np.rint(acc.astype(np.float32) * scale) + int(y_zero), info.min, info.max).astype(y_zero.dtype)


# ---------------------------------------------------------------- small QDQ graphs that saturate

RNG = np.random.default_rng(11)
SX, SW, X_ZERO, Y_ZERO = np.float32(0.02), np.float32(0.004), 7, 128


def _activations(shape, signed):  # type: ignore[no-untyped-def]
    """Activations near the top of their range (Relu outputs), uint8 120..255 or int8 -8..127,
    their zero point, the output's zero point (the same type) and the shift onnxruntime's uint8
    kernels add to int8 activations (128)."""
    if signed:
        return RNG.integers(-8, 128, shape).astype(np.int8), np.int8(X_ZERO), np.int8(0), 128
    return RNG.integers(120, 256, shape).astype(np.uint8), np.uint8(X_ZERO), np.uint8(Y_ZERO), 0


def _activation_stage(x, signed):  # type: ignore[no-untyped-def]
    """The nodes that give the dequantized activation ``xf`` and the feeds: a uint8 graph input
    read by a DequantizeLinear, or (``signed``) a float input quantized to ``x``'s int8 values
    by a QuantizeLinear first, as ``quantize_static`` writes int8 activations (onnxruntime turns
    such a pair into uint8 on CPUs without VNNI; an int8 graph input it keeps)."""
    if not signed:
        return [helper.make_node("DequantizeLinear", ["x", "sx", "zx"], ["xf"])], {"x": x}
    exact = ((x.astype(np.float32) - np.float32(X_ZERO)) * SX).astype(np.float32)
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xf"]),
    ]
    return nodes, {"x": exact}


def _output_stage(signed, sy, y_zero):  # type: ignore[no-untyped-def]
    """The nodes from the product ``c`` to the output ``y`` and what turns the expected quantized
    output into ``y``: a QuantizeLinear, and (``signed``) a DequantizeLinear after it: onnxruntime
    fuses an int8 pattern into its integer kernel only when both its ends become uint8."""
    nodes = [helper.make_node("QuantizeLinear", ["c", "sy", "zy"], ["yq" if signed else "y"])]
    if not signed:
        return nodes, lambda q: q
    nodes.append(helper.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["y"]))
    return nodes, lambda q: ((q.astype(np.float32) - np.float32(y_zero)) * sy).astype(np.float32)


def _qdq_conv(channels, outputs, kernel, group=1, size=9, pads=(1, 1, 1, 1), strides=(1, 1), signed=False):  # type: ignore[no-untyped-def]
    """uint8 (or ``signed``: int8) x -> DQ -> Conv(DQ(int8 W per channel)) -> Q -> DQ: the
    output scale set so the exact result spans the output's range.
    Returns (model, feeds, expected(pairs) -> the output ``y``: uint8, or float when ``signed``)."""
    w = RNG.integers(-127, 128, (outputs, channels // group, kernel, kernel)).astype(np.int8)
    x, x_zero, y_zero, shift = _activations((1, channels, size, size), signed)
    sw = np.full(outputs, SW, np.float32)

    def accumulate(pairs: bool) -> np.ndarray:
        by = shift if pairs else 0
        acc = _conv_acc(x.astype(np.int64) + by, w, X_ZERO + by, pads, strides, group, pairs)
        return acc - (X_ZERO + by) * w.astype(np.int64).reshape(outputs, -1).sum(1)[None, :, None, None]

    sy = np.float32(SX * SW * np.abs(accumulate(False)).max() / 120)
    scale = (SX * sw / sy).astype(np.float32)[None, :, None, None]
    inits = {"sx": SX, "zx": x_zero, "w": w, "sw": sw, "zw": np.zeros(outputs, np.int8)}
    inits |= {"sy": sy, "zy": y_zero}
    nodes, feeds = _activation_stage(x, signed)
    nodes += [
        helper.make_node("DequantizeLinear", ["w", "sw", "zw"], ["wf"], axis=0),
        helper.make_node("Conv", ["xf", "wf"], ["c"], group=group, pads=list(pads), strides=list(strides)),
    ]
    tail, output = _output_stage(signed, sy, y_zero)
    model = make_model(nodes + tail, feeds, ["y"], inits)
    return model, feeds, lambda pairs: output(_requantize(accumulate(pairs), scale, y_zero))


def _qdq_matmul(rows, depth, cols, gemm=False, signed=False):  # type: ignore[no-untyped-def]
    """The same for MatMul (3-D activations) or Gemm (transB) with an int8 weight per column."""
    w = RNG.integers(-127, 128, (depth, cols)).astype(np.int8)
    x, x_zero, y_zero, shift = _activations((2, rows, depth) if not gemm else (rows, depth), signed)
    sw = np.full(cols, SW, np.float32)

    def accumulate(pairs: bool) -> np.ndarray:
        by = shift if pairs else 0
        products = (x.astype(np.int64) + by)[..., None, :] * w.T.astype(np.int64)
        acc = _pair_sum(products) if pairs else products.sum(-1)
        return acc - (X_ZERO + by) * w.astype(np.int64).sum(0)

    sy = np.float32(SX * SW * np.abs(accumulate(False)).max() / 120)
    inits = {"sx": SX, "zx": x_zero, "w": w.T.copy() if gemm else w, "sw": sw, "zw": np.zeros(cols, np.int8)}
    inits |= {"sy": sy, "zy": y_zero}
    product = (
        helper.make_node("Gemm", ["xf", "wf"], ["c"], transB=1)
        if gemm
        else helper.make_node("MatMul", ["xf", "wf"], ["c"])
    )
    nodes, feeds = _activation_stage(x, signed)
    nodes += [
        helper.make_node("DequantizeLinear", ["w", "sw", "zw"], ["wf"], axis=0 if gemm else 1),
        product,
    ]
    tail, output = _output_stage(signed, sy, y_zero)
    model = make_model(nodes + tail, feeds, ["y"], inits)
    scale = (SX * sw / sy).astype(np.float32)
    return model, feeds, lambda pairs: output(_requantize(accumulate(pairs), scale, y_zero))


CASES = {
    # MlasConvSym (channels a multiple of 4): pairs of adjacent channels at one kernel position
    "conv3x3": lambda: _qdq_conv(32, 16, 3),
    "conv3x3_stride2": lambda: _qdq_conv(16, 16, 3, strides=(2, 2)),
    "conv1x1": lambda: _qdq_conv(64, 16, 1, pads=(0, 0, 0, 0)),
    # im2col + QGEMM: a ResNet stem, three channels: pairs straddle kernel positions, K odd
    "stem7x7": lambda: _qdq_conv(3, 16, 7, size=16, pads=(3, 3, 3, 3), strides=(2, 2)),
    "conv_c5": lambda: _qdq_conv(5, 8, 3),
    "grouped": lambda: _qdq_conv(16, 16, 3, group=2),
    "multiplier2": lambda: _qdq_conv(8, 16, 3, group=8),
    # depthwise: exact on every CPU
    "depthwise": lambda: _qdq_conv(16, 16, 3, group=16),
    "matmul_odd_k": lambda: _qdq_matmul(3, 63, 17),
    "gemm": lambda: _qdq_matmul(1, 96, 24, gemm=True),
    # int8 activations (quantize_static's default): onnxruntime adds 128 and runs the uint8 kernels
    "conv3x3_s8": lambda: _qdq_conv(32, 16, 3, signed=True),
    "stem7x7_s8": lambda: _qdq_conv(3, 16, 7, size=16, pads=(3, 3, 3, 3), strides=(2, 2), signed=True),
    "matmul_s8": lambda: _qdq_matmul(3, 63, 17, signed=True),
}


def _ours(model, feeds):  # type: ignore[no-untyped-def]
    graph = msm.from_onnx(model)
    fused = [n for n in graph.nodes if n.op_type in (QCONV, QMATMUL)]
    assert len(fused) == 1, [n.op_type for n in graph.nodes]
    return msm.compile(graph, threads=1).run(feeds)["y"], fused[0].attrs


# ---------------------------------------------------------------- the tests


@pytest.mark.parametrize("name", list(CASES))
def test_int16_pairs_sum_as_onnxruntime_without_vnni(name, monkeypatch):  # type: ignore[no-untyped-def]
    """Forced on, the fused kernels saturate the pair sums in MLAS's order; forced off, exact."""
    model, feeds, expected = CASES[name]()
    assert not np.array_equal(expected(True), expected(False)) or name == "depthwise"
    monkeypatch.setenv(INT16_PAIRS_ENV, "1")
    got, attrs = _ours(model, feeds)
    assert bool(attrs.get("int16_pairs")) == (name != "depthwise")
    np.testing.assert_array_equal(got, expected(True))
    monkeypatch.setenv(INT16_PAIRS_ENV, "0")
    got, attrs = _ours(model, feeds)
    assert "int16_pairs" not in attrs
    np.testing.assert_array_equal(got, expected(False))


def test_the_rule_follows_mlas_kernel_choice():  # type: ignore[no-untyped-def]
    """vpmaddubsw on x86-64 with AVX2 (or AVX512) and no VNNI; exact elsewhere."""
    saturating = ["llvm -mcpu=haswell", "llvm -mcpu=znver3", "llvm -mcpu=skylake-avx512", "llvm -mcpu=x86-64-v3"]
    exact = ["llvm -mcpu=cascadelake", "llvm -mcpu=icelake-server", "llvm -mcpu=alderlake", "llvm -mcpu=znver4"]
    exact += ["llvm -mcpu=x86-64", "llvm -mtriple=aarch64-linux-gnu"]
    assert [onnxruntime_saturates_pairs(t) for t in saturating] == [True] * len(saturating)
    assert [onnxruntime_saturates_pairs(t) for t in exact] == [False] * len(exact)


def test_default_is_exact_and_the_rule_matches_this_machines_onnxruntime(monkeypatch):  # type: ignore[no-untyped-def]
    """Unforced, the sums are exact (ONNX's arithmetic); with the pairs turned on where
    ``onnxruntime_saturates_pairs()`` says so, the outputs are onnxruntime's bit for bit
    whichever CPU runs the test."""
    monkeypatch.delenv(INT16_PAIRS_ENV, raising=False)
    saturates = onnxruntime_saturates_pairs()
    for name in ("conv3x3", "stem7x7", "gemm", "conv3x3_s8", "matmul_s8"):
        model, feeds, expected = CASES[name]()
        got, attrs = _ours(model, feeds)
        assert "int16_pairs" not in attrs
        np.testing.assert_array_equal(got, expected(False), err_msg=f"{name}: exact by default")
        want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
        np.testing.assert_array_equal(want, expected(saturates), err_msg=f"{name}: the rule")
        monkeypatch.setenv(INT16_PAIRS_ENV, "1" if saturates else "0")
        got, _ = _ours(model, feeds)
        monkeypatch.delenv(INT16_PAIRS_ENV)
        np.testing.assert_array_equal(got, want, err_msg=name)


_ORT_SCRIPT = textwrap.dedent(
    """
    import sys
    import numpy as np
    import onnxruntime as ort

    out = {}
    for k, path in enumerate(sys.argv[2:]):
        feeds = dict(np.load(path + ".npz"))
        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        out[str(k)] = session.run(None, feeds)[0]
    np.savez(sys.argv[1], **out)
    """
)


def test_onnxruntime_on_a_cpu_without_vnni_under_qemu(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """onnxruntime itself, on qemu's AVX2 CPU (``-cpu max``: AVX2, no VNNI, no AVX512), against
    our int16 pairs: equal bit for bit (and different from the exact sums)."""
    qemu = shutil.which("qemu-x86_64")
    if qemu is None or platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("needs qemu-x86_64 on an x86-64 machine")
    names = ["conv3x3", "stem7x7", "multiplier2", "depthwise", "matmul_odd_k", "gemm"]
    built = {name: CASES[name]() for name in names}
    paths = []
    for name, (model, feeds, _) in built.items():
        path = tmp_path / f"{name}.onnx"
        onnx.save(model, str(path))
        np.savez(str(path) + ".npz", **feeds)
        paths.append(str(path))
    (tmp_path / "run.py").write_text(_ORT_SCRIPT)
    result = tmp_path / "out.npz"
    done = subprocess.run(
        [qemu, "-cpu", "max", sys.executable, str(tmp_path / "run.py"), str(result), *paths],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode != 0:
        pytest.skip(f"onnxruntime does not run under qemu-x86_64: {done.stderr[-300:]}")
    want = dict(np.load(result))
    if np.array_equal(want["0"], built["conv3x3"][2](False)):
        pytest.skip("qemu's CPU has VNNI here: onnxruntime sums exactly")
    monkeypatch.setenv(INT16_PAIRS_ENV, "1")
    for k, (name, (model, feeds, expected)) in enumerate(built.items()):
        got, _ = _ours(model, feeds)
        np.testing.assert_array_equal(want[str(k)], expected(True), err_msg=f"{name}: onnxruntime vs numpy")
        np.testing.assert_array_equal(got, want[str(k)], err_msg=name)
