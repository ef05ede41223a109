"""The CUDA tests import their helpers from this folder (the nvcc and sass_tool fixtures are in
tests/conftest.py, shared with the tuner's CUDA space tests)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
