"""The penalty curriculum (ppo_control/rl/penalty_curriculum.py, `ppo.penalty_curriculum_start`):
the training reward rebuilt from a robot task's reported terms, its penalties weighted by a factor
that rises to 1."""

import json
from types import SimpleNamespace

import numpy as np
import pytest
from omegaconf import OmegaConf

from ppo_control.config import compose
from ppo_control.config.errors import UserError
from ppo_control.envs import make_vec_env, reward_term_scales
from ppo_control.envs.base import StepResult
from ppo_control.rl.penalty_curriculum import PenaltyCurriculum
from tests.helpers import assert_training_refused, run_module
from tests.robots.test_robots import GO1_TINY

GO1 = compose(["task=Go1JoystickFlatTerrain", "env.n_envs=8", "env.num_threads=1"]).env


def random_steps(env_cfg=GO1, count: int = 40, seed: int = 0) -> list[StepResult]:
    """Envpool steps under random actions (falls and negative sums of terms among them)."""
    envs = make_vec_env(env_cfg, num_envs=8)
    rng = np.random.default_rng(seed)
    try:
        envs.reset(seed)
        return [envs.step(rng.uniform(-1, 1, (8, envs.info.action_dim)).astype(np.float32)) for _ in range(count)]
    finally:
        envs.close()


def curriculum_of(start: float = 0.0, ramp_steps: int = 1000, env_cfg=GO1) -> PenaltyCurriculum:
    scales, control_period_s = reward_term_scales(env_cfg)
    return PenaltyCurriculum(start, ramp_steps, scales, control_period_s, str(env_cfg.id))


def test_go1s_penalties_are_its_negative_scales():
    curriculum = curriculum_of()
    assert {"orientation", "ang_vel_xy", "feet_clearance", "energy", "termination", "stand_still"} <= curriculum.penalties
    assert not {"tracking_lin_vel", "tracking_ang_vel", "pose", "feet_air_time"} & curriculum.penalties
    assert curriculum.control_period_s == pytest.approx(0.02)
    # an env.kwargs scale overrides envpool's own: a term made positive is no penalty
    scales, _ = reward_term_scales(OmegaConf.merge(GO1, {"kwargs": {"energy_scale": 0.5}}))
    assert scales["energy"] == 0.5


def test_at_factor_one_the_rebuilt_reward_is_envpools_and_lower_factors_pay_more():
    steps = random_steps()
    full = curriculum_of(start=1.0)
    for result in steps:
        np.testing.assert_allclose(full.reward(result), result.reward, rtol=1e-5, atol=1e-6)
    assert full.clipped is True  # Go1 clips its reward at zero
    free = curriculum_of(start=0.0)
    rewards = np.stack([free.reward(result) for result in steps])
    env_rewards = np.stack([result.reward for result in steps])
    assert (rewards >= env_rewards - 1e-6).all()
    assert (rewards > env_rewards + 1e-3).mean() > 0.3  # random actions: many steps the penalties clipped to zero
    # factor 0: the clipped sum of the reward terms alone, times the control period
    positive = ("tracking_lin_vel", "tracking_ang_vel", "pose", "feet_air_time")
    by_hand = np.clip(sum(steps[0].diagnostics[f"reward/{name}"] for name in positive) * 0.02, 0, 10000)
    np.testing.assert_allclose(rewards[0], by_hand, rtol=1e-5, atol=1e-6)


def test_g1s_unclipped_reward_is_rebuilt_unclipped():
    g1 = compose(["task=G1JoystickFlatTerrain", "env.n_envs=8", "env.num_threads=1"]).env
    steps = random_steps(g1, count=10)
    assert min(float(result.reward.min()) for result in steps) < 0  # G1's reward goes below zero
    full = curriculum_of(start=1.0, env_cfg=g1)
    for result in steps:
        np.testing.assert_allclose(full.reward(result), result.reward, rtol=1e-5, atol=1e-6)
    assert full.clipped is False


def test_the_factor_rises_linearly_to_one_and_stays():
    curriculum = curriculum_of(start=0.2, ramp_steps=1000)
    assert [curriculum.at_step(step) for step in (0, 500, 1000, 5000)] == pytest.approx([0.2, 0.6, 1.0, 1.0])
    assert curriculum_of(start=0.3, ramp_steps=0).at_step(0) == 1.0


def test_a_reward_the_terms_do_not_rebuild_is_refused():
    result = random_steps(count=1)[0]
    altered = SimpleNamespace(reward=result.reward + 0.5, diagnostics=result.diagnostics)
    with pytest.raises(UserError, match="not the sum of its terms times the control period"):
        curriculum_of().reward(altered)
    unknown = SimpleNamespace(reward=result.reward, diagnostics={**result.diagnostics, "reward/lifted": np.zeros(8)})
    with pytest.raises(UserError, match="'lifted', which has no scale"):
        curriculum_of().reward(unknown)


def test_the_short_run_note_comes_once_after_the_first_steps_checks(capsys):
    steps = random_steps(count=2)
    refused = curriculum_of()
    refused.first_step_note = "ends before the ramp"
    unknown = SimpleNamespace(reward=steps[0].reward, diagnostics={**steps[0].diagnostics, "reward/lifted": np.zeros(8)})
    with pytest.raises(UserError):
        refused.reward(unknown)
    assert capsys.readouterr().err == ""  # a refusal stays one line
    curriculum = curriculum_of()
    curriculum.first_step_note = "ends before the ramp"
    for result in steps:
        curriculum.reward(result)
    assert capsys.readouterr().err == "ends before the ramp\n"


def test_training_logs_the_rising_factor(tmp_path):
    run_dir = tmp_path / "run"
    overrides = ["ppo.penalty_curriculum_start=0.0", "ppo.penalty_curriculum_steps=1000000", f"run_dir={run_dir}"]
    result = run_module("ppo_control.train", *GO1_TINY, *overrides)
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    factors = [row["penalty_factor"] for row in rows]
    assert factors[0] == 0.0 and all(b > a for a, b in zip(factors, factors[1:], strict=False))
    # the reward terms logged are the task's own, penalties at full weight
    assert rows[-1]["reward/orientation"] < 0


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["task=Hopper", "ppo.penalty_curriculum_start=0.5"], "not a Playground robot task"),
        (["task=Go1JoystickFlatTerrain", "ppo.penalty_curriculum_start=1.5"], "ppo.penalty_curriculum_start"),
        (["task=Go1JoystickFlatTerrain", "ppo.penalty_curriculum_steps=-1"], "ppo.penalty_curriculum_steps"),
    ],
)
def test_a_run_the_curriculum_cannot_apply_to_is_refused_in_one_line(tmp_path, overrides, message):
    assert_training_refused(tmp_path, overrides, message)
