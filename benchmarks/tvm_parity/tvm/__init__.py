"""A stand-in ``tvm`` package that maps the API TVM's schedule tests use onto this repository's ``tir``.

Test tooling for ``benchmarks/tvm_parity/run.py`` only: nothing in ``tir/`` or ``metasched/`` imports
it, and it is importable only when ``run.py`` puts ``benchmarks/tvm_parity`` on ``PYTHONPATH`` of the
pytest subprocess that runs one of TVM's test files. It contains no TVM code; the names it provides
are our own objects or thin wrappers (see ``tvm._impl``).

Every ``tvm.*`` (and ``tvm_ffi.*``) module that the shim does not define is created on import as an
empty module whose unknown attributes are ``Missing`` placeholders: importing them works, so a test
file can be collected, and any *use* raises ``NoCounterpart``, which the plugin counts as
"no-counterpart" for that test case only.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any, NoReturn


class NoCounterpart(Exception):
    """The test used a TVM API that the shim or this repository does not have."""


class Missing:
    """Placeholder for a TVM name with no counterpart; any use raises ``NoCounterpart``."""

    def __init__(self, path: str) -> None:
        object.__setattr__(self, "_path", path)

    def _fail(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise NoCounterpart(f"no counterpart: {self._path}")

    __call__ = _fail

    def __getattr__(self, name: str) -> Missing:
        if name.startswith("__"):
            raise AttributeError(name)
        return Missing(f"{self._path}.{name}")

    def __getitem__(self, key: Any) -> NoReturn:
        self._fail()

    def __iter__(self) -> NoReturn:
        self._fail()

    def __bool__(self) -> NoReturn:
        self._fail()

    def __repr__(self) -> str:
        return f"Missing({self._path})"


def _stub_getattr(modname: str) -> Any:
    def __getattr__(name: str) -> Missing:
        if name.startswith("_"):
            raise AttributeError(name)
        return Missing(f"{modname}.{name}")

    return __getattr__


def _module(name: str, **attrs: Any) -> types.ModuleType:
    """The module ``name`` (created as a stub package if it does not exist yet), with ``attrs`` set on it."""
    mod = sys.modules.get(name)
    if mod is None:
        mod = types.ModuleType(name)
        mod.__path__ = []
        mod.__getattr__ = _stub_getattr(name)  # type: ignore[method-assign]
        sys.modules[name] = mod
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(_module(parent), child, mod)
    for key, value in attrs.items():
        setattr(mod, key, value)
    return mod


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Last on ``sys.meta_path``: any ``tvm.*`` / ``tvm_ffi.*`` module not found on disk becomes a stub."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname.startswith("tvm.") or fullname == "tvm_ffi" or fullname.startswith("tvm_ffi."):
            if fullname in sys.modules:
                return None
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _module(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def __getattr__(name: str) -> Missing:
    if name.startswith("_"):
        raise AttributeError(name)
    return Missing(f"tvm.{name}")


sys.meta_path.append(_StubFinder())

# Imported last: tvm._impl uses the names above and fills in tvm.tir, tvm.s_tir, tvm.script, ...
_impl = importlib.import_module("tvm._impl")
WrongResult = _impl.WrongResult
