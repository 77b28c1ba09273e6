"""The vector env: SAME_STEP autoreset with the true final observation, clipping, seeding, ids."""

import gymnasium as gym
import numpy as np
import pytest
from omegaconf import OmegaConf

from ppo_control.envs import make_vec_env
from ppo_control.errors import UserError


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
    for t in range(5):
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
    for t in range(200):
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
