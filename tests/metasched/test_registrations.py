"""Run-time registrations reach every worker process (``tir.registrations``).

A user registers a tensor intrinsic, defines a postprocessor, a sketch rule or a cost model in
their own script (``__main__``), and tunes with the default workers: the candidate-making and
measuring processes must know all of it, or the tune must stop with one line saying what a
worker lacks. These tests run such scripts as real ``__main__`` programs in a subprocess.
"""

from __future__ import annotations

import importlib
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from metasched.measure.builder import Job, encode_program
from metasched.measure.executors import LocalPool
from tir import registrations
from tir.registrations import RegistrationError

REPO = Path(__file__).resolve().parents[2]

# The TensorIR paper's 4x4x4 matmul, registered in the script itself, and a batch matmul with
# a transposed operand (B[b, j, k]): the tensorization candidates re-index it to fit.
USER_SCRIPT = '''
import sys
import numpy as np
import tir, metasched
import tir.script as T
from tir.intrin import TensorIntrin
from metasched.cost import RandomModel
from metasched.space import SpaceGenerator
from metasched.space.postproc import Postproc, default_postprocs
from metasched.space.rules import SketchRule, default_rules
from tir.target import Target

@T.script
def desc(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32"), C: T.Buffer((4, 4), "float32")):
    with T.block("root"):
        T.reads(C[0:4, 0:4], A[0:4, 0:4], B[0:4, 0:4])
        T.writes(C[0:4, 0:4])
        for i, j, k in T.grid(4, 4, 4):
            with T.block("update"):
                vi, vj, vk = T.remap("SSR", i, j, k)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

@T.script
def impl(A: T.Buffer((4, 4), "float32"), B: T.Buffer((4, 4), "float32"), C: T.Buffer((4, 4), "float32")):
    with T.block("root"):
        T.reads(C[0:4, 0:4], A[0:4, 0:4], B[0:4, 0:4])
        T.writes(C[0:4, 0:4])
        for i in range(4):
            for j in T.vectorized(4):
                C[i, j] = C[i, j] + (A[i, 0] * B[0, j] + A[i, 1] * B[1, j] + A[i, 2] * B[2, j] + A[i, 3] * B[3, j])

TensorIntrin.register("user_dot_4x4x4", desc, impl, extra_check=lambda target: True)

@T.script
def bmm(A: T.Buffer((2, 16, 16), "float32"), B: T.Buffer((2, 16, 16), "float32"), C: T.Buffer((2, 16, 16), "float32")):
    for b, i, j, k in T.grid(2, 16, 16, 16):
        with T.block("C"):
            vb, vi, vj, vk = T.remap("SSSR", b, i, j, k)
            with T.init():
                C[vb, vi, vj] = 0.0
            C[vb, vi, vj] += A[vb, vi, vk] * B[vb, vj, vk]

class TagRoot(Postproc):
    """A postprocessor of the user's own (runs in the candidate-making workers)."""
    name = "tag-root"
    def apply(self, sch):
        sch.annotate(sch.get_block("C_o") if "C_o" in sch.index.blocks else sch.get_block("C"), "user_tag", 1)

class Count(SketchRule):
    """A sketch rule of the user's own (runs in this process)."""
    name = "count"
    def apply(self, sch, block):
        return [sch]

class Scores(RandomModel):
    """A cost model of the user's own."""

MODE = sys.argv[1]
if MODE == "intrinsic":
    result = metasched.tune(bmm, "llvm", trials=8, intrinsics=["user_dot_4x4x4"], seed=1, log=lambda s: None)
else:
    space = SpaceGenerator(
        rules=[Count(), *default_rules(Target.parse("llvm"), ["user_dot_4x4x4"])],
        postprocs=[*default_postprocs(Target.parse("llvm"))[:-1], TagRoot(), default_postprocs(Target.parse("llvm"))[-1]],
    )
    result = metasched.tune(bmm, "llvm", trials=8, space=space, cost_model=Scores(seed=0), seed=1, log=lambda s: None)
best = result.best_func
assert best is not None, result.summary()
text = best.script()
assert "user_dot_4x4x4" in str(best.attrs) or "T.vectorized(4)" in text, text
if MODE != "intrinsic":
    assert "user_tag" in text, text
args = [np.random.default_rng(0).standard_normal((2, 16, 16)).astype("float32") for _ in range(2)]
out = np.zeros((2, 16, 16), "float32")
tir.build(best, "llvm")(*args, out)
np.testing.assert_allclose(out, np.einsum("bik,bjk->bij", *args), rtol=1e-4, atol=1e-4)
from metasched.search.parallel import shared_maker
maker = shared_maker()
# The candidates were made in the worker processes: none died on what it was sent.
assert not maker._broken, "a candidate-making process died"
print("OK", maker.workers)
'''


def _run_script(tmp_path: Path, source: str, *args: str, timeout: float = 240.0) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "user_script.py"
    script.write_text(textwrap.dedent(source))
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=tmp_path,
        env=environment,
    )


def test_an_intrinsic_registered_in_main_reaches_the_default_workers(tmp_path: Path) -> None:
    done = _run_script(tmp_path, USER_SCRIPT, "intrinsic")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("OK")


def test_postprocessor_rule_and_cost_model_defined_in_main_reach_the_workers(tmp_path: Path) -> None:
    done = _run_script(tmp_path, USER_SCRIPT, "objects")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("OK")
    assert "died" not in done.stderr, done.stderr[-3000:]


def test_a_module_the_workers_cannot_import_is_one_clear_line(tmp_path: Path) -> None:
    # The intrinsic's check lives in a module that exists while the script registers it and is
    # gone when the workers start: they cannot import it.
    (tmp_path / "user_checks.py").write_text("def always(target):\n    return True\n")
    source = USER_SCRIPT.replace(
        'TensorIntrin.register("user_dot_4x4x4", desc, impl, extra_check=lambda target: True)',
        "import os, shutil, user_checks\n"
        'TensorIntrin.register("user_dot_4x4x4", desc, impl, extra_check=user_checks.always)\n'
        'os.remove("user_checks.py"); shutil.rmtree("__pycache__", ignore_errors=True)',
    )
    done = _run_script(tmp_path, source, "intrinsic")
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert "RegistrationError" in last and "'user_checks'" in last and "tensor intrinsic 'user_dot_4x4x4'" in last, (
        done.stderr[-3000:]
    )


def test_capture_holds_only_what_was_registered_at_run_time() -> None:
    import tir.script as T
    from tir.intrin import TensorIntrin

    TensorIntrin.list()  # the built-ins are loaded
    before = registrations.capture()
    before_labels = before.labels if before is not None else []
    assert not any("x86_avx2" in label or "neon" in label for label in before_labels)

    @T.script
    def copy4(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        with T.block("root"):
            T.reads(A[0:4])
            T.writes(B[0:4])
            for i in range(4):
                with T.block("B"):
                    vi = T.spatial_axis(4, i)
                    B[vi] = A[vi]

    TensorIntrin.register("test_capture_copy4", copy4, copy4, override=True)
    try:
        captured = registrations.capture()
        assert captured is not None
        assert "tensor intrinsic 'test_capture_copy4'" in captured.labels
        assert registrations.capture() is captured  # unchanged registries: the same payload
    finally:
        from tir.intrin import _REGISTRY

        del _REGISTRY["test_capture_copy4"]
        registrations.changed()


class _NeedsAMissingModule:
    def __reduce__(self) -> tuple[object, ...]:
        return (importlib.import_module, ("no_such_module_here",))


def test_a_measuring_worker_that_cannot_install_stops_the_batch() -> None:
    import tir.script as T

    @T.script
    def add_one(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
        for i in range(8):
            with T.block("B"):
                vi = T.spatial_axis(8, i)
                B[vi] = A[vi] + 1.0

    # An entry whose unpickling imports a module no process has.
    broken = registrations.Registrations(
        (("tir.intrin", "tensor intrinsic 'gone'", pickle.dumps(_NeedsAMissingModule())),), "broken-digest"
    )
    pool = LocalPool(workers=1)
    try:
        job = Job(encode_program(add_one), "llvm", None, None, None, 1, registrations=broken)
        with pytest.raises(
            RegistrationError, match="cannot import module 'no_such_module_here', needed by tensor intrinsic 'gone'"
        ):
            pool.measure([job])
    finally:
        pool.close()
