"""Recurrent policies (policy.rnn=gru|lstm): the recurrent layer, truncated BPTT over stored
sequences that reproduce what the acting policy did, state handling in evaluation and load_policy."""

import numpy as np
import pytest
import torch

from tests.helpers import RecordedRollouts, run_module, tiny_overrides


@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_sequence_equals_stepping_with_zero_state_at_episode_starts(kind):
    from ppo_control.rl.policy import MEMORIES

    torch.manual_seed(0)
    memory = MEMORIES[kind](5, 8)
    x, state = torch.randn(6, 3, 5), torch.randn(3, memory.state_size)
    starts = torch.zeros(6, 3, dtype=torch.bool)
    starts[2, 0] = starts[4, 2] = True
    features = memory.sequence(x, state, starts)
    h, expected = state.clone(), []
    for t in range(6):
        h = torch.where(starts[t, :, None], 0.0, h)
        out, h = memory(x[t], h)
        expected.append(out)
    assert torch.allclose(features, torch.stack(expected), atol=1e-6)
    # the reset matters: without it the steps after a start differ
    assert not torch.allclose(features, memory.sequence(x, state, torch.zeros_like(starts)), atol=1e-3)


@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_training_sequences_replay_exactly_what_the_acting_policy_did(kind):
    """The update evaluates the actor over sequences from the states stored at their starts, with
    the state zeroed where an episode starts inside one (a 10-step time limit, 16-step sequences):
    the log-probs it computes are those of the actions as they were sampled, step by step."""
    from ppo_control.rl.ppo import prepare_batch

    settings = [f"policy.rnn={kind}", "policy.rnn_size=16", "policy.rnn_sequence_length=16", "env.max_episode_steps=10"]
    recorded = RecordedRollouts("task=Hopper", *settings)
    cfg, policy = recorded.cfg, recorded.policy
    means = []
    action_mean = policy.action_mean

    def recording_action_mean(obs, state):
        mean, state = action_mean(obs, state)
        means.append(mean.clone())
        return mean, state

    policy.action_mean = recording_action_mean
    recorded.collect()
    means.clear()  # the second rollout starts from states carried over the rollout boundary
    rollout = recorded.collect()
    recorded.close()
    storage = rollout.storage
    assert storage.episode_starts()[1:].sum() >= 8  # episodes end inside the sequences
    batch = prepare_batch(policy, storage, rollout.last_values, cfg.ppo.gamma, cfg.ppo.gae_lambda)
    assert batch.obs.shape[:2] == (2 * 64 // 16, 16) and batch.states.shape == (8, policy.memory.state_size)
    acted = torch.stack(means)  # [T, N, action_dim]: the means the actions were sampled from
    std = policy.log_std.exp()
    log_probs = torch.distributions.Normal(acted, std).log_prob(storage.actions).sum(-1)
    assert torch.allclose(storage.from_sequences(batch.log_probs), log_probs, atol=1e-5)
    # replayed without the episode starts, the sequences would not match
    wrong, _, _ = policy.evaluate_actions(batch.obs, batch.actions, (batch.states, torch.zeros_like(batch.episode_starts)))
    assert not torch.allclose(wrong, batch.log_probs, atol=1e-3)


def test_sequences_round_trip_and_keep_each_envs_steps_in_order():
    from ppo_control.rl.storage import RolloutStorage

    storage = RolloutStorage(8, 3, 1, 1, sequence_length=4, state_size=2)
    x = torch.arange(24).reshape(8, 3)  # x[t, i] = 3 t + i
    sequences = storage.to_sequences(x)
    assert sequences.shape == (6, 4)
    assert sequences[0].tolist() == [0, 3, 6, 9] and sequences[4].tolist() == [13, 16, 19, 22]  # env 1, steps 4-7
    assert torch.equal(storage.from_sequences(sequences), x)


@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_loaded_policy_and_evaluation_carry_the_state_through_an_episode(tmp_path, kind):
    import gymnasium as gym

    from ppo_control import api
    from ppo_control.runs.directory import load_run

    settings = {"policy.rnn": kind, "policy.rnn_size": 16}
    result = api.train("Hopper", total_steps=256, run_dir=str(tmp_path / "run"), **tiny_overrides(), **settings)
    assert np.isfinite(result.eval_return)
    loaded = load_run(result.run_dir, None)
    policy = api.load_policy(result.run_dir)
    env = gym.make("Hopper-v5")
    stateless = []
    for episode in range(2):
        obs, _ = env.reset(seed=episode)
        policy.reset()
        state = loaded.policy.initial_state(1)
        for _ in range(30):
            obs_t = torch.from_numpy(obs.astype(np.float32))[None]
            action = policy(obs.astype(np.float32))
            expected, state = loaded.policy.deterministic_step(obs_t, state)
            assert np.array_equal(action, expected.numpy()[0])
            stateless.append(np.abs(loaded.policy.deterministic_step(obs_t, loaded.policy.initial_state(1))[0].numpy()[0] - action).max())
            obs, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                break
    env.close()
    assert max(stateless) > 1e-4  # the state changes the actions: it is really carried
    evaluation = api.evaluate(result.run_dir, episodes=2)
    assert evaluation["return_mean"] == pytest.approx(result.eval_return)  # evaluate reproduces training's evaluation


@pytest.mark.parametrize(
    "args, needle",
    [
        (["policy.rnn=rnn"], "policy.rnn"),
        (["policy.rnn=gru", "policy.rnn_sequence_length=7"], "does not divide ppo.rollout_steps=64"),
        (["policy.rnn=gru", "policy.rnn_size=0"], "policy.rnn_size"),
        (["policy.rnn=gru", "env.n_envs=3", "ppo.minibatches=8"], "training sequences"),  # 192 samples, 12 sequences
    ],
)
def test_bad_recurrent_settings_are_one_line_exit_2(args, needle):
    result = run_module("ppo_control.train", "task=Hopper", *args)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert needle in result.stderr


def test_recurrence_history_and_a_privileged_critic_combine_and_export(tmp_path):
    """A GRU reading 3 stacked frames of the policy group, the critic reading privileged state:
    trains, and both exports pass the probe-episode check against the training policy."""
    from ppo_control import api

    settings = {"policy.rnn": "gru", "policy.rnn_size": 16, "policy.actor_history": 3, "policy.critic_obs": ["policy", "privileged"]}
    run = api.train("Hopper", total_steps=256, run_dir=str(tmp_path / "run"), **tiny_overrides(), **settings).run_dir
    for fmt in ("torchscript", "onnx"):
        path = api.export(run, format=fmt)
        policy = api.load_policy(path)
        assert (policy.obs_dim, policy.history) == (11, 3)  # the actor's group only
        assert policy.metadata["rnn"] == "gru" and policy.metadata["rnn_state_size"] == 16
        assert policy.metadata["observation"]["history"] == 3
        if fmt == "torchscript":
            assert "previous 2 observations and a recurrent state of 16" in policy.metadata["reset"]
        else:
            assert (
                "history: float32 [batch, 2, obs_dim]" in policy.metadata["input"]
                and "rnn_state: float32 [batch, 16]" in policy.metadata["input"]
            )
