"""Frames of a robot run's policy on its MuJoCo reference, side by side in one image, with the
overlay `evaluate video=true` draws (time, step, return, and a joystick task's command against the
measured velocity): for the README, where a video cannot play.

    MUJOCO_GL=egl python -m benchmarks.robots.robot_frames run=<run dir> [seed=1000003] [steps=100,200,300]
        [width=640] [height=480] [scale=0.5] [camera=<azimuth>,<elevation>,<distance>,<height>] out=<image.jpg>

camera: a free camera on the robot's root body, turned (degrees), raised or lowered (degrees) and
at a distance (m), looking at a point `height` m above it; default the renderer's own (the
model's tracking camera, else the scene's middle at the model's extent).
"""

from __future__ import annotations

import sys
from pathlib import Path

from benchmarks.common import parse_args, resolved_config

DEFAULTS = {"run": "", "seed": 1000003, "steps": "100,200,300", "width": 640, "height": 480, "scale": 0.5, "camera": "", "out": ""}


def main(argv: list[str]) -> None:
    args = parse_args(argv, DEFAULTS, __doc__)
    if not args["run"] or not args["out"]:
        print("error: give run=<run dir> and out=<image file>", file=sys.stderr)
        raise SystemExit(2)
    import imageio.v2 as imageio
    import numpy as np

    from ppo_control.api import load_policy
    from ppo_control.envs.joystick import tracking_indices
    from ppo_control.envs.mujoco import make_reference_vec_env
    from ppo_control.rendering.video import HostScene, command_and_measured, draw_overlay, open_frames, velocity_rows

    config = resolved_config(Path(args["run"]))
    policy = load_policy(args["run"])
    env = make_reference_vec_env(config["env"]["id"], 1, config["env"]["kwargs"] or {}, num_threads=1)
    where = tracking_indices(env.task.env_id, env.task.groups)
    policy_size = dict(env.task.groups)["policy"]
    wanted = sorted(int(step) for step in str(args["steps"]).split(","))
    obs, episode_return, shots = env.reset(int(args["seed"])), 0.0, []
    scene = HostScene(env.mj_model)
    frames = open_frames(scene, int(args["width"]), int(args["height"]))
    if args["camera"]:  # a fixed arm's model has no tracking camera, and the default view cuts it off
        import mujoco

        azimuth, elevation, distance, height = (float(v) for v in str(args["camera"]).split(","))
        camera = frames.camera
        camera.type, camera.fixedcamid = mujoco.mjtCamera.mjCAMERA_FREE, -1
        camera.azimuth, camera.elevation, camera.distance, camera.lookat[2] = azimuth, elevation, distance, height
    for step in range(1, wanted[-1] + 1):
        result = env.step(policy(obs[:, :policy_size]))
        obs, episode_return = result.obs, episode_return + float(result.reward[0])
        if len(result.episode_lengths):
            print(f"error: the episode ended at step {step}; choose another seed or earlier steps", file=sys.stderr)
            raise SystemExit(1)
        if step in wanted:
            qpos, qvel = env.physics_states()
            scene.data.mocap_pos[:] = env.task.physics.data[0].mocap_pos  # a manipulation task's target
            scene.show(qpos[0], qvel[0])
            rows = tuple(row for command, measured in command_and_measured(obs, where)[:1] for row in velocity_rows(command, measured))
            shots.append(draw_overlay(frames(), step * env.control_period_s, step, episode_return, rows))
    image = np.concatenate(shots, axis=1)
    stride = max(1, round(1 / float(args["scale"])))
    imageio.imwrite(args["out"], image[::stride, ::stride], quality=85)
    print(f"written {args['out']}")


if __name__ == "__main__":
    main(sys.argv[1:])
