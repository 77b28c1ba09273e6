"""A gait clock and its phase reward, as Playground's humanoids have them (t1.h UpdatePhase and
FootPhaseTarget) and as a named variant of a quadruped's reference task (Go1's `gait_clock`).

Each foot has a phase in [-pi, pi) that advances by 2 pi ctrl_dt f every control step; the phase
asks the foot for a swing height (a Bezier up over the first half of the cycle, down over the
second) and the reward is exp(-sum over feet of (height - asked)^2 / width). While the command is
(near) zero every foot's phase is held at pi, where every foot is asked to stand.

The policy reads cos and sin of each foot's phase as it was before the step's advance, and an
exported policy's controller keeps the same clock from the contract's `robot.gait_phase`
(deploy/controller.py): `contract()` writes it.
"""

from __future__ import annotations

import math

import numpy as np

HOLD_RAD = math.pi
HOLD_COMMAND_NORM = 0.01
PHASE_REWARD_WIDTH = 0.01


def _bezier(x: np.ndarray) -> np.ndarray:
    return x * x * x + 3.0 * x * x * (1 - x)


def foot_phase_target(phase: np.ndarray, max_foot_height: float) -> np.ndarray:
    """FootPhaseTarget: the swing height the gait clock asks of a foot (a Bezier up, then down)."""
    x = (phase + math.pi) / (2.0 * math.pi)
    height = max_foot_height
    return np.where(x <= 0.5, height * _bezier(2.0 * x), height + (0.0 - height) * _bezier(2.0 * x - 1.0))


def advance(phase: np.ndarray, phase_dt: np.ndarray, command: np.ndarray | None) -> np.ndarray:
    """UpdatePhase: every foot's phase one control step on, wrapped to [-pi, pi); held at pi for a
    sub-env whose command (the one it acted under) has a norm of at most HOLD_COMMAND_NORM (no hold
    without a command)."""
    moved = np.fmod(phase + phase_dt[:, None] + math.pi, 2.0 * math.pi) - math.pi
    if command is not None:
        moved[np.linalg.norm(command, axis=1) <= HOLD_COMMAND_NORM] = HOLD_RAD
    return moved


class GaitClock:
    """The clock of `num_envs` sub-envs with one phase per foot, starting at `initial_rad` (a
    trot: diagonal feet together), at a fixed `frequency_hz`; `hold`: every foot held at pi under a
    zero command (else the clock runs on and a zero command asks for stepping in place)."""

    def __init__(self, num_envs: int, initial_rad: tuple[float, ...], frequency_hz: float, control_period_s: float, hold: bool = True):
        self.initial = np.asarray(initial_rad, dtype=np.float64)
        self.frequency_hz = float(frequency_hz)
        self.hold = bool(hold)
        self.phase = np.tile(self.initial, (num_envs, 1))
        self.phase_dt = np.full(num_envs, 2.0 * math.pi * control_period_s * self.frequency_hz)

    def reset(self, ids: np.ndarray) -> None:
        self.phase[ids] = self.initial

    def step(self, acted_command: np.ndarray) -> None:
        self.phase = advance(self.phase, self.phase_dt, acted_command if self.hold else None)

    def observation(self, ids: np.ndarray) -> np.ndarray:
        """cos of every foot's phase, then sin: [len(ids), 2 * feet]."""
        phase = self.phase[ids]
        return np.concatenate([np.cos(phase), np.sin(phase)], axis=1)

    def reward(self, feet_height: np.ndarray, max_foot_height: float, width: float = PHASE_REWARD_WIDTH) -> np.ndarray:
        """How closely the feet's heights above their standing height follow the clock, in (0, 1]."""
        error = feet_height - foot_phase_target(self.phase, max_foot_height)
        return np.exp(-(error * error).sum(axis=1) / width)

    def contract(self) -> dict:
        """robot.gait_phase of an export: what a controller needs to keep the same clock."""
        contract = {
            "initial_rad": [float(v) for v in self.initial],
            "step_rad": "2 * pi * control_period_s * frequency_hz, wrapped to [-pi, pi)",
            "frequency_hz_range": [self.frequency_hz, self.frequency_hz],
        }
        if self.hold:
            contract.update(hold_rad=HOLD_RAD, hold_while_command_norm_at_most=HOLD_COMMAND_NORM)
        return contract
