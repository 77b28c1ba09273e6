"""Observation groups: the privileged group, an asymmetric critic, Dict envs, and exports of the actor's groups."""

import sys

import numpy as np
import pytest
import torch

from ppo_control.config import compose
from ppo_control.envs import make_env_factory, make_vec_env
from ppo_control.envs.randomization import Randomization
from ppo_control.rl.policy import build_policy
from tests.helpers import TINY, USER_ENVS, run_module, tiny_overrides

sys.path.insert(0, str(USER_ENVS))  # dict_env, for the entry point below


def test_privileged_group_is_the_clean_simulator_state_contacts_and_scales():
    settings = Randomization(body_mass=(1.3, 1.3), obs_noise=0.5)
    env = make_env_factory("Hopper-v5", randomization=settings, privileged=True)()
    plain = make_env_factory("Hopper-v5", randomization=settings)()
    obs, _ = env.reset(seed=0)
    plain_obs, _ = plain.reset(seed=0)
    for _ in range(5):
        obs, *_ = env.step(np.full(3, 0.4))
        plain_obs, *_ = plain.step(np.full(3, 0.4))
    model, data = env.unwrapped.model, env.unwrapped.data
    assert env.observation_groups == (("policy", 11), ("privileged", 55))
    np.testing.assert_array_equal(obs[:11], plain_obs)  # the policy group is the task's own (noisy) observation
    privileged = obs[11:]
    np.testing.assert_array_equal(privileged[: model.nq], data.qpos)  # including the root's x, which the policy never sees
    np.testing.assert_array_equal(privileged[model.nq : model.nq + model.nv], data.qvel)  # no sensor noise here
    contacts = privileged[model.nq + model.nv : model.nq + model.nv + 6 * (model.nbody - 1)]
    np.testing.assert_array_equal(contacts, data.cfrc_ext[1:].ravel())
    masses = privileged[-(model.nbody + model.ngeom + model.nv + model.nu) :][: model.nbody]
    np.testing.assert_array_equal(masses, [1.0] + [1.3] * (model.nbody - 1))


def test_asymmetric_critic_reads_privileged_values_and_the_actor_does_not():
    cfg = compose(["task=Hopper", "env.backend=gymnasium", "env.n_envs=2", "policy.critic_obs=[policy,privileged]"])
    envs = make_vec_env(cfg.env, privileged=True)
    info = envs.info
    envs.close()
    torch.manual_seed(0)
    policy = build_policy(cfg.policy, cfg.normalize, info)
    assert policy.actor_mean[0].in_features == 11 and policy.critic[0].in_features == 66
    obs = torch.randn(8, 66)
    other = obs.clone()
    other[:, 11:] += 5.0  # different privileged values, same policy group
    with torch.no_grad():
        assert torch.equal(policy.deterministic_action(obs), policy.deterministic_action(other))
        assert not torch.allclose(policy.value(policy.normalize(obs)), policy.value(policy.normalize(other)))


def test_default_groups_build_the_same_policy_as_before():
    cfg = compose(["task=Hopper", "env.backend=gymnasium", "env.n_envs=2"])
    envs = make_vec_env(cfg.env)
    policy = build_policy(cfg.policy, cfg.normalize, envs.info)
    envs.close()
    assert policy.actor_index is None and policy.critic_index is None  # no indexing at all on the default path
    assert not any("index" in key for key in policy.state_dict())  # checkpoints unchanged


def test_a_users_dict_env_provides_its_own_groups():
    cfg = compose(
        [
            "task=InvertedPendulum",
            "env.id=dict_env:DictPendulumEnv",
            "env.max_episode_steps=50",
            "env.backend=gymnasium",
            "env.n_envs=2",
            "policy.critic_obs=[policy,privileged]",
        ]
    )
    envs = make_vec_env(cfg.env, privileged=True)  # the env's own privileged group is used, ours is not added
    assert envs.info.groups == (("policy", 3), ("privileged", 1))
    obs = envs.reset(0)
    envs.close()
    assert obs.shape == (2, 4)


def test_privileged_critic_trains_and_exports_only_the_actors_group(tmp_path):
    from ppo_control.api import export, load_policy, train

    overrides = {**tiny_overrides(), "policy.critic_obs": ["policy", "privileged"], "log.tensorboard": False}
    result = train("Hopper", total_steps=256, run_dir=str(tmp_path / "run"), **overrides)
    path = export(result.run_dir, out=str(tmp_path / "p.pt"))  # verified against the training policy on the way
    exported, from_run = load_policy(path), load_policy(result.run_dir)
    assert exported.obs_dim == from_run.obs_dim == 11
    groups = exported.metadata["observation"]["groups"]
    assert [(g["name"], g["size"]) for g in groups] == [("policy", 11)]
    obs = np.random.default_rng(0).normal(size=(4, 11)).astype(np.float32)
    np.testing.assert_allclose(exported(obs), from_run(obs), atol=1e-5)


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["task=Hopper", "policy.critic_obs=[policy,secret]"],
            "policy.critic_obs: unknown observation group 'secret'; valid groups: policy, privileged (MuJoCo tasks)",
        ),
        (["task=Hopper", "policy.actor_obs=[policy,policy]"], "policy.actor_obs must be a non-empty list of distinct group names"),
        (["task=nan_env_task"], "no 'privileged' observation group"),
    ],
)
def test_bad_groups_are_one_line_exit_2(tmp_path, args, message):
    if args == ["task=nan_env_task"]:  # a user env that is not MuJoCo-backed enough: Pendulum (classic control)
        task = tmp_path / "Swing.yaml"
        task.write_text("env:\n  id: Pendulum-v1\n  backend: gymnasium\npolicy:\n  critic_obs: [policy, privileged]\n")
        args = [f"task={task}"]
    result = run_module("ppo_control.train", *args, *TINY, f"run_dir={tmp_path / 'run'}", timeout=120)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and message in result.stderr, result.stderr
    assert not (tmp_path / "run").exists()


def test_the_critic_can_have_its_own_widths_and_the_run_reloads_with_them(tmp_path):
    """policy.critic_hidden_sizes widens the critic alone; null builds exactly the shared-shape
    policy (same weights for the same seed); a trained run loads back with the critic it had."""
    from ppo_control.runs.directory import load_run
    from tests.helpers import train_in_process

    def linear_widths(net):
        return [layer.out_features for layer in net if isinstance(layer, torch.nn.Linear)]

    cfg = compose(["task=Hopper", "env.backend=gymnasium", "env.n_envs=2"])
    envs = make_vec_env(cfg.env)
    info = envs.info
    envs.close()
    built = {}
    for name, override in (
        ("default", ["policy.critic_hidden_sizes=null"]),  # tasks/Hopper.yaml sets a wider critic of its own
        ("explicit", ["policy.critic_hidden_sizes=[64,64]"]),
        ("wide", ["policy.critic_hidden_sizes=[256,256,256]"]),
    ):
        torch.manual_seed(0)
        composed = compose(["task=Hopper", "env.backend=gymnasium", *override])
        built[name] = build_policy(composed.policy, composed.normalize, info)
    default, explicit, wide = built["default"].state_dict(), built["explicit"].state_dict(), built["wide"]
    assert default.keys() == explicit.keys() and all(torch.equal(default[k], explicit[k]) for k in default)
    assert linear_widths(wide.critic) == [256, 256, 256, 1] and linear_widths(wide.actor_mean) == [64, 64, 3]
    hopper = build_policy(cfg.policy, cfg.normalize, info)  # the task file's own critic: wider than its actor, the export unchanged
    assert linear_widths(hopper.critic) == [256, 256, 1] and linear_widths(hopper.actor_mean) == [64, 64, 3]

    run = tmp_path / "run"
    train_in_process(run, "task=InvertedPendulum", "total_steps=128", "policy.critic_hidden_sizes=[32,16]", *TINY)
    loaded = load_run(run).policy
    assert linear_widths(loaded.critic) == [32, 16, 1] and linear_widths(loaded.actor_mean) == [64, 64, 1]
