"""The controller's contract of a task: what a robot controller running the exported policy must
feed it and what it gets back, read from the task's MuJoCo model.

- `control_period_s`: seconds between policy steps (the env's dt: timestep x frame_skip).
- `action_names`: the MJCF actuator names, in action order.
- `observation`: the groups the policy reads (today one, `policy`), each with its size and, where
  this can be proven, the name of every element. Names are derived from the model (joint and dof
  names for qpos/qvel, body names for contact forces) for the layouts Gymnasium's MuJoCo tasks use,
  and kept only if the values they name equal the env's actual observation; otherwise they are
  null (the task does not say), never guessed.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import mujoco
import numpy as np

from ppo_control.envs import make_env_factory

_QPOS_AXES = {mujoco.mjtJoint.mjJNT_FREE: ("x", "y", "z", "qw", "qx", "qy", "qz"), mujoco.mjtJoint.mjJNT_BALL: ("qw", "qx", "qy", "qz")}
_QVEL_AXES = {mujoco.mjtJoint.mjJNT_FREE: ("vx", "vy", "vz", "wx", "wy", "wz"), mujoco.mjtJoint.mjJNT_BALL: ("wx", "wy", "wz")}


def _joint_element_names(model: mujoco.MjModel, prefix: str, axes: dict) -> list[str]:
    names = []
    for j in range(model.njnt):
        joint = model.joint(j).name or f"joint{j}"
        kind = mujoco.mjtJoint(model.jnt_type[j])
        names += [f"{prefix}:{joint}:{axis}" for axis in axes[kind]] if kind in axes else [f"{prefix}:{joint}"]
    return names


def _candidate_layouts(model: mujoco.MjModel, data: mujoco.MjData) -> list[tuple[list[str], np.ndarray]]:
    """(names, values) of the observation layouts of Gymnasium's MuJoCo tasks: qpos without the first
    k entries (the root's global position, excluded by default), qvel (Walker2d clips it to +-10),
    optionally the clipped external contact forces of every body but the world; and qpos alone."""
    qpos_names, qvel_names = _joint_element_names(model, "qpos", _QPOS_AXES), _joint_element_names(model, "qvel", _QVEL_AXES)
    cfrc_names = [f"cfrc_ext:{model.body(b).name or f'body{b}'}:{i}" for b in range(1, model.nbody) for i in range(6)]
    contact = np.clip(data.cfrc_ext[1:].ravel(), -1.0, 1.0)
    layouts = [(qpos_names[k:], data.qpos[k:]) for k in range(0, 3)]  # positions only (partial_observation.py)
    for k in range(0, 3):
        for qvel in (data.qvel, np.clip(data.qvel, -10.0, 10.0)):
            names, values = qpos_names[k:] + qvel_names, np.concatenate([data.qpos[k:], qvel])
            layouts += [(names, values), (names + cfrc_names, np.concatenate([values, contact]))]
    return layouts


def action_names(model: mujoco.MjModel) -> list[str]:
    """Each actuator's MJCF name, or for an unnamed one the joint it drives."""
    names = []
    for i in range(model.nu):
        name = model.actuator(i).name
        if not name and model.actuator_trntype[i] == mujoco.mjtTrn.mjTRN_JOINT:
            name = model.joint(model.actuator_trnid[i, 0]).name
        names.append(name or f"actuator{i}")
    return names


def observation_element_names(env) -> list[str] | None:
    """Names of the observation's elements when a known layout reproduces it exactly, else None."""
    base = env.unwrapped
    model, data = getattr(base, "model", None), getattr(base, "data", None)
    if model is None or data is None:
        return None
    obs, _ = env.reset(seed=0)
    low, high = env.action_space.low, env.action_space.high
    for _ in range(3):  # a few steps too, so velocities and contacts are not all zero
        obs, *_ = env.step(low + 0.75 * (high - low))
    obs = np.asarray(obs, dtype=np.float64).ravel()
    for names, values in _candidate_layouts(model, data):
        if len(names) == obs.size and np.allclose(values, obs, rtol=1e-5, atol=1e-6):
            return names
    return None


def actor_groups(groups, actor_obs: list[str]) -> list[tuple[str, int]]:
    """(name, size) of the groups the actor reads, in its order: all an exported policy takes."""
    sizes = dict(groups)
    return [(name, int(sizes[name])) for name in actor_obs]


def controller_contract(env_cfg, groups: list[tuple[str, int]] | None = None, history: int = 1) -> dict[str, Any]:
    """The contract of the task in `env_cfg` (the run config's `env` section), from one fresh env;
    `groups` are the observation groups the controller feeds (default: the `policy` group alone),
    `history` how many of the most recent observations the policy reads (it keeps them itself)."""
    from omegaconf import OmegaConf

    kwargs = OmegaConf.to_container(env_cfg.kwargs) if env_cfg.kwargs else {}
    if env_cfg.backend == "mjx":  # the engine's env; its observation layout is the engine's own: no element names
        from ppo_control.mjx_env import shared_engine_env

        env, obs_size = shared_engine_env(str(env_cfg.id), kwargs)
        return _contract(float(env.dt), env.sys.mj_model, obs_size, None, groups, history)
    env = make_env_factory(str(env_cfg.id), kwargs, env_cfg.max_episode_steps)()
    try:
        base = env.unwrapped
        obs_size = int(np.prod(env.observation_space.shape)) if isinstance(env.observation_space, gym.spaces.Box) else None
        names = observation_element_names(env) if obs_size is not None else None
        period = float(base.dt) if hasattr(base, "dt") else None
        return _contract(period, getattr(base, "model", None), obs_size, names, groups, history)
    finally:
        env.close()


def _contract(
    period: float | None,
    model: mujoco.MjModel | None,
    obs_size: int | None,
    names: list[str] | None,
    groups: list[tuple[str, int]] | None,
    history: int,
) -> dict[str, Any]:
    """The contract's fields: control period, actuator names, and the groups (the `policy` group's
    element names where the layout is known)."""
    groups = groups or [("policy", obs_size)]
    return {
        "control_period_s": period,
        "action_names": action_names(model) if model is not None else None,
        "observation": {
            "groups": [{"name": name, "size": size, "element_names": names if name == "policy" else None} for name, size in groups],
            "history": history,
        },
    }
