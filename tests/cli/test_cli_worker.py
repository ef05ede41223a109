"""``metasched worker`` and ``metasched tune --executor``: a worker started by the command line
joins a dask scheduler with the measure resource and serves a tune; executor specs that cannot
work, and scheduler addresses that do not answer, are one-line errors naming the option, at once."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

distributed = pytest.importorskip("distributed")
pytest.importorskip("onnx")

from metasched.cli.common import CliError  # noqa: E402
from metasched.cli.worker import connect  # noqa: E402
from metasched.database import Database  # noqa: E402
from tests.cli.test_cli import cli_command, write_two_task_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cli_command(*args), cwd=cwd, capture_output=True, text=True, timeout=300)


def test_a_worker_started_by_the_command_line_serves_a_tune(tmp_path: Path) -> None:
    cluster = distributed.LocalCluster(n_workers=0, processes=True, dashboard_address=":0", silence_logs=50)
    client = distributed.Client(cluster)
    address = cluster.scheduler_address
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    worker = subprocess.Popen(
        cli_command("worker", address.replace("tcp://", "dask://"), "--name", "cli-worker"),
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        client.wait_for_workers(1, timeout=60)
        (info,) = client.scheduler_info(n_workers=-1)["workers"].values()
        assert info["resources"] == {"measure": 1} and info["name"] == "cli-worker"

        model = write_two_task_model(tmp_path / "two.onnx")
        done = _run(
            "tune", str(model), "--trials", "4", "--no-compare", "--plain", "--threads", "1",
            "--executor", address.replace("tcp://", "dask://"), "--work-dir", str(tmp_path / "work"),
            cwd=tmp_path,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        records = Database(tmp_path / "work").records()
        assert len(records) >= 4 and all(r.is_valid for r in records)
    finally:
        worker.send_signal(signal.SIGINT)
        try:
            output, _ = worker.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
            output, _ = worker.communicate()
        client.close()
        cluster.close()
    assert "measuring worker for tcp://" in output and "measure=1" in output, output


def test_executor_specs_that_cannot_work_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(CliError, match=r"--executor dask://127.0.0.1:1: cannot reach the dask scheduler"):
        connect("dask://127.0.0.1:1", "--executor", timeout=1.0)
    with pytest.raises(CliError, match=r"give the scheduler as dask://HOST:PORT"):
        connect("dask://nowhere", "--executor")
    model = write_two_task_model(tmp_path / "two.onnx")
    for spec, message in [
        ("local:0", "local:N needs N, the measuring processes, at least 1"),
        ("ssh://host", "give local, local:N or dask://HOST:PORT"),
    ]:
        done = _run("tune", str(model), "--trials", "1", "--no-compare", "--executor", spec, cwd=tmp_path)
        assert done.returncode == 2, done.stderr
        assert f"--executor {spec!r}: {message}" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_a_scheduler_address_that_does_not_answer_is_one_line_at_once(tmp_path: Path) -> None:
    # Nothing listens on port 1: the refused connection is told at once, not after dask's timeouts.
    start = time.monotonic()
    with pytest.raises(CliError, match=r"^--executor dask://127.0.0.1:1: cannot reach .* \(connection refused\)"):
        connect("dask://127.0.0.1:1", "--executor")
    assert time.monotonic() - start < 3.0
    model = write_two_task_model(tmp_path / "two.onnx")
    done = _run("tune", str(model), "--trials", "1", "--no-compare", "--executor", "dask://127.0.0.1:1", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "metasched tune: error: --executor dask://127.0.0.1:1: cannot reach the dask scheduler at tcp://127.0.0.1:1 "
        "(connection refused); check the address and that `dask scheduler` runs there"
    ], done.stderr
    # A worker waits --death-timeout seconds for its scheduler, then says so in one line.
    done = _run("worker", "dask://127.0.0.1:1", "--death-timeout", "1", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "cannot reach the dask scheduler at tcp://127.0.0.1:1 within 1 s (connection refused)" in line, line


def test_the_worker_command_refuses_a_bad_scheduler_address(tmp_path: Path) -> None:
    done = _run("worker", "sched-host", cwd=tmp_path)
    assert done.returncode == 2
    assert "give the scheduler as dask://HOST:PORT" in done.stderr
