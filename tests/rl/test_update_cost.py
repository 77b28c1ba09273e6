"""The update's cheaper formulations compute the update as it was: `minibatch_loss` (the loss as one
function) exactly, bit for bit; its compiled form (`PPOLearner(compiled=True)`) within rounding.

The reference below is `ppo_update`'s minibatch loop as it was written before the loss became a
function of its own, kept here verbatim in what it computes (the losses, the diagnostics, the KL
stop, the gradient clip and the step)."""

import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from ppo_control.rl.policy import ActorCritic, Inputs, Networks
from ppo_control.rl.ppo import Batch, PPOLearner, approx_kl, clipped_surrogate, minibatch_loss, ppo_update, standardize, value_loss


def reference_update(policy, optimizer, batch, hp, generator, ent_coef):
    """The update's previous formulation (one process, KL stop included), returning its stats."""
    normalize_minibatches = hp.normalize_adv and hp.normalize_adv_over == "minibatch"
    if hp.normalize_adv and hp.normalize_adv_over == "batch":
        batch = replace(batch, advantages=standardize(batch.advantages))
    clip_range, vf_coef = float(hp.clip_range), float(hp.vf_coef)
    value_clip = clip_range if hp.clip_value_loss else None
    params = [p for p in policy.parameters() if p.requires_grad]
    totals = torch.zeros(5)
    grad_norms, seen, stopped = [], 0, False
    for _epoch in range(hp.epochs):
        order = torch.randperm(len(batch), generator=generator)
        for mb in batch.subset(order).minibatches(hp.minibatches):
            log_probs, entropy, values = policy.evaluate_actions(mb.obs, mb.actions, mb.memory)
            log_ratio = log_probs - mb.log_probs
            ratio = log_ratio.exp()
            advantages = standardize(mb.advantages) if normalize_minibatches else mb.advantages
            policy_loss = -clipped_surrogate(ratio, advantages, clip_range).mean()
            v_loss = value_loss(values, mb.values, mb.returns, value_clip)
            entropy_mean = entropy.mean()
            loss = policy_loss + vf_coef * v_loss - ent_coef * entropy_mean
            with torch.no_grad():
                kl = approx_kl(log_ratio)
                clip_fraction = ((ratio - 1.0).abs() > clip_range).float().mean()
                totals[:4] += torch.stack([policy_loss, v_loss, entropy_mean, clip_fraction])
            seen += 1
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            totals[4] += kl
            if hp.target_kl is not None and float(kl) > hp.target_kl:
                stopped = True
                break
            grad_norms.append(float(torch.nn.utils.clip_grad_norm_(params, float(hp.max_grad_norm))))
            optimizer.step()
        if stopped:
            break
    names = ("policy_loss", "value_loss", "entropy", "clip_fraction", "approx_kl")
    stats = {name: float(value) / seen for name, value in zip(names, totals.tolist())}
    stats["grad_norm"] = sum(grad_norms) / len(grad_norms)
    return stats


def _problem(rnn="none", n=256, sequence=8, **settings):
    """A small policy, one batch for it (flat, or whole sequences with `rnn`) and the ppo settings."""
    torch.manual_seed(0)
    policy = ActorCritic(5, 2, -np.ones(2), np.ones(2), Networks(hidden_sizes=[16, 16], rnn=rnn, rnn_size=8), Inputs(normalize_obs=False))
    shape = (n,) if rnn == "none" else (n // sequence, sequence)
    obs, actions = torch.randn(*shape, 5), torch.randn(*shape, 2)
    states = starts = None
    if rnn != "none":
        states, starts = torch.randn(shape[0], policy.memory.state_size), torch.rand(shape) < 0.1
    with torch.no_grad():
        log_probs, _, values = policy.evaluate_actions(obs, actions, None if states is None else (states, starts))
    batch = Batch(obs, actions, log_probs, values, 3.0 * torch.randn(shape) + 1.0, torch.randn(shape), states, starts)
    hp = dict(epochs=3, minibatches=4, clip_range=0.2, clip_value_loss=False, ent_coef=0.01, vf_coef=0.5, max_grad_norm=0.5)
    hp.update(target_kl=None, normalize_adv=True, normalize_adv_over="minibatch", lr_schedule="constant", ent_schedule="constant")
    hp.update(learning_rate=3e-3, gamma=0.99, gamma_end=None, gae_lambda=0.95, gae_lambda_end=None, end_at_fraction=1.0)
    hp.update(settings)
    return policy, batch, OmegaConf.create(hp)


def _trained(policy, batch, hp, run):
    optimizer = torch.optim.Adam(policy.parameters(), lr=hp.learning_rate, eps=1e-5)
    stats = run(policy, optimizer, batch, hp, torch.Generator().manual_seed(0))
    return [p.detach().clone() for p in policy.parameters()], stats


@pytest.mark.parametrize(
    "settings",
    [
        dict(),
        dict(clip_value_loss=True, normalize_adv_over="batch"),
        dict(normalize_adv=False, ent_coef=0.0),
        dict(target_kl=0.002),  # stops early: the same minibatch in both
        dict(rnn="gru"),
    ],
    ids=["default", "value-clip+batch-adv", "raw-adv", "kl-stop", "gru"],
)
def test_update_equals_its_previous_formulation_bit_for_bit(settings):
    """The same parameters and the same stats, exactly, for a fixed seed: the loss moved into a
    function computes the same operations in the same order."""
    reference = _trained(*_problem(**settings), lambda *args: reference_update(*args, ent_coef=args[3].ent_coef))
    current = _trained(*_problem(**settings), lambda *args: ppo_update(*args))
    assert all(torch.equal(a, b) for a, b in zip(reference[0], current[0]))
    for key, value in reference[1].items():
        assert current[1][key] == value, key
    if "target_kl" in settings:
        assert current[1]["kl_early_stop"]


def test_minibatch_loss_diagnostics_are_detached_and_the_loss_differentiable():
    policy, batch, hp = _problem()
    loss, diagnostics, kl = minibatch_loss(policy, batch.minibatches(4)[0], 0.2, 0.5, 0.01, None, True)
    assert loss.requires_grad and not diagnostics.requires_grad and not kl.requires_grad
    assert diagnostics.shape == (5,) and kl.shape == ()
    assert kl.item() == 0.0  # the batch's log-probs are this policy's: every ratio is 1
    assert diagnostics[3].item() == 0.0  # so nothing is clipped
    assert diagnostics[4].item() == 0.0  # and without a mirror, no mirror loss


def test_a_recurrent_policy_stays_eager_when_compiled_is_asked_for():
    policy, _, hp = _problem(rnn="gru")
    assert PPOLearner(policy, hp, 1000, torch.Generator().manual_seed(0), compiled=True).loss_fn is minibatch_loss


@pytest.mark.slow
def test_compiled_update_agrees_with_eager_within_rounding_and_compiles_once():
    """Compiled, the same update up to floating-point rounding: fused kernels sum in another order
    and use their own vectorized tanh and exp, so parameters can differ in their last bits each
    step; over a few updates of 12 Adam steps they stay within 1e-5 of the eager ones (Adam's step
    is about learning_rate in size, whatever the gradient's scale, so the tolerance is absolute).
    The entropy bonus changes every update (a linear schedule): it must not compile again."""
    results = []
    for compiled in (False, True):
        policy, batch, hp = _problem(ent_schedule="linear")
        learner = PPOLearner(policy, hp, 1000, torch.Generator().manual_seed(0), compiled=compiled)
        stats = [learner.update(batch, step) for step in (0, 250)]
        torch.compiler.set_stance("fail_on_recompile")
        try:
            stats.append(learner.update(batch, 500))  # a third bonus: raises if it would compile again
        finally:
            torch.compiler.set_stance("default")
        results.append(([p.detach().clone() for p in policy.parameters()], stats))
    (eager, eager_stats), (compiled, compiled_stats) = results
    for a, b in zip(eager, compiled):
        torch.testing.assert_close(b, a, rtol=0, atol=1e-5)
    for first, second in zip(eager_stats, compiled_stats):
        assert second["ent_coef"] == first["ent_coef"]
        for key in ("policy_loss", "value_loss", "entropy", "approx_kl", "grad_norm"):
            assert math.isclose(second[key], first[key], rel_tol=1e-3, abs_tol=1e-6), key
        assert abs(second["clip_fraction"] - first["clip_fraction"]) <= 2 / 64  # a sample or two at the clip edge
