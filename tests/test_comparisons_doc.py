"""docs/comparisons.md: its worked example runs as written and prints what the page quotes."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "comparisons.md"


@pytest.mark.slow
def test_the_worked_example_prints_what_the_page_quotes(tmp_path: Path) -> None:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## A worked example on the mock server", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    quoted = re.search(r"```text\n(.*?)```", section, re.DOTALL)
    assert code is not None and quoted is not None
    script = tmp_path / "example.py"
    script.write_text(code.group(1), encoding="utf-8")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == quoted.group(1)
