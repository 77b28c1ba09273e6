"""Vectorized environments behind one protocol (`base`), one module per backend, and one registry
(`registry`) that is the only place a backend's name is branched on. Import what you need from
here; the backend modules import their engines (gymnasium, envpool, JAX) themselves.
"""

from ppo_control.envs.base import Capabilities, EnvInfo, EpisodeTracker, StepResult, VecEnv, usable_cores
from ppo_control.envs.gymnasium_backend import GymnasiumVecEnv, ResumableEnv, check_env_id, make_env_factory
from ppo_control.envs.registry import (
    BACKENDS,
    TaskDescription,
    capabilities,
    check_run,
    describe_task,
    make_vec_env,
    reference_backend,
)

__all__ = [
    "BACKENDS",
    "Capabilities",
    "EnvInfo",
    "EpisodeTracker",
    "GymnasiumVecEnv",
    "ResumableEnv",
    "StepResult",
    "TaskDescription",
    "VecEnv",
    "capabilities",
    "check_env_id",
    "check_run",
    "describe_task",
    "make_env_factory",
    "make_vec_env",
    "reference_backend",
    "usable_cores",
]
