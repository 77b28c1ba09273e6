"""GPU-simulated MuJoCo: Brax's MJX environments, batched and stepped in JAX, handed to torch
without copies (DLPack).

The engine is Brax's MJX envs (`brax.envs.get_environment(name, backend="mjx")`); this module only
batches them and keeps this project's episode semantics, which Brax's own wrappers do not:
- a time limit is a truncation, kept apart from a termination, and the real final observation of
  every ended episode is returned (Brax's AutoResetWrapper overwrites it with the reset one);
- an ended episode restarts from a freshly sampled initial state (Brax's wrapper replays the
  sub-env's first initial state every time).
One jitted function does a whole vector step (step, episode bookkeeping, resets of the ended
sub-envs); the trainer's device collector calls `step_device` with a torch tensor on the training
device and gets torch tensors on that device back. `step`/`reset` are the numpy face of the same
env (the VecEnv protocol) for evaluation and tools that work on the host.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ppo_control.envs.base import Capabilities, EnvInfo, StepResult
from ppo_control.errors import UserError

# JAX would otherwise take most of the GPU's memory at start-up, leaving torch none.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

INSTALL_HINT = "pip install -e '.[mjx]' (from a checkout; or pip install 'ppo_control[mjx]')"
DEFAULT_EPISODE_STEPS = 1000  # Brax's envs have no time limit of their own; this is the Gymnasium tasks' one


def import_engine():
    """(jax, brax.envs), or one line naming the command that installs them."""
    try:
        import jax
        from brax import envs
    except ImportError as exc:
        raise UserError(
            f"env.backend=mjx needs JAX, MuJoCo MJX and Brax, which are not installed ({exc}); install them with: {INSTALL_HINT}"
        ) from None
    return jax, envs


# Brax's environments that run on its MJX backend (its registry also has ones that do not).
MJX_ENVS = (
    "ant",
    "halfcheetah",
    "hopper",
    "humanoid",
    "humanoidstandup",
    "inverted_double_pendulum",
    "inverted_pendulum",
    "pusher",
    "reacher",
    "walker2d",
)


def engine_tasks() -> list[str]:
    """The MJX environments the engine provides (what env.id may name with env.backend=mjx)."""
    _, envs = import_engine()
    return sorted(name for name in MJX_ENVS if name in envs._envs)


def _unknown_task(name: str) -> UserError:
    return UserError(f"env.backend=mjx: Brax provides no MJX environment '{name}'; it provides: {', '.join(engine_tasks())}")


def engine_env(name: str, **kwargs):
    """The engine's single (unbatched) MJX env `name`: its dt, sizes and host MuJoCo model
    (`.sys.mj_model`), its jax-traceable reset and step."""
    _, envs = import_engine()
    if name not in envs._envs:
        raise _unknown_task(name)
    try:
        return envs.get_environment(name, backend="mjx", **kwargs)
    except TypeError as exc:
        raise UserError(f"Brax's MJX env '{name}' does not accept env.kwargs {sorted(kwargs)} ({exc})") from None
    except ValueError as exc:  # Brax: "Unsupported backend: mjx."
        raise _unknown_task(name) from exc


def jax_device(device: torch.device):
    """The JAX device that shares memory with torch's `device` (DLPack hands arrays over in place)."""
    jax, _ = import_engine()
    platform = "cpu" if device.type == "cpu" else "gpu"
    try:
        devices = jax.devices(platform)
    except RuntimeError:
        devices = []
    if not devices:
        raise UserError(
            f"env.backend=mjx with device={device.type}: JAX sees no {platform.upper()} "
            f"(it has {', '.join(str(d) for d in jax.devices())}); install JAX with CUDA (pip install -U 'jax[cuda12]') or use device=cpu"
        )
    index = device.index or 0 if device.type == "cuda" else 0
    return devices[min(index, len(devices) - 1)]


def observation_size(env) -> int:
    """The length of `env`'s observation, from tracing its reset rather than running it: Brax's own
    `observation_size` runs reset eagerly, which compiles MuJoCo's forward pass one operation at a
    time, at every env's construction."""
    import jax

    return int(jax.eval_shape(env.reset, jax.random.PRNGKey(0)).obs.shape[-1])


_ENGINE_ENVS: dict[tuple, tuple] = {}
_BATCHED: dict[tuple, tuple] = {}


def _kwargs_key(name: str, kwargs: dict[str, Any]) -> tuple:
    return (name, repr(sorted(kwargs.items())))


def shared_engine_env(name: str, kwargs: dict[str, Any]) -> tuple:
    """(engine env, observation length) for `name` with `kwargs`, built once per process and shared by
    every batch size and time limit, and by the export's controller contract. Read-only by
    convention: nothing may mutate the env (its `sys`), or every user of the task would see it."""
    key = _kwargs_key(name, kwargs)
    if key not in _ENGINE_ENVS:
        env = engine_env(name, **kwargs)
        _ENGINE_ENVS[key] = (env, observation_size(env))
    return _ENGINE_ENVS[key]


def batched_functions(name: str, kwargs: dict[str, Any], num_envs: int, limit: int) -> tuple:
    """(jitted batched reset, jitted batched step) for `num_envs` copies of `name`'s shared engine
    env, shared by every MjxVecEnv of the same task, kwargs, batch and time limit in this process.
    Tracing MJX's step costs far more than running it, and a fresh jit of a fresh closure would
    trace it again for every env built: a run's evaluation env, a resume in the same process, a
    second run from the Python API."""
    key = (*_kwargs_key(name, kwargs), num_envs, limit)
    if key not in _BATCHED:
        jax, _ = import_engine()
        env, _ = shared_engine_env(name, kwargs)
        _BATCHED[key] = (jax.jit(batched_reset(env, num_envs)), jax.jit(batched_step(env, num_envs, limit)))
    return _BATCHED[key]


def batched_reset(env, n: int):
    """reset(seed) -> carry: sub-env i starts from PRNGKey(seed + i); the carry's reset key is PRNGKey(seed + n)."""
    import jax
    import jax.numpy as jnp

    def reset(seed):
        keys = jax.vmap(jax.random.PRNGKey)(seed + jnp.arange(n))
        states = jax.vmap(env.reset)(keys)
        zeros = jnp.zeros(n, dtype=jnp.int32)
        return states, zeros, jnp.zeros(n, dtype=jnp.float32), jax.random.PRNGKey(seed + n)

    return reset


def batched_step(env, n: int, limit: int):
    """step(carry, actions) -> (carry, outputs, physics): one vector step with this module's episode
    semantics (see the module's docstring)."""
    import jax
    import jax.numpy as jnp

    def select(done, fresh, current):
        return jax.tree_util.tree_map(lambda f, c: jnp.where(done.reshape((-1,) + (1,) * (c.ndim - 1)), f, c), fresh, current)

    def step(carry, actions):
        states, steps, returns, key = carry
        stepped = jax.vmap(env.step)(states, jnp.clip(actions, -1.0, 1.0))
        steps, returns = steps + 1, returns + stepped.reward
        terminated = stepped.done > 0.5
        truncated = (steps >= limit) & ~terminated
        done = terminated | truncated
        key, reset_key = jax.random.split(key)
        # Fresh initial states only where an episode ended (and only computed when one did).
        restart = lambda s: select(done, jax.vmap(env.reset)(jax.random.split(reset_key, n)), s)  # noqa: E731
        states = jax.lax.cond(done.any(), restart, lambda s: s, stepped)
        outputs = (states.obs, stepped.reward, terminated, truncated, stepped.obs, returns, steps)
        physics = (stepped.pipeline_state.q, stepped.pipeline_state.qd)  # before any reset: what a video shows last
        carry = (states, jnp.where(done, 0, steps), jnp.where(done, 0.0, returns), key)
        # Brax's step makes some leaves weakly typed where its reset does not: without this the
        # second call (the first on a stepped carry) would trace and compile it all again.
        carry = jax.tree_util.tree_map(lambda x: jax.lax.convert_element_type(x, x.dtype), carry)
        return carry, outputs, physics

    return step


def to_torch(array) -> torch.Tensor:
    """A JAX array as a torch tensor on the same device, sharing its memory (read-only by contract:
    JAX arrays are immutable, so nothing writes into it)."""
    return torch.from_dlpack(array)


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


class MjxVecEnv:
    """`num_envs` copies of one of Brax's MJX envs on the JAX device matching torch's `device`.

    Actions are clipped to [-1, 1], the range of Brax's MJX envs. Sub-env i starts from
    PRNGKey(seed + i); every later reset draws from one key per env, split each step, so a run is
    reproducible from its seed and its state (`get_state`) resumes it exactly.
    """

    capabilities = Capabilities(device_resident=True, saves_state=True, renders=True)  # drawn on the host from its physics states

    def __init__(self, name: str, num_envs: int, max_episode_steps: int | None = None, device: torch.device | str = "cpu", **kwargs):
        self._jax, _ = import_engine()
        self.device = torch.device(device)
        self._jax_device = jax_device(self.device)
        self.name, self.num_envs = name, num_envs
        limit = DEFAULT_EPISODE_STEPS if max_episode_steps is None else max_episode_steps
        self.env, obs_dim = shared_engine_env(name, kwargs)
        self._reset_fn, self._step_fn = batched_functions(name, kwargs, num_envs, limit)
        self.info = EnvInfo(
            obs_dim=obs_dim,
            action_dim=int(self.env.action_size),
            action_low=-np.ones(self.env.action_size, dtype=np.float32),
            action_high=np.ones(self.env.action_size, dtype=np.float32),
            max_episode_steps=limit,
        )
        self._carry = None  # (brax states, steps, episode returns, reset key), all batched on the device
        self._stepped_states = None  # each sub-env's (qpos, qvel) right after the last step, before any reset

    @property
    def control_period_s(self) -> float:
        return float(self.env.dt)

    @property
    def mj_model(self):
        """The host MuJoCo model of the task (for rendering and the controller's contract)."""
        return self.env.sys.mj_model

    # --- the device face (training) ------------------------------------------------------------
    def reset_device(self, seed: int) -> torch.Tensor:
        """Start a new episode in every sub-env; returns the observations on the training device."""
        self._carry = self._reset_fn(self._jax.device_put(np.int32(seed), self._jax_device))
        return to_torch(self._carry[0].obs)

    def step_device(self, actions: torch.Tensor) -> DeviceStep:
        actions = self._jax.dlpack.from_dlpack(actions.detach().contiguous())
        self._carry, out, self._stepped_states = self._step_fn(self._carry, actions)
        obs, reward, terminated, truncated, final_obs, returns, lengths = (to_torch(x) for x in out)
        return DeviceStep(obs, reward, terminated, truncated, final_obs, returns, lengths)

    # --- the numpy face (the VecEnv protocol: evaluation, tools) -------------------------------
    def reset(self, seed: int) -> np.ndarray:
        return self.reset_device(seed).cpu().numpy()

    def step(self, actions: np.ndarray) -> StepResult:
        out = self.step_device(torch.as_tensor(np.asarray(actions, dtype=np.float32), device=self.device))
        host = [x.cpu().numpy() for x in (out.obs, out.reward, out.terminated, out.truncated, out.final_obs)]
        obs, reward, terminated, truncated, final_obs = host
        ended = np.flatnonzero(terminated | truncated)
        returns = out.episode_return.cpu().numpy().astype(np.float64)[ended]
        lengths = out.episode_length.cpu().numpy().astype(np.int64)[ended]
        return StepResult(obs, reward, terminated, truncated, final_obs, returns, lengths)

    # --- state for checkpoints -----------------------------------------------------------------
    def get_state(self) -> dict[str, Any]:
        """The whole batch of episodes (every array of the Brax states, step counters, running
        returns and the reset key) as numpy arrays, in the pytree's leaf order."""
        leaves = self._jax.tree_util.tree_leaves(self._carry)
        return {"leaves": [np.asarray(leaf) for leaf in leaves]}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore `get_state()`'s result (the env must have been reset once: that fixes the layout)."""
        jax = self._jax
        leaves, treedef = jax.tree_util.tree_flatten(self._carry)
        saved = state["leaves"]
        if len(saved) != len(leaves) or any(np.shape(s) != leaf.shape for s, leaf in zip(saved, leaves)):
            raise UserError(f"the saved MJX env state does not fit this run's {self.num_envs} sub-envs of '{self.name}'")
        arrays = [jax.device_put(np.asarray(s, dtype=leaf.dtype), self._jax_device) for s, leaf in zip(saved, leaves)]
        self._carry = jax.tree_util.tree_unflatten(treedef, arrays)

    def close(self) -> None:
        self._carry = None

    # --- physics states on the host (videos) ---------------------------------------------------
    def physics_states(self) -> tuple[np.ndarray, np.ndarray]:
        """Every sub-env's current joint positions and velocities (MuJoCo's qpos and qvel), as host
        arrays of shape (num_envs, nq) and (num_envs, nv)."""
        states = self._carry[0].pipeline_state
        return np.asarray(states.q), np.asarray(states.qd)

    def stepped_states(self) -> tuple[np.ndarray, np.ndarray]:
        """`physics_states` as the last step left them, before any reset: for a sub-env whose
        episode ended at that step, its last state (the carry holds the next episode's first)."""
        qpos, qvel = self._stepped_states
        return np.asarray(qpos), np.asarray(qvel)


def describe(name: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The engine env's control period, actuator names and observation size; its observation
    layout is the engine's own, so no element names."""
    from ppo_control.envs.mujoco_names import action_names

    env, obs_size = shared_engine_env(name, kwargs)
    return {
        "control_period_s": float(env.dt),
        "action_dim": int(env.action_size),
        "action_names": action_names(env.sys.mj_model),
        "group_sizes": {"policy": obs_size},
        "element_names": {"policy": None},
    }
