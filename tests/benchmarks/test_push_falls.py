"""push_falls.FallLog: which falls it lists, and the command history it gives each."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from benchmarks.robots.push_falls import FallLog


class ScriptedEnv:
    """Two sub-envs whose terminations, truncations and command changes follow a script."""

    def __init__(self, script):
        self.num_envs, self.script, self.t = 2, script, 0
        self.task = SimpleNamespace(command=np.zeros((2, 3)))

    def step(self, actions):
        terminated, truncated, command = self.script[self.t]
        self.t += 1
        if command is not None:
            self.task.command[:] = command
        return SimpleNamespace(terminated=np.array(terminated), truncated=np.array(truncated))


def test_lists_counted_falls_with_the_command_they_followed():
    moving = [[0.5, 0.0, 0.0], [0.5, 0.0, 0.0]]
    script = [
        ([False, False], [False, False], moving),  # the command changes after step 1
        ([False, False], [False, False], None),
        ([True, False], [False, False], None),  # env 0 falls 2 steps after the change
        ([False, False], [False, True], None),  # env 1's episode ends by the time limit
        ([True, True], [False, False], None),  # env 0's second fall is past its quota of 1
    ]
    env = ScriptedEnv(script)
    log = FallLog(env, quota=np.array([1, 2]))
    for _ in script:
        env.step(np.zeros((2, 1)))
    assert log.falls == [
        {"episode_step": 3, "steps_since_command_change": 2, "command": [0.5, 0.0, 0.0], "command_before": [0.0, 0.0, 0.0]},
        {"episode_step": 1, "steps_since_command_change": 1, "command": [0.5, 0.0, 0.0], "command_before": None},
    ]
