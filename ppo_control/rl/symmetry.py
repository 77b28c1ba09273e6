"""The mirror loss (`ppo.mirror_loss_coef`): the actor is penalized for acting, in the mirror
image of a state, otherwise than the mirror image of what it does in the state itself (rsl_rl's
symmetry option; Mittal et al., 2024). A left-right symmetric task has a symmetric optimal policy;
without the loss, PPO can settle in a lopsided gait (a robot that turns one way only) that its
own samples never argue against.

The target is the mirror of the current actor's mean, without gradient: the loss moves the
mirrored states' actions, and every state is in turn the mirror of another. Actions are mirrored
as the Gaussian's means, before any squash or clip: tanh is odd and the bounds are checked to be
their own mirror image, so the mirror commutes with both.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ppo_control.config.errors import UserError
from ppo_control.envs.base import EnvInfo
from ppo_control.envs.observations import group_index
from ppo_control.envs.registry import describe_task
from ppo_control.robots.playground import robot_task
from ppo_control.robots.symmetry import SignedPermutation, bounds_are_symmetric, robot_mirror, stacked_mirror


@dataclass(frozen=True)
class Mirror:
    """A robot's mirror on the policy's stacked raw input and on its actions, with the loss's
    weight."""

    obs_index: torch.Tensor
    obs_sign: torch.Tensor
    action_index: torch.Tensor
    action_sign: torch.Tensor
    coef: float

    @classmethod
    def of(cls, observations: SignedPermutation, actions: SignedPermutation, coef: float, device: torch.device) -> Mirror:
        """From signed permutations (robots.symmetry.SignedPermutation: `index`, `sign`) of the
        policy's stacked input and of its actions."""

        def tensor(values, dtype):
            return torch.as_tensor(values, dtype=dtype, device=device)

        return cls(
            tensor(observations.index, torch.long),
            tensor(observations.sign, torch.float32),
            tensor(actions.index, torch.long),
            tensor(actions.sign, torch.float32),
            float(coef),
        )

    def observations(self, raw_obs: torch.Tensor) -> torch.Tensor:
        return raw_obs.index_select(-1, self.obs_index) * self.obs_sign

    def actions(self, actions: torch.Tensor) -> torch.Tensor:
        return actions.index_select(-1, self.action_index) * self.action_sign


def mirror_loss(policy: nn.Module, norm_obs: torch.Tensor, mirrored_norm_obs: torch.Tensor, mirror: Mirror) -> torch.Tensor:
    """Mean over samples and action dims of (mean action on the mirrored state - the mirror of the
    mean action on the state)^2; the second term carries no gradient. Zero for a symmetric actor."""
    with torch.no_grad():
        target = mirror.actions(policy.actor_mean(policy.actor_input(norm_obs)))
    return (policy.actor_mean(policy.actor_input(mirrored_norm_obs)) - target).pow(2).mean()


def frame_mirror(
    element_names: dict[str, list[str] | None], info: EnvInfo, actor_groups: list[str], task, default_pose
) -> tuple[SignedPermutation, SignedPermutation]:
    """(the mirror of one observation frame, of the actions) for `task`: the actor's groups are
    mirrored by robot_mirror, every other element is left in place (the actor does not read it)."""
    names = []
    for group in actor_groups:
        elements = element_names.get(group)
        if not elements:
            raise UserError(
                f"ppo.mirror_loss_coef: observation group '{group}' does not name its elements, so it cannot be mirrored; use 0"
            )
        names.extend(elements)
    obs, actions = robot_mirror(task, names, default_pose)
    positions = group_index(info.groups, actor_groups, "policy.actor_obs")
    positions = np.arange(info.obs_dim) if positions is None else np.asarray(positions)
    index, sign = np.arange(info.obs_dim), np.ones(info.obs_dim)
    index[positions] = positions[obs.index]
    sign[positions] = obs.sign
    return SignedPermutation(index, sign), actions


def build_mirror(cfg, info: EnvInfo, device: torch.device) -> Mirror | None:
    """The Mirror of the run `cfg` on envs described by `info` (None when ppo.mirror_loss_coef is
    0); UserError where the run cannot have one."""
    if not cfg.ppo.mirror_loss_coef:
        return None
    policy_cfg, description = cfg.policy, describe_task(cfg.env)
    task = robot_task(description.robot["task"]) if description.robot else None
    if task is None:
        raise UserError(
            "ppo.mirror_loss_coef: only robot tasks with a left-right mirror (Go1, Spot, T1, G1, Berkeley Humanoid) have it; use 0"
        )
    if str(policy_cfg.rnn) != "none":
        raise UserError("ppo.mirror_loss_coef: a recurrent policy's states cannot be mirrored; use policy.rnn=none or 0")
    default_pose = description.robot.get("default_pose") if description.robot.get("action_rule") == "default_pose" else None
    frame, actions = frame_mirror(description.element_names, info, list(policy_cfg.actor_obs), task, default_pose)
    if not bounds_are_symmetric(np.asarray(info.action_low, float), np.asarray(info.action_high, float), actions):
        raise UserError(f"ppo.mirror_loss_coef: task {task.name}'s action bounds are not their own mirror image; use 0")
    history = max(int(policy_cfg.actor_history), int(policy_cfg.critic_history))
    return Mirror.of(stacked_mirror(frame, info.obs_dim, history), actions, float(cfg.ppo.mirror_loss_coef), device)
