"""One class per backend (`env.backend`): what it can do, which tasks it steps, how it builds its
vector env and describes a task. The registry holds one instance of each and asks them.

- gymnasium: Gymnasium's MuJoCo tasks and a user's own env; the reference of those tasks.
- envpool: the same tasks in C++ (faster, no state capture, no model changes), falling back to
  Gymnasium where it cannot run what is asked; and MuJoCo Playground's robot tasks, which exist
  only there and are their own reference where they have no MuJoCo one.
- mjx: Brax's MJX envs, simulated on the training device; their own reference. Its engine (JAX,
  and torch in its adapter) is imported only when the backend is built or asked for its class.
- mujoco: MuJoCo (Python bindings) references of Playground's robot tasks (`envs.mujoco`): the
  same task as envpool's port, step for step; it renders and randomizes, so it is the reference of
  the robot tasks that have one (evaluation and videos run there), and it can train on its own.
"""

from __future__ import annotations

import sys
from typing import Any

from ppo_control.config import ConfigError, default_config
from ppo_control.envs import envpool_backend, gymnasium_backend
from ppo_control.envs import mujoco as reference
from ppo_control.envs.base import Backend, VecEnv, VecEnvRequest
from ppo_control.robots import playground


class GymnasiumBackend(Backend):
    name = "gymnasium"

    @property
    def vec_env_class(self) -> type:
        return gymnasium_backend.GymnasiumVecEnv

    def make(self, request: VecEnvRequest) -> VecEnv:
        gymnasium_backend.check_env_id(request.env_id)
        return gymnasium_vec_env(request)

    def describe(self, env_id: str, kwargs: dict[str, Any], max_episode_steps: int | None) -> dict[str, Any]:
        return gymnasium_backend.describe(env_id, kwargs, max_episode_steps)


def gymnasium_vec_env(request: VecEnvRequest) -> VecEnv:
    """The Gymnasium vector env of an already checked env id."""
    cfg = request.env_cfg
    factory = gymnasium_backend.make_env_factory(
        request.env_id, request.kwargs, cfg.max_episode_steps, request.render_mode, request.randomization, request.privileged
    )
    return gymnasium_backend.GymnasiumVecEnv(factory, request.num_envs, cfg.vectorization)


class EnvpoolBackend(Backend):
    name = "envpool"

    @property
    def vec_env_class(self) -> type:
        return envpool_backend.EnvpoolVecEnv

    def runs_robot(self, env_id: str) -> bool:
        return True  # every Playground robot task is one of envpool's

    def make(self, request: VecEnvRequest) -> VecEnv:
        """A robot task's pool; a Gymnasium task's pool where envpool can run what is asked, else
        (saying why on stderr) the Gymnasium backend's env."""
        if playground.is_robot_task(request.env_id):
            return self._pool(request)
        gymnasium_backend.check_env_id(request.env_id)
        if request.render_mode is None:
            reason = self.fallback_reason(request)
            if reason is None:
                return self._pool(request)
            print(f"env.backend=envpool: {reason}; using the gymnasium backend instead", file=sys.stderr, flush=True)
        return gymnasium_vec_env(request)

    def fallback_reason(self, request: VecEnvRequest) -> str | None:
        """Why envpool cannot run the Gymnasium task of `request` (None when it can): a capability
        the request needs and envpool lacks, or the task or its options missing from envpool."""
        can = self.capabilities
        if request.randomization and not can.randomizes_model:
            return "randomize.* needs per-sub-env MuJoCo models, which envpool does not expose"
        if request.privileged and not can.privileged_from_model:
            return "the privileged observation group reads MuJoCo's state, which envpool does not expose"
        return envpool_backend.unavailable_reason(request.env_id, request.kwargs)

    def _pool(self, request: VecEnvRequest) -> VecEnv:
        cfg = request.env_cfg
        return envpool_backend.EnvpoolVecEnv(request.env_id, request.num_envs, request.threads(), request.kwargs, cfg.max_episode_steps)

    def describe(self, env_id: str, kwargs: dict[str, Any], max_episode_steps: int | None) -> dict[str, Any]:
        return envpool_backend.describe(env_id, kwargs)

    def check_memory(self, env_id: str, n_train: int, n_eval: int) -> None:
        envpool_backend.check_pool_memory(env_id, n_train, n_eval)


class MjxBackend(Backend):
    name = "mjx"
    own_reference = True  # Brax's envs: their observations are their own

    @property
    def vec_env_class(self) -> type:
        from ppo_control.envs.mjx_backend import MjxVecEnv  # torch and, when built, JAX: see describe

        return MjxVecEnv

    def make(self, request: VecEnvRequest) -> VecEnv:
        """Simulated where `request.device` is (the config refuses what it cannot honour)."""
        cls, cfg = self.vec_env_class, request.env_cfg
        return cls(request.env_id, request.num_envs, cfg.max_episode_steps, request.device or "cpu", **request.kwargs)

    def describe(self, env_id: str, kwargs: dict[str, Any], max_episode_steps: int | None) -> dict[str, Any]:
        # torch and, when built, JAX (the mjx extra): only for an mjx task. This module loads with the
        # envs, which the commands import before they refuse a wrong run path without torch
        # (tests/runs/test_resume.py checks it).
        from ppo_control.envs import mjx_backend

        return mjx_backend.describe(env_id, kwargs)

    def check_config(self, cfg) -> None:
        """Randomization, observation history and groups beyond `policy` are host-side features
        (of the Gymnasium and envpool backends): not here yet."""
        defaults = default_config().randomize
        changed = [f"randomize.{key}" for key in cfg.randomize if cfg.randomize[key] != defaults[key]]
        if changed:
            raise ConfigError(
                f"{changed[0]} is not supported with env.backend={self.name} (domain randomization runs on the gymnasium backend); "
                "remove it"
            )
        for key in ("actor_history", "critic_history"):
            if cfg.policy[key] != 1:
                raise ConfigError(
                    f"policy.{key}={cfg.policy[key]} is not supported with env.backend={self.name} (history runs on the gymnasium "
                    "and envpool backends); use 1, or policy.rnn=gru|lstm for memory"
                )
        for key in ("actor_obs", "critic_obs"):
            if list(cfg.policy[key]) != ["policy"]:
                raise ConfigError(
                    f"policy.{key}={list(cfg.policy[key])} is not supported with env.backend={self.name}: its envs have one group; "
                    "use [policy]"
                )
        if cfg.eval.video and cfg.eval.randomize:
            raise ConfigError(f"eval.randomize=true is not supported with env.backend={self.name} (no randomization there); use false")


class ReferenceBackend(Backend):
    name = "mujoco"

    @property
    def vec_env_class(self) -> type:
        return reference.ReferenceVecEnv

    def runs_robot(self, env_id: str) -> bool:
        return reference.has_reference(env_id)

    def robot_refusal(self, env_id: str) -> str | None:
        return f"env.backend={self.name}: task {env_id} has no MuJoCo reference; tasks with one: {', '.join(reference.REFERENCE_TASKS)}"

    def make(self, request: VecEnvRequest) -> VecEnv:
        """A robot task's reference; any other task steps on Gymnasium (it is its own reference)."""
        if not playground.is_robot_task(request.env_id):
            return GymnasiumBackend().make(request)
        return reference.make_reference_vec_env(
            request.env_id,
            request.num_envs,
            request.kwargs,
            request.env_cfg.max_episode_steps,
            request.threads(),
            randomization=request.randomization,
        )

    def describe(self, env_id: str, kwargs: dict[str, Any], max_episode_steps: int | None) -> dict[str, Any]:
        envpool_options, own = reference.split_reference_options(env_id, kwargs)
        facts = envpool_backend.describe(env_id, envpool_options)  # a reference is the same task as envpool's port
        return reference.describe_variant(env_id, own, facts)
