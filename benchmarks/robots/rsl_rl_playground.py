"""rsl_rl's PPO on MuJoCo Playground's robot tasks (envpool's C++ ports, or our MuJoCo references of
them and their named variants): an outside anchor for ours.

    pip install -r benchmarks/requirements-rsl_rl.txt   # rsl-rl-lib (benchmark only, not a dependency)
    python -m benchmarks.robots.rsl_rl_playground --task Go1JoystickFlatTerrain --steps 5000000 --seed 0 \\
        --num-envs 32 --threads 1 --out benchmarks/results/robots-vs-rsl_rl/rsl_rl-Go1JoystickFlatTerrain-s0
    python -m benchmarks.robots.rsl_rl_playground --task-file Go1JoystickFlatTerrainTrot --steps 10000000 \\
        --seed 0 --num-envs 256 --threads 1 --eval-episodes 16 --out <dir>

The env: `--task` (default Go1JoystickFlatTerrain) on `--backend envpool` (default: envpool's port
with its default options) or `--backend mujoco` (our MuJoCo reference, `ppo_control.envs.mujoco`);
or `--task-file <name or path>`, a ppo_control task file, whose composed env.id, env.backend,
env.kwargs and env.max_episode_steps are used as ours trains on them. A task file on the reference
can name a variant only the reference runs (tasks/Go1JoystickFlatTerrainTrot.yaml: a trot clock in
both observation groups and the feet_phase reward term), so rsl_rl trains on exactly our env. A task
file that randomizes the robot (randomize.*) is refused: that is not carried over here. The
Playground settings are those of env.id's task (the Trot variant: Go1JoystickFlatTerrain's).

Settings: exactly those MuJoCo Playground publishes for rsl_rl (playground 0.2.0,
`mujoco_playground/config/locomotion_params.py:rsl_rl_config` as wired by `learning/train_rsl_rl.py`:
obs groups actor = `state`, critic = `privileged_state`), translated to rsl-rl-lib 5's config schema
(Playground's file is written for rsl-rl-lib 3: `policy: ActorCritic` + `empirical_normalization`
became `actor`/`critic` MLPModels with `obs_normalization`, `init_noise_std` a GaussianDistribution's
`init_std`). Only two things are scaled: the number of parallel envs (Playground runs 4096; here
`--num-envs`, so a rollout is num_envs x 24 steps and, with Playground's 4 minibatches, a minibatch is
num_envs x 6 samples) and the iteration count (ceil(steps / (num_envs x 24)) instead of
`max_iterations`). config.json records each setting, Playground's value and what was scaled.

The env wrapper (RslRlEnv, rsl_rl's VecEnv API over a Stepper of either backend): observations are a
TensorDict with the groups `state` and `privileged_state` (the reference's `policy` and `privileged`
groups, a variant's extra elements included); `dones` = terminated | truncated; `extras["time_outs"]` =
truncated & ~terminated, which rsl_rl bootstraps by adding gamma * V(s_t) to the last reward (the
value of the observation the last action was taken in: rsl_rl keeps no final observation). envpool
autoresets NEXT_STEP (the step after an episode ends ignores its action), so the sub-envs that ended
are reset within the same step (`env.reset(ids)`, written back in `info["env_id"]` order) and every
step is a real one, as in ppo_control; the reference resets them within the step itself, and
truncates at the time limit as envpool does. Both share one bookkeeping of the ended episodes.
Actions are clipped to [-1, 1] (as Playground's wrapper does).

Rows in `--out`/metrics.jsonl:
- one per rsl_rl iteration (rollout + update): `step` (env steps so far), `time_s` (since launch,
  env creation included), `train_time_s` (time_s less evaluation time), `episode_return` /
  `episode_length` (mean raw return and length of the episodes that ended in the iteration; null if
  none), `tracking_error_lin` (mean over the iteration's steps and sub-envs of
  |command (vx, vy) - clean local base linvel (x, y)|, m/s), `tracking_error_ang` (mean
  |command wz - clean gyro z|, rad/s), `reward/<term>` (means of envpool's `info["reward_<term>"]`,
  or the reference's `reward/<term>`), where the env reports a variant's task reward (the reference's
  `task_reward`, the task's own reward without the variant's terms) `task_reward` (its per-step
  mean) and `episode_task_return` (the ended episodes' mean return of it), and rsl_rl's losses,
  learning rate and mean action std.
- an evaluation row every `--eval-every` env steps and at the end (after that iteration's update):
  the deterministic policy (the actor's mean with its normalizer, `runner.get_inference_policy()`)
  over `--eval-episodes` full episodes on a new env of the same spec seeded seed + 1_000_000 (so every
  evaluation sees the same episodes), min(episodes, 16) sub-envs, each running its own quota of
  episodes: `eval_return` (mean raw return), `eval_return_std`, `eval_episode_length`,
  `eval_tracking_error_lin/_ang` (per-episode means of the per-step errors, averaged over the
  episodes), `eval_falls` (episodes that ended by termination before the time limit),
  `eval_task_return` (with a variant's task reward: the episodes' mean return of it), with `step`,
  `time_s` and `train_time_s` at the evaluation's start and `eval_time_s` (its duration).

Timing is honest: the timed loop is rsl_rl's own `OnPolicyRunner.learn`, called one iteration at a
time (its loop body is the same either way: the wrapper keeps the current observation, so
`get_observations()` does not reset), plus the numpy bookkeeping the metrics need. rsl_rl's own logger
is off (no log_dir), so it writes no TensorBoard files and saves no checkpoints.

The parts that do not need rsl_rl (the stepping with its reset bookkeeping, the tracking
error, the evaluation loop) import neither rsl_rl nor tensordict, so the tests can check them without
the benchmark-only packages.
"""

import time

_LAUNCH = time.time()  # before the heavy imports: time_s counts them and the env creation

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from benchmarks.common import cpu_model  # noqa: E402

EVAL_SEED_OFFSET = 1_000_000  # as ppo_control: evaluation envs never share seeds with training envs
MAX_EVAL_ENVS = 16  # as ppo_control's evaluation
PLAYGROUND_VERSION = "0.2.0"
PLAYGROUND_NUM_ENVS = 4096  # learning/train_rsl_rl.py's --num_envs default
DEFAULT_TASK = "Go1JoystickFlatTerrain"
BACKENDS = ("envpool", "mujoco")


@dataclasses.dataclass(frozen=True)
class JoystickLayout:
    """Where a joystick task's command and the clean measurements of what it commands sit in
    envpool's observation (Go1: `state` 48 = noisy linvel 3, gyro 3, gravity 3, joint pos - default
    12, joint vel 12, last action 12, command 3; `privileged_state` 123 = state 48, clean gyro 3,
    accelerometer 3, gravity 3, local linvel 3, ...)."""

    state_size: int
    privileged_size: int
    command: slice  # in state: (vx, vy, wz)
    linvel_xy: slice  # in privileged_state: clean local base linear velocity (x, y)
    gyro_z: int  # in privileged_state: clean gyro z (yaw rate)


GO1_JOYSTICK = JoystickLayout(state_size=48, privileged_size=123, command=slice(45, 48), linvel_xy=slice(57, 59), gyro_z=50)
# Tasks whose observation layout is known (checked against envpool 1.2.5). Other joystick tasks are
# refused rather than measured with a guessed layout.
LAYOUTS: dict[str, JoystickLayout] = {"Go1JoystickFlatTerrain": GO1_JOYSTICK, "Go1JoystickRoughTerrain": GO1_JOYSTICK}


def task_name(task: str) -> str:
    """`Go1JoystickFlatTerrain` from `Go1JoystickFlatTerrain`, `...-v1` or `MuJoCoPlayground/...-v1`."""
    name = task.split("/")[-1]
    return name[: -len("-v1")] if name.endswith("-v1") else name


# ---------------------------------------------------------------------------------------------
# Playground's settings and their rsl-rl-lib 5 translation
def playground_rsl_rl_config(task: str) -> dict[str, Any]:
    """Playground 0.2.0's `locomotion_params.rsl_rl_config(task)`, value for value (its logging and
    resume fields left out), with `obs_groups` as `learning/train_rsl_rl.py` sets it for a task
    whose observation is a dict, and that script's `--num_envs` default."""
    cfg: dict[str, Any] = {
        "seed": 1,
        "runner_class_name": "OnPolicyRunner",
        "policy": {
            "init_noise_std": 1.0,
            "actor_hidden_dims": [512, 256, 128],
            "critic_hidden_dims": [512, 256, 128],
            "activation": "elu",
            "class_name": "ActorCritic",
        },
        "algorithm": {
            "class_name": "PPO",
            "value_loss_coef": 1.0,
            "use_clipped_value_loss": True,
            "clip_param": 0.2,
            "entropy_coef": 0.001,
            "num_learning_epochs": 5,
            "num_mini_batches": 4,
            "learning_rate": 3.0e-4,
            "schedule": "fixed",
            "gamma": 0.99,
            "lam": 0.95,
            "desired_kl": 0.01,
            "max_grad_norm": 1.0,
        },
        "num_steps_per_env": 24,
        "max_iterations": 100000,
        "empirical_normalization": True,
        "obs_groups": {"policy": ["state"], "critic": ["privileged_state"]},
        "num_envs": PLAYGROUND_NUM_ENVS,
    }
    if task in ("Go1Getup", "BerkeleyHumanoidJoystickFlatTerrain", "G1Joystick", "Go1JoystickFlatTerrain"):
        cfg["max_iterations"] = 1000
    if task == "Go1JoystickFlatTerrain":
        cfg["algorithm"]["learning_rate"] = 3e-4
        cfg["algorithm"]["schedule"] = "fixed"
    return cfg


def rsl_rl_train_cfg(playground: dict[str, Any]) -> dict[str, Any]:
    """Playground's config in rsl-rl-lib 5's schema: ActorCritic -> an actor and a critic MLPModel,
    `empirical_normalization` -> each model's `obs_normalization`, `init_noise_std` -> the actor's
    GaussianDistribution (learned, state-independent std, "scalar" parameterization: rsl-rl-lib 3's
    default `noise_std_type`), the actor's obs set named `actor` (rsl-rl-lib 3 called it `policy`)."""
    policy, algorithm = playground["policy"], playground["algorithm"]
    normalize = bool(playground["empirical_normalization"])
    return {
        "num_steps_per_env": playground["num_steps_per_env"],
        "save_interval": 50,  # Playground's; unused here (no log_dir, so rsl_rl saves nothing)
        "obs_groups": {"actor": list(playground["obs_groups"]["policy"]), "critic": list(playground["obs_groups"]["critic"])},
        "actor": {
            "class_name": "MLPModel",
            "hidden_dims": list(policy["actor_hidden_dims"]),
            "activation": policy["activation"],
            "obs_normalization": normalize,
            "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": policy["init_noise_std"], "std_type": "scalar"},
        },
        "critic": {
            "class_name": "MLPModel",
            "hidden_dims": list(policy["critic_hidden_dims"]),
            "activation": policy["activation"],
            "obs_normalization": normalize,
        },
        "algorithm": dict(algorithm),
    }


# ---------------------------------------------------------------------------------------------
# Stepping (no rsl_rl, no torch): one bookkeeping, two backends
@dataclasses.dataclass
class EnvSpec:
    """The env a run trains and evaluates on: a task on envpool's port (its default options), or on
    our MuJoCo reference with `kwargs` (envpool's options and the reference's own, e.g. a variant's)."""

    task: str
    backend: str = "envpool"
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    max_episode_steps: int | None = None  # None: the task's own limit
    task_file: str | None = None  # the ppo_control task file it was read from, if any


def make_envpool(task: str, num_envs: int, threads: int, seed: int, max_episode_steps: int | None = None):
    import envpool

    extra = {} if max_episode_steps is None else {"max_episode_steps": max_episode_steps}
    return envpool.make_gymnasium(f"{task}-v1", num_envs=num_envs, batch_size=num_envs, num_threads=threads, seed=seed, **extra)


def tracking_errors(privileged: np.ndarray, command: np.ndarray, layout: JoystickLayout) -> tuple[np.ndarray, np.ndarray]:
    """Per sub-env: |command (vx, vy) - clean local linvel (x, y)| (m/s) and |command wz - clean gyro z| (rad/s)."""
    lin = np.linalg.norm(command[:, :2] - privileged[:, layout.linvel_xy], axis=1)
    ang = np.abs(command[:, 2] - privileged[:, layout.gyro_z])
    return lin, ang


@dataclasses.dataclass
class Advance:
    """What a backend reports of one batched step, before the bookkeeping: `state`/`privileged` are
    new arrays (rsl_rl still holds the previous ones); where the backend has already started the
    ended sub-envs' next episodes they are those episodes' first observations."""

    state: np.ndarray
    privileged: np.ndarray
    reward: np.ndarray  # the reward trained on (a variant's full reward)
    terminated: np.ndarray
    truncated: np.ndarray
    tracking_lin: np.ndarray
    tracking_ang: np.ndarray
    elapsed: np.ndarray  # the backend's own step count of each sub-env's episode (after this step)
    terms: dict[str, np.ndarray]  # reward term -> per sub-env
    task_reward: np.ndarray | None  # a variant's task's own reward (the reference's `task_reward`); None without one


@dataclasses.dataclass
class StepOut:
    """One batched step after the reset bookkeeping: `state`/`privileged` are the observations to act
    on next (reset observations for the sub-envs whose episode ended in this step), fresh arrays each
    step. `ended`: ids of those sub-envs, with their episodes' `episode_*` values, in the same order."""

    state: np.ndarray
    privileged: np.ndarray
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    time_outs: np.ndarray  # truncated and not terminated: the episodes to bootstrap
    tracking_lin: np.ndarray
    tracking_ang: np.ndarray
    elapsed: np.ndarray
    terms: dict[str, np.ndarray]
    task_reward: np.ndarray | None
    ended: np.ndarray
    episode_return: np.ndarray
    episode_length: np.ndarray
    episode_terminated: np.ndarray
    episode_tracking_lin: np.ndarray  # per-episode means of the per-step errors
    episode_tracking_ang: np.ndarray
    episode_task_return: np.ndarray | None  # with a task_reward: the episodes' returns of it


class IterationStats:
    """Sums over the steps since the last `pop()`: what one metrics row reports."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.count = 0  # sub-env steps
        self.lin = 0.0
        self.ang = 0.0
        self.task_reward: float | None = None
        self.terms: dict[str, float] = {}
        self.returns: list[float] = []
        self.lengths: list[int] = []
        self.task_returns: list[float] = []

    def add(self, out: StepOut) -> None:
        self.count += len(out.reward)
        self.lin += float(out.tracking_lin.sum())
        self.ang += float(out.tracking_ang.sum())
        for key, value in out.terms.items():
            self.terms[key] = self.terms.get(key, 0.0) + float(np.sum(value))
        if out.task_reward is not None:
            self.task_reward = (self.task_reward or 0.0) + float(out.task_reward.sum())
        if len(out.ended):
            self.returns.extend(out.episode_return.tolist())
            self.lengths.extend(out.episode_length.tolist())
            if out.episode_task_return is not None:
                self.task_returns.extend(out.episode_task_return.tolist())

    def pop(self) -> dict[str, Any]:
        n = max(self.count, 1)
        row: dict[str, Any] = {
            "episode_return": float(np.mean(self.returns)) if self.returns else None,
            "episode_length": float(np.mean(self.lengths)) if self.lengths else None,
            "episodes": len(self.returns),
            "tracking_error_lin": self.lin / n,
            "tracking_error_ang": self.ang / n,
        }
        if self.task_reward is not None:  # as ppo_control's rows: the per-step mean, and the episodes' returns of it
            row["task_reward"] = self.task_reward / n
            row["episode_task_return"] = float(np.mean(self.task_returns)) if self.task_returns else None
        row.update({f"reward/{key}": value / n for key, value in self.terms.items()})
        self.clear()
        return row


class Stepper:
    """A batched env stepped in sync mode, every step a real one (the sub-envs whose episode ended
    start their next one within the same step). Keeps each sub-env's episode return, length and
    tracking error sums; `stats` sums the current iteration's per-step metrics. A backend implements
    `_advance` (one step) and `_restart` (start the ended sub-envs' next episodes, if `_advance` has
    not) and sets num_envs, num_actions, max_episode_steps, env_config, state and privileged."""

    num_envs: int
    num_actions: int
    max_episode_steps: int
    env_config: dict[str, Any]  # plain values describing the env (rsl_rl's env.cfg)
    state: np.ndarray
    privileged: np.ndarray

    def _start_bookkeeping(self) -> None:
        self.stats = IterationStats()
        n = self.num_envs
        self._returns = np.zeros(n)
        self._lengths = np.zeros(n, dtype=np.int64)
        self._lin = np.zeros(n)
        self._ang = np.zeros(n)
        self._task_returns = np.zeros(n)

    def _advance(self, actions: np.ndarray) -> Advance:
        raise NotImplementedError

    def _restart(self, ended: np.ndarray, state: np.ndarray, privileged: np.ndarray) -> None:
        """Write the first observations of the `ended` sub-envs' next episodes into state/privileged."""

    @property
    def episode_lengths(self) -> np.ndarray:
        return self._lengths

    def step(self, actions: np.ndarray) -> StepOut:
        step = self._advance(np.clip(np.asarray(actions, dtype=np.float64), -1.0, 1.0))
        reward = np.asarray(step.reward, dtype=np.float64)
        terminated = np.asarray(step.terminated, dtype=bool)
        truncated = np.asarray(step.truncated, dtype=bool)
        state, privileged = step.state, step.privileged
        self._returns += reward
        self._lengths += 1
        self._lin += step.tracking_lin
        self._ang += step.tracking_ang
        if step.task_reward is not None:
            self._task_returns += step.task_reward
        ended = np.flatnonzero(terminated | truncated)
        if len(ended):
            lengths = self._lengths[ended].copy()
            episode = dict(
                episode_return=self._returns[ended].copy(),
                episode_length=lengths,
                episode_terminated=terminated[ended].copy(),
                episode_tracking_lin=self._lin[ended] / lengths,
                episode_tracking_ang=self._ang[ended] / lengths,
                episode_task_return=None if step.task_reward is None else self._task_returns[ended].copy(),
            )
            for buffer in (self._returns, self._lengths, self._lin, self._ang, self._task_returns):
                buffer[ended] = 0
            self._restart(ended, state, privileged)
        else:
            empty = np.empty(0)
            episode = dict(
                episode_return=empty,
                episode_length=np.empty(0, dtype=np.int64),
                episode_terminated=np.empty(0, dtype=bool),
                episode_tracking_lin=empty,
                episode_tracking_ang=empty,
                episode_task_return=None if step.task_reward is None else empty,
            )
        self.state, self.privileged = state, privileged
        out = StepOut(
            state=state,
            privileged=privileged,
            reward=reward,
            terminated=terminated,
            truncated=truncated,
            time_outs=truncated & ~terminated,
            tracking_lin=step.tracking_lin,
            tracking_ang=step.tracking_ang,
            elapsed=step.elapsed,
            terms=step.terms,
            task_reward=step.task_reward,
            ended=ended,
            **episode,
        )
        self.stats.add(out)
        return out

    def close(self) -> None:
        self.env.close()


class EnvpoolStepper(Stepper):
    """An envpool Playground env: envpool autoresets NEXT_STEP (the step after an episode ends would
    ignore its action), so the sub-envs that ended are reset within the step (`env.reset(ids)`)."""

    def __init__(self, task: str, num_envs: int, threads: int, seed: int, max_episode_steps: int | None = None):
        if task not in LAYOUTS:
            raise ValueError(f"unsupported task {task!r}")
        self.layout = LAYOUTS[task]
        self.env = make_envpool(task, num_envs, threads, seed, max_episode_steps)
        self.num_envs = num_envs
        self.num_actions = int(np.prod(self.env.action_space.shape))
        self.max_episode_steps = int(self.env.config["max_episode_steps"])
        self.env_config = {"task": task, **{k: v for k, v in self.env.config.items() if isinstance(v, (int, float, str, bool))}}
        obs, _ = self.env.reset()
        self.state, self.privileged = self._as_batch(obs, num_envs)
        if self.state.shape[1] != self.layout.state_size or self.privileged.shape[1] != self.layout.privileged_size:
            raise ValueError(f"{task}: observation sizes {self.state.shape[1]}/{self.privileged.shape[1]} do not match the known layout")
        self._start_bookkeeping()

    @staticmethod
    def _as_batch(obs: dict[str, np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
        return np.asarray(obs["state"], dtype=np.float32).reshape(n, -1), np.asarray(obs["privileged_state"], dtype=np.float32).reshape(
            n, -1
        )

    def _advance(self, actions: np.ndarray) -> Advance:
        obs, reward, terminated, truncated, info = self.env.step(actions)
        state, privileged = self._as_batch(obs, self.num_envs)
        lin, ang = tracking_errors(privileged, np.asarray(info["command"]), self.layout)
        terms = {key[len("reward_") :]: np.asarray(value) for key, value in info.items() if key.startswith("reward_")}
        return Advance(state, privileged, reward, terminated, truncated, lin, ang, np.asarray(info["elapsed_step"]), terms, None)

    def _restart(self, ended: np.ndarray, state: np.ndarray, privileged: np.ndarray) -> None:
        reset_obs, reset_info = self.env.reset(ended.astype(np.int32))
        ids = np.asarray(reset_info["env_id"])
        state[ids], privileged[ids] = self._as_batch(reset_obs, len(ids))


def reference_refusal(task: str) -> str | None:
    """Why our MuJoCo reference cannot run `task` here (None if it can): it must have one, with the
    `policy` and `privileged` groups and a joystick's tracking layout."""
    from ppo_control.envs.mujoco import REFERENCE_TASKS, has_reference
    from ppo_control.robots import playground

    if not has_reference(task):
        return f"no MuJoCo reference of {task}; tasks with one: {', '.join(REFERENCE_TASKS)}"
    robot_task = playground.robot_task(f"{task}-v1")
    if robot_task is None or not robot_task.tracking:
        return f"{task} is not a joystick task (the metrics need its command and measured velocity)"
    return None


class ReferenceStepper(Stepper):
    """Our MuJoCo reference of a task (`ppo_control.envs.mujoco.make_reference_vec_env`) with the
    spec's kwargs, seeded `seed` (sub-env i with seed + i, as envpool). Its VecEnv already resets the
    ended sub-envs within the step and reports the tracking errors (on the step's clean observation,
    before the reset), the reward terms (`reward/<term>`) and a variant's `task_reward`; the `policy`
    group is rsl_rl's `state`, `privileged` its `privileged_state` (a variant's clock elements in both)."""

    def __init__(self, spec: EnvSpec, num_envs: int, threads: int, seed: int):
        from ppo_control.envs.mujoco import make_reference_vec_env

        refusal = reference_refusal(spec.task)
        if refusal is not None:
            raise ValueError(refusal)
        self.env = make_reference_vec_env(spec.task, num_envs, dict(spec.kwargs), spec.max_episode_steps, num_threads=threads)
        self.num_envs = num_envs
        self.num_actions = self.env.info.action_dim
        self.max_episode_steps = self.env.max_episode_steps
        self.env_config = {
            "task": spec.task,
            "backend": "mujoco",
            "max_episode_steps": self.max_episode_steps,
            **{k: v for k, v in spec.kwargs.items() if isinstance(v, (int, float, str, bool))},
        }
        offsets, start = {}, 0
        for group, size in self.env.info.groups:
            offsets[group] = slice(start, start + size)
            start += size
        self._policy, self._privileged = offsets["policy"], offsets["privileged"]
        self.state, self.privileged = self._split(self.env.reset(seed))
        self._start_bookkeeping()

    def _split(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        policy, privileged = obs[:, self._policy], obs[:, self._privileged]
        return np.ascontiguousarray(policy, dtype=np.float32), np.ascontiguousarray(privileged, dtype=np.float32)

    def _advance(self, actions: np.ndarray) -> Advance:
        result = self.env.step(actions)
        state, privileged = self._split(result.obs)
        diagnostics = result.diagnostics
        terms = {key[len("reward/") :]: value for key, value in diagnostics.items() if key.startswith("reward/")}
        ended = np.flatnonzero(result.terminated | result.truncated)
        # The running episodes' step counts (the env exposes none), and for the ended ones the env's
        # own count, which the bookkeeping's episode lengths must equal.
        elapsed = self._lengths + 1
        elapsed[ended] = result.episode_lengths
        return Advance(
            state,
            privileged,
            result.reward,
            result.terminated,
            result.truncated,
            diagnostics["tracking_error_lin"],
            diagnostics["tracking_error_ang"],
            elapsed,
            terms,
            diagnostics.get("task_reward"),
        )


def make_stepper(spec: EnvSpec, num_envs: int, threads: int, seed: int) -> Stepper:
    if spec.backend == "mujoco":
        return ReferenceStepper(spec, num_envs, threads, seed)
    return EnvpoolStepper(spec.task, num_envs, threads, seed, spec.max_episode_steps)


def evaluate(
    act: Callable[[np.ndarray, np.ndarray], np.ndarray], spec: EnvSpec, seed: int, episodes: int, threads: int = 1
) -> dict[str, Any]:
    """`episodes` full episodes of `act(state, privileged) -> actions` on a new env of `spec` seeded
    `seed` (min(episodes, 16) sub-envs, sub-env i running its own quota of episodes, so short
    episodes are not favoured). Returns the eval_* metrics (`eval_task_return` too where the env
    reports a variant's task reward)."""
    n = min(episodes, MAX_EVAL_ENVS)
    quota = np.array([episodes // n + (i < episodes % n) for i in range(n)])
    stepper = make_stepper(spec, n, threads, seed)
    finished = np.zeros(n, dtype=np.int64)
    returns, lengths, falls, lins, angs, task_returns = [], [], [], [], [], []
    try:
        while (finished < quota).any():
            out = stepper.step(act(stepper.state, stepper.privileged))
            for k, i in enumerate(out.ended):
                if finished[i] < quota[i]:
                    returns.append(float(out.episode_return[k]))
                    lengths.append(int(out.episode_length[k]))
                    falls.append(bool(out.episode_terminated[k]))
                    lins.append(float(out.episode_tracking_lin[k]))
                    angs.append(float(out.episode_tracking_ang[k]))
                    if out.episode_task_return is not None:
                        task_returns.append(float(out.episode_task_return[k]))
                finished[i] += 1
    finally:
        stepper.close()
    result = {
        "eval_return": float(np.mean(returns)),
        "eval_return_std": float(np.std(returns)),
        "eval_episode_length": float(np.mean(lengths)),
        "eval_tracking_error_lin": float(np.mean(lins)),
        "eval_tracking_error_ang": float(np.mean(angs)),
        "eval_falls": int(np.sum(falls)),
        "eval_episodes": len(returns),
    }
    if task_returns:
        result["eval_task_return"] = float(np.mean(task_returns))
    return result


# ---------------------------------------------------------------------------------------------
# rsl_rl's VecEnv over the stepper
try:  # the base class only declares attributes; without rsl_rl the module still imports
    from rsl_rl.env import VecEnv as _VecEnvBase
except ImportError:  # pragma: no cover - exercised where rsl_rl is not installed
    _VecEnvBase = object


class RslRlEnv(_VecEnvBase):
    """rsl_rl's VecEnv API over a Stepper (either backend), on the CPU: observations a TensorDict of the groups
    `state` and `privileged_state` (float32), rewards raw (unscaled), `dones` = terminated |
    truncated, `extras["time_outs"]` = truncated & ~terminated (rsl_rl bootstraps these), and
    `extras["log"]` empty unless `log_extras` (then per-step means of the reward terms and tracking
    errors, "/"-namespaced, for rsl_rl's own logger when it has a log_dir)."""

    def __init__(self, stepper: Stepper, env_cfg: dict[str, Any] | None = None, log_extras: bool = False):
        self.stepper = stepper
        self.num_envs = stepper.num_envs
        self.num_actions = stepper.num_actions
        self.max_episode_length = stepper.max_episode_steps
        self.device = "cpu"
        self.cfg = env_cfg or {}
        self.log_extras = log_extras

    @property
    def episode_length_buf(self):
        import torch

        return torch.from_numpy(self.stepper.episode_lengths.copy())

    @episode_length_buf.setter
    def episode_length_buf(self, value) -> None:
        raise NotImplementedError("episodes cannot start at a random step (init_at_random_ep_len is Playground's False)")

    def _obs(self, state: np.ndarray, privileged: np.ndarray):
        import torch
        from tensordict import TensorDict

        return TensorDict({"state": torch.from_numpy(state), "privileged_state": torch.from_numpy(privileged)}, batch_size=[self.num_envs])

    def get_observations(self):
        """The current observations (no reset: the runner calls this at the start of every learn())."""
        return self._obs(self.stepper.state, self.stepper.privileged)

    def step(self, actions):
        import torch

        out = self.stepper.step(actions.detach().cpu().numpy())
        rewards = torch.from_numpy(out.reward.astype(np.float32))
        dones = torch.from_numpy((out.terminated | out.truncated).astype(np.float32))
        extras: dict[str, Any] = {"time_outs": torch.from_numpy(out.time_outs.astype(np.float32)), "log": {}}
        if self.log_extras:
            extras["log"] = {"/tracking/error_lin": float(out.tracking_lin.mean()), "/tracking/error_ang": float(out.tracking_ang.mean())}
        return self._obs(out.state, out.privileged), rewards, dones, extras


# ---------------------------------------------------------------------------------------------
# The run
def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default=None, help=f"a Playground task (default {DEFAULT_TASK}); on envpool one of {', '.join(LAYOUTS)}")
    parser.add_argument(
        "--backend", choices=BACKENDS, default=None, help="envpool (default): envpool's port; mujoco: our MuJoCo reference of --task"
    )
    parser.add_argument(
        "--task-file",
        default=None,
        help="a ppo_control task (tasks/<name>.yaml, or a path): its env.id, env.backend, env.kwargs and env.max_episode_steps "
        "(instead of --task/--backend)",
    )
    parser.add_argument(
        "--steps", type=lambda s: int(float(s)), default=5_000_000, help="total env steps (iterations = ceil(steps / (num_envs x 24)))"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--num-envs", type=int, default=32, help="parallel envs (Playground: 4096)")
    parser.add_argument("--threads", type=int, default=1, help="the env's threads and torch.set_num_threads")
    parser.add_argument(
        "--eval-every", type=lambda s: int(float(s)), default=1_000_000, help="env steps between evaluations (0: only at the end)"
    )
    parser.add_argument("--eval-episodes", type=int, default=10)
    parser.add_argument("--print-every-s", type=float, default=30.0, help="seconds between progress lines")
    parser.add_argument("--out", required=True, help="output folder: metrics.jsonl and config.json")
    return parser.parse_args(argv)


def env_spec(args: argparse.Namespace) -> EnvSpec | str:
    """The env the arguments name, or why it cannot run here (one line)."""
    if args.task_file is not None:
        if args.task is not None or args.backend is not None:
            return "give --task-file or --task/--backend, not both"
        from omegaconf import OmegaConf

        from ppo_control.config import ConfigError
        from ppo_control.config.composition import compose
        from ppo_control.envs.randomization import Randomization

        try:
            cfg = compose([f"task={args.task_file}"])
        except ConfigError as error:
            return str(error).splitlines()[0]
        if Randomization.from_config(cfg.randomize) is not None:  # rsl_rl would train on another env than ours
            return f"task file {args.task_file} randomizes the robot (randomize.*), which this script does not carry over"
        env = cfg.env
        spec = EnvSpec(task_name(env.id), str(env.backend), OmegaConf.to_container(env.kwargs), env.max_episode_steps, args.task_file)
        if spec.backend == "envpool" and (spec.kwargs or spec.max_episode_steps is not None):
            return f"task file {args.task_file}: the envpool path runs the port's defaults; its env.kwargs run with env.backend=mujoco"
    else:
        spec = EnvSpec(task_name(args.task or DEFAULT_TASK), args.backend or "envpool")
    if spec.backend not in BACKENDS:
        return f"env.backend={spec.backend}: this script steps {' or '.join(BACKENDS)}"
    if spec.backend == "mujoco":
        return reference_refusal(spec.task) or spec
    if spec.task not in LAYOUTS:
        return (
            f"task {spec.task!r}: its observation layout (command and clean velocity indices) is not known here; "
            f"supported on envpool: {', '.join(LAYOUTS)}"
        )
    return spec


def versions() -> dict[str, Any]:
    from importlib import metadata

    out: dict[str, Any] = {"python": platform.python_version(), "platform": platform.platform()}
    for dist in ("rsl-rl-lib", "torch", "envpool", "tensordict", "numpy", "mujoco"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


def machine() -> dict[str, Any]:
    out: dict[str, Any] = {"cpu_count": os.cpu_count()}
    if hasattr(os, "sched_getaffinity"):
        out["cpus_usable"] = len(os.sched_getaffinity(0))
    model = cpu_model()
    if model is not None:
        out["cpu_model"] = model
    return out


def env_differences(spec: EnvSpec) -> list[str]:
    """How the env differs from the one Playground's rsl_rl trains on."""
    if spec.backend == "envpool":
        return [
            "envpool's C++ port of the task instead of Playground's MJX env",
            "no domain randomization (Playground's train_rsl_rl.py applies the task's randomizer; envpool's port has none)",
        ]
    from ppo_control.envs.mujoco import split_reference_options

    _, own = split_reference_options(spec.task, spec.kwargs)
    out = [
        "our MuJoCo reference of envpool's C++ port of the task (ppo_control.envs.mujoco, Python bindings) instead of "
        f"Playground's MJX env, with env.kwargs {json.dumps(spec.kwargs, sort_keys=True)}",
        "no domain randomization (Playground's train_rsl_rl.py applies the task's randomizer; the task file sets no randomize.*)",
    ]
    if own:
        out.append(
            f"a variant only the reference runs ({', '.join(sorted(own))}): its observation and training reward are not Playground's "
            "(eval_return is the variant's full reward; task_reward, episode_task_return and eval_task_return the task's own)"
        )
    return out


def run_config(
    args: argparse.Namespace, spec: EnvSpec, playground: dict[str, Any], train_cfg: dict[str, Any], iterations: int
) -> dict[str, Any]:
    rollout = args.num_envs * playground["num_steps_per_env"]
    minibatches = playground["algorithm"]["num_mini_batches"]
    return {
        "task": spec.task,
        "envpool_id": f"{spec.task}-v1",
        "env": dataclasses.asdict(spec),
        "command": " ".join([sys.executable, *sys.argv]),
        "args": vars(args),
        "device": "cpu",
        "playground": {
            "version": PLAYGROUND_VERSION,
            "source": "mujoco_playground/config/locomotion_params.py:rsl_rl_config",
            **playground,
        },
        "rsl_rl_train_cfg": train_cfg,
        "scaled": {
            "num_envs": {"playground": playground["num_envs"], "used": args.num_envs, "why": "what this machine holds (--num-envs)"},
            "max_iterations": {
                "playground": playground["max_iterations"],
                "used": iterations,
                "why": "derived from --steps: ceil(steps / (num_envs x num_steps_per_env))",
            },
            "rollout_size": {
                "playground": playground["num_envs"] * playground["num_steps_per_env"],
                "used": rollout,
                "why": "follows num_envs",
            },
            "mini_batch_size": {
                "playground": playground["num_envs"] * playground["num_steps_per_env"] // minibatches,
                "used": rollout // minibatches,
                "why": "follows num_envs (num_mini_batches kept at Playground's value)",
            },
            "seed": {
                "playground": playground["seed"],
                "used": args.seed,
                "why": "--seed (Playground's script takes it from its --seed flag as well)",
            },
        },
        "iterations": iterations,
        "steps_per_iteration": rollout,
        "total_env_steps": iterations * rollout,
        "differences_from_playground": [
            *env_differences(spec),
            "rsl-rl-lib 5 (Playground's config targets rsl-rl-lib 3): the observation normalizers are updated once per "
            "iteration from the rollout after the update, not at every env step; same networks, init and losses",
            "CPU torch, one process",
            "torch seeded with --seed (rsl_rl seeds nothing itself)",
        ],
        "eval": {
            "episodes": args.eval_episodes,
            "every_steps": args.eval_every,
            "envs": min(args.eval_episodes, MAX_EVAL_ENVS),
            "seed": args.seed + EVAL_SEED_OFFSET,
            "policy": "deterministic: the actor's mean action with its observation normalizer "
            "(runner.get_inference_policy), clipped to [-1, 1]",
        },
        "versions": versions(),
        "machine": machine(),
        "launch_unix_s": _LAUNCH,
    }


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serializable: {type(value)}")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    spec = env_spec(args)
    if isinstance(spec, str):
        print(f"rsl_rl_playground: not supported: {spec}", file=sys.stderr)
        return 2
    task = spec.task
    import torch
    from rsl_rl.runners import OnPolicyRunner

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)

    playground = playground_rsl_rl_config(task)
    train_cfg = rsl_rl_train_cfg(playground)
    steps_per_it = args.num_envs * train_cfg["num_steps_per_env"]
    iterations = max(1, math.ceil(args.steps / steps_per_it))
    config = run_config(args, spec, playground, json.loads(json.dumps(train_cfg)), iterations)

    stepper = make_stepper(spec, args.num_envs, args.threads, args.seed)
    env = RslRlEnv(stepper, env_cfg=stepper.env_config)
    runner = OnPolicyRunner(env, train_cfg, log_dir=None, device="cpu")
    # What rsl_rl's networks read (a variant's extra elements included), as they were built.
    config["input_sizes"] = {"actor": runner.alg.get_policy().obs_dim, "critic": runner.alg._raw_critic.obs_dim}
    (out_dir / "config.json").write_text(json.dumps(config, indent=2, default=_json_default) + "\n")
    losses: dict[str, float] = {}
    update = runner.alg.update

    def update_and_keep_losses() -> dict[str, float]:
        result = update()
        losses.update(result)
        return result

    runner.alg.update = update_and_keep_losses
    policy = runner.alg.get_policy()

    def act(state: np.ndarray, privileged: np.ndarray) -> np.ndarray:
        from tensordict import TensorDict

        obs = TensorDict({"state": torch.from_numpy(state), "privileged_state": torch.from_numpy(privileged)}, batch_size=[len(state)])
        with torch.inference_mode():
            return policy(obs).clamp(-1.0, 1.0).numpy()

    eval_time = 0.0
    next_eval = args.eval_every if args.eval_every > 0 else math.inf
    last_print = time.time()
    stepper.stats.clear()
    with open(out_dir / "metrics.jsonl", "w", encoding="utf-8") as metrics:

        def write(row: dict[str, Any]) -> None:
            metrics.write(json.dumps(row, default=_json_default) + "\n")
            metrics.flush()

        for it in range(iterations):
            runner.learn(num_learning_iterations=1, init_at_random_ep_len=False)
            step = (it + 1) * steps_per_it
            now = time.time()
            row = {"iteration": it, "step": step, "time_s": now - _LAUNCH, "train_time_s": now - _LAUNCH - eval_time}
            row.update(stepper.stats.pop())
            row.update({f"loss/{key}": value for key, value in losses.items()})
            row["learning_rate"] = float(runner.alg.learning_rate)
            row["action_std"] = float(runner.alg.get_policy().output_std.detach().mean())
            write(row)
            if now - last_print >= args.print_every_s or it == 0:
                last_print = now
                ret = "-" if row["episode_return"] is None else f"{row['episode_return']:.2f}"
                print(
                    f"it {it + 1}/{iterations} step {step} {step / row['train_time_s']:.0f} steps/s return {ret} "
                    f"track lin {row['tracking_error_lin']:.3f} ang {row['tracking_error_ang']:.3f}",
                    flush=True,
                )
            if step >= next_eval or it == iterations - 1:
                while next_eval <= step:
                    next_eval += args.eval_every
                start = time.time()
                policy = runner.get_inference_policy(device="cpu")  # eval mode; the next learn() sets train mode again
                result = evaluate(act, spec, args.seed + EVAL_SEED_OFFSET, args.eval_episodes, args.threads)
                eval_row = {"iteration": it, "step": step, "time_s": start - _LAUNCH, "train_time_s": start - _LAUNCH - eval_time}
                eval_time += time.time() - start
                eval_row.update(result)
                eval_row["eval_time_s"] = time.time() - start
                write(eval_row)
                print(
                    f"eval step {step}: return {result['eval_return']:.2f} +- {result['eval_return_std']:.2f} "
                    f"length {result['eval_episode_length']:.0f} falls {result['eval_falls']} "
                    f"track lin {result['eval_tracking_error_lin']:.3f} ang {result['eval_tracking_error_ang']:.3f}"
                    + (f" task return {result['eval_task_return']:.2f}" if "eval_task_return" in result else ""),
                    flush=True,
                )
    stepper.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
