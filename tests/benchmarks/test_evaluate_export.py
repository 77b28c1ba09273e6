"""evaluate_export: an export scores on its run's evaluation envs what `evaluate` gives its checkpoint."""

from __future__ import annotations

import json

import pytest

from benchmarks.robots.evaluate_export import evaluate_export
from tests.helpers import TINY, run_module, train_in_process


@pytest.fixture(scope="module")
def getup_run(tmp_path_factory):
    """A few updates of Go1Getup on envpool (its actor reads `policy`, its critic and its success
    measure the privileged group), exported and evaluated by the package's own commands."""
    run = tmp_path_factory.mktemp("getup") / "run"
    train_in_process(run, "task=Go1Getup", *TINY, "env.backend=envpool", "env.num_threads=1", "total_steps=512")
    for module, args in (("ppo_control.export", []), ("ppo_control.evaluate", ["episodes=2"])):
        done = run_module(module, f"run={run}", *args)
        assert done.returncode == 0, done.stderr
    return run


def test_the_export_scores_what_evaluate_gives_its_checkpoint(getup_run):
    evaluated = json.loads((getup_run / "eval.json").read_text())
    summary = evaluate_export(getup_run, getup_run / "export" / "policy.pt", episodes=2)
    assert summary["return"] == pytest.approx(evaluated["return_mean"], rel=1e-4)
    assert summary["length"] == evaluated["length_mean"]
    assert summary["success/standing"] == pytest.approx(evaluated["diagnostics"]["success/standing"], abs=1e-6)


def test_zero_actions_hold_the_default_pose(getup_run):
    """Zero actions: no action_rate penalty (the actions never change), unlike the trained export's."""
    zero = evaluate_export(getup_run, getup_run / "export" / "policy.pt", episodes=2, zero_actions=True)
    trained = evaluate_export(getup_run, getup_run / "export" / "policy.pt", episodes=2)
    assert zero["policy"] == "zero actions"
    assert zero["reward/action_rate"] == 0.0
    assert trained["reward/action_rate"] < 0.0


def test_refuses_a_missing_export_in_one_line(getup_run, tmp_path):
    done = run_module("benchmarks.robots.evaluate_export", f"run={getup_run}", f"export={tmp_path / 'none.pt'}")
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "does not exist" in done.stderr
