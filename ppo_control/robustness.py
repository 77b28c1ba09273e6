"""python -m ppo_control.robustness run=<run_dir> [episodes=5] [mass=[0.5,...]] [friction=[0.5,...]] [delay=[0,1,2,3]]
    [checkpoint=<file>] [seed=...]

Evaluates a run's deterministic policy over a grid of perturbations of the robot: every body mass
scale x every friction scale (no delay), and every action delay (nominal mass and friction). Each
cell is an evaluation with fixed scales (randomize.body_mass=[m,m], randomize.friction=[f,f],
randomize.action_delay=[d,d]) on the run's own evaluation seeds, so the (1, 1, 0) cell is the
nominal evaluation. Writes into <run_dir>/robustness/: robustness.csv (one row per cell),
robustness.md (the grids and a summary: nominal, worst cell, mean over cells) and robustness.png
(mass x friction heatmap beside return against delay).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ppo_control.config import ConfigError, RobustnessArgs, command_help, parse_command_args
from ppo_control.errors import UserError, run_cli
from ppo_control.plot import save_figure
from ppo_control.run_layout import checkpoint_to_load

OUT_DIR = "robustness"  # inside the run directory
CSV_FILE = "robustness.csv"  # one row per cell (benchmarks/robustness_suite.py reads it back)
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
    from ppo_control.evaluation import EVAL_SEED_OFFSET, evaluate_policy, make_eval_envs  # heavy imports after the checks
    from ppo_control.observations import needs_privileged
    from ppo_control.randomization import Randomization
    from ppo_control.runs import load_run

    loaded = load_run(args.run, checkpoint)
    seed = args.seed if args.seed is not None else loaded.cfg.seed + EVAL_SEED_OFFSET
    cells = []
    for mass, friction, delay in grid_cells(args):
        perturbation = Randomization(body_mass=(mass, mass), friction=(friction, friction), action_delay=(delay, delay))
        envs = make_eval_envs(loaded.cfg.env, args.episodes, perturbation, needs_privileged(loaded.cfg.policy))
        try:
            returns, lengths = evaluate_policy(loaded.policy, envs, args.episodes, seed)
        finally:
            envs.close()
        cells.append(Cell(mass, friction, delay, float(returns.mean()), float(returns.std()), float(lengths.mean())))
        print(f"mass x{mass:g} friction x{friction:g} delay {delay}: return {cells[-1].return_mean:.1f} +- {cells[-1].return_std:.1f}")
    out = loaded.run_dir / OUT_DIR
    try:
        out.mkdir(parents=True, exist_ok=True)
        write_csv(out / CSV_FILE, cells)
        (out / MARKDOWN_FILE).write_text(markdown(loaded, args, cells), encoding="utf-8")
        plot(out / PLOT_FILE, args, cells, f"{loaded.cfg.task} {loaded.name} (step {int(loaded.state['step']):,})")
    except OSError as exc:
        raise UserError(f"cannot write into '{out}' ({exc.strerror or exc})") from None
    return out, cells


def summary(cells: list[Cell]) -> dict[str, float]:
    """Nominal return (mass 1, friction 1, no delay, when in the grid), the worst cell, and the mean over cells."""
    nominal = next((c.return_mean for c in cells if (c.mass, c.friction, c.delay) == (1.0, 1.0, 0)), float("nan"))
    returns = [c.return_mean for c in cells]
    return {"nominal": nominal, "worst": min(returns), "mean": float(np.mean(returns))}


def write_csv(path: Path, cells: list[Cell]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["mass_scale", "friction_scale", "action_delay", "return_mean", "return_std", "length_mean"])
        for c in cells:
            writer.writerow([c.mass, c.friction, c.delay, f"{c.return_mean:.3f}", f"{c.return_std:.3f}", f"{c.length_mean:.1f}"])


def markdown(loaded, args, cells: list[Cell]) -> str:
    lookup = {(c.mass, c.friction, c.delay): c for c in cells}
    frictions = [float(f) for f in args.friction]
    lines = [
        f"# Robustness of {loaded.cfg.task} {loaded.name} (checkpoint {loaded.checkpoint_path.name}, step {int(loaded.state['step']):,})",
        "",
        f"Deterministic policy, {args.episodes} episodes per cell. Mean return; rows: body mass scale, columns: friction scale (no delay).",
        "",
        "| mass \\ friction | " + " | ".join(f"x{f:g}" for f in frictions) + " |",
        "|---|" + "---|" * len(frictions),
    ]
    for m in args.mass:
        lines.append(f"| x{float(m):g} | " + " | ".join(f"{lookup[(float(m), f, 0)].return_mean:.1f}" for f in frictions) + " |")
    lines += ["", "| action delay (steps) | " + " | ".join(str(int(d)) for d in args.delay) + " |", "|---|" + "---|" * len(args.delay)]
    lines.append("| return | " + " | ".join(f"{lookup[(1.0, 1.0, int(d))].return_mean:.1f}" for d in args.delay) + " |")
    s = summary(cells)
    lines += ["", f"Nominal {s['nominal']:.1f}; worst cell {s['worst']:.1f}; mean over {len(cells)} cells {s['mean']:.1f}.", ""]
    return "\n".join(lines)


def plot(path: Path, args, cells: list[Cell], title: str) -> None:
    from matplotlib.figure import Figure  # the Figure API (Agg): no pyplot state

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


if __name__ == "__main__":
    run_cli(
        main,
        help=lambda: command_help(__doc__, RobustnessArgs, example="python -m ppo_control.robustness run=runs/Hopper/<run> episodes=3"),
    )
