"""The one rollout loop (rl/episodes.py): episodes counted by quota, steps past a quota counting in
nothing, and history and recurrent state restarted only where an episode ended."""

import numpy as np
import torch

from ppo_control.envs import StepResult
from ppo_control.envs.base import EpisodeTracker, as_arrays
from ppo_control.rl.episodes import EpisodeLoop, Episodes, PolicyMemory, Step
from ppo_control.rl.policy import ActorCritic, Inputs, Networks


class Scripted:
    """Sub-env i's episodes last i + 2 steps (the last one truncated when i is odd); each step's
    observation is the sub-env's step in its episode, its reward 1 + i and diagnostic i."""

    def __init__(self, num_envs: int):
        self.num_envs, self.steps = num_envs, np.zeros(num_envs, dtype=np.int64)
        self.episodes = EpisodeTracker(num_envs)

    def reset(self, seed: int) -> np.ndarray:
        self.steps[:] = 0
        return self.steps[:, None].astype(np.float32)

    def step(self, actions: np.ndarray) -> StepResult:
        assert actions.shape == (self.num_envs, 1)
        self.steps += 1
        index = np.arange(self.num_envs)
        done = self.steps == index + 2
        final = self.steps[:, None].astype(np.float32)
        self.steps[done] = 0
        obs, reward, terminated, truncated, ended = as_arrays(
            self.steps[:, None].astype(np.float32), index + 1.0, done & (index % 2 == 0), done & (index % 2 == 1)
        )
        returns, lengths = self.episodes.add(reward, ended)
        return StepResult(obs, reward, terminated, truncated, final, returns, lengths, {"i": index.astype(np.float64)})


def zero_act(obs: torch.Tensor, state: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
    return torch.zeros(len(obs), 1), state


def test_each_sub_env_counts_its_quota_and_nothing_past_it():
    loop = EpisodeLoop(Scripted(2), zero_act, PolicyMemory())
    loop.reset(0)
    seen = []
    episodes = loop.run(Episodes.spread(4, 2), on_step=lambda step: seen.append(step.counting.copy()))
    # Two episodes each: sub-env 0's (2 steps, terminated) are done at step 4, sub-env 1's (3 steps,
    # truncated) at step 6, where the loop stops; sub-env 0's steps 5 and 6 count in nothing.
    assert len(seen) == 6 and [c.tolist() for c in seen[3:]] == [[True, True], [False, True], [False, True]]
    assert episodes.envs == [0, 1, 0, 1]
    assert episodes.returns == [2.0, 6.0, 2.0, 6.0] and episodes.lengths == [2, 3, 2, 3]
    assert episodes.terminated == [True, False, True, False]
    assert episodes.steps == 4 * 2 + 2 and episodes.diagnostics() == {"i": 6 / 10}


def test_without_a_quota_every_step_and_episode_counts_and_the_loop_runs_its_steps():
    loop = EpisodeLoop(Scripted(2), zero_act, PolicyMemory())
    loop.reset(0)
    episodes = loop.run(Episodes(), max_steps=6)
    assert episodes.envs == [0, 1, 0, 0, 1] and episodes.steps == 12
    assert episodes.diagnostics() == {"i": 0.5}


def test_history_and_recurrent_state_restart_only_where_an_episode_ended():
    torch.manual_seed(0)
    policy = ActorCritic(1, 1, -np.ones(1), np.ones(1), Networks(rnn="gru", rnn_size=4), Inputs(normalize_obs=False, actor_history=2))
    memory = PolicyMemory(policy, 2)
    loop = EpisodeLoop(Scripted(2), policy.deterministic_step, memory)
    loop.reset(0)
    steps: list[Step] = []
    loop.run(Episodes(), max_steps=2, on_step=steps.append)
    assert steps[0].state.abs().sum() == 0  # the episode's start
    # Sub-env 0 ended at step 2: its next input is the new episode's first frame twice and its
    # state zero; sub-env 1 goes on with its last two frames and its state.
    assert memory.obs.tolist() == [[0.0, 0.0], [1.0, 2.0]]
    assert memory.state[0].abs().sum() == 0 and memory.state[1].abs().sum() > 0


class Succeeding(Scripted):
    """Scripted, with a success measure: 1 on an episode's last step in sub-env 0 only, and 0.5 on
    every other step of both."""

    def step(self, actions: np.ndarray) -> StepResult:
        result = super().step(actions)
        done = result.terminated | result.truncated
        result.diagnostics["success/standing"] = np.where(done & (np.arange(self.num_envs) == 0), 1.0, np.where(done, 0.0, 0.5))
        return result


def test_a_success_measure_is_judged_at_each_counted_episodes_end_as_well_as_over_its_steps():
    loop = EpisodeLoop(Succeeding(2), zero_act, PolicyMemory())
    loop.reset(0)
    episodes = loop.run(Episodes.spread(4, 2))
    diagnostics = episodes.diagnostics()
    # Four episodes, two in each sub-env: sub-env 0's end in success, sub-env 1's do not; sub-env
    # 0's two steps past its quota count in neither figure.
    assert diagnostics["success/standing_at_end"] == 0.5
    assert diagnostics["success/standing"] == (2 * 1.0 + 2 * 0.5 + 2 * 0.0 + 4 * 0.5) / 10
    assert "i_at_end" not in diagnostics  # other diagnostics have no end figure
