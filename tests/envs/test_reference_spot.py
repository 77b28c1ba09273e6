"""The MuJoCo reference of SpotFlatTerrainJoystick (ppo_control/envs/mujoco/spot.py) against envpool's
C++ port: the same layout and options, the VecEnv semantics (seeding, falls, the time limit, saved
states), the same episodes step for step, and the gait_clock variant it shares with Go1.

spot.h's reset draws no dynamics (the home keyframe at rest) and its random stream is replayed
(batch.EnvpoolRandom), so every episode starts exactly as envpool's. On the bindings of envpool's own
MuJoCo (3.6.0) every observation, reward, reward term and fall is bitwise envpool's; newer bindings
(4.0) differ in the last bits of the physics, so there the checks hold within a tolerance. Run the
exact checks with the 3.6.0 bindings first on the path: PYTHONPATH=<mujoco 3.6.0> pytest ...
"""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest

from ppo_control.config.errors import UserError
from ppo_control.envs.envpool_backend import MANAGED_OPTIONS
from ppo_control.envs.mujoco import has_reference, make_reference_vec_env, split_reference_options
from ppo_control.envs.mujoco.batch import EnvpoolRandom
from ppo_control.envs.mujoco.spot import DEFAULTS, ENV_IDS, NU, REWARD_TERMS, SpotJoystick
from ppo_control.robots import playground as pg
from tests.envs.reference_checks import assert_same_step, continues_exactly

(SPOT,) = ENV_IDS
STATE = len(pg.robot_task(SPOT).groups["state"])
PRIVILEGED = len(pg.robot_task(SPOT).groups["privileged_state"])
EXACT = mujoco.__version__ == "3.6.0"  # the MuJoCo envpool 1.2.5 is built with
# Targets that fold the left legs and stretch the right ones: Spot rolls over within a second.
ROLL = np.array([0, 1, 1, 0, -1, -1, 0, 1, 1, 0, -1, -1], dtype=np.float64)


@pytest.fixture(scope="module")
def envpool():
    return pytest.importorskip("envpool")


def _actions(rng: np.random.Generator, n: int) -> np.ndarray:
    """Random actions for every sub-env but the first, which rolls over (falls and resets)."""
    actions = rng.uniform(-1.0, 1.0, (n, NU))
    actions[0] = np.clip(ROLL + 0.2 * actions[0], -1.0, 1.0)
    return actions


# --- layout and options -----------------------------------------------------------------------
def test_layout_is_envpools(envpool):
    env = make_reference_vec_env(SPOT, 2, num_threads=1)
    try:
        spaces = envpool.make_spec(SPOT).observation_space.spaces
        assert env.info.groups == (("policy", spaces["state"].shape[0]), ("privileged", spaces["privileged_state"].shape[0]))
        assert env.info.groups == (("policy", STATE), ("privileged", PRIVILEGED))
        assert env.info.action_dim == NU and env.info.max_episode_steps == 1000
        assert env.reset(0).shape == (2, STATE + PRIVILEGED)
        assert env.capabilities.renders and env.capabilities.saves_state and env.capabilities.randomizes_model
        assert has_reference(SPOT) and has_reference("SpotFlatTerrainJoystick")
    finally:
        env.close()


def test_defaults_are_the_specs(envpool):
    config = envpool.make_spec(SPOT).config._asdict()
    assert {key: config[key] for key in DEFAULTS} == DEFAULTS
    assert set(config) - set(DEFAULTS) == MANAGED_OPTIONS  # the pool's options, not the task's
    assert config["max_episode_steps"] == SpotJoystick.MAX_EPISODE_STEPS and config["task_name"] == "SpotFlatTerrainJoystick"


def test_options_reach_the_model_and_bad_ones_are_refused():
    task = SpotJoystick(SPOT, 1, {"kp": 200.0, "kd": 0.7, "sim_dt": 0.005, "action_scale": 0.2}, num_threads=1)
    try:
        model = task.physics.model(0)
        assert np.all(model.actuator_gainprm[:, 0] == 200.0) and np.all(model.actuator_biasprm[:, 1] == -200.0)
        assert np.all(model.dof_damping[6:] == 0.7) and np.all(model.dof_damping[:6] == 0.0)
        assert model.opt.timestep == 0.005 and task.substeps == 4
        task.reset(np.arange(1), [EnvpoolRandom(0)])
        assert np.all(task.physics.data[0].ctrl == 0.0)  # a reset's targets are zero until the first step
        task.step(np.ones((1, NU)), [EnvpoolRandom(0)])
        np.testing.assert_allclose(task.physics.data[0].ctrl, np.minimum(task.default_pose + 0.2, task.uppers))
    finally:
        task.physics.close()
    with pytest.raises(UserError, match="no such option"):
        SpotJoystick(SPOT, 1, {"command_a0": 1.0})
    with pytest.raises(UserError, match="frame_stack"):
        SpotJoystick(SPOT, 1, {"frame_stack": 3})
    # feet_phase_scale is the spec's own option (its gait task's): envpool takes it, the variant weighs its term by it.
    assert split_reference_options(SPOT, {"feet_phase_scale": 1.0, "gait_clock": True}) == ({"feet_phase_scale": 1.0}, {"gait_clock": True})


# --- step for step against envpool ------------------------------------------------------------
def test_steps_as_envpool(envpool):
    """Three sub-envs from envpool's reset for 300 steps of the same actions, one of them rolling
    over: every observation, reward, reward term and fall, until a sub-env's episode ends (the
    command's resample at step 201 included)."""
    n, seed = 3, 5
    pool = envpool.make_gymnasium(SPOT, num_envs=n, batch_size=n, num_threads=1, seed=seed)
    task = SpotJoystick(SPOT, n, num_threads=1)
    atol = 0.0 if EXACT else 1e-8
    try:
        rngs = [EnvpoolRandom(seed + i) for i in range(n)]
        obs, _ = pool.reset()
        first = task.reset(np.arange(n), rngs)
        np.testing.assert_allclose(first, np.concatenate([obs["state"], obs["privileged_state"]], axis=1), rtol=0, atol=atol)
        rng, alive, falls = np.random.default_rng(0), np.ones(n, dtype=bool), 0
        for _ in range(300):
            actions = _actions(rng, n)
            obs, reward, terminated, _, info = pool.step(actions)
            ours = task.step(actions, rngs)
            expected = np.concatenate([obs["state"], obs["privileged_state"]], axis=1)
            np.testing.assert_allclose(ours.obs[alive], expected[alive], rtol=0, atol=atol)
            np.testing.assert_allclose(ours.reward[alive], reward[alive], rtol=0, atol=0.0 if EXACT else 1e-6)
            assert ours.terminated[alive].tolist() == terminated[alive].tolist()
            for term in REWARD_TERMS:
                np.testing.assert_allclose(ours.terms[term][alive], info[f"reward_{term}"][alive], rtol=0, atol=atol, err_msg=term)
            falls += int((terminated & alive).sum())
            alive &= ~terminated  # envpool restarts a fallen sub-env at its next step
        assert falls == 1 and alive[1:].all()
    finally:
        pool.close()
        task.physics.close()


def test_replays_envpools_episodes():
    """With envpool's random streams (the default) and the same seed, the reference's VecEnv is
    EnvpoolVecEnv: resets, commands and their resample, observation noise, rewards, every reward
    term, falls, the time limit and the resets after them."""
    from ppo_control.envs.envpool_backend import EnvpoolVecEnv

    pytest.importorskip("envpool")
    n, falls, truncations = 3, 0, 0
    pool, ours = EnvpoolVecEnv(SPOT, n, 1, {}, 230), make_reference_vec_env(SPOT, n, max_episode_steps=230, num_threads=1)
    atol = 0.0 if EXACT else 1e-5
    try:
        np.testing.assert_array_equal(ours.reset(11), pool.reset(11))
        rng = np.random.default_rng(1)
        for _ in range(260):
            actions = _actions(rng, n)
            expected, result = pool.step(actions), ours.step(actions)
            assert_same_step(result, expected, atol=atol)
            assert {f"reward/{term}" for term in REWARD_TERMS} | {"tracking_error_lin", "tracking_error_ang"} <= set(result.diagnostics)
            falls, truncations = falls + int(result.terminated.sum()), truncations + int(result.truncated.sum())
        assert falls >= 5 and truncations == 2
    finally:
        pool.close()
        ours.close()


# --- VecEnv semantics -------------------------------------------------------------------------
def test_the_command_is_resampled_after_200_steps_and_the_observation_shows_the_one_acted_under():
    env = make_reference_vec_env(SPOT, 1, {"noise_level": 0.0}, num_threads=1)
    try:
        env.reset(2)
        task, commands = env.task, []
        for _ in range(201):
            before = task.command.copy()
            result = env.step(np.zeros((1, NU)))
            np.testing.assert_array_equal(result.obs[0, STATE - 3 : STATE], before[0].astype(np.float32))
            commands.append(task.command.copy())
        assert all(np.array_equal(c, commands[0]) for c in commands[:200]) and not np.array_equal(commands[200], commands[0])
        assert task.command_steps[0] == 0
    finally:
        env.close()


@pytest.mark.parametrize("rng", ["envpool", "numpy"])
def test_a_saved_state_continues_exactly(rng, tmp_path):
    """get_state -> checkpoint file (tensors, the safe loader) -> set_state in a new env: the same
    steps follow, falls and the resets after them included."""
    actions = [_actions(np.random.default_rng(step), 2) for step in range(60)]
    after = continues_exactly(lambda: make_reference_vec_env(SPOT, 2, rng=rng, num_threads=1), actions, 20, tmp_path)
    assert sum(len(r.episode_lengths) for r in after) >= 1  # the rolling sub-env falls: resets are covered


@pytest.mark.parametrize("keep", [False, True])
def test_keep_command_through_falls_carries_the_fallen_episodes_command_into_the_next(keep):
    env = make_reference_vec_env(SPOT, 1, {"noise_level": 0.0, "keep_command_through_falls": keep}, num_threads=1)
    try:
        env.reset(0)
        env.task.command[0] = [0.7, 0.0, 0.0]
        result = env.step(ROLL[None])
        while not result.terminated[0]:
            result = env.step(ROLL[None])
        assert np.allclose(result.obs[0, STATE - 3 : STATE], [0.7, 0.0, 0.0]) == keep
    finally:
        env.close()


# --- the gait_clock variant (shared with Go1, quadruped.py) -------------------------------------
CLOCK = {"gait_clock": True, "gait_frequency_hz": 2.0}


def test_the_clock_ends_each_group_and_advances_a_trot():
    env = make_reference_vec_env(SPOT, 2, {"noise_level": 0.0, **CLOCK}, num_threads=1)
    try:
        obs = env.reset(0)
        assert dict(env.task.groups) == {"policy": STATE + 8, "privileged": PRIVILEGED + 8}
        trot = np.array([0.0, math.pi, math.pi, 0.0])  # FL, FR, HL, HR: diagonal feet together
        np.testing.assert_allclose(obs[:, STATE : STATE + 8], np.tile(np.concatenate([np.cos(trot), np.sin(trot)]), (2, 1)), atol=1e-6)
        np.testing.assert_array_equal(obs[:, STATE : STATE + 8], obs[:, -8:])
        env.task.command[:] = [0.5, 0.0, 0.0]
        env.step(np.zeros((2, NU)))
        np.testing.assert_allclose(env.task.phase[0], np.fmod(trot + 2.0 * math.pi * 0.02 * 2.0 + math.pi, 2.0 * math.pi) - math.pi)
    finally:
        env.close()


@pytest.mark.parametrize("scale", [0.0, 2.0])
def test_the_phase_term_is_reported_weighed_by_the_specs_feet_phase_scale_and_joins_the_sum(scale):
    env = make_reference_vec_env(SPOT, 1, {"noise_level": 0.0, **CLOCK, "feet_phase_scale": scale}, num_threads=1)
    try:
        env.reset(0)
        env.task.clock.phase[:] = math.pi  # every foot asked to stand: a standing robot follows it closely
        result = env.step(np.zeros((1, NU)))
        terms = {name[len("reward/") :]: values[0] for name, values in result.diagnostics.items() if name.startswith("reward/")}
        assert set(terms) == set(REWARD_TERMS)
        assert (terms["feet_phase"] == 0.0) if scale == 0.0 else (1.0 < terms["feet_phase"] <= scale)
        assert result.reward[0] == pytest.approx(max(0.0, sum(terms.values()) * 0.02), rel=1e-5)
        own = sum(value for name, value in terms.items() if name != "feet_phase")
        assert result.diagnostics["task_reward"][0] == pytest.approx(max(0.0, own * 0.02), rel=1e-5)
    finally:
        env.close()


def test_the_phase_terms_width_divides_the_squared_error():
    """feet_phase_width: the same feet and clock give exp(-e / width), so a tenfold width takes
    the log of the term down tenfold."""
    terms = []
    for width in (0.01, 0.1):
        options = {"noise_level": 0.0, **CLOCK, "feet_phase_scale": 1.0, "feet_phase_width": width}
        env = make_reference_vec_env(SPOT, 1, options, num_threads=1)
        try:
            env.reset(0)
            env.task.clock.phase[:] = 0.0  # mid-swing for half the feet: a standing robot misses it
            terms.append(env.step(np.zeros((1, NU))).diagnostics["reward/feet_phase"][0])
        finally:
            env.close()
    assert terms[0] < 0.5
    assert math.log(terms[0]) == pytest.approx(10.0 * math.log(terms[1]), rel=1e-9)


def test_the_variants_description_names_the_clock_and_holds_its_contract(envpool):
    from ppo_control.envs.backends import ReferenceBackend
    from ppo_control.envs.registry import check_robot_request

    facts = ReferenceBackend().describe(SPOT, CLOCK, None)
    clock = [f"phase_{f}:{foot}" for f in ("cos", "sin") for foot in ("FL", "FR", "HL", "HR")]
    assert facts["element_names"]["policy"][STATE:] == clock and facts["element_names"]["privileged"][PRIVILEGED:] == clock
    assert facts["group_sizes"] == {"policy": STATE + 8, "privileged": PRIVILEGED + 8}
    gait = facts["robot"]["gait_phase"]
    assert gait["initial_rad"] == [0.0, math.pi, math.pi, 0.0] and gait["frequency_hz_range"] == [2.0, 2.0] and gait["hold_rad"] == math.pi
    check_robot_request(SPOT, "mujoco", CLOCK)
    with pytest.raises(UserError, match="MuJoCo reference has this option"):
        check_robot_request(SPOT, "envpool", {"gait_clock": True})
