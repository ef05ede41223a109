"""Tensorized int8 matmul (M = N = K = 512, uint8 x int8 -> int32) on this CPU, side by side with

- the best plain schedule we wrote (no tensor intrinsic): B packed into 32-column panels
  (``cache_read`` + ``compute_at``), a 2 x 32 register tile vectorized over columns with int32
  accumulation, rows unrolled, outer rows ``parallel``;
- the tensorized schedule of examples/int8_matmul_x86.py (``x86_avx2_u7s8s32_dot_8x4``:
  ``vpmaddubsw`` + ``vpmaddwd``);
- onnxruntime's ``MatMulInteger`` (uint8 x int8 -> int32), the same computation in a library
  that ships hand-written AVX2 kernels.

Everything runs on ONE thread (our modules: ``set_num_threads(1)``; onnxruntime: intra- and
inter-op pools of 1). A holds 7-bit values (the intrinsic's contract, see tir/intrin/x86.py);
every result is checked against numpy before timing. Each side's time is the best of several
medians, taken in alternation, to damp the machine's noise.

Run: python benchmarks/int8_matmul_cpu.py      (a table, then one JSON line:
``speedup_vs_untensorized`` = plain time / tensorized time, ``ratio_vs_onnxruntime`` =
onnxruntime time / tensorized time; above 1 means the tensorized kernel is faster)
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from _harness import median_seconds, report

import tir

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from int8_matmul_x86 import make_int8_matmul, schedule_int8_matmul  # noqa: E402

N = 512
ROUNDS = 3


def schedule_plain(func: tir.PrimFunc, rows: int = 2, cols: int = 32, row_block: int = 128) -> tir.Schedule:
    """The untensorized schedule: packing, tiling, vectorizing, unrolling, parallel rows."""
    sch = tir.Schedule(func)
    block = sch.get_block("C")
    i, j, k = sch.get_loops(block)
    i_block, i_group, i_row = sch.split(i, [None, row_block // rows, rows])
    j_panel, j_col = sch.split(j, [None, cols])
    sch.reorder(i_block, j_panel, i_group, k, i_row, j_col)
    packed = sch.cache_read(block, 2, "global")
    sch.compute_at(packed, j_panel)
    init = sch.decompose_reduction(block, i_block)
    sch.vectorize(j_col)
    sch.unroll(i_row)
    sch.vectorize(sch.get_loops(packed)[-1])
    sch.vectorize(sch.get_loops(init)[-1])
    sch.parallel(i_block)
    return sch


def onnxruntime_matmul_integer(n: int):  # type: ignore[no-untyped-def]
    """A one-node ONNX model (MatMulInteger, uint8 x int8 -> int32) in a 1-thread session."""
    try:
        import onnx
        import onnxruntime
        from onnx import TensorProto, helper
    except ImportError as exc:  # pragma: no cover - the bench extra installs them
        raise SystemExit("this benchmark needs onnx and onnxruntime: pip install -e '.[bench]'") from exc
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["A", "B"], ["C"])],
        "int8_matmul",
        [
            helper.make_tensor_value_info("A", TensorProto.UINT8, [n, n]),
            helper.make_tensor_value_info("B", TensorProto.INT8, [n, n]),
        ],
        [helper.make_tensor_value_info("C", TensorProto.INT32, [n, n])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=10)
    onnx.checker.check_model(model)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def main() -> None:
    rng = np.random.default_rng(0)
    a = rng.integers(0, 128, (N, N), dtype=np.uint8)
    b = rng.integers(-128, 128, (N, N), dtype=np.int8)
    want = a.astype(np.int32) @ b.astype(np.int32)

    modules = {
        "tensorized": tir.build(schedule_int8_matmul(make_int8_matmul(N, N, N, "int8_tensorized")).func, "llvm"),
        "untensorized": tir.build(schedule_plain(make_int8_matmul(N, N, N, "int8_plain")).func, "llvm"),
    }
    for name, module in modules.items():
        module.set_num_threads(1)
        c = np.zeros((N, N), np.int32)
        module(a, b, c)
        np.testing.assert_array_equal(c, want, err_msg=name)
    session = onnxruntime_matmul_integer(N)
    feeds = {"A": a, "B": b}
    np.testing.assert_array_equal(session.run(None, feeds)[0], want, err_msg="onnxruntime")

    c = np.zeros((N, N), np.int32)
    times: dict[str, list[float]] = {"tensorized": [], "untensorized": [], "onnxruntime": []}
    for _ in range(ROUNDS):
        for name, module in modules.items():
            times[name].append(module.time(a, b, c, repeat=10))
        times["onnxruntime"].append(median_seconds(lambda: session.run(None, feeds), repeat=10))
    best = {name: min(samples) for name, samples in times.items()}

    ops = 2.0 * N**3
    print(f"int8 matmul {N}^3, uint8 x int8 -> int32, 1 thread")
    for name, seconds in best.items():
        print(f"  {name:>13}: {seconds * 1e3:7.3f} ms  {ops / seconds / 1e9:6.1f} GOP/s")
    report(
        {
            "speedup_vs_untensorized": best["untensorized"] / best["tensorized"],
            "ratio_vs_onnxruntime": best["onnxruntime"] / best["tensorized"],
            "tensorized_ms": best["tensorized"] * 1e3,
            "untensorized_ms": best["untensorized"] * 1e3,
            "onnxruntime_ms": best["onnxruntime"] * 1e3,
        }
    )


if __name__ == "__main__":
    main()
