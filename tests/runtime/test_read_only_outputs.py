"""Read-only arrays are refused for the parameters a program writes (issue 17 D).

An array with ``setflags(write=False)`` was overwritten, an array over ``bytes`` mutated, and a
read-only ``np.memmap`` crashed the process (SIGSEGV writing a read-only page). Both the built
module and the interpreter now refuse such an array up front, naming the parameter; read-only
inputs stay accepted. The memmap case runs in a child process, so a regression cannot kill
pytest.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tir
import tir.script as T
import tir.transform


@T.script
def add_one(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    for i in T.parallel(16):
        with T.block("B"):
            vi = T.spatial_axis(16, i)
            B[vi] = A[vi] + 1.0


def _read_only(values: np.ndarray) -> np.ndarray:
    array = values.copy()
    array.setflags(write=False)
    return array


def _over_bytes() -> np.ndarray:
    return np.frombuffer(bytes(64), dtype=np.float32)


RUNNERS = {
    "llvm": lambda *args: tir.build(add_one, "llvm")(*args),
    "interp": lambda *args: tir.interpret(add_one, *args),
}


@pytest.mark.parametrize("runner", sorted(RUNNERS))
@pytest.mark.parametrize("make", [_read_only, lambda _: _over_bytes()], ids=["setflags", "bytes"])
def test_read_only_output_is_refused(runner: str, make) -> None:
    out = make(np.zeros(16, np.float32))
    before = out.copy()
    with pytest.raises(ValueError, match=r"parameter B: the array is read-only .* writes B"):
        RUNNERS[runner](np.ones(16, np.float32), out)
    np.testing.assert_array_equal(out, before)


@pytest.mark.parametrize("runner", sorted(RUNNERS))
def test_read_only_input_is_accepted(runner: str) -> None:
    a = _read_only(np.arange(16, dtype=np.float32))
    out = np.zeros(16, np.float32)
    RUNNERS[runner](a, out)
    np.testing.assert_array_equal(out, np.arange(16, dtype=np.float32) + 1)


def test_read_only_memmap_output_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "out.bin"
    np.zeros(16, np.float32).tofile(path)
    code = f"""
import numpy as np, sys
sys.path.insert(0, {str(Path(__file__).parent)!r})
from test_read_only_outputs import RUNNERS
out = np.memmap({str(path)!r}, dtype=np.float32, mode="r", shape=(16,))
for name, run in sorted(RUNNERS.items()):
    try:
        run(np.ones(16, np.float32), out)
    except ValueError as error:
        assert "parameter B: the array is read-only" in str(error), error
    else:
        raise SystemExit(name + ": a read-only memmap was accepted")
print("refused")
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    assert "refused" in result.stdout
    assert not np.fromfile(path, dtype=np.float32).any()


def test_written_params_include_parallel_bodies() -> None:
    from tir.analysis.written import written_params

    assert written_params(add_one) == {"B"}
    assert written_params(tir.transform.lower(add_one, "llvm")) == {"B"}
