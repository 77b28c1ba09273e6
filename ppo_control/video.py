"""Videos of the deterministic policy: MuJoCo's offscreen renderer -> H.264 mp4 via imageio-ffmpeg.

Headless rendering needs an OpenGL platform: MUJOCO_GL=egl (set by default in ppo_control/__init__,
works on CPU-only machines with Mesa) or MUJOCO_GL=osmesa as a fallback.
"""

from __future__ import annotations

import os
from pathlib import Path

import gymnasium as gym
import imageio
import numpy as np
import torch
from omegaconf import OmegaConf

from ppo_control.checkpoint import atomic_write
from ppo_control.envs import make_env_factory
from ppo_control.errors import UserError
from ppo_control.policy import ActorCritic

GL_BACKENDS = ("egl", "osmesa")
MAX_VIDEO_STEPS = 10_000  # an env without a time limit still gets a finite video


def video_directory(video_root: str | Path, task: str, run_name: str) -> Path:
    return Path(video_root) / task / run_name


def video_path(directory: Path, step: int, episode: int) -> Path:
    """step<N>-episode<k>.mp4, with a -2, -3... suffix rather than overwriting an existing video."""
    path = directory / f"step{step:09d}-episode{episode}.mp4"
    counter = 2
    while path.exists():
        path = directory / f"step{step:09d}-episode{episode}-{counter}.mp4"
        counter += 1
    return path


def _follow_robot(env: gym.Env) -> None:
    """Keep the camera on the robot. Gymnasium renders rgb_array frames through a free camera that
    stays where the episode started, so a running HalfCheetah leaves the frame within seconds; move
    the camera's look-at point (x, y) to the root body, keeping the task's own height and angle."""
    base = env.unwrapped
    viewer = getattr(getattr(base, "mujoco_renderer", None), "viewer", None)
    if viewer is not None and base.model.nbody > 1:
        viewer.cam.lookat[:2] = base.data.xpos[1][:2]


def _make_render_env(env_cfg, width: int, height: int) -> gym.Env:
    """A single env that renders rgb_array frames, falling back from EGL to OSMesa once."""
    errors = []
    current = os.environ.get("MUJOCO_GL", "egl")
    for backend in [current] + [b for b in GL_BACKENDS if b != current]:
        os.environ["MUJOCO_GL"] = backend
        if backend in GL_BACKENDS:
            os.environ["PYOPENGL_PLATFORM"] = backend  # PyOpenGL must use the same platform
        kwargs = (OmegaConf.to_container(env_cfg.kwargs) if env_cfg.kwargs else {}) | {"width": width, "height": height}
        env = None
        try:
            env = make_env_factory(str(env_cfg.id), kwargs, env_cfg.max_episode_steps, render_mode="rgb_array")()
            env.reset(seed=0)
            env.render()
            return env
        except Exception as exc:  # GL platform errors come as several exception types
            if env is not None:
                env.close()
            errors.append(f"MUJOCO_GL={backend}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    raise UserError(
        "offscreen rendering failed (" + "; ".join(errors) + "). Install EGL (libegl1) or OSMesa (libosmesa6) "
        "and set MUJOCO_GL=egl or MUJOCO_GL=osmesa (PYOPENGL_PLATFORM to the same value)"
    )


def _record_episode(env: gym.Env, policy: ActorCritic, path: Path, seed: int, fps: int, device) -> None:
    """One episode of the deterministic policy, frames streamed into the H.264 encoder."""
    obs, _ = env.reset(seed=seed)
    with imageio.get_writer(path, fps=fps, codec="libx264", macro_block_size=2, ffmpeg_log_level="error") as writer:
        _follow_robot(env)
        writer.append_data(env.render())
        for _ in range(MAX_VIDEO_STEPS):
            with torch.inference_mode():
                obs_t = torch.as_tensor(np.asarray(obs, dtype=np.float32), device=device)
                action = policy.deterministic_action(obs_t).cpu().numpy()
            obs, _, terminated, truncated, _ = env.step(action)
            _follow_robot(env)
            writer.append_data(env.render())
            if terminated or truncated:
                break


def record_videos(
    policy: ActorCritic,
    env_cfg,
    directory: Path,
    step: int,
    episodes: int,
    seed: int,
    width: int,
    height: int,
    fps: int | None = None,
    device: torch.device | str = "cpu",
) -> list[Path]:
    """Record `episodes` episodes of the deterministic policy; returns the mp4 paths.

    Frames are streamed into the encoder (a 1000-step episode would not fit in memory as frames);
    each file is written atomically, so a video on disk is always complete.
    """
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create video directory '{directory}': {exc.strerror}") from None
    env = _make_render_env(env_cfg, width, height)
    fps = fps or int(round(env.metadata.get("render_fps", 30)))
    paths = []
    try:
        for episode in range(episodes):
            path = video_path(directory, step, episode)
            atomic_write(path, lambda tmp: _record_episode(env, policy, tmp, seed + episode, fps, device))
            paths.append(path)
    finally:
        env.close()
    return paths
