"""Vectorized environments behind one small protocol (numpy in, numpy out; no torch here).

Time limits are kept apart from terminations end to end: a step that ends an episode returns the
first observation of the next episode *and* the real final observation (`final_obs`), which is
what a truncated step bootstraps from. The Gymnasium backend gets this from
`autoreset_mode=SAME_STEP`; envpool only autoresets NEXT_STEP (the step after an episode ends
ignores its action and returns the reset observation with reward 0), so its adapter resets the
finished sub-envs explicitly within the same step. Either way no transition spans a reset.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import re
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import gymnasium as gym
import mujoco
import numpy as np
from gymnasium.envs.mujoco.mujoco_env import MujocoEnv
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv
from gymnasium.wrappers import TimeLimit
from omegaconf import OmegaConf

from ppo_control.errors import EnvWorkerError, UserError
from ppo_control.observations import POLICY, PRIVILEGED, DictGroups, Groups, PrivilegedObservation, find_wrapper, observation_groups
from ppo_control.randomization import DomainRandomization, Randomization

# Gymnasium's half_cheetah.xml uses `settotalmass`, deprecated in MuJoCo 4: MuJoCo's default
# handler prints that for every env made and appends it to MUJOCO_LOG.TXT in the working directory.
# It is not the user's to fix, so it is dropped; any other MuJoCo warning still reaches stderr.
_IGNORED_MUJOCO_WARNINGS = ("compiler attribute 'settotalmass' is deprecated",)


def _mujoco_warning(message: str) -> None:
    if not any(text in message for text in _IGNORED_MUJOCO_WARNINGS):
        print(f"MuJoCo warning: {message.strip()}", file=sys.stderr)


mujoco.set_mju_user_warning(_mujoco_warning)


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


class VecEnv(Protocol):
    num_envs: int
    info: EnvInfo

    def reset(self, seed: int) -> np.ndarray: ...

    def step(self, actions: np.ndarray) -> StepResult: ...

    def close(self) -> None: ...


def _mjdata_arrays(data: mujoco.MjData) -> dict[str, np.ndarray]:
    names = [n for n in dir(data) if not n.startswith("_")]
    return {n: v for n in names if isinstance(v := getattr(data, n), np.ndarray) and v.size}


class ResumableEnv(gym.Wrapper):
    """Exposes a sub-env's complete state as `sim_state`, so a resumed run continues its episodes
    exactly: MuJoCo's full integration state (mj_getState), the time-limit counter and the env RNG.
    Envs that are not MuJoCo envs report None (their episodes restart on resume)."""

    @property
    def observation_groups(self) -> Groups:
        return observation_groups(self)

    @property
    def sim_state(self) -> dict[str, Any] | None:
        base = self.env.unwrapped
        if not isinstance(base, MujocoEnv):
            return None
        time_limit = find_wrapper(self.env, TimeLimit)
        randomization = find_wrapper(self.env, DomainRandomization)
        return {
            "randomization": None if randomization is None else randomization.get_randomization_state(),
            # Every array of mjData: the integration state and also the derived quantities (body
            # positions, contact forces) that the env's next step reads before it integrates.
            "data": {name: array.copy() for name, array in _mjdata_arrays(base.data).items()},
            "time": base.data.time,
            "elapsed_steps": None if time_limit is None else time_limit._elapsed_steps,
            "rng": base.np_random.bit_generator.state,
        }

    @sim_state.setter
    def sim_state(self, state: dict[str, Any]) -> None:
        base = self.env.unwrapped
        randomization = find_wrapper(self.env, DomainRandomization)
        if randomization is not None:  # the model's randomized parameters first, then the data computed with them
            randomization.set_randomization_state(state["randomization"])
        arrays = _mjdata_arrays(base.data)
        for name, saved in state["data"].items():
            target = arrays.get(name)
            if target is not None and target.shape == saved.shape:
                np.copyto(target, saved)
        base.data.time = state["time"]
        time_limit = find_wrapper(self.env, TimeLimit)
        if time_limit is not None:
            time_limit._elapsed_steps = state["elapsed_steps"]
        base.np_random.bit_generator.state = state["rng"]


def make_env_factory(
    env_id: str,
    kwargs: dict[str, Any] | None = None,
    max_episode_steps: int | None = None,
    render_mode: str | None = None,
    randomization: Randomization | None = None,
    privileged: bool = False,
) -> Callable[[], gym.Env]:
    """A zero-argument constructor for one env: `env_id` is a registered id or `package.module:EnvClass`.
    Wrapped, inside the state-capturing wrapper: with `randomization`, in DomainRandomization; a Dict
    observation flattened into groups; with `privileged`, the privileged group appended (unless the
    env's Dict already has one)."""
    kwargs = dict(kwargs or {})
    if render_mode is not None:
        kwargs["render_mode"] = render_mode
    if ":" in env_id:
        spec = gym.envs.registration.EnvSpec(id=env_id.split(":")[-1], entry_point=env_id, max_episode_steps=max_episode_steps)
        make = lambda: gym.make(spec, **kwargs)  # noqa: E731
    else:
        limit = {} if max_episode_steps is None else {"max_episode_steps": max_episode_steps}
        make = lambda: gym.make(env_id, **limit, **kwargs)  # noqa: E731

    def build() -> gym.Env:
        env = make()
        if randomization is not None:
            env = DomainRandomization(env, randomization)
        if isinstance(env.observation_space, gym.spaces.Dict):
            env = DictGroups(env)
        if privileged and PRIVILEGED not in dict(observation_groups(env)):
            env = PrivilegedObservation(env)
        return ResumableEnv(env)

    return build


def check_env_id(env_id: str) -> None:
    """Fail early, in this process, with a clear message when an env id cannot be resolved."""
    if ":" in env_id:
        module_name, _, attr = env_id.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise UserError(f"env.id '{env_id}': cannot import module '{module_name}' ({exc})") from None
        if not hasattr(module, attr):
            raise UserError(f"env.id '{env_id}': module '{module_name}' has no attribute '{attr}'") from None
        return
    try:
        gym.spec(env_id)
    except gym.error.Error as exc:
        raise UserError(
            f"env.id '{env_id}' is not a registered Gymnasium id ({exc}); use e.g. HalfCheetah-v5 or package.module:EnvClass"
        ) from None


def _env_info(envs, max_episode_steps: int | None, groups: Groups = ()) -> EnvInfo:
    """Spaces of a vector env as EnvInfo; anything but Box observations and actions is refused."""
    obs_space, act_space = envs.single_observation_space, envs.single_action_space
    if not isinstance(obs_space, gym.spaces.Box) or not isinstance(act_space, gym.spaces.Box):
        envs.close()
        raise UserError(f"ppo_control needs Box observation and action spaces; got {obs_space} and {act_space}")
    return EnvInfo(
        obs_dim=int(np.prod(obs_space.shape)),
        action_dim=int(np.prod(act_space.shape)),
        action_low=act_space.low.astype(np.float32).reshape(-1),
        action_high=act_space.high.astype(np.float32).reshape(-1),
        max_episode_steps=max_episode_steps,
        groups=groups,
    )


class GymnasiumVecEnv:
    """Gymnasium sync/async vector env with SAME_STEP autoreset, action clipping and episode statistics."""

    def __init__(self, factory: Callable[[], gym.Env], num_envs: int, vectorization: str = "sync"):
        env_fns = [factory] * num_envs
        try:
            if vectorization == "async":
                self.envs = AsyncVectorEnv(env_fns, autoreset_mode=AutoresetMode.SAME_STEP)
            else:
                self.envs = SyncVectorEnv(env_fns, autoreset_mode=AutoresetMode.SAME_STEP)
        except UserError:
            raise
        except Exception as exc:  # env constructors raise anything; report it as one line
            raise UserError(f"cannot create the environment: {type(exc).__name__}: {exc}") from None
        self.num_envs = num_envs
        spec = self.envs.envs[0].spec if isinstance(self.envs, SyncVectorEnv) else None
        groups = tuple(tuple(group) for group in self.envs.get_attr("observation_groups")[0])
        self.info = _env_info(self.envs, spec.max_episode_steps if spec is not None else None, groups)
        self._episodes = _EpisodeTracker(num_envs)

    def reset(self, seed: int) -> np.ndarray:
        """Reset every sub-env; sub-env i is seeded with seed + i."""
        obs, _ = self.envs.reset(seed=[seed + i for i in range(self.num_envs)])
        self._episodes.clear()
        return self._as_batch(obs)

    def step(self, actions: np.ndarray) -> StepResult:
        clipped = np.clip(actions, self.info.action_low, self.info.action_high)
        obs, reward, terminated, truncated, infos = self._call_workers(self.envs.step, clipped)
        obs, reward, terminated, truncated, ended = _as_arrays(self._as_batch(obs), reward, terminated, truncated)
        final_obs = obs
        if len(ended):
            final_obs = obs.copy()
            for i in ended:
                final_obs[i] = np.asarray(infos["final_obs"][i], dtype=np.float32).reshape(-1)
        episode_returns, episode_lengths = self._episodes.add(reward, ended)
        return StepResult(obs, reward, terminated, truncated, final_obs, episode_returns, episode_lengths)

    def _describe_worker_failure(self, exc: Exception) -> str:
        deadline = time.monotonic() + 2.0  # a killed worker's pipe breaks a moment before it is reaped
        while not (dead := [(i, p) for i, p in enumerate(self.envs.processes) if not p.is_alive()]) and time.monotonic() < deadline:
            time.sleep(0.05)
        if dead:
            i, process = dead[0]
            what = f"the worker process of sub-env {i} (pid {process.pid}) died with exit code {process.exitcode}"
        else:
            what = f"a sub-env raised {type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        return f"{what}; training stopped, the last checkpoint is kept"

    def _call_workers(self, method: Callable, *args: Any) -> Any:
        """Call the vector env; with async workers, a worker's death or exception becomes one
        EnvWorkerError naming it (it would otherwise surface as a bare pipe error)."""
        try:
            return method(*args)
        except Exception as exc:
            if isinstance(self.envs, AsyncVectorEnv):
                raise EnvWorkerError(self._describe_worker_failure(exc)) from None
            raise

    def get_state(self) -> dict[str, Any] | None:
        """Everything needed to continue these episodes exactly, or None if a sub-env can't tell."""
        sub_states = self._call_workers(self.envs.get_attr, "sim_state")
        if any(state is None for state in sub_states):
            return None
        return {
            "sub_envs": list(sub_states),
            "episode_return": self._episodes.returns.copy(),
            "episode_length": self._episodes.lengths.copy(),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore `get_state()`'s result. The envs must have been reset once (wrappers insist)."""
        if len(state["sub_envs"]) != self.num_envs:
            raise UserError(f"saved env state has {len(state['sub_envs'])} sub-envs, this run has {self.num_envs}")
        self.envs.set_attr("sim_state", list(state["sub_envs"]))
        self._episodes.returns[:] = state["episode_return"]
        self._episodes.lengths[:] = state["episode_length"]

    def close(self) -> None:
        if isinstance(self.envs, AsyncVectorEnv):
            with warnings.catch_warnings():  # gymnasium warns about the very worker we already reported
                warnings.simplefilter("ignore")
                self.envs.close(terminate=True)  # a dead or stuck worker must not make shutdown hang
        else:
            self.envs.close()

    def _as_batch(self, obs: np.ndarray) -> np.ndarray:
        return np.asarray(obs, dtype=np.float32).reshape(self.num_envs, -1)


def _as_arrays(obs: np.ndarray, reward, terminated, truncated) -> tuple[np.ndarray, ...]:
    """A vector env's step output in the protocol's dtypes, plus the indices of the ended episodes."""
    reward = np.asarray(reward, dtype=np.float32)
    terminated = np.asarray(terminated, dtype=bool)
    truncated = np.asarray(truncated, dtype=bool)
    return obs, reward, terminated, truncated, np.flatnonzero(terminated | truncated)


class _EpisodeTracker:
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


class EnvpoolVecEnv:
    """envpool's C++ thread pool (sync mode: every step steps all sub-envs), same protocol and
    semantics as GymnasiumVecEnv. Sub-env i is seeded with seed + i, as with Gymnasium; envpool
    fixes seeds at construction, so a reset with a new seed rebuilds the pool.

    envpool cannot save or restore a sub-env's state: a resumed run starts new episodes.
    """

    def __init__(self, env_id: str, num_envs: int, num_threads: int, kwargs: dict[str, Any], max_episode_steps: int | None):
        import envpool

        kwargs, self._keep = envpool_observation_cut(env_id, kwargs)
        self._make = lambda seed: envpool.make_gymnasium(
            env_id,
            num_envs=num_envs,
            batch_size=num_envs,
            num_threads=num_threads,
            seed=seed,
            **({} if max_episode_steps is None else {"max_episode_steps": max_episode_steps}),
            **kwargs,
        )
        self._seed = 0
        self.envs = self._make(self._seed)
        self.num_envs = num_envs
        self.info = _env_info(self.envs, int(self.envs.config["max_episode_steps"]))
        if self._keep is not None:
            self.info = dataclasses.replace(self.info, obs_dim=len(self._keep), groups=((POLICY, len(self._keep)),))
        self._episodes = _EpisodeTracker(num_envs)

    def reset(self, seed: int) -> np.ndarray:
        """Reset every sub-env; sub-env i is seeded with seed + i."""
        if seed != self._seed:
            self.envs.close()
            self.envs, self._seed = self._make(seed), seed
        obs, _ = self.envs.reset()
        self._episodes.clear()
        return self._as_batch(obs)

    def step(self, actions: np.ndarray) -> StepResult:
        clipped = np.clip(actions, self.info.action_low, self.info.action_high).astype(np.float64)
        obs, reward, terminated, truncated, _ = self.envs.step(clipped)
        obs, reward, terminated, truncated, ended = _as_arrays(self._as_batch(obs), reward, terminated, truncated)
        final_obs = obs
        if len(ended):
            # Reset now rather than let envpool do it on the next step (which would drop that
            # step's action and return a zero reward): the next step is a real one.
            final_obs = obs.copy()
            reset_obs, reset_info = self.envs.reset(ended.astype(np.int32))
            obs[reset_info["env_id"]] = self._as_batch(reset_obs, len(ended))
        episode_returns, episode_lengths = self._episodes.add(reward, ended)
        return StepResult(obs, reward, terminated, truncated, final_obs, episode_returns, episode_lengths)

    def get_state(self) -> None:
        return None  # envpool has no state capture

    def set_state(self, state: dict[str, Any]) -> None:
        raise UserError("the envpool backend cannot restore sub-env states; resume with env.backend=gymnasium")

    def close(self) -> None:
        self.envs.close()

    def _as_batch(self, obs: np.ndarray, n: int | None = None) -> np.ndarray:
        batch = np.asarray(obs, dtype=np.float32).reshape(self.num_envs if n is None else n, -1)
        return batch if self._keep is None else batch[:, self._keep]


_INCLUDE_OPTION = re.compile(r"include_(\w+)_in_observation")


def envpool_observation_cut(env_id: str, kwargs: dict[str, Any]) -> tuple[dict[str, Any], np.ndarray | None]:
    """Splits env.kwargs into envpool's own options and the observation elements to keep (None: all).

    Gymnasium's v5 tasks can leave parts out of the observation (Humanoid's
    `include_cfrc_ext_in_observation: false`); envpool always computes every part and has no such
    options. So the adapter cuts the parts out itself, at the offsets Gymnasium's
    `observation_structure` gives, and both backends produce the same observation.
    """
    import envpool

    accepted = set(envpool.make_spec(env_id).config._fields)  # the spec's config is a namedtuple
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


def envpool_unavailable_reason(env_id: str, kwargs: dict[str, Any]) -> str | None:
    """Why the envpool backend cannot run `env_id` (None when it can)."""
    try:
        import envpool
    except ImportError:
        return "envpool is not installed (pip install envpool)"
    if env_id not in envpool.list_all_envs():
        return f"envpool has no '{env_id}' (it provides the MuJoCo v5 tasks, e.g. HalfCheetah-v5)"
    try:
        kwargs, _ = envpool_observation_cut(env_id, kwargs)
        envpool.make_spec(env_id, **kwargs)
    except TypeError as exc:  # envpool names its options after Gymnasium's, but not all of them
        return f"envpool's {env_id} does not accept env.kwargs {sorted(kwargs)} ({exc})"
    return None


def usable_cores() -> int:
    """The CPU cores this process may use: its affinity set, shared evenly between the processes a
    launcher (torchrun) started on this machine."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // int(os.environ.get("LOCAL_WORLD_SIZE", "1")))


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

    `backend` overrides env_cfg.backend (evaluation and videos use Gymnasium, except for MJX tasks:
    those exist only there). `device`: where an mjx backend simulates (torch's name). When envpool
    cannot run the task, or `randomization` is on (envpool cannot change a model's parameters),
    this says why on stderr and falls back to Gymnasium.
    """
    env_id = str(env_cfg.id)
    kwargs = OmegaConf.to_container(env_cfg.kwargs) if env_cfg.kwargs else {}
    n = env_cfg.n_envs if num_envs is None else num_envs
    backend = backend or env_cfg.backend
    if backend == "mjx":  # simulated where `device` is (the config refuses what it cannot honour)
        from ppo_control.mjx_env import MjxVecEnv

        return MjxVecEnv(env_id, n, env_cfg.max_episode_steps, device or "cpu", **kwargs)
    check_env_id(env_id)
    if backend == "envpool" and render_mode is None:
        reason = "randomize.* needs per-sub-env MuJoCo models, which envpool does not expose" if randomization else None
        reason = reason or ("the privileged observation group reads MuJoCo's state, which envpool does not expose" if privileged else None)
        reason = reason or envpool_unavailable_reason(env_id, kwargs)
        if reason is None:
            threads = env_cfg.num_threads or usable_cores()
            return EnvpoolVecEnv(env_id, n, min(threads, n), kwargs, env_cfg.max_episode_steps)
        print(f"env.backend=envpool: {reason}; using the gymnasium backend instead", file=sys.stderr, flush=True)
    factory = make_env_factory(env_id, kwargs, env_cfg.max_episode_steps, render_mode, randomization, privileged)
    return GymnasiumVecEnv(factory, n, env_cfg.vectorization)
