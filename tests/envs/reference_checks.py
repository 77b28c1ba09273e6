"""Checks every reference port's tests share: one step against envpool's, and a saved state that
continues exactly."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np


def assert_same_step(result, expected, atol: float = 1e-5) -> None:
    """A reference VecEnv's StepResult equals envpool's: observations (and the final ones), rewards
    and every diagnostic within `atol`, terminations, truncations and episode lengths exactly."""
    for field in ("obs", "final_obs", "reward"):
        np.testing.assert_allclose(getattr(result, field), getattr(expected, field), rtol=0, atol=atol, err_msg=field)
    for field in ("terminated", "truncated", "episode_lengths"):
        np.testing.assert_array_equal(getattr(result, field), getattr(expected, field), err_msg=field)
    assert set(result.diagnostics) == set(expected.diagnostics)
    for key, values in expected.diagnostics.items():
        np.testing.assert_allclose(result.diagnostics[key], values, rtol=0, atol=atol, err_msg=key)


def continues_exactly(make_env: Callable, actions: Sequence[np.ndarray], saved_after: int, tmp_path: Path) -> list:
    """get_state -> checkpoint file (tensors, the safe loader) -> set_state in a new env from
    `make_env()`: the steps after `saved_after` of `actions` are the same in both. Returns the
    original env's steps after the save, for the caller's own checks (falls, resets)."""
    import torch

    from ppo_control.rl.snapshot import to_numpy, to_tensors

    env = make_env()
    try:
        env.reset(5)
        for a in actions[:saved_after]:
            env.step(a)
        torch.save(to_tensors(env.get_state()), tmp_path / "state.pt")
        after = [env.step(a) for a in actions[saved_after:]]
    finally:
        env.close()
    resumed = make_env()
    try:
        resumed.set_state(to_numpy(torch.load(tmp_path / "state.pt", weights_only=True)))
        for a, expected in zip(actions[saved_after:], after):
            result = resumed.step(a)
            np.testing.assert_array_equal(result.obs, expected.obs)
            np.testing.assert_array_equal(result.reward, expected.reward)
            np.testing.assert_array_equal(result.episode_returns, expected.episode_returns)
    finally:
        resumed.close()
    return after
