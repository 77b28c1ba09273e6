"""MuJoCo references of envpool's Playground robot tasks: the same tasks on the `mujoco` Python
bindings, which can render them and change their models per sub-env (envpool can do neither).

`batch` holds what every reference task shares (batched stepping, the VecEnv around a task), `port`
what every port of a Playground C++ task builds alike (model, options, layout, saved state); one
module per robot holds its task logic (`go1`: Go1's joystick on flat and rough terrain; `spot`:
Spot's joystick on flat terrain; `t1`: the Booster T1 humanoid's joystick on flat terrain; `panda`:
the Franka Panda arm's PandaPickCube), `quadruped` what Go1's and Spot's share (the feet's state,
the reference's own options and the gait_clock variant) and `arith` the C++'s order of sums and its
C library functions, for references that are bitwise envpool's.
`make_reference_vec_env` builds the VecEnv of a task that has a reference; `has_reference` says
which do.
"""

from __future__ import annotations

from typing import Any

from ppo_control.config.errors import UserError
from ppo_control.envs.mujoco.batch import EnvpoolRandom, PhysicsBatch, ReferenceTask, ReferenceVecEnv, TaskStep
from ppo_control.envs.mujoco.go1 import Go1Joystick
from ppo_control.envs.mujoco.panda import PandaPickCube
from ppo_control.envs.mujoco.spot import SpotJoystick
from ppo_control.envs.mujoco.t1 import T1Joystick

_TASK_CLASSES = (Go1Joystick, SpotJoystick, T1Joystick, PandaPickCube)
_ALL = tuple(env_id for task in _TASK_CLASSES for env_id in task.ENV_IDS)
REFERENCE_TASKS = tuple(env_id.removesuffix("-v1") for env_id in _ALL)
# env.kwargs a reference takes beyond its envpool spec's (each task class's REFERENCE_OPTIONS).
_REFERENCE_OPTIONS = {env_id: tuple(task.REFERENCE_OPTIONS) for task in _TASK_CLASSES for env_id in task.ENV_IDS}


def _env_id(env_id_or_name: str) -> str:
    """An envpool id from an envpool id, a MuJoCoPlayground/ id or a Playground name."""
    key = str(env_id_or_name).removeprefix("MuJoCoPlayground/")
    return key if key.endswith("-v1") else f"{key}-v1"


def has_reference(env_id: str) -> bool:
    """Whether the robot task `env_id` (or its Playground name) has a MuJoCo reference here."""
    return _env_id(env_id) in _ALL


def split_reference_options(env_id: str, kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """env.kwargs as (envpool's own options, the options only the reference of `env_id` has)."""
    own = _REFERENCE_OPTIONS.get(_env_id(env_id), ())
    return {k: v for k, v in kwargs.items() if k not in own}, {k: v for k, v in kwargs.items() if k in own}


def describe_variant(env_id: str, options: dict[str, Any], facts: dict[str, Any]) -> dict[str, Any]:
    """`facts`, the description of envpool's port of `env_id`, as the reference's own `options`
    (split_reference_options' second part) change it (a variant's observation and contract)."""
    return _task_class(_env_id(env_id)).describe_variant(options, facts)


def _task_class(env_id: str) -> type:
    for task in _TASK_CLASSES:
        if env_id in task.ENV_IDS:
            return task
    raise UserError(f"env.id '{env_id}': no MuJoCo reference of this task; tasks with one: {', '.join(_ALL)}")


def make_reference_vec_env(
    env_id: str,
    num_envs: int,
    kwargs: dict[str, Any] | None = None,
    max_episode_steps: int | None = None,
    num_threads: int | None = None,
    rng: str = "envpool",
    randomization=None,
) -> ReferenceVecEnv:
    """The reference VecEnv of `env_id` with `num_envs` sub-envs; `kwargs` are the envpool spec's
    task options (noise_level, reward scales, kp, kd, command ranges, ...). `rng`: "envpool"
    replays envpool's random streams (same seed, same episodes), "numpy" draws from numpy's.
    `randomization` (a randomization.Randomization): randomize.* on each sub-env's own model."""
    env_id = _env_id(env_id)
    task = _task_class(env_id)(env_id, num_envs, kwargs, num_threads)
    return ReferenceVecEnv(task, max_episode_steps, rng, randomization)


__all__ = [
    "REFERENCE_TASKS",
    "EnvpoolRandom",
    "PhysicsBatch",
    "ReferenceTask",
    "ReferenceVecEnv",
    "TaskStep",
    "describe_variant",
    "has_reference",
    "make_reference_vec_env",
    "split_reference_options",
]
