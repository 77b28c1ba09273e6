"""A run's return over a grid of perturbations, as `python -m ppo_control.robustness` and
`ppo_control.robustness()` run it (the command's usage and description: ppo_control/robustness.py):
the cells, their evaluation (through the controller contract where the robot has a MuJoCo
reference) and the CSV, markdown and figure written into <run>/robustness/.

The modules that load torch (the policy, the evaluation) are imported inside the functions that use
them: the command refuses a wrong argument or run path without torch (tests/runs/test_resume.py
checks it).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure  # the Figure API (Agg): no pyplot state

from ppo_control.analysis.curves import save_figure
from ppo_control.config import ConfigError, RobustnessArgs, parse_command_args
from ppo_control.config.errors import UserError
from ppo_control.deploy.contract import actor_groups, controller_contract
from ppo_control.deploy.sim2sim import Perturbation, drive
from ppo_control.envs.mujoco import has_reference
from ppo_control.envs.observations import needs_privileged
from ppo_control.envs.randomization import Randomization
from ppo_control.runs.layout import checkpoint_to_load

OUT_DIR = "robustness"  # inside the run directory
CSV_FILE = "robustness.csv"  # one row per cell (benchmarks/scores/robustness_suite.py reads it back)
MARKDOWN_FILE = "robustness.md"
PLOT_FILE = "robustness.png"


@dataclass(frozen=True)
class Cell:
    mass: float
    friction: float
    delay: int
    return_mean: float
    return_std: float
    length_mean: float
    fall_rate: float
    tracking_lin: float | None = None  # a joystick robot's planar velocity error (m/s)
    tracking_ang: float | None = None  # and yaw-rate error (rad/s)


def check_args(args) -> None:
    if args.episodes < 1:
        raise ConfigError(f"robustness: episodes={args.episodes} is not allowed: episodes must be >= 1")
    for key, ok, allowed in (
        ("mass", lambda v: v > 0, "> 0"),
        ("friction", lambda v: v >= 0, ">= 0"),
        ("delay", lambda v: v >= 0, ">= 0 (control steps)"),
    ):
        values = list(args[key])
        if not values or not all(ok(v) for v in values):
            raise ConfigError(f"robustness: {key}={values} is not allowed: {key} must be a non-empty list of scales {allowed}")


def grid_cells(args) -> list[tuple[float, float, int]]:
    """(mass, friction, delay) of every cell: the mass x friction grid at delay 0, then each delay at
    nominal mass and friction (a cell already in the grid is not evaluated twice)."""
    cells = [(float(m), float(f), 0) for m in args.mass for f in args.friction]
    cells += [(1.0, 1.0, int(d)) for d in args.delay if (1.0, 1.0, int(d)) not in cells]
    return cells


def evaluate_grid(run: str | Path, **arguments: Any) -> tuple[Path, list[Cell]]:
    """The grid's evaluations, written to <run>/robustness/; returns (that directory, the cells)."""
    args = parse_command_args(RobustnessArgs, {"run": str(run), **arguments}, "robustness")
    check_args(args)
    checkpoint = checkpoint_to_load(args.run, args.checkpoint)
    # these load torch: see the module's docstring
    from ppo_control.rl.evaluation import EVAL_SEED_OFFSET, evaluate_episodes, make_eval_envs
    from ppo_control.runs.directory import load_run

    loaded = load_run(args.run, checkpoint)
    seed = args.seed if args.seed is not None else loaded.cfg.seed + EVAL_SEED_OFFSET
    if has_reference(str(loaded.cfg.env.id)):
        cells = robot_cells(loaded, args, seed)
    else:
        cells = []
        for mass, friction, delay in grid_cells(args):
            perturbation = Randomization(body_mass=(mass, mass), friction=(friction, friction), action_delay=(delay, delay))
            envs = make_eval_envs(loaded.cfg.env, args.episodes, perturbation, needs_privileged(loaded.cfg.policy))
            try:
                evaluation = evaluate_episodes(loaded.policy, envs, args.episodes, seed)
            finally:
                envs.close()
            cells.append(cell(mass, friction, delay, evaluation))
    out = loaded.run_dir / OUT_DIR
    out = loaded.run_dir / OUT_DIR
    try:
        out.mkdir(parents=True, exist_ok=True)
        write_csv(out / CSV_FILE, cells)
        (out / MARKDOWN_FILE).write_text(markdown(loaded, args, cells), encoding="utf-8")
        plot(out / PLOT_FILE, args, cells, f"{loaded.cfg.task} {loaded.name} (step {int(loaded.state['step']):,})")
    except OSError as exc:
        raise UserError(f"cannot write into '{out}' ({exc.strerror or exc})") from None
    return out, cells


def cell(mass: float, friction: float, delay: int, evaluation) -> Cell:
    returns, d = evaluation.returns, evaluation.diagnostics
    made = Cell(
        mass,
        friction,
        delay,
        float(returns.mean()),
        float(returns.std()),
        float(evaluation.lengths.mean()),
        float(evaluation.terminated.mean()),
        d.get("tracking_error_lin"),
        d.get("tracking_error_ang"),
    )
    tracking = ""
    if made.tracking_lin is not None:
        tracking = f" | falls {made.fall_rate:.0%} | tracking {made.tracking_lin:.3f} m/s {made.tracking_ang:.3f} rad/s"
    print(f"mass x{mass:g} friction x{friction:g} delay {delay}: return {made.return_mean:.1f} +- {made.return_std:.1f}{tracking}")
    return made


def robot_cells(loaded, args, seed: int) -> list[Cell]:
    """The grid on a robot's MuJoCo reference, the run's policy driven through the controller
    contract its export would carry (ppo_control.sim2sim); the delay is the controller's latency."""
    from ppo_control.deploy.loading import load_policy  # loads torch: see the module's docstring

    cfg = loaded.cfg
    policy = load_policy(loaded.run_dir, str(loaded.checkpoint_path))
    metadata = {
        **controller_contract(cfg.env, actor_groups(loaded.env_info.groups, list(cfg.policy.actor_obs)), int(cfg.policy.actor_history)),
        "env_id": str(cfg.env.id),
        "max_episode_steps": loaded.env_info.max_episode_steps,
        "obs_dim": policy.obs_dim,
        "action_low": [float(v) for v in loaded.env_info.action_low],
        "action_high": [float(v) for v in loaded.env_info.action_high],
    }
    kwargs = dict(cfg.env.kwargs) if cfg.env.get("kwargs") else {}
    cells = []
    for mass, friction, delay in grid_cells(args):
        perturbation = Perturbation(latency=delay, friction=friction, mass_scale=mass)
        evaluation, _, _, _ = drive(policy, metadata, kwargs, args.episodes, seed, perturbation)
        cells.append(cell(mass, friction, delay, evaluation))
    return cells


def summary(cells: list[Cell]) -> dict[str, float]:
    """Nominal return (mass 1, friction 1, no delay, when in the grid), the worst cell, and the mean over cells."""
    nominal = next((c.return_mean for c in cells if (c.mass, c.friction, c.delay) == (1.0, 1.0, 0)), float("nan"))
    returns = [c.return_mean for c in cells]
    return {"nominal": nominal, "worst": min(returns), "mean": float(np.mean(returns))}


def write_csv(path: Path, cells: list[Cell]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        header = ["mass_scale", "friction_scale", "action_delay", "return_mean", "return_std", "length_mean", "fall_rate"]
        writer.writerow(header + ["tracking_lin", "tracking_ang"])  # empty where the task has no command to track
        for c in cells:
            tracking = ["" if v is None else f"{v:.4f}" for v in (c.tracking_lin, c.tracking_ang)]
            figures = [f"{c.return_mean:.3f}", f"{c.return_std:.3f}", f"{c.length_mean:.1f}", f"{c.fall_rate:.4f}"]
            writer.writerow([c.mass, c.friction, c.delay, *figures, *tracking])


def markdown(loaded, args, cells: list[Cell]) -> str:
    lookup = {(c.mass, c.friction, c.delay): c for c in cells}
    frictions = [float(f) for f in args.friction]

    def grids(title: str, value) -> list[str]:
        """One figure of every cell: the mass x friction grid (no delay), then the delays."""
        lines = [f"{title}; rows: body mass scale, columns: friction scale (no delay).", ""]
        lines += ["| mass \\ friction | " + " | ".join(f"x{f:g}" for f in frictions) + " |", "|---|" + "---|" * len(frictions)]
        for m in args.mass:
            lines.append(f"| x{float(m):g} | " + " | ".join(value(lookup[(float(m), f, 0)]) for f in frictions) + " |")
        lines += ["", "| action delay (steps) | " + " | ".join(str(int(d)) for d in args.delay) + " |", "|---|" + "---|" * len(args.delay)]
        lines += ["| " + title.lower() + " | " + " | ".join(value(lookup[(1.0, 1.0, int(d))]) for d in args.delay) + " |", ""]
        return lines

    lines = [
        f"# Robustness of {loaded.cfg.task} {loaded.name} (checkpoint {loaded.checkpoint_path.name}, step {int(loaded.state['step']):,})",
        "",
        f"Deterministic policy, {args.episodes} episodes per cell.",
        "",
        *grids("Mean return", lambda c: f"{c.return_mean:.1f}"),
    ]
    if cells[0].tracking_lin is not None:
        lines += [
            "On the robot's MuJoCo reference, through its controller contract (the delay is the controller's latency).",
            "",
            *grids("Fall rate", lambda c: f"{c.fall_rate:.0%}"),
            *grids("Planar tracking error (m/s)", lambda c: f"{c.tracking_lin:.3f}"),
            *grids("Yaw-rate tracking error (rad/s)", lambda c: f"{c.tracking_ang:.3f}"),
        ]
    s = summary(cells)
    lines += [f"Nominal {s['nominal']:.1f}; worst cell {s['worst']:.1f}; mean over {len(cells)} cells {s['mean']:.1f}.", ""]
    return "\n".join(lines)


def plot(path: Path, args, cells: list[Cell], title: str) -> None:
    lookup = {(c.mass, c.friction, c.delay): c.return_mean for c in cells}
    masses, frictions = [float(m) for m in args.mass], [float(f) for f in args.friction]
    grid = np.array([[lookup[(m, f, 0)] for f in frictions] for m in masses])
    fig = Figure(figsize=(11, 4.6), layout="constrained")
    heat, line = fig.subplots(1, 2, width_ratios=[1.3, 1])
    image = heat.imshow(grid, origin="lower", cmap="viridis", aspect="auto")
    heat.set_xticks(range(len(frictions)), [f"x{f:g}" for f in frictions])
    heat.set_yticks(range(len(masses)), [f"x{m:g}" for m in masses])
    heat.set_xlabel("friction scale")
    heat.set_ylabel("body mass scale")
    heat.set_title("mean return, no delay")
    middle = (grid.max() + grid.min()) / 2
    for i, j in np.ndindex(grid.shape):
        heat.text(j, i, f"{grid[i, j]:.0f}", ha="center", va="center", fontsize=8, color="black" if grid[i, j] > middle else "white")
    fig.colorbar(image, ax=heat)
    delays = [int(d) for d in args.delay]
    line.plot(delays, [lookup[(1.0, 1.0, d)] for d in delays], marker="o")
    line.set_xticks(delays)
    line.set_xlabel("action delay (control steps)")
    line.set_ylabel("mean return")
    line.set_title("nominal mass and friction")
    line.grid(alpha=0.3)
    fig.suptitle(title)
    save_figure(fig, path)


def main(argv: list[str]) -> None:
    out, cells = evaluate_grid(**parse_command_args(RobustnessArgs, argv, "robustness"))  # parsed here: errors name the CLI keys
    s = summary(cells)
    print(f"nominal {s['nominal']:.1f} | worst cell {s['worst']:.1f} | mean over {len(cells)} cells {s['mean']:.1f}")
    for name in (CSV_FILE, MARKDOWN_FILE, PLOT_FILE):
        print(f"written     {out / name}")
