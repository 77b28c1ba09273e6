"""How fast a quadruped can go with a hand-made trot at the task's action bound: a scripted,
open-loop diagonal trot on the task's MuJoCo reference (Go1 or Spot), through the task's own action
rule (default pose + action_scale * action, clipped to the actuators' ranges), over a grid of gait
frequencies and knee settings. It asks whether the actions a policy may send ([-1, 1], envpool's
action space) can move the robot at the commanded speeds at all, before any learning is blamed.

    python -m benchmarks.robots.open_loop_trot task=SpotFlatTerrainJoystick [action_scale=0.3]
        [bounds=1,2] [frequencies=2,2.5,3,3.5] [stance_knee=0,0.5] [seconds=5] [out=<file.json>]

Each leg's actions are [abduction, hip pitch, knee]: the hip pitch swings cos(phase) * bound; the
knee flexes to -bound in the swing half of the cycle and sits at stance_knee * bound in the stance
half; diagonal feet share a phase (the task's TROT_RAD). The speed is the base's mean velocity in
the world's x over the run after its first second, for either sign of the hip's swing; a run that
meets the task's own termination is a fall and has no speed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from benchmarks.common import markdown_table, parse_args, write_json

DEFAULTS = {
    "task": "SpotFlatTerrainJoystick",
    "action_scale": None,
    "bounds": "1,2",
    "frequencies": "2,2.5,3,3.5",
    "stance_knee": "0,0.5",
    "seconds": 5.0,
    "out": "",
}
SETTLE_S = 1.0


def reference_task(task: str, action_scale: float | None):
    """The task's MuJoCo reference with one sub-env; `action_scale` overrides the spec's."""
    from ppo_control.envs.mujoco.go1 import Go1Joystick
    from ppo_control.envs.mujoco.spot import SpotJoystick

    classes = {"Go1JoystickFlatTerrain": Go1Joystick, "SpotFlatTerrainJoystick": SpotJoystick}
    if task not in classes:
        raise SystemExit(f"task={task} has no open-loop trot here; valid: {', '.join(classes)}")
    kwargs = {} if action_scale is None else {"action_scale": float(action_scale)}
    cls = classes[task]
    return cls(f"{task}-v1", 1, kwargs, num_threads=1)


def trot_actions(task, time_s: float, frequency_hz: float, bound: float, stance_knee: float, sign: float) -> np.ndarray:
    """One control step's actions [1, NU] of the scripted trot at time `time_s`."""
    actions = np.zeros((1, task.NU))
    for leg, foot in enumerate(task.FEET):
        phase = 2.0 * np.pi * frequency_hz * time_s + task.TROT_RAD[foot]
        swing = np.sin(phase) > 0.0
        actions[0, 3 * leg + 1] = sign * bound * np.cos(phase)
        actions[0, 3 * leg + 2] = -bound if swing else stance_knee * bound
    return actions


def trot_speed(task, frequency_hz: float, bound: float, stance_knee: float, sign: float, seconds: float) -> dict[str, float | None]:
    """The base's mean x velocity after the first second (None after a fall: the task's own
    termination) and the step of the fall, if any."""
    rngs = [np.random.default_rng(0)]
    task.reset(np.array([0]), rngs)
    dt = task.control_period_s
    steps, settle = int(round(seconds / dt)), int(round(SETTLE_S / dt))
    x = []
    for step in range(steps):
        task.command[:] = 0.0  # the scripted gait ignores it; a zero command keeps the reward's terms quiet
        if task.step(trot_actions(task, step * dt, frequency_hz, bound, stance_knee, sign), rngs).terminated[0]:
            return {"speed": None, "fell_at_step": step}
        x.append(float(task.physics.gather("qpos")[0, 0]))
    return {"speed": (x[-1] - x[settle - 1]) / ((steps - settle) * dt), "fell_at_step": None}


def speed_text(row: dict) -> str:
    return f"fell at step {row['fell_at_step']}" if row["speed"] is None else f"{row['speed']:.3f}"


def floats(text) -> list[float]:
    return [float(v) for v in str(text).split(",")]


def main(argv: list[str]) -> None:
    args = parse_args(argv, DEFAULTS, __doc__)
    task = reference_task(args["task"], args["action_scale"])
    rows = []
    try:
        for bound in floats(args["bounds"]):
            for frequency in floats(args["frequencies"]):
                for knee in floats(args["stance_knee"]):
                    for sign in (1.0, -1.0):
                        result = trot_speed(task, frequency, bound, knee, sign, float(args["seconds"]))
                        rows.append({"bound": bound, "frequency_hz": frequency, "stance_knee": knee, "hip_sign": sign, **result})
    finally:
        task.physics.close()
    upright = [r for r in rows if r["fell_at_step"] is None]
    best = {
        str(bound): {
            "forward": max((r["speed"] for r in upright if r["bound"] == bound and r["speed"] > 0.0), default=None),
            "backward": min((r["speed"] for r in upright if r["bound"] == bound and r["speed"] < 0.0), default=None),
        }
        for bound in floats(args["bounds"])
    }
    summary = {
        "task": args["task"],
        "action_scale": task.options["action_scale"],
        "seconds": float(args["seconds"]),
        "best_upright": best,
        "runs": rows,
    }
    print(
        markdown_table(
            ["bound", "freq (Hz)", "stance knee", "hip sign", "speed (m/s)"],
            [[r["bound"], r["frequency_hz"], r["stance_knee"], r["hip_sign"], speed_text(r)] for r in rows],
        )
    )
    print(json.dumps(best))
    if args["out"]:
        write_json(Path(args["out"]), summary)


if __name__ == "__main__":
    main(sys.argv[1:])
