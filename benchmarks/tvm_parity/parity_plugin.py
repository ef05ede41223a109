"""pytest plugin for the TVM parity benchmark: classify each TVM test case run against the ``tvm`` shim.

Loaded by ``run.py`` with ``-p parity_plugin`` in the pytest subprocess that runs one of TVM's test
files; it appends one JSON line per test case to ``$PARITY_OUT``:
``{"file", "test", "class", "msg", "notes", "phase"}``. The classes:

- ``pass``: our result is structurally equal to TVM's expected program, or numerically equal to it
  under our interpreter on random inputs (see ``tvm._impl.numeric_compare``); also a test that runs
  to its end without comparing anything. A case that compared at least once and then failed on a
  missing API stays ``pass`` with a ``partial: ...`` note;
- ``refused``: TVM accepts the schedule, we raise (a ``ScheduleError``, or another exception raised
  inside ``tir/schedule``); ``neg-refused-early``: the same inside a negative test, before the
  statement the test expects to fail; ``refused-tvm-differs``: a refusal where TVM's own expected
  result computes other numbers than the program the test scheduled (checked here, under our
  interpreter, on random inputs and on inputs with ties; the note gives the difference), so TVM
  changed the program's meaning and refusing is right;
- ``wrong``: our program computes different numbers (or a different signature) than TVM's expected one;
- ``negative-accepted``: a ``pytest.raises`` test where we accept what TVM refuses; the notes say
  whether the accepted result still computes the same numbers as the input program;
- ``no-counterpart``: the test needs something we do not have (a TVM API, a parse of a construct our
  dialect lacks, a shim gap);
- ``timeout``: over the per-test alarm (``PARITY_TEST_TIMEOUT``, default 60 s) or, written by
  ``run.py``, over the per-file timeout;
- ``uncomparable``: the interpreter cannot judge (both programs fail, or inputs too large);
- ``other-assert`` / ``other-error``: a failing assertion of the test itself, an error in another part
  of ``tir/``; ``skipped``; ``collect-error``: the file did not collect.

At run time it replaces ``pytest.raises`` (in the subprocess only) with a version that counts any
exception raised from ``tir/`` as a refusal, but not parse errors or shim gaps, and that, when a
negative test is accepted, compares the accepted result against the original program.
"""

from __future__ import annotations

import inspect
import json
import os
import signal
import traceback
from pathlib import Path
from typing import Any

import pytest

OUT = os.environ.get("PARITY_OUT", "parity_results.jsonl")
PER_TEST = int(os.environ.get("PARITY_TEST_TIMEOUT", "60"))
SHIM_DIR = str(Path(__file__).resolve().parent)
_TIR_DIR: str | None = None  # this repository's tir/ package, resolved at configure time


class PerTestTimeout(BaseException):
    """Raised by the per-test alarm; a BaseException so that tests' ``except Exception`` do not swallow it."""


def _alarm(signum: int, frame: Any) -> None:
    raise PerTestTimeout(f"over {PER_TEST} s")


def _first_line(e: BaseException) -> str:
    s = str(e).strip()
    return f"{type(e).__name__}: {s.splitlines()[0] if s else ''}"


def _from_tir(tb: Any) -> str | None:
    """The innermost traceback frame inside ``tir/``, as its subpackage ('script', 'schedule', ...) or None."""
    where = None
    for fr in traceback.extract_tb(tb):
        filename = os.path.realpath(fr.filename)
        if _TIR_DIR is not None and filename.startswith(_TIR_DIR + os.sep):
            where = filename[len(_TIR_DIR) + 1 :].split(os.sep)[0]
    return where


class _Raises:
    """Stand-in for ``pytest.raises``: which exceptions count as our refusal (see the module docstring)."""

    def __init__(self, expected: Any, *args: Any, match: str | None = None, **kwargs: Any) -> None:
        self.expected = expected
        self.value: BaseException | None = None
        self.type: type | None = None

    def __enter__(self) -> _Raises:
        return self

    def __exit__(self, et: Any, ev: Any, tb: Any) -> bool:
        import tvm
        from tvm._impl import Uncomparable, check_accepted_against_original, note

        if et is None:
            check_accepted_against_original()
            pytest.fail("DID NOT RAISE (negative test accepted)")
        if issubclass(et, (tvm.NoCounterpart, PerTestTimeout, tvm.WrongResult, Uncomparable)):
            return False
        self.value, self.type = ev, et
        where = _from_tir(tb)
        if where == "script":
            return False  # a parse error is not a refusal
        expected = self.expected if isinstance(self.expected, (tuple, type)) else Exception
        if isinstance(ev, expected):
            note(f"negative test: refused with {_first_line(ev)}")
            return True
        if where is not None:
            note(f"negative test: refused with a different exception type: {_first_line(ev)}")
            return True
        return False


def _raises(expected: Any, *args: Any, **kwargs: Any) -> _Raises | None:
    if args and callable(args[0]):
        with _Raises(expected):
            args[0](*args[1:], **{k: v for k, v in kwargs.items() if k != "match"})
        return None
    return _Raises(expected, **kwargs)


def pytest_configure(config: pytest.Config) -> None:
    global _TIR_DIR
    import tvm  # noqa: F401  (installs the stub finder before test modules import tvm_ffi etc.)

    import tir

    _TIR_DIR = str(Path(tir.__file__).resolve().parent)
    pytest.raises = _raises  # type: ignore[assignment]


def _write(rec: dict[str, Any]) -> None:
    with open(OUT, "a") as f:
        f.write(json.dumps(rec) + "\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    from tvm._impl import NOTES, SCHEDULES

    NOTES.clear()
    SCHEDULES.clear()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(PER_TEST)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def classify(excinfo: Any) -> tuple[str, str]:
    """The class and message of one test case's outcome (None: it ran to its end)."""
    import tvm
    from tvm._impl import Uncomparable

    import tir

    if excinfo is None:
        return "pass", ""
    e = excinfo.value
    tb = excinfo.tb
    if isinstance(e, PerTestTimeout):
        return "timeout", str(e)
    if isinstance(e, tvm.WrongResult):
        return "wrong", _first_line(e)
    if isinstance(e, pytest.fail.Exception) and "DID NOT RAISE" in str(e):
        return "negative-accepted", ""
    if isinstance(e, Uncomparable):
        return "uncomparable", _first_line(e)
    if isinstance(e, tvm.NoCounterpart):
        return "no-counterpart", str(e).splitlines()[0]
    if isinstance(e, tir.ScheduleError):
        return "refused", _first_line(e)
    where = _from_tir(tb)
    if where == "script":
        return "no-counterpart", "parse: " + _first_line(e)
    if where == "schedule":
        return "refused", "(non-ScheduleError raised in tir/schedule) " + _first_line(e)
    if where is not None:
        return "other-error", f"(in tir/{where}) " + _first_line(e)
    # an error in the test or in the shim itself
    fr = traceback.extract_tb(tb)[-1]
    loc = "shim" if os.path.realpath(fr.filename).startswith(SHIM_DIR + os.sep) else os.path.basename(fr.filename)
    if isinstance(e, AssertionError):
        return "other-assert", f"({loc}:{fr.lineno}) " + _first_line(e)
    return "no-counterpart", f"({loc}:{fr.lineno}) " + _first_line(e)


_ASSERT_NAMES = ("assert_structural_equal_ignore_global_symbol", "assert_structural_equal")


def _tvm_expected_differs(item: pytest.Item) -> str | None:
    """For a refused case: whether TVM's own expected result computes other numbers than the
    program the schedule started from (then TVM changed the program's meaning, and the refusal
    is right), as a note, or None.

    The starting program is the first ``Schedule`` the test made. The expected programs are the
    module-level functions the test compares a result with (``assert_structural_equal*``
    arguments); a test without such a call (one that compares computed arrays) names them
    otherwise, so then every module-level function it uses other than the starting one counts,
    and the starting program must differ from each of them."""
    import ast
    import textwrap

    from tvm._impl import SCHEDULES, _as_func, expected_differs

    if not SCHEDULES:
        return None
    original = SCHEDULES[0][0]
    function = getattr(item, "function", None)
    if function is None:
        return None
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return None
    scope = function.__globals__

    def program(name: str) -> Any:
        value = scope.get(name)
        try:
            func = _as_func(value) if value is not None else None
        except Exception:  # noqa: BLE001 (a placeholder for a script our parser rejects)
            return None
        return None if func is None or func is original else func

    compared: list[str] = []
    used: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            used.append(node.id)
        if isinstance(node, ast.Call):
            callee = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if callee in _ASSERT_NAMES:
                compared += [a.id for a in node.args if isinstance(a, ast.Name)]
    names = list(dict.fromkeys(compared or used))
    programs = [(name, program(name)) for name in names]
    programs = [(name, func) for name, func in programs if func is not None]
    if not programs:
        return None
    reasons = []
    for name, func in programs:
        reason = expected_differs(original, func)
        if reason is None:
            return None
        reasons.append(f"{name} {reason}")
    return "TVM's expected result differs from the input program: " + "; ".join(reasons)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    yield
    if call.when == "call" or (call.when == "setup" and call.excinfo is not None):
        from tvm._impl import NOTES

        if call.excinfo is not None and call.excinfo.errisinstance(pytest.skip.Exception):
            cls, msg = "skipped", str(call.excinfo.value)[:200]
        else:
            cls, msg = classify(call.excinfo)
            if cls in ("no-counterpart", "other-error", "other-assert") and "numeric-compared" in NOTES:
                NOTES.append(f"partial: a later part of the test failed: {msg}")
                cls = "pass"
            if cls == "refused":
                try:
                    if "pytest.raises" in inspect.getsource(item.function):  # type: ignore[attr-defined]
                        cls = "neg-refused-early"
                except (OSError, TypeError, AttributeError):
                    pass
            if cls == "refused":
                differs = _tvm_expected_differs(item)
                if differs is not None:
                    cls = "refused-tvm-differs"
                    NOTES.append(differs)
        _write(
            {
                "file": os.path.basename(str(item.fspath)),
                "test": item.name,
                "class": cls,
                "msg": msg,
                "notes": list(dict.fromkeys(NOTES)),
                "phase": call.when,
            }
        )


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.failed:
        _write(
            {
                "file": os.path.basename(str(report.fspath)),
                "test": "<collection>",
                "class": "collect-error",
                "msg": str(report.longrepr).strip().splitlines()[-1][:300],
                "notes": [],
            }
        )
