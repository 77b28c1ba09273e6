"""The vector env: SAME_STEP autoreset with the true final observation, clipping, seeding, ids."""

import gymnasium as gym
import numpy as np
import pytest
from omegaconf import OmegaConf

from ppo_control.config.errors import UserError
from ppo_control.envs import make_vec_env


def env_cfg(**overrides):
    base = dict(backend="gymnasium", n_envs=2, vectorization="sync", id="InvertedPendulum-v5", kwargs={}, max_episode_steps=None)
    return OmegaConf.create({**base, **overrides})


def test_truncation_returns_the_real_final_observation():
    envs = make_vec_env(env_cfg(max_episode_steps=5))
    reference = gym.make("InvertedPendulum-v5", max_episode_steps=5)
    obs = envs.reset(seed=7)
    ref_obs, _ = reference.reset(seed=7)
    np.testing.assert_allclose(obs[0], ref_obs, rtol=1e-6)
    zero = np.zeros((2, 1), dtype=np.float32)
    for _ in range(5):
        result = envs.step(zero)
        ref_obs, ref_reward, ref_term, ref_trunc, _ = reference.step(zero[0])
    assert result.truncated.all() and not result.terminated.any()
    np.testing.assert_allclose(result.final_obs[0], ref_obs, rtol=1e-5)  # the pre-reset observation
    assert not np.allclose(result.final_obs, result.obs)  # obs is already the next episode's start
    assert result.episode_lengths.tolist() == [5, 5]
    assert result.episode_returns.tolist() == [5.0, 5.0]
    envs.close()


def test_termination_is_not_truncation():
    envs = make_vec_env(env_cfg(n_envs=1))
    envs.reset(seed=0)
    push = np.full((1, 1), 3.0, dtype=np.float32)
    for t in range(200):  # noqa: B007  (t is read after the loop)
        result = envs.step(push)
        if result.terminated[0] or result.truncated[0]:
            break
    assert result.terminated[0] and not result.truncated[0]
    assert result.episode_lengths[0] == t + 1
    assert np.abs(result.final_obs[0, 1]) > 0.2  # the pole fell: that is what ended it
    envs.close()


def test_actions_are_clipped_to_bounds():
    a = make_vec_env(env_cfg(n_envs=1))
    b = make_vec_env(env_cfg(n_envs=1))
    a.reset(seed=3), b.reset(seed=3)
    out_a = a.step(np.full((1, 1), 100.0, dtype=np.float32))  # bound is 3
    out_b = b.step(np.full((1, 1), 3.0, dtype=np.float32))
    np.testing.assert_array_equal(out_a.obs, out_b.obs)
    assert a.info.action_high.tolist() == [3.0] and a.info.action_low.tolist() == [-3.0]
    a.close(), b.close()


def test_seeding_is_reproducible_and_sub_envs_differ():
    envs = make_vec_env(env_cfg(n_envs=3))
    first = envs.reset(seed=11)
    again = envs.reset(seed=11)
    np.testing.assert_array_equal(first, again)
    assert not np.allclose(first[0], first[1])
    assert first.dtype == np.float32 and first.shape == (3, 4)
    envs.close()


def test_entry_point_id_makes_a_users_own_env():
    envs = make_vec_env(env_cfg(id="gymnasium.envs.mujoco.inverted_pendulum_v5:InvertedPendulumEnv", max_episode_steps=3))
    envs.reset(seed=0)
    for _ in range(3):
        result = envs.step(np.zeros((2, 1), dtype=np.float32))
    assert result.truncated.all()
    envs.close()


def test_async_vectorization_matches_sync():
    sync = make_vec_env(env_cfg())
    asyn = make_vec_env(env_cfg(vectorization="async"))
    np.testing.assert_array_equal(sync.reset(seed=5), asyn.reset(seed=5))
    actions = np.array([[0.5], [-0.5]], dtype=np.float32)
    np.testing.assert_array_equal(sync.step(actions).obs, asyn.step(actions).obs)
    sync.close(), asyn.close()


@pytest.mark.parametrize("bad_id", ["NoSuchRobot-v5", "no_such_module:Env", "gymnasium:NoSuchClass"])
def test_bad_ids_raise_user_errors(bad_id):
    with pytest.raises(UserError, match="env.id"):
        make_vec_env(env_cfg(id=bad_id))


# ---------------------------------------------------------------------------------------------
# envpool backend: same protocol, same semantics, same dynamics as Gymnasium.


def envpool_cfg(**overrides):
    return env_cfg(**{"backend": "envpool", "num_threads": 1, **overrides})


# Tasks whose observation is (qpos without the first `skip` coordinates, qvel): the full state can
# be rebuilt from an envpool observation and set in the Gymnasium env (the skipped x/y positions
# do not enter the reward, which uses their velocity).
PARITY_TASKS = {"HalfCheetah-v5": 1, "Hopper-v5": 1, "Walker2d-v5": 1, "Swimmer-v5": 2, "InvertedPendulum-v5": 0}


@pytest.mark.parametrize("env_id", sorted(PARITY_TASKS))
def test_envpool_matches_gymnasium_dynamics(env_id):
    pool = make_vec_env(envpool_cfg(id=env_id, n_envs=1))
    reference = gym.make(env_id)
    assert type(pool).__name__ == "EnvpoolVecEnv"
    assert pool.info.obs_dim == reference.observation_space.shape[0]
    assert pool.info.action_dim == reference.action_space.shape[0]
    np.testing.assert_array_equal(pool.info.action_low, reference.action_space.low)
    np.testing.assert_array_equal(pool.info.action_high, reference.action_space.high)
    assert pool.info.max_episode_steps == reference.spec.max_episode_steps == 1000

    obs = pool.reset(seed=3)
    reference.reset(seed=0)
    skip, model = PARITY_TASKS[env_id], reference.unwrapped.model
    reference.unwrapped.set_state(np.concatenate([np.zeros(skip), obs[0, : model.nq - skip]]), obs[0, model.nq - skip :])
    rng = np.random.default_rng(0)
    for t in range(10):
        high = reference.action_space.high
        action = (rng.uniform(-1.5, 1.5, size=(1, pool.info.action_dim)) * high).astype(np.float32)  # clipping too
        result = pool.step(action)
        ref_obs, ref_reward, ref_terminated, _, _ = reference.step(np.clip(action[0], -high, high))
        np.testing.assert_allclose(result.final_obs[0], ref_obs, atol=2e-4, err_msg=f"step {t}")
        assert result.reward[0] == pytest.approx(ref_reward, abs=1e-4)
        assert bool(result.terminated[0]) == ref_terminated
        if ref_terminated:
            break
    pool.close()
    reference.close()


def test_envpool_truncation_resets_in_the_same_step():
    envs = make_vec_env(envpool_cfg(id="Hopper-v5", n_envs=3, max_episode_steps=4))
    envs.reset(seed=0)
    zero = np.zeros((3, 3), dtype=np.float32)
    for _ in range(3):
        result = envs.step(zero)
        assert not (result.terminated | result.truncated).any() and (result.final_obs == result.obs).all()
    result = envs.step(zero)
    assert result.truncated.all() and not result.terminated.any()
    assert result.episode_lengths.tolist() == [4, 4, 4]
    assert not np.allclose(result.final_obs, result.obs)  # final: the 4th step's obs; obs: a fresh start
    np.testing.assert_allclose(result.obs[:, 0], 1.25, atol=0.01)  # the reset height (+-noise)
    # The step after the reset is a real step: envpool's own NEXT_STEP autoreset would instead
    # drop this action and return reward 0.
    after = envs.step(zero)
    assert (after.reward > 0.5).all() and not (after.terminated | after.truncated).any()
    envs.close()


def test_envpool_termination_keeps_the_fallen_final_observation():
    envs = make_vec_env(envpool_cfg(id="Hopper-v5", n_envs=2))
    envs.reset(seed=0)
    push = np.ones((2, 3), dtype=np.float32)
    for t in range(200):  # noqa: B007  (t is read after the loop)
        result = envs.step(push)
        if result.terminated.any():
            break
    assert result.terminated.any() and not result.truncated.any()
    i = int(np.flatnonzero(result.terminated)[0])
    height, angle = result.final_obs[i, 0], result.final_obs[i, 1]
    assert height < 0.7 or abs(angle) > 0.2  # Hopper's unhealthy region: the hopper has fallen
    assert result.obs[i, 0] == pytest.approx(1.25, abs=0.01)  # while obs is the next episode's start
    assert len(result.episode_lengths) == result.terminated.sum() and (result.episode_lengths > 1).all()
    envs.close()


def test_envpool_falls_back_to_gymnasium_with_a_message(capsys):
    envs = make_vec_env(envpool_cfg(id="tests.user_envs.nan_env:NaNAfterEnv", max_episode_steps=50))
    assert type(envs).__name__ == "GymnasiumVecEnv"
    assert "envpool has no 'tests.user_envs.nan_env:NaNAfterEnv'" in capsys.readouterr().err
    envs.close()
    envs = make_vec_env(envpool_cfg(id="Hopper-v5", kwargs={"default_camera_config": {}}))
    assert type(envs).__name__ == "GymnasiumVecEnv"
    assert "does not accept env.kwargs ['default_camera_config']" in capsys.readouterr().err
    envs.close()


def test_envpool_reset_seeds_like_gymnasium_and_repeats():
    first = make_vec_env(envpool_cfg(id="Hopper-v5", n_envs=2))
    a = first.reset(seed=5)
    b = first.reset(seed=6)
    again = first.reset(seed=5)
    np.testing.assert_array_equal(a, again)
    np.testing.assert_array_equal(a[1], b[0])  # sub-env i is seeded with seed + i
    first.close()


# Gymnasium's v5 `include_<part>_in_observation: false` options, which envpool lacks: the adapter cuts
# the part out itself. The remaining observation starts with (qpos without x/y, qvel), so the state
# can be rebuilt from it as above, and every later part (cinert, cvel, qfrc_actuator) must then
# match Gymnasium's at its own offset.
@pytest.mark.parametrize(
    ("env_id", "excluded"), [("Ant-v5", ["cfrc_ext"]), ("Humanoid-v5", ["cfrc_ext"]), ("Humanoid-v5", ["cinert", "cfrc_ext"])]
)
def test_envpool_leaves_out_observation_parts_like_gymnasium(env_id, excluded):
    kwargs = {f"include_{part}_in_observation": False for part in excluded}
    pool = make_vec_env(envpool_cfg(id=env_id, n_envs=1, kwargs=kwargs))
    reference = gym.make(env_id, **kwargs)
    assert type(pool).__name__ == "EnvpoolVecEnv"
    assert pool.info.obs_dim == reference.observation_space.shape[0] < gym.make(env_id).observation_space.shape[0]
    obs = pool.reset(seed=1)
    reference.reset(seed=0)
    model = reference.unwrapped.model
    reference.unwrapped.set_state(np.concatenate([np.zeros(2), obs[0, : model.nq - 2]]), obs[0, model.nq - 2 : model.nq - 2 + model.nv])
    rng = np.random.default_rng(0)
    for t in range(5):
        action = rng.uniform(-0.4, 0.4, size=(1, pool.info.action_dim)).astype(np.float32)
        result = pool.step(action)
        ref_obs, ref_reward, _, _, _ = reference.step(action[0])
        assert result.obs.shape == (1, pool.info.obs_dim)
        np.testing.assert_allclose(result.final_obs[0], ref_obs, atol=2e-3, rtol=1e-3, err_msg=f"step {t}")
        assert result.reward[0] == pytest.approx(ref_reward, abs=1e-3)  # the part left out is still in the reward
    pool.close()
    reference.close()


def test_envpool_observation_cut_follows_the_other_kwargs():
    # Keeping the x/y position moves every later part by two: the cut must be taken from the layout
    # those kwargs give, not from the default one.
    kwargs = {"exclude_current_positions_from_observation": False, "include_cfrc_ext_in_observation": False}
    pool = make_vec_env(envpool_cfg(id="Ant-v5", n_envs=1, kwargs=kwargs))
    reference = gym.make("Ant-v5", **kwargs)
    assert type(pool).__name__ == "EnvpoolVecEnv"
    assert pool.info.obs_dim == reference.observation_space.shape[0] == 29
    obs = pool.reset(seed=0)
    assert 0.6 < obs[0, 2] < 0.9  # the torso's height (0.75 +- the reset noise), after x and y
    pool.close()
    reference.close()


# --- the registry: backends are objects asked for what they can do ----------------------------------


@pytest.mark.parametrize(
    "env_id, backend, reference",
    [
        ("HalfCheetah-v5", "envpool", "gymnasium"),  # envpool's port of a Gymnasium task: evaluated on Gymnasium
        ("HalfCheetah-v5", "gymnasium", "gymnasium"),
        ("halfcheetah", "mjx", "mjx"),  # Brax's envs are their own reference
        ("Go1JoystickFlatTerrain-v1", "envpool", "mujoco"),  # a robot with a MuJoCo reference: it renders
        ("Go1JoystickFlatTerrain", "mujoco", "mujoco"),
        ("Go1Getup-v1", "envpool", "envpool"),  # a robot without one stays on envpool
    ],
)
def test_a_tasks_reference_is_the_backend_that_steps_it_and_renders_it(env_id, backend, reference):
    from ppo_control.envs import reference_backend, reference_of

    cfg = env_cfg(id=env_id, backend=backend)
    assert reference_backend(cfg) == reference_of(cfg).name == reference


def test_every_backend_has_the_members_its_capabilities_promise():
    from ppo_control.envs import BACKENDS, DeviceVecEnv, PhysicsReplayVecEnv, VecEnv

    def members(protocol) -> set[str]:
        return {name for name in vars(protocol) if not name.startswith("_")} - set(vars(VecEnv))

    assert members(DeviceVecEnv) == {"reset_device", "step_device"}
    assert members(PhysicsReplayVecEnv) == {"mj_model", "control_period_s", "physics_states", "stepped_states"}
    promised = {"device_resident": members(DeviceVecEnv), "replays_physics": members(PhysicsReplayVecEnv)}
    seen = set()
    for name, backend in BACKENDS.items():
        assert backend.name == name and backend.capabilities is backend.vec_env_class.capabilities
        for capability, needed in promised.items():
            if getattr(backend.capabilities, capability):
                seen.add(capability)
                missing = {member for member in needed if not hasattr(backend.vec_env_class, member)}
                assert not missing, f"{name} says {capability} but its {backend.vec_env_class.__name__} lacks {missing}"
    assert seen == set(promised)  # each capability is some backend's (mjx: both; the MuJoCo references: replays)


def test_an_unknown_backend_is_one_line_naming_the_valid_ones():
    from ppo_control.envs import backend_named

    with pytest.raises(UserError, match=r"env.backend=bullet: unknown backend; valid backends: gymnasium, envpool, mjx, mujoco$"):
        backend_named("bullet")


@pytest.mark.parametrize(
    "env_id, backend, message",
    [
        ("Go1JoystickFlatTerrain-v1", "gymnasium", "runs on envpool or its MuJoCo reference; use env.backend=envpool or mujoco$"),
        ("Go1Getup-v1", "mjx", "runs on envpool or its MuJoCo reference; use env.backend=envpool$"),
        ("Go1Getup-v1", "mujoco", "env.backend=mujoco: task Go1Getup-v1 has no MuJoCo reference; tasks with one: Go1JoystickFlatTerrain"),
    ],
)
def test_a_robot_task_on_a_backend_that_does_not_step_it_is_refused_in_one_line(env_id, backend, message):
    from ppo_control.envs.registry import check_robot_request

    with pytest.raises(UserError, match=message):
        check_robot_request(env_id, backend, {})


def test_what_a_robot_run_may_ask_follows_the_backends_capabilities():
    from ppo_control.envs.randomization import Randomization
    from ppo_control.envs.registry import check_robot_request

    heavier = Randomization(body_mass=(1.2, 1.2))
    check_robot_request("Go1JoystickFlatTerrain-v1", "mujoco", {}, heavier, rendering=True)  # the reference randomizes and renders
    with pytest.raises(UserError, match=r"randomize.body_mass: envpool cannot change .*\(env.backend=mujoco\) or remove"):
        check_robot_request("Go1JoystickFlatTerrain-v1", "envpool", {}, heavier)
    with pytest.raises(UserError, match="whose robot tasks cannot render"):
        check_robot_request("Go1JoystickFlatTerrain-v1", "envpool", {}, rendering=True)


def test_whether_a_task_is_a_robot_is_asked_of_the_task():
    from ppo_control.robots.playground import is_robot_task

    assert is_robot_task("Go1JoystickFlatTerrain-v1") and is_robot_task("Go1Getup") and is_robot_task("MuJoCoPlayground/PandaPickCube-v1")
    assert not is_robot_task("HalfCheetah-v5") and not is_robot_task("halfcheetah") and not is_robot_task("Go1JoystickFlatTerrain-v5")
