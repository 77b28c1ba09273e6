"""The envpool backend: envpool's C++ thread pool (sync mode: every step steps all sub-envs).

Two kinds of task run here:
- Gymnasium's MuJoCo v5 tasks, envpool's ports with Gymnasium's observations. Their reference is
  the Gymnasium backend (evaluation and videos run there).
- MuJoCo Playground's robot tasks (Go1, Spot, G1, T1, Panda, LEAP, ...), which exist only here:
  envpool's Dict observation becomes the groups `policy` (`state`) and `privileged`
  (`privileged_state`), and every `reward_<term>` envpool reports in `info` is passed on as a
  per-step diagnostic, with the velocity tracking error on joystick tasks.

envpool only autoresets NEXT_STEP (the step after an episode ends ignores its action and returns
the reset observation with reward 0), so the adapter resets the finished sub-envs explicitly
within the same step. envpool cannot save a sub-env's state, change its model or render it.
"""

from __future__ import annotations

import importlib.util
import re
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import mujoco
import numpy as np

from ppo_control.config.errors import UserError
from ppo_control.envs.base import Capabilities, EnvInfo, EpisodeTracker, StepResult, as_arrays
from ppo_control.envs.joystick import tracking_errors, tracking_indices
from ppo_control.envs.observations import GROUP_OF_KEY, POLICY
from ppo_control.envs.success import success_indices
from ppo_control.robots import physics_assets, playground

# Options of an envpool spec that this package sets itself (or that would break its semantics):
# not for env.kwargs.
MANAGED_OPTIONS = frozenset(
    {
        "num_envs",
        "batch_size",
        "num_threads",
        "max_num_players",
        "thread_affinity_offset",
        "base_path",
        "seed",
        "env_seed",
        "gym_reset_return_info",
        "max_episode_steps",
        "task_name",
        "frame_stack",
    }
)
INSTALL_HINT = "pip install envpool"


def import_envpool():
    try:
        import envpool  # a dependency on Linux x86_64 only (pyproject.toml), missing elsewhere: imported where needed
    except ImportError:
        raise UserError(f"the envpool backend needs envpool, which is not installed; install it with: {INSTALL_HINT}") from None
    return envpool


def accepted_options(env_id: str) -> list[str]:
    """The env.kwargs envpool's `env_id` takes (its spec's config fields, less the managed ones)."""
    spec = import_envpool().make_spec(env_id)
    return [name for name in spec.config._fields if name not in MANAGED_OPTIONS]


def spec_config(env_id: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The resolved options of `env_id` with `kwargs` (envpool's defaults where not given)."""
    return import_envpool().make_spec(env_id, **kwargs).config._asdict()


def check_robot_task(env_id: str, kwargs: dict[str, Any]) -> None:
    """One line for what would make a robot task fail later: its model's asset package missing, or
    an option its spec does not have."""
    task = playground.robot_task(env_id)
    envpool = import_envpool()
    if env_id not in envpool.list_all_envs():
        raise UserError(f"env.id '{env_id}': this envpool ({envpool.__version__}) has no such task; pip install -U envpool")
    module = task.asset_package.replace("-", "_")
    if importlib.util.find_spec(module) is None:
        raise UserError(
            f"task {task.name} needs its robot model from the package {task.asset_package}; "
            f"install it with: pip install {task.asset_package}"
        )
    valid = accepted_options(env_id)
    unknown = sorted(key for key in kwargs if key not in valid)
    if unknown:
        raise UserError(f"env.kwargs.{unknown[0]}: {env_id} has no such option; valid options: {', '.join(valid)}")


# What a pool holds beyond its sub-envs' models and data (threads, queues, the observation buffers).
POOL_MEMORY_MARGIN = 1.1
# envpool's own state per sub-env (its C++ env object, action and state buffers), beyond MuJoCo's
# model and data; tests/robots/test_robots.py checks the estimate against a real pool's growth.
ENVPOOL_SUB_ENV_BYTES = 256 * 1024


def physics_base_path(env_id: str) -> str:
    """The base_path a robot task's pools load their model from: the physics-only copy of the asset
    tree (physics_assets.py). envpool gives every sub-env its own copy of the model, and the
    original's meshes and textures would be most of the pool's memory."""
    task = playground.robot_task(env_id)
    original = import_envpool().make_spec(env_id).config.base_path
    try:
        return physics_assets.base_path(task, original)
    except OSError as exc:  # no writable cache: the full model works, with more memory per sub-env
        warnings.warn(f"{task.name}: could not write the physics-only model ({exc}); using the full one", stacklevel=2)
        return original


def sub_env_bytes(env_id: str) -> int:
    """The memory of one sub-env of a robot task's pool: its own copy of the (physics-only) MuJoCo
    model, its data, and envpool's share."""
    task = playground.robot_task(env_id)
    model = playground.load_model(task, physics_base_path(env_id))
    data = mujoco.MjData(model)
    if task.default_keyframe:
        mujoco.mj_resetDataKeyframe(model, data, model.key(task.default_keyframe).id)
    for _ in range(20):  # the arena is reserved whole and used as contacts need it: count what stepping uses
        mujoco.mj_step(model, data)
    return int(model.nbuffer + data.nbuffer + data.maxuse_arena + ENVPOOL_SUB_ENV_BYTES)


def available_memory_bytes() -> int | None:
    """MemAvailable of /proc/meminfo (None where there is none: not Linux)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def check_pool_memory(env_id: str, n_train: int, n_eval: int) -> None:
    """One line, before anything is built, where the training and evaluation pools of a robot task
    would not fit in the memory this machine has free: the out-of-memory killer would end the run
    minutes in, without a word."""
    available = available_memory_bytes()
    if available is None:
        return
    per_env = sub_env_bytes(env_id) * POOL_MEMORY_MARGIN
    if (n_train + n_eval) * per_env <= available:
        return
    fits = int(available // per_env) - n_eval
    advice = f"use env.n_envs={fits} or fewer" if fits >= 1 else "free memory or use a machine with more"
    raise UserError(
        f"env.n_envs={n_train}: {env_id}'s pools need about {(n_train + n_eval) * per_env / 1e9:.1f} GB "
        f"({per_env / 1e6:.0f} MB per sub-env, {n_train} for training and {n_eval} for evaluation; envpool copies "
        f"the robot's model into every sub-env) and this machine has {available / 1e9:.1f} GB available; {advice}"
    )


class EnvpoolVecEnv:
    """envpool's vector env, same protocol and semantics as GymnasiumVecEnv. Sub-env i is seeded
    with seed + i, as with Gymnasium; envpool fixes seeds at construction, so a reset with a new
    seed rebuilds the pool. A resumed run starts new episodes (no state capture)."""

    capabilities = Capabilities()

    def __init__(self, env_id: str, num_envs: int, num_threads: int, kwargs: dict[str, Any], max_episode_steps: int | None):
        envpool = import_envpool()
        kwargs, self._keep = observation_cut(env_id, kwargs)
        if playground.is_robot_task(env_id):
            kwargs = {**kwargs, "base_path": physics_base_path(env_id)}
        self._make = lambda seed: envpool.make_gymnasium(
            env_id,
            num_envs=num_envs,
            batch_size=num_envs,
            num_threads=num_threads,
            seed=seed,
            **({} if max_episode_steps is None else {"max_episode_steps": max_episode_steps}),
            **kwargs,
        )
        # The pool is built at the first reset, with that reset's seed: envpool gives every sub-env
        # its own copy of the MuJoCo model, so a pool of a robot task is large and a second one,
        # built only to be replaced, can exhaust the memory.
        self.envs = None
        spec = envpool.make_spec(env_id, **kwargs, **({} if max_episode_steps is None else {"max_episode_steps": max_episode_steps}))
        self.num_envs = num_envs
        self._keys, groups = self._group_layout(spec.gymnasium_observation_space)
        act_space = spec.gymnasium_action_space
        self.info = EnvInfo(
            obs_dim=sum(size for _, size in groups),
            action_dim=int(np.prod(act_space.shape)),
            action_low=act_space.low.astype(np.float32).reshape(-1),
            action_high=act_space.high.astype(np.float32).reshape(-1),
            max_episode_steps=int(spec.config.max_episode_steps),
            groups=groups,
        )
        self._tracking = tracking_indices(env_id, groups)
        self._success = success_indices(env_id, groups)
        self._episodes = EpisodeTracker(num_envs)

    def _group_layout(self, space) -> tuple[list[str] | None, tuple[tuple[str, int], ...]]:
        """(envpool's observation keys in group order, or None for a Box; the groups)."""
        spaces = getattr(space, "spaces", None)
        if spaces is None:
            size = len(self._keep) if self._keep is not None else int(np.prod(space.shape))
            return None, ((POLICY, size),)
        keys = [key for key in GROUP_OF_KEY if key in spaces]
        if "state" not in keys or len(keys) != len(spaces):
            raise UserError(f"envpool's observation {sorted(spaces)} does not map onto the groups {list(GROUP_OF_KEY.values())}")
        return keys, tuple((GROUP_OF_KEY[key], int(np.prod(spaces[key].shape))) for key in keys)

    def reset(self, seed: int) -> np.ndarray:
        """Reset every sub-env; sub-env i is seeded with seed + i, so a reset with a seed always
        starts the same episodes (an evaluation repeats). envpool takes seeds only at
        construction: every reset builds the pool anew (the previous one is closed first)."""
        self.close()
        self.envs = self._make(seed)
        obs, _ = self.envs.reset()
        self._episodes.clear()
        return self._as_batch(obs, self.num_envs)

    def step(self, actions: np.ndarray) -> StepResult:
        clipped = np.clip(actions, self.info.action_low, self.info.action_high).astype(np.float64)
        obs, reward, terminated, truncated, info = self.envs.step(clipped)
        obs, reward, terminated, truncated, ended = as_arrays(self._as_batch(obs, self.num_envs), reward, terminated, truncated)
        diagnostics = self._diagnostics(obs, info)
        final_obs = obs
        if len(ended):
            # Reset now rather than let envpool do it on the next step (which would drop that
            # step's action and return a zero reward): the next step is a real one.
            final_obs = obs.copy()
            reset_obs, reset_info = self.envs.reset(ended.astype(np.int32))
            obs[reset_info["env_id"]] = self._as_batch(reset_obs, len(ended))
        episode_returns, episode_lengths = self._episodes.add(reward, ended)
        return StepResult(obs, reward, terminated, truncated, final_obs, episode_returns, episode_lengths, diagnostics)

    def _diagnostics(self, obs: np.ndarray, info: dict[str, Any]) -> dict[str, np.ndarray]:
        """The reward terms envpool reports, the tracking error of a joystick task and the success
        measures of a task that has them, per sub-env."""
        out = {
            f"reward/{key[len('reward_') :]}": np.asarray(value, dtype=np.float64)
            for key, value in info.items()
            if key.startswith("reward_")
        }
        if self._tracking is not None:
            out.update(tracking_errors(obs, self._tracking))
        if self._success is not None:
            out.update(self._success.measures(obs))
        return out

    def get_state(self) -> None:
        return None  # envpool has no state capture

    def set_state(self, state: dict[str, Any]) -> None:
        raise UserError("the envpool backend cannot restore sub-env states; resume with env.backend=gymnasium")

    def close(self) -> None:
        if self.envs is not None:
            self.envs.close()
            self.envs = None

    def _as_batch(self, obs, n: int) -> np.ndarray:
        if self._keys is not None:
            return np.concatenate([np.asarray(obs[key], dtype=np.float32).reshape(n, -1) for key in self._keys], axis=1)
        batch = np.asarray(obs, dtype=np.float32).reshape(n, -1)
        return batch if self._keep is None else batch[:, self._keep]


_INCLUDE_OPTION = re.compile(r"include_(\w+)_in_observation")


def observation_cut(env_id: str, kwargs: dict[str, Any]) -> tuple[dict[str, Any], np.ndarray | None]:
    """Splits env.kwargs into envpool's own options and the observation elements to keep (None: all).

    Gymnasium's v5 tasks can leave parts out of the observation (Humanoid's
    `include_cfrc_ext_in_observation: false`); envpool always computes every part and has no such
    options. So the adapter cuts the parts out itself, at the offsets Gymnasium's
    `observation_structure` gives, and both backends produce the same observation.
    """
    accepted = set(import_envpool().make_spec(env_id).config._fields)  # the spec's config is a namedtuple
    options = {key: value for key, value in kwargs.items() if _INCLUDE_OPTION.fullmatch(key) and key not in accepted}
    if not options:
        return kwargs, None
    own = {key: value for key, value in kwargs.items() if key not in options}
    reference = gym.make(env_id, **own, **dict.fromkeys(options, True)).unwrapped  # every part, Gymnasium's layout
    structure = dict(getattr(reference, "observation_structure", {}))
    full_size = reference.observation_space.shape[0]
    reference.close()
    structure.pop("skipped_qpos", None)  # not part of the observation
    unknown = sorted(key for key in options if _INCLUDE_OPTION.fullmatch(key)[1] not in structure)
    if unknown or sum(structure.values()) != full_size:
        raise TypeError(f"the observation parts of {env_id} are not known for {unknown or sorted(options)}")
    keep, start = [], 0
    for part, size in structure.items():  # in observation order
        if options.get(f"include_{part}_in_observation", True):
            keep.extend(range(start, start + size))
        start += size
    return own, np.asarray(keep)


def unavailable_reason(env_id: str, kwargs: dict[str, Any]) -> str | None:
    """Why the envpool backend cannot run the Gymnasium task `env_id` (None when it can)."""
    try:
        import envpool  # Linux x86_64 only: see import_envpool
    except ImportError:
        return f"envpool is not installed ({INSTALL_HINT})"
    if env_id not in envpool.list_all_envs():
        return f"envpool has no '{env_id}' (it provides the MuJoCo v5 tasks, e.g. HalfCheetah-v5)"
    try:
        kwargs, _ = observation_cut(env_id, kwargs)
        envpool.make_spec(env_id, **kwargs)
    except TypeError as exc:  # envpool names its options after Gymnasium's, but not all of them
        return f"envpool's {env_id} does not accept env.kwargs {sorted(kwargs)} ({exc})"
    return None


def describe(env_id: str, kwargs: dict[str, Any]) -> dict[str, Any]:
    """A robot task's controller facts: control period, joints in action order, every group's
    element names, and how an action becomes a PD target (default pose, scale, gains)."""
    task = playground.robot_task(env_id)
    check_robot_task(env_id, kwargs)
    robot = playground.controller_fields(task, spec_config(env_id, kwargs))
    names = {GROUP_OF_KEY.get(key, POLICY): list(elements) for key, elements in task.groups.items()}
    return {
        "control_period_s": robot["control_period_s"],
        "action_dim": len(task.joint_names),
        "action_names": list(task.joint_names),
        "group_sizes": {group: len(elements) for group, elements in names.items()},
        "element_names": names,
        "robot": robot,
    }
