"""``metasched worker``: a measuring worker of a dask.distributed cluster, on this machine.

    dask scheduler                                  # on one machine: tcp://HOST:8786
    metasched worker dask://HOST:8786               # on every measuring machine
    metasched worker dask://HOST:8786 --qemu-aarch64   # an x86-64 machine that also measures AArch64 under qemu
    metasched tune model.onnx --executor dask://HOST:8786

The worker is a dask worker (under a nanny, which restarts it should it die) with one thread and
the resource ``measure=1``: it measures one chunk of candidates at a time, building with every
core and timing one candidate at a time (``metasched.measure.dask_executor``). ``--qemu-aarch64``
adds the resource ``qemu_aarch64=1`` after checking the cross toolchain and qemu are there.
Plain dask workers measure too (one chunk at a time per machine); once some workers declare
``measure``, only those do, so the resource picks the measuring machines of a shared cluster.

A scheduler address that does not answer is one line (``CliError``), soon: ``connect`` first
tries a plain TCP connection (a refused one fails at once), then dask's handshake.
"""

from __future__ import annotations

import argparse
import socket
import time
from typing import Any

from metasched.cli.common import CliError, HelpFormatter, say

__all__ = ["add_parser", "connect", "no_answer", "run", "scheduler_address"]


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
            "matches its target (triple, CPU features, cores). Plain dask workers measure too, one chunk at "
            "a time per machine; once some workers declare measure=1, only those measure, so this command "
            "picks the measuring machines of a shared cluster. Waits up to --death-timeout seconds for the "
            "scheduler to answer, then runs until Ctrl-C or until the scheduler is gone for that long."
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
        help="wait this long for the scheduler to answer at the start, and stop when it cannot be reached "
        "for this long (default 60)",
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


def _one_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__


def no_answer(address: str, timeout: float) -> str | None:
    """Why nothing answers a TCP connection to ``tcp://HOST:PORT`` within ``timeout`` seconds
    ("connection refused", "unknown host ..."), or None when something does."""
    host, _, port = address.removeprefix("tcp://").rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            return None
    except socket.gaierror:
        return f"unknown host {host!r}"
    except TimeoutError:
        return f"no answer within {timeout:g} s"
    except OSError as error:
        return (error.strerror or str(error)).lower()


def connect(spec: str, option: str, timeout: float = 10.0) -> Any:
    """A ``DaskExecutor`` on a client of the scheduler at ``spec``; ``CliError`` (one line) when it
    cannot be reached: at once when the connection is refused or the host unknown, else within
    ``timeout`` seconds."""
    from metasched.measure.dask_executor import DaskExecutor

    address = scheduler_address(spec, option)
    distributed = _distributed()
    advice = "check the address and that `dask scheduler` runs there"
    why = no_answer(address, min(timeout, 5.0))
    if why is not None:
        raise CliError(f"{option} {spec}: cannot reach the dask scheduler at {address} ({why}); {advice}")
    try:
        client = distributed.Client(address, timeout=timeout)
    except Exception as error:  # noqa: BLE001 - any failure to connect is the address's fault
        raise CliError(
            f"{option} {spec}: cannot reach the dask scheduler at {address} within {timeout:g} s "
            f"({_one_line(error)}); {advice}"
        ) from None
    return DaskExecutor(client)


def _wait_for_scheduler(address: str, seconds: float) -> None:
    """Return once something answers at ``address`` (a worker may start before its scheduler);
    ``CliError`` after ``seconds``."""
    deadline = time.monotonic() + seconds
    why = no_answer(address, min(seconds, 5.0))
    if why is not None:
        say(f"waiting up to {seconds:g} s for the dask scheduler at {address} ({why})")
    while why is not None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise CliError(
                f"cannot reach the dask scheduler at {address} within {seconds:g} s ({why}); "
                "check the address and that `dask scheduler` runs there (--death-timeout waits longer)"
            )
        time.sleep(min(1.0, left))
        why = no_answer(address, max(0.1, min(5.0, deadline - time.monotonic())))


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
    _wait_for_scheduler(address, args.death_timeout)

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
                f"cannot join the dask scheduler at {address} ({_one_line(error)}); "
                "check the address and that `dask scheduler` runs there"
            ) from None
        say(f"joined {address} as {nanny.worker_address}")
        await nanny.finished()

    asyncio.run(serve())
    say("the worker stopped")
    return 0
