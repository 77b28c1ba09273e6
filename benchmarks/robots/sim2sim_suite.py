"""A robot run's exported file on its MuJoCo reference (`python -m ppo_control.sim2sim`): the nominal
robot beside `evaluate`, the robot perturbed (latency, friction, added mass, motor gain), the ONNX
file, and the same file with its metadata broken on purpose (a complete, self-consistent contract
that is wrong), so that what the metadata carries is seen to matter.

    python -m benchmarks.robots.sim2sim_suite run=<run dir> [episodes=16] [out=<run>/sim2sim/suite]

The run needs `export/policy.pt` (and `export/policy.onnx` for the ONNX row) and `eval.json` from
`evaluate episodes=<episodes>`. Writes suite.json and suite.md into `out`.
"""

from __future__ import annotations

import copy
import json
import sys
import time
from pathlib import Path

from benchmarks.common import markdown_table, parse_args, run_directory, write_json

DEFAULTS = {"run": None, "episodes": 16, "out": ""}

PERTURBATIONS = [
    ("nominal", {}),
    ("latency 1 control period", {"latency": 1}),
    ("latency 2 control periods", {"latency": 2}),
    ("friction x0.5", {"friction": 0.5}),
    ("friction x1.5", {"friction": 1.5}),
    ("base +2 kg", {"added_mass": 2.0}),
    ("motor gain x0.8", {"kp_scale": 0.8}),
    ("motor gain x1.25", {"kp_scale": 1.25}),
]


def broken_contracts(metadata: dict) -> list[tuple[str, dict]]:
    """Metadata a controller would accept (complete, self-consistent) and that describes another robot
    than the one trained: each tells the controller one thing wrong."""
    robot = metadata["robot"]
    cases = []
    halved = copy.deepcopy(metadata)  # the controller runs at half the trained rate
    halved["robot"].update(control_period_s=2 * robot["control_period_s"], sim_substeps=2 * robot["sim_substeps"])
    cases.append(("control period x2 (sim_substeps x2)", halved))
    pose = copy.deepcopy(metadata)  # every thigh joint's default angle 0.3 rad off
    pose["robot"]["default_pose"] = [v + 0.3 * ("thigh" in name) for v, name in zip(robot["default_pose"], robot["joint_names"])]
    cases.append(("default pose: thighs +0.3 rad", pose))
    scale = copy.deepcopy(metadata)
    scale["robot"]["action_scale"] = 2 * robot["action_scale"]
    cases.append(("action scale x2", scale))
    return cases


def with_metadata(export: Path, metadata: dict, out: Path) -> Path:
    import torch

    extra = {"metadata.json": ""}
    module = torch.jit.load(str(export), _extra_files=extra)
    torch.jit.save(module, str(out), _extra_files={"metadata.json": json.dumps(metadata)})
    return out


def row(name: str, result: dict) -> list[str]:
    d = result["diagnostics"]
    return [
        name,
        f"{result['return_mean']:.2f} ± {result['return_std']:.2f}",
        f"{result['fall_rate']:.0%}",
        f"{d['tracking_error_lin']:.3f}",
        f"{d['tracking_error_ang']:.3f}",
        f"{result['seconds']:.0f}" if "seconds" in result else "-",
    ]


def main(argv: list[str]) -> None:
    args = parse_args(argv, DEFAULTS, __doc__)
    run = run_directory(args)
    from ppo_control.deploy.sim2sim import sim2sim

    out = Path(args["out"] or run / "sim2sim" / "suite")
    out.mkdir(parents=True, exist_ok=True)
    export, episodes = run / "export" / "policy.pt", int(args["episodes"])
    results: dict[str, dict] = {}

    def measure(name: str, **arguments) -> None:
        started = time.perf_counter()
        result = sim2sim(run=str(run), episodes=episodes, out=str(out / f"{len(results):02d}.json"), **arguments)
        result["seconds"] = time.perf_counter() - started
        results[name] = result
        print(markdown_table(["", "return", "falls", "planar (m/s)", "yaw (rad/s)", "s"], [row(name, result)]).splitlines()[-1], flush=True)

    for name, perturbation in PERTURBATIONS:
        measure(name, **perturbation)
    if (run / "export" / "policy.onnx").is_file():
        measure("nominal, ONNX file", export=str(run / "export" / "policy.onnx"))
    extra = {"metadata.json": ""}
    import torch

    torch.jit.load(str(export), _extra_files=extra)
    for name, metadata in broken_contracts(json.loads(extra["metadata.json"])):
        measure(f"wrong contract: {name}", export=str(with_metadata(export, metadata, out / "broken.pt")))

    evaluation = json.loads((run / "eval.json").read_text())
    table = [row(f"evaluate (eval.json, {evaluation['episodes']} episodes, sensor noise on)", evaluation)]
    table += [row(name, result) for name, result in results.items()]
    headers = ["", "return", "falls", "planar error (m/s)", "yaw error (rad/s)", "seconds"]
    text = f"# sim2sim of {run}\n\n{episodes} episodes per row, the run's evaluation seeds.\n\n{markdown_table(headers, table)}\n"
    (out / "suite.md").write_text(text, encoding="utf-8")
    write_json(out / "suite.json", {"run": str(run), "episodes": episodes, "evaluate": evaluation, "rows": results})
    print(text)


if __name__ == "__main__":
    main(sys.argv[1:])
