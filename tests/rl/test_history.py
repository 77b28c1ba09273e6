"""Observation history (policy.actor_history / critic_history): stacking, episode starts, the
policy's reading of the stack, time-limit bootstrapping with history, evaluation."""

import numpy as np
import pytest
import torch

from ppo_control.deploy.module import DeployedPolicy
from tests.helpers import RecordedRollouts


def test_stack_shifts_frames_and_repeats_the_first_frame_of_an_episode():
    from ppo_control.rl.history import ObservationHistory

    history = ObservationHistory(3)
    first = np.array([[1.0, 10.0], [2.0, 20.0]], dtype=np.float32)
    assert history.reset(first).tolist() == [[1, 10, 1, 10, 1, 10], [2, 20, 2, 20, 2, 20]]
    second = np.array([[3.0, 30.0], [4.0, 40.0]], dtype=np.float32)
    assert history.step(second, np.array([False, False])).tolist() == [[1, 10, 1, 10, 3, 30], [2, 20, 2, 20, 4, 40]]
    # Sub-env 1 ends its episode: the final frame joins its old stack (for bootstrapping), then its
    # new episode's first frame fills the whole stack; sub-env 0 keeps shifting.
    final = np.array([[0.0, 0.0], [5.0, 50.0]], dtype=np.float32)
    assert history.with_final(final, np.array([1])).tolist() == [[2, 20, 4, 40, 5, 50]]
    third = np.array([[6.0, 60.0], [7.0, 70.0]], dtype=np.float32)
    assert history.step(third, np.array([False, True])).tolist() == [[1, 10, 3, 30, 6, 60], [7, 70, 7, 70, 7, 70]]


def test_history_of_one_is_the_observation_itself():
    from ppo_control.rl.history import ObservationHistory

    history = ObservationHistory(1)
    obs = np.ones((2, 3), dtype=np.float32)
    assert history.reset(obs) is obs
    assert history.step(obs * 2, np.array([True, False])).tolist() == (obs * 2).tolist()
    assert history.with_final(obs * 3, np.array([0])).tolist() == [[3, 3, 3]]


def test_stacked_index_picks_the_groups_of_the_newest_frames():
    from ppo_control.rl.history import stacked_index

    assert stacked_index(None, 4, 2, 2) is None
    assert stacked_index(None, 2, 1, 3) == [4, 5]
    assert stacked_index([0, 2], 3, 2, 3) == [3, 5, 6, 8]


def make_policy(actor_history, critic_history, actor_index=None):
    from ppo_control.rl.policy import ActorCritic, Inputs

    torch.manual_seed(0)
    policy = ActorCritic(
        obs_dim=3,
        action_dim=2,
        action_low=-np.ones(2),
        action_high=np.ones(2),
        inputs=Inputs(actor_index=actor_index, actor_history=actor_history, critic_history=critic_history),
    )
    policy.obs_normalizer.update(torch.randn(200, 3) * torch.tensor([1.0, 5.0, 0.1]) + torch.tensor([2.0, -1.0, 0.5]))
    return policy


def test_policy_normalizes_every_frame_with_the_same_statistics():
    policy = make_policy(actor_history=3, critic_history=1)
    assert (policy.history, policy.obs_dim) == (3, 9)
    frames = torch.randn(4, 3, 3)
    expected = torch.stack([policy.obs_normalizer(frames[:, k]) for k in range(3)], dim=1).flatten(1)
    assert torch.equal(policy.normalize(frames.flatten(1)), expected)
    assert torch.equal(policy.current_frame(frames.flatten(1)), frames[:, -1])


def test_each_network_reads_only_its_newest_frames_and_groups():
    # The actor reads element 1 of the last 2 frames; the critic the whole newest frame.
    policy = make_policy(actor_history=2, critic_history=1, actor_index=[1])
    assert policy.history == 2 and policy.actor_mean[0].in_features == 2 and policy.critic[0].in_features == 3
    stacked = torch.randn(5, 6)
    action, value = policy.deterministic_action(stacked), policy.value(policy.normalize(stacked))

    def changed(position):
        other = stacked.clone()
        other[:, position] += 3.0
        return (
            not torch.equal(policy.deterministic_action(other), action),
            not torch.equal(policy.value(policy.normalize(other)), value),
        )

    assert changed(1) == (True, False)  # element 1 of the older frame: the actor only
    assert changed(4) == (True, True)  # element 1 of the newest frame: both
    assert changed(3) == (False, True)  # element 0 of the newest frame: the critic only
    assert changed(0) == (False, False)  # element 0 of the older frame: nobody


def test_time_limit_bootstrap_reads_the_ended_episodes_history():
    """V(final observation) of a truncated episode is computed on that episode's own stack with the
    final frame appended, not on the next episode's; the next step starts a fresh stack."""
    recorded = RecordedRollouts("task=InvertedPendulum", "env.max_episode_steps=5", "policy.critic_history=3")
    policy, results = recorded.policy, recorded.results
    storage = recorded.collect().storage
    recorded.close()
    dim = recorded.envs.info.obs_dim
    assert storage.observations.shape[-1] == 3 * dim
    assert storage.truncated.sum() >= 4
    with torch.no_grad():
        for t, result in enumerate(results):
            index = np.flatnonzero(result.truncated)
            if not len(index):
                continue
            finals = torch.cat([storage.observations[t, index, dim:], torch.from_numpy(result.final_obs[index])], dim=1)
            assert torch.equal(storage.truncation_values[t, index], policy.value(policy.normalize(finals))), t
            for i in index:
                if t + 1 < len(results):  # the next episode's first frame fills its whole stack
                    start = storage.observations[t + 1, i]
                    assert torch.equal(start, torch.from_numpy(result.obs[i]).repeat(3))


@pytest.mark.parametrize("extra", [{}, {"policy.critic_obs": ["policy", "privileged"]}], ids=["symmetric", "privileged"])
def test_training_evaluation_and_loaded_policy_agree_with_history(tmp_path, extra):
    """A history run trains, evaluates and hands back a policy that, driven step by step through
    an episode with reset() at its start, takes exactly the actions evaluation's stack gives."""
    import gymnasium as gym

    from ppo_control import api
    from tests.helpers import tiny_overrides

    result = api.train("Hopper", total_steps=256, run_dir=str(tmp_path / "run"), **tiny_overrides(), **{"policy.actor_history": 4}, **extra)
    assert np.isfinite(result.eval_return)
    from ppo_control.rl.history import ObservationHistory
    from ppo_control.runs.directory import load_run

    loaded = load_run(result.run_dir, None)
    policy = api.load_policy(result.run_dir)
    assert policy.history == 4
    assert (loaded.env_info.obs_dim > 11) == bool(extra)  # the privileged group is in the training frames
    env = gym.make("Hopper-v5")
    history = ObservationHistory(4)

    def frame(obs):  # the training layout; the actor reads only the policy group, the first 11 elements
        full = np.zeros((1, loaded.env_info.obs_dim), dtype=np.float32)
        full[0, :11] = obs
        return full

    for episode in range(2):
        obs, _ = env.reset(seed=episode)
        policy.reset()
        stacked = history.reset(frame(obs))
        for _ in range(30):
            action = policy(obs.astype(np.float32))
            expected = loaded.policy.deterministic_action(torch.from_numpy(stacked)).numpy()[0]
            assert np.array_equal(action, expected)
            obs, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                break
            stacked = history.step(frame(obs), np.zeros(1, dtype=bool))
    env.close()


class ForgetfulPolicy(DeployedPolicy):
    """An export that loses its previous frames: the current one fills the stack every step."""

    def step(
        self, obs: torch.Tensor, previous_frames: torch.Tensor, rnn_state: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        frames = obs.unsqueeze(1).repeat(1, self.history, 1)
        x = torch.clamp((frames - self.obs_mean) / self.obs_std, -self.obs_clip, self.obs_clip)
        features, rnn_state = self.memory(x.flatten(1), rnn_state)
        return self.bound(self.actor(features)), frames[:, 1:], rnn_state


@pytest.mark.parametrize("fmt", ["torchscript", pytest.param("onnx", marks=pytest.mark.slow)])  # onnx: the same check, ~5 s more
def test_export_check_catches_a_stateful_policy_that_forgets_its_history(tmp_path, monkeypatch, fmt):
    """The export is verified over probe episodes: a module that reads only the current frame (as if
    its history were lost) is refused before anything is written; the real one passes."""
    from ppo_control import api
    from ppo_control.deploy import module as deploy
    from ppo_control.deploy.exporter import ExportMismatch
    from tests.helpers import tiny_overrides

    run = api.train("Hopper", total_steps=256, run_dir=str(tmp_path / "run"), **tiny_overrides(), **{"policy.actor_history": 3}).run_dir
    monkeypatch.setattr(deploy, "DeployedPolicy", ForgetfulPolicy)
    with pytest.raises(ExportMismatch):
        api.export(run, format=fmt)
    assert not (run / "export").exists() or not any((run / "export").iterdir())
    monkeypatch.undo()
    assert api.export(run, format=fmt).is_file()
