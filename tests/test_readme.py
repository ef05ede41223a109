"""README.md stays true: its Python snippets run, and CI runs its test command."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_python_snippets_run(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    snippets = re.findall(r"```python\n(.*?)```", README, re.S)
    assert snippets, "README.md has no python snippet"
    script = tmp_path / "readme_snippet.py"
    script.write_text("\n".join(snippets))  # later snippets continue the first one
    runpy.run_path(str(script), run_name="__main__")
    out = capsys.readouterr().out
    assert "T.reads(C[vi, vj], A[vi, vk], B[vk, vj])" in out
    assert "sch.reverse_compute_at(" in out


def test_ci_runs_the_readme_test_command() -> None:
    commands = re.findall(r"```sh\n(.*?)\n```", README, re.S)
    test_command = next(c for c in commands if "pytest" in c)
    assert test_command in (ROOT / ".ci" / "run").read_text()
    assert any("examples/quickstart.py" in c for c in commands)
