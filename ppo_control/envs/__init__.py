"""Vectorized environments behind one protocol (`base`), one module per backend, one `Backend` object
per backend (`backends`) and the registry that holds them (`registry`): outside this folder nothing
compares a backend's name, it asks the backend (`backend_of(env_cfg).capabilities`,
`reference_of(env_cfg)`). Import what you need from here; the backend modules import their engines
(gymnasium, envpool, JAX) themselves.
"""

from ppo_control.envs.base import (
    Backend,
    Capabilities,
    DeviceVecEnv,
    EnvInfo,
    EpisodeTracker,
    PhysicsReplayVecEnv,
    StepResult,
    VecEnv,
    usable_cores,
)
from ppo_control.envs.gymnasium_backend import GymnasiumVecEnv, ResumableEnv, check_env_id, make_env_factory
from ppo_control.envs.registry import (
    BACKENDS,
    TaskDescription,
    backend_named,
    backend_of,
    capabilities,
    check_run,
    describe_task,
    make_vec_env,
    reference_backend,
    reference_of,
    reward_term_scales,
)

__all__ = [
    "BACKENDS",
    "Backend",
    "Capabilities",
    "DeviceVecEnv",
    "EnvInfo",
    "EpisodeTracker",
    "GymnasiumVecEnv",
    "PhysicsReplayVecEnv",
    "ResumableEnv",
    "StepResult",
    "TaskDescription",
    "VecEnv",
    "backend_named",
    "backend_of",
    "capabilities",
    "check_env_id",
    "check_run",
    "describe_task",
    "make_env_factory",
    "make_vec_env",
    "reference_backend",
    "reference_of",
    "reward_term_scales",
    "usable_cores",
]
