"""The Gymnasium backend: MuJoCo tasks (and a user's own `gymnasium.Env`) in Gymnasium's sync or
async vector env with `autoreset_mode=SAME_STEP` (the real final observation is in
`info["final_obs"]`). The reference backend of the Gymnasium tasks: it renders, randomizes the
model per sub-env, appends the privileged group and saves every sub-env's state (exact resume).
"""

from __future__ import annotations

import importlib
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import mujoco
import numpy as np
from gymnasium.envs.mujoco.mujoco_env import MujocoEnv
from gymnasium.vector import AsyncVectorEnv, AutoresetMode, SyncVectorEnv
from gymnasium.wrappers import TimeLimit

from ppo_control.config.errors import EnvWorkerError, UserError
from ppo_control.envs.base import Capabilities, EnvInfo, EpisodeTracker, StepResult, as_arrays
from ppo_control.envs.mujoco_names import action_names, observation_element_names
from ppo_control.envs.observations import PRIVILEGED, DictGroups, Groups, PrivilegedObservation, find_wrapper, observation_groups
from ppo_control.envs.randomization import DomainRandomization, Randomization

# Gymnasium's half_cheetah.xml uses `settotalmass`, deprecated in MuJoCo 4: MuJoCo's default
# handler prints that for every env made and appends it to MUJOCO_LOG.TXT in the working directory.
# It is not the user's to fix, so it is dropped; any other MuJoCo warning still reaches stderr.
_IGNORED_MUJOCO_WARNINGS = ("compiler attribute 'settotalmass' is deprecated",)


def _mujoco_warning(message: str) -> None:
    if not any(text in message for text in _IGNORED_MUJOCO_WARNINGS):
        print(f"MuJoCo warning: {message.strip()}", file=sys.stderr)


mujoco.set_mju_user_warning(_mujoco_warning)


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


def check_box_spaces(obs_space: gym.Space, act_space: gym.Space, env: Any) -> None:
    """Anything but Box observations and actions is refused (and `env` closed)."""
    if not isinstance(obs_space, gym.spaces.Box) or not isinstance(act_space, gym.spaces.Box):
        env.close()
        raise UserError(f"ppo_control needs Box observation and action spaces; got {obs_space} and {act_space}")


def env_info(envs, max_episode_steps: int | None, groups: Groups = ()) -> EnvInfo:
    """Spaces of a vector env as EnvInfo."""
    obs_space, act_space = envs.single_observation_space, envs.single_action_space
    check_box_spaces(obs_space, act_space, envs)
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

    capabilities = Capabilities(saves_state=True, randomizes_model=True, privileged_from_model=True, renders=True)

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
        self.info = env_info(self.envs, spec.max_episode_steps if spec is not None else None, groups)
        self._episodes = EpisodeTracker(num_envs)

    def reset(self, seed: int) -> np.ndarray:
        """Reset every sub-env; sub-env i is seeded with seed + i."""
        obs, _ = self.envs.reset(seed=[seed + i for i in range(self.num_envs)])
        self._episodes.clear()
        return self._as_batch(obs)

    def step(self, actions: np.ndarray) -> StepResult:
        clipped = np.clip(actions, self.info.action_low, self.info.action_high)
        obs, reward, terminated, truncated, infos = self._call_workers(self.envs.step, clipped)
        obs, reward, terminated, truncated, ended = as_arrays(self._as_batch(obs), reward, terminated, truncated)
        final_obs = obs
        if len(ended):
            final_obs = obs.copy()
            for i in ended:
                final_obs[i] = np.asarray(infos["final_obs"][i], dtype=np.float32).reshape(-1)
        episode_returns, episode_lengths = self._episodes.add(reward, ended)
        diagnostics = reward_terms(infos, self.num_envs)
        return StepResult(obs, reward, terminated, truncated, final_obs, episode_returns, episode_lengths, diagnostics)

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


def describe(env_id: str, kwargs: dict[str, Any], max_episode_steps: int | None) -> dict[str, Any]:
    """The task's control period, action size and actuator names, its observation groups, and the
    `policy` element names (where a known layout reproduces the observation), from one fresh env."""
    check_env_id(env_id)
    env = make_env_factory(env_id, kwargs, max_episode_steps)()
    try:
        obs_space, act_space = env.observation_space, env.action_space
        check_box_spaces(obs_space, act_space, env)
        base = env.unwrapped
        model = getattr(base, "model", None)
        groups = dict(env.observation_groups)
        return {
            "control_period_s": float(base.dt) if hasattr(base, "dt") else None,
            "action_dim": int(np.prod(act_space.shape)),
            "action_names": action_names(model) if model is not None else None,
            "group_sizes": groups,
            "element_names": {"policy": observation_element_names(env) if list(groups) == ["policy"] else None},
        }
    finally:
        env.close()


def reward_terms(infos: dict[str, Any], num_envs: int) -> dict[str, np.ndarray]:
    """The `reward_<term>` entries of a vector step's infos as `reward/<term>`, per sub-env. A sub-env
    whose episode ended at this step reports its step's info in `final_info` (SAME_STEP autoreset:
    the top level then holds the reset's info)."""
    sources = [infos, infos.get("final_info") or {}]
    keys = sorted({key for source in sources for key in source if key.startswith("reward_")})
    terms = {}
    for key in keys:
        values = np.zeros(num_envs, dtype=np.float64)
        for source in sources:
            if key in source:
                present = np.asarray(source.get(f"_{key}", np.ones(num_envs, dtype=bool)), dtype=bool)
                values[present] = np.asarray(source[key], dtype=np.float64)[present]
        terms[f"reward/{key[len('reward_') :]}"] = values
    return terms
