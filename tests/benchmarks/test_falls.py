"""benchmarks.robots.falls: which moments its falls are counted against."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch

from benchmarks.robots.falls import record, summarize

FORWARD, LEFT = [1.0, 0.0, 0.0], [0.0, 0.6, 0.0]


class ScriptedEnv:
    """Two sub-envs whose observation is their command; sub-env 1 falls at the steps in `falls`,
    sub-env 0 never does. Sub-env 1's command turns from forward to left after step `change`."""

    def __init__(self, falls: set[int], change: int):
        self.t, self.falls, self.change = 0, falls, change

    def observation(self):
        second = LEFT if self.t >= self.change else FORWARD
        return np.array([FORWARD, second], dtype=np.float32)

    def reset(self, seed):
        return self.observation()

    def step(self, actions):
        fell = np.array([False, self.t in self.falls])
        self.t += 1
        return SimpleNamespace(obs=self.observation(), terminated=fell, truncated=np.zeros(2, dtype=bool))


class StillPolicy:
    def deterministic_step(self, obs):
        return torch.zeros(len(obs), 2), None


def test_a_fall_counts_against_its_command_and_the_time_since_it_changed():
    where = SimpleNamespace(commanded=lambda obs: obs[:, :3])
    data = record(StillPolicy(), ScriptedEnv(falls={12}, change=10), where, steps=40, seed=0)
    assert data["fell"].shape == (40, 2) and data["fell"].sum() == 1
    assert data["since_change"][12, 1] == 2  # the command changed two steps before the fall
    assert data["since_reset"][12, 1] == 12 and data["since_reset"][13, 1] == 0
    report = summarize(data)
    assert report["falls"] == 1 and report["steps"] == 80
    assert report["by_direction"]["left"]["share_of_falls"] == 1.0
    assert report["by_direction"]["forward"]["share_of_falls"] == 0.0
    assert report["by_steps_since_the_command_changed"]["0-24"]["share_of_falls"] == 1.0
    # forward 1.0 to left 0.6: a planar change of sqrt(1.36) m/s, no yaw; sub-env 0's first command
    # is a change of 1.0 from zero and stays one (it never changes again)
    np.testing.assert_allclose(data["change"][12, 1], [np.sqrt(1.36), 0.0])
    np.testing.assert_allclose(data["change"][39, 0], [1.0, 0.0])
    assert report["by_planar_size_of_the_last_command_change_m_s"]["1.0-1.5"]["share_of_falls"] == 1.0
    # 30 of the 80 steps are left: 1000 / 30 falls per 1000 of them
    assert report["by_direction"]["left"]["falls_per_1000_steps"] == round(1000 / 30, 3)


def test_a_fall_tells_the_side_the_trunk_tipped_to_and_how_long_it_was_tilted():
    """tipping: gravity in the body frame points to the side that went down; the tilted steps are
    counted back from the fall, within its episode only."""
    from benchmarks.robots.falls import tipping

    steps, upright = 6, [0.0, 0.0, -1.0]
    gravity = np.tile(np.array(upright), (steps, 2, 1))
    nose_down, right_down = [0.9, 0.1, -0.4], [0.1, -0.9, -0.4]  # tilted by about 66 degrees
    gravity[3:5, 0] = nose_down  # sub-env 0: two tilted steps, falling at step 4
    gravity[0:3, 1] = right_down  # sub-env 1: tilted from before its episode began at step 1
    fell = np.zeros((steps, 2), dtype=bool)
    fell[4, 0] = fell[2, 1] = True
    since_reset = np.tile(np.arange(steps)[:, None], (1, 2))
    since_reset[1:, 1] = np.arange(steps - 1)  # sub-env 1's episode began at step 1
    report = tipping({"gravity": gravity, "fell": fell, "since_reset": since_reset})
    assert report["tipped_toward"] == {"front": 1, "back": 0, "left": 0, "right": 1}
    assert report["steps_tilted_before_falls"] == [2, 2]  # in step order: sub-env 1 at step 2, sub-env 0 at step 4
