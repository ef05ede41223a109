"""``metasched doctor [MODEL.onnx]``: what this machine offers the compiler (LLVM, CPU features,
threads, optional tools), and for a model: which operators it uses, whether each is supported,
and the tasks ``metasched tune`` would tune."""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
from collections import Counter
from typing import Any

from metasched.cli.common import CliError, HelpFormatter, check_target, load_model, parse_input_shapes, say

__all__ = ["add_parser"]


def add_parser(subparsers: Any, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "doctor",
        parents=[common],
        help="check this machine (LLVM, CPU features, tools) and optionally a model's operator coverage",
        description=(
            "Report llvmlite and LLVM versions, the CPU and its vector features, threads, and optional tools "
            "(xgboost, onnxruntime, qemu-aarch64, nvcc, a GPU). With MODEL.onnx: its operators (supported or "
            "not) and the tasks metasched tune would tune."
        ),
        epilog="examples:\n  metasched doctor\n  metasched doctor model.onnx --input x:1,3,224,224",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("model", nargs="?", metavar="MODEL.onnx")
    parser.add_argument("--target", default="llvm", help="target string for the model's tasks (default llvm)")
    parser.add_argument("--input", action="append", metavar="NAME:D1,D2,...", help="an input's shape")
    parser.set_defaults(handler=run)


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _tool(name: str, args: list[str]) -> str:
    path = shutil.which(name)
    if path is None:
        return "not found"
    try:
        output = subprocess.run([path, *args], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return path
    first = next((line for line in output.splitlines() if line.strip()), "")
    return f"{path} ({first[:80]})" if first else path


def _machine() -> None:
    import llvmlite
    import llvmlite.binding as llvm

    say("machine")
    say(f"  Python {platform.python_version()} ({sys.executable})")
    say(f"  llvmlite {llvmlite.__version__}, LLVM {'.'.join(map(str, llvm.llvm_version_info))}")
    say(f"  CPU {llvm.get_host_cpu_name()}, triple {llvm.get_process_triple()}")
    features = llvm.get_host_cpu_features()
    wanted = ["sse4.2", "avx", "avx2", "fma", "avx512f", "avx512vnni", "avxvnni", "neon", "dotprod"]
    present = [f for f in wanted if features.get(f, False)]
    say(f"  vector features: {', '.join(present) or 'none of ' + ', '.join(wanted)}")
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    say(f"  cores available: {cores} (OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')})")
    if hasattr(os, "getloadavg"):
        load = os.getloadavg()[0]
        busy = " (busy: timings will be noisy)" if load >= 0.75 * cores else ""
        say(f"  load average (1 min): {load:.2f}{busy}")
    say("packages")
    for package in ["numpy", "xgboost-cpu", "xgboost", "onnx", "onnxruntime", "rich", "matplotlib"]:
        version = _version(package)
        if package == "xgboost" and version == "not installed" and _version("xgboost-cpu") != "not installed":
            continue
        say(f"  {package}: {version}")
    say("tools")
    say(f"  qemu-aarch64: {_tool('qemu-aarch64', ['--version'])}")
    say(f"  aarch64-linux-gnu-gcc: {_tool('aarch64-linux-gnu-gcc', ['--version'])}")
    say(f"  nvcc: {_tool('nvcc', ['--version'])}")
    say(f"  GPU: {_tool('nvidia-smi', ['-L'])}")


def run(args: argparse.Namespace) -> int:
    _machine()
    if args.model is None:
        return 0
    target = check_target(args.target)
    _operators(args.model)
    model = load_model(args.model, parse_input_shapes(args.input))
    from metasched.model import extract_tasks

    tasks = extract_tasks(model.graph, target)
    say(f"tasks metasched tune would tune ({len(tasks)}, target {target!r}):")
    for task in sorted(tasks, key=lambda t: -t.weight * t.flops):
        say(f"  {task.name:<40} x{task.weight:g}  {task.flops / 1e6:10.2f} MFLOP  workload {task.key}")
    return 0


def _operators(path: str) -> None:
    """Operator coverage, read from the file directly so that unsupported operators are all
    listed (importing the model stops at the first)."""
    import onnx

    from metasched.model.ops import OPS

    try:
        proto = onnx.load(path)
    except FileNotFoundError:
        raise CliError(f"model file {path!r} not found; give the path of an ONNX file") from None
    except Exception as error:  # noqa: BLE001 - protobuf's errors are many; all mean "not ONNX"
        raise CliError(f"{path!r} is not an ONNX model ({type(error).__name__}); give an .onnx file") from None
    counts = Counter(
        (node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}")
        for node in proto.graph.node
    )
    unsupported = sorted(op for op in counts if op not in OPS)
    say(f"model {path}: {sum(counts.values())} nodes, {len(counts)} operator types")
    say("  " + ", ".join(f"{op} x{n}" + ("" if op in OPS else " (UNSUPPORTED)") for op, n in sorted(counts.items())))
    if unsupported:
        raise CliError(f"{path}: unsupported operator(s) {', '.join(unsupported)}; the model cannot be compiled")
    say("  every operator is supported")
