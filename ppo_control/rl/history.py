"""Observation history: each sub-env's last `length` observation frames, stacked oldest first.

A network with history H reads its groups from the H most recent frames (`policy.actor_history`,
`policy.critic_history`). At an episode's first step the stack holds that first frame repeated:
nothing of the previous episode is seen, and a robot that starts at rest looks at rest (the
convention of IsaacLab's observation history). The stack is raw; the policy normalizes each frame
with the same per-element statistics, so history adds no normalizer of its own.

Everything here is numpy on the host, where the env outputs arrive; with length 1 the stack is the
observation itself and no copy is made.
"""

from __future__ import annotations

import numpy as np


def stacked_index(frame_index: list[int] | None, frame_dim: int, history: int, stack_length: int) -> list[int] | None:
    """Indices into a stack of `stack_length` frames of the elements `frame_index` (None = the whole
    frame) in its last `history` frames, frame-major (oldest first); None when that is the whole stack."""
    if frame_index is None and history == stack_length:
        return None
    elements = range(frame_dim) if frame_index is None else frame_index
    first = stack_length - history
    return [frame * frame_dim + i for frame in range(first, stack_length) for i in elements]


class ObservationHistory:
    """The stacks [num_envs, length * frame_dim] of a vector env's observations, kept step by step."""

    def __init__(self, length: int):
        if length < 1:
            raise ValueError(f"history length must be >= 1, got {length}")
        self.length = length
        self.stacked: np.ndarray | None = None

    def reset(self, obs: np.ndarray) -> np.ndarray:
        """Every sub-env starts an episode with `obs` [num_envs, frame_dim]."""
        self.stacked = obs if self.length == 1 else np.tile(obs, (1, self.length))
        return self.stacked

    def step(self, obs: np.ndarray, episode_start: np.ndarray) -> np.ndarray:
        """Append the new frames `obs`; sub-envs where `episode_start` is set begin a new stack."""
        if self.length == 1:
            self.stacked = obs
            return obs
        frame_dim = obs.shape[-1]
        stacked = np.empty_like(self.stacked)
        stacked[:, :-frame_dim] = self.stacked[:, frame_dim:]
        stacked[:, -frame_dim:] = obs
        starts = np.flatnonzero(episode_start)
        if starts.size:
            stacked[starts] = np.tile(obs[starts], (1, self.length))
        self.stacked = stacked
        return stacked

    def with_final(self, final_obs: np.ndarray, index: np.ndarray) -> np.ndarray:
        """The stacks of sub-envs `index` with their episode's final frame `final_obs[index]` appended:
        what the critic would have read after the last step (time-limit bootstrapping). Call before
        `step`, which starts the next episode's stack."""
        final = final_obs[index]
        if self.length == 1:
            return final
        return np.concatenate([self.stacked[index, final.shape[-1] :], final], axis=1)

    def load(self, stacked: np.ndarray) -> None:
        """Continue from saved stacks (a checkpoint's)."""
        self.stacked = stacked
