"""The registry of backends: one `Backend` object per `env.backend` choice (envs/backends.py says
what each one is), asked what it can do, which tasks it steps and how it builds its vec env; and
the questions that span backends: which backend is a task's reference (where evaluation, videos
and the controller's contract run), what a robot task's run may ask, which vec env a request gets.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from omegaconf import OmegaConf

from ppo_control.config.errors import UserError
from ppo_control.envs import envpool_backend
from ppo_control.envs import mujoco as reference
from ppo_control.envs.backends import EnvpoolBackend, GymnasiumBackend, MjxBackend, ReferenceBackend
from ppo_control.envs.base import MAX_EVAL_ENVS, Backend, Capabilities, VecEnv, VecEnvRequest
from ppo_control.envs.randomization import Randomization
from ppo_control.robots.playground import is_robot_task

_GYMNASIUM = GymnasiumBackend()  # the reference of every task that is not its backend's own
# Name -> backend, in env.backend's order (config's CHOICES lists the same names).
BACKENDS: dict[str, Backend] = {backend.name: backend for backend in (_GYMNASIUM, EnvpoolBackend(), MjxBackend(), ReferenceBackend())}


def backend_named(name: str) -> Backend:
    """The backend `name` (env.backend's value), or one line naming the valid ones."""
    backend = BACKENDS.get(str(name))
    if backend is None:
        raise UserError(f"env.backend={name}: unknown backend; valid backends: {', '.join(BACKENDS)}")
    return backend


def backend_of(env_cfg) -> Backend:
    """The backend the run config's `env` section trains on."""
    return backend_named(env_cfg.backend)


def capabilities(backend: str) -> Capabilities:
    """What the backend named `backend` can do (without importing its engine where none is needed)."""
    return backend_named(backend).capabilities


def robot_hosts(env_id: str) -> list[Backend]:
    """The backends that step the Playground robot task `env_id`, in env.backend's order."""
    return [backend for backend in BACKENDS.values() if backend.runs_robot(env_id)]


def reference_of(env_cfg) -> Backend:
    """The backend whose env is the task's reference: evaluation and videos run there. A
    Gymnasium task trained on envpool is evaluated on Gymnasium; a Playground robot on the backend
    that steps it and renders (its MuJoCo reference: the same episodes as envpool's) where there is
    one, else on the one that steps it (envpool); an MJX task on its own."""
    env_id = str(env_cfg.id)
    if is_robot_task(env_id):
        hosts = robot_hosts(env_id)
        return next((host for host in hosts if host.capabilities.renders), hosts[0])
    trained_on = BACKENDS.get(str(env_cfg.backend))
    return trained_on if trained_on is not None and trained_on.own_reference else _GYMNASIUM


def reference_backend(env_cfg) -> str:
    """The name of `reference_of(env_cfg)` (what evaluation passes to `make_vec_env`)."""
    return reference_of(env_cfg).name


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


def task_kwargs(env_cfg) -> dict[str, Any]:
    """env.kwargs as a plain dict (the task's options)."""
    return OmegaConf.to_container(env_cfg.kwargs) if env_cfg.kwargs else {}


def describe_task(env_cfg) -> TaskDescription:
    """The task of `env_cfg` (the run config's `env` section) as its reference backend knows it."""
    facts = reference_of(env_cfg).describe(str(env_cfg.id), task_kwargs(env_cfg), env_cfg.get("max_episode_steps"))
    return TaskDescription(**facts)


def reward_term_scales(env_cfg) -> tuple[dict[str, float], float] | None:
    """A robot task's reward-term scales (`<term>_scale` of envpool's configuration of the task, the
    run's env.kwargs over it; the MuJoCo references share those options) and its control period in
    seconds; None for a task that is not a Playground robot."""
    env_id = str(env_cfg.id)
    if not is_robot_task(env_id):
        return None
    from ppo_control.envs.envpool_backend import accepted_options, spec_config

    known = set(accepted_options(env_id))
    config = spec_config(env_id, {key: value for key, value in task_kwargs(env_cfg).items() if key in known})
    scales = {name.removesuffix("_scale"): float(value) for name, value in config.items() if name.endswith("_scale")}
    scales.pop("action", None)  # action_scale: radians per unit of action, not a reward term
    return scales, float(config["ctrl_dt"])


def check_run(cfg) -> None:
    """What a run asks of its task that the task's backend cannot do, as one line, before anything
    is built or written (the evaluation envs, and so eval.*, are built only at the first evaluation)."""
    backend_of(cfg.env).check_config(cfg)
    env_id = str(cfg.env.id)
    if not is_robot_task(env_id):
        return
    check_robot_request(env_id, cfg.env.backend, task_kwargs(cfg.env), Randomization.from_config(cfg.randomize))
    trained_on, evaluated_on = backend_of(cfg.env), reference_of(cfg.env)
    n_eval = min(int(cfg.eval.episodes), MAX_EVAL_ENVS) if evaluated_on is trained_on else 0
    trained_on.check_memory(env_id, int(cfg.env.n_envs), n_eval)
    if cfg.eval.randomize and not evaluated_on.capabilities.randomizes_model:
        raise UserError(f"eval.randomize=true: task {env_id}'s robot cannot be randomized (it has no MuJoCo reference); use false")
    if cfg.eval.video and not evaluated_on.capabilities.renders:
        raise UserError(f"eval.video=true: {RENDER_REFUSAL.format(env_id=env_id)}; use eval.video=false")


def check_robot_request(
    env_id: str, backend: str, kwargs: dict[str, Any], randomization: Randomization | None = None, rendering: bool = False
) -> None:
    """One line for what a Playground robot task cannot do: it runs on envpool, and on its MuJoCo
    reference where it has one; envpool cannot change the model (randomize.*) or draw it, the
    references can. envpool's own options (env.kwargs) stay on both."""
    chosen, hosts = backend_named(backend), robot_hosts(env_id)
    if chosen not in hosts:
        valid = " or ".join(host.name for host in hosts)
        general = f"env.backend={backend}: task {env_id} runs on envpool or its MuJoCo reference; use env.backend={valid}"
        raise UserError(chosen.robot_refusal(env_id) or general)
    envpool_options, reference_only = reference.split_reference_options(env_id, kwargs)
    if reference_only and not isinstance(chosen, ReferenceBackend):
        raise UserError(
            f"env.kwargs.{next(iter(reference_only))}: only task {env_id}'s MuJoCo reference has this option; "
            f"train on it (env.backend={ReferenceBackend.name}) or remove the option"
        )
    envpool_backend.check_robot_task(env_id, envpool_options)  # envpool's options are the task's options on every host
    if randomization is not None and not chosen.capabilities.randomizes_model:
        key = next(f.name for f in dataclasses.fields(randomization) if getattr(randomization, f.name) != f.default)
        randomizing = [host.name for host in hosts if host.capabilities.randomizes_model]
        where = f"train on its MuJoCo reference (env.backend={randomizing[0]}) or remove" if randomizing else "remove"
        raise UserError(
            f"randomize.{key}: envpool cannot change task {env_id}'s robot; {where} randomize.* "
            f"(envpool's own observation noise is env.kwargs.noise_level and its parts: {', '.join(noise_options(env_id))})"
        )
    if rendering and not chosen.capabilities.renders:
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
    `device`: where a device-resident backend (mjx) simulates (torch's name). When envpool cannot
    run a Gymnasium task, or what the run asks for needs a capability envpool lacks (randomizing the
    model, the privileged group read from MuJoCo, rendering), this says why on stderr and falls back
    to Gymnasium. A Playground robot task has nowhere to fall back to: that is one line, exit 2.
    """
    n = env_cfg.n_envs if num_envs is None else num_envs
    request = VecEnvRequest(env_cfg, n, task_kwargs(env_cfg), render_mode, randomization, privileged, device)
    chosen = backend_named(backend or env_cfg.backend)
    if is_robot_task(request.env_id):
        check_robot_request(request.env_id, chosen.name, request.kwargs, randomization, rendering=render_mode is not None)
    return chosen.make(request)
