"""Test helper: ``examples/<name>.py`` imported as a module, for tests that reuse what an
example defines (examples/ is not a package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

EXAMPLES_DIR = Path(__file__).resolve().parents[1] / "examples"


def load_example(name: str) -> ModuleType:
    """``examples/<name>.py`` as the module ``tir_examples_<name>``, executed once per process."""
    module_name = f"tir_examples_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    # Examples import their harness (``_common``) top-level, as `python examples/x.py` allows.
    if str(EXAMPLES_DIR) not in sys.path:
        sys.path.insert(0, str(EXAMPLES_DIR))
    spec = importlib.util.spec_from_file_location(module_name, EXAMPLES_DIR / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module
