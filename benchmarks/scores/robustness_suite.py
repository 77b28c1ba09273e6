"""Robustness of benchmark suites: the perturbation grid of every finished run, summarized per suite.

    python -m benchmarks.scores.robustness_suite suites=[benchmarks/results/robust-1M/nominal,...] [episodes=5]
        [out=benchmarks/results/robust-1M/robustness.md]

For every run directory <suite>/runs/<task>/s<seed> that holds a checkpoint, runs
`ppo_control.api.robustness` (body mass x friction grid, and action delays; see
ppo_control/robustness.py) unless <run>/robustness/robustness.csv already exists, then writes one
markdown table: per suite and task, the mean over seeds of the nominal return, the worst cell and
the mean over the grid (each seed's value in brackets), and a figure per task with every suite's
seed-averaged mass x friction heatmap side by side (<out stem>_<task>.png).
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np

from benchmarks.common import parse_args, rel
from ppo_control.analysis.curves import save_figure
from ppo_control.analysis.robustness_grid import CSV_FILE, OUT_DIR
from ppo_control.runs.layout import CHECKPOINT_DIR, LAST_CHECKPOINT

ROBUSTNESS_CSV = Path(OUT_DIR) / CSV_FILE  # what `ppo_control.robustness run=...` writes into a run
DEFAULTS = {"suites": [], "episodes": 5, "out": "benchmarks/results/robust-1M/robustness.md"}


def read_cells(run: Path) -> list[dict]:
    with open(run / ROBUSTNESS_CSV, encoding="utf-8") as handle:
        return [{k: float(v) for k, v in row.items() if v != ""} for row in csv.DictReader(handle)]


def summarize(cells: list[dict]) -> dict[str, float]:
    nominal = [c["return_mean"] for c in cells if (c["mass_scale"], c["friction_scale"], c["action_delay"]) == (1.0, 1.0, 0.0)]
    returns = [c["return_mean"] for c in cells]
    return {"nominal": nominal[0], "worst": min(returns), "mean": float(np.mean(returns))}


def main(argv: list[str]) -> None:
    args = parse_args(argv, DEFAULTS, __doc__)
    from ppo_control.api import robustness

    table = ["| suite | task | seeds | nominal | worst cell | mean over grid |", "|---|---|---:|---:|---:|---:|"]
    grids: dict[str, dict[str, list[np.ndarray]]] = {}
    for suite in map(Path, args["suites"]):
        for task_dir in sorted((suite / "runs").iterdir()):
            # a committed suite keeps its runs' robustness.csv but not their checkpoints (git-ignored)
            runs = sorted(
                p for p in task_dir.iterdir() if (p / ROBUSTNESS_CSV).is_file() or (p / CHECKPOINT_DIR / LAST_CHECKPOINT).is_file()
            )
            summaries = []
            for run in runs:
                if not (run / ROBUSTNESS_CSV).is_file():
                    robustness(run, episodes=args["episodes"])
                cells = read_cells(run)
                summaries.append(summarize(cells))
                masses = sorted({c["mass_scale"] for c in cells if c["action_delay"] == 0})
                frictions = sorted({c["friction_scale"] for c in cells if c["action_delay"] == 0})
                lookup = {(c["mass_scale"], c["friction_scale"]): c["return_mean"] for c in cells if c["action_delay"] == 0}
                grids.setdefault(task_dir.name, {}).setdefault(suite.name, []).append(
                    np.array([[lookup[(m, f)] for f in frictions] for m in masses])
                )
            if not summaries:
                continue
            cols = []
            for key in ("nominal", "worst", "mean"):
                values = [s[key] for s in summaries]
                cols.append(f"{np.mean(values):.1f} ({', '.join(f'{v:.0f}' for v in values)})")
            table.append(f"| {suite.name} | {task_dir.name} | {len(summaries)} | " + " | ".join(cols) + " |")
    out = Path(args["out"])
    out.write_text("\n".join(table) + "\n", encoding="utf-8")
    print("\n".join(table))
    for task, by_suite in grids.items():
        plot_task(out.with_name(f"{out.stem}_{task}.png"), task, by_suite, masses, frictions)
    print(f"written {rel(out)}")


def plot_task(path: Path, task: str, by_suite: dict[str, list[np.ndarray]], masses, frictions) -> None:
    from matplotlib.figure import Figure

    means = {suite: np.mean(grids, axis=0) for suite, grids in by_suite.items()}
    low, high = min(g.min() for g in means.values()), max(g.max() for g in means.values())
    fig = Figure(figsize=(4.6 * len(means) + 1, 4.2), layout="constrained")
    axes = np.atleast_1d(fig.subplots(1, len(means)))
    for ax, (suite, grid) in zip(axes, means.items()):
        image = ax.imshow(grid, origin="lower", cmap="viridis", vmin=low, vmax=high, aspect="auto")
        ax.set_xticks(range(len(frictions)), [f"x{f:g}" for f in frictions])
        ax.set_yticks(range(len(masses)), [f"x{m:g}" for m in masses])
        ax.set_xlabel("friction scale")
        ax.set_ylabel("body mass scale")
        ax.set_title(f"{suite} ({len(by_suite[suite])} seeds)")
        for i, j in np.ndindex(grid.shape):
            color = "white" if grid[i, j] < (low + high) / 2 else "black"
            ax.text(j, i, f"{grid[i, j]:.0f}", ha="center", va="center", fontsize=7, color=color)
    fig.colorbar(image, ax=axes.tolist())
    fig.suptitle(f"{task}: mean return over seeds, no delay")
    save_figure(fig, path)


if __name__ == "__main__":
    main(sys.argv[1:])
