"""Ours against rsl_rl on a Playground robot task, from runs already made: curves and a table.

    python -m benchmarks.robots.robots_vs_rsl_rl ours=[<run dir>,...] rsl_rl=[<rsl_rl out dir>,...]
        [tracking=0.5] [max_falls=0.1] [out=benchmarks/results/robots/vs-rsl_rl]

`ours` are `python -m ppo_control.train task=<T> seed=<s>` run directories, `rsl_rl` the folders
`benchmarks/robots/rsl_rl_playground.py --out` wrote, one per seed (paired in order). Both sides' clocks
count training only: the sum of the updates' own times (ours: steps_this_update / sps per row;
rsl_rl: train_time_s, less the start-up before its first iteration), so start-up, evaluations and
checkpoint writes are outside on both. Writes <out>.json, <out>.md and <out>.png: evaluation return
and planar tracking error against env steps and against training seconds, and per seed the final
evaluation, the time and steps to an evaluation tracking error of `tracking` m/s in an evaluation
where at most `max_falls` of the episodes fell (null if never: a robot that falls at once is
measured over a few steps, whose error says nothing of tracking), and the time each side took to
reach rsl_rl's final return.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from benchmarks.common import RESULTS_DIR, markdown_table, parse_args, read_metrics, rel, write_json

DEFAULTS = {"ours": [], "rsl_rl": [], "tracking": 0.5, "max_falls": 0.1, "out": str(RESULTS_DIR / "robots" / "vs-rsl_rl")}


def ours_curve(run_dir: Path) -> dict[str, list[float]]:
    """Evaluation rows of one of our runs, with the training seconds before each."""
    seconds, curve = 0.0, {"step": [], "seconds": [], "return": [], "tracking_lin": [], "tracking_ang": [], "fall_rate": []}
    for row in read_metrics(run_dir):
        if row.get("sps"):
            seconds += row["steps_this_update"] / row["sps"]
        if row.get("eval_return") is not None:
            curve["step"].append(row["step"])
            curve["seconds"].append(seconds)
            curve["return"].append(row["eval_return"])
            curve["tracking_lin"].append(row.get("eval_tracking_error_lin"))
            curve["tracking_ang"].append(row.get("eval_tracking_error_ang"))
            curve["fall_rate"].append(row.get("eval_fall_rate"))
    return curve


def rsl_rl_curve(out_dir: Path) -> dict[str, list[float]]:
    rows = read_metrics(Path(out_dir))  # metrics.jsonl, or the .gz a results folder keeps
    iterations = [row for row in rows if "eval_return" not in row]
    # start-up before the first iteration: its end less its own length (taken as the second's)
    first = iterations[0]["train_time_s"] - (iterations[1]["train_time_s"] - iterations[0]["train_time_s"] if len(iterations) > 1 else 0.0)
    curve = {"step": [], "seconds": [], "return": [], "tracking_lin": [], "tracking_ang": [], "fall_rate": []}
    for row in rows:
        if "eval_return" in row:
            episodes = row.get("eval_episodes") or 1
            curve["step"].append(row["step"])
            curve["seconds"].append(row["train_time_s"] - first)
            curve["return"].append(row["eval_return"])
            curve["tracking_lin"].append(row.get("eval_tracking_error_lin"))
            curve["tracking_ang"].append(row.get("eval_tracking_error_ang"))
            curve["fall_rate"].append(row["eval_falls"] / episodes if isinstance(row.get("eval_falls"), (int, float)) else None)
    return curve


def first_reaching(
    curve: dict[str, list[float]], key: str, threshold: float, below: bool, max_falls: float = 1.0
) -> tuple[float | None, float | None]:
    """(seconds, steps) of the first evaluation at or past `threshold` in which at most `max_falls`
    of the episodes fell (None, None if none)."""
    for value, falls, seconds, step in zip(curve[key], curve["fall_rate"], curve["seconds"], curve["step"]):
        if falls is not None and falls > max_falls:
            continue
        if value is not None and (value <= threshold if below else value >= threshold):
            return seconds, step
    return None, None


def figure(pairs: list[tuple[dict, dict]], out: Path) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 7), layout="constrained")
    axes = fig.subplots(2, 2)
    for seed, (ours, theirs) in enumerate(pairs):
        for column, x in enumerate(("step", "seconds")):
            scale = 1e6 if x == "step" else 60.0
            for curve, name, color in ((ours, "ppo_control", "C0"), (theirs, "rsl_rl", "C3")):
                xs = [v / scale for v in curve[x]]
                label = f"{name}" if seed == 0 else None
                axes[0, column].plot(xs, curve["return"], color=color, alpha=0.8, label=label)
                axes[1, column].plot(xs, curve["tracking_lin"], color=color, alpha=0.8, label=label)
    for column, xlabel in enumerate(("env steps (millions)", "training minutes")):
        axes[0, column].set_ylabel("evaluation return")
        axes[1, column].set_ylabel("planar tracking error (m/s)")
        for row in range(2):
            axes[row, column].set_xlabel(xlabel)
            axes[row, column].grid(alpha=0.3)
            axes[row, column].legend(fontsize="small")
    fig.savefig(out, dpi=110)


def main(argv: list[str]) -> None:
    args = parse_args(argv, DEFAULTS, __doc__)
    if len(args["ours"]) != len(args["rsl_rl"]) or not args["ours"]:
        print("error: give as many ours=[...] run dirs as rsl_rl=[...] folders (one pair per seed)", file=sys.stderr)
        raise SystemExit(2)
    pairs = [(ours_curve(Path(a)), rsl_rl_curve(Path(b))) for a, b in zip(args["ours"], args["rsl_rl"])]
    threshold, max_falls = float(args["tracking"]), float(args["max_falls"])
    rows, seeds = [], []
    for seed, (ours, theirs) in enumerate(pairs):
        target = theirs["return"][-1]
        entry: dict[str, Any] = {"ours": rel(args["ours"][seed]), "rsl_rl": rel(args["rsl_rl"][seed])}
        for name, curve in (("ours", ours), ("rsl_rl", theirs)):
            entry[f"{name}_final"] = {k: curve[k][-1] for k in ("step", "seconds", "return", "tracking_lin", "tracking_ang", "fall_rate")}
            to_tracking = first_reaching(curve, "tracking_lin", threshold, below=True, max_falls=max_falls)
            entry[f"{name}_to_tracking"] = dict(zip(("seconds", "steps"), to_tracking))
            entry[f"{name}_to_rsl_rl_final_return"] = dict(zip(("seconds", "steps"), first_reaching(curve, "return", target, below=False)))
        seeds.append(entry)

        def fmt(value, spec):
            return "-" if value is None else format(value, spec)

        for name in ("ours", "rsl_rl"):
            final = entry[f"{name}_final"]
            rows.append(
                [
                    seed,
                    name,
                    f"{final['step']:,}",
                    fmt(final["seconds"] / 60, ".1f"),
                    fmt(final["return"], ".2f"),
                    fmt(final["tracking_lin"], ".3f"),
                    fmt(final["tracking_ang"], ".3f"),
                    fmt(final["fall_rate"], ".0%"),
                    fmt(entry[f"{name}_to_tracking"]["seconds"] and entry[f"{name}_to_tracking"]["seconds"] / 60, ".1f"),
                    fmt(
                        entry[f"{name}_to_rsl_rl_final_return"]["seconds"] and entry[f"{name}_to_rsl_rl_final_return"]["seconds"] / 60,
                        ".1f",
                    ),
                ]
            )
    out = Path(args["out"])
    headers = [
        "pair",
        "trainer",
        "steps",
        "train min",
        "eval return",
        "lin err m/s",
        "yaw err rad/s",
        "falls",
        f"min to {threshold} m/s (falls <= {max_falls:.0%})",
        "min to rsl_rl's final return",
    ]
    table = markdown_table(headers, rows)
    write_json(out.with_suffix(".json"), {"tracking_threshold": threshold, "max_falls": max_falls, "pairs": seeds})
    out.with_suffix(".md").write_text(table + "\n")
    figure(pairs, out.with_suffix(".png"))
    print(table)
    print(f"written {out.with_suffix('.json')}, .md, .png")


if __name__ == "__main__":
    main(sys.argv[1:])
