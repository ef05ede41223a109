"""The ``metasched`` command line, driven for real in subprocesses: tuning a two-task model
(coverage, resume, a different target, a killed run, Ctrl-C in a terminal), the live table in a
pseudo-terminal and plain lines in a pipe, compile + run in fresh processes against
onnxruntime, the database commands, doctor, and every user error with its one-line message."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from metasched.database import Database  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def write_two_task_model(path: Path) -> Path:
    """x[16,64] -> MatMul 64x64 -> Relu -> MatMul 64x32: two tasks (matmul+relu fused, matmul)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = [
        numpy_helper.from_array((rng.standard_normal((64, 64)) / 8).astype(np.float32), "w1"),
        numpy_helper.from_array((rng.standard_normal((64, 32)) / 8).astype(np.float32), "w2"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("MatMul", ["r", "w2"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "two_tasks",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16, 32])],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.save(model, str(path))
    return path


def cli_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "metasched", *args]


def environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("COLUMNS", None)
    return env


def cli(*args: str, cwd: Path, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cli_command(*args), cwd=cwd, env=environment(), capture_output=True, text=True, timeout=timeout
    )


def start(*args: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        cli_command(*args), cwd=cwd, env=environment(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def task_hashes(model: Path) -> list[str]:
    from metasched import model as msm

    return [task.key for task in msm.extract_tasks(msm.from_onnx(str(model)), "llvm")]


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, subprocess.CompletedProcess[str]]:
    """The two-task model tuned with --trials 4 (in a pipe: plain lines) and --plot."""
    home = tmp_path_factory.mktemp("cli")
    model = write_two_task_model(home / "two.onnx")
    done = cli("tune", "two.onnx", "--trials", "4", "--work-dir", "w", "--repeat", "6", "--plot", cwd=home)
    assert done.returncode == 0, done.stdout + done.stderr
    return home, model, done


def test_tune_covers_every_task_and_ends_with_the_comparison(tuned) -> None:  # noqa: ANN001
    home, model, done = tuned
    out = done.stdout
    database = Database(home / "w")
    for key in task_hashes(model):
        assert database.get_top_k(key, "llvm", 1), f"task {key} left without a measured program"
    assert len([r for r in database.records(target="llvm")]) >= 4
    # Plain periodic lines in a pipe: no terminal escapes, the phases named.
    assert "\x1b[" not in out
    assert "measuring default schedules" in out and "searching" in out and "done" in out
    # The proof at the end: outputs against onnxruntime, then the latency table.
    assert "output 'y' vs onnxruntime: max abs diff" in out and "(ok)" in out
    for row in ("default schedules", "tuned", "onnxruntime"):
        assert row in out
    assert "speedup: tuned vs default" in out
    assert "Traceback" not in done.stderr


def test_plot_writes_a_png(tuned) -> None:  # noqa: ANN001
    home, _, done = tuned
    png = home / "w" / "tuning.png"
    assert "plot: w/tuning.png" in done.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000


def _doubtful(stdout: str) -> int:
    """Tasks a run could not confirm by quiet timings (other processes used the CPU: a loaded
    test machine); the next run tunes them again instead of skipping them."""
    found = re.search(r"UNTRUSTWORTHY: the best of (\d+) task", stdout)
    return int(found.group(1)) if found else 0


def test_a_second_run_skips_tuned_tasks_and_another_target_does_not_reuse_them(tuned) -> None:  # noqa: ANN001
    home, model, done = tuned
    before = len(Database(home / "w").records())
    again = cli("tune", "two.onnx", "--trials", "4", "--work-dir", "w", "--no-compare", cwd=home)
    assert again.returncode == 0, again.stderr
    skipped = 2 - _doubtful(done.stdout)
    if skipped == 2:
        assert "2 of 2 tasks already tuned for 'llvm'" in again.stdout
        assert len(Database(home / "w").records()) == before  # nothing measured again
    else:  # the first run was on a busy machine: its unconfirmed tasks are tuned again
        assert f"tuning {2 - skipped} tasks" in again.stdout
    before = len(Database(home / "w").records(target="llvm"))

    other = cli(
        "tune",
        "two.onnx",
        "--trials",
        "2",
        "--target",
        "llvm -mcpu=x86-64",
        "--work-dir",
        "w",
        "--no-compare",
        cwd=home,
    )
    assert other.returncode == 0, other.stderr
    assert "already tuned" not in other.stdout and "tuning 2 tasks" in other.stdout
    database = Database(home / "w")
    for key in task_hashes(model):
        assert database.get_top_k(key, "llvm -mcpu=x86-64", 1)  # measured anew for this target
    assert len(database.records(target="llvm")) == before


def test_a_budget_too_small_for_coverage_is_reported_and_the_next_run_covers_the_rest(tmp_path: Path) -> None:
    model = write_two_task_model(tmp_path / "two.onnx")
    first = cli("tune", "two.onnx", "--trials", "1", "--work-dir", "w", "--no-compare", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "the budget was too small to measure 1 of 2 tasks" in first.stdout
    assert "keep their default schedule" in first.stdout
    database = Database(tmp_path / "w")
    assert sum(bool(database.get_top_k(key, "llvm", 1)) for key in task_hashes(model)) == 1

    second = cli("tune", "two.onnx", "--trials", "1", "--work-dir", "w", "--no-compare", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    if not _doubtful(first.stdout):  # else the busy first run's task is tuned again too
        assert "1 of 2 tasks already tuned" in second.stdout and "too small" not in second.stdout
    database = Database(tmp_path / "w")
    assert all(database.get_top_k(key, "llvm", 1) for key in task_hashes(model))


def test_compile_then_run_in_fresh_processes_matches_onnxruntime(tuned) -> None:  # noqa: ANN001
    home, model, _ = tuned
    done = cli("compile", "two.onnx", "--work-dir", "w", "-o", "out", cwd=home)
    assert done.returncode == 0, done.stderr
    assert "2 tasks database" in done.stdout
    x = np.random.default_rng(1).standard_normal((16, 64)).astype(np.float32)
    np.save(home / "x.npy", x)
    ran = cli("run", "out", "--input", "x=x.npy", "-o", "y.npz", cwd=home)
    assert ran.returncode == 0, ran.stderr
    ours = np.load(home / "y.npz")["y"]
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    (theirs,) = session.run(None, {"x": x})
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)

    bench = cli("bench", "out", "--threads", "1", "--repeat", "3", cwd=home)
    assert bench.returncode == 0, bench.stderr
    assert "speedup vs onnxruntime" in bench.stdout


def test_db_commands(tuned) -> None:  # noqa: ANN001
    home, model, _ = tuned
    listing = cli("db", "list", "--work-dir", "w", cwd=home)
    assert listing.returncode == 0, listing.stderr
    assert "g0_matmul_relu" in listing.stdout and "g1_matmul" in listing.stdout
    show = cli("db", "show", "g1_matmul", "--work-dir", "w", cwd=home)
    assert show.returncode == 0, show.stderr
    assert "best programs" in show.stdout and "the best schedule" in show.stdout

    exported = cli("db", "export", "all.jsonl", "--work-dir", "w", cwd=home)
    assert exported.returncode == 0, exported.stderr
    imported = cli("db", "import", "all.jsonl", "--work-dir", "copy", cwd=home)
    assert imported.returncode == 0, imported.stderr
    assert len(Database(home / "copy").records()) == len(Database(home / "w").records())

    pruned = cli("db", "prune", "--keep", "1", "--work-dir", "copy", cwd=home)
    assert pruned.returncode == 0, pruned.stderr
    copy = Database(home / "copy")
    for key in task_hashes(model):
        assert len({r.trace_json for r in copy.records(key, "llvm")}) == 1  # only the best program kept
        assert copy.get_top_k(key, "llvm", 1)


def test_a_run_killed_mid_batch_leaves_a_database_that_loads_and_resumes(tmp_path: Path) -> None:
    write_two_task_model(tmp_path / "two.onnx")
    records = tmp_path / "w" / "records.jsonl"
    process = start("tune", "two.onnx", "--trials", "400", "--work-dir", "w", "--no-compare", cwd=tmp_path)
    deadline = time.monotonic() + 90
    # The two default schedules measured: the search's first batch (32 candidates) is in flight.
    while time.monotonic() < deadline and (not records.exists() or len(records.read_bytes().splitlines()) < 2):
        time.sleep(0.05)
    time.sleep(1.5)
    workers = [
        int(pid)
        for pid in subprocess.run(["pgrep", "-P", str(process.pid)], capture_output=True, text=True).stdout.split()
    ]
    process.send_signal(signal.SIGKILL)
    process.wait(10)
    spent = len(Database(tmp_path / "w").records())  # loads (a cut last line is skipped)
    assert spent >= 2
    time.sleep(1.0)
    for pid in workers:  # the measuring workers died with the tuner
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text(), pid

    resumed = cli("tune", "two.onnx", "--trials", str(spent + 2), "--work-dir", "w", "--no-compare", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{spent} trials" in resumed.stdout and "2 trials to go" in resumed.stdout
    assert len(Database(tmp_path / "w").records()) > spent


def _read_pty(fd: int, until: float, stop: str | None = None) -> str:
    chunks = []
    while time.monotonic() < until:
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                data = os.read(fd, 65536)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            chunks.append(data.decode(errors="replace"))
            if stop is not None and stop in "".join(chunks):
                break
    return "".join(chunks)


def _take_terminal() -> None:
    """In the child: make the pty (its stdin) its controlling terminal, so that ^C written to
    the terminal reaches it as SIGINT, as from a keyboard -- with SIGINT's default action: a
    test run started in the background of a shell (``pytest &``) inherits SIGINT ignored."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def test_live_table_in_a_terminal_and_ctrl_c_stops_cleanly(tmp_path: Path) -> None:
    write_two_task_model(tmp_path / "two.onnx")
    main_fd, child_fd = pty.openpty()
    env = environment()
    env.update({"COLUMNS": "120", "LINES": "40", "TERM": "xterm-256color"})
    process = subprocess.Popen(
        cli_command("tune", "two.onnx", "--trials", "400", "--work-dir", "w"),
        cwd=tmp_path,
        env=env,
        stdin=child_fd,
        stdout=child_fd,
        stderr=child_fd,
        start_new_session=True,
        preexec_fn=_take_terminal,
    )
    os.close(child_fd)
    screen = _read_pty(main_fd, time.monotonic() + 90, stop="searching")
    screen += _read_pty(main_fd, time.monotonic() + 2)
    # What a person sees: the table's columns, the tasks, the run's state, redrawn in place.
    for text in ("GFLOP/s", "share", "gain", "g0_matmul_relu", "g1_matmul", "searching", "trials"):
        assert text in screen, text
    assert "\x1b[" in screen  # cursor movement: the table is redrawn, not scrolled
    os.write(main_fd, b"\x03")  # Ctrl-C, through the terminal
    rest = _read_pty(main_fd, time.monotonic() + 60)
    code = process.wait(30)
    os.close(main_fd)
    assert code == 130, rest
    assert "stopped" in rest and "run the same command again to continue" in rest
    assert "Traceback" not in screen + rest and "KeyboardInterrupt" not in screen + rest
    assert len(Database(tmp_path / "w").records()) >= 2


ERRORS = [
    (["tune", "missing.onnx"], "model file 'missing.onnx' not found"),
    (["tune", "notonnx.onnx"], "is not an ONNX model"),
    (["tune", "unsupported.onnx"], "unsupported operator 'Frobnicate'"),
    (["tune", "two.onnx", "--input", "x=16,64"], "--input 'x=16,64' is not NAME:DIMS"),
    (["tune", "two.onnx", "--input", "x:16,sixty"], "are not comma-separated integers"),
    (["tune", "symbolic.onnx"], "is symbolic: give the input's shape with --input x:D1,D2,..."),
    (["tune", "two.onnx", "--target", "vulkan"], "unknown target kind 'vulkan'"),
    (["tune", "two.onnx", "--work-dir", "afile/w"], "is not writable"),
    (["tune", "two.onnx", "--time-budget", "soon"], "is not a duration"),
    (["run", "nothing/", "--input", "x.npy"], "'nothing/' not found"),
    (["db", "list", "--work-dir", "nowhere"], "--work-dir 'nowhere' not found"),
]


def test_user_errors_print_one_line_and_exit_2(tmp_path: Path) -> None:
    from onnx import TensorProto, helper

    write_two_task_model(tmp_path / "two.onnx")
    (tmp_path / "notonnx.onnx").write_text("this is not a model\n")
    (tmp_path / "afile").write_text("")
    unknown_op = helper.make_graph(
        [helper.make_node("Frobnicate", ["a", "a"], ["b"])],
        "frobnicate",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [4, 4])],
        [helper.make_tensor_value_info("b", TensorProto.FLOAT, [4, 4])],
    )
    onnx.save(
        helper.make_model(unknown_op, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "unsupported.onnx")
    )
    symbolic = onnx.load(str(tmp_path / "two.onnx"))
    symbolic.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "N"  # a batch size left open
    onnx.save(symbolic, str(tmp_path / "symbolic.onnx"))
    # All at once: each is a fresh interpreter, mostly import time.
    running = [(args, expected, start(*args, cwd=tmp_path)) for args, expected in ERRORS]
    for args, expected, process in running:
        out, err = process.communicate(timeout=120)
        assert process.returncode == 2, (args, out, err)
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and expected in lines[0], (args, err)
        assert lines[0].startswith("metasched ") and "Traceback" not in err


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    done = cli("--debug", "tune", "missing.onnx", cwd=tmp_path)
    assert done.returncode != 0 and "Traceback" in done.stderr and "CliError" in done.stderr


def test_help_and_doctor(tmp_path: Path) -> None:
    write_two_task_model(tmp_path / "two.onnx")
    helps = [start(*args, cwd=tmp_path) for args in (["--help"], ["tune", "--help"], ["db", "--help"])]
    doctor = start("doctor", "two.onnx", cwd=tmp_path)
    outputs = [p.communicate(timeout=120)[0] for p in helps]
    assert all(p.returncode == 0 for p in helps)
    for command in ("tune", "compile", "run", "bench", "db", "doctor"):
        assert command in outputs[0]
    assert "--time-budget" in outputs[1] and "--retune" in outputs[1] and "onnxruntime" in outputs[1]
    for action in ("list", "show", "export", "import", "prune", "plot"):
        assert action in outputs[2]
    out, err = doctor.communicate(timeout=120)
    assert doctor.returncode == 0, err
    assert "LLVM" in out and "every operator is supported" in out and "g0_matmul_relu" in out


def test_the_console_script_is_installed() -> None:
    import shutil

    script = shutil.which("metasched")
    if script is None:
        pytest.skip("the metasched script is not installed (pip install -e .)")
    done = subprocess.run([script, "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("metasched ")


def test_runlog_lines_are_json(tuned) -> None:  # noqa: ANN001
    home, _, _ = tuned
    for line in (home / "w" / "cli-runs.jsonl").read_text().splitlines():
        assert json.loads(line)["event"] in ("start", "finish")
