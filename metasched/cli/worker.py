"""``metasched worker``: a measuring worker of a dask.distributed cluster, on this machine.

    dask scheduler                                  # on one machine: tcp://HOST:8786
    metasched worker dask://HOST:8786               # on every measuring machine
    metasched worker dask://HOST:8786 --qemu-aarch64   # an x86-64 machine that also measures AArch64 under qemu
    metasched tune model.onnx --executor dask://HOST:8786

The worker is a dask worker (under a nanny, which restarts it should it die) with one thread and
the resource ``measure=1``: it measures one chunk of candidates at a time, building with every
core and timing one candidate at a time (``metasched.measure.dask_executor``). ``--qemu-aarch64``
adds the resource ``qemu_aarch64=1`` after checking the cross toolchain and qemu are there.
"""

from __future__ import annotations

import argparse
from typing import Any

from metasched.cli.common import CliError, HelpFormatter, say

__all__ = ["add_parser", "connect", "run", "scheduler_address"]


def add_parser(subparsers: Any, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "worker",
        parents=[common],
        help="measure candidates for tuners on a dask.distributed cluster, on this machine",
        description=(
            "Start a measuring worker of a dask.distributed cluster on this machine: a dask worker under a "
            "nanny with one thread and the resource measure=1, so that it measures one chunk of candidates "
            "at a time (built on every core, timed one at a time). Tuners reach it through the scheduler: "
            "`metasched tune --executor dask://HOST:PORT`. A candidate comes here only when this machine "
            "matches its target (triple, CPU features, cores). Runs until Ctrl-C or until the scheduler "
            "is gone for --death-timeout seconds."
        ),
        epilog=(
            "examples:\n"
            "  dask scheduler --port 8786                          # once, on any machine\n"
            "  metasched worker dask://sched-host:8786             # on each measuring machine\n"
            "  metasched worker dask://sched-host:8786 --qemu-aarch64\n"
            "\nthe same with dask's own command: dask worker tcp://sched-host:8786 --nthreads 1 "
            "--resources measure=1"
        ),
        formatter_class=HelpFormatter,
    )
    parser.add_argument(
        "scheduler", metavar="dask://HOST:PORT", help="the dask scheduler (dask://, tcp:// or HOST:PORT)"
    )
    parser.add_argument("--name", help="the worker's name in the cluster (default: dask's)")
    parser.add_argument(
        "--qemu-aarch64",
        action="store_true",
        help="also measure AArch64 targets under qemu (timings marked emulated); needs qemu-aarch64 and "
        "the AArch64 cross toolchain",
    )
    parser.add_argument(
        "--memory-limit", default="auto", metavar="BYTES", help="dask's memory limit of the worker (default auto)"
    )
    parser.add_argument(
        "--death-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="stop when the scheduler cannot be reached for this long (default 60)",
    )
    parser.set_defaults(handler=run)


def scheduler_address(spec: str, option: str) -> str:
    """``tcp://HOST:PORT`` from ``dask://HOST:PORT``, ``tcp://HOST:PORT`` or ``HOST:PORT``."""
    rest = spec.removeprefix("dask://").removeprefix("tcp://")
    host, _, port = rest.rpartition(":")
    if not host or not port.isdigit():
        raise CliError(f"{option} {spec!r}: give the scheduler as dask://HOST:PORT (e.g. dask://10.0.0.5:8786)")
    return f"tcp://{rest}"


def _distributed() -> Any:
    try:
        import distributed  # type: ignore[import-not-found]
    except ImportError:
        raise CliError(
            "dask.distributed is not installed: pip install 'tensorir[dask]' (or pip install distributed)"
        ) from None
    return distributed


def connect(spec: str, option: str, timeout: float = 10.0) -> Any:
    """A ``DaskExecutor`` on a client of the scheduler at ``spec``; ``CliError`` when it cannot be reached."""
    from metasched.measure.dask_executor import DaskExecutor

    address = scheduler_address(spec, option)
    distributed = _distributed()
    try:
        client = distributed.Client(address, timeout=timeout)
    except Exception as error:  # noqa: BLE001 - any failure to connect is the address's fault
        raise CliError(
            f"{option} {spec}: cannot reach the dask scheduler at {address} within {timeout:g} s "
            f"({type(error).__name__}: {error}); check the address and that `dask scheduler` runs there"
        ) from None
    return DaskExecutor(client)


def run(args: argparse.Namespace) -> int:
    import asyncio

    from metasched.measure.dask_executor import MEASURE_RESOURCE, QEMU_RESOURCE, describe_machine

    address = scheduler_address(args.scheduler, "worker")
    distributed = _distributed()
    resources = {MEASURE_RESOURCE: 1}
    if args.qemu_aarch64:
        from tir.runtime.aarch64 import toolchain_missing_reason

        missing = toolchain_missing_reason()
        if missing is not None:
            raise CliError(f"--qemu-aarch64: {missing}")
        resources[QEMU_RESOURCE] = 1
    machine = describe_machine()
    say(
        f"measuring worker for {address}: {machine['triple']}, {machine['cpu']}, {machine['cores']} cores, "
        f"resources {', '.join(f'{k}={v}' for k, v in resources.items())}; Ctrl-C stops it"
    )

    async def serve() -> None:
        nanny = distributed.Nanny(
            address,
            nthreads=1,
            resources=resources,
            name=args.name,
            memory_limit=args.memory_limit,
            death_timeout=args.death_timeout,
        )
        try:
            await nanny
        except Exception as error:  # noqa: BLE001 - the scheduler could not be reached
            raise CliError(
                f"cannot join the dask scheduler at {address} ({type(error).__name__}: {error}); "
                "check the address and that `dask scheduler` runs there"
            ) from None
        say(f"joined {address} as {nanny.worker_address}")
        await nanny.finished()

    asyncio.run(serve())
    say("the worker stopped")
    return 0
