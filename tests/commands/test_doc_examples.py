"""Every Python example a reader meets first runs: the ```python blocks of docs/*.md and the
indented example in ppo_control.api's docstring, with their step budgets cut short."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import ppo_control.api
from tests.helpers import ROOT


def doc_blocks() -> list[tuple[str, str]]:
    blocks = []
    for page in sorted((ROOT / "docs").glob("*.md")):
        for i, code in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.DOTALL)):
            blocks.append((f"{page.name}[{i}]", code))
    docstring = ppo_control.api.__doc__
    example = re.search(r"\n\n((?:    .*\n|\n)+)", docstring)
    assert example, "ppo_control.api's docstring lost its example"
    blocks.append(("ppo_control.api docstring", textwrap.dedent(example.group(1))))
    return blocks


def shortened(code: str) -> str:
    """Budgets a test can afford: the first total_steps becomes 2,048 and each later one (a resume
    that continues the run) 2,048 more; 16 sub-envs become 4."""
    budgets = iter(range(2048, 100 * 2048, 2048))
    code = re.sub(r"total_steps=[\d_]+", lambda _: f"total_steps={next(budgets)}", code)
    return code.replace('"env.n_envs": 16', '"env.n_envs": 4')


def test_the_docs_have_examples() -> None:
    names = [name for name, _ in doc_blocks()]
    assert "python-api-guide.md[0]" in names and "ppo_control.api docstring" in names


@pytest.mark.slow
@pytest.mark.parametrize("name,code", doc_blocks(), ids=[name for name, _ in doc_blocks()])
def test_example_runs(name: str, code: str, tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-c", shortened(code)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{name}:\n{result.stderr[-3000:]}"
