"""benchmarks.robots.push_recovery: the push options per size, the size a policy recovers up to,
and a run of a task without pushes refused in one line."""

from __future__ import annotations

import json

import pytest

from benchmarks.robots.push_recovery import check_task_has_pushes, push_options, recovered_up_to
from ppo_control.config.errors import UserError
from tests.helpers import TINY, run_module


def test_every_push_takes_the_size_given_and_zero_turns_them_off():
    assert push_options(0.0) == {"push_enable": False}
    assert push_options(1.25) == {"push_enable": True, "push_magnitude_min": 1.25, "push_magnitude_max": 1.25}
    with pytest.raises(UserError, match="0 or more"):
        push_options(-0.5)


def test_the_recovered_size_stops_at_the_first_size_that_falls_too_often():
    rows = [{"magnitude": m, "fall_rate": f} for m, f in [(1.5, 0.02), (0.0, 0.0), (1.0, 0.2), (0.5, 0.05)]]
    assert recovered_up_to(rows, 0.05) == 0.5  # 1.5 falls little again, but 1.0 already fell too often
    assert recovered_up_to(rows, 0.25) == 1.5
    assert recovered_up_to([{"magnitude": 0.0, "fall_rate": 0.1}], 0.05) is None


def test_only_tasks_with_pushes_are_measured():
    check_task_has_pushes("BerkeleyHumanoidJoystickFlatTerrain-v1")
    with pytest.raises(UserError, match="Go1JoystickFlatTerrain-v1 has no pushes"):
        check_task_has_pushes("Go1JoystickFlatTerrain-v1")


@pytest.mark.slow
def test_a_humanoid_run_is_measured_per_push_size(tmp_path):
    run, out = tmp_path / "run", tmp_path / "push.json"
    trained = run_module(
        "ppo_control.train",
        "task=T1JoystickFlatTerrain",
        *TINY,
        "env.backend=envpool",
        "env.num_threads=1",
        "env.max_episode_steps=40",
        "total_steps=128",
        f"run_dir={run}",
    )
    assert trained.returncode == 0, trained.stderr
    # a kick every 5-10 control steps, so the 40-step episodes meet several
    every_few_steps = "env_kwargs=[push_interval_min=0.1,push_interval_max=0.2]"
    result = run_module(
        "benchmarks.robots.push_recovery", f"run={run}", "episodes=4", "magnitudes=[0.0,2.0]", every_few_steps, f"out={out}"
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(out.read_text())
    unpushed, pushed = report["by_push_size_m_s"]
    assert (unpushed["magnitude"], pushed["magnitude"]) == (0.0, 2.0)
    assert report["task_options"] == {"push_interval_min": 0.1, "push_interval_max": 0.2}
    # the untrained policy falls sooner and more often under kicks of 2 m/s than without them
    assert pushed["length"] < unpushed["length"] and pushed["fall_rate"] > unpushed["fall_rate"]
    bad = run_module("benchmarks.robots.push_recovery", f"run={run}", "magnitudes=[-1.0]")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "0 or more" in bad.stderr
