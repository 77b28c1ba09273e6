"""What every backend shares: the vector-env protocol, its typed step result, what a backend can
do (`Capabilities`) with the protocols of the capabilities that add members (`DeviceVecEnv`,
`PhysicsReplayVecEnv`), the interface of a backend as the registry holds it (`Backend`), and the
episode bookkeeping. numpy only: no backend library is imported here.

Time limits are kept apart from terminations end to end: a step that ends an episode returns the
first observation of the next episode *and* the real final observation (`final_obs`), which is
what a truncated step bootstraps from. No transition spans a reset.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ppo_control.envs.observations import POLICY, Groups

if TYPE_CHECKING:  # annotations only: torch is the device backends' own import
    import torch

# The most sub-envs an evaluation runs at once (its episodes beyond that run in turn).
MAX_EVAL_ENVS = 16


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do; the rest of the package asks these instead of comparing names.

    `device_resident`: it also steps on the training device, in torch tensors (`DeviceVecEnv`'s
    `reset_device`/`step_device`; it needs the device collector). `saves_state`: its sub-envs'
    episodes can be saved and restored (exact resume). `randomizes_model`: it can change the MuJoCo
    model per sub-env (randomize.* physics keys). `privileged_from_model`: it can append the
    `privileged` group read from MuJoCo's state. `renders`: it can draw frames for videos.
    `replays_physics`: its videos are drawn afterwards from the physics states of its episodes
    (`PhysicsReplayVecEnv`'s `physics_states`, `stepped_states`, `mj_model`), not live.
    """

    device_resident: bool = False
    saves_state: bool = False
    randomizes_model: bool = False
    privileged_from_model: bool = False
    renders: bool = False
    replays_physics: bool = False


@dataclass(frozen=True)
class EnvInfo:
    """What the policy and the trainer need to know about a task."""

    obs_dim: int
    action_dim: int
    action_low: np.ndarray
    action_high: np.ndarray
    max_episode_steps: int | None
    groups: Groups = ()  # (name, size) of the observation groups, in layout order; () = one group, `policy`

    def __post_init__(self):
        if not self.groups:
            object.__setattr__(self, "groups", ((POLICY, self.obs_dim),))


@dataclass
class StepResult:
    obs: np.ndarray  # float32 [n_envs, obs_dim]; for an env whose episode ended, the new episode's first obs
    reward: np.ndarray  # float32 [n_envs], raw (unscaled)
    terminated: np.ndarray  # bool [n_envs]
    truncated: np.ndarray  # bool [n_envs]
    final_obs: np.ndarray  # float32 [n_envs, obs_dim]; the pre-reset observation where the episode ended
    episode_returns: np.ndarray  # raw returns of the episodes that ended this step
    episode_lengths: np.ndarray  # their lengths
    # Per-step diagnostics of every sub-env, keyed by name (each float [n_envs]): the reward terms
    # an env reports (`reward/<term>`) and, on joystick tasks, the velocity tracking error.
    # Measured on the step's own state (before any reset).
    diagnostics: dict[str, np.ndarray] = field(default_factory=dict)


class VecEnv(Protocol):
    num_envs: int
    info: EnvInfo
    capabilities: Capabilities

    def reset(self, seed: int) -> np.ndarray: ...

    def step(self, actions: np.ndarray) -> StepResult: ...

    def get_state(self) -> dict[str, Any] | None: ...

    def set_state(self, state: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


@dataclass
class DeviceStep:
    """One vector step on the training device (torch tensors, no host copies). For sub-envs whose
    episode ended at this step, `obs` is the next episode's first observation, `final_obs` the real
    last one, and `episode_return`/`episode_length` the finished episode's raw return and length
    (elsewhere those two are the running values and mean nothing)."""

    obs: torch.Tensor
    reward: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    final_obs: torch.Tensor
    episode_return: torch.Tensor
    episode_length: torch.Tensor


class DeviceVecEnv(VecEnv, Protocol):
    """A VecEnv whose capabilities say `device_resident`: besides the numpy face it steps on the
    training device, observations and actions staying torch tensors there (the device collector)."""

    def reset_device(self, seed: int) -> torch.Tensor: ...

    def step_device(self, actions: torch.Tensor) -> DeviceStep: ...


class PhysicsReplayVecEnv(VecEnv, Protocol):
    """A VecEnv whose capabilities say `replays_physics`: its episodes are drawn afterwards, on the
    host, from each step's physics state (videos, sim2sim's recorded episode)."""

    @property
    def mj_model(self) -> Any:
        """The host MuJoCo model (mujoco.MjModel) the states belong to."""
        ...

    @property
    def control_period_s(self) -> float:
        """Seconds per policy step."""
        ...

    def physics_states(self) -> tuple[np.ndarray, np.ndarray]:
        """Every sub-env's current (qpos, qvel), shapes (num_envs, nq) and (num_envs, nv)."""
        ...

    def stepped_states(self) -> tuple[np.ndarray, np.ndarray]:
        """`physics_states` as the last step left them, before any reset."""
        ...


@dataclass(frozen=True)
class VecEnvRequest:
    """What a vector env is built for: the run config's `env` section, the sub-env count, the
    task's options (env.kwargs as a dict), and what the caller adds (a render mode, the
    randomization, the privileged group, the device a device-resident backend simulates on)."""

    env_cfg: Any
    num_envs: int
    kwargs: dict[str, Any]
    render_mode: str | None = None
    randomization: Any = None  # a randomization.Randomization, or None: the nominal robot
    privileged: bool = False
    device: str | None = None

    @property
    def env_id(self) -> str:
        return str(self.env_cfg.id)

    def threads(self) -> int:
        """The worker threads of a thread-pool backend: env.num_threads, or this process's cores."""
        return min(self.env_cfg.num_threads or usable_cores(), self.num_envs)


class Backend:
    """A simulation backend as the registry holds it (one instance per `env.backend` choice): what
    it can do, which tasks it steps, how it builds its vector env and describes a task. The
    registry and the rest of the package ask these instead of comparing names."""

    name: str = ""
    # Its tasks exist on no other backend with the same observations, so they are their own
    # reference (evaluation and videos run here too); otherwise a task's reference is Gymnasium's.
    own_reference: bool = False

    def __repr__(self) -> str:
        return f"<{self.name} backend>"

    @property
    def vec_env_class(self) -> type:
        """The VecEnv class it builds (imported here only when asked where its engine is heavy)."""
        raise NotImplementedError

    @property
    def capabilities(self) -> Capabilities:
        return self.vec_env_class.capabilities

    def runs_robot(self, env_id: str) -> bool:
        """Whether it steps the Playground robot task `env_id`."""
        return False

    def check_config(self, cfg) -> None:
        """One line (ConfigError) for what a run's config asks that this backend cannot honour;
        nothing by default. The registry's check_run calls it before anything is built."""

    def robot_refusal(self, env_id: str) -> str | None:
        """Its own one-line reason not to step the robot task `env_id`, where it steps others
        (None: the registry's general one)."""
        return None

    def make(self, request: VecEnvRequest) -> VecEnv:
        """The vector env `request` asks for (a robot task's request is already checked)."""
        raise NotImplementedError

    def describe(self, env_id: str, kwargs: dict[str, Any], max_episode_steps: int | None) -> dict[str, Any]:
        """A task's controller facts (the fields of registry.TaskDescription), where this backend
        is the task's reference."""
        raise NotImplementedError

    def check_memory(self, env_id: str, n_train: int, n_eval: int) -> None:
        """One line, before anything is built, where the robot task's envs would not fit in memory."""


# A diagnostic reported as two parts, `<name>/achieved` and `<name>/commanded`, is a ratio of sums:
# its mean over steps is sum(achieved) / sum(commanded), reported as `<name>` (left out where
# nothing was commanded).
RATIO_PARTS = ("/achieved", "/commanded")


def diagnostic_means(sums: dict[str, float], steps: int) -> dict[str, float]:
    """Each per-step diagnostic's mean over `steps` sub-env steps from its sum, ratio parts combined."""
    means: dict[str, float] = {}
    for key, total in sums.items():
        if key.endswith(RATIO_PARTS[0]):
            name = key[: -len(RATIO_PARTS[0])]
            commanded = sums.get(name + RATIO_PARTS[1], 0.0)
            if commanded > 0:
                means[name] = total / commanded
        elif not key.endswith(RATIO_PARTS[1]):
            means[key] = total / max(steps, 1)
    return means


def as_arrays(obs: np.ndarray, reward, terminated, truncated) -> tuple[np.ndarray, ...]:
    """A vector env's step output in the protocol's dtypes, plus the indices of the ended episodes."""
    reward = np.asarray(reward, dtype=np.float32)
    terminated = np.asarray(terminated, dtype=bool)
    truncated = np.asarray(truncated, dtype=bool)
    return obs, reward, terminated, truncated, np.flatnonzero(terminated | truncated)


class EpisodeTracker:
    """Raw (unscaled) return and length of every sub-env's current episode."""

    def __init__(self, num_envs: int):
        self.returns = np.zeros(num_envs, dtype=np.float64)
        self.lengths = np.zeros(num_envs, dtype=np.int64)

    def clear(self) -> None:
        self.returns[:] = 0.0
        self.lengths[:] = 0

    def add(self, reward: np.ndarray, ended: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Count one step; return the (returns, lengths) of the sub-envs in `ended`, and restart them."""
        self.returns += reward
        self.lengths += 1
        if not len(ended):
            return np.empty(0), np.empty(0)
        finished = self.returns[ended].copy(), self.lengths[ended].copy()
        self.returns[ended] = 0.0
        self.lengths[ended] = 0
        return finished


def usable_cores() -> int:
    """The CPU cores this process may use: its affinity set, shared evenly between the processes a
    launcher (torchrun) started on this machine."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
