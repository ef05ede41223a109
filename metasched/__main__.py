"""``python -m metasched``: the same command line as the ``metasched`` script."""

from __future__ import annotations

from metasched.cli import main

raise SystemExit(main())
