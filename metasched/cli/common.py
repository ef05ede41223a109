"""What every subcommand shares: the user-error type, argument parsing helpers, the work
directory, and loading a model (a user's ONNX file or the built-in demo model)."""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "DEMO_MODEL",
    "CliError",
    "HelpFormatter",
    "LoadedModel",
    "check_target",
    "format_seconds",
    "load_model",
    "open_work_dir",
    "parse_duration",
    "parse_input_shapes",
    "parse_threads",
    "plural",
    "say",
    "warn_if_busy",
]

#: The model ``metasched tune`` uses when none is given: it ships inside the onnx wheel.
DEMO_MODEL = "squeezenet"


class CliError(Exception):
    """A problem the user can fix. Printed as one line (no traceback unless --debug), exit 2."""


class HelpFormatter(argparse.HelpFormatter):
    """Wraps prose paragraphs of descriptions and epilogs to the terminal, and keeps paragraphs
    with indented lines (the examples) as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        paragraphs = []
        for paragraph in text.split("\n\n"):
            if any(line.startswith("  ") for line in paragraph.splitlines()):
                paragraphs.append("\n".join(indent + line for line in paragraph.splitlines()))
            else:
                paragraphs.append(
                    textwrap.fill(" ".join(paragraph.split()), width, initial_indent=indent, subsequent_indent=indent)
                )
        return "\n\n".join(paragraphs)


def warn_if_busy() -> None:
    """Say so when other programs keep the cores busy: timings (the tuner's and the final
    comparison's) are then noisy, and multi-threaded kernels suffer most."""
    try:
        load = os.getloadavg()[0]
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return
    if load >= 0.75 * cores:
        say(
            f"note: this machine is busy (load {load:.1f} on {cores} cores): timings will be noisy, "
            "multi-threaded ones most; tune and benchmark on an otherwise idle machine"
        )


def plural(count: int, word: str) -> str:
    """``1 trial``, ``2 trials``."""
    return f"{count} {word}{'' if count == 1 else 's'}"


def say(text: str = "") -> None:
    """A line for the user (stdout, flushed: progress must show up in a pipe at once)."""
    print(text, flush=True)


def format_seconds(seconds: float) -> str:
    """``75`` -> ``1m15s``; ``3725`` -> ``1h02m``; under a minute ``42s``."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"
    return f"{int(seconds // 3600)}h{int(seconds % 3600 // 60):02d}m"


_DURATION = re.compile(r"(\d+(?:\.\d+)?)([hms]?)")


def parse_duration(text: str) -> float:
    """Seconds of ``20m``, ``90s``, ``1h30m``, ``1.5h`` or a bare number of seconds."""
    spec = text.strip().lower()
    parts = _DURATION.findall(spec)
    if not spec or "".join(number + unit for number, unit in parts) != spec:
        raise CliError(f"--time-budget {text!r} is not a duration; write e.g. 20m, 90s, 1h30m or a number of seconds")
    scale = {"h": 3600.0, "m": 60.0, "s": 1.0, "": 1.0}
    seconds = sum(float(number) * scale[unit] for number, unit in parts)
    if seconds <= 0:
        raise CliError(f"--time-budget {text!r} must be more than zero")
    return seconds


def parse_input_shapes(specs: list[str] | None) -> dict[str, tuple[int, ...]]:
    """``["data:1,3,224,224"]`` -> ``{"data": (1, 3, 224, 224)}``."""
    shapes: dict[str, tuple[int, ...]] = {}
    for spec in specs or []:
        name, sep, dims = spec.rpartition(":")
        if not sep or not name or not dims:
            raise CliError(f"--input {spec!r} is not NAME:DIMS; write e.g. --input data:1,3,224,224")
        try:
            shape = tuple(int(d) for d in dims.split(","))
        except ValueError:
            raise CliError(
                f"--input {spec!r}: the dimensions {dims!r} are not comma-separated integers; "
                "write e.g. --input data:1,3,224,224"
            ) from None
        if any(d < 1 for d in shape):
            raise CliError(f"--input {spec!r}: every dimension must be at least 1")
        shapes[name] = shape
    return shapes


def parse_threads(text: str) -> list[int]:
    """``"1,2"`` -> ``[1, 2]``."""
    try:
        threads = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise CliError(f"--threads {text!r} is not a comma-separated list of thread counts; write e.g. 1,2") from None
    if not threads or any(t < 1 for t in threads):
        raise CliError(f"--threads {text!r}: give thread counts of at least 1, e.g. 2 or 1,2")
    return threads


def check_target(text: str) -> str:
    """The canonical target string; a bad one is a user error naming what is wrong."""
    from tir.target import Target, TargetError

    try:
        target = Target.parse(text)
    except TargetError as error:
        raise CliError(f"--target: {error} (e.g. --target llvm, or 'llvm -mcpu=skylake')") from None
    if target.text.split()[0] != "llvm":
        raise CliError(f"--target {text!r}: the command line tunes and runs models on this CPU only; use --target llvm")
    if "-mtriple" in target.text and "x86_64" not in target.text:
        raise CliError(f"--target {text!r}: a cross-compiled model cannot run here; use a target for this CPU")
    return str(target.text)


def open_work_dir(path: str) -> Path:
    """The work directory, created when missing; refused when it cannot be written to."""
    directory = Path(path)
    if directory.exists() and not directory.is_dir():
        raise CliError(f"--work-dir {path!r} is a file, not a directory; choose another --work-dir")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = directory / f".write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise CliError(f"--work-dir {path!r} is not writable ({reason}); choose a directory you can write to") from None
    return directory


@dataclass
class LoadedModel:
    """An imported ONNX model: where it is, its proto and graph, and a digest that names it
    (the file's bytes and the input shapes) for resuming runs."""

    path: Path
    name: str
    proto: Any
    graph: Any
    input_shapes: dict[str, tuple[int, ...]]
    digest: str
    is_demo: bool = False


def demo_model_path(work_dir: Path) -> Path:
    """The demo model (the onnx wheel's light squeezenet, whose weights are zeros, with random
    weights drawn with a fixed seed), written once into ``work_dir``."""
    import onnx

    from metasched.cli.demo_model import light_model_path, randomize_weights

    target = work_dir / f"light_{DEMO_MODEL}.onnx"
    if not target.exists():
        source = light_model_path(DEMO_MODEL)
        if not os.path.exists(source):
            raise CliError(
                f"the demo model {source} is missing from the onnx package; reinstall it "
                "(pip install --force-reinstall onnx) or give a MODEL.onnx"
            )
        onnx.save(randomize_weights(onnx.load(source), seed=0), str(target))
    return target


def load_model(path: str | None, input_shapes: dict[str, tuple[int, ...]], work_dir: Path | None = None) -> LoadedModel:
    """Read and import an ONNX file; every failure a user can meet becomes a ``CliError``.
    ``path`` None: the demo model (written into ``work_dir``)."""
    is_demo = path is None
    if path is None:
        if work_dir is None:
            raise CliError("give a MODEL.onnx")
        model_path = demo_model_path(work_dir)
    else:
        model_path = Path(path)
        if not model_path.exists():
            raise CliError(f"model file {path!r} not found; give the path of an ONNX file")
        if model_path.is_dir():
            raise CliError(
                f"{path!r} is a directory; give the path of an ONNX file (a compiled model goes to run/bench)"
            )
    try:
        import onnx
    except ImportError:
        raise CliError(
            "the onnx package is missing; install it (bash scripts/install.sh, or pip install onnx)"
        ) from None
    data = model_path.read_bytes()
    try:
        proto = onnx.load_model_from_string(data)
    except Exception as error:  # noqa: BLE001 - protobuf's errors are many; all mean "not ONNX"
        raise CliError(
            f"{str(model_path)!r} is not an ONNX model, or it is truncated ({type(error).__name__}); give an .onnx file"
        ) from None
    if not proto.graph.node:
        raise CliError(f"{str(model_path)!r} is not an ONNX model (it holds no graph); give an .onnx file")
    _load_external_data(proto, model_path)
    from metasched.model import ModelImportError, UnsupportedOperatorError, from_onnx

    try:
        graph = from_onnx(proto, input_shapes=input_shapes or None)
    except UnsupportedOperatorError as error:
        # An operator: doctor lists every one the model lacks; an opset: the message says what to do.
        hint = f" (metasched doctor {model_path} lists them all)" if getattr(error, "op_type", None) else ""
        raise CliError(f"{model_path.name}: {_short(str(error))}{hint}") from None
    except ModelImportError as error:
        # The importer speaks of its Python argument; the user gave (or must give) --input.
        message = str(error).replace("input_shapes gives", "--input gives")
        message = message.replace("input_shapes names", "--input names")
        if "bind it with" in message:
            named = re.search(r"input '([^']+)'", message)
            example = f"{named.group(1)}:D1,D2,..." if named else "NAME:D1,D2,..."
            message = message.split(": bind it with")[0] + f": give the input's shape with --input {example}"
        raise CliError(f"{model_path.name}: {message}") from None
    digest = hashlib.sha256(data + repr(sorted(input_shapes.items())).encode()).hexdigest()[:16]
    name = model_path.stem
    return LoadedModel(model_path, name, proto, graph, dict(input_shapes), digest, is_demo)


def _load_external_data(proto: Any, model_path: Path) -> None:
    """Tensors stored beside the model (models over 2 GB): read from the model's directory."""
    from onnx.external_data_helper import load_external_data_for_model, uses_external_data

    if not any(uses_external_data(init) for init in proto.graph.initializer):
        return
    try:
        load_external_data_for_model(proto, str(model_path.parent))
    except Exception as error:  # noqa: BLE001 - a missing or short file, a path outside the directory
        raise CliError(
            f"{model_path.name}: its weights are stored in separate files that cannot be read "
            f"({type(error).__name__}: {error}); keep them next to the model"
        ) from None


def _short(message: str) -> str:
    """An unsupported-operator message without its list of every supported operator."""
    return message.split("; supported operators:")[0]


def random_inputs(graph: Any, seed: int = 0) -> dict[str, Any]:
    """Random arrays for the graph's inputs: floats standard normal, integers small."""
    import numpy as np

    rng = np.random.default_rng(seed)
    feeds = {}
    for name in graph.inputs:
        info = graph.infos[name]
        shape = tuple(int(d) for d in info.shape)
        dtype = np.dtype(info.dtype)
        if np.issubdtype(dtype, np.floating):
            feeds[name] = rng.standard_normal(shape).astype(dtype)
        elif dtype == np.bool_:
            feeds[name] = rng.integers(0, 2, shape).astype(dtype)
        else:
            feeds[name] = rng.integers(0, 4, shape).astype(dtype)
    return feeds


def stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
