"""The public model zoo: real architectures a user exports from PyTorch, checked and timed
against onnxruntime.

Every model is built with random weights (normalization statistics and gains randomized, no
zero-initialized head, so no output is trivially constant), exported with both PyTorch
exporters where each works -- ``torch.onnx.export(..., dynamo=True)`` (today's default, at its
default opset) and ``dynamo=False`` (the legacy TorchScript exporter, opset 17) -- and cached. The
quantized entries are onnxruntime's own quantizer's QDQ models (``quantize_static``: uint8
activations, int8 per-channel weights) of the legacy float exports. For each model file:

- import (``metasched.model.from_onnx``) and compile with default schedules; compile seconds;
- compare with onnxruntime on the same random inputs: float models by
  ``max |ours - ort| / max |ort|`` (passes below 1e-4), quantized ones by the share of outputs
  within one quantization step of onnxruntime's (passes at 99.9%);
- ``--time``: latency against onnxruntime at 1 and 2 threads, each runtime timed in a process of
  its own (onnxruntime's spinning threads slow whatever runs after them in one process): the
  median of ``--repeat`` runs, the best of ``--processes`` processes;
- ``--tune-minutes N``: ``metasched.tune`` over the model's tasks for N minutes (database in the
  cache), compiled from it, checked and timed again.

    bash scripts/install.sh --zoo                     # torch, torchvision, transformers, onnxscript
    python3 benchmarks/model_zoo.py                   # every model, both exporters: import, compile, compare
    python3 benchmarks/model_zoo.py --models gpt2,vit_b_32 --exporters dynamo --time
    python3 benchmarks/model_zoo.py --models bert --tune-minutes 10 --time

Prints a table, writes a plot of the ratios (``--plot``, default ``model_zoo.png`` in the cache
when timing), and ends with one JSON line. Each model runs in a subprocess of its own: one that
crashes or runs out of memory is a row that says so, not the end of the run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# The model tests' helpers (model_testing: onnxruntime references).
sys.path.insert(0, str(REPO / "tests" / "metasched"))
DEFAULT_CACHE = Path(os.environ.get("TENSORIR_ZOO_CACHE", Path.home() / ".cache" / "tensorir-zoo"))
#: Float models pass below this ``max |ours - ort| / max |ort|``.
FLOAT_TOLERANCE = 1e-4
#: Quantized models pass with at least this share of outputs within one step of onnxruntime's.
QUANT_SHARE = 0.999
LEGACY_OPSET = 17


# ---------------------------------------------------------------- the zoo


@dataclass(frozen=True)
class ZooModel:
    name: str
    family: str  # "cnn", "transformer", "audio"
    build: Callable[[], tuple[Any, dict[str, Any]]]  # -> (torch module, named example inputs)
    quantize: bool = False  # also a QDQ model of the legacy export


def _randomize(module: Any, seed: int) -> Any:
    """Random weights that keep every output informative: normalization statistics and gains
    drawn away from their identity values, zero-initialized tensors (heads, biases) drawn too."""
    import torch

    generator = torch.Generator().manual_seed(seed)

    def uniform(tensor: Any, low: float, high: float) -> None:
        tensor.copy_(low + (high - low) * torch.rand(tensor.shape, generator=generator, dtype=tensor.dtype))

    def normal(tensor: Any, std: float) -> None:
        tensor.copy_(std * torch.randn(tensor.shape, generator=generator, dtype=tensor.dtype))

    with torch.no_grad():
        for sub in module.modules():
            if isinstance(sub, torch.nn.modules.batchnorm._BatchNorm) and sub.running_mean is not None:
                normal(sub.running_mean, 0.1)
                uniform(sub.running_var, 0.5, 1.5)
        for name, parameter in module.named_parameters():
            if not parameter.dtype.is_floating_point:
                continue
            leaf = name.rsplit(".", 1)[-1]
            is_norm = parameter.dim() == 1 and ("norm" in name.lower() or "ln" in name.lower() or "bn" in name)
            if is_norm and leaf == "weight":
                uniform(parameter, 0.5, 1.5)
            elif is_norm and leaf == "bias":
                normal(parameter, 0.1)
            elif parameter.numel() > 1 and float(parameter.std()) == 0.0:
                # Constant: a zero-initialized head or bias, a layer scale of 1e-6 (ConvNeXt).
                fan_in = parameter[0].numel() if parameter.dim() > 1 else 1
                normal(parameter, (1.0 / fan_in) ** 0.5 if parameter.dim() > 1 else 0.02)
    return module.eval()


class _Outputs:
    """A transformers model wrapped to return plain tensors (the exporters want tensors)."""

    @staticmethod
    def wrap(model: Any, field: str) -> Any:
        import torch

        class Wrapped(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.inner = model

            def forward(self, *args: Any) -> Any:
                return getattr(self.inner(*args), field)

        return Wrapped().eval()


def import_torchvision() -> Any:
    """torchvision, also where its compiled operators do not load: PyPI's torchvision is built
    against CUDA torch, and with a CPU-only torch its extension (nms, roi_align: none of which
    the zoo's models use) fails to load, and registering their fake kernels then stops the
    import. Those registrations are let fail quietly; nothing else changes."""
    import torch
    import torch.library

    if "torchvision" in sys.modules:
        return sys.modules["torchvision"]
    register_fake = torch.library.register_fake

    def tolerant(op: Any, *args: Any, **kwargs: Any) -> Any:
        if not (isinstance(op, str) and op.startswith("torchvision::")):
            return register_fake(op, *args, **kwargs)
        try:
            made = register_fake(op, *args, **kwargs)
        except RuntimeError:
            return lambda fn: fn
        if not callable(made):
            return made

        def apply(fn: Any) -> Any:
            try:
                return made(fn)
            except RuntimeError:
                return fn

        return apply

    torch.library.register_fake = tolerant
    try:
        import torchvision
    finally:
        torch.library.register_fake = register_fake
    return torchvision


def _vision(name: str, size: int = 224, **kwargs: Any) -> Callable[[], tuple[Any, dict[str, Any]]]:
    def build() -> tuple[Any, dict[str, Any]]:
        import torch

        torchvision = import_torchvision()

        model = getattr(torchvision.models, name)(weights=None, **kwargs)
        return _randomize(model, 0), {"x": torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(1))}

    return build


def _tokens(vocab: int, length: int) -> Any:
    import torch

    return torch.randint(0, vocab, (1, length), generator=torch.Generator().manual_seed(1))


def _bert() -> tuple[Any, dict[str, Any]]:
    from transformers import BertConfig, BertModel

    config = BertConfig(num_hidden_layers=6)
    return _Outputs.wrap(_randomize(BertModel(config), 0), "last_hidden_state"), {
        "input_ids": _tokens(config.vocab_size, 128)
    }


def _distilbert() -> tuple[Any, dict[str, Any]]:
    from transformers import DistilBertConfig, DistilBertModel

    config = DistilBertConfig()
    return _Outputs.wrap(_randomize(DistilBertModel(config), 0), "last_hidden_state"), {
        "input_ids": _tokens(config.vocab_size, 128)
    }


def _roberta() -> tuple[Any, dict[str, Any]]:
    from transformers import RobertaConfig, RobertaModel

    config = RobertaConfig(num_hidden_layers=6)
    tokens = _tokens(config.vocab_size, 128)
    tokens[tokens == config.pad_token_id] = 5  # padding ids change position ids: keep them out
    return _Outputs.wrap(_randomize(RobertaModel(config), 0), "last_hidden_state"), {"input_ids": tokens}


def _gpt2() -> tuple[Any, dict[str, Any]]:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=6)
    return _Outputs.wrap(_randomize(GPT2LMHeadModel(config), 0), "logits"), {
        "input_ids": _tokens(config.vocab_size, 64)
    }


def _t5_encoder() -> tuple[Any, dict[str, Any]]:
    from transformers import T5Config, T5EncoderModel

    config = T5Config(d_model=256, d_ff=1024, d_kv=64, num_layers=4, num_heads=4)
    return _Outputs.wrap(_randomize(T5EncoderModel(config), 0), "last_hidden_state"), {
        "input_ids": _tokens(config.vocab_size, 64)
    }


def _whisper_encoder() -> tuple[Any, dict[str, Any]]:
    import torch
    from transformers import WhisperConfig, WhisperModel

    config = WhisperConfig(
        d_model=256,
        encoder_layers=2,
        encoder_attention_heads=4,
        encoder_ffn_dim=1024,
        decoder_layers=1,  # the encoder alone is exported; the config still checks the decoder's heads
        decoder_attention_heads=4,
        decoder_ffn_dim=1024,
        max_source_positions=750,
    )
    encoder = WhisperModel(config).get_encoder()
    features = torch.randn(1, config.num_mel_bins, 1500, generator=torch.Generator().manual_seed(1))
    return _Outputs.wrap(_randomize(encoder, 0), "last_hidden_state"), {"input_features": features}


def _wav2vec2() -> tuple[Any, dict[str, Any]]:
    import torch
    from transformers import Wav2Vec2Config, Wav2Vec2Model

    config = Wav2Vec2Config(hidden_size=256, num_hidden_layers=2, num_attention_heads=4, intermediate_size=1024)
    audio = torch.randn(1, 16000, generator=torch.Generator().manual_seed(1))
    return _Outputs.wrap(_randomize(Wav2Vec2Model(config), 0), "last_hidden_state"), {"input_values": audio}


ZOO = [
    ZooModel("resnet50", "cnn", _vision("resnet50"), quantize=True),
    ZooModel("mobilenet_v3_large", "cnn", _vision("mobilenet_v3_large"), quantize=True),
    ZooModel("efficientnet_b1", "cnn", _vision("efficientnet_b1", 240)),
    ZooModel("convnext_small", "cnn", _vision("convnext_small")),
    ZooModel("regnet_x_800mf", "cnn", _vision("regnet_x_800mf")),
    ZooModel("densenet169", "cnn", _vision("densenet169")),
    ZooModel("shufflenet_v2_x0_5", "cnn", _vision("shufflenet_v2_x0_5")),
    ZooModel("inception_v3", "cnn", _vision("inception_v3", 299, aux_logits=False, init_weights=True)),
    ZooModel("vit_b_32", "transformer", _vision("vit_b_32")),
    ZooModel("swin_t", "transformer", _vision("swin_t")),
    ZooModel("bert", "transformer", _bert),
    ZooModel("distilbert", "transformer", _distilbert),
    ZooModel("roberta", "transformer", _roberta),
    ZooModel("gpt2", "transformer", _gpt2),
    ZooModel("t5_encoder", "transformer", _t5_encoder),
    ZooModel("whisper_encoder", "audio", _whisper_encoder),
    ZooModel("wav2vec2", "audio", _wav2vec2),
]
BY_NAME = {model.name: model for model in ZOO}
EXPORTERS = ("dynamo", "legacy")


# ---------------------------------------------------------------- export (in a subprocess)


def model_path(cache: Path, name: str, exporter: str) -> Path:
    return cache / f"{name}.{exporter}.onnx"


def export(name: str, exporter: str, cache: Path) -> Path:
    """Export one zoo model (cached); ``exporter`` "dynamo", "legacy" or "qdq" (onnxruntime's
    quantizer on the legacy export). Raises with the exporter's own message when it fails."""
    import torch

    import_torchvision()  # before transformers, which imports it too
    path = model_path(cache, name, exporter)
    if path.exists():
        return path
    cache.mkdir(parents=True, exist_ok=True)
    if exporter == "qdq":
        return _quantize(name, cache)
    module, inputs = BY_NAME[name].build()
    partial = path.with_suffix(".partial.onnx")
    args = tuple(inputs.values())
    with torch.no_grad():
        if exporter == "dynamo":
            program = torch.onnx.export(module, args, dynamo=True, input_names=list(inputs), external_data=False)
            program.save(str(partial))
        else:
            torch.onnx.export(
                module, args, str(partial), dynamo=False, opset_version=LEGACY_OPSET, input_names=list(inputs)
            )
    _inline_external_data(partial)
    partial.replace(path)
    np_inputs = {key: value.numpy() for key, value in inputs.items()}
    import numpy as np

    np.savez(cache / f"{name}.inputs.npz", **np_inputs)
    return path


def _inline_external_data(path: Path) -> None:
    """One self-contained file (an exporter may write the weights beside it)."""
    import onnx

    model = onnx.load(str(path), load_external_data=True)
    onnx.save(model, str(path), save_as_external_data=False)
    for leftover in path.parent.glob(path.name + ".data"):
        leftover.unlink()


def _quantize(name: str, cache: Path) -> Path:
    import numpy as np
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    source = export(name, "legacy", cache)
    inputs = dict(np.load(cache / f"{name}.inputs.npz"))
    ((input_name, example),) = inputs.items()

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            rng = np.random.default_rng(7)
            self.batches = iter([{input_name: rng.standard_normal(example.shape).astype(np.float32)} for _ in range(8)])

        def get_next(self) -> dict[str, Any] | None:
            return next(self.batches, None)

    path = model_path(cache, name, "qdq")
    partial = path.with_suffix(".partial.onnx")
    quantize_static(
        str(source),
        str(partial),
        Reader(),
        quant_format=QuantFormat.QDQ,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
        per_channel=True,
    )
    partial.replace(path)
    return path


# ---------------------------------------------------------------- the checks (in a subprocess)


def _inputs(cache: Path, name: str) -> dict[str, Any]:
    import numpy as np

    return dict(np.load(cache / f"{name}.inputs.npz"))


def _feeds(path: Path, cache: Path, name: str) -> dict[str, Any]:
    """The example inputs under the file's own input names (exporters name them differently)."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    initializers = {init.name for init in model.graph.initializer}
    names = [value.name for value in model.graph.input if value.name not in initializers]
    return dict(zip(names, _inputs(cache, name).values(), strict=True))


def _output_steps(path: Path) -> dict[str, float]:
    """The quantization step of each output that a DequantizeLinear with a constant scale makes."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(path))
    constants = {init.name: numpy_helper.to_array(init) for init in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant":
            constants[node.output[0]] = numpy_helper.to_array(node.attribute[0].t)
    steps = {}
    producers = {out: node for node in model.graph.node for out in node.output}
    for output in model.graph.output:
        node = producers.get(output.name)
        if node is not None and node.op_type == "DequantizeLinear" and node.input[1] in constants:
            steps[output.name] = float(constants[node.input[1]].max())
    return steps


def check(name: str, exporter: str, cache: Path, database: str | None = None) -> dict[str, Any]:
    """Import, compile (default schedules, or ``database``'s), compare with onnxruntime."""
    import numpy as np
    from model_testing import ort_run

    from metasched import model as msm

    path = model_path(cache, name, exporter)
    feeds = _feeds(path, cache, name)
    row: dict[str, Any] = {"model": name, "exporter": exporter}
    if exporter == "qdq":
        from metasched.model.qdq import INT16_PAIRS_ENV, onnxruntime_saturates_pairs

        if onnxruntime_saturates_pairs() and INT16_PAIRS_ENV not in os.environ:
            # onnxruntime's uint8 x int8 kernels saturate pairs of products on this CPU (no
            # VNNI): compared with its arithmetic (metasched.model.qdq), and the row says so.
            os.environ[INT16_PAIRS_ENV] = "1"
            row["int16_pairs"] = True
    start = time.perf_counter()
    graph = msm.from_onnx(str(path))
    compiled = msm.compile(graph, threads=2, database=database)
    row["compile_s"] = round(time.perf_counter() - start, 2)
    got = compiled.run(feeds)
    import onnx

    want = ort_run(onnx.load(str(path)), feeds, threads=2)
    if exporter == "qdq":
        steps = _output_steps(path)
        shares = []
        for key, value in want.items():
            step = steps.get(key, float(np.abs(np.diff(np.unique(value))).min()) if value.size > 1 else 1.0)
            shares.append(float(np.mean(np.abs(got[key].astype(np.float64) - value) <= step * 1.0001)))
        row["within_one_step"] = min(shares)
        row["ok"] = row["within_one_step"] >= QUANT_SHARE
    else:
        errors = []
        for key, value in want.items():
            scale = max(float(np.max(np.abs(value))), 1e-30)
            errors.append(float(np.max(np.abs(got[key].astype(np.float64) - value))) / scale)
        row["rel_error"] = max(errors)
        row["ok"] = row["rel_error"] < FLOAT_TOLERANCE
    return row


def time_side(
    side: str, name: str, exporter: str, cache: Path, threads: int, repeat: int, database: str | None
) -> float:
    """The median latency of one runtime in this process (``side``: "ours" or "ort")."""
    import statistics

    path = model_path(cache, name, exporter)
    feeds = _feeds(path, cache, name)
    if side == "ort":
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

        def run() -> None:
            session.run(None, feeds)

    else:
        from metasched import model as msm

        compiled = msm.compile(msm.from_onnx(str(path)), threads=threads, database=database)

        def run() -> None:
            compiled.run(feeds)

    for _ in range(3):
        run()
    samples = []
    for _ in range(repeat):
        begin = time.perf_counter()
        run()
        samples.append(time.perf_counter() - begin)
    return statistics.median(samples)


def tune(name: str, exporter: str, cache: Path, minutes: float) -> dict[str, Any]:
    """Tune the model's tasks for ``minutes`` (database in the cache, resumed)."""
    import metasched
    from metasched import model as msm
    from metasched.measure import Measurer

    path = model_path(cache, name, exporter)
    work_dir = cache / "tune" / f"{name}.{exporter}"
    tasks = msm.extract_tasks(msm.from_onnx(str(path)), "llvm")
    measurer = Measurer("llvm", num_threads=2, flush_cache=True)
    start = time.perf_counter()
    try:
        result = metasched.tune(
            tasks,
            "llvm",
            time_budget=minutes * 60,
            work_dir=str(work_dir),
            num_threads=2,
            measurer=measurer,
            allow_empty=True,
            log=lambda line: None,
        )
    finally:
        measurer.close()
    return {
        "database": str(work_dir),
        "tune_s": round(time.perf_counter() - start, 1),
        "trials": result.trials,
        "tasks": len(tasks),
        "trustworthy": result.trustworthy,
    }


# ---------------------------------------------------------------- the driver


def _child(step: str, *args: str, timeout: float) -> dict[str, Any]:
    """Run one step of this script in a fresh process; its last stdout line is its JSON result."""
    command = [sys.executable, __file__, "--child", step, *args]
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=environment)
    except subprocess.TimeoutExpired:
        return {"error": f"{step}: timed out after {timeout:.0f} s"}
    lines = done.stdout.strip().splitlines()
    if done.returncode == 0 and lines:
        return json.loads(lines[-1])  # type: ignore[no-any-return]
    message = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
    return {"error": f"{step}: {message[:300]}"}


def _run_child(step: str, args: list[str]) -> None:
    cache = Path(args[2])
    if step == "export":
        export(args[0], args[1], cache)
        result: dict[str, Any] = {"exported": True}
    elif step == "check":
        result = check(args[0], args[1], cache, args[3] if len(args) > 3 and args[3] else None)
    elif step == "time":
        side, threads, repeat = args[3], int(args[4]), int(args[5])
        database = args[6] if len(args) > 6 and args[6] else None
        result = {"seconds": time_side(side, args[0], args[1], cache, threads, repeat, database)}
    elif step == "tune":
        result = tune(args[0], args[1], cache, float(args[3]))
    else:
        raise SystemExit(f"unknown step {step}")
    print(json.dumps(result))


def _time_pair(row: dict[str, Any], cache: Path, args: argparse.Namespace, database: str | None, tag: str) -> None:
    for threads in args.threads:
        best = {}
        for side in ("ours", "ort"):
            runs = [
                _child(
                    "time",
                    row["model"],
                    row["exporter"],
                    str(cache),
                    side,
                    str(threads),
                    str(args.repeat),
                    database or "",
                    timeout=args.timeout,
                )
                for _ in range(args.processes)
            ]
            seconds = [r["seconds"] for r in runs if "seconds" in r]
            if not seconds:
                row.setdefault("errors", []).append(runs[0].get("error"))
                break
            best[side] = min(seconds)
        if len(best) == 2:
            row[f"{tag}_ms_{threads}t"] = round(best["ours"] * 1e3, 3)
            row[f"ort_ms_{threads}t"] = round(best["ort"] * 1e3, 3)
            row[f"{tag}_ratio_{threads}t"] = round(best["ort"] / best["ours"], 3)  # > 1: ours faster


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(m.name for m in ZOO), help="comma-separated zoo names")
    parser.add_argument("--exporters", default="dynamo,legacy,qdq", help="dynamo, legacy, qdq (quantized models)")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="exported models and tuning databases")
    parser.add_argument("--time", action="store_true", help="time against onnxruntime at --threads")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--repeat", type=int, default=40, help="runs per timing process (the median)")
    parser.add_argument("--processes", type=int, default=2, help="timing processes per side (the best)")
    parser.add_argument("--tune-minutes", type=float, default=0.0, help="tune each model for this long, then again")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per step")
    parser.add_argument("--plot", type=Path, default=None, help="the ratio plot (default: model_zoo.png in --cache)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args()
    if args.child:
        _run_child(args.child, rest)
        return
    try:
        import torch  # noqa: F401

        import_torchvision()
        import transformers  # noqa: F401
    except ImportError as error:
        raise SystemExit(f"the zoo needs {error.name}: bash scripts/install.sh --zoo") from None
    args.threads = [int(t) for t in args.threads.split(",")]
    unknown = [m for m in args.models.split(",") if m not in BY_NAME]
    if unknown:
        raise SystemExit(f"unknown zoo models {unknown}; the zoo: {', '.join(BY_NAME)}")
    cache: Path = args.cache
    rows = []
    for name in args.models.split(","):
        for exporter in args.exporters.split(","):
            if exporter == "qdq" and not BY_NAME[name].quantize:
                continue
            row: dict[str, Any] = {"model": name, "exporter": exporter, "family": BY_NAME[name].family}
            exported = _child("export", name, exporter, str(cache), timeout=args.timeout)
            if "error" in exported:
                row["export_error"] = exported["error"]
                rows.append(row)
                print(_line(row), flush=True)
                continue
            row.update(_child("check", name, exporter, str(cache), timeout=args.timeout))
            if args.time and row.get("ok") is not None:
                _time_pair(row, cache, args, None, "default")
            if args.tune_minutes > 0 and row.get("ok") is not None:
                tuned = _child(
                    "tune",
                    name,
                    exporter,
                    str(cache),
                    str(args.tune_minutes),
                    timeout=args.timeout + args.tune_minutes * 60,
                )
                row.update({f"tune_{k}": v for k, v in tuned.items()})
                if "database" in tuned:
                    again = _child("check", name, exporter, str(cache), tuned["database"], timeout=args.timeout)
                    row["tuned_ok"] = again.get("ok")
                    if args.time:
                        _time_pair(row, cache, args, tuned["database"], "tuned")
            rows.append(row)
            print(_line(row), flush=True)
    _table(rows)
    if args.time:
        _plot(rows, args.plot or cache / "model_zoo.png")
    _summary_json(rows)


def _line(row: dict[str, Any]) -> str:
    if "export_error" in row:
        return f"{row['model']:<20} {row['exporter']:<7} export failed: {row['export_error']}"
    if "error" in row:
        return f"{row['model']:<20} {row['exporter']:<7} FAILED: {row['error']}"
    accuracy = (
        f"rel err {row['rel_error']:.1e}"
        if "rel_error" in row
        else f"{100 * row['within_one_step']:.2f}% within a step"
        + (" (onnxruntime's saturating int16 pairs emulated)" if row.get("int16_pairs") else "")
    )
    parts = [
        f"{row['model']:<20} {row['exporter']:<7} {'ok  ' if row['ok'] else 'BAD '} {accuracy}, compile {row['compile_s']:.1f} s"
    ]
    for key in sorted(row):
        if "_ratio_" in key:
            parts.append(f"{key} {row[key]:.2f}x")
    return ", ".join(parts)


def _table(rows: list[dict[str, Any]]) -> None:
    print()
    print(
        f"{'model':<20} {'exporter':<8} {'result':<10} {'accuracy':<16} {'compile':>8}  ratios vs onnxruntime (>1: faster)"
    )
    for row in rows:
        if "export_error" in row or "error" in row:
            print(f"{row['model']:<20} {row['exporter']:<8} {'no export' if 'export_error' in row else 'FAILED':<10}")
            continue
        accuracy = f"{row['rel_error']:.1e}" if "rel_error" in row else f"{100 * row['within_one_step']:.2f}%/step"
        ratios = "  ".join(f"{k.replace('_ratio_', ' ')} {row[k]:.2f}" for k in sorted(row) if "_ratio_" in k)
        print(
            f"{row['model']:<20} {row['exporter']:<8} {'ok' if row['ok'] else 'MISMATCH':<10} {accuracy:<16} {row['compile_s']:>7.1f}s  {ratios}"
        )


def _plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    timed = [r for r in rows if any("_ratio_" in k for k in r)]
    if not timed:
        return
    keys = sorted({k for r in timed for k in r if "_ratio_" in k})
    figure, axis = plt.subplots(figsize=(max(8, 0.6 * len(timed) * len(keys)), 4.5))
    width = 0.8 / len(keys)
    for index, key in enumerate(keys):
        axis.bar(
            [i + index * width for i in range(len(timed))],
            [r.get(key, 0) for r in timed],
            width,
            label=key.replace("_ratio_", " "),
        )
    axis.axhline(1.0, color="black", linewidth=0.8)
    axis.set_xticks([i + 0.4 - width / 2 for i in range(len(timed))])
    axis.set_xticklabels([f"{r['model']}\n{r['exporter']}" for r in timed], rotation=60, fontsize=7)
    axis.set_ylabel("onnxruntime latency / ours (>1: ours faster)")
    axis.legend(fontsize=7)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    print(f"plot: {path}")


def _summary_json(rows: list[dict[str, Any]]) -> None:
    import math
    import platform

    checked = [r for r in rows if "ok" in r]
    summary: dict[str, Any] = {
        "benchmark": "model_zoo",
        "cpu": _cpu_model(),
        "machine": platform.machine(),
        "files": len(rows),
        "exported": len(rows) - sum("export_error" in r for r in rows),
        "matching": sum(bool(r.get("ok")) for r in checked),
        "failed": [f"{r['model']}.{r['exporter']}" for r in rows if "export_error" not in r and not r.get("ok")],
        "no_export": [f"{r['model']}.{r['exporter']}" for r in rows if "export_error" in r],
    }
    for key in sorted({k for r in rows for k in r if "_ratio_" in k}):
        values = [r[key] for r in rows if key in r and r[key] > 0]
        if values:
            summary[f"geomean_{key}"] = round(math.exp(sum(math.log(v) for v in values) / len(values)), 3)
    summary["rows"] = rows
    print(json.dumps(summary))


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor()


if __name__ == "__main__":
    main()
