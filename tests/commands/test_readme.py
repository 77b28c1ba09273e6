"""The README is the front page: short, its links resolve, and the commands it shows exist and run."""

import re
import subprocess
import sys

import pytest

from tests.helpers import ROOT, TINY

README = ROOT / "README.md"
GETTING_STARTED = ROOT / "docs" / "getting-started.md"
MAX_LINES = 250

FENCE = re.compile(r"^```[^\n]*\n.*?^```", re.MULTILINE | re.DOTALL)
BASH_BLOCK = re.compile(r"^```(?:bash|sh|shell)\n(.*?)^```", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
MODULE = re.compile(r"-m ppo_control\.(\w+)")


def _relative_links(text: str) -> list[str]:
    prose = INLINE_CODE.sub("", FENCE.sub("", text))
    targets = [m.group(1) for m in LINK.finditer(prose)]
    return [t for t in targets if not re.match(r"^([a-z][a-z0-9+.-]*:|#)", t)]


def _readme_bash_commands() -> list[str]:
    """The distinct ppo_control command modules run in the README's bash code blocks."""
    commands = []
    for block in BASH_BLOCK.findall(README.read_text()):
        for cmd in re.findall(r"python -m ppo_control\.(\w+)", block):
            if cmd not in commands:
                commands.append(cmd)
    return commands


def test_readme_is_a_front_page():
    lines = README.read_text().count("\n")
    assert lines <= MAX_LINES, f"README.md has {lines} lines; keep it to {MAX_LINES} and move details to docs/"


def test_every_relative_link_in_the_readme_exists():
    links = _relative_links(README.read_text())
    assert links, "the README links the documentation"
    missing = [t for t in links if not (ROOT / t.split("#", 1)[0]).exists()]
    assert missing == []


def test_the_readme_links_every_docs_page_and_the_results():
    linked = {t.split("#", 1)[0] for t in _relative_links(README.read_text())}
    pages = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")}
    assert pages - linked == set()
    assert "benchmarks/results/README.md" in linked


@pytest.mark.parametrize("page", [README, GETTING_STARTED], ids=lambda p: p.name)
def test_every_command_module_named_exists(page):
    modules = set(MODULE.findall(page.read_text()))
    assert modules, f"{page.name} shows the commands"
    missing = sorted(m for m in modules if not (ROOT / "ppo_control" / f"{m}.py").is_file())
    assert missing == []


def test_the_readme_shows_the_test_command_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text()
    ci_pytest = [line.strip() for line in ci.splitlines() if line.strip().startswith("python -m pytest")]
    assert ci_pytest == ["python -m pytest -q -n 2 --dist loadfile"]
    bash = "\n".join(BASH_BLOCK.findall(README.read_text()))
    assert ci_pytest[0] in bash.splitlines()


@pytest.mark.parametrize("cmd", _readme_bash_commands())
def test_each_readme_command_answers_help(cmd):
    result = subprocess.run([sys.executable, "-m", f"ppo_control.{cmd}", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()


def test_the_readme_runs_every_command():
    assert set(_readme_bash_commands()) >= {"train", "evaluate", "export", "robustness", "sim2sim", "plot", "benchmark", "tasks"}


# What each first-run command gets appended so it runs in seconds; the command as shown stays intact.
SHORT = {
    "train": [*TINY, "total_steps=256", "eval.episodes=1", "eval.video_width=64", "eval.video_height=64"],
    "evaluate": ["episodes=1"],
}


def _concrete_commands(text: str) -> list[str]:
    """The concrete `python -m ppo_control.<cmd> ...` lines (no <placeholders> or [options]) of the
    text's bash blocks, in order, comments and `pip install` steps dropped."""
    lines = []
    for block in BASH_BLOCK.findall(text):
        for line in block.splitlines():
            command = line.split("#", 1)[0].split("&&")[-1].strip()
            if command.startswith("python -m ppo_control.") and "<" not in command and "[" not in command:
                lines.append(command)
    return lines


def first_run_commands() -> list[str]:
    """The README's "First run" section, then the Getting started page, each distinct command once."""
    readme = README.read_text()
    section = readme[readme.index("## First run") :]
    section = section[: section.index("\n## ", 1)]
    commands = []
    for command in _concrete_commands(section) + _concrete_commands(GETTING_STARTED.read_text()):
        if command not in commands:
            commands.append(command)
    return commands


@pytest.mark.slow
def test_first_run_commands_run(tmp_path):
    """The first run as a newcomer types it: train, evaluate with a video, export (TorchScript and
    ONNX), in one directory, with a short budget (and small video frames) added to train and evaluate."""
    commands = first_run_commands()
    shown = " ".join(commands)
    assert "ppo_control.train" in shown and "video=true" in shown and "format=onnx" in shown
    for command in commands:
        argv = command.split()[2:]  # after `python -m`
        module = argv[0].removeprefix("ppo_control.")
        result = subprocess.run(
            [sys.executable, "-m", *argv, *SHORT.get(module, [])], cwd=tmp_path, capture_output=True, text=True, timeout=300
        )
        assert result.returncode == 0, f"{command}:\n{result.stderr[-2000:]}"
