"""Names of a MuJoCo model's observation elements and actuators, for the layouts Gymnasium's MuJoCo
tasks use: joint and dof names for qpos/qvel, body names for contact forces. A name is kept only if
the values it names equal the env's actual observation; otherwise the layout is unknown (None),
never guessed.
"""

from __future__ import annotations

import mujoco
import numpy as np

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
