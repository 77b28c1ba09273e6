"""The penalty curriculum (`ppo.penalty_curriculum_start`, `ppo.penalty_curriculum_steps`): early in
training, a robot task's penalty terms weigh less in the reward PPO learns from, rising linearly to
the task's own weights.

Why: a Playground robot's reward is the sum of its scaled terms times the control period, clipped
at zero. A first gait is a lunge whose body rocking costs more in penalties (orientation, angular
velocity, feet clearance) than its tracking earns over standing still; most of its steps are clipped
to zero, standing pays more per step, and PPO gives the gait up as it learns to stand
(benchmarks/results/robots/go1-forward-diagnosis/README.md, section 7). With the penalties scaled
down a lunge pays; as they come back the gait has to get cleaner to keep paying. From the end of the
ramp on the reward is the task's own, and evaluations report the task's own reward throughout.

The training reward is rebuilt each step from the terms the env reports (`reward/<term>`):
(sum of the reward terms + k * sum of the penalty terms) * ctrl_dt, clipped to [0, 10000] where the
task clips its own (Playground's joystick tasks but G1), a penalty being a term whose scale is
negative in the task's configuration (envpool's, with the run's env.kwargs over it). The first steps
check that k = 1 gives the env's own reward back and learn whether it is clipped, so a task whose
reward is not that sum is refused instead of trained on a wrong one.
"""

from __future__ import annotations

import sys

import numpy as np

from ppo_control.config.errors import UserError
from ppo_control.envs import capabilities, reward_term_scales
from ppo_control.envs.base import StepResult

TERM_PREFIX = "reward/"
REWARD_CLIP = (0.0, 10000.0)  # Playground's clip of the summed, dt-scaled terms
# float32 rounding of a sum of up to ~20 terms, and of the env's own float32 reward
MATCH_TOLERANCE = 1e-5


class PenaltyCurriculum:
    """The training reward of one run: the task's terms with the penalties scaled by `factor`."""

    def __init__(self, start: float, ramp_steps: int, scales: dict[str, float], control_period_s: float, task: str):
        self.start, self.ramp_steps, self.task = float(start), int(ramp_steps), task
        self.penalties = frozenset(name for name, scale in scales.items() if scale < 0)
        self.known_terms = frozenset(scales)
        self.control_period_s = float(control_period_s)
        self.factor = self.start
        self._terms_checked = False
        self.first_step_note: str | None = None  # said once, at the first step, after its checks
        # Whether the task clips its reward at zero (Go1, Spot, T1: yes; G1: no), learned from the
        # first step with a negative sum; None until then, when either form gives the same reward.
        self.clipped: bool | None = None

    def at_step(self, step: int) -> float:
        """Set and return the factor for the rollout that starts at `step` (1 from the ramp's end on)."""
        progress = 1.0 if self.ramp_steps <= 0 else min(1.0, step / self.ramp_steps)
        self.factor = self.start + (1.0 - self.start) * progress
        return self.factor

    def reward(self, result: StepResult) -> np.ndarray:
        """This step's training reward per sub-env, from its reported terms."""
        terms = {name[len(TERM_PREFIX) :]: value for name, value in result.diagnostics.items() if name.startswith(TERM_PREFIX)}
        if not self._terms_checked:
            self._check_terms(terms)
        if self.clipped is None:
            self._learn_the_clip(sum(terms.values(), np.zeros(len(result.reward))) * self.control_period_s, result.reward)
        if self.first_step_note:  # once, after the first step's checks, so a refusal stays one line
            print(self.first_step_note, file=sys.stderr, flush=True)
            self.first_step_note = None
        rewards = sum((value for name, value in terms.items() if name not in self.penalties), np.zeros(len(result.reward)))
        penalties = sum((value for name, value in terms.items() if name in self.penalties), np.zeros(len(result.reward)))
        total = (rewards + self.factor * penalties) * self.control_period_s
        return (np.clip(total, *REWARD_CLIP) if self.clipped is not False else total).astype(np.float32)

    def _check_terms(self, terms: dict[str, np.ndarray]) -> None:
        unknown = sorted(set(terms) - self.known_terms)
        if not terms or unknown:
            what = "reports no reward terms" if not terms else f"reports the term '{unknown[0]}', which has no scale in its configuration"
            raise UserError(f"ppo.penalty_curriculum_start: {self.task} {what}; use 1.0 (off)")
        self._terms_checked = True

    def _learn_the_clip(self, rebuilt: np.ndarray, env_reward: np.ndarray) -> None:
        """The terms at factor 1 must give the env's own reward back, as their sum times the control
        period or as that sum clipped at zero; a negative sum tells which."""

        def matches(candidate):
            return np.allclose(candidate.astype(np.float32), env_reward, rtol=MATCH_TOLERANCE, atol=MATCH_TOLERANCE)

        if matches(rebuilt):
            self.clipped = False if (rebuilt < 0).any() else None  # all sums >= 0: the clip cannot show
        elif matches(np.clip(rebuilt, *REWARD_CLIP)):
            self.clipped = True
        else:
            raise UserError(
                f"ppo.penalty_curriculum_start: {self.task}'s reward is not the sum of its terms times the control "
                "period (clipped at zero or not), so its penalties cannot be rescaled; use 1.0 (off)"
            )


def build_penalty_curriculum(cfg) -> PenaltyCurriculum | None:
    """The curriculum of the run `cfg` (None when ppo.penalty_curriculum_start is 1: off); refuses,
    before anything is built, a task or backend it cannot apply to."""
    start = float(cfg.ppo.penalty_curriculum_start)
    if start == 1.0:
        return None
    if capabilities(cfg.env.backend).device_resident:
        raise UserError("ppo.penalty_curriculum_start: envs stepped on the training device (mjx) keep their rewards there; use 1.0 (off)")
    found = reward_term_scales(cfg.env)
    if found is None:
        raise UserError(
            f"ppo.penalty_curriculum_start: {cfg.env.id} is not a Playground robot task with scaled reward terms; use 1.0 (off)"
        )
    scales, control_period_s = found
    curriculum = PenaltyCurriculum(start, int(cfg.ppo.penalty_curriculum_steps), scales, control_period_s, str(cfg.task or cfg.env.id))
    if curriculum.ramp_steps > cfg.total_steps:
        curriculum.first_step_note = (
            f"ppo.penalty_curriculum_steps={curriculum.ramp_steps:,} is past total_steps={cfg.total_steps:,}: "
            "this run ends before the penalties reach the task's weights"
        )
    return curriculum
