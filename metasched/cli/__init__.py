"""The ``metasched`` command line (also ``python -m metasched``).

    metasched tune [MODEL.onnx] [--trials N | --time-budget 20m] [--work-dir DIR] [--plot]
    metasched compile MODEL.onnx --work-dir DIR -o OUT/
    metasched run OUT/ --input NAME=x.npy [-o outputs.npz]
    metasched bench MODEL.onnx|OUT/ [--threads 1,2]
    metasched db list|show|export|import|prune|plot [--work-dir DIR]
    metasched doctor [MODEL.onnx]
    metasched worker dask://HOST:PORT [--qemu-aarch64]

One module per command family: ``tune`` (with ``live``: the progress table, ``runlog``: runs
started and finished in a work directory, ``report``: the comparison with onnxruntime, ``plot``),
``model_commands`` (compile, run, bench), ``db``, ``doctor``, ``worker`` (a measuring worker of
a dask cluster); ``common`` holds the argument parsing and model loading they share. A problem
the user can fix raises ``CliError``: one line on stderr, exit 2; a traceback only with
``--debug``. docs/cli.md describes every command.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from metasched.cli.common import CliError, HelpFormatter

__all__ = ["CliError", "build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    from metasched import __version__
    from metasched.cli import db, doctor, model_commands, tune, worker

    # Options every subcommand takes; SUPPRESS keeps a subcommand from resetting the top level's.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--debug", action="store_true", default=argparse.SUPPRESS, help="show the traceback of an error"
    )
    parser = argparse.ArgumentParser(
        prog="metasched",
        description=(
            "Tune, build and run ONNX models on this CPU with the meta-scheduler. Start with `metasched tune` "
            "(no arguments: a two-minute demo on a small model), then `metasched compile` and `metasched bench`."
        ),
        epilog=(
            "examples:\n"
            "  metasched tune                                    # demo: squeezenet, random weights\n"
            "  metasched tune model.onnx --time-budget 20m --work-dir tune/ --plot\n"
            "  metasched compile model.onnx --work-dir tune/ -o model.out\n"
            "  metasched run model.out --input data=x.npy -o y.npz\n"
            "  metasched bench model.out --threads 1,2\n"
            "  metasched db list --work-dir tune/\n"
            "  metasched doctor model.onnx\n"
            "  metasched worker dask://sched-host:8786             # measure for tuners on a dask cluster\n"
            "\n`metasched COMMAND --help` describes each command."
        ),
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"metasched {__version__}")
    parser.add_argument("--debug", action="store_true", default=False, help="show the traceback of an error")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    tune.add_parser(subparsers, common)
    model_commands.add_parsers(subparsers, common)
    db.add_parser(subparsers, common)
    doctor.add_parser(subparsers, common)
    worker.add_parser(subparsers, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 internal error, 2 user error,
    130 stopped by Ctrl-C)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    command = args.command + (f" {args.action}" if getattr(args, "action", None) else "")
    try:
        return int(args.handler(args))
    except CliError as error:
        if args.debug:
            raise
        print(f"metasched {command}: error: {error}", file=sys.stderr, flush=True)
        return 2
    except KeyboardInterrupt:
        if args.debug:
            raise
        print(f"metasched {command}: interrupted", file=sys.stderr, flush=True)
        return 130
    except BrokenPipeError:
        # The reader went away (`metasched db list | head`): not an error. Python would report
        # the failed flush of stdout at exit, so stdout is pointed at /dev/null first.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as error:  # noqa: BLE001 - the last line of defence: one line, not a traceback
        if args.debug:
            raise
        print(
            f"metasched {command}: internal error: {type(error).__name__}: {error} "
            "(run again with --debug for the traceback, and report it)",
            file=sys.stderr,
            flush=True,
        )
        return 1
