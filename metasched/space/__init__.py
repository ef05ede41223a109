"""metasched.space: the design space -- sketches from sketch rules, and postprocessors.

    from metasched.space import SpaceGenerator
    space = SpaceGenerator()
    sketches = space.generate(func, "llvm")     # Traces with sampling instructions
    postprocs = space.postprocs_for("llvm")

docs/metasched.md states the contracts; ``rules/`` holds one module per sketch rule,
``postproc/`` one module per postprocessor.
"""

from __future__ import annotations

from metasched.space.generator import SpaceGenerator
from metasched.space.postproc import Postproc, PostprocError, default_postprocs
from metasched.space.rules import SketchRule, default_rules

__all__ = ["Postproc", "PostprocError", "SketchRule", "SpaceGenerator", "default_postprocs", "default_rules"]
