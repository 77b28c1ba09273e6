"""Batched MuJoCo stepping for the reference tasks, and the vector env every reference task runs in.

`PhysicsBatch` holds one MjData per sub-env. The sub-envs share one MjModel unless a sub-env is
given its own (`set_model`): a robot's model is large, and a copy per sub-env is needed only where
its physics must differ (randomization). A control period steps every sub-env's physics on a thread
pool (MuJoCo's mj_step releases the GIL), and what the task reads afterwards is gathered into
[num_envs, ...] arrays, so observations and rewards are computed in numpy across sub-envs.

Nothing here calls mj_forward after mj_step: the derived fields (sensors, site frames, actuator
forces) then belong to the start of the last substep while qpos and qvel belong to its end, which
is what envpool's C++ ports read and what their policies were trained on.

`ReferenceVecEnv` is the VecEnv protocol around a `ReferenceTask`: seeding (sub-env i draws from
its own generator seeded with seed + i, as envpool seeds sub-env i with seed + i), the time limit
(truncation wins over termination on the limit's step, as envpool reports it), same-step resets
with the real final observation, episode statistics, and the diagnostics envpool's adapter makes
(reward terms, tracking errors, success measures).

Random streams: `EnvpoolRandom` (the default) is envpool's own, std::mt19937 seeded with seed + i
and libstdc++'s distributions; a task that draws in the C++'s order then replays envpool's episodes
(resets, commands, noise) for the same seed, so an evaluation on the reference is the same episodes
as on envpool and what differs is the simulation alone. `rng="numpy"` gives numpy's generators
(same distributions, other draws).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import mujoco
import numpy as np

from ppo_control.config.errors import UserError
from ppo_control.envs.base import Capabilities, EnvInfo, EpisodeTracker, StepResult, as_arrays, usable_cores
from ppo_control.envs.joystick import tracking_errors, tracking_indices
from ppo_control.envs.randomization import SubEnvRandomizer
from ppo_control.envs.success import success_indices


class EnvpoolRandom:
    """The random stream of one envpool sub-env: std::mt19937(seed), whose outputs numpy's legacy
    RandomState reproduces (same seeding, same generator), through libstdc++'s distributions. Only
    the calls the tasks make, with numpy Generator's names: uniform, random, exponential."""

    def __init__(self, seed: int):
        self._mt = np.random.RandomState(seed % 2**32)

    def _canonical(self, size: int) -> np.ndarray:
        """std::generate_canonical<double, 53>: two 32-bit outputs per double, low word first."""
        words = self._mt.randint(0, 2**32, size=2 * size, dtype=np.uint64).astype(np.float64)
        values = (words[0::2] + words[1::2] * 2.0**32) / 2.0**64
        return np.minimum(values, np.nextafter(1.0, 0.0))  # libstdc++ keeps the result below 1

    def random(self, size: int | None = None):
        """std::uniform_real_distribution<double>(0, 1)."""
        values = self._canonical(1 if size is None else size)
        return float(values[0]) if size is None else values

    def uniform(self, low: float, high: float, size: int | None = None):
        """std::uniform_real_distribution<double>(low, high): canonical * (high - low) + low."""
        values = self._canonical(1 if size is None else size) * (high - low) + low
        return float(values[0]) if size is None else values

    def exponential(self, scale: float = 1.0) -> float:
        """std::exponential_distribution<double>(1 / scale): -log(1 - canonical) / lambda."""
        return float(-np.log(1.0 - self._canonical(1)[0]) / (1.0 / scale))

    def get_state(self) -> dict[str, Any]:
        _, key, position, _, _ = self._mt.get_state()
        return {"key": key.copy(), "position": int(position)}

    def set_state(self, state: dict[str, Any]) -> None:
        self._mt.set_state(("MT19937", np.asarray(state["key"], dtype=np.uint32), int(state["position"])))


def _rng_state(rng) -> dict[str, Any]:
    """A sub-env generator's state as arrays and plain values (a checkpoint's safe loader takes them)."""
    if isinstance(rng, EnvpoolRandom):
        return rng.get_state()
    state = rng.bit_generator.state  # PCG64: 128-bit integers, kept as decimal strings
    return {"pcg64": [str(state["state"]["state"]), str(state["state"]["inc"]), int(state["has_uint32"]), int(state["uinteger"])]}


def _set_rng_state(rng, state: dict[str, Any]) -> None:
    if isinstance(rng, EnvpoolRandom):
        rng.set_state(state)
        return
    value, increment, has_uint32, uinteger = state["pcg64"]
    rng.bit_generator.state = {
        "bit_generator": "PCG64",
        "state": {"state": int(value), "inc": int(increment)},
        "has_uint32": int(has_uint32),
        "uinteger": int(uinteger),
    }


RNGS = ("envpool", "numpy")


class PhysicsBatch:
    """`num_envs` MuJoCo simulations stepped together; sub-env i runs `model(i)` on `data[i]`."""

    def __init__(self, model, num_envs: int, num_threads: int | None = None):
        self.num_envs = num_envs
        self._models = [model] * num_envs
        self.data = [mujoco.MjData(model) for _ in range(num_envs)]
        # Called as start_pose(i, data) on a sub-env whose task has set an episode's first state,
        # before mj_forward: randomization's initial pose noise (randomize.init_pose).
        self.start_pose: Any = None
        threads = max(1, min(num_threads or usable_cores(), num_envs))
        # Contiguous chunks, one per thread: each thread steps its sub-envs one after another.
        self._chunks = [chunk for chunk in np.array_split(np.arange(num_envs), threads) if len(chunk)]
        self._pool = ThreadPoolExecutor(max_workers=threads) if threads > 1 else None

    def model(self, i: int):
        return self._models[i]

    def set_model(self, i: int, model) -> None:
        """Give sub-env i its own model, with the shared model's joints, actuators and sensors (its
        geoms may differ: a copy without the visual ones) and new data for it: call before a reset."""
        shared = self._models[0]
        if (model.nq, model.nv, model.nu, model.nsensordata) != (shared.nq, shared.nv, shared.nu, shared.nsensordata):
            raise ValueError("a sub-env's model must have the structure of the shared model")
        self._models[i] = model
        self.data[i] = mujoco.MjData(model)

    def step(self, ctrl: np.ndarray, substeps: int) -> None:
        """Write each sub-env's controls and advance its physics `substeps` mj_steps."""
        for data, row in zip(self.data, ctrl):
            data.ctrl[:] = row
        mj_step, models, datas = mujoco.mj_step, self._models, self.data

        def run(chunk: np.ndarray) -> None:
            for i in chunk:
                model, data = models[i], datas[i]
                for _ in range(substeps):
                    mj_step(model, data)

        if self._pool is None:
            run(self._chunks[0])
        else:
            for future in [self._pool.submit(run, chunk) for chunk in self._chunks]:
                future.result()

    def forward(self, ids: Sequence[int]) -> None:
        """mj_forward on the sub-envs `ids` after their state was set (a reset), once `start_pose`
        has moved it."""
        for i in ids:
            if self.start_pose is not None:
                self.start_pose(i, self.data[i])
            mujoco.mj_forward(self._models[i], self.data[i])

    def reset(self, i: int) -> Any:
        """mj_resetData on sub-env i; returns its MjData for the caller to fill."""
        mujoco.mj_resetData(self._models[i], self.data[i])
        return self.data[i]

    def get_state(self) -> np.ndarray:
        """Every sub-env's integration state (mjSTATE_INTEGRATION: time, qpos, qvel, act, warmstart,
        controls, applied forces, ...), [num_envs, size]: what the next mj_step starts from."""
        spec = mujoco.mjtState.mjSTATE_INTEGRATION
        states = np.empty((self.num_envs, mujoco.mj_stateSize(self._models[0], spec)))
        for i, data in enumerate(self.data):
            mujoco.mj_getState(self._models[i], data, states[i], spec)
        return states

    def set_state(self, states: np.ndarray) -> None:
        """Restore `get_state()`'s result. The derived fields (sensors, site frames) are not restored:
        the next mj_step computes them before anything reads them."""
        spec = mujoco.mjtState.mjSTATE_INTEGRATION
        if states.shape != (self.num_envs, mujoco.mj_stateSize(self._models[0], spec)):
            raise UserError(f"the saved physics state has shape {list(states.shape)}; this env's is [{self.num_envs}, ...] of its model")
        for i, data in enumerate(self.data):
            mujoco.mj_setState(self._models[i], data, np.ascontiguousarray(states[i], dtype=np.float64), spec)

    def gather(self, name: str, ids: Sequence[int] | None = None) -> np.ndarray:
        """A copy of MjData field `name` of the sub-envs `ids` (all when None), stacked: [len(ids), ...]."""
        datas = self.data if ids is None else [self.data[i] for i in ids]
        return np.stack([getattr(data, name) for data in datas])

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


@dataclass
class TaskStep:
    """One control step of every sub-env, as the task computes it (before any reset)."""

    obs: np.ndarray  # float64 [num_envs, obs_dim], the observation after the step
    reward: np.ndarray  # float32 [num_envs]
    terminated: np.ndarray  # bool [num_envs]: the task's own end (a fall), not the time limit
    terms: dict[str, np.ndarray] = field(default_factory=dict)  # reward term name -> float64 [num_envs]
    diagnostics: dict[str, np.ndarray] = field(default_factory=dict)  # anything else the task reports, float64 [num_envs]


class ReferenceTask(Protocol):
    """A task's logic on a PhysicsBatch: its layout, its resets and its control step."""

    env_id: str
    physics: PhysicsBatch
    groups: tuple[tuple[str, int], ...]
    action_dim: int
    max_episode_steps: int  # the task's own time limit (the spec's default)
    control_period_s: float

    def reset(self, ids: np.ndarray, rngs: Sequence[np.random.Generator]) -> np.ndarray:
        """Start new episodes in sub-envs `ids`; their first observations, float64 [len(ids), obs_dim]."""
        ...

    def physics_model(self) -> Any:
        """A new copy of the task's model for one sub-env's own use (randomization): the same
        dynamics, without what only drawing needs."""
        ...

    def step(self, actions: np.ndarray, rngs: Sequence[np.random.Generator]) -> TaskStep:
        """Apply `actions` (float64 [num_envs, action_dim], already clipped) for one control period."""
        ...

    def get_state(self) -> dict[str, np.ndarray]:
        """The task's own per-sub-env state (commands, counters, previous actions, ...), as arrays."""
        ...

    def set_state(self, state: dict[str, np.ndarray]) -> None: ...


class ReferenceVecEnv:
    """A reference task as a VecEnv, with EnvpoolVecEnv's semantics for the same task: actions clipped
    to [-1, 1], same-step resets, truncation at the time limit, the reward terms as diagnostics."""

    capabilities = Capabilities(saves_state=True, renders=True, replays_physics=True, randomizes_model=True)

    def __init__(self, task: ReferenceTask, max_episode_steps: int | None = None, rng: str = "envpool", randomization=None):
        if rng not in RNGS:
            raise UserError(f"rng={rng}: unknown random stream; valid: {', '.join(RNGS)}")
        self.task = task
        self._rng_kind = rng
        self.num_envs = task.physics.num_envs
        self.max_episode_steps = int(max_episode_steps or task.max_episode_steps)
        ones = np.ones(task.action_dim, dtype=np.float32)
        self.info = EnvInfo(
            obs_dim=sum(size for _, size in task.groups),
            action_dim=task.action_dim,
            action_low=-ones,
            action_high=ones,
            max_episode_steps=self.max_episode_steps,
            groups=task.groups,
        )
        self._rngs: list[Any] = []
        self._steps = np.zeros(self.num_envs, dtype=np.int64)
        self._episodes = EpisodeTracker(self.num_envs)
        self._stepped: tuple[np.ndarray, np.ndarray] | None = None
        self._tracking = tracking_indices(task.env_id, task.groups)
        self._success = success_indices(task.env_id, task.groups)  # a task whose return alone does not say it succeeded
        self._full_model = task.physics.model(0)
        self._policy_size = dict(task.groups)["policy"]  # what the robot measures: where sensor noise goes
        self._randomizers = [] if randomization is None else self._randomize(randomization)

    def _randomize(self, settings) -> list:
        """One SubEnvRandomizer per sub-env, each on its own copy of the model (randomize.*)."""
        physics, ones = self.task.physics, np.ones(self.task.action_dim)
        lean = self.task.physics_model()  # a copy per sub-env: without the visual meshes, it is small
        randomizers = []
        for i in range(self.num_envs):
            model = copy.copy(lean)
            physics.set_model(i, model)
            randomizers.append(SubEnvRandomizer(model, physics.data[i], settings, -ones, ones))
        if settings.init_pose > 0:
            physics.start_pose = lambda i, data: randomizers[i].move_start_pose(data)
        return randomizers

    def _draw_episodes(self, ids) -> None:
        for i in ids:
            if self._randomizers:
                self._randomizers[i].draw_episode()

    def _noisy(self, obs: np.ndarray, ids) -> np.ndarray:
        """Sensor noise (randomize.obs_noise) on the policy group of the sub-envs `ids`' rows of obs."""
        if self._randomizers and self._randomizers[0].settings.obs_noise > 0:
            for row, i in enumerate(ids):
                obs[row, : self._policy_size] += self._randomizers[i].noise(self._policy_size).astype(obs.dtype)
        return obs

    @property
    def control_period_s(self) -> float:
        return self.task.control_period_s

    @property
    def mj_model(self):
        """The task's full MuJoCo model (visual meshes included), for rendering and the controller's
        contract; sub-env i steps `task.physics.model(i)`, its own when randomized."""
        return self._full_model

    def reset(self, seed: int) -> np.ndarray:
        """Reset every sub-env; sub-env i draws from a generator seeded with seed + i, so a reset with
        a seed always starts the same episodes."""
        make = EnvpoolRandom if self._rng_kind == "envpool" else np.random.default_rng
        self._rngs = [make(seed + i) for i in range(self.num_envs)]
        self._steps[:] = 0
        self._episodes.clear()
        everyone = np.arange(self.num_envs)
        for i, randomizer in enumerate(self._randomizers):
            randomizer.seed(seed + i)
        self._draw_episodes(everyone)
        obs = self.task.reset(everyone, self._rngs)
        return self._noisy(obs.astype(np.float32), everyone)

    def step(self, actions: np.ndarray) -> StepResult:
        if not self._rngs:
            raise RuntimeError("reset() must be called before step()")
        clipped = np.clip(np.asarray(actions, dtype=np.float64).reshape(self.num_envs, -1), -1.0, 1.0)
        if self._randomizers:  # action noise, latency and pushes, per sub-env
            clipped = np.stack([randomizer.action(a) for randomizer, a in zip(self._randomizers, clipped)])
        out = self.task.step(clipped, self._rngs)
        self._steps += 1
        truncated = self._steps >= self.max_episode_steps
        terminated = out.terminated & ~truncated
        clean = out.obs.astype(np.float32)
        obs, reward, terminated, truncated, ended = as_arrays(
            self._noisy(clean.copy(), np.arange(self.num_envs)), out.reward, terminated, truncated
        )
        diagnostics = {f"reward/{name}": values.astype(np.float64) for name, values in out.terms.items()} | out.diagnostics
        if self._tracking is not None:  # the command as given, not as a noisy sensor would read it
            diagnostics.update(tracking_errors(clean, self._tracking))
        if self._success is not None:
            diagnostics.update(self._success.measures(clean))
        self._stepped = None
        final_obs = obs
        if len(ended):
            self._stepped = self.physics_states()
            final_obs = obs.copy()
            self._draw_episodes(ended)
            obs[ended] = self._noisy(self.task.reset(ended, self._rngs).astype(np.float32), ended)
            self._steps[ended] = 0
        episode_returns, episode_lengths = self._episodes.add(reward, ended)
        return StepResult(obs, reward, terminated, truncated, final_obs, episode_returns, episode_lengths, diagnostics)

    def physics_states(self) -> tuple[np.ndarray, np.ndarray]:
        """Every sub-env's current qpos and qvel, [num_envs, nq] and [num_envs, nv]."""
        return self.task.physics.gather("qpos"), self.task.physics.gather("qvel")

    def stepped_states(self) -> tuple[np.ndarray, np.ndarray]:
        """`physics_states` as the last step left them, before any reset (a sub-env whose episode
        ended there shows its last state, not the next episode's first)."""
        if self._stepped is None:
            return self.physics_states()
        return self._stepped

    def get_state(self) -> dict[str, Any] | None:
        """Everything needed to continue these episodes exactly: each sub-env's physics, the task's
        state, each random stream, the step counters and the running episode statistics."""
        if not self._rngs:
            return None
        return {
            "physics": self.task.physics.get_state(),
            "task": self.task.get_state(),
            "rngs": [_rng_state(rng) for rng in self._rngs],
            "steps": self._steps.copy(),
            "episode_return": self._episodes.returns.copy(),
            "episode_length": self._episodes.lengths.copy(),
            "randomization": [randomizer.get_state() for randomizer in self._randomizers],
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore `get_state()`'s result into an env of the same task and size (reset once or not)."""
        if len(state["rngs"]) != self.num_envs:
            raise UserError(f"saved env state has {len(state['rngs'])} sub-envs, this run has {self.num_envs}")
        if not self._rngs:
            self.reset(0)  # makes the generators; everything it starts is replaced next
        self.task.physics.set_state(np.asarray(state["physics"]))
        self.task.set_state(state["task"])
        for rng, saved in zip(self._rngs, state["rngs"]):
            _set_rng_state(rng, saved)
        self._steps[:] = state["steps"]
        self._episodes.returns[:] = state["episode_return"]
        self._episodes.lengths[:] = state["episode_length"]
        saved = state.get("randomization") or []
        if len(saved) != len(self._randomizers):
            raise UserError("the saved env state's randomization does not match this run's randomize.* settings")
        for randomizer, randomized in zip(self._randomizers, saved):
            randomizer.set_state(randomized)
        self._stepped = None

    def close(self) -> None:
        self.task.physics.close()
