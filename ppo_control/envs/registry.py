"""The one place a backend's name is branched on: which class steps a task, what it can do, and
which backend is a task's reference (where evaluation, videos and the controller's contract run).

- gymnasium: Gymnasium's MuJoCo tasks and a user's own env; the reference of those tasks.
- envpool: the same tasks in C++ (faster, no state capture, no model changes); and MuJoCo
  Playground's robot tasks, which exist only there and are their own reference.
- mjx: Brax's MJX envs, simulated on the training device; their own reference.
- mujoco: MuJoCo (Python bindings) references of Playground's robot tasks (`envs.reference`):
  the same task as envpool's port, step for step; it renders, so it is the reference of the robot
  tasks that have one (evaluation and videos run there), and it can train on its own.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from typing import Any

from omegaconf import OmegaConf

from ppo_control.config.errors import UserError
from ppo_control.envs import envpool_backend, gymnasium_backend
from ppo_control.envs import mujoco as reference
from ppo_control.envs.base import MAX_EVAL_ENVS, Capabilities, VecEnv, usable_cores
from ppo_control.envs.randomization import Randomization

BACKENDS = ("gymnasium", "envpool", "mjx", "mujoco")


def capabilities(backend: str) -> Capabilities:
    """What the backend named `backend` can do (without importing its engine)."""
    if backend == "gymnasium":
        return gymnasium_backend.GymnasiumVecEnv.capabilities
    if backend == "envpool":
        return envpool_backend.EnvpoolVecEnv.capabilities
    if backend == "mjx":
        from ppo_control.envs.mjx_backend import MjxVecEnv

        return MjxVecEnv.capabilities
    if backend == "mujoco":
        return reference.ReferenceVecEnv.capabilities
    raise UserError(f"env.backend={backend}: unknown backend; valid backends: {', '.join(BACKENDS)}")


def reference_backend(env_cfg) -> str:
    """The backend whose env is the task's reference: evaluation and videos run there. A
    Gymnasium task trained on envpool is evaluated on Gymnasium; a Playground robot on its MuJoCo
    reference where it has one (the same episodes as envpool's, and it renders), else on envpool;
    an MJX task on its own."""
    env_id = str(env_cfg.id)
    if envpool_backend.is_robot_task(env_id):
        return "mujoco" if reference.has_reference(env_id) else "envpool"
    return "mjx" if env_cfg.backend == "mjx" else "gymnasium"


@dataclass(frozen=True)
class TaskDescription:
    """What a controller needs to know of a task, from its reference env: seconds per policy
    step, the actuators in action order, each group's element names where the layout is known
    (None where not), and for a PD-driven robot its joints, default pose, action scale and gains."""

    control_period_s: float | None
    action_dim: int
    action_names: list[str] | None
    group_sizes: dict[str, int]
    element_names: dict[str, list[str] | None]
    robot: dict[str, Any] | None = None


def describe_task(env_cfg) -> TaskDescription:
    """The task of `env_cfg` (the run config's `env` section) as its reference backend knows it."""
    kwargs = OmegaConf.to_container(env_cfg.kwargs) if env_cfg.kwargs else {}
    backend = reference_backend(env_cfg)
    if backend == "mjx":
        from ppo_control.envs import mjx_backend

        return TaskDescription(**mjx_backend.describe(str(env_cfg.id), kwargs))
    if backend in ("envpool", "mujoco"):  # a reference is the same task as envpool's port
        return TaskDescription(**envpool_backend.describe(str(env_cfg.id), kwargs))
    return TaskDescription(**gymnasium_backend.describe(str(env_cfg.id), kwargs, env_cfg.max_episode_steps))


def check_run(cfg) -> None:
    """What a run asks of its task that the task's backend cannot do, as one line, before anything
    is built or written (the evaluation envs, and so eval.*, are built only at the first evaluation)."""
    env_id = str(cfg.env.id)
    if not envpool_backend.is_robot_task(env_id):
        return
    kwargs = OmegaConf.to_container(cfg.env.kwargs) if cfg.env.kwargs else {}
    check_robot_request(env_id, cfg.env.backend, kwargs, Randomization.from_config(cfg.randomize))
    if cfg.env.backend == "envpool":
        n_eval = 0 if reference.has_reference(env_id) else min(int(cfg.eval.episodes), MAX_EVAL_ENVS)
        envpool_backend.check_pool_memory(env_id, int(cfg.env.n_envs), n_eval)
    if cfg.eval.randomize and not reference.has_reference(env_id):
        raise UserError(f"eval.randomize=true: task {env_id}'s robot cannot be randomized (it has no MuJoCo reference); use false")
    if cfg.eval.video and not reference.has_reference(env_id):
        raise UserError(f"eval.video=true: {RENDER_REFUSAL.format(env_id=env_id)}; use eval.video=false")


def check_robot_request(
    env_id: str, backend: str, kwargs: dict[str, Any], randomization: Randomization | None = None, rendering: bool = False
) -> None:
    """One line for what a Playground robot task cannot do: it runs on envpool, and on its MuJoCo
    reference where it has one; envpool cannot change the model (randomize.*) or draw it, the
    references can. envpool's own options (env.kwargs) stay on both."""
    if backend == "mujoco" and not reference.has_reference(env_id):
        with_one = ", ".join(reference.REFERENCE_TASKS)
        raise UserError(f"env.backend=mujoco: task {env_id} has no MuJoCo reference; tasks with one: {with_one}")
    if backend not in ("envpool", "mujoco"):
        valid = "env.backend=envpool or mujoco" if reference.has_reference(env_id) else "env.backend=envpool"
        raise UserError(f"env.backend={backend}: task {env_id} runs on envpool or its MuJoCo reference; use {valid}")
    envpool_backend.check_robot_task(env_id, kwargs)
    if randomization is not None and backend != "mujoco":
        key = next(f.name for f in dataclasses.fields(randomization) if getattr(randomization, f.name) != f.default)
        where = "train on its MuJoCo reference (env.backend=mujoco) or remove" if reference.has_reference(env_id) else "remove"
        raise UserError(
            f"randomize.{key}: envpool cannot change task {env_id}'s robot; {where} randomize.* "
            f"(envpool's own observation noise is env.kwargs.noise_level and its parts: {', '.join(noise_options(env_id))})"
        )
    if rendering and backend != "mujoco":
        raise UserError(RENDER_REFUSAL.format(env_id=env_id))


RENDER_REFUSAL = "task {env_id} runs on envpool, whose robot tasks cannot render (videos of them await a MuJoCo reference)"


def noise_options(env_id: str) -> list[str]:
    return [name for name in envpool_backend.accepted_options(env_id) if name.startswith("noise")]


def make_vec_env(
    env_cfg,
    num_envs: int | None = None,
    render_mode: str | None = None,
    backend: str | None = None,
    randomization: Randomization | None = None,
    privileged: bool = False,
    device: str | None = None,
) -> VecEnv:
    """Build the configured vector env (`env_cfg` is the `env` section of the run config).

    `backend` overrides env_cfg.backend (evaluation uses the task's `reference_backend`).
    `device`: where an mjx backend simulates (torch's name). When envpool cannot run a Gymnasium
    task, or what the run asks for needs a capability envpool lacks (randomizing the model, the
    privileged group read from MuJoCo, rendering), this says why on stderr and falls back to
    Gymnasium. A Playground robot task has nowhere to fall back to: that is one line, exit 2.
    """
    env_id = str(env_cfg.id)
    kwargs = OmegaConf.to_container(env_cfg.kwargs) if env_cfg.kwargs else {}
    n = env_cfg.n_envs if num_envs is None else num_envs
    backend = backend or env_cfg.backend
    if backend == "mjx":  # simulated where `device` is (the config refuses what it cannot honour)
        from ppo_control.envs.mjx_backend import MjxVecEnv

        return MjxVecEnv(env_id, n, env_cfg.max_episode_steps, device or "cpu", **kwargs)
    threads = lambda: min(env_cfg.num_threads or usable_cores(), n)  # noqa: E731  (envpool's worker threads)
    if envpool_backend.is_robot_task(env_id):
        check_robot_request(env_id, backend, kwargs, randomization, rendering=render_mode is not None)
        if backend == "mujoco":
            return reference.make_reference_vec_env(env_id, n, kwargs, env_cfg.max_episode_steps, threads(), randomization=randomization)
        return envpool_backend.EnvpoolVecEnv(env_id, n, threads(), kwargs, env_cfg.max_episode_steps)
    gymnasium_backend.check_env_id(env_id)
    if backend == "envpool" and render_mode is None:
        can = envpool_backend.EnvpoolVecEnv.capabilities
        reason = (
            "randomize.* needs per-sub-env MuJoCo models, which envpool does not expose"
            if randomization and not can.randomizes_model
            else None
        )
        if privileged and not can.privileged_from_model:
            reason = reason or "the privileged observation group reads MuJoCo's state, which envpool does not expose"
        reason = reason or envpool_backend.unavailable_reason(env_id, kwargs)
        if reason is None:
            return envpool_backend.EnvpoolVecEnv(env_id, n, threads(), kwargs, env_cfg.max_episode_steps)
        print(f"env.backend=envpool: {reason}; using the gymnasium backend instead", file=sys.stderr, flush=True)
    factory = gymnasium_backend.make_env_factory(env_id, kwargs, env_cfg.max_episode_steps, render_mode, randomization, privileged)
    return gymnasium_backend.GymnasiumVecEnv(factory, n, env_cfg.vectorization)
