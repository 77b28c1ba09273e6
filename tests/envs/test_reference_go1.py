"""The MuJoCo reference of Go1's joystick task (ppo_control/envs/mujoco) against envpool's C++
port: the same layout and options, the VecEnv semantics (seeding, falls, the time limit, saved
states), the same dynamics, observations and reward terms step for step, and, with envpool's random
streams, the same episodes as EnvpoolVecEnv (noise, commands, resets included).

The step-for-step check starts both simulators from the same state. envpool cannot be given a
state, so the reference is given envpool's: with noise_level=0 an observation right after a reset
(which runs mj_forward) is exact and holds all of it but the base's x and y: the joints are in the
observation, the yaw is the angle between gyro (IMU frame) and global_angvel (world frame), and the
base's linear velocity solves the velocimeter's linear equation. x and y (which the rough terrain
depends on) come from replaying envpool's reset draws: sub-env i's std::mt19937 is seeded with
seed + i, which numpy's legacy RandomState reproduces, and libstdc++ makes a uniform double of two
32-bit draws. The replay is checked against what the observation gave (yaw, base velocities).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from ppo_control.config.errors import UserError
from ppo_control.envs.mujoco import has_reference, make_reference_vec_env
from ppo_control.envs.mujoco.go1 import DEFAULTS, ENV_IDS, REWARD_TERMS, Go1Joystick
from ppo_control.robots import playground as pg
from tests.envs.reference_checks import assert_same_step, continues_exactly

FLAT, ROUGH = ENV_IDS
STATE = len(pg.robot_task(FLAT).groups["state"])


@pytest.fixture(scope="module")
def envpool():
    return pytest.importorskip("envpool")


def _privileged(task_env_id: str, obs: np.ndarray, name: str) -> np.ndarray:
    names = pg.robot_task(task_env_id).groups["privileged_state"]
    return obs[..., STATE + names.index(name)]


def _privileged_xyz(env_id: str, obs: np.ndarray, quantity: str) -> np.ndarray:
    return np.stack([_privileged(env_id, obs, f"{quantity}:{axis}") for axis in "xyz"], axis=-1)


# --- layout and options -----------------------------------------------------------------------
@pytest.mark.parametrize("env_id", ENV_IDS)
def test_layout_is_envpools(envpool, env_id):
    env = make_reference_vec_env(env_id, 2)
    try:
        spaces = envpool.make_spec(env_id).observation_space.spaces
        task = pg.robot_task(env_id)
        assert env.info.groups == (("policy", spaces["state"].shape[0]), ("privileged", spaces["privileged_state"].shape[0]))
        assert [size for _, size in env.info.groups] == [len(task.groups["state"]), len(task.groups["privileged_state"])]
        assert env.info.obs_dim == 171 and env.info.action_dim == 12 and env.info.max_episode_steps == 1000
        assert env.reset(0).shape == (2, 171)
        assert env.capabilities.renders and env.capabilities.saves_state and env.capabilities.replays_physics
        assert env.capabilities.randomizes_model  # randomize.* on each sub-env's own model (tests/envs/test_reference_randomization.py)
        assert has_reference(env_id) and has_reference(task.name)
    finally:
        env.close()


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_defaults_are_the_specs(envpool, env_id):
    config = envpool.make_spec(env_id).config._asdict()
    assert {key: config[key] for key in DEFAULTS} == DEFAULTS
    assert config["max_episode_steps"] == 1000


def test_options_reach_the_model_and_bad_ones_are_refused():
    task = Go1Joystick(FLAT, 1, {"kp": 20.0, "kd": 0.7, "sim_dt": 0.002})
    model = task.physics.model(0)
    assert np.all(model.actuator_gainprm[:, 0] == 20.0) and np.all(model.actuator_biasprm[:, 1] == -20.0)
    assert np.all(model.dof_damping[6:] == 0.7) and np.all(model.dof_damping[:6] == 0.0)
    assert model.opt.timestep == 0.002 and task.substeps == 10 and model.opt.ccd_iterations == 20
    with pytest.raises(UserError, match="no such option"):
        Go1Joystick(FLAT, 1, {"noise_levle": 0.0})
    with pytest.raises(UserError, match="frame_stack"):
        Go1Joystick(FLAT, 1, {"frame_stack": 3})


# --- VecEnv semantics -------------------------------------------------------------------------
def _rollout(seed: int, rng: str, steps: int = 15, num_threads: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    env = make_reference_vec_env(FLAT, 3, rng=rng, num_threads=num_threads)
    try:
        rng = np.random.default_rng(0)
        observations, rewards = [env.reset(seed)], []
        for _ in range(steps):
            result = env.step(rng.uniform(-1.0, 1.0, (3, 12)))
            observations.append(result.obs)
            rewards.append(result.reward)
        return np.stack(observations), np.stack(rewards)
    finally:
        env.close()


@pytest.mark.parametrize("rng", ["envpool", "numpy"])
def test_same_seed_same_rollout(rng):
    obs_a, rewards_a = _rollout(7, rng)
    obs_b, rewards_b = _rollout(7, rng)
    obs_c, _ = _rollout(8, rng)
    np.testing.assert_array_equal(obs_a, obs_b)
    np.testing.assert_array_equal(rewards_a, rewards_b)
    assert not np.allclose(obs_a[0], obs_c[0])


def test_threads_change_nothing():
    obs_one, rewards_one = _rollout(3, "envpool", num_threads=1)
    obs_three, rewards_three = _rollout(3, "envpool", num_threads=3)
    np.testing.assert_array_equal(obs_one, obs_three)
    np.testing.assert_array_equal(rewards_one, rewards_three)


def test_an_upside_down_robot_terminates():
    env = make_reference_vec_env(FLAT, 2, {"noise_level": 0.0})
    try:
        env.reset(0)
        task = env.task
        qpos = task.init_qpos.copy()
        qpos[2] = 0.4
        qpos[3:7] = [0.0, 1.0, 0.0, 0.0]  # half a turn about x: the trunk's z axis points down
        task.place(1, qpos, np.zeros(task.physics.model(0).nv), np.array([0.5, 0.0, 0.0]), 100, np.random.default_rng(0))
        result = env.step(np.zeros((2, 12)))
        assert result.terminated.tolist() == [False, True] and not result.truncated.any()
        assert result.diagnostics["reward/termination"].tolist() == [0.0, DEFAULTS["termination_scale"]]
        assert result.episode_lengths.tolist() == [1]
        assert _privileged(FLAT, result.final_obs[1], "gravity:z") > 0.0  # the fallen state, upside down
        assert _privileged(FLAT, result.obs[1], "gravity:z") < -0.99  # the next episode's, upright
    finally:
        env.close()


def test_the_time_limit_truncates():
    env = make_reference_vec_env(FLAT, 2, {"noise_level": 0.0}, max_episode_steps=5)
    try:
        env.reset(1)
        for step in range(1, 6):
            result = env.step(np.zeros((2, 12)))
            assert result.truncated.all() == (step == 5) and not result.terminated.any()
        assert result.episode_lengths.tolist() == [5, 5]
        assert np.all(result.episode_returns > 0.0)
        assert {f"reward/{term}" for term in REWARD_TERMS} | {"tracking_error_lin", "tracking_error_ang"} <= set(result.diagnostics)
        assert np.all(result.obs[:, STATE - 15 : STATE - 3] == 0.0)  # a new episode: last_action reset
    finally:
        env.close()


@pytest.mark.parametrize("rng, randomized", [("envpool", False), ("numpy", False), ("envpool", True)])
def test_a_saved_state_continues_exactly(rng, randomized, tmp_path):
    """get_state -> checkpoint file (tensors, the safe loader) -> set_state in a new env: the same
    steps follow, falls and resets included (with every randomize.* key: each sub-env's draws too)."""
    from tests.envs.test_reference_randomization import EVERYTHING

    randomization = EVERYTHING if randomized else None
    actions = np.random.default_rng(0).uniform(-1.0, 1.0, (60, 2, 12))
    after = continues_exactly(lambda: make_reference_vec_env(FLAT, 2, rng=rng, randomization=randomization), actions, 20, tmp_path)
    assert sum(len(r.episode_lengths) for r in after) >= 1  # random actions make it fall: resets are covered


# --- step for step against envpool ------------------------------------------------------------
def _state_from_reset_obs(task: Go1Joystick, privileged_obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """qpos (x = y = 0) and qvel of a Go1 whose noiseless reset observation is `privileged_obs`."""
    import mujoco

    env_id, model = task.env_id, task.physics.model(0)
    gyro, world = _privileged_xyz(env_id, privileged_obs, "gyro"), _privileged_xyz(env_id, privileged_obs, "global_angvel")
    site_in_body = np.empty(9)
    mujoco.mju_quat2Mat(site_in_body, model.site_quat[task.imu_site])
    body_angvel = site_in_body.reshape(3, 3) @ gyro  # a free joint's angular velocity is in the body frame
    yaw = math.atan2(world[1], world[0]) - math.atan2(body_angvel[1], body_angvel[0])
    qpos = task.init_qpos.copy()
    qpos[3:7] = [math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]  # the home quaternion is the identity
    joints = pg.robot_task(env_id).joint_names
    qpos[7:19] = np.array([_privileged(env_id, privileged_obs, f"joint_pos:{j}") for j in joints]) + task.default_pose
    qvel = np.zeros(model.nv)
    qvel[3:6] = body_angvel
    qvel[6:] = [_privileged(env_id, privileged_obs, f"joint_vel:{j}") for j in joints]
    data, adr = mujoco.MjData(model), task.adr["local_linvel"]

    def velocimeter(linear: np.ndarray) -> np.ndarray:
        data.qpos[:], data.qvel[:] = qpos, qvel
        data.qvel[:3] = linear
        mujoco.mj_forward(model, data)
        return data.sensordata[adr : adr + 3].copy()

    offset = velocimeter(np.zeros(3))
    jacobian = np.stack([velocimeter(unit) - offset for unit in np.eye(3)], axis=1)
    qvel[:3] = np.linalg.solve(jacobian, _privileged_xyz(env_id, privileged_obs, "linvel") - offset)
    return qpos, qvel


def _envpool_reset_draws(seed: int) -> tuple[float, float, float, np.ndarray]:
    """(dx, dy, yaw, base qvel) go1.h Reset draws first from a sub-env seeded with `seed`."""
    generator = np.random.RandomState(seed)  # MT19937 with the reference seeding, as std::mt19937(seed)

    def uniform(low: float, high: float) -> float:  # std::uniform_real_distribution<double> (libstdc++)
        low_bits, high_bits = generator.randint(0, 2**32, size=2, dtype=np.uint64)
        return low + (high - low) * (float(low_bits) + float(high_bits) * 2.0**32) / 2.0**64

    dx, dy, yaw = uniform(-0.5, 0.5), uniform(-0.5, 0.5), uniform(-3.14, 3.14)
    return dx, dy, yaw, np.array([uniform(-0.5, 0.5) for _ in range(6)])


def _compare_with_envpool(envpool, env_id: str, steps: int, n: int = 3) -> int:
    """Start the reference from envpool's reset states and step both with the same actions; every
    observation, reward term, reward and fall must agree until a sub-env's episode ends. Returns
    how many sub-env steps were compared."""
    seed = 3
    pool = envpool.make_gymnasium(env_id, num_envs=n, batch_size=n, num_threads=1, seed=seed, noise_level=0.0)
    task = Go1Joystick(env_id, n, {"noise_level": 0.0}, num_threads=1)
    try:
        obs, info = pool.reset()
        expected = np.concatenate([obs["state"], obs["privileged_state"]], axis=1)
        rng = np.random.default_rng(0)
        for i in range(n):
            qpos, qvel = _state_from_reset_obs(task, expected[i])
            dx, dy, yaw, base_qvel = _envpool_reset_draws(seed + i)
            assert abs(math.cos(yaw / 2) * qpos[3] + math.sin(yaw / 2) * qpos[6]) == pytest.approx(1.0, abs=1e-12)  # same yaw
            np.testing.assert_allclose(qvel[:6], base_qvel, rtol=0, atol=1e-10)
            qpos[:2] += dx, dy
            placed = task.place(i, qpos, qvel, info["command"][i], int(info["steps_until_next_cmd"][i]), rng)
            np.testing.assert_allclose(placed, expected[i], rtol=0, atol=1e-10)
        alive, compared = np.ones(n, dtype=bool), 0
        for _ in range(steps):
            actions = rng.uniform(-0.6, 0.6, (n, 12))
            obs, reward, terminated, _, info = pool.step(actions)
            ours = task.step(actions, [rng] * n)
            expected = np.concatenate([obs["state"], obs["privileged_state"]], axis=1)
            np.testing.assert_allclose(ours.obs[alive], expected[alive], rtol=0, atol=1e-8)
            np.testing.assert_allclose(ours.reward[alive], reward[alive], rtol=1e-6, atol=1e-7)  # envpool's reward is a float32
            assert ours.terminated[alive].tolist() == terminated[alive].tolist()
            for term in REWARD_TERMS:
                np.testing.assert_allclose(ours.terms[term][alive], info[f"reward_{term}"][alive], rtol=0, atol=1e-9, err_msg=term)
            compared += int(alive.sum())
            alive &= ~terminated  # envpool restarts a fallen sub-env at its next step
        return compared
    finally:
        pool.close()
        task.physics.close()


def test_flat_terrain_steps_as_envpool(envpool):
    assert _compare_with_envpool(envpool, FLAT, steps=30) >= 60


def test_rough_terrain_steps_as_envpool(envpool):
    """Feet touch the height field from the first steps on. Later (past the steps compared here) a
    sub-env can part from envpool's by about 1e-3 within one step where a contact on the height
    field starts a hair earlier in one engine (envpool bundles MuJoCo 3.6, the bindings may be
    newer): an amplified rounding difference, not a different task."""
    assert _compare_with_envpool(envpool, ROUGH, steps=15) == 45


@pytest.mark.parametrize(("env_id", "steps"), [(FLAT, 100), (ROUGH, 15)])
def test_replays_envpools_episodes(env_id, steps):
    """With envpool's random streams (the default) and the same seed, the reference's VecEnv is
    EnvpoolVecEnv: resets, commands, observation noise, rewards, diagnostics, falls and the resets
    after them. (Rough: fewer steps, see test_rough_terrain_steps_as_envpool.)"""
    from ppo_control.envs.envpool_backend import EnvpoolVecEnv

    pytest.importorskip("envpool")
    n, ended = 4, 0
    pool, ours = EnvpoolVecEnv(env_id, n, 1, {}, None), make_reference_vec_env(env_id, n, num_threads=1)
    try:
        np.testing.assert_array_equal(ours.reset(11), pool.reset(11))
        rng = np.random.default_rng(0)
        for _ in range(steps):
            actions = rng.uniform(-0.4, 0.4, (n, 12))
            expected, result = pool.step(actions), ours.step(actions)
            assert_same_step(result, expected)
            ended += len(result.episode_lengths)
        assert env_id == ROUGH or ended >= 1  # the flat run includes a fall and the reset after it
    finally:
        pool.close()
        ours.close()


RANDOMIZED = (
    "randomize.body_mass=[0.8,1.2]",
    "randomize.friction=[0.5,1.5]",
    "randomize.actuator_gain=[0.8,1.2]",
    "randomize.obs_noise=0.05",
    "randomize.action_delay=[0,2]",
    "randomize.push_velocity=0.5",
    "randomize.push_interval=5",
    "randomize.added_mass=[-1,1]",
    "randomize.com_offset=0.03",
    "randomize.joint_friction=[0.8,1.2]",
    "randomize.armature=[1.0,1.1]",
    "randomize.init_pose=0.1",
)


@pytest.mark.parametrize("randomize", [(), pytest.param(RANDOMIZED, marks=pytest.mark.slow, id="randomized")])
def test_go1_trains_on_its_reference_and_resumes_exactly(tmp_path, randomize):
    """env.backend=mujoco end to end: a run on the reference, and the same run stopped halfway and
    resumed, write the same rows (the reference saves its episodes in the checkpoint, and with
    randomize.* every sub-env's draws)."""
    import json

    from tests.helpers import train_in_process

    settings = (
        "task=Go1JoystickFlatTerrain",
        "env.backend=mujoco",
        "env.n_envs=4",
        "env.num_threads=1",
        "ppo.rollout_steps=16",
        "ppo.minibatches=2",
        "eval.episodes=1",
        "eval.every_steps=0",
        "env.max_episode_steps=20",
        "checkpoint.every_steps=64",
        "ppo.lr_schedule=constant",  # a linear rate depends on total_steps, which the resume extends
        *randomize,
    )
    train_in_process(tmp_path / "whole", *settings, "total_steps=128")
    train_in_process(tmp_path / "halves", *settings, "total_steps=64")
    from tests.helpers import run_module

    result = run_module("ppo_control.train", f"resume={tmp_path / 'halves'}", "total_steps=128")
    assert result.returncode == 0, result.stderr

    def rows(run):
        lines = (run / "metrics.jsonl").read_text().splitlines()
        # the training figures; the first run of the halves also evaluated at its end (step 64)
        return [{k: v for k, v in json.loads(line).items() if k not in ("time", "sps") and not k.startswith("eval_")} for line in lines]

    whole, halves = rows(tmp_path / "whole"), rows(tmp_path / "halves")
    assert len(whole) == len(halves) == 2
    assert whole == halves


def test_the_observation_after_a_command_resample_carries_the_new_command():
    """Where envpool's port (and so this reference) departs from Playground's joystick.py: Playground
    builds the observation before it resamples the command, so for one step the policy sees the old
    command while the next reward tracks the new one; envpool writes the observation after the
    resample. A one-step lag every few seconds (benchmarks/results/robots/go1-forward-diagnosis)."""
    env = make_reference_vec_env(FLAT, 1, {"noise_level": 0.0})
    try:
        env.reset(3)
        task, old = env.task, np.array([0.9, 0.0, 0.0])
        resampled = []
        for _ in range(8):  # a resample keeps each axis with probability 1/2: some of these change it
            task.place(0, task.init_qpos.copy(), np.zeros(task.physics.model(0).nv), old, 1, np.random.default_rng(0))
            result = env.step(np.zeros((1, 12)))
            command = result.obs[0, STATE - 3 : STATE]
            assert np.allclose(command, task.command[0])  # the observation holds the command the next reward tracks
            resampled.append(not np.allclose(command, old))
        assert any(resampled)
    finally:
        env.close()


@pytest.mark.parametrize("keep", [False, True])
def test_keep_command_through_falls_carries_the_fallen_episodes_command_into_the_next(keep):
    """env.kwargs.keep_command_through_falls (the reference's own option): as Playground's training
    resets after a fall (the physics restored, the task's command kept, its countdown redrawn); off,
    the next episode draws its own command, as envpool does. The random stream is the same either way."""
    env = make_reference_vec_env(FLAT, 2, {"noise_level": 0.0, "keep_command_through_falls": keep})
    try:
        env.reset(0)
        task = env.task
        qpos = task.init_qpos.copy()
        qpos[2] = 0.4
        qpos[3:7] = [0.0, 1.0, 0.0, 0.0]  # upside down: the next step is a fall
        task.place(1, qpos, np.zeros(task.physics.model(0).nv), np.array([0.9, 0.0, 0.0]), 100, np.random.default_rng(0))
        result = env.step(np.zeros((2, 12)))
        assert result.terminated.tolist() == [False, True]
        next_command = result.obs[1, STATE - 3 : STATE]
        assert np.allclose(next_command, [0.9, 0.0, 0.0]) == keep
        assert np.allclose(result.final_obs[1, STATE - 3 : STATE], [0.9, 0.0, 0.0]) == keep  # the fall's own observation
        assert task.steps_until_next_cmd[1] != 99  # a new countdown either way
    finally:
        env.close()


def test_the_reference_only_option_is_refused_on_envpool_and_kept_out_of_envpools_checks():
    from ppo_control.envs import mujoco as reference
    from ppo_control.envs.mujoco.go1 import Go1Joystick
    from ppo_control.envs.registry import check_robot_request

    assert reference.split_reference_options(FLAT, {"kp": 30.0, "keep_command_through_falls": True}) == (
        {"kp": 30.0},
        {"keep_command_through_falls": True},
    )
    assert set(reference.split_reference_options(FLAT, dict.fromkeys(Go1Joystick.REFERENCE_OPTIONS, True))[1]) == set(
        Go1Joystick.REFERENCE_OPTIONS
    )
    check_robot_request(FLAT, "mujoco", {"keep_command_through_falls": True})  # the reference takes it
    with pytest.raises(UserError, match="only task Go1JoystickFlatTerrain-v1's MuJoCo reference has this option"):
        check_robot_request(FLAT, "envpool", {"keep_command_through_falls": True})


def test_forward_commands_only_draws_no_backward_command_and_leaves_the_rest():
    """env.kwargs.forward_commands_only (the reference's own research option): vx is |vx| of the same
    draws, at resets and resamples; off, backward commands are drawn as usual."""
    vx = {}
    for forward_only in (False, True):
        env = make_reference_vec_env(FLAT, 8, {"noise_level": 0.0, "forward_commands_only": forward_only, "command_b0": 1.0})
        try:
            env.reset(5)
            commands = [env.task.command.copy()]
            for _ in range(300):  # resamples every few seconds, resets at falls
                env.step(np.zeros((8, 12)))
                commands.append(env.task.command.copy())
            vx[forward_only] = np.concatenate(commands)
        finally:
            env.close()
    assert (vx[False][:, 0] < -0.1).any() and (vx[True][:, 0] >= 0.0).all()
    np.testing.assert_allclose(np.abs(vx[False]), np.abs(vx[True]))  # the same draws, only the sign of vx differs


def test_command_mean_s_sets_the_countdowns_mean_and_a_non_positive_one_is_refused():
    """env.kwargs.command_mean_s (a training option): the countdown a reset draws is an exponential
    with that mean in control steps; the C++'s 5 s by default; zero or below is one clear line."""
    means = {}
    for mean_s in (None, 1.0):
        kwargs = {"noise_level": 0.0} if mean_s is None else {"noise_level": 0.0, "command_mean_s": mean_s}
        env = make_reference_vec_env(FLAT, 256, kwargs)
        try:
            env.reset(3)
            means[mean_s] = env.task.steps_until_next_cmd.mean() * env.task.control_period_s
        finally:
            env.close()
    # 256 exponential draws: the sample mean is within 20% of the true mean at about 3 standard errors
    assert abs(means[None] - 5.0) < 1.0 and abs(means[1.0] - 1.0) < 0.2
    with pytest.raises(UserError, match="command_mean_s=0.0: the command countdown's mean must be > 0"):
        make_reference_vec_env(FLAT, 1, {"command_mean_s": 0.0})


def _spin_in_place(kwargs: dict, yaw_rate: float = 1.0):
    """One step of a robot placed in the air, spinning about the trunk's frame origin (no linear
    velocity there, no contact to slow the spin) under a turn-in-place command: (env, the step)."""
    env = make_reference_vec_env(FLAT, 1, {"noise_level": 0.0, **kwargs})
    env.reset(0)
    task = env.task
    qvel = np.zeros(task.physics.model(0).nv)
    qvel[5] = yaw_rate  # the free joint's angular velocity, about the trunk's origin
    qpos = task.init_qpos.copy()
    qpos[2] += 0.3
    task.place(0, qpos, qvel, np.array([0.0, 0.0, yaw_rate]), 100, np.random.default_rng(0))
    return env, env.step(np.zeros((1, 12)))


def test_track_at_trunk_center_measures_the_trunks_centre_and_reports_the_tasks_own_reward():
    """env.kwargs.track_at_trunk_center (a named reward variant): the IMU sits off the trunk's axis,
    on the right, so a trunk spinning about its centre moves the IMU and the task's tracking term
    pays less than its scale; the variant pays nearly all of it, trains on that, and reports the
    task's own reward, equal to the default's, as the diagnostic task_reward."""
    env, task_step = _spin_in_place({})
    try:
        imu = env.task.physics.model(0).site("imu")
        assert imu.pos[1] < -0.05  # the IMU's lever: right of the trunk's axis
        imu_term = float(task_step.diagnostics["reward/tracking_lin_vel"][0])
        assert "task_reward" not in task_step.diagnostics
    finally:
        env.close()
    env, variant_step = _spin_in_place({"track_at_trunk_center": True})
    try:
        centre_term = float(variant_step.diagnostics["reward/tracking_lin_vel"][0])
        np.testing.assert_allclose(variant_step.diagnostics["task_reward"], task_step.reward, rtol=1e-6)
        assert variant_step.reward[0] > task_step.reward[0]
    finally:
        env.close()
    assert imu_term < 0.99 * DEFAULTS["tracking_lin_vel_scale"] and centre_term > 0.99 * DEFAULTS["tracking_lin_vel_scale"]
    assert centre_term > imu_term


def test_turn_in_place_share_replaces_drawn_commands_by_turns_in_place_and_a_bad_share_is_refused():
    """env.kwargs.turn_in_place_share (a training option): at 1 every command drawn, at resets and
    resamples, has no planar part and a yaw rate within the task's range; at 0 (the default) the
    task's own commands, with planar parts."""
    commands = {}
    for share in (0.0, 1.0):
        env = make_reference_vec_env(FLAT, 8, {"noise_level": 0.0, "turn_in_place_share": share, "command_mean_s": 0.5})
        try:
            env.reset(5)
            drawn = [env.task.command.copy()]
            for _ in range(200):  # resamples every half second or so
                env.step(np.zeros((8, 12)))
                drawn.append(env.task.command.copy())
            commands[share] = np.concatenate(drawn)
        finally:
            env.close()
    assert (np.abs(commands[0.0][:, :2]) > 0.1).any()
    assert (commands[1.0][:, :2] == 0.0).all() and (np.abs(commands[1.0][:, 2]) <= DEFAULTS["command_a2"]).all()
    assert len(np.unique(commands[1.0][:, 2])) > 10  # new yaw rates keep being drawn
    with pytest.raises(UserError, match="turn_in_place_share=1.5: a probability, from 0 to 1"):
        make_reference_vec_env(FLAT, 1, {"turn_in_place_share": 1.5})
