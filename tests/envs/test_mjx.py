"""env.backend=mjx: Brax's MJX envs on JAX (its CPU here; a GPU where there is one), the rollout on
the training device, and everything else (resume, evaluation, export) as for the other backends."""

import sys

import numpy as np
import pytest
import torch

from tests.helpers import MJX_LIMIT, random_actions, run_module

LIMIT = MJX_LIMIT


@pytest.mark.slow
def test_episodes_end_by_termination_or_time_limit_with_real_final_observations(hopper):
    first = hopper.reset_device(0).clone()
    running = torch.zeros(4, dtype=torch.float64)
    length = torch.zeros(4, dtype=torch.int64)
    seen = {"terminated": 0, "truncated": 0}
    for action in random_actions(40, 4, 3):
        before = hopper.mj_model  # the host model stays available for rendering and the contract
        out = hopper.step_device(action)
        assert before is not None and out.obs.device == torch.device("cpu") and out.obs.dtype == torch.float32
        running += out.reward.double()
        length += 1
        done = out.terminated | out.truncated
        assert not (out.terminated & out.truncated).any()
        # The time limit is a truncation exactly at LIMIT steps, never earlier.
        assert torch.equal(out.truncated, (length == LIMIT) & ~out.terminated)
        # Ongoing episodes: the final observation is the observation; ended ones: the real last one.
        assert torch.equal(out.final_obs[~done], out.obs[~done])
        assert (out.final_obs[done] != out.obs[done]).any(-1).all()
        for i in torch.nonzero(done).flatten().tolist():
            assert out.episode_return[i].item() == pytest.approx(running[i].item(), rel=1e-5)
            assert out.episode_length[i].item() == length[i].item()
            # A fresh initial state, not a replay of the sub-env's first one.
            assert not torch.equal(out.obs[i], first[i])
        running[done], length[done] = 0.0, 0
        seen["terminated"] += int(out.terminated.sum())
        seen["truncated"] += int(out.truncated.sum())
    assert seen["terminated"] > 0 and seen["truncated"] > 0


@pytest.mark.slow
def test_envs_of_one_shape_share_compiled_functions_but_not_episodes(hopper, monkeypatch):
    """A second env of the same task, batch and limit (a run's resume, an API user's second run)
    reuses the first one's jitted functions instead of tracing MJX again, an env of another batch
    or limit reuses the engine env, and each keeps its own episodes: stepping one leaves the other
    where it was."""
    from ppo_control.envs.mjx_backend import MjxVecEnv

    twin = MjxVecEnv("hopper", 4, max_episode_steps=LIMIT)
    assert twin._step_fn is hopper._step_fn and twin._reset_fn is hopper._reset_fn
    other_batch = MjxVecEnv("hopper", 2, max_episode_steps=LIMIT)
    other_limit = MjxVecEnv("hopper", 4, max_episode_steps=LIMIT + 1)
    assert other_batch._step_fn is not hopper._step_fn and other_limit._step_fn is not hopper._step_fn
    # Other shapes still build on the one engine env (and its traced observation length).
    assert other_batch.env is other_limit.env is hopper.env
    # So does the export's controller contract: it must not build another one.
    from omegaconf import OmegaConf

    from ppo_control.deploy import contract
    from ppo_control.envs import mjx_backend as mjx_env

    def no_new_engine_env(*args, **kwargs):
        raise AssertionError("built a second engine env for a task already built")

    monkeypatch.setattr(mjx_env, "engine_env", no_new_engine_env)
    cfg = OmegaConf.create({"backend": "mjx", "id": "hopper", "kwargs": None})
    assert contract.controller_contract(cfg)["observation"]["groups"] == [{"name": "policy", "size": 11, "element_names": None}]
    assert (twin.info.obs_dim, twin.info.action_dim) == (hopper.info.obs_dim, hopper.info.action_dim) == (11, 3)

    actions = random_actions(5, 4, 3, seed=2)
    hopper.reset_device(3)
    alone = [hopper.step_device(a).obs.clone() for a in actions]
    hopper.reset_device(3)
    twin.reset_device(4)
    for a in actions:
        twin.step_device(-a)  # the twin moves differently in between
        assert torch.equal(hopper.step_device(a).obs, alone.pop(0))


@pytest.mark.slow
def test_observations_reach_torch_without_a_copy_and_the_state_round_trips(hopper):
    import jax.numpy as jnp

    from ppo_control.envs.mjx_backend import to_torch

    array = jnp.arange(12.0).reshape(3, 4)
    assert to_torch(array).data_ptr() == array.unsafe_buffer_pointer()
    actions = random_actions(6, 4, 3, seed=1)
    saved = hopper.get_state()
    first = [hopper.step_device(a).obs.clone() for a in actions]
    hopper.set_state(saved)
    again = [hopper.step_device(a).obs.clone() for a in actions]
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    hopper.reset_device(1)
    with pytest.raises(Exception, match="does not fit"):
        hopper.set_state({"leaves": saved["leaves"][:-1]})


@pytest.mark.slow
@pytest.mark.parametrize("rnn", ["none", "lstm"])
def test_device_collector_stores_what_the_host_collector_stores(hopper, rnn):
    """The same env, seeds and policy through both collectors: the device one (batched truncation
    values, reward scaling in torch, one finiteness check per rollout) equals the host one, a
    recurrent policy's stored sequence states included."""
    from ppo_control.rl.device_rollout import DeviceRolloutCollector
    from ppo_control.rl.policy import ActorCritic, Networks
    from ppo_control.rl.rollout import RolloutCollector

    torch.manual_seed(0)
    info = hopper.info
    policy = ActorCritic(info.obs_dim, info.action_dim, info.action_low, info.action_high, Networks(log_std_init=0.0, rnn=rnn, rnn_size=8))
    policy.obs_normalizer.update(torch.randn(300, info.obs_dim) * 2 + 0.5)
    results = {}
    for name, collector_type in (("host", RolloutCollector), ("device", DeviceRolloutCollector)):
        collector = collector_type(hopper, policy, 16, 0.99, 10.0, True, sequence_length=8)
        collector.reset(3)
        torch.manual_seed(1)
        rollouts = []
        for _ in range(2):
            rollout = collector.collect()
            storage = rollout.storage
            fields = ("observations", "actions", "rewards", "terminated", "truncated", "truncation_values")
            fields += ("sequence_states",) if policy.recurrent else ()
            rollouts.append(({f: getattr(storage, f).clone() for f in fields}, rollout.last_values.clone(), rollout.episode_returns))
        results[name] = rollouts
    for (host, host_last, host_returns), (device, device_last, device_returns) in zip(results["host"], results["device"]):
        for key in ("observations", "actions", "terminated", "truncated"):
            assert torch.equal(host[key], device[key]), key
        if "sequence_states" in host:
            assert torch.equal(host["sequence_states"], device["sequence_states"]) and host["sequence_states"].abs().sum() > 0
        assert torch.allclose(host["rewards"], device["rewards"], atol=1e-6)
        assert torch.allclose(host["truncation_values"], device["truncation_values"], atol=1e-6)
        assert host["truncated"].any() and (host["truncation_values"][host["truncated"]] != 0).all()
        assert torch.allclose(host_last, device_last)
        assert host_returns == pytest.approx(device_returns, rel=1e-6) and host_returns


class NaNAfter:
    """A device env double whose sub-env 2 returns a NaN observation at its 5th step."""

    def __init__(self):
        from ppo_control.envs import EnvInfo

        self.num_envs, self.steps = 4, 0
        self.info = EnvInfo(3, 1, -np.ones(1, np.float32), np.ones(1, np.float32), 100)

    def reset_device(self, seed):
        return torch.zeros(4, 3)

    def step_device(self, actions):
        from ppo_control.envs.mjx_backend import DeviceStep

        self.steps += 1
        obs = torch.zeros(4, 3)
        if self.steps == 5:
            obs[2, 1] = float("nan")
        no = torch.zeros(4, dtype=torch.bool)
        return DeviceStep(obs, torch.ones(4), no, no, obs, torch.zeros(4), torch.zeros(4, dtype=torch.int32))


def test_device_collector_names_the_sub_env_and_step_of_a_non_finite_observation():
    from ppo_control.rl.device_rollout import DeviceRolloutCollector
    from ppo_control.rl.policy import ActorCritic
    from ppo_control.rl.rollout import NonFiniteEnvOutput

    envs = NaNAfter()
    policy = ActorCritic(3, 1, envs.info.action_low, envs.info.action_high)
    collector = DeviceRolloutCollector(envs, policy, 8, 0.99, 10.0, True)
    collector.reset(0)
    with pytest.raises(NonFiniteEnvOutput) as caught:
        collector.collect()
    assert (caught.value.what, caught.value.env_index, caught.value.rollout_step) == ("observation", 2, 5)


MJX_TINY = [
    "task=Hopper",
    "env.backend=mjx",
    "device=cpu",
    "env.n_envs=4",
    f"env.max_episode_steps={LIMIT}",
    "policy.hidden_sizes=[32,32]",
    "ppo.rollout_steps=8",
    "ppo.epochs=2",
    "ppo.minibatches=2",
    "total_steps=192",
    "eval.every_steps=64",
    "eval.episodes=2",
    "log.every_updates=1",
]


@pytest.mark.slow
def test_mjx_run_resumes_exactly_evaluates_and_exports(tmp_path):
    """Interrupted and resumed equals uninterrupted, row for row; `evaluate` reproduces the run's
    own evaluation on the MJX env; the exported policy acts as the trained one."""
    pytest.importorskip("brax")
    from ppo_control.config import compose
    from ppo_control.training.trainer import Trainer
    from tests.runs.test_resume import resume_in_process, stable

    Trainer(compose([*MJX_TINY, f"run_dir={tmp_path / 'whole'}"])).train()
    Trainer(compose([*MJX_TINY, f"run_dir={tmp_path / 'cut'}"])).train(max_updates=3)
    assert [r["step"] for r in stable(tmp_path / "cut")] == [32, 64, 96]
    resume_in_process(tmp_path / "cut")
    whole = stable(tmp_path / "whole")
    assert len(whole) == 6 and stable(tmp_path / "cut") == whole
    assert whole[-1]["episodes"] > 0 and "eval_return" in whole[-1]

    from ppo_control import api

    evaluated = api.evaluate(tmp_path / "whole", episodes=2)
    assert evaluated["return_mean"] == pytest.approx(whole[-1]["eval_return"], rel=1e-5)

    exported = run_module("ppo_control.export", f"run={tmp_path / 'whole'}")
    assert exported.returncode == 0, exported.stderr
    module = torch.jit.load(str(tmp_path / "whole" / "export" / "policy.pt"))
    loaded = api.load_policy(tmp_path / "whole")
    obs = np.random.default_rng(0).normal(size=(5, loaded.obs_dim)).astype(np.float32)
    assert loaded.obs_dim == 11
    np.testing.assert_allclose(module(torch.from_numpy(obs)).numpy(), loaded(obs), atol=1e-6)


@pytest.mark.parametrize(
    "args, message",
    [
        (["task=Swimmer"], "env.backend=mjx: task 'Swimmer' names no counterpart there"),
        (["task=Ant", "policy.actor_history=2"], "policy.actor_history=2 is not supported with env.backend=mjx"),
        (["task=Ant", "randomize.friction=[0.5,1.5]"], "randomize.friction is not supported with env.backend=mjx"),
        (["task=Ant", "policy.critic_obs=[policy,privileged]"], "policy.critic_obs"),
    ],
)
def test_what_the_mjx_backend_cannot_honour_is_refused_in_one_line(args, message):
    """The task's counterpart when the config is composed; the backend's own limits when a run is
    checked (registry.check_run, before anything is built or written)."""
    from ppo_control.config import ConfigError, compose
    from ppo_control.envs.registry import check_run

    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace(".", r"\.")):
        check_run(compose([*args, "env.backend=mjx"]))


def test_the_mjx_regime_keeps_its_own_settings_over_a_task_files_cpu_ones():
    """tasks/Hopper.yaml tunes the CPU regime (a wider critic, many small minibatches, a growing
    discount); with env.backend=mjx the regime's measured settings hold unless the command line says otherwise."""
    from ppo_control.config import compose

    cpu = compose(["task=Hopper"])
    assert (cpu.policy.critic_hidden_sizes, cpu.ppo.minibatches, cpu.ppo.gamma_end) == ([256, 256], 32, 0.999)
    mjx = compose(["task=Hopper", "env.backend=mjx"])
    assert (mjx.policy.hidden_sizes, mjx.policy.critic_hidden_sizes, mjx.ppo.minibatches, mjx.ppo.gamma_end) == ([256, 256], None, 4, None)
    assert compose(["task=Hopper", "env.backend=mjx", "ppo.gamma_end=0.995"]).ppo.gamma_end == 0.995


@pytest.mark.slow
def test_an_unknown_engine_task_lists_the_ones_it_provides(tmp_path):
    pytest.importorskip("brax")
    result = run_module("ppo_control.train", *MJX_TINY, "env.id=swimmer", f"run_dir={tmp_path / 'r'}")
    assert result.returncode == 2
    line = result.stderr.strip().splitlines()[-1]
    assert "Brax provides no MJX environment 'swimmer'" in line and "ant, halfcheetah, hopper" in line
    assert "Traceback" not in result.stderr


def test_without_the_extra_the_backend_names_the_install_command(monkeypatch):
    from ppo_control.config.errors import UserError
    from ppo_control.envs.mjx_backend import import_engine

    monkeypatch.setitem(sys.modules, "brax", None)  # as if not installed
    with pytest.raises(UserError, match=r"pip install -e '\.\[mjx\]'"):
        import_engine()
