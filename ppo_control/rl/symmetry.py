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
from typing import Any

import torch
from torch import nn


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
    def of(cls, observations: Any, actions: Any, coef: float, device: torch.device) -> Mirror:
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
