"""policy.squash=tanh: the Gaussian's sample squashed into the action bounds (Brax's policy). The
env gets the squashed action and training keeps the sample; PPO's ratio is the squashed
distribution's; the entropy estimate is the squashed distribution's, so it stops growing once the
std passes the bounds; evaluation and the export act with the squashed mean."""

import math

import numpy as np
import pytest
import torch
from torch.distributions import AffineTransform, Normal, TanhTransform, TransformedDistribution

from ppo_control.config.errors import UserError
from ppo_control.deploy.module import DeployedPolicy
from ppo_control.rl.episodes import EpisodeLoop, PolicyMemory
from ppo_control.rl.policy import ActorCritic, Networks
from tests.rl.test_episodes import Scripted

LOW, HIGH = np.array([-2.0, 0.0]), np.array([1.0, 0.5])


def squashed_policy(log_std: float = 0.0) -> ActorCritic:
    torch.manual_seed(0)
    policy = ActorCritic(4, 2, LOW, HIGH, Networks(hidden_sizes=(8,), log_std_init=log_std, squash="tanh"))
    with torch.no_grad():  # a mean that is not near zero, so the squash's curvature matters
        policy.actor_mean[-1].weight.normal_(0.0, 1.0)
    return policy


def reference(policy: ActorCritic, obs: torch.Tensor) -> TransformedDistribution:
    """torch.distributions' tanh-squashed Gaussian, rescaled to the bounds, in float64 (its
    log-prob inverts the tanh, which float32 cannot do near the bounds)."""
    low, high = policy.action_low.double(), policy.action_high.double()
    with torch.no_grad():
        base = Normal(policy.actor_mean(policy.normalize(obs)).double(), policy.log_std.exp().double())
    return TransformedDistribution(base, [TanhTransform(), AffineTransform((low + high) / 2, (high - low) / 2)])


def test_the_deterministic_action_is_the_squashed_mean_inside_the_bounds():
    policy = squashed_policy()
    obs = 5 * torch.randn(64, 4)
    action, _ = policy.deterministic_step(obs)
    mean = policy.actor_mean(policy.normalize(obs))
    expected = policy.action_low + (policy.action_high - policy.action_low) * (torch.tanh(mean) + 1) / 2
    torch.testing.assert_close(action, expected)
    assert (action >= policy.action_low).all() and (action <= policy.action_high).all()
    assert not torch.equal(action, torch.clamp(mean, policy.action_low, policy.action_high))


def test_the_ratio_is_the_squashed_distributions_because_the_jacobian_cancels():
    """Training stores the Gaussian sample; the log-prob difference of two policies at it is the
    difference of the squashed distributions' log-probs at the squashed action."""
    old, new = squashed_policy(), squashed_policy(log_std=-0.4)
    with torch.no_grad():
        new.actor_mean[-1].bias.add_(0.3)
    obs = torch.randn(32, 4)
    sample, _ = old.sample_action(obs)
    with torch.no_grad():
        ours = new.evaluate_actions(obs, sample)[0] - old.evaluate_actions(obs, sample)[0]
    action = new.squash_into_bounds(sample.double())  # the same action, without float32's rounding
    theirs = reference(new, obs).log_prob(action).sum(-1) - reference(old, obs).log_prob(action).sum(-1)
    torch.testing.assert_close(ours.double(), theirs, atol=1e-4, rtol=1e-4)


def test_the_entropy_estimate_is_the_squashed_distributions_entropy():
    """One reparameterized draw per call; its mean over many calls is -E[log p(a)] of the squashed
    distribution, which is far below the Gaussian's for a wide std."""
    policy, draws = squashed_policy(log_std=0.5), 100_000
    obs = torch.randn(3, 4).repeat_interleave(draws, dim=0)
    with torch.no_grad():
        entropy = policy.evaluate_actions(obs, torch.zeros(len(obs), 2))[1].view(3, -1).mean(1)
    dist = reference(policy, obs[::draws])
    expected = -dist.log_prob(dist.sample((draws,))).sum(-1).mean(0)
    torch.testing.assert_close(entropy.double(), expected, atol=0.05, rtol=0.0)  # both Monte Carlo: about 4 standard errors
    gaussian = policy.log_std.sum() + (0.5 + 0.5 * math.log(2 * math.pi)) * 2
    assert (entropy < gaussian - 0.5).all()


def test_an_entropy_bonus_stops_widening_the_std_once_actions_saturate():
    """The Gaussian's entropy grows with the std without end; the squashed one's peaks and falls,
    so the entropy bonus cannot push the std far past the bounds (bang-bang actions)."""
    obs = torch.zeros(20000, 4)

    def entropy(log_std: float, squash: str) -> float:
        torch.manual_seed(1)
        policy = ActorCritic(4, 2, LOW, HIGH, Networks(hidden_sizes=(8,), log_std_init=log_std, squash=squash))
        with torch.no_grad():
            return float(policy.evaluate_actions(obs, torch.zeros(len(obs), 2))[1].mean())

    assert entropy(2.0, "none") > entropy(0.0, "none")
    assert entropy(2.0, "tanh") < entropy(0.0, "tanh") - 1.0


def test_the_env_gets_the_squashed_action_and_the_loop_reports_the_sample():
    class Recording(Scripted):
        def step(self, actions):
            self.sent.append(actions.copy())
            return super().step(actions)

    env = Recording(3)
    env.sent = []
    policy = ActorCritic(1, 1, -np.ones(1), np.ones(1), Networks(hidden_sizes=(4,), log_std_init=1.5, squash="tanh"))
    samples = []
    loop = EpisodeLoop(env, policy.sample_action, PolicyMemory(policy, 3), env_action=policy.env_action)
    loop.reset(0)
    loop.run(None, max_steps=20, on_step=lambda step: samples.append(step.action.numpy().copy()))
    samples, sent = np.stack(samples), np.stack(env.sent)
    assert np.abs(samples).max() > 1.5  # wide samples reach the loop's hook as they were drawn
    np.testing.assert_allclose(sent, np.tanh(samples), rtol=1e-6)


def test_the_export_acts_with_the_squashed_mean_and_says_so():
    policy = squashed_policy()
    module = DeployedPolicy.from_actor_critic(policy, metadata={})
    scripted = torch.jit.script(module)
    obs = 5 * torch.randn(16, 4)
    expected = policy.deterministic_step(obs)[0]
    torch.testing.assert_close(scripted(obs), expected)
    assert '"action_squash": "tanh"' in module.metadata_json
    plain = DeployedPolicy.from_actor_critic(ActorCritic(4, 2, LOW, HIGH), metadata={})
    assert '"action_squash": "none"' in plain.metadata_json


def test_unbounded_actions_cannot_be_squashed():
    with pytest.raises(UserError, match="finite action bounds"):
        ActorCritic(4, 1, np.array([-np.inf]), np.array([np.inf]), Networks(squash="tanh"))
