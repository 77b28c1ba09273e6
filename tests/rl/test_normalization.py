import numpy as np
import pytest
import torch

from ppo_control.rl.normalization import RewardScaler, RunningMeanStd


def test_running_mean_std_matches_numpy_over_many_batches():
    rng = np.random.default_rng(0)
    rms = RunningMeanStd(shape=(3,))
    batches = [rng.normal(loc=[1.0, -5.0, 100.0], scale=[0.1, 3.0, 20.0], size=(rng.integers(1, 50), 3)) for _ in range(200)]
    for b in batches:
        rms.update(torch.from_numpy(b))
    everything = np.concatenate(batches)
    assert rms.count.item() == len(everything)
    np.testing.assert_allclose(rms.mean.numpy(), everything.mean(axis=0), rtol=1e-10)
    np.testing.assert_allclose(rms.var.numpy(), everything.var(axis=0), rtol=1e-9)


def test_normalize_uses_stats_and_clips():
    rms = RunningMeanStd(shape=(2,), clip=5.0)
    rms.update(torch.tensor([[0.0, 10.0], [2.0, 10.0]], dtype=torch.float64))
    out = rms(torch.tensor([[1.0, 10.0], [3.0, 11.0]]))
    assert out.dtype == torch.float32
    assert out[0, 0].item() == pytest.approx(0.0)
    assert out[1, 0].item() == pytest.approx(2.0, rel=1e-6)  # (3 - 1) / 1
    assert out[1, 1].item() == 5.0  # (11 - 10) / sqrt(1e-8) clipped at 5


def test_statistics_are_buffers_in_state_dict():
    rms = RunningMeanStd(shape=(2,))
    rms.update(torch.randn(10, 2))
    restored = RunningMeanStd(shape=(2,))
    restored.load_state_dict(rms.state_dict())
    assert torch.equal(restored.mean, rms.mean) and torch.equal(restored.var, rms.var) and restored.count == 10


def test_reward_scaler_hand_example():
    # 2 envs, gamma 0.5. Step 1: G = [1, 3] -> mean 2, var 1 -> scaled [1, 3]; env 0's episode ends.
    # Step 2: G = [0*.5 + 2, 3*.5 + 2] = [2, 3.5]; over all G so far [1, 3, 2, 3.5]: var = 0.921875.
    scaler = RewardScaler(num_envs=2, gamma=0.5, clip=100.0, epsilon=0.0)
    out1 = scaler(np.array([1.0, 3.0], dtype=np.float32), done=np.array([True, False]))
    assert out1.dtype == np.float32 and out1.tolist() == pytest.approx([1.0, 3.0])
    out2 = scaler(np.array([2.0, 2.0], dtype=np.float32), done=np.array([False, False]))
    assert scaler.var == pytest.approx(0.921875)
    assert out2.tolist() == pytest.approx([2.0 / 0.921875**0.5] * 2)


def test_reward_scaler_clips_and_saves_state():
    scaler = RewardScaler(num_envs=2, gamma=0.5, clip=1.5, epsilon=0.0)
    out = scaler(np.array([1.0, 3.0]), done=np.array([False, False]))
    assert out.tolist() == [1.0, 1.5]
    other = RewardScaler(num_envs=2, gamma=0.5, clip=1.5, epsilon=0.0)
    other.load_state_dict(scaler.state_dict())
    assert np.array_equal(other.returns, scaler.returns)
    step = np.array([1.0, 1.0]), np.array([False, False])
    assert other(*step).tolist() == scaler(*step).tolist()


def test_reward_scaler_disabled_is_identity():
    scaler = RewardScaler(num_envs=1, gamma=0.99, clip=1.0, enabled=False)
    assert scaler(np.array([50.0]), np.array([False])).item() == 50.0


def test_device_reward_scaler_matches_the_host_one_and_shares_its_state():
    from ppo_control.rl.normalization import DeviceRewardScaler, RewardScaler

    rng = np.random.default_rng(0)
    host, device = RewardScaler(5, 0.99, 10.0), DeviceRewardScaler(5, 0.99, 10.0)
    for _ in range(200):
        reward = rng.normal(1.0, 3.0, 5).astype(np.float32)
        done = rng.random(5) < 0.05
        expected = host(reward, done)
        got = device(torch.from_numpy(reward), torch.from_numpy(done))
        np.testing.assert_allclose(got.numpy(), expected, rtol=1e-6)
    restored = RewardScaler(5, 0.99, 10.0)
    restored.load_state_dict(device.state_dict())  # a checkpoint of either loads into the other
    reward, done = rng.normal(size=5).astype(np.float32), np.zeros(5, dtype=bool)
    np.testing.assert_allclose(restored(reward, done), device(torch.from_numpy(reward), torch.from_numpy(done)).numpy(), rtol=1e-6)
