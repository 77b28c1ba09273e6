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
device and gets torch tensors on that device back. The policy acts between steps, in torch, so
each step is one dispatch: what a dispatch costs is kept small by carrying the episodes packed
into one array per dtype (`FlatLayout`) rather than the engine state's hundred-odd leaves, and by
donating that carry to the step that replaces it. `step`/`reset` are the numpy face of the same
env (the VecEnv protocol) for evaluation and tools that work on the host.

JAX and Brax are an optional extra (`import_engine` names the command that installs them): every
function imports them itself, so this module, and the registry that names it, load without them.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import torch

from ppo_control.config.errors import UserError
from ppo_control.envs.base import Capabilities, DeviceStep, EnvInfo, StepResult
from ppo_control.envs.mujoco_names import action_names

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


def state_shape(env):
    """The shapes and dtypes of `env`'s state (a pytree of `jax.ShapeDtypeStruct`), from tracing its
    reset rather than running it: running reset eagerly (as Brax's own `observation_size` does)
    compiles MuJoCo's forward pass one operation at a time, at every env's construction."""
    import jax

    return jax.eval_shape(env.reset, jax.random.PRNGKey(0))


_ENGINE_ENVS: dict[tuple, tuple] = {}
_BATCHED: dict[tuple, BatchedFunctions] = {}


def _kwargs_key(name: str, kwargs: dict[str, Any]) -> tuple:
    return (name, repr(sorted(kwargs.items())))


def _shared(name: str, kwargs: dict[str, Any]) -> tuple:
    """(engine env, its state's shape), built once per process (see `shared_engine_env`)."""
    key = _kwargs_key(name, kwargs)
    if key not in _ENGINE_ENVS:
        env = engine_env(name, **kwargs)
        _ENGINE_ENVS[key] = (env, state_shape(env))
    return _ENGINE_ENVS[key]


def shared_engine_env(name: str, kwargs: dict[str, Any]) -> tuple:
    """(engine env, observation length) for `name` with `kwargs`, built once per process and shared by
    every batch size and time limit, and by the export's controller contract. Read-only by
    convention: nothing may mutate the env (its `sys`), or every user of the task would see it."""
    env, state = _shared(name, kwargs)
    return env, int(state.obs.shape[-1])


@dataclass(frozen=True)
class FlatLayout:
    """Where each leaf of a batched pytree lies when the tree is carried as one (batch, width) array
    per dtype instead of one array per leaf.

    A jitted call pays a host-side cost for every array it takes and returns, and a Brax MJX state
    has about a hundred: called once per env step, that cost rivals the physics of a small batch.
    Packed, the carry is a few arrays; one `where` per dtype also picks, per sub-env, between two
    packed trees (a stepped episode and a fresh one). Leaves with no elements take no columns and
    unpack as empty arrays. `pack` and `unpack` work on JAX arrays inside a jitted function and on
    numpy arrays on the host (`xp`), so a checkpoint keeps the tree's own leaves.
    """

    treedef: Any
    batch: int
    dtypes: tuple  # one packed array per dtype, in this order
    fields: tuple  # per leaf: (index of its packed array or None if empty, first column, end column, shape, dtype)

    @classmethod
    def of(cls, shapes, batch: int) -> FlatLayout:
        """The layout of `batch` copies of `shapes` (a pytree of unbatched shapes and dtypes)."""
        import jax

        leaves, treedef = jax.tree_util.tree_flatten(shapes)
        dtypes: list[np.dtype] = []
        widths: list[int] = []
        fields = []
        for leaf in leaves:
            shape, dtype = tuple(leaf.shape), np.dtype(leaf.dtype)
            size = math.prod(shape)
            if size == 0:
                fields.append((None, 0, 0, shape, dtype))
                continue
            if dtype not in dtypes:
                dtypes.append(dtype)
                widths.append(0)
            index = dtypes.index(dtype)
            fields.append((index, widths[index], widths[index] + size, shape, dtype))
            widths[index] += size
        return cls(treedef, batch, tuple(dtypes), tuple(fields))

    @property
    def leaf_shapes(self) -> list[tuple[int, ...]]:
        """Each leaf's batched shape, in the tree's leaf order."""
        return [(self.batch, *shape) for _, _, _, shape, _ in self.fields]

    def pack(self, tree, xp=None) -> tuple:
        """`tree` (every leaf batched along its first axis) as one (batch, width) array per dtype. Each
        leaf takes its layout's dtype, strongly typed: Brax's step returns some leaves weakly typed
        where its reset does not, and a carry whose types changed would make the jitted step trace
        and compile again at its second call."""
        xp = xp or _jnp()
        columns: list[list] = [[] for _ in self.dtypes]
        for leaf, (index, _, _, _, dtype) in zip(self.treedef.flatten_up_to(tree), self.fields):
            if index is not None:
                columns[index].append(xp.asarray(leaf).astype(dtype).reshape(self.batch, -1))
        return tuple(xp.concatenate(c, axis=1) for c in columns)

    def unpack(self, packed: tuple, xp=None):
        """The tree `pack` made `packed` from, as views of it where the array library has them (numpy
        and torch do: one indexing operation per leaf, the cheapest hand-over of many fields of a
        few arrays to torch; `xp=torch` needs a layout without empty leaves)."""
        xp = xp or _jnp()
        leaves = [
            xp.zeros((self.batch, *shape), dtype) if index is None else _columns(packed[index], start, end, shape)
            for index, start, end, shape, dtype in self.fields
        ]
        return self.treedef.unflatten(leaves)


def _columns(array, start: int, end: int, shape: tuple):
    """Columns start:end of a (batch, width) array as a leaf of `shape` per row."""
    if not shape:
        return array[:, start]
    block = array[:, start:end]
    return block if len(shape) == 1 else block.reshape((array.shape[0], *shape))


def _jnp():
    import jax.numpy as jnp

    return jnp


class BatchedFunctions(NamedTuple):
    """A batch's jitted reset and step (see `batched_reset`, `batched_step`), the layout of its carry's
    episodes and that of the step's outputs for the trainer."""

    reset: Any
    step: Any
    episodes: FlatLayout
    outputs: FlatLayout


def episodes_layout(name: str, kwargs: dict[str, Any], num_envs: int) -> FlatLayout:
    """The packed layout of `num_envs` episodes of `name`: (engine state, step count, running return)."""
    import jax
    import jax.numpy as jnp

    _, state = _shared(name, kwargs)
    return FlatLayout.of((state, jax.ShapeDtypeStruct((), jnp.int32), jax.ShapeDtypeStruct((), jnp.float32)), num_envs)


def outputs_layout(obs_size: int, num_envs: int) -> FlatLayout:
    """The packed layout of a step's outputs for the trainer, named as DeviceStep's fields."""
    import jax
    import jax.numpy as jnp

    one = lambda dtype, *shape: jax.ShapeDtypeStruct(shape, dtype)
    fields = {
        "obs": one(jnp.float32, obs_size),
        "reward": one(jnp.float32),
        "terminated": one(jnp.bool_),
        "truncated": one(jnp.bool_),
        "final_obs": one(jnp.float32, obs_size),
        "episode_return": one(jnp.float32),
        "episode_length": one(jnp.int32),
    }
    return FlatLayout.of(fields, num_envs)


def batched_functions(name: str, kwargs: dict[str, Any], num_envs: int, limit: int) -> BatchedFunctions:
    """The jitted batched reset and step for `num_envs` copies of `name`'s shared engine env, shared
    by every MjxVecEnv of the same task, kwargs, batch and time limit in this process. Tracing
    MJX's step costs far more than running it, and a fresh jit of a fresh closure would trace it
    again for every env built: a run's evaluation env, a resume in the same process, a second run
    from the Python API. The step donates its carry: XLA writes the next one over it."""
    key = (*_kwargs_key(name, kwargs), num_envs, limit)
    if key not in _BATCHED:
        jax, _ = import_engine()
        env, obs_size = shared_engine_env(name, kwargs)
        episodes, outputs = episodes_layout(name, kwargs, num_envs), outputs_layout(obs_size, num_envs)
        reset = jax.jit(batched_reset(env, num_envs, episodes))
        step = jax.jit(batched_step(env, num_envs, limit, episodes, outputs), donate_argnums=0)
        _BATCHED[key] = BatchedFunctions(reset, step, episodes, outputs)
    return _BATCHED[key]


def new_episodes(env, keys):
    """(engine states, step counts, running returns) of fresh episodes, one per key."""
    import jax
    import jax.numpy as jnp

    n = keys.shape[0]
    return jax.vmap(env.reset)(keys), jnp.zeros(n, dtype=jnp.int32), jnp.zeros(n, dtype=jnp.float32)


def batched_reset(env, n: int, layout: FlatLayout):
    """reset(seed) -> (carry, obs): sub-env i starts from PRNGKey(seed + i); the carry is the packed
    episodes and a reset key, PRNGKey(seed + n). The observations come out apart from the carry (the
    carry is donated to the next step, so nothing outside may hold its memory)."""
    import jax
    import jax.numpy as jnp

    def reset(seed):
        episodes = new_episodes(env, jax.vmap(jax.random.PRNGKey)(seed + jnp.arange(n)))
        return (layout.pack(episodes), jax.random.PRNGKey(seed + n)), episodes[0].obs

    return reset


def batched_step(env, n: int, limit: int, layout: FlatLayout, outputs_layout: FlatLayout):
    """step(carry, actions) -> (carry, (outputs, (qpos, qvel))): one vector step with this module's
    episode semantics (see the module's docstring). `outputs` are DeviceStep's fields packed by
    `outputs_layout`; qpos and qvel are the physics as the step left them, before any reset (what a
    video shows last). Unjitted, to trace inside a larger function too (a scan)."""
    import jax
    import jax.numpy as jnp

    def step(carry, actions):
        packed, key = carry
        states, steps, returns = layout.unpack(packed)
        stepped = jax.vmap(env.step)(states, jnp.clip(actions, -1.0, 1.0))
        steps, returns = steps + 1, returns + stepped.reward
        terminated = stepped.done > 0.5
        truncated = (steps >= limit) & ~terminated
        done = terminated | truncated
        key, reset_key = jax.random.split(key)
        packed = layout.pack((stepped, jnp.where(done, 0, steps), jnp.where(done, 0.0, returns)))

        def restart(packed):
            fresh = layout.pack(new_episodes(env, jax.random.split(reset_key, n)))
            return tuple(jnp.where(done[:, None], f, p) for f, p in zip(fresh, packed))

        # Fresh initial states only where an episode ended (and only computed when one did).
        packed = jax.lax.cond(done.any(), restart, lambda p: p, packed)
        outputs = {
            "obs": layout.unpack(packed)[0].obs,
            "reward": stepped.reward,
            "terminated": terminated,
            "truncated": truncated,
            "final_obs": stepped.obs,
            "episode_return": returns,
            "episode_length": steps,
        }
        physics = stepped.pipeline_state
        return (packed, key), (outputs_layout.pack(outputs), (physics.q, physics.qd))

    return step


def to_jax(tensor: torch.Tensor):
    """A torch tensor as the jitted step's input. On the GPU through DLPack (no copy, no host
    round trip); on the CPU as a numpy view, which JAX takes in with less per-call work than a
    DLPack import."""
    tensor = tensor.detach().contiguous()
    if tensor.device.type == "cpu":
        return tensor.numpy()
    import jax

    return jax.dlpack.from_dlpack(tensor)


def to_torch(array) -> torch.Tensor:
    """A JAX array as a torch tensor on the same device, sharing its memory (read-only by contract:
    JAX arrays are immutable, so nothing writes into it)."""
    return torch.from_dlpack(array)


class MjxVecEnv:
    """`num_envs` copies of one of Brax's MJX envs on the JAX device matching torch's `device`.

    Actions are clipped to [-1, 1], the range of Brax's MJX envs. Sub-env i starts from
    PRNGKey(seed + i); every later reset draws from one key per env, split each step, so a run is
    reproducible from its seed and its state (`get_state`) resumes it exactly.
    """

    capabilities = Capabilities(device_resident=True, saves_state=True, renders=True, replays_physics=True)  # drawn on the host

    def __init__(self, name: str, num_envs: int, max_episode_steps: int | None = None, device: torch.device | str = "cpu", **kwargs):
        self._jax, _ = import_engine()
        self.device = torch.device(device)
        self._jax_device = jax_device(self.device)
        self.name, self.num_envs = name, num_envs
        limit = DEFAULT_EPISODE_STEPS if max_episode_steps is None else max_episode_steps
        self.env, obs_dim = shared_engine_env(name, kwargs)
        self._reset_fn, self._step_fn, self._layout, self._outputs = batched_functions(name, kwargs, num_envs, limit)
        self.info = EnvInfo(
            obs_dim=obs_dim,
            action_dim=int(self.env.action_size),
            action_low=-np.ones(self.env.action_size, dtype=np.float32),
            action_high=np.ones(self.env.action_size, dtype=np.float32),
            max_episode_steps=limit,
        )
        self._carry = None  # (the packed episodes: brax states, steps, episode returns; the reset key), on the device
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
        self._carry, obs = self._reset_fn(self._jax.device_put(np.int32(seed), self._jax_device))
        return to_torch(obs)

    def step_device(self, actions: torch.Tensor) -> DeviceStep:
        self._carry, (outputs, self._stepped_states) = self._step_fn(self._carry, to_jax(actions))
        return DeviceStep(**self._outputs.unpack(tuple(to_torch(x) for x in outputs), torch))

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
    def _episodes(self):
        """The carry's episodes unpacked on the host: (brax states, steps, episode returns) of numpy arrays."""
        packed, _ = self._carry
        return self._layout.unpack(tuple(np.array(p) for p in packed), np)  # copies: a view would keep the next step from donating

    def get_state(self) -> dict[str, Any]:
        """The whole batch of episodes (every array of the Brax states, step counters, running
        returns and the reset key) as numpy arrays, in the leaf order of the tree
        (brax states, steps, episode returns, reset key)."""
        leaves = self._jax.tree_util.tree_leaves(self._episodes())
        return {"leaves": [*leaves, np.array(self._carry[1])]}

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore `get_state()`'s result."""
        jax, layout = self._jax, self._layout
        *saved, key = state["leaves"]
        shapes = layout.leaf_shapes
        if len(saved) != len(shapes) or any(np.shape(s) != shape for s, shape in zip(saved, shapes)) or np.shape(key) != (2,):
            raise UserError(f"the saved MJX env state does not fit this run's {self.num_envs} sub-envs of '{self.name}'")
        packed = layout.pack(layout.treedef.unflatten(saved), np)
        put = lambda x: jax.device_put(x, self._jax_device)
        self._carry = (tuple(put(p) for p in packed), put(np.asarray(key, dtype=np.uint32)))

    def close(self) -> None:
        self._carry = None

    # --- physics states on the host (videos) ---------------------------------------------------
    def physics_states(self) -> tuple[np.ndarray, np.ndarray]:
        """Every sub-env's current joint positions and velocities (MuJoCo's qpos and qvel), as host
        arrays of shape (num_envs, nq) and (num_envs, nv)."""
        states = self._episodes()[0].pipeline_state
        return states.q, states.qd

    def stepped_states(self) -> tuple[np.ndarray, np.ndarray]:
        """`physics_states` as the last step left them, before any reset: for a sub-env whose
        episode ended at that step, its last state (the carry holds the next episode's first)."""
        qpos, qvel = self._stepped_states
        return np.asarray(qpos), np.asarray(qvel)


def describe(name: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The engine env's control period, actuator names and observation size; its observation
    layout is the engine's own, so no element names."""
    env, obs_size = shared_engine_env(name, kwargs)
    return {
        "control_period_s": float(env.dt),
        "action_dim": int(env.action_size),
        "action_names": action_names(env.sys.mj_model),
        "group_sizes": {"policy": obs_size},
        "element_names": {"policy": None},
    }
