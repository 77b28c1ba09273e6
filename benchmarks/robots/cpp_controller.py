"""A robot's exported file driven by the C++ controller loop (examples/cpp/robot_controller.cpp, on
MuJoCo's C API and libtorch) and by the same loop in Python (ppo_control.deploy.controller.drive), on the
model envpool's asset package ships, from its home keyframe, one fixed command per run: tracking
error and falls side by side, per command.

    python -m benchmarks.robots.cpp_controller export=<policy.pt> [steps=500] [build=build/cpp] [out=<dir>]

Builds the C++ example into `build` first when its binary is missing (CMake, a C++17 compiler, the
torch and mujoco wheels' libraries). Writes cpp_controller.json and cpp_controller.md into `out`
(default: the export's folder). Both loops are the same arithmetic (tests/deploy/test_export.py checks
them step for step); a walking gait is chaotic, so over hundreds of steps float rounding can part
them, and the table shows by how much that moves the figures. A policy with a gait clock runs it at
the middle of its frequency range. An export whose policy reads no command (PandaPickCube) is
refused: there is no tracking to compare; so is one whose policy reads no base velocity and gravity
(Spot), whose tracking the loops cannot measure from the observation.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common import ROOT, markdown_table, parse_args, versions, write_json

DEFAULTS = {"export": "", "steps": 500, "build": "build/cpp", "out": ""}

# Commands within every joystick robot's ranges (vx, vy, yaw rate): standing, each planar direction, turning.
COMMANDS = [
    ("stand", (0.0, 0.0, 0.0)),
    ("forward 0.5 m/s", (0.5, 0.0, 0.0)),
    ("backward 0.5 m/s", (-0.5, 0.0, 0.0)),
    ("left 0.4 m/s", (0.0, 0.4, 0.0)),
    ("right 0.4 m/s", (0.0, -0.4, 0.0)),
    ("turn left 0.8 rad/s", (0.0, 0.0, 0.8)),
    ("turn right 0.8 rad/s", (0.0, 0.0, -0.8)),
    ("backward and turning", (-0.5, 0.0, 0.5)),
]
# The observation elements both loops measure the tracking error and falls from.
MEASURED = ("linvel:x", "linvel:y", "gravity:z")
RESULT = re.compile(r"tracking: planar ([\d.]+) m/s, yaw ([\d.]+) rad/s over \d+ steps; (no fall|fell at step (\d+))")


def build_controller(build: Path) -> Path:
    import mujoco
    import torch

    binary = build / "robot_controller"
    if not binary.exists():
        configure = [
            "cmake", "-S", str(ROOT / "examples" / "cpp"), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
            f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}", f"-DMUJOCO_DIR={Path(mujoco.__file__).parent}",
        ]  # fmt: skip
        subprocess.run(configure, check=True, capture_output=True)
        subprocess.run(["cmake", "--build", str(build), "-j2", "--target", "robot_controller"], check=True, capture_output=True)
    return binary


def gait_frequency_hz(metadata: dict) -> float | None:
    """The middle of the gait clock's frequency range, for a policy that reads a clock."""
    gait = metadata["robot"].get("gait_phase")
    return None if gait is None else sum(gait["frequency_hz_range"]) / 2


def model_path(env_id_or_name: str) -> str:
    """The robot's model in envpool's asset package: the XML its training ran on."""
    from ppo_control.envs import envpool_backend
    from ppo_control.robots import playground

    task = playground.robot_task(env_id_or_name)
    return playground.model_path(task, envpool_backend.spec_config(task.env_id, {})["base_path"])


def main(argv: list[str]) -> None:
    args = parse_args(argv, DEFAULTS, __doc__)
    if not args["export"] or not Path(args["export"]).is_file():
        print("error: give export=<an exported policy.pt>", file=sys.stderr)
        raise SystemExit(2)
    import numpy as np
    import torch

    from ppo_control.deploy.controller import RobotContract, drive

    export = Path(args["export"])
    extra = {"metadata.json": ""}
    policy = torch.jit.load(str(export), _extra_files=extra)
    metadata = json.loads(extra["metadata.json"])
    if not metadata.get("robot", {}).get("command_names"):
        print(f"error: {export}'s policy reads no command ({metadata.get('task')}): there is no tracking to compare", file=sys.stderr)
        raise SystemExit(2)
    if not set(MEASURED) <= set(RobotContract.from_metadata(metadata).elements):
        print(
            f"error: {export}'s policy does not read {', '.join(MEASURED)} ({metadata.get('task')}): both loops measure tracking and"
            " falls from those elements; compare this export with sim2sim instead",
            file=sys.stderr,
        )
        raise SystemExit(2)
    xml, steps, frequency = model_path(metadata["env_id"]), int(args["steps"]), gait_frequency_hz(metadata)
    clock = [] if frequency is None else ["--gait-frequency", str(frequency)]
    binary = build_controller(Path(args["build"]))
    torch.set_num_threads(1)  # the C++ loop runs libtorch on one thread
    rows = []
    for name, command in COMMANDS:
        started = time.perf_counter()
        out = subprocess.run(
            [str(binary), str(export), xml, "--command", *map(str, command), "--steps", str(steps), *clock],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        cpp_s = time.perf_counter() - started
        planar, yaw, _, fell = RESULT.search(out).groups()
        started = time.perf_counter()
        python = drive(policy, xml, metadata, np.array(command), steps, gait_frequency_hz=frequency)
        python_s = time.perf_counter() - started
        rows.append(
            {
                "command": name,
                "vx_vy_yaw": list(command),
                "cpp": {
                    "planar_error": float(planar),
                    "yaw_error": float(yaw),
                    "fell_at": None if fell is None else int(fell),
                    "wall_s": cpp_s,
                },
                "python": {
                    "planar_error": python.planar_error,
                    "yaw_error": python.yaw_error,
                    "fell_at": python.fell_at,
                    "wall_s": python_s,
                },
            }
        )
        print(f"{name}: C++ planar {float(planar):.3f} yaw {float(yaw):.3f}; Python {python.planar_error:.3f} {python.yaw_error:.3f}")
    out_dir = Path(args["out"]) if args["out"] else export.parent
    write_json(out_dir / "cpp_controller.json", {"export": str(export), "steps": steps, "rows": rows, "versions": versions()})

    def fall(value) -> str:
        return "no" if value is None else f"step {value}"

    table = markdown_table(
        ["command (vx, vy, yaw)", "C++ planar m/s", "Python planar m/s", "C++ yaw rad/s", "Python yaw rad/s", "C++ fall", "Python fall"],
        [
            [
                f"{r['command']} {tuple(r['vx_vy_yaw'])}",
                f"{r['cpp']['planar_error']:.3f}",
                f"{r['python']['planar_error']:.3f}",
                f"{r['cpp']['yaw_error']:.3f}",
                f"{r['python']['yaw_error']:.3f}",
                fall(r["cpp"]["fell_at"]),
                fall(r["python"]["fell_at"]),
            ]
            for r in rows
        ],
    )
    header = f"{export}: {steps} control steps per command from the home keyframe, C++ (robot_controller) and Python (controller.drive)\n\n"
    (out_dir / "cpp_controller.md").write_text(header + table + "\n")
    print(table)


if __name__ == "__main__":
    main(sys.argv[1:])
