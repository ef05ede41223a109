"""``metasched db list|show|export|import|prune|plot``: look into a tuning database, move its
records between machines, and trim it."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any, cast

from metasched.cli.common import CliError, HelpFormatter, say

__all__ = ["add_parser"]

EXPORT_FORMAT = "metasched-db-export"


def add_parser(subparsers: Any, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "db",
        parents=[common],
        help="inspect, export, import, prune or plot a tuning database",
        description=(
            "Inspect and manage the tuning database of a work directory: every measured candidate, keyed "
            "by the task's workload hash and the target string."
        ),
        epilog=(
            "examples:\n"
            "  metasched db list --work-dir tune/\n"
            "  metasched db show g5_conv_relu --work-dir tune/\n"
            "  metasched db export records.jsonl --work-dir tune/     # then, elsewhere:\n"
            "  metasched db import records.jsonl --work-dir tune/\n"
            "  metasched db prune --keep 16 --work-dir tune/\n"
            "  metasched db plot -o curves.png --work-dir tune/"
        ),
        formatter_class=HelpFormatter,
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    def action(name: str, help_text: str) -> argparse.ArgumentParser:
        sub = actions.add_parser(name, parents=[common], help=help_text, description=help_text)
        sub.add_argument("--work-dir", default="metasched-work", metavar="DIR", help="default: metasched-work")
        return sub  # type: ignore[no-any-return]

    listing = action("list", "every task (workload): its name, records, failures and best latency per target")
    listing.set_defaults(handler=db_list)
    show = action("show", "one task's records: the best programs, failures by kind, the best schedule")
    show.add_argument(
        "task", metavar="TASK", help="a task name or workload hash (or a unique prefix), as db list shows"
    )
    show.add_argument("--target", help="only this target")
    show.add_argument("--top", type=int, default=5, help="best programs shown (default 5)")
    show.set_defaults(handler=db_show)
    export = action("export", "write the workloads and records to one JSON-lines file")
    export.add_argument("file", metavar="FILE.jsonl")
    export.add_argument("--target", help="only records for this target")
    export.set_defaults(handler=db_export)
    importing = action("import", "add the workloads and records of an exported file (duplicates skipped)")
    importing.add_argument("file", metavar="FILE.jsonl")
    importing.set_defaults(handler=db_import)
    prune = action("prune", "drop failed records and all but the best programs of each task")
    prune.add_argument("--keep", type=int, default=32, help="best programs kept per task and target (default 32)")
    prune.add_argument("--dry-run", action="store_true", help="only say what would be dropped")
    prune.set_defaults(handler=db_prune)
    plot = action("plot", "write a PNG of the tuning curves (model latency against trials and time, per task)")
    plot.add_argument("-o", "--output", metavar="FILE.png", help="default: DIR/tuning.png")
    plot.add_argument("--target", help="default: the target of the latest run")
    plot.set_defaults(handler=db_plot)


def _open(path: str) -> Any:
    from metasched.database import Database, DatabaseError

    directory = Path(path)
    if not directory.is_dir():
        raise CliError(f"--work-dir {path!r} not found; give the directory metasched tune wrote")
    if not (directory / "records.jsonl").exists() and not (directory / "workloads.jsonl").exists():
        raise CliError(f"--work-dir {path!r} holds no tuning database (no records.jsonl); give the tune work dir")
    try:
        return Database(directory)
    except DatabaseError as error:
        raise CliError(str(error)) from None


def _names(work_dir: str, database: Any) -> dict[str, str]:
    """Workload hash -> the name a run gave its task (else the function's name)."""
    from metasched.cli.runlog import RunLog

    names = {key: note.name for key, note in RunLog(Path(work_dir)).task_notes().items()}
    for key in database.workloads():
        if key not in names:
            try:
                names[key] = database.workload(key).name
            except Exception:  # noqa: BLE001 - an unparsable workload is listed by its hash
                names[key] = "?"
    return names


def db_list(args: argparse.Namespace) -> int:
    from metasched.cli.report import print_table

    database = _open(args.work_dir)
    names = _names(args.work_dir, database)
    rows = []
    for key in database.workloads():
        records = database.records(key)
        for target in sorted({r.target for r in records}):
            mine = [r for r in records if r.target == target]
            valid = [r for r in mine if r.is_valid]
            best = database.get_top_k(key, target, 1)
            rows.append(
                [
                    names.get(key, "?"),
                    key,
                    target,
                    f"{len(mine)}",
                    f"{len(mine) - len(valid)}",
                    f"{best[0].seconds * 1e3:.3f}" if best else "-",
                ]
            )
        if not records:
            rows.append([names.get(key, "?"), key, "-", "0", "0", "-"])
    if not rows:
        say(f"{args.work_dir}: empty database")
        return 0
    print_table(
        f"{args.work_dir}: {len(database.workloads())} workloads, {len(database)} records",
        ["task", "hash", "target", "records", "failed", "best ms"],
        rows,
    )
    return 0


def _find(database: Any, names: dict[str, str], wanted: str) -> str:
    keys = database.workloads()
    exact = [k for k in keys if names.get(k) == wanted or k == wanted]
    found = exact or [k for k in keys if k.startswith(wanted) or names.get(k, "").startswith(wanted)]
    if not found:
        raise CliError(f"no task {wanted!r} in the database; metasched db list shows the names and hashes")
    if len(found) > 1:
        raise CliError(f"{wanted!r} matches {len(found)} tasks ({', '.join(found[:4])} ...); give more of the hash")
    return found[0]  # type: ignore[no-any-return]


def db_show(args: argparse.Namespace) -> int:
    from metasched.cli.report import print_table
    from tir.schedule import Trace

    database = _open(args.work_dir)
    names = _names(args.work_dir, database)
    key = _find(database, names, args.task)
    say(f"task {names.get(key, '?')} (workload {key})")
    records = database.records(key, args.target)
    if not records:
        say("no records" + (f" for {args.target!r}" if args.target else ""))
        return 0
    for target in sorted({r.target for r in records}):
        mine = [r for r in records if r.target == target]
        errors = Counter(r.error_kind for r in mine if r.error_kind)
        programs = len({r.trace_json for r in mine})
        say(f"target {target!r}: {len(mine)} records of {programs} programs")
        if errors:
            say("  failures: " + ", ".join(f"{n} {kind}" for kind, n in errors.most_common()))
            for kind in errors:
                example = next(r for r in mine if r.error_kind == kind)
                say(f"    e.g. {kind}: {example.error_msg[:160]}")
        top = database.get_top_k(key, target, args.top)
        rows = []
        for rank, record in enumerate(top, start=1):
            times = [r.seconds for r in mine if r.trace_json == record.trace_json and r.is_valid]
            spread = f"{min(times) * 1e3:.3f}-{max(times) * 1e3:.3f}" if len(times) > 1 else "-"
            steps = len(Trace.from_json(record.trace_json))
            rows.append([f"{rank}", f"{record.seconds * 1e3:.3f}", spread, f"{len(times)}", f"{steps}"])
        if rows:
            print_table(
                "  best programs (median of their measurements)", ["#", "ms", "range ms", "runs", "steps"], rows
            )
            say("  the best schedule:")
            for line in Trace.from_json(top[0].trace_json).as_python().splitlines():
                say(f"    {line}")
    return 0


def db_export(args: argparse.Namespace) -> int:
    database = _open(args.work_dir)
    records = database.records(target=args.target)
    keys = {r.workload_hash for r in records} if args.target else set(database.workloads())
    written = 0
    try:
        with open(args.file, "w") as handle:
            handle.write(json.dumps({"format": EXPORT_FORMAT, "version": 1}) + "\n")
            for key in sorted(keys):
                func = database.workload(key)
                handle.write(json.dumps({"workload": key, "name": func.name, "script": func.script()}) + "\n")
            for record in records:
                handle.write(json.dumps({"record": record.__dict__}) + "\n")
                written += 1
    except OSError as error:
        raise CliError(f"cannot write {args.file!r} ({error.strerror}); choose another file") from None
    say(f"exported {len(keys)} workloads and {written} records to {args.file}")
    return 0


def db_import(args: argparse.Namespace) -> int:
    import tir
    from metasched.database import Database, TuningRecord
    from metasched.task import workload_hash
    from tir.ir import PrimFunc

    try:
        lines = Path(args.file).read_text().splitlines()
    except FileNotFoundError:
        raise CliError(f"{args.file!r} not found; give a file written by metasched db export") from None
    try:
        header = json.loads(lines[0]) if lines else {}
    except ValueError:
        header = {}
    if header.get("format") != EXPORT_FORMAT:
        raise CliError(f"{args.file!r} is not a metasched db export file; write one with metasched db export")
    database = Database(args.work_dir)
    known = {(r.workload_hash, r.target, r.trace_json, r.timestamp) for r in database.records()}
    workloads = records = skipped = 0
    for number, line in enumerate(lines[1:], start=2):
        try:
            item = json.loads(line)
        except ValueError:
            raise CliError(f"{args.file}:{number}: not JSON; the file is damaged") from None
        if "workload" in item:
            func = cast(PrimFunc, tir.parse(item["script"]))  # db export writes PrimFuncs
            if workload_hash(func) != item["workload"]:
                say(f"warning: workload {item['workload']} hashes differently here; its records are skipped")
                continue
            database.commit_workload(func)
            workloads += 1
        elif "record" in item:
            record = TuningRecord(**item["record"])
            if (record.workload_hash, record.target, record.trace_json, record.timestamp) in known:
                skipped += 1
                continue
            database.commit_record(record)
            records += 1
    say(f"imported {workloads} workloads and {records} records into {args.work_dir} ({skipped} already there)")
    return 0


def db_prune(args: argparse.Namespace) -> int:
    from metasched.database import Database

    if args.keep < 1:
        raise CliError(f"--keep {args.keep}: keep at least 1 program per task")
    database = _open(args.work_dir)
    records = database.records()
    kept_programs: set[tuple[str, str, str]] = set()
    for key in database.workloads():
        for target in {r.target for r in records if r.workload_hash == key}:
            for record in database.get_top_k(key, target, args.keep):
                kept_programs.add((key, target, record.trace_json))
    # A kept program keeps all its valid measurements (its median is what ranks it).
    kept = [r for r in records if r.is_valid and (r.workload_hash, r.target, r.trace_json) in kept_programs]
    dropped = len(records) - len(kept)
    failed = sum(1 for r in records if not r.is_valid)
    say(f"{len(records)} records: keeping {len(kept)}, dropping {dropped} ({failed} failed, the rest slower programs)")
    if args.dry_run or dropped == 0:
        return 0
    # Written aside, then swapped in whole: a crash midway leaves the old file intact.
    scratch = Path(tempfile.mkdtemp(prefix=".prune-", dir=args.work_dir))
    try:
        fresh = Database(scratch)
        for record in kept:
            fresh.commit_record(record)
        target_file = Path(args.work_dir) / "records.jsonl"
        backup = Path(args.work_dir) / "records.jsonl.before-prune"
        shutil.copyfile(target_file, backup)
        os.replace(scratch / "records.jsonl", target_file)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    say(f"pruned; the previous records are in {backup}")
    return 0


def db_plot(args: argparse.Namespace) -> int:
    from metasched.cli.plot import plot_tuning
    from metasched.cli.runlog import RunLog

    database = _open(args.work_dir)
    target = args.target
    if target is None:
        latest = RunLog(Path(args.work_dir)).latest_run()
        targets = sorted({r.target for r in database.records()})
        target = latest["target"] if latest else (targets[0] if targets else "llvm")
    output = Path(args.output) if args.output else Path(args.work_dir) / "tuning.png"
    say(f"plot: {plot_tuning(Path(args.work_dir), target, output)}")
    return 0
