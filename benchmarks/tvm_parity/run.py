"""TVM parity: run TVM's own schedule-primitive tests against this repository, through a ``tvm`` shim.

Run: python3 benchmarks/tvm_parity/run.py --tvm DIR [--rev REV] [--files a,b] [--out results.jsonl]
                                          [--timeout 900] [--logs DIR]
     python3 benchmarks/tvm_parity/run.py --summarize results.jsonl   (only print the tables)

DIR is a TVM git checkout or bare mirror. The test files ``tests/python/s_tir/schedule/
test_tir_schedule_*.py`` at REV (default HEAD; ``tests/python/tir-schedule/`` for a REV before the
s_tir refactor), plus ``test_tir_schedule_set_axis_separator.py`` from the commit before that refactor
(``d76c729259^``) when REV lacks it and the repository has that commit, are read with ``git show``
into a temporary folder; no TVM code is copied into this repository or imported from an installed TVM.
``--files rolling_buffer,cache_index`` picks files by the part after ``test_tir_schedule_``.

Each file runs in its own ``pytest`` subprocess with ``PYTHONPATH`` = this folder (the ``tvm`` shim
package and ``parity_plugin.py``) + the repository root, a per-test alarm (``--test-timeout``), a
per-file timeout (``--timeout``) and an address-space limit (``--memory-gb``). The plugin writes one
JSON line per test case; the classes (defined in ``parity_plugin.py``):

  pass               structurally equal to TVM's expected program, or numerically equal under our
                     interpreter on random inputs (``partial-pass``: compared, then hit a missing API)
  refused            TVM accepts the schedule, we raise (neg-refused-early: before the statement a
                     negative test expects to fail)
  refused-tvm-differs  refused, and TVM's own expected result computes other numbers than the
                     program the test scheduled (so TVM changed its meaning; the note shows where)
  wrong              our program computes different numbers than TVM's expected program
  negative-accepted  TVM refuses (a pytest.raises test), we accept
  no-counterpart     needs an API, dialect construct or shim mapping we do not have
  timeout            over the per-test alarm or the per-file timeout
  uncomparable       the interpreter cannot judge (both programs fail, or inputs too large)

The shim patches, at run time and only inside those subprocesses: ``tir.script.prim_func`` and
``tir.script.ir.ir_module`` (a function our parser rejects becomes a placeholder that fails only the
tests using it), ``IntImm.__int__`` and ``PrimFunc.with_attr`` where missing, and ``pytest.raises``
(any exception from ``tir/`` counts as a refusal); see ``tvm/_impl.py``. Results are therefore a
measure of coverage of TVM's test suite, not a proof of equivalence: numeric equality is checked on
one random input set per comparison.

Prints the per-file table, the wrong / refused / negative-accepted cases, the grouped
no-counterpart causes, and one closing JSON line ``{"benchmark": "tvm_parity", "totals": {...}}``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent  # holds the shim package ``tvm/`` and ``parity_plugin.py``
REPO_ROOT = HERE.parent.parent

TEST_DIR = "tests/python/s_tir/schedule"
OLD_TEST_DIR = "tests/python/tir-schedule"  # before the s_tir refactor
PRE_REFACTOR_REV = "d76c729259^"
PRE_REFACTOR_FILES = ("test_tir_schedule_set_axis_separator.py",)
PREFIX = "test_tir_schedule_"

COLUMNS = [
    "pass",
    "refused",
    "refused-tvm-differs",
    "neg-refused-early",
    "wrong",
    "negative-accepted",
    "no-counterpart",
    "other-assert",
    "other-error",
    "uncomparable",
    "timeout",
    "skipped",
    "collect-error",
]
LISTED = [
    "wrong",
    "refused",
    "refused-tvm-differs",
    "neg-refused-early",
    "negative-accepted",
    "other-assert",
    "other-error",
    "uncomparable",
    "timeout",
    "collect-error",
    "crashed",
]


def _git(tvm_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(tvm_dir), *args], capture_output=True, text=True)


def _list_tests(tvm_dir: Path, rev: str, folder: str) -> list[str]:
    result = _git(tvm_dir, "ls-tree", "--name-only", rev, folder + "/")
    if result.returncode != 0:
        return []
    names = [Path(line).name for line in result.stdout.split()]
    return sorted(n for n in names if n.startswith(PREFIX) and n.endswith(".py"))


def extract_tests(tvm_dir: Path, rev: str, dest: Path, wanted: list[str] | None) -> list[str]:
    """Write TVM's schedule test files at ``rev`` into ``dest``; returns their file names, in run order."""
    folder = TEST_DIR
    names = _list_tests(tvm_dir, rev, folder)
    if not names:
        folder = OLD_TEST_DIR
        names = _list_tests(tvm_dir, rev, folder)
    if not names:
        raise SystemExit(f"no {PREFIX}*.py under {TEST_DIR} or {OLD_TEST_DIR} at {rev} in {tvm_dir}")
    sources = {name: f"{rev}:{folder}/{name}" for name in names}
    for name in PRE_REFACTOR_FILES:
        if (
            name not in sources
            and _git(tvm_dir, "cat-file", "-e", f"{PRE_REFACTOR_REV}:{OLD_TEST_DIR}/{name}").returncode == 0
        ):
            sources[name] = f"{PRE_REFACTOR_REV}:{OLD_TEST_DIR}/{name}"
    if wanted is not None:
        chosen = []
        for short in wanted:
            name = short if short.startswith(PREFIX) else PREFIX + short
            name = name if name.endswith(".py") else name + ".py"
            if name not in sources:
                raise SystemExit(f"{name} not found at {rev} (nor at {PRE_REFACTOR_REV} for {PRE_REFACTOR_FILES})")
            chosen.append(name)
    else:
        chosen = sorted(sources)
    for name in chosen:
        shown = _git(tvm_dir, "show", sources[name])
        if shown.returncode != 0:
            raise SystemExit(f"git show {sources[name]} failed: {shown.stderr.strip()}")
        (dest / name).write_text(shown.stdout)
    return chosen


def _memory_limit(gigabytes: float) -> Callable[[], None]:
    def apply() -> None:
        limit = int(gigabytes * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return apply


def _append(out: Path, rec: dict[str, Any]) -> None:
    with out.open("a") as f:
        f.write(json.dumps(rec) + "\n")


def run_file(name: str, tests_dir: Path, out: Path, log: Path, args: argparse.Namespace) -> str:
    """Run one TVM test file in its own pytest subprocess; returns a one-word status for the progress line."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(HERE), str(REPO_ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    env["PARITY_OUT"] = str(out)
    env["PARITY_TEST_TIMEOUT"] = str(args.test_timeout)
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "parity_plugin",
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
        "-q",
        "--no-header",
        "-o",
        "addopts=",
        "--rootdir",
        str(tests_dir),
        "--continue-on-collection-errors",
        name,
    ]
    before = _count_lines(out)
    with log.open("w") as log_file:
        proc = subprocess.Popen(
            cmd,
            cwd=tests_dir,
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            preexec_fn=_memory_limit(args.memory_gb),
            start_new_session=True,  # so that a timeout can end the whole process group
        )
        try:
            rc = proc.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            _append(
                out,
                {
                    "file": name,
                    "test": "<file>",
                    "class": "timeout",
                    "msg": f"file-level timeout ({args.timeout} s)",
                    "notes": [],
                },
            )
            return "timeout"
    if rc < 0 or (rc not in (0, 1) and _count_lines(out) == before):
        tail = " | ".join(log.read_text(errors="replace").strip().splitlines()[-3:])[:300]
        _append(
            out,
            {
                "file": name,
                "test": "<file>",
                "class": "crashed",
                "msg": f"pytest exited with {rc}: {tail}",
                "notes": [],
            },
        )
    return f"rc={rc}"


def _count_lines(path: Path) -> int:
    return sum(1 for _ in path.open()) if path.exists() else 0


def _short(name: str) -> str:
    return name.replace(PREFIX, "").replace(".py", "")


def _is_partial(rec: dict[str, Any]) -> bool:
    return rec["class"] == "pass" and any(n.startswith("partial") for n in rec["notes"])


def summarize(records: list[dict[str, Any]]) -> dict[str, int]:
    """Print the per-file table and the case lists; returns the totals per class (plus partial-pass)."""
    columns = COLUMNS + sorted({r["class"] for r in records} - set(COLUMNS))
    per_file: dict[str, collections.Counter[str]] = {}
    partial: collections.Counter[str] = collections.Counter()
    for rec in records:
        per_file.setdefault(rec["file"], collections.Counter())[rec["class"]] += 1
        partial[rec["file"]] += _is_partial(rec)
    print("| file | " + " | ".join(columns) + " | partial-pass |")
    print("|" + "---|" * (len(columns) + 2))
    totals: collections.Counter[str] = collections.Counter()
    for name, counts in per_file.items():
        totals.update(counts)
        print(f"| {_short(name)} | " + " | ".join(str(counts.get(k, 0)) for k in columns) + f" | {partial[name]} |")
    print("| TOTAL | " + " | ".join(str(totals.get(k, 0)) for k in columns) + f" | {sum(partial.values())} |")
    for cls in LISTED:
        cases = [r for r in records if r["class"] == cls]
        if cases:
            print(f"\n## {cls} ({len(cases)})")
            for r in cases:
                notes = f"  [notes: {'; '.join(n[:150] for n in r['notes'])}]" if r["notes"] else ""
                print(f"- {_short(r['file'])}::{r['test']}: {r['msg'][:400]}{notes}")
    causes: collections.Counter[str] = collections.Counter()
    for r in records:
        if r["class"] == "no-counterpart":
            msg = re.sub(r"\(test_[a-z_]+\.py:\d+\) ", "", r["msg"])
            msg = re.sub(r"<string>:\d+:\d+|\S+\.py:\d+:\d+", "L", msg)  # group the same cause across lines
            causes[msg[:200]] += 1
    print("\n## no-counterpart causes")
    for msg, n in causes.most_common():
        print(f"- {n}: {msg}")
    result = {k: totals.get(k, 0) for k in columns}
    result["partial-pass"] = sum(partial.values())
    result["cases"] = len(records)
    return result


def _load(path: Path) -> list[dict[str, Any]]:
    with path.open() as f:
        return [json.loads(line) for line in f if line.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tvm", type=Path, help="a TVM git checkout or bare mirror")
    parser.add_argument("--rev", default="HEAD", help="the TVM commit whose tests run (default HEAD)")
    parser.add_argument("--files", help="comma-separated names after test_tir_schedule_ (default: all)")
    parser.add_argument("--out", type=Path, help="keep the per-case JSON lines here (overwritten)")
    parser.add_argument("--logs", type=Path, help="keep each file's pytest output here")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per test file (default 900)")
    parser.add_argument("--test-timeout", type=int, default=60, help="seconds per test case (default 60)")
    parser.add_argument("--memory-gb", type=float, default=12.0, help="address-space limit per file (default 12)")
    parser.add_argument("--summarize", type=Path, metavar="JSONL", help="only print the tables of a results file")
    args = parser.parse_args(argv)

    if args.summarize is not None:
        totals = summarize(_load(args.summarize))
        print(json.dumps({"benchmark": "tvm_parity", "results": str(args.summarize), "totals": totals}))
        return 0
    if args.tvm is None:
        parser.error("--tvm DIR is required (or --summarize JSONL)")
    resolved = _git(args.tvm, "rev-parse", "--verify", args.rev + "^{commit}")
    if resolved.returncode != 0:
        parser.error(f"{args.rev!r} is not a commit in {args.tvm}: {resolved.stderr.strip()}")
    sha = resolved.stdout.strip()
    wanted = [w.strip() for w in args.files.split(",") if w.strip()] if args.files else None

    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="tvm_parity_") as tmp:
        tests_dir = Path(tmp) / "tests"
        tests_dir.mkdir()
        logs_dir = args.logs if args.logs is not None else Path(tmp) / "logs"
        logs_dir.mkdir(parents=True, exist_ok=True)
        out = args.out.resolve() if args.out is not None else Path(tmp) / "results.jsonl"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("")
        names = extract_tests(args.tvm, sha, tests_dir, wanted)
        print(f"TVM {sha[:10]}: {len(names)} test files", flush=True)
        for name in names:
            file_start = time.perf_counter()
            status = run_file(name, tests_dir, out, logs_dir / (_short(name) + ".log"), args)
            print(f"  {_short(name)}: {status}, {time.perf_counter() - file_start:.0f} s", flush=True)
        print()
        totals = summarize(_load(out))
    print(
        json.dumps(
            {
                "benchmark": "tvm_parity",
                "tvm_rev": sha,
                "files": len(names),
                "seconds": round(time.perf_counter() - start, 1),
                "totals": totals,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
