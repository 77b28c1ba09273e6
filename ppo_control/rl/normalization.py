"""Running statistics that live inside the policy (observations) or beside it (reward scale)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn


class RunningMeanStd(nn.Module):
    """Running mean and variance over batches (Chan et al.'s parallel merge), kept as buffers.

    Buffers are float64 so millions of updates do not drift; forward casts to the input dtype.
    Being buffers, the statistics go into every state_dict, checkpoint and export with the policy.
    """

    def __init__(self, shape: tuple[int, ...] = (), epsilon: float = 1e-8, clip: float | None = None):
        super().__init__()
        self.epsilon = epsilon
        self.clip = clip
        self.register_buffer("mean", torch.zeros(shape, dtype=torch.float64))
        self.register_buffer("var", torch.ones(shape, dtype=torch.float64))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))

    @torch.no_grad()
    def update(self, batch: torch.Tensor) -> None:
        """Merge the statistics of `batch` (shape [n, *shape]) into the running ones."""
        batch = batch.reshape(-1, *self.mean.shape).to(torch.float64)
        self.merge(batch.mean(dim=0), batch.var(dim=0, unbiased=False), batch.shape[0])

    @torch.no_grad()
    def merge(self, batch_mean: torch.Tensor, batch_var: torch.Tensor, batch_count: int | float) -> None:
        """Merge precomputed moments (also what a distributed all-reduce hands over)."""
        total = self.count + batch_count
        delta = batch_mean - self.mean
        new_mean = self.mean + delta * (batch_count / total)
        m2 = self.var * self.count + batch_var * batch_count + delta.pow(2) * (self.count * batch_count / total)
        self.mean.copy_(new_mean)
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        mean, std = self._scale(x.dtype)
        y = (x - mean) / std  # the exported policy computes exactly this (bit-identical actions)
        if self.clip is not None:
            y = torch.clamp(y, -self.clip, self.clip)
        return y

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.normalize(x)

    def _scale(self, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """(mean, std) in `dtype`, cached until the statistics change: a rollout normalizes every
        step with frozen statistics, and recomputing these would be most of that cost. Any in-place
        write to the buffers (merge, load_state_dict, .to) bumps their version and invalidates it."""
        key = (dtype, self.mean.device, id(self.mean), self.mean._version, id(self.var), self.var._version)
        if getattr(self, "_cache_key", None) != key:
            self._cache = (self.mean.to(dtype), torch.sqrt(self.var + self.epsilon).to(dtype))
            self._cache_key = key
        return self._cache


class RewardScaler:
    """Divide rewards by the running std of each env's discounted return (no mean subtraction).

    This is the return-based scaling of Engstrom et al. (2020): G <- gamma * G + r per env,
    the std of G is tracked over all envs and steps, G is reset when an episode ends.
    It runs once per env step on a few dozen numbers, so it is numpy (float64): torch's per-op
    overhead would cost more than the arithmetic. The state_dict is tensors, for checkpoints.
    """

    def __init__(self, num_envs: int, gamma: float, clip: float, enabled: bool = True, epsilon: float = 1e-8):
        self.gamma = gamma
        self.clip = clip
        self.enabled = enabled
        self.epsilon = epsilon
        self.returns = np.zeros(num_envs, dtype=np.float64)
        self.mean, self.var, self.count = 0.0, 1.0, 0.0

    def __call__(self, reward: np.ndarray, done: np.ndarray) -> np.ndarray:
        """Scale one step's rewards [n_envs]; `done` marks envs whose episode ended at this step."""
        if not self.enabled:
            return reward
        self.returns = self.returns * self.gamma + reward
        n = self.returns.size
        mean = float(self.returns.sum()) / n
        self._merge(mean, float(np.dot(self.returns, self.returns)) / n - mean * mean, n)  # float64: no cancellation issue at return scales
        scaled = reward / np.sqrt(self.var + self.epsilon)
        self.returns[done] = 0.0
        return np.clip(scaled, -self.clip, self.clip).astype(reward.dtype, copy=False)

    def _merge(self, batch_mean: float, batch_var: float, batch_count: int) -> None:
        """Chan et al.'s parallel update, as RunningMeanStd.merge."""
        total = self.count + batch_count
        delta = batch_mean - self.mean
        m2 = self.var * self.count + batch_var * batch_count + delta * delta * (self.count * batch_count / total)
        self.mean += delta * batch_count / total
        self.var = m2 / total
        self.count = total

    def state_dict(self) -> dict[str, torch.Tensor]:
        scalar = lambda value: torch.tensor(value, dtype=torch.float64)  # noqa: E731
        return {
            "returns": torch.from_numpy(self.returns.copy()),
            "stats.mean": scalar(self.mean),
            "stats.var": scalar(self.var),
            "stats.count": scalar(self.count),
        }

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        self.returns = state["returns"].to(torch.float64).numpy().copy()
        self.mean, self.var, self.count = (float(state[f"stats.{key}"]) for key in ("mean", "var", "count"))


class DeviceRewardScaler(RewardScaler):
    """RewardScaler's arithmetic on torch tensors that stay where the env's rewards are (a GPU):
    the running return and statistics never come to the host. Same statistics, same state_dict."""

    def __init__(self, num_envs: int, gamma: float, clip: float, enabled: bool = True, epsilon: float = 1e-8, device="cpu"):
        super().__init__(num_envs, gamma, clip, enabled, epsilon)
        self.device = torch.device(device)
        self.returns = torch.zeros(num_envs, dtype=torch.float64, device=self.device)
        self.mean, self.var, self.count = (torch.tensor(v, dtype=torch.float64, device=self.device) for v in (0.0, 1.0, 0.0))

    def __call__(self, reward: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
        if not self.enabled:
            return reward
        self.returns = self.returns * self.gamma + reward
        n = self.returns.numel()
        mean = self.returns.mean()
        self._merge(mean, (self.returns * self.returns).mean() - mean * mean, n)
        scaled = reward / torch.sqrt(self.var + self.epsilon)
        self.returns = torch.where(done, 0.0, self.returns)
        return torch.clamp(scaled, -self.clip, self.clip).to(reward.dtype)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {
            "returns": self.returns.cpu().clone(),
            **{f"stats.{key}": getattr(self, key).cpu().clone() for key in ("mean", "var", "count")},
        }

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        self.returns = state["returns"].to(torch.float64).to(self.device).clone()
        self.mean, self.var, self.count = (state[f"stats.{key}"].to(torch.float64).to(self.device) for key in ("mean", "var", "count"))
