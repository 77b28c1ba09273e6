"""The clipped objective, KL estimate, value loss and schedules against hand-worked numbers."""

import math

import pytest
import torch
from omegaconf import OmegaConf

from ppo_control.rl.policy import ActorCritic, Inputs
from ppo_control.rl.ppo import (
    Batch,
    PPOLearner,
    adapt_learning_rate,
    approx_kl,
    clipped_surrogate,
    explained_variance,
    kl_stop_threshold,
    ppo_update,
    scheduled_entropy_coef,
    scheduled_learning_rate,
    scheduled_value,
    value_loss,
)


@pytest.mark.parametrize(
    "advantage, ratio, expected, gradient_flows",
    [
        (2.0, 1.1, 2.2, True),  # inside the trust region: r * A
        (2.0, 1.5, 2.4, False),  # clipped at 1 + eps: constant, no gradient
        (-2.0, 0.5, -1.6, False),  # clipped at 1 - eps for a negative advantage
        (-2.0, 1.5, -3.0, True),  # the pessimistic unclipped term wins: gradient flows
    ],
)
def test_clipped_surrogate_worked_example(advantage, ratio, expected, gradient_flows):
    r = torch.tensor(ratio, requires_grad=True)
    objective = clipped_surrogate(r, torch.tensor(advantage), clip_range=0.2)
    assert objective.item() == pytest.approx(expected)
    objective.backward()
    if gradient_flows:
        assert r.grad.item() == pytest.approx(advantage)
    else:
        assert r.grad.item() == 0.0


def test_approx_kl_is_k3_estimator():
    log_ratio = torch.log(torch.tensor([0.5, 1.0, 2.0]))
    expected = ((0.5 - 1 - math.log(0.5)) + 0.0 + (2 - 1 - math.log(2))) / 3
    assert approx_kl(log_ratio).item() == pytest.approx(expected)
    assert approx_kl(torch.zeros(4)).item() == 0.0


def test_value_loss_plain_and_clipped():
    values, old, returns = torch.tensor([3.0]), torch.tensor([1.0]), torch.tensor([4.0])
    assert value_loss(values, old, returns, None).item() == pytest.approx(0.5 * 1.0)
    # clipped prediction 1 + 0.2 = 1.2 -> error 2.8^2 is larger, so it is used
    assert value_loss(values, old, returns, 0.2).item() == pytest.approx(0.5 * 2.8**2)


def test_explained_variance():
    targets = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert explained_variance(targets, targets) == pytest.approx(1.0)
    assert explained_variance(torch.full((4,), 2.5), targets) == pytest.approx(0.0)


def test_learning_rate_schedules():
    assert scheduled_learning_rate("constant", 1e-3, 5e-4, 500, 1000) == 1e-3
    assert scheduled_learning_rate("linear", 1e-3, 5e-4, 250, 1000) == pytest.approx(7.5e-4)
    assert scheduled_learning_rate("linear", 1e-3, 5e-4, 1200, 1000) == 0.0
    assert scheduled_learning_rate("adaptive", 1e-3, 5e-4, 500, 1000) == 5e-4
    assert adapt_learning_rate(1e-3, kl=0.05, target_kl=0.01) == pytest.approx(1e-3 / 1.5)
    assert adapt_learning_rate(1e-3, kl=0.001, target_kl=0.01) == pytest.approx(1.5e-3)
    assert adapt_learning_rate(1e-3, kl=0.01, target_kl=0.01) == 1e-3
    assert kl_stop_threshold("linear", 0.02) == 0.02
    assert kl_stop_threshold("adaptive", 0.02) == 0.04
    assert kl_stop_threshold("linear", None) is None


def test_entropy_schedules():
    assert scheduled_entropy_coef("constant", 0.005, 900, 1000) == 0.005
    assert scheduled_entropy_coef("linear", 0.004, 250, 1000) == pytest.approx(0.003)
    assert scheduled_entropy_coef("linear", 0.004, 0, 1000) == 0.004
    assert scheduled_entropy_coef("linear", 0.004, 1500, 1000) == 0.0


def test_gae_lambda_schedules():
    assert scheduled_value(0.95, None, 900, 1000) == 0.95
    assert scheduled_value(0.99, 0.95, 0, 1000) == 0.99
    assert scheduled_value(0.99, 0.95, 500, 1000) == pytest.approx(0.97)
    assert scheduled_value(0.99, 0.95, 1000, 1000) == pytest.approx(0.95)
    assert scheduled_value(0.99, 0.95, 1500, 1000) == pytest.approx(0.95)  # a resumed run trained longer stays at the end
    assert scheduled_value(0.5, 0.9, 250, 1000) == pytest.approx(0.6)  # rising works too


def test_learner_applies_the_scheduled_entropy_bonus():
    """A linear bonus at step 3/4 of the run trains exactly like a constant bonus of a quarter of it,
    and differently from the full constant bonus: the schedule reaches the loss."""

    def trained(schedule: str, coef: float, step: int) -> tuple[list[torch.Tensor], dict]:
        policy, _, batch, hp = _setup(target_kl=None, epochs=2)
        hp.ent_coef, hp.ent_schedule, hp.learning_rate = coef, schedule, 3e-3
        stats = PPOLearner(policy, hp, 1000, torch.Generator().manual_seed(0)).update(batch, step)
        return [p.detach().clone() for p in policy.parameters()], stats

    scheduled, stats = trained("linear", 0.4, 750)
    assert stats["ent_coef"] == pytest.approx(0.1)
    quarter, _ = trained("constant", 0.1, 750)
    full, full_stats = trained("constant", 0.4, 750)
    assert full_stats["ent_coef"] == 0.4
    assert all(torch.allclose(a, b) for a, b in zip(scheduled, quarter))
    assert not all(torch.allclose(a, b) for a, b in zip(scheduled, full))


def _setup(target_kl, lr=3e-4, epochs=4):
    torch.manual_seed(0)
    policy = ActorCritic(3, 2, -torch.ones(2).numpy(), torch.ones(2).numpy(), inputs=Inputs(normalize_obs=False))
    n = 256
    obs, actions = torch.randn(n, 3), torch.randn(n, 2)
    with torch.no_grad():
        log_probs, _, values = policy.evaluate_actions(obs, actions)
    batch = Batch(obs, actions, log_probs, values, torch.randn(n), torch.randn(n))
    hp = OmegaConf.create(
        dict(
            epochs=epochs,
            minibatches=4,
            clip_range=0.2,
            clip_value_loss=False,
            ent_coef=0.0,
            vf_coef=0.5,
            max_grad_norm=0.5,
            target_kl=target_kl,
            normalize_adv=True,
            normalize_adv_over="minibatch",
            lr_schedule="constant",
        )
    )
    optimizer = torch.optim.Adam(policy.parameters(), lr=lr, eps=1e-5)
    return policy, optimizer, batch, hp


def test_ppo_update_runs_all_epochs_without_target_kl():
    policy, optimizer, batch, hp = _setup(target_kl=None)
    before = [p.clone() for p in policy.parameters()]
    stats = ppo_update(policy, optimizer, batch, hp, torch.Generator().manual_seed(0))
    assert stats["epochs_run"] == 4 and stats["optimizer_steps"] == 16 and not stats["kl_early_stop"]
    assert any(not torch.equal(a, b) for a, b in zip(before, policy.parameters()))
    assert stats["grad_norm"] > 0 and 0.0 <= stats["clip_fraction"] <= 1.0


def test_ppo_update_stops_early_on_kl():
    # A huge learning rate moves the policy far after one step: the second minibatch sees a large KL.
    policy, optimizer, batch, hp = _setup(target_kl=1e-6, lr=0.5)
    stats = ppo_update(policy, optimizer, batch, hp, torch.Generator().manual_seed(0))
    assert stats["kl_early_stop"]
    assert stats["epochs_run"] == 1
    assert stats["optimizer_steps"] == 1  # the first minibatch (KL exactly 0) steps; the second stops


def test_batch_scope_standardizes_the_advantages_once_over_the_whole_rollout():
    """normalize_adv_over=batch steps exactly like unnormalized training on the rollout's standardized
    advantages; per-minibatch normalization (4 minibatches) steps differently."""
    from dataclasses import replace

    from ppo_control.rl.ppo import standardize

    def trained(over: str, normalize: bool, standardized: bool) -> list[torch.Tensor]:
        policy, optimizer, batch, hp = _setup(target_kl=None)
        hp.normalize_adv, hp.normalize_adv_over = normalize, over
        batch = replace(batch, advantages=3.0 * batch.advantages + 1.0)  # not standardized to begin with
        if standardized:
            batch = replace(batch, advantages=standardize(batch.advantages))
        ppo_update(policy, optimizer, batch, hp, torch.Generator().manual_seed(0))
        return [p.detach().clone() for p in policy.parameters()]

    over_batch = trained("batch", normalize=True, standardized=False)
    assert all(torch.equal(a, b) for a, b in zip(over_batch, trained("minibatch", normalize=False, standardized=True)))
    assert not all(torch.allclose(a, b) for a, b in zip(over_batch, trained("minibatch", normalize=True, standardized=False)))


def test_written_out_gaussian_matches_torch_distributions():
    import numpy as np
    from torch.distributions import Normal

    from ppo_control.rl.policy import ActorCritic

    policy = ActorCritic(5, 3, -np.ones(3), np.ones(3))
    with torch.no_grad():
        policy.log_std.copy_(torch.tensor([-0.3, 0.2, -1.0]))
    obs, actions = torch.randn(7, 5), torch.randn(7, 3)
    log_prob, entropy, value = policy.evaluate_actions(obs, actions)
    reference = Normal(policy.actor_mean(obs), policy.log_std.exp())
    torch.testing.assert_close(log_prob, reference.log_prob(actions).sum(-1))
    torch.testing.assert_close(entropy, reference.entropy().sum(-1))
    torch.testing.assert_close(value, policy.critic(obs).squeeze(-1))


def test_adam_falls_back_where_torch_has_no_fused_kernel(monkeypatch):
    """Older torch (< 2.4) refuses fused=True on CPU at construction: the learner still gets Adam,
    the default implementation, with the same settings."""
    import torch

    from ppo_control.rl import ppo

    real_adam = torch.optim.Adam

    def old_torch_adam(params, **kwargs):
        if kwargs.get("fused"):
            raise RuntimeError("`fused=True` requires all the params to be floating point Tensors of supported devices")
        return real_adam(params, **kwargs)

    monkeypatch.setattr(torch.optim, "Adam", old_torch_adam)
    parameters = [torch.nn.Parameter(torch.zeros(3))]
    optimizer = ppo._adam(parameters, 1e-3)
    assert isinstance(optimizer, real_adam)
    assert not optimizer.defaults["fused"] and optimizer.defaults["lr"] == 1e-3 and optimizer.defaults["eps"] == 1e-5
    monkeypatch.setattr(torch.optim, "Adam", real_adam)
    assert ppo._adam(parameters, 1e-3).defaults["fused"]
