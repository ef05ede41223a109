"""Command line of the random-schedule fuzzer.

    python -m tests.fuzz.run --steps 50000 --seed 1 --jobs 2 --out fuzz-out/
    python -m tests.fuzz.run --seconds 300 --seed 7
    python -m tests.fuzz.run --replay fuzz-out/wrong_result/000_reverse_compute_inline_pad_1d.json
    python -m tests.fuzz.run --init-order --steps 5000   only the reductions with a T.init, under
                                                        the primitives that reorder them

Prints the failure counts per class (and per primitive), then writes one minimized reproducer
per distinct failure under ``--out`` (``<class>/<n>_<primitive>_<kernel>.json``: kernel name,
trace JSON, the trace as Python, the error), every failure in ``failures.jsonl`` and the
summary in ``summary.txt``. ``--replay`` checks a reproducer again. The exit status is 1 when
a failure was found (or a replayed reproducer still fails).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tests.fuzz.actions import INIT_ORDER_WEIGHTS
from tests.fuzz.engine import CLASSES, Report, fuzz, replay_file, write_reproducers
from tests.fuzz.kernels import INIT_ORDER_KERNELS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.fuzz.run", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--steps", type=int, default=None, help="primitive steps to plan (default 2000 without --seconds)"
    )
    parser.add_argument("--seconds", type=float, default=None, help="stop handing out sequences after this long")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    parser.add_argument("--out", type=Path, default=Path("fuzz-out"), help="directory for reproducers")
    parser.add_argument("--no-minimize", action="store_true", help="write reproducers as found")
    parser.add_argument("--replay", type=Path, help="classify a written reproducer again and exit")
    parser.add_argument(
        "--init-order",
        action="store_true",
        help="focus on the reductions with a T.init and the primitives that change their order",
    )
    args = parser.parse_args(argv)

    if args.replay is not None:
        result = replay_file(args.replay)
        print("no failure: fixed (or refused now)" if result is None else f"{result[0]} in {result[1]}:\n{result[2]}")
        return 0 if result is None else 1

    steps = args.steps if args.steps is not None or args.seconds is not None else 2000

    def progress(report: Report) -> None:
        counts = ", ".join(f"{c} {n}" for c, n in report.counts().items() if n)
        print(f"  {report.steps} steps, {report.seconds:.0f} s, failures: {counts or 'none'}", flush=True)

    focus = {"kernels": INIT_ORDER_KERNELS, "weights": INIT_ORDER_WEIGHTS} if args.init_order else {}
    report = fuzz(steps=steps, seconds=args.seconds, seed=args.seed, jobs=args.jobs, progress=progress, **focus)
    print(report.summary())
    written = write_reproducers(report, args.out, minimize_them=not args.no_minimize)
    print(f"{len(report.unique())} distinct failures; reproducers in {args.out}/")
    for path in written:
        print(f"  {path}")
    return 1 if any(report.counts()[c] for c in CLASSES) else 0


if __name__ == "__main__":
    sys.exit(main())
