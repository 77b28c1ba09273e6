"""The package's imports flow one way: config -> envs -> algorithm -> runs -> training -> deploy,
analysis and commands. A module may import from its own layer and the layers before it, never
from a later one (the run directory comes before the training loop because the trainer writes
through it)."""

from __future__ import annotations

import ast

from conftest import ROOT

LAYERS = [
    ("config", {"errors", "resources", "config", "locks"}),
    ("envs", {"randomization", "observations", "partial_observation", "envs"}),
    (
        "algorithm",
        {
            "normalization",
            "history",
            "policy",
            "storage",
            "ppo",
            "distributed",
            "collector",
            "device_collector",
            "checkpoint",
            "evaluation",
        },
    ),
    ("runs", {"run_layout", "metrics", "runs", "run_state", "video"}),
    ("training", {"trainer"}),
    (
        "deploy, analysis, commands",
        {
            "__init__",
            "contract",
            "deploy",
            "export",
            "loaded_policy",
            "controller",
            "robustness",
            "sim2sim",
            "plot",
            "benchmark",
            "tasks",
            "api",
            "train",
            "evaluate",
        },
    ),
]


def layer_of(module: str) -> int:
    top = module.split(".")[0]
    for index, (_, members) in enumerate(LAYERS):
        if top in members:
            return index
    raise AssertionError(f"ppo_control.{module} belongs to no layer: add it to LAYERS")


def imported_modules(tree: ast.AST) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("ppo_control."):
            found.add(node.module.removeprefix("ppo_control."))
        elif isinstance(node, ast.ImportFrom) and node.module == "ppo_control":
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name.removeprefix("ppo_control.") for alias in node.names if alias.name.startswith("ppo_control."))
    return found


def test_every_import_points_to_an_earlier_or_the_same_layer():
    package = ROOT / "ppo_control"
    backwards = []
    for path in sorted(package.rglob("*.py")):
        module = ".".join(path.relative_to(package).with_suffix("").parts)
        own = layer_of(module)
        for target in imported_modules(ast.parse(path.read_text())):
            if target == "__version__":
                continue
            if layer_of(target) > own:
                backwards.append(f"{module} ({LAYERS[own][0]}) imports {target} ({LAYERS[layer_of(target)][0]})")
    assert not backwards, backwards


def test_the_check_sees_a_backward_import():
    tree = ast.parse("from ppo_control.trainer import Trainer\nimport ppo_control.plot\n")
    assert {layer_of(target) for target in imported_modules(tree)} == {4, 5}
    assert layer_of("envs.registry") == 1
