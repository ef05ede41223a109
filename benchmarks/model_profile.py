"""Where a compiled model loses to onnxruntime: kernel time per output shape, side by side.

Our compiled model's kernels (``CompiledModel.profile``: the median of each kernel call) and
onnxruntime's nodes (its session profiler, the median over the runs after the first) are summed
per output shape -- the sorted dimensions, so NHWC and NCHW outputs of one layer meet, and a
fused group (conv + bias + relu + residual add) meets the nodes onnxruntime ran for it -- and
printed slowest first with the ratio (onnxruntime's time / ours; below 1: we are slower).

    python benchmarks/model_profile.py [--model resnet50] [--database DIR] [--threads 2]

``--model`` is a light model of the onnx wheel (resnet50, densenet121, ...) with random weights,
``bert`` (the encoder of ``model_e2e.py``), or an ONNX file (a model zoo export, say:
``--model ~/.cache/tensorir-zoo/gpt2.dynamo.onnx --inputs ~/.cache/tensorir-zoo/gpt2.inputs.npz``;
without ``--inputs``, random inputs of the declared shapes). Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

# The model tests' helpers (bert_model: the BERT-style encoder).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "metasched"))


def _our_kernels(compiled, feeds, repeat: int) -> dict[tuple[int, ...], float]:  # type: ignore[no-untyped-def]
    """Seconds per sorted output shape (a kernel's last output tensor)."""
    tensors = compiled.plan.tensors
    shape_of = {
        step.group: tuple(sorted(int(d) for d in tensors[step.args[-1]].shape)) for step in compiled.plan.calls
    }
    totals: dict[tuple[int, ...], float] = collections.defaultdict(float)
    for row in compiled.profile(feeds, repeat=repeat):
        totals[shape_of[row.group]] += row.seconds
    return totals


def _ort_nodes(model, feeds, threads: int, repeat: int) -> tuple[dict[tuple[int, ...], float], dict[tuple, str]]:  # type: ignore[no-untyped-def]
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.enable_profiling = True
    with tempfile.TemporaryDirectory(prefix="ort-profile-") as scratch:
        options.profile_file_prefix = os.path.join(scratch, "profile")
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        for _ in range(repeat + 1):
            session.run(None, feeds)
        with open(session.end_profiling()) as file:
            events = json.load(file)
    durations: dict[str, list[float]] = collections.defaultdict(list)
    shapes: dict[str, tuple[int, ...]] = {}
    kinds: dict[str, str] = {}
    for event in events:
        if event.get("cat") != "Node" or not event["name"].endswith("_kernel_time"):
            continue
        node = event["name"][: -len("_kernel_time")]
        durations[node].append(event["dur"] * 1e-6)
        outputs = event["args"].get("output_type_shape") or [{}]
        dims = next(iter(outputs[0].values()), [])
        shapes[node] = tuple(sorted(int(d) for d in dims))
        kinds[node] = event["args"].get("op_name", "?")
    totals: dict[tuple[int, ...], float] = collections.defaultdict(float)
    ops: dict[tuple, set[str]] = collections.defaultdict(set)
    for node, seconds in durations.items():
        totals[shapes[node]] += float(np.median(seconds[1:] or seconds))  # the first run is cold
        ops[shapes[node]].add(kinds[node])
    return totals, {shape: "+".join(sorted(names)) for shape, names in ops.items()}


def _file_feeds(model, inputs: str | None, rng: np.random.Generator) -> dict[str, np.ndarray]:  # type: ignore[no-untyped-def]
    """The file's inputs: from ``inputs`` (an .npz, in input order) or random of declared shapes."""
    from onnx import helper

    initializers = {init.name for init in model.graph.initializer}
    declared = [value for value in model.graph.input if value.name not in initializers]
    if inputs is not None:
        arrays = list(np.load(inputs).values())
        if len(arrays) != len(declared):
            raise SystemExit(f"{inputs} holds {len(arrays)} arrays, the model takes {len(declared)} inputs")
        return {value.name: array for value, array in zip(declared, arrays, strict=True)}
    feeds = {}
    for value in declared:
        tensor = value.type.tensor_type
        shape = [d.dim_value if d.dim_value > 0 else 1 for d in tensor.shape.dim]
        dtype = helper.tensor_dtype_to_np_dtype(tensor.elem_type)
        if np.issubdtype(dtype, np.integer):
            feeds[value.name] = rng.integers(0, 100, shape).astype(dtype)
        else:
            feeds[value.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def main() -> None:
    import onnx
    from bert_model import bert_encoder

    from metasched import model as msm
    from metasched.cli.demo_model import light_model_path, randomize_weights

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--database", default=None, help="a tuning database (default schedules without)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--inputs", default=None, help="an .npz of the inputs, in the file's input order")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    if args.model.endswith(".onnx"):
        model = onnx.load(args.model)
        graph = msm.from_onnx(model)
        feeds = _file_feeds(model, args.inputs, rng)
    elif args.model == "bert":
        model = bert_encoder(seq=128, hidden=768, heads=12, layers=2)
        feeds = {"x": rng.standard_normal((1, 128, 768)).astype(np.float32)}
        graph = msm.from_onnx(model)
    else:
        model = randomize_weights(onnx.load(light_model_path(args.model)))
        graph = msm.from_onnx(model)
        shape = (1, 3, 224, 224)
        feeds = {graph.inputs[0]: rng.standard_normal(shape).astype(np.float32)}
    compiled = msm.compile(graph, threads=args.threads, database=args.database)
    ours = _our_kernels(compiled, feeds, args.repeat)
    theirs, ops = _ort_nodes(model, feeds, args.threads, args.repeat)
    rows = []
    for shape in sorted(set(ours) | set(theirs), key=lambda s: -ours.get(s, 0.0)):
        mine, peer = ours.get(shape, 0.0), theirs.get(shape, 0.0)
        rows.append(
            {
                "output": list(shape),
                "onnxruntime_ops": ops.get(shape, ""),
                "ours_ms": round(mine * 1e3, 3),
                "onnxruntime_ms": round(peer * 1e3, 3),
                "ratio": round(peer / mine, 3) if mine and peer else None,
            }
        )
    print(f"{os.path.basename(args.model)}, {args.threads} thread(s), {compiled.report.summary()}")
    print(f"{'output (sorted dims)':24s} {'ours ms':>9s} {'ort ms':>9s} {'ratio':>6s}  onnxruntime ops")
    for row in rows:
        ratio = f"{row['ratio']:6.3f}" if row["ratio"] is not None else "     -"
        print(
            f"{str(tuple(row['output'])):24s} {row['ours_ms']:9.3f} {row['onnxruntime_ms']:9.3f} {ratio}  "
            f"{row['onnxruntime_ops']}"
        )
    mine, peer = sum(ours.values()), sum(theirs.values())
    print(f"{'all kernels':24s} {mine * 1e3:9.3f} {peer * 1e3:9.3f} {peer / mine:6.3f}")
    print(
        json.dumps(
            {
                "benchmark": "model_profile",
                "model": args.model,
                "threads": args.threads,
                "ours_ms": round(mine * 1e3, 3),
                "onnxruntime_ms": round(peer * 1e3, 3),
                "shapes": rows,
            }
        )
    )


if __name__ == "__main__":
    main()
