"""The package's imports flow one way, folder by folder: config -> robots -> envs -> rl -> runs ->
rendering -> training -> deploy -> analysis -> the commands and the API at the top. A module may
import from its own folder and the folders before it, never from a later one, and no modules import
each other in a circle."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers import ROOT

PACKAGE = ROOT / "ppo_control"
# Bottom to top. The top-level modules (the commands, the API, the package itself) come last.
LAYERS = ("config", "robots", "envs", "rl", "runs", "rendering", "training", "deploy", "analysis", "")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str) -> int:
    folder = module.split(".")[0] if "." in module or (PACKAGE / module).is_dir() else ""
    assert folder in LAYERS, f"ppo_control/{folder} is in no layer: add it to LAYERS"
    return LAYERS.index(folder)


def imported_modules(tree: ast.AST, modules: set[str]) -> set[str]:
    """ppo_control modules a file imports (`from ppo_control.x import y` counts as x.y when y is a module)."""
    found = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "ppo_control":
            base = node.module.removeprefix("ppo_control").removeprefix(".")
            names = [f"{base}.{alias.name}".strip(".") for alias in node.names]
            names = [name if name in modules else base for name in names]  # base '' is the package itself
        elif isinstance(node, ast.Import):
            names = [alias.name.removeprefix("ppo_control.") for alias in node.names if alias.name.startswith("ppo_control.")]
        found.update(names)
    return found


def import_graph() -> dict[str, set[str]]:
    paths = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    modules = set(paths)
    return {module: imported_modules(ast.parse(path.read_text()), modules) - {module} for module, path in paths.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_import_points_to_an_earlier_or_the_same_folder():
    upward = [
        f"{module} imports {target}"
        for module, targets in import_graph().items()
        for target in targets
        if layer_of(target) > layer_of(module)
    ]
    assert not upward, upward


def test_no_modules_import_each_other_in_a_circle():
    assert cycles(import_graph()) == []


def test_the_checks_see_an_upward_import_and_a_circle():
    modules = {"training.trainer", "plot", "envs.registry", "rl.policy"}
    tree = ast.parse("from ppo_control.training.trainer import Trainer\nimport ppo_control.plot\n")
    assert {layer_of(target) for target in imported_modules(tree, modules)} == {LAYERS.index("training"), LAYERS.index("")}
    assert layer_of("envs.registry") == LAYERS.index("envs")
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# Backends are objects the registry holds (envs/registry.py): outside envs/ a module asks them
# (`backend_of(env_cfg).capabilities`, `reference_of(env_cfg)`) rather than comparing their names or
# importing a backend's module. config/ validates env.backend itself and is being split: its
# comparisons are still allowed here.
NAME_COMPARISONS_ALLOWED_IN = ("envs", "config")


def backend_name_comparisons(tree: ast.AST, names: set[str]) -> list[int]:
    """Lines where a comparison has a backend's name (or a tuple, list or set of them) on either side."""

    def names_a_backend(node: ast.AST) -> bool:
        if isinstance(node, ast.Constant):
            return node.value in names
        return isinstance(node, (ast.Tuple, ast.List, ast.Set)) and any(names_a_backend(e) for e in node.elts)

    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Compare) and any(names_a_backend(side) for side in (node.left, *node.comparators))
    ]


def backend_names() -> set[str]:
    from ppo_control.envs.registry import BACKENDS

    return set(BACKENDS)


def test_outside_envs_no_module_compares_a_backends_name():
    names = backend_names()
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in PACKAGE.rglob("*.py")
        if path.relative_to(PACKAGE).parts[0] not in NAME_COMPARISONS_ALLOWED_IN
        for line in backend_name_comparisons(ast.parse(path.read_text()), names)
    ]
    assert not found, found


def test_outside_envs_no_module_imports_a_backends_module():
    graph = import_graph()
    backends = {module for module in graph if module.startswith("envs.") and module.endswith("_backend")}
    assert {"envs.gymnasium_backend", "envs.envpool_backend", "envs.mjx_backend"} <= backends
    found = [
        f"{module} imports {target}" for module, targets in graph.items() if module.split(".")[0] != "envs" for target in targets & backends
    ]
    assert not found, found


def test_the_check_sees_a_backend_name_compared():
    names = {"mjx", "envpool"}
    tree = ast.parse('a = cfg.env.backend == "mjx"\nb = x in ("envpool", "other")\nc = "mjx" != y\nd = platform in ("egl", "osmesa")\n')
    assert backend_name_comparisons(tree, names) == [1, 2, 3]
