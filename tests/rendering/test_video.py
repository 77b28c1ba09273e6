"""Videos: the recorded episode is the evaluated one, the floor stays under a far-running robot with a
world-fixed pattern, and the overlay is drawn only when asked for."""

import os
import types

import gymnasium as gym
import imageio
import mujoco
import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from ppo_control.envs import make_env_factory
from ppo_control.rendering import video
from ppo_control.rl.evaluation import evaluate_policy, make_eval_envs
from ppo_control.rl.policy import ActorCritic, Networks


def env_cfg(env_id, max_episode_steps=None):
    return OmegaConf.create(
        dict(id=env_id, kwargs={}, max_episode_steps=max_episode_steps, n_envs=1, backend="gymnasium", vectorization="sync", num_threads=0)
    )


def bold_policy(env_id, seed=0, rnn="none"):
    """A fixed policy whose actions are large enough to hit the action bounds now and then."""
    space = gym.make(env_id).unwrapped
    obs_dim, act = space.observation_space.shape[0], space.action_space
    torch.manual_seed(seed)
    policy = ActorCritic(obs_dim, act.shape[0], act.low, act.high, Networks(rnn=rnn, rnn_size=16))
    with torch.no_grad():
        policy.actor_mean[-1].weight.mul_(200.0)
    return policy.eval()


class StepLog(gym.Wrapper):
    """Records what the env hands back, to compare two rollouts step by step."""

    def __init__(self, env):
        super().__init__(env)
        self.observations, self.rewards = [], []

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self.observations.append(np.array(obs))
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.observations.append(np.array(obs))
        self.rewards.append(reward)
        return obs, reward, terminated, truncated, info


def plain_rollout(env_id, max_steps, policy, seed):
    """The episode without any rendering: a bare Gymnasium env and the evaluation's policy call."""
    env = StepLog(make_env_factory(env_id, {}, max_steps)())
    obs, _ = env.reset(seed=seed)
    state = policy.initial_state(1)
    while True:
        with torch.inference_mode():
            action, state = policy.deterministic_step(torch.as_tensor(np.asarray(obs, dtype=np.float32).reshape(1, -1)), state)
        obs, _, terminated, truncated, _ = env.step(action.numpy()[0])
        if terminated or truncated:
            break
    final_qpos = env.unwrapped.data.qpos.copy()
    env.close()
    return env, final_qpos


@pytest.mark.parametrize(
    "env_id, rnn", [("HalfCheetah-v5", "none"), ("Hopper-v5", "none"), ("Hopper-v5", "gru")]
)  # time limit / termination / a recurrent state carried through the episode
def test_recording_does_not_change_the_episode(env_id, rnn, tmp_path):
    cfg, seed = env_cfg(env_id, max_episode_steps=40), 1_000_123
    policy = bold_policy(env_id, rnn=rnn)
    envs = make_eval_envs(cfg, 1)
    try:
        eval_returns, eval_lengths = evaluate_policy(policy, envs, 1, seed)
    finally:
        envs.close()
    plain, plain_qpos = plain_rollout(env_id, 40, policy, seed)

    env, frames = video.make_render_env(cfg, 64, 48)
    logged = StepLog(env)
    try:
        episode_return, length = video.record_episode(logged, frames, policy, tmp_path / "e.mp4", seed, fps=20)
        video_qpos = env.unwrapped.data.qpos.copy()
    finally:
        frames.close()
        env.close()

    assert (episode_return, length) == (eval_returns[0], eval_lengths[0])  # exactly, not approximately
    assert logged.rewards == plain.rewards and len(logged.rewards) == length
    assert all(np.array_equal(a, b) for a, b in zip(logged.observations, plain.observations, strict=True))
    assert np.array_equal(video_qpos, plain_qpos)
    assert len(imageio.mimread(tmp_path / "e.mp4", memtest=False)) == length + 1


def far_frame(x, floor, width=160, height=120):
    env, frames = video.make_render_env(env_cfg("HalfCheetah-v5"), width, height)
    try:
        if not floor:
            frames.floor_periods = {}
        base = env.unwrapped
        qpos = base.data.qpos.copy()
        qpos[0] = x  # the root's x slide: the cheetah far down the track
        base.set_state(qpos, base.data.qvel.copy())
        return frames()
    finally:
        frames.close()
        env.close()


def test_floor_is_drawn_under_a_robot_far_from_the_origin():
    def bright(frame):  # share of the lower half that is lit floor (light checker squares)
        return (frame[frame.shape[0] // 2 :].mean(-1) > 150).mean()

    assert bright(far_frame(200.0, floor=False)) < 0.05  # the task's own floor ends 40 m from the origin: a dark void
    assert bright(far_frame(200.0, floor=True)) > 0.3


def test_texture_period_follows_mujoco_texrepeat():
    assert video.texture_period(40.0, 60.0, texuniform=False) == pytest.approx(80 / 60)  # 60 repeats over 80 m
    assert video.texture_period(40.0, 30.0, texuniform=False) == pytest.approx(80 / 30)
    assert video.texture_period(40.0, 4.0, texuniform=True) == pytest.approx(0.5)  # size drops out
    assert video.texture_period(0.0, 4.0, texuniform=False) == pytest.approx(0.5)  # infinite plane
    assert video.texture_period(40.0, 0.0, texuniform=False) == 0.0
    for env_id, period in [("HalfCheetah-v5", 4 / 3), ("Hopper-v5", 2 / 3), ("Swimmer-v5", 8 / 3)]:
        (floor,) = video.floor_periods(gym.make(env_id).unwrapped.model).values()
        np.testing.assert_allclose(floor, [period, period])
    for env_id in ["Reacher-v5", "Pusher-v5", "InvertedDoublePendulum-v5"]:  # untextured arena, table, backdrop
        assert video.floor_periods(gym.make(env_id).unwrapped.model) == {}


def test_snap_to_period_moves_in_whole_periods():
    period = np.array([4 / 3, 0.5])
    np.testing.assert_allclose(video.snap_to_period([200.0, 0.2], period), [200.0, 0.0])  # 150 periods; 0.4 -> 0
    np.testing.assert_allclose(video.snap_to_period([200.7, 0.3], period), [200 + 4 / 3, 0.5])  # 150.525 -> 151
    np.testing.assert_allclose(video.snap_to_period([-1.0, -0.8], period), [-4 / 3, -1.0])  # -0.75 -> -1; -1.6 -> -2
    np.testing.assert_allclose(video.snap_to_period([3.0, 7.2], [0.0, 2.0]), [0.0, 8.0])  # period 0: never moved


FLOOR_XML = """
<mujoco>
  <asset>
    <texture name="grid" type="2d" builtin="checker" rgb1="0 0 0" rgb2="1 1 1" width="64" height="64"/>
    <material name="floor" texture="grid" texrepeat="{repeat} {repeat}" texuniform="{uniform}" specular="0"/>
  </asset>
  <worldbody>
    <light directional="true" dir="0 0 -1" pos="0 0 3"/>
    <geom name="floor" type="plane" size="6 6 0.1" material="floor"/>
    <camera name="down" pos="100.37 0.21 4" xyaxes="1 0 0 0 1 0"/>
    <body name="robot"><joint type="slide" axis="1 0 0"/><inertial pos="0 0 0" mass="1" diaginertia="1 1 1"/></body>
  </worldbody>
</mujoco>
"""


def top_down(model, data, robot_x, periods=None):
    """The floor seen straight down by a fixed camera at x = 100.37, with the robot (an invisible
    body) at `robot_x`: the floor is drawn wherever the robot is, but its pattern must not move."""
    env = types.SimpleNamespace(model=model, data=data)
    env.unwrapped = env
    data.qpos[0] = robot_x
    mujoco.mj_forward(model, data)
    frames = video.MujocoFrames(env, 64, 64, os.environ.get("MUJOCO_GL", "egl"))
    try:
        frames.camera.type, frames.camera.fixedcamid = mujoco.mjtCamera.mjCAMERA_FIXED, 0
        if periods is not None:
            frames.floor_periods = periods
        return frames()
    finally:
        frames.close()


@pytest.mark.parametrize("repeat, uniform", [(9, "false"), (3, "true")])  # periods 4/3 and 2/3 m
def test_floor_pattern_stays_fixed_in_the_world(repeat, uniform):
    model = mujoco.MjModel.from_xml_string(FLOOR_XML.format(repeat=repeat, uniform=uniform))
    data = mujoco.MjData(model)
    (period,) = video.floor_periods(model).values()
    assert period[0] == pytest.approx(2 * 6 / repeat if uniform == "false" else 2 / repeat)
    robot_x = (98.9, 100.1, 101.8)  # three different snaps of the floor, none near a tie
    frames = [top_down(model, data, x).astype(int) for x in robot_x]
    assert frames[0].std() > 50  # the checker is in view
    assert all(np.abs(frames[0] - f).max() <= 4 for f in frames[1:])  # the same picture, up to texel rounding
    # The check can tell: snapping to half periods moves the checker by a square, and to a period a
    # quarter too long, by a fraction of one.
    for scale in (0.5, 1.25):
        wrong = {g: p * scale for g, p in video.floor_periods(model).items()}
        moved = [top_down(model, data, x, wrong).astype(int) for x in robot_x]
        assert any(np.abs(moved[0] - f).mean() > 50 for f in moved[1:])


def test_overlay_draws_time_step_and_return_in_its_corner():
    frame = np.full((480, 640, 3), 120, dtype=np.uint8)
    drawn = video.draw_overlay(frame, 12.34, 617, -1234.5)
    assert frame.min() == frame.max() == 120  # the input is left alone
    corner, rest = np.abs(drawn.astype(int) - 120)[:100, :260], np.abs(drawn.astype(int) - 120)
    assert corner.mean() > 30 and corner.max() > 100  # dark box, white text
    rest[:100, :260] = 0
    assert rest.max() == 0  # nothing drawn outside the corner
    small = video.draw_overlay(np.zeros((48, 64, 3), dtype=np.uint8), 0.0, 0, 0.0)
    assert small.shape == (48, 64, 3) and small.max() > 0


class FrameCatcher:
    """Stands in for imageio's ffmpeg writer: keeps the exact frames a video would get."""

    def __init__(self, path, **_):
        self.frames = CAUGHT.setdefault(str(path), [])
        open(path, "wb").close()

    def append_data(self, frame):
        self.frames.append(np.array(frame))

    def __enter__(self):
        return self

    def __exit__(self, *_):
        return False


CAUGHT = {}


def test_record_videos_overlay_on_and_off(tmp_path, monkeypatch):
    monkeypatch.setattr(video.imageio, "get_writer", FrameCatcher)
    cfg = env_cfg("HalfCheetah-v5", max_episode_steps=5)
    policy = bold_policy("HalfCheetah-v5")
    CAUGHT.clear()
    (on,) = video.record_videos(policy, video.RecordedEnv(cfg), tmp_path, 7, 3, video.VideoSettings(1, 320, 240, overlay=True))
    (on_frames,) = CAUGHT.values()
    CAUGHT.clear()
    (off,) = video.record_videos(policy, video.RecordedEnv(cfg), tmp_path, 7, 3, video.VideoSettings(1, 320, 240, overlay=False))
    (off_frames,) = CAUGHT.values()
    assert on.name == "step000000007-episode0.mp4" and off.name == "step000000007-episode0-2.mp4"
    assert len(on_frames) == len(off_frames) == 6
    env, frames = video.make_render_env(cfg, 320, 240)
    try:
        env.reset(seed=3)
        assert np.array_equal(off_frames[0], frames())  # off: the rendered frame as it is
    finally:
        frames.close()
        env.close()
    for a, b in zip(on_frames, off_frames):
        diff = np.abs(a.astype(int) - b.astype(int))
        assert diff[:10, :30].mean() > 20  # on: the overlay's corner
        diff[:60, :160] = 0
        assert diff.max() == 0  # and nothing else, in any frame: the same episode, the same pictures


class FlatEnv(gym.Env):
    """A non-MuJoCo env: its videos come from its own rgb_array rendering."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}
    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def __init__(self, render_mode=None, width=8, height=8):
        self.render_mode, self.size, self.t = render_mode, (height, width), 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.zeros(2, np.float32), 1.0, False, self.t >= 4, {}

    def render(self):
        return np.full((*self.size, 3), 40 * self.t, dtype=np.uint8)


def test_non_mujoco_env_is_recorded_with_its_own_rendering(tmp_path, monkeypatch):
    monkeypatch.setattr(video.imageio, "get_writer", FrameCatcher)
    CAUGHT.clear()
    policy = ActorCritic(2, 1, np.array([-1.0]), np.array([1.0]))
    video.record_videos(policy, video.RecordedEnv(env_cfg(f"{__name__}:FlatEnv")), tmp_path, 0, 0, video.VideoSettings(1, 96, 64))
    (frames,) = CAUGHT.values()
    assert [f.shape for f in frames] == [(64, 96, 3)] * 5
    assert [int(f[-1, -1, 0]) for f in frames] == [0, 40, 80, 120, 160]  # the env's frames, overlay in the corner only
