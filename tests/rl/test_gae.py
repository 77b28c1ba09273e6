"""GAE against values worked out by hand (gamma = lambda = 0.5 keeps the arithmetic exact)."""

import torch

from ppo_control.rl.storage import compute_gae

GAMMA, LAMBDA = 0.5, 0.5


def gae(terminated, truncated, truncation_values, last_value=4.0):
    rewards = torch.tensor([[1.0], [1.0], [1.0]])
    values = torch.tensor([[1.0], [2.0], [3.0]])
    as_col = lambda xs, dtype=torch.bool: torch.tensor(xs, dtype=dtype).view(3, 1)
    adv, ret = compute_gae(
        rewards,
        values,
        torch.tensor([last_value]),
        as_col(terminated),
        as_col(truncated),
        as_col(truncation_values, torch.float32),
        GAMMA,
        LAMBDA,
    )
    return adv.view(-1).tolist(), ret.view(-1).tolist()


def test_no_episode_end_bootstraps_from_last_value():
    # t2: 1 + .5*4 - 3 = 0 ; t1: 1 + .5*3 - 2 = .5 ; t0: 1 + .5*2 - 1 = 1, + .25*(.5 + .25*0)
    adv, ret = gae([0, 0, 0], [0, 0, 0], [0, 0, 0])
    assert adv == [1.125, 0.5, 0.0]
    assert ret == [2.125, 2.5, 3.0]


def test_termination_mid_rollout_has_no_bootstrap():
    # t1 terminated: delta = 1 - 2 = -1, no carry from t2 ; t0: 1 + .5*2 - 1 = 1, + .25*(-1) = .75
    adv, _ = gae([0, 1, 0], [0, 0, 0], [0, 0, 0])
    assert adv == [0.75, -1.0, 0.0]


def test_truncation_mid_rollout_bootstraps_from_final_observation_value():
    # t1 truncated with V(final obs) = 10: delta = 1 + .5*10 - 2 = 4, no carry ; t0: 1 + .25*4 = 2
    adv, _ = gae([0, 0, 0], [0, 1, 0], [0, 10.0, 0])
    assert adv == [2.0, 4.0, 0.0]
    # It is V(final obs), not V(s_t) (rsl_rl) and not V(reset obs) = V(s_2) = 3 that is used.
    adv_other, _ = gae([0, 0, 0], [0, 1, 0], [0, 2.0, 0])
    assert adv_other[1] == 1 + 0.5 * 2.0 - 2.0


def test_truncation_at_last_step_ignores_last_value():
    # t2 truncated with V(final) = 6: 1 + 3 - 3 = 1 ; t1: 1 + 1.5 - 2 = .5, + .25*1 = .75 ; t0: 1 + .25*.75
    adv, _ = gae([0, 0, 0], [0, 0, 1], [0, 0, 6.0], last_value=4.0)
    assert adv == [1.1875, 0.75, 1.0]
    adv_again, _ = gae([0, 0, 0], [0, 0, 1], [0, 0, 6.0], last_value=-100.0)
    assert adv_again == adv  # the post-reset observation's value plays no part


def test_terminated_and_truncated_together_counts_as_termination():
    adv, _ = gae([0, 1, 0], [0, 1, 0], [0, 10.0, 0])
    assert adv == [0.75, -1.0, 0.0]


def test_envs_are_independent_columns():
    rewards = torch.ones(3, 2)
    values = torch.tensor([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]])
    terminated = torch.tensor([[0, 0], [1, 0], [0, 0]], dtype=torch.bool)
    truncated = torch.tensor([[0, 0], [0, 1], [0, 0]], dtype=torch.bool)
    trunc_values = torch.tensor([[0.0, 0.0], [0.0, 10.0], [0.0, 0.0]])
    adv, _ = compute_gae(rewards, values, torch.tensor([4.0, 4.0]), terminated, truncated, trunc_values, GAMMA, LAMBDA)
    assert adv[:, 0].tolist() == [0.75, -1.0, 0.0]
    assert adv[:, 1].tolist() == [2.0, 4.0, 0.0]


def test_lambda_one_gives_discounted_monte_carlo_returns():
    torch.manual_seed(0)
    rewards, values = torch.randn(6, 1), torch.randn(6, 1)
    zeros = torch.zeros(6, 1, dtype=torch.bool)
    zeros[-1] = True  # episode terminates at the end
    adv, ret = compute_gae(rewards, values, torch.zeros(1), zeros, torch.zeros_like(zeros), torch.zeros(6, 1), 0.9, 1.0)
    expected = [sum(0.9**k * rewards[t + k, 0].item() for k in range(6 - t)) for t in range(6)]
    assert torch.allclose(ret.view(-1), torch.tensor(expected), atol=1e-5)


def test_device_recursion_matches_the_host_one():
    """The torch loop (envs simulated on the training device) computes what the numpy loop does."""
    from ppo_control.rl.storage import _gae_loop

    gen = torch.Generator().manual_seed(3)
    T, N = 40, 6
    rewards, values, trunc_values = torch.randn(T, N, generator=gen), torch.randn(T, N, generator=gen), torch.randn(T, N, generator=gen)
    terminated = torch.rand(T, N, generator=gen) < 0.1
    truncated = (torch.rand(T, N, generator=gen) < 0.1) & ~terminated
    last = torch.randn(N, generator=gen)
    host, _ = compute_gae(rewards, values, last, terminated, truncated, trunc_values, 0.99, 0.95)
    device = _gae_loop(rewards, values, last, terminated, truncated, trunc_values, 0.99, 0.95)
    assert torch.allclose(host, device, atol=1e-5)
    assert terminated.any() and truncated.any()
