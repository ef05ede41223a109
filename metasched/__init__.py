"""metasched: the meta-scheduler (tuning). Empty until the tuning issues land."""

from __future__ import annotations

__version__ = "0.1.0"
