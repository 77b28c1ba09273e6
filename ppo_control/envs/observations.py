"""Observation groups: an env's observation as named parts, laid out side by side in one vector.

A plain Box observation is the group `policy`. A MuJoCo task can add `privileged`: what a real robot
cannot measure (`PrivilegedObservation`). A user's env can return a Gymnasium Dict of groups
(`DictGroups` flattens it in the space's order). The vector env hands the policy one float vector per
sub-env, the groups concatenated in `EnvInfo.groups` order; the policy's actor and critic each read
the groups named in `policy.actor_obs` / `policy.critic_obs` (index lists into that vector), so
storage, GAE and the rollout loop do not change with the groups.
"""

from __future__ import annotations

from collections.abc import Sequence

import gymnasium as gym
import numpy as np

from ppo_control.config.errors import UserError
from ppo_control.envs.randomization import PHYSICS_KEYS, DomainRandomization

POLICY, PRIVILEGED = "policy", "privileged"
Groups = tuple[tuple[str, int], ...]  # (name, size) in layout order
# A Playground robot task's observation keys (envpool's Dict observation, a RobotTask's `groups`)
# -> this package's group names.
GROUP_OF_KEY = {"state": POLICY, "privileged_state": PRIVILEGED}


def find_wrapper(env: gym.Env, kind: type) -> gym.Env | None:
    """The first wrapper of type `kind` in `env`'s chain, `env` itself included, or None."""
    while isinstance(env, gym.Wrapper):
        if isinstance(env, kind):
            return env
        env = env.env
    return None


class PrivilegedObservation(gym.ObservationWrapper):
    """Appends the `privileged` group to a MuJoCo env's observation: the full simulator state (qpos
    including the root's position, qvel), the external contact force on every body, and the current
    randomized physical parameters as scale factors (body mass, geom friction, dof damping, actuator
    gain; 1 where not randomized). Read from the simulator, so the policy group's noise is absent."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        base = env.unwrapped
        if not hasattr(base, "model") or not isinstance(env.observation_space, gym.spaces.Box):
            raise UserError(f"the task has no '{PRIVILEGED}' observation group (it needs a MuJoCo env with a Box observation)")
        self._model, self._data = base.model, base.data
        self._randomization = find_wrapper(env, DomainRandomization)
        model = self._model
        self._scale_sizes = {"body_mass": model.nbody, "friction": model.ngeom, "joint_damping": model.nv, "actuator_gain": model.nu}
        self.policy_size = int(np.prod(env.observation_space.shape))
        self.privileged_size = model.nq + model.nv + 6 * (model.nbody - 1) + sum(self._scale_sizes.values())
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (self.policy_size + self.privileged_size,), np.float64)

    def observation(self, observation):
        return np.concatenate([np.asarray(observation, dtype=np.float64).ravel(), self.privileged()])

    def privileged(self) -> np.ndarray:
        data = self._data
        scales = self._randomization.scales if self._randomization is not None else {}
        parts = [data.qpos, data.qvel, data.cfrc_ext[1:].ravel()]
        parts += [scales.get(key, np.ones(self._scale_sizes[key])) for key in PHYSICS_KEYS]
        return np.concatenate(parts)


class DictGroups(gym.ObservationWrapper):
    """A user's Dict observation (one Box per group, `policy` among them) as one flat vector."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        space = env.observation_space
        if POLICY not in space.spaces or not all(isinstance(s, gym.spaces.Box) for s in space.spaces.values()):
            raise UserError(f"a Dict observation must hold Box groups including '{POLICY}'; got {space}")
        self.groups: Groups = tuple((name, int(np.prod(s.shape))) for name, s in space.spaces.items())
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (sum(size for _, size in self.groups),), np.float64)

    def observation(self, observation):
        return np.concatenate([np.asarray(observation[name], dtype=np.float64).ravel() for name, _ in self.groups])


def observation_groups(env: gym.Env) -> Groups:
    """The group layout of an env built by `envs.make_env_factory`."""
    privileged = find_wrapper(env, PrivilegedObservation)
    if privileged is not None:
        inner = find_wrapper(env, DictGroups)
        head = inner.groups if inner is not None else ((POLICY, privileged.policy_size),)
        return (*head, (PRIVILEGED, privileged.privileged_size))
    flattened = find_wrapper(env, DictGroups)
    if flattened is not None:
        return flattened.groups
    return ((POLICY, int(np.prod(env.observation_space.shape))),)


def element_positions(task_groups: dict[str, tuple[str, ...]], groups: Groups) -> dict[str, dict[str, int]]:
    """Per group of an env's layout (`groups`), each element of a robot task's group of that name
    (RobotTask.groups, keyed as envpool's observation: GROUP_OF_KEY) -> its index in the observation
    vector. A task whose observation is a single Box has one group, whatever its key."""
    key_of = {group: key for key, group in GROUP_OF_KEY.items()}
    positions: dict[str, dict[str, int]] = {}
    start = 0
    for group, size in groups:
        key = key_of.get(group)
        names = task_groups[key] if key in task_groups else next(iter(task_groups.values()))
        positions[group] = {element: start + i for i, element in enumerate(names[:size])}
        start += size
    return positions


def group_index(groups: Groups, names: Sequence[str], key: str) -> list[int] | None:
    """Indices into the observation vector of the named groups, concatenated in `names`' order;
    None when that is the whole vector as it is (no indexing needed)."""
    offsets, start = {}, 0
    for name, size in groups:
        offsets[name] = (start, size)
        start += size
    unknown = [name for name in names if name not in offsets]
    if unknown:
        valid = ", ".join(offsets) + ("" if PRIVILEGED in offsets else f", {PRIVILEGED} (MuJoCo tasks)")
        raise UserError(f"{key}: unknown observation group '{unknown[0]}'; valid groups: {valid}")
    if list(names) == [name for name, _ in groups]:
        return None
    return [i for name in names for i in range(offsets[name][0], offsets[name][0] + offsets[name][1])]


def needs_privileged(policy_cfg) -> bool:
    """Whether the run's actor or critic reads the `privileged` group."""
    return PRIVILEGED in list(policy_cfg.actor_obs) + list(policy_cfg.critic_obs)
