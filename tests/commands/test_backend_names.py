"""Outside envs/ no module compares a backend's name: the rest of the package asks the backend
objects (their capabilities, check_config, describe) and composition reads a backend's regime by
file, so a new backend is a class in envs/backends.py and, if it needs one, a regime file."""

from __future__ import annotations

import ast

from ppo_control.config.schema import BACKENDS
from tests.helpers import ROOT


def _compared_names(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                if isinstance(operand, ast.Constant) and operand.value in BACKENDS:
                    found.append((node.lineno, operand.value))
    return found


def test_no_module_outside_envs_compares_a_backends_name():
    package = ROOT / "ppo_control"
    found = [
        f"{path.relative_to(ROOT)}:{line} compares with '{name}'"
        for path in sorted(package.rglob("*.py"))
        if "envs" not in path.relative_to(package).parts[:1]
        for line, name in _compared_names(ast.parse(path.read_text(encoding="utf-8")))
    ]
    assert not found, "\n".join(found)


def test_the_check_finds_a_comparison():
    assert _compared_names(ast.parse('if cfg.env.backend == "mjx":\n    pass\n')) == [(1, "mjx")]
