"""Small units: in ppo_control/, no function over 60 lines, no class over 250 lines, no function
with more than 8 parameters (self and cls not counted; a dataclass's generated constructor is not
in the source, so it is not counted either). A unit over a limit is split along what it does, and
arguments that travel together become a small dataclass."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = next(path for path in Path(__file__).resolve().parents if (path / "pyproject.toml").is_file())
PACKAGE = ROOT / "ppo_control"
MAX_FUNCTION_LINES = 60
MAX_CLASS_LINES = 250
MAX_PARAMETERS = 8


def parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    args = node.args
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    names += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
    return [name for name in names if name not in ("self", "cls")]


def offenders(tree: ast.AST, where: str) -> list[str]:
    """Every unit of `tree` over a limit, as '<where>:<line> <kind> <name>: <what>'."""
    found = []
    for node in ast.walk(tree):
        lines = getattr(node, "end_lineno", 0) - getattr(node, "lineno", 0) + 1
        if isinstance(node, ast.ClassDef) and lines > MAX_CLASS_LINES:
            found.append(f"{where}:{node.lineno} class {node.name}: {lines} lines > {MAX_CLASS_LINES}")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if lines > MAX_FUNCTION_LINES:
                found.append(f"{where}:{node.lineno} def {node.name}: {lines} lines > {MAX_FUNCTION_LINES}")
            count = len(parameters(node))
            if count > MAX_PARAMETERS:
                found.append(f"{where}:{node.lineno} def {node.name}: {count} parameters > {MAX_PARAMETERS}")
    return found


def package_offenders() -> list[str]:
    return [
        offender
        for path in sorted(PACKAGE.rglob("*.py"))
        for offender in offenders(ast.parse(path.read_text(), str(path)), str(path.relative_to(ROOT)))
    ]


def test_no_function_class_or_parameter_list_in_the_package_is_over_its_limit():
    found = package_offenders()
    assert not found, f"{len(found)} units over a limit:\n" + "\n".join(found)


def test_the_check_sees_each_limit_and_leaves_self_and_dataclasses_out():
    long_body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))  # + the def line: one over
    methods = "\n".join(f"    def m{i}(self):\n" + "\n".join(f"        y = {j}" for j in range(20)) for i in range(12))
    source = (
        f"def long():\n{long_body}\n"
        "def wide(a, b, c, d, e, f, g, h, i):\n    pass\n"
        "class A:\n    def eight(self, a, b, c, d, e, f, g, h):\n        pass\n"
        "    @classmethod\n    def also_eight(cls, *a, b, c, d, e, f, g, **h):\n        pass\n"
        f"class Big:\n{methods}\n"
        "from dataclasses import dataclass\n@dataclass\nclass Fields:\n" + "\n".join(f"    f{i}: int = 0" for i in range(20)) + "\n"
    )
    found = offenders(ast.parse(source), "x.py")
    assert [line.split(" ", 1)[1] for line in found] == [
        f"def long: {MAX_FUNCTION_LINES + 1} lines > {MAX_FUNCTION_LINES}",
        f"def wide: 9 parameters > {MAX_PARAMETERS}",
        f"class Big: 253 lines > {MAX_CLASS_LINES}",
    ]


def test_the_package_is_where_the_check_looks():
    assert (PACKAGE / "__init__.py").is_file() and len(list(PACKAGE.rglob("*.py"))) > 50
