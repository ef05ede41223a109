"""Every program defined at module level in tests/ and examples/ prints text that parses back.

Programs built inside test functions are checked by their own tests; this sweep makes sure no
module-level kernel escapes the round trip.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

import tir

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(
    path
    for folder in (ROOT / "tests", ROOT / "examples")
    for path in folder.rglob("*.py")
    if path.name != "conftest.py" and path.resolve() != Path(__file__).resolve()
)


def _load(path: Path) -> object:
    name = "roundtrip_sweep_" + "_".join(path.relative_to(ROOT).with_suffix("").parts)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is made
    sys.path.insert(0, str(path.parent))  # test helpers import their siblings
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(path.parent))
    return module


def _programs() -> list[tuple[str, tir.PrimFunc]]:
    found: dict[int, tuple[str, tir.PrimFunc]] = {}
    for path in SOURCES:
        module = _load(path)
        for attr, value in vars(module).items():
            funcs = value.functions.values() if isinstance(value, tir.IRModule) else [value]
            for func in funcs:
                if isinstance(func, tir.PrimFunc):
                    found.setdefault(id(func), (f"{path.relative_to(ROOT)}::{attr}", func))
    return sorted(found.values(), key=lambda item: item[0])


PROGRAMS = _programs()


def test_the_sweep_finds_programs() -> None:
    assert len(PROGRAMS) >= 20


@pytest.mark.parametrize("name,func", PROGRAMS, ids=[name for name, _ in PROGRAMS])
def test_module_level_program_round_trips(name: str, func: tir.PrimFunc) -> None:
    text = func.script()
    again = tir.parse(text)
    tir.assert_structural_equal(again, func)
    assert tir.structural_hash(again) == tir.structural_hash(func)
    assert again.script() == text
