"""Videos of the deterministic policy: MuJoCo's offscreen renderer -> H.264 mp4 via imageio-ffmpeg.

Headless rendering needs an OpenGL platform: MUJOCO_GL=egl (set by default in ppo_control/__init__,
works on CPU-only machines with Mesa) or MUJOCO_GL=osmesa as a fallback.

Rendering only reads the simulation: the env that is recorded is built exactly like an evaluation
env (no render mode, same wrappers), frames are drawn from its model and data by a renderer of our
own, and every change made for the video (camera, floor, overlay) is made to the visual scene or to
the finished frame. The video's episode is therefore the evaluation's episode, step for step.

An MJX run (env.backend=mjx) simulates on the device, where nothing can be drawn: its episodes are
played in an MjxVecEnv built as evaluation builds it (one sub-env per episode), each step's physics
state (qpos, qvel) is kept, and the frames are drawn afterwards on the host from a MuJoCo model and
data set to those states, by the same renderer, camera, overlay and encoder.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import gymnasium as gym
import imageio
import matplotlib
import mujoco
import numpy as np
import torch
from omegaconf import OmegaConf
from PIL import Image, ImageDraw, ImageFont

from ppo_control.config.errors import UserError
from ppo_control.envs import PhysicsReplayVecEnv, StepResult, make_env_factory, make_vec_env, reference_of
from ppo_control.envs.base import EpisodeTracker, as_arrays
from ppo_control.envs.joystick import TrackingIndices, tracking_indices
from ppo_control.envs.observations import needs_privileged
from ppo_control.envs.randomization import Randomization
from ppo_control.envs.registry import RENDER_REFUSAL
from ppo_control.rl.episodes import EpisodeLoop, Episodes, PolicyMemory, Step
from ppo_control.rl.policy import ActorCritic
from ppo_control.runs.checkpoint import atomic_write

GL_BACKENDS = ("egl", "osmesa")
GL_MODULES = ("egl", "osmesa", "glfw")  # MUJOCO_GL values that name a mujoco.<name> GLContext module
MAX_VIDEO_STEPS = 10_000  # an env without a time limit still gets a finite video
MAX_SCENE_GEOMS = 10_000
TRACKING_CAMERA = "track"

Frames = Callable[[], np.ndarray]


@dataclass(frozen=True)
class VideoSettings:
    """How many videos and how they look (a run's eval.video_* settings): `episodes` videos of
    `width` x `height` pixels at `fps` frames per second (None: the env's real-time rate), with or
    without the `overlay` of time, step and running return."""

    episodes: int
    width: int
    height: int
    fps: int | None = None
    overlay: bool = True

    @classmethod
    def of(cls, eval_cfg: Any) -> VideoSettings:
        """The settings of a run config's `eval` section."""
        return cls(eval_cfg.video_episodes, eval_cfg.video_width, eval_cfg.video_height, eval_cfg.video_fps, eval_cfg.video_overlay)


@dataclass(frozen=True)
class RecordedEnv:
    """The env a video records, built as evaluation builds it: a run's `env` section, the robot's
    randomization (None: the nominal robot) and whether the privileged group is appended."""

    cfg: Any
    randomization: Randomization | None = None
    privileged: bool = False


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


# --- the floor ----------------------------------------------------------------------------------
def texture_period(size: float, texrepeat: float, texuniform: bool) -> float:
    """World length of one repeat of a plane's 2D texture along one axis (0: no repeat).

    MuJoCo maps the texture with s = texrepeat * x / (2 * size) on a plane of half-size `size`:
    texrepeat repeats over the plane's full width. With texuniform (and for an infinite plane,
    size 0) the size drops out and the texture repeats texrepeat times per 2 length units.
    """
    if texrepeat <= 0:
        return 0.0
    if texuniform or size <= 0:
        return 2.0 / texrepeat
    return 2.0 * size / texrepeat


def snap_to_period(displacement: np.ndarray, period: np.ndarray) -> np.ndarray:
    """The whole multiple of `period` nearest to `displacement`, per axis (no shift where period is 0).
    Moving a textured plane by this leaves its pattern exactly where it was in the world."""
    displacement, period = np.asarray(displacement, dtype=np.float64), np.asarray(period, dtype=np.float64)
    safe = np.where(period > 0, period, 1.0)
    return np.where(period > 0, np.round(displacement / safe) * safe, 0.0)


def floor_periods(model: mujoco.MjModel) -> dict[int, np.ndarray]:
    """{geom id: texture period along the plane's x and y} of the floors: planes of the world body
    with a 2D-textured material. Untextured planes (Reacher's arena, Pusher's table) are objects of
    a fixed size, not a ground to extend, and stay where they are."""
    periods = {}
    rgb_role = int(mujoco.mjtTextureRole.mjTEXROLE_RGB)
    for g in range(model.ngeom):
        mat = model.geom_matid[g]
        if model.geom_type[g] != mujoco.mjtGeom.mjGEOM_PLANE or model.geom_bodyid[g] != 0 or mat < 0:
            continue
        tex = model.mat_texid[mat, rgb_role]
        if tex < 0 or model.tex_type[tex] != mujoco.mjtTexture.mjTEXTURE_2D:
            continue
        uniform = bool(model.mat_texuniform[mat])
        period = [texture_period(float(model.geom_size[g, k]), float(model.mat_texrepeat[mat, k]), uniform) for k in range(2)]
        if min(period) > 0:
            periods[g] = np.array(period)
    return periods


def recentre_floors(scene: mujoco.MjvScene, periods: dict[int, np.ndarray], target: np.ndarray) -> np.ndarray:
    """Move each floor's drawing under `target` (world xyz) in whole texture periods along the
    plane's own axes; returns the world shift of the last floor moved (zero if none). Only the
    scene is changed: the physics plane is infinite and never moves."""
    moved = np.zeros(3)
    for i in range(scene.ngeom):
        geom = scene.geoms[i]
        period = periods.get(geom.objid) if geom.objtype == mujoco.mjtObj.mjOBJ_GEOM else None
        if period is None:
            continue
        axes = geom.mat.reshape(3, 3)[:, :2].astype(np.float64)  # the plane's x and y axes in world coordinates
        moved = axes @ snap_to_period(axes.T @ (np.asarray(target, dtype=np.float64) - geom.pos), period)
        geom.pos[:] = geom.pos + moved
        if hasattr(geom, "castshadow"):  # nothing lies under a floor; its self-shadow only shows as acne
            geom.castshadow = 0
    return moved


def move_world_lights(scene: mujoco.MjvScene, model: mujoco.MjModel, shift: np.ndarray) -> None:
    """Move the world's directional lights with the floor: such a light shines the same everywhere,
    but its shadow map covers only a region around its position, so far from the origin the robot
    would lose its shadow."""
    for i in range(scene.nlight):
        light = scene.lights[i]
        if (
            not light.headlight
            and 0 <= light.id < model.nlight
            and model.light_bodyid[light.id] == 0
            and light.type == mujoco.mjtLightType.mjLIGHT_DIRECTIONAL
        ):
            light.pos[:] = light.pos + shift


# --- frames -------------------------------------------------------------------------------------
def _gl_context(platform: str, width: int, height: int):
    if platform not in GL_MODULES:
        raise ValueError(f"unknown OpenGL platform '{platform}'")
    if platform in GL_BACKENDS:
        os.environ["PYOPENGL_PLATFORM"] = platform  # PyOpenGL must use the same platform
    return importlib.import_module(f"mujoco.{platform}").GLContext(width, height)


def _task_camera(base: gym.Env) -> mujoco.MjvCamera:
    """The camera Gymnasium's own rgb_array rendering uses: a free camera on the middle of the
    scene at the model's extent, then the task's default_camera_config; or the task's fixed camera
    when the env was made with camera_id / camera_name. A scene set from physics states (no
    Gymnasium renderer) whose model has a camera named "track" is filmed by it."""
    camera = mujoco.MjvCamera()
    renderer = getattr(base, "mujoco_renderer", None)
    fixed = getattr(renderer, "camera_id", None)
    if renderer is None and TRACKING_CAMERA in [base.model.camera(i).name for i in range(base.model.ncam)]:
        fixed = base.model.camera(TRACKING_CAMERA).id  # a robot model's own camera that follows it (Playground's)
    if fixed is not None and fixed >= 0:
        camera.type, camera.fixedcamid = mujoco.mjtCamera.mjCAMERA_FIXED, fixed
        return camera
    camera.type, camera.fixedcamid = mujoco.mjtCamera.mjCAMERA_FREE, -1
    camera.lookat[:] = np.median(base.data.geom_xpos, axis=0)
    camera.distance = base.model.stat.extent
    for key, value in (getattr(renderer, "default_cam_config", None) or {}).items():
        if isinstance(value, np.ndarray):
            getattr(camera, key)[:] = value
        else:
            setattr(camera, key, value)
    return camera


def _follow_robot(camera: mujoco.MjvCamera, data: mujoco.MjData) -> None:
    """Keep the camera on the robot: a free camera would stay where the episode started, and a
    running HalfCheetah leaves the frame within seconds. Only the look-at point's (x, y) moves to
    the root body; the task's height, distance and angle stay."""
    if camera.type == mujoco.mjtCamera.mjCAMERA_FREE and len(data.xpos) > 1:
        camera.lookat[:2] = data.xpos[1][:2]


class MujocoFrames:
    """RGB frames of a MuJoCo env's current state, drawn offscreen without touching its model or data.

    The camera follows the robot, and the floor is drawn under it for the whole episode (a task's
    floor is drawn only some tens of metres each way; a fast policy leaves it within seconds).
    """

    def __init__(self, env: gym.Env, width: int, height: int, platform: str, floor: bool = True):
        base = env.unwrapped
        self.model, self.data = base.model, base.data
        self._gl = _gl_context(platform, width, height)
        try:
            self._gl.make_current()
            self._context = mujoco.MjrContext(self.model, mujoco.mjtFontScale.mjFONTSCALE_100)
            mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, self._context)
            if self._context.offWidth < width or self._context.offHeight < height:
                mujoco.mjr_resizeOffscreen(width, height, self._context)  # rather than edit the model's offwidth
        except BaseException:
            self._gl.free()
            raise
        self._viewport = mujoco.MjrRect(0, 0, width, height)
        self.scene = mujoco.MjvScene(self.model, maxgeom=MAX_SCENE_GEOMS)
        self._option, self._perturb = mujoco.MjvOption(), mujoco.MjvPerturb()
        self.camera = _task_camera(base)
        self.floor_periods = floor_periods(self.model) if floor else {}
        self._pixels = np.empty((height, width, 3), dtype=np.uint8)

    def __call__(self) -> np.ndarray:
        self._gl.make_current()
        _follow_robot(self.camera, self.data)
        mujoco.mjv_updateScene(self.model, self.data, self._option, self._perturb, self.camera, mujoco.mjtCatBit.mjCAT_ALL, self.scene)
        if self.floor_periods and self.model.nbody > 1:
            shift = recentre_floors(self.scene, self.floor_periods, self.data.xpos[1])
            move_world_lights(self.scene, self.model, shift)
        mujoco.mjr_render(self._viewport, self.scene, self._context)
        mujoco.mjr_readPixels(self._pixels, None, self._viewport, self._context)
        return np.ascontiguousarray(self._pixels[::-1])  # OpenGL's rows run bottom-up

    def close(self) -> None:
        if self._gl is not None:
            self._gl.make_current()
            self._context.free()
            self._gl.free()
            self._gl = None


class HostScene:
    """A host MuJoCo model and data set to physics states computed elsewhere (an MJX simulation on
    the device): what `MujocoFrames` draws from (it is its own `unwrapped`, as an env's base is)."""

    def __init__(self, model: mujoco.MjModel):
        self.model, self.data = model, mujoco.MjData(model)
        mujoco.mj_forward(self.model, self.data)

    @property
    def unwrapped(self) -> HostScene:
        return self

    def show(self, qpos: np.ndarray, qvel: np.ndarray) -> None:
        """Set the state and compute what drawing reads (body and geom poses)."""
        self.data.qpos[:], self.data.qvel[:] = qpos, qvel
        mujoco.mj_forward(self.model, self.data)


def open_frames(env: gym.Env | HostScene, width: int, height: int) -> MujocoFrames:
    """Our MuJoCo renderer on `env`'s model and data, on MUJOCO_GL's platform, falling back from EGL
    to OSMesa once; one line naming both variables when neither works."""
    errors = []
    current = os.environ.get("MUJOCO_GL", "egl")
    for platform in [current] + [b for b in GL_BACKENDS if b != current]:
        os.environ["MUJOCO_GL"] = platform
        frames = None
        try:
            frames = MujocoFrames(env, width, height, platform)
            frames()
            return frames
        except Exception as exc:  # GL platform errors come as several exception types
            if frames is not None:
                frames.close()
            errors.append(f"MUJOCO_GL={platform}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    raise UserError(
        "offscreen rendering failed (" + "; ".join(errors) + "). Install EGL (libegl1) or OSMesa (libosmesa6) "
        "and set MUJOCO_GL=egl or MUJOCO_GL=osmesa (PYOPENGL_PLATFORM to the same value)"
    )


def _is_mujoco(env: gym.Env) -> bool:
    model, data = getattr(env.unwrapped, "model", None), getattr(env.unwrapped, "data", None)
    return isinstance(model, mujoco.MjModel) and isinstance(data, mujoco.MjData)


def make_render_env(
    env_cfg, width: int, height: int, randomization: Randomization | None = None, privileged: bool = False
) -> tuple[gym.Env, Frames]:
    """The env to record, built as evaluation builds it, and its frame source: our MuJoCo renderer
    (falling back from EGL to OSMesa once), or Gymnasium's rgb_array rendering for other envs."""
    kwargs = OmegaConf.to_container(env_cfg.kwargs) if env_cfg.kwargs else {}
    env = make_env_factory(str(env_cfg.id), kwargs, env_cfg.max_episode_steps, randomization=randomization, privileged=privileged)()
    env.reset(seed=0)
    if not _is_mujoco(env):
        env.close()
        env = make_env_factory(
            str(env_cfg.id), kwargs | {"width": width, "height": height}, env_cfg.max_episode_steps, render_mode="rgb_array"
        )()
        env.reset(seed=0)
        return env, env.render
    try:
        return env, open_frames(env, width, height)
    except BaseException:
        env.close()
        raise


# --- overlay ------------------------------------------------------------------------------------
@lru_cache(maxsize=8)
def _overlay_font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    """A monospaced font (digits do not jitter from frame to frame): matplotlib's DejaVu Sans Mono,
    else Pillow's built-in font."""
    try:
        return ImageFont.truetype(str(Path(matplotlib.get_data_path()) / "fonts/ttf/DejaVuSansMono-Bold.ttf"), size)
    except (ImportError, OSError):
        return ImageFont.load_default(size)


def draw_overlay(frame: np.ndarray, time_s: float, step: int, episode_return: float, extra: tuple[tuple[str, str], ...] = ()) -> np.ndarray:
    """Time, step and running return (and `extra` (label, value) rows: a joystick robot's command
    and measured velocity), white on a darkened box in the top-left corner of `frame`."""
    height, width = frame.shape[:2]
    font = _overlay_font(max(8, min(height // 26, width // 30)))
    rows = (("time", f"{time_s:.2f} s"), ("step", f"{step}"), ("return", f"{episode_return:.1f}"), *extra)
    column = max(8, *(len(value) for _, value in rows))  # right-aligned in a column wide enough for a whole episode
    text = "\n".join(f"{label:<6} {value:>{column}}" for label, value in rows)
    margin = max(2, height // 100)
    image = Image.fromarray(frame)
    draw = ImageDraw.Draw(image)
    left, top, right, bottom = draw.multiline_textbbox((2 * margin, 2 * margin), text, font=font, spacing=margin)
    box = (max(0, left - margin), max(0, top - margin), min(width, right + margin), min(height, bottom + margin))
    image.paste(Image.eval(image.crop(box), lambda v: v // 3), box)  # dark enough for white text on any floor
    draw.multiline_text((2 * margin, 2 * margin), text, font=font, fill=(255, 255, 255), spacing=margin)
    return np.asarray(image)


# --- episodes -----------------------------------------------------------------------------------
@contextmanager
def episode_video(path: Path, frames: Frames, fps: int, dt: float, overlay: bool = True) -> Iterator[Callable[[int, float], None]]:
    """An H.264 mp4 being written: the function it gives, called with the episode's step count and
    running return, draws the current frame (with the overlay: time, step, return) and streams it
    into the encoder."""
    with imageio.get_writer(path, fps=fps, codec="libx264", macro_block_size=2, ffmpeg_log_level="error") as writer:

        def add_frame(length: int, episode_return: float, extra: tuple[tuple[str, str], ...] = ()) -> None:
            frame = frames()
            writer.append_data(draw_overlay(frame, length * dt, length, episode_return, extra) if overlay else frame)

        yield add_frame


class SingleEnv:
    """A Gymnasium env as the episode loop's vector env of one. It does not reset itself where the
    episode ends: the video stops there, on the episode's last state."""

    num_envs = 1

    def __init__(self, env: gym.Env):
        self.env = env
        self.low, self.high = env.action_space.low.reshape(-1), env.action_space.high.reshape(-1)
        self.episode = EpisodeTracker(1)

    def reset(self, seed: int) -> np.ndarray:
        obs, _ = self.env.reset(seed=seed)
        self.episode.clear()
        return np.asarray(obs, dtype=np.float32).reshape(1, -1)

    def step(self, actions: np.ndarray) -> StepResult:
        obs, reward, terminated, truncated, _ = self.env.step(np.clip(actions[0], self.low, self.high))
        obs = np.asarray(obs, dtype=np.float32).reshape(1, -1)
        obs, reward, terminated, truncated, ended = as_arrays(obs, [reward], [terminated], [truncated])
        returns, lengths = self.episode.add(reward, ended)
        return StepResult(obs, reward, terminated, truncated, obs, returns, lengths)


class Filming:
    """The episode loop's `on_step` of a one-env video: a frame per step, with the episode's
    running return (float32 rewards into a float64 sum, as the envs count it) and length."""

    def __init__(self, add_frame: Callable[..., None]):
        self.add_frame, self.episode_return, self.length = add_frame, 0.0, 0

    def __call__(self, step: Step) -> None:
        self.episode_return += float(step.result.reward[0])
        self.length += 1
        self.add_frame(self.length, self.episode_return)


def record_episode(
    env: gym.Env,
    frames: Frames,
    policy: ActorCritic,
    path: Path,
    seed: int,
    fps: int,
    device: torch.device | str = "cpu",
    overlay: bool = True,
) -> tuple[float, int]:
    """One episode of the deterministic policy, frames streamed into the H.264 encoder; returns
    the episode's raw return and length.

    The steps are those of `evaluate_policy` with one env (the same loop, batch-of-one policy call
    and action clipping), so a video's numbers are the evaluation's.
    """
    loop = EpisodeLoop(SingleEnv(env), policy.deterministic_step, PolicyMemory(policy, 1), device)
    loop.reset(seed)
    dt = float(getattr(env.unwrapped, "dt", 1.0 / fps))
    with episode_video(path, frames, fps, dt, overlay) as add_frame:
        add_frame(0, 0.0)  # the episode's first state
        filming = Filming(add_frame)
        loop.run(Episodes.first(1), MAX_VIDEO_STEPS, filming)
    return filming.episode_return, filming.length


# --- episodes replayed from physics states (MJX, MuJoCo references) -------------------------------
@dataclass
class PhysicsEpisode:
    """One episode as physics states: qpos and qvel at its start and after each step, and each
    step's reward (one fewer); on a joystick task also the command and the measured velocity (vx,
    vy, wz) with each state."""

    qpos: list[np.ndarray] = field(default_factory=list)
    qvel: list[np.ndarray] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    velocities: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)


def command_and_measured(obs: np.ndarray, where: TrackingIndices | None) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per sub-env, (command, measured) as vx, vy, wz; [] where the task has no command."""
    if where is None:
        return []
    return list(zip(where.commanded(obs), where.measured(obs)))


def velocity_rows(command: np.ndarray, measured: np.ndarray) -> tuple[tuple[str, str], ...]:
    """The overlay's rows for a joystick robot: what it is told and what it does."""
    as_text = lambda v: " ".join(f"{x:+.2f}" for x in v)  # noqa: E731
    return (("", "  vx    vy    wz"), ("cmd", as_text(command)), ("meas", as_text(measured)))


class PhysicsRecorder:
    """The episode loop's `on_step` that keeps the first episode of sub-envs `indices` of `envs` as
    physics states (PhysicsEpisode): made right after the reset, whose observation `obs` gives the
    first command and measured velocity where `where` (a joystick task's) says."""

    def __init__(self, envs: PhysicsReplayVecEnv, indices: list[int], obs: np.ndarray, where: TrackingIndices | None = None):
        self.envs, self.where = envs, where
        qpos, qvel = envs.physics_states()
        velocities = command_and_measured(obs, where)
        self.episodes = {i: PhysicsEpisode([qpos[i]], [qvel[i]], velocities=velocities[i : i + 1]) for i in indices}

    def __call__(self, step: Step) -> None:
        recording = [i for i in self.episodes if step.counting[i]]
        if not recording:
            return
        qpos, qvel = self.envs.stepped_states()
        velocities = command_and_measured(step.result.final_obs, self.where)  # the step's own state, before any reset
        for i in recording:
            episode = self.episodes[i]
            episode.qpos.append(qpos[i])
            episode.qvel.append(qvel[i])
            episode.rewards.append(float(np.float32(step.result.reward[i])))
            if velocities:
                episode.velocities.append(velocities[i])


def play_physics_episodes(
    envs: PhysicsReplayVecEnv, policy: ActorCritic, seed: int, device: torch.device | str, where: TrackingIndices | None = None
) -> list[PhysicsEpisode]:
    """The first episode of each of `envs`' sub-envs (an MjxVecEnv or a ReferenceVecEnv) under the
    deterministic policy, stepped by evaluation's loop (the same reset seed, batched policy call,
    history and recurrent state), as physics states: sub-env i's episode is the first one the
    evaluation's sub-env i plays (the same initial state). `where`: a joystick task's command and
    measured velocity in the observation, kept for the overlay."""
    loop = EpisodeLoop(envs, policy.deterministic_step, PolicyMemory(policy, envs.num_envs), device)
    recorder = PhysicsRecorder(envs, list(range(envs.num_envs)), loop.reset(seed), where)
    loop.run(Episodes.first(envs.num_envs), MAX_VIDEO_STEPS, recorder)
    return list(recorder.episodes.values())


def write_physics_episode(
    path: Path, scene: HostScene, frames: Frames, episode: PhysicsEpisode, fps: int, dt: float, overlay: bool = True
) -> tuple[float, int]:
    """`episode`'s video, a frame per state (the first state's, then one per step, as
    `record_episode`); returns its raw return and length."""
    episode_return = 0.0
    with episode_video(path, frames, fps, dt, overlay) as add_frame:
        for length, (qpos, qvel) in enumerate(zip(episode.qpos, episode.qvel)):
            if length:
                episode_return += episode.rewards[length - 1]
            scene.show(qpos, qvel)
            add_frame(length, episode_return, velocity_rows(*episode.velocities[length]) if episode.velocities else ())
    return episode_return, len(episode.rewards)


def record_physics_videos(
    policy: ActorCritic,
    recorded: RecordedEnv,
    backend: str,
    directory: Path,
    step: int,
    seed: int,
    settings: VideoSettings,
    device: torch.device | str = "cpu",
) -> list[Path]:
    """`record_videos` for a backend whose videos replay physics states (an MJX env simulated on
    `device`, the policy's; a robot's MuJoCo reference): the episodes are played together in one
    vector env, then drawn on the host. fps: the env's real-time rate (1 / its control period)
    unless given."""
    env_cfg = recorded.cfg
    envs = make_vec_env(
        env_cfg,
        num_envs=settings.episodes,
        backend=backend,
        randomization=recorded.randomization,
        privileged=recorded.privileged,
        device=str(device),
    )
    try:
        played = play_physics_episodes(envs, policy, seed, device, tracking_indices(str(env_cfg.id), envs.info.groups))
        model, dt = envs.mj_model, envs.control_period_s
    finally:
        envs.close()
    fps, overlay = settings.fps or int(round(1.0 / dt)), settings.overlay
    scene = HostScene(model)
    scene.show(played[0].qpos[0], played[0].qvel[0])  # the camera is placed on the first episode's start
    frames = open_frames(scene, settings.width, settings.height)
    paths = []
    try:
        for k, episode in enumerate(played):
            path = video_path(directory, step, k)
            atomic_write(path, lambda tmp, e=episode: write_physics_episode(tmp, scene, frames, e, fps, dt, overlay))
            paths.append(path)
    finally:
        frames.close()
    return paths


def check_can_record(env_cfg) -> None:
    """One line when the task's reference backend cannot draw it."""
    if not reference_of(env_cfg).capabilities.renders:
        raise UserError(f"video=true: {RENDER_REFUSAL.format(env_id=env_cfg.id)}")


def record_videos(
    policy: ActorCritic,
    recorded: RecordedEnv,
    directory: Path,
    step: int,
    seed: int,
    settings: VideoSettings,
    device: torch.device | str = "cpu",
) -> list[Path]:
    """Record `settings.episodes` episodes of the deterministic policy in `recorded`'s env, the k-th
    from seed + k, into `directory` (named after the training `step`); returns the mp4 paths.

    Frames are streamed into the encoder (a 1000-step episode would not fit in memory as frames);
    each file is written atomically, so a video on disk is always complete. An MJX run's env
    (env.backend=mjx) is simulated on `device` too.
    """
    env_cfg = recorded.cfg
    check_can_record(env_cfg)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create video directory '{directory}': {exc.strerror}") from None
    reference = reference_of(env_cfg)
    if reference.capabilities.replays_physics:
        return record_physics_videos(policy, recorded, reference.name, directory, step, seed, settings, device)
    env, frames = make_render_env(env_cfg, settings.width, settings.height, recorded.randomization, recorded.privileged)
    fps, overlay = settings.fps or int(round(env.metadata.get("render_fps", 30))), settings.overlay
    paths = []
    try:
        for episode in range(settings.episodes):
            path = video_path(directory, step, episode)
            atomic_write(path, lambda tmp, s=seed + episode: record_episode(env, frames, policy, tmp, s, fps, device, overlay))
            paths.append(path)
    finally:
        if isinstance(frames, MujocoFrames):
            frames.close()
        env.close()
    return paths


def record_run_videos(
    policy: ActorCritic,
    cfg,
    run_name: str,
    step: int,
    seed: int,
    device: torch.device | str = "cpu",
    randomization: Randomization | None = None,
    video_dir: str | None = None,
) -> list[str]:
    """`record_videos` with a run config's settings (`eval.video_*`, `env`), into
    <video_dir or eval.video_dir>/<task>/<run name>/, under `randomization` (None: the nominal
    robot); returns the paths as strings."""
    directory = video_directory(video_dir or cfg.eval.video_dir, cfg.task, run_name)
    recorded = RecordedEnv(cfg.env, randomization, needs_privileged(cfg.policy))
    paths = record_videos(policy, recorded, directory, step, seed, VideoSettings.of(cfg.eval), device)
    return [str(path) for path in paths]
