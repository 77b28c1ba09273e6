"""Wall-clock time to a score: ppo_control (default fast preset) vs Stable-Baselines3 default PPO.

    pip install -r benchmarks/requirements.txt
    python -m benchmarks.scores.time_to_score [tasks=[HalfCheetah,Hopper,Walker2d,Ant]] [seeds=3] [budget_s=300]
        [eval_every=0] [sb3_eval_every=0] [eval_every_s=15] [eval_episodes=5] [total_steps=None]
        [thresholds=[Task:score,...]] [sb3=true] [work_dir=<keep runs here>] [resume=false]
    python -m benchmarks.scores.time_to_score plot_only=true     # redraw the PNG from the saved JSON alone

For each task and seed (0 .. seeds-1), back to back and never two at once: ours, then SB3, each a
fresh process on the CPU with the same wall-clock budget.

ours  `python -m ppo_control.train task=<T> seed=<s> device=cpu eval.every_steps=<eval_every>
      eval.episodes=<eval_episodes> checkpoint.every_steps=0 log.every_updates=1000`, with the task's
      own total_steps (or total_steps=N). It is stopped budget_s after launch by SIGINT (it finishes
      the update, checkpoints and exits 0); if it reaches total_steps first, its curve ends there.
      Note the linear learning-rate schedule anneals over total_steps, not over the budget.
      Eval time of a metrics row = its `time` field (end of that update's training, before its
      evaluation ran) minus the launch time.
SB3   benchmarks/scores/sb3_ppo.py hparams=default (SB3's default PPO + VecNormalize, 1 env, constant lr)
      with budget_s (it stops itself) and an effectively unlimited total_steps; a deterministic
      evaluation of eval_episodes episodes (VecNormalize stats frozen, raw rewards) after the first
      update at or past every multiple of sb3_eval_every steps, timed at its start.
Both clocks start at process launch (imports and env construction count), and both include the
time spent in earlier evaluations (each side evaluates roughly every eval_every_s seconds, see below).

Evaluation cadence: the two sides run at very different steps/s, so each gets its own step interval,
chosen for about `eval_every_s` seconds of wall-clock between evaluations: eval_every = ours' and
sb3_eval_every = SB3's steps/s from benchmarks/results/speed.json (pair `fast`, HalfCheetah) times
eval_every_s, rounded to 2048-step updates; without speed.json, assumed 15,000 and 1,000 steps/s.
Slower simulations (Ant) get coarser resolution; the measured interval is reported.

Score: the first evaluation (within the budget) whose mean return reaches the task's threshold
(HalfCheetah 3000, Hopper 2500, Walker2d 3000, Ant 3000). The median over seeds counts a seed that
never reaches it as "> budget", so the median is "> budget" unless most seeds reach it; the table says
how many did. SB3's return is read at the wall-clock time where ours reached the threshold (ours'
median time; the budget if ours did not reach it): the last SB3 evaluation at or before that time.

Writes benchmarks/results/time_to_score.json (after every run, so an interrupted benchmark keeps
what it measured) and time_to_score.png (one panel per task: eval return vs wall-clock seconds,
each seed a thin line, threshold dashed), and prints a markdown table. `resume=true` keeps the runs
already in `out` and runs only the missing ones; `out` must have been written with the same budget,
evaluation settings, total_steps and thresholds.

Expected duration: tasks x seeds x (2 x budget_s + ~15 s start-up/shutdown) -> 4 x 3 x ~615 s ~= 2 h
with the defaults. `tasks=[HalfCheetah] seeds=1 budget_s=60` takes ~2.5 min.
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import (
    RESULTS_DIR,
    markdown_table,
    median,
    ours_command,
    parse_args,
    rel,
    resolved_config,
    run_measured,
    versions,
    write_json,
)
from ppo_control.analysis.curves import metrics_file, read_metrics, save_figure
from ppo_control.runs.layout import CONFIG_FILE

USAGE = __doc__
THRESHOLDS = {"HalfCheetah": 3000.0, "Hopper": 2500.0, "Walker2d": 3000.0, "Ant": 3000.0}
ASSUMED_SPS = {"ours": 15_000.0, "sb3": 1_000.0}  # only when benchmarks/results/speed.json is missing
UPDATE = 2048  # eval intervals are rounded to this many steps
DEFAULTS: dict[str, Any] = {
    "tasks": ["HalfCheetah", "Hopper", "Walker2d", "Ant"],
    "seeds": 3,
    "budget_s": 300.0,
    "eval_every": 0,  # ours' eval.every_steps; 0 = from eval_every_s
    "sb3_eval_every": 0,  # SB3's evaluation interval in env steps; 0 = from eval_every_s
    "eval_every_s": 15.0,
    "eval_episodes": 5,
    "total_steps": None,  # ours' total_steps; None = the task's own
    "thresholds": [],  # extra or changed thresholds, e.g. [Humanoid:5000,Hopper:3000]
    "sb3": True,
    "plot_only": False,
    "work_dir": None,
    "resume": False,
    "out": str(RESULTS_DIR / "time_to_score.json"),
    "png": str(RESULTS_DIR / "time_to_score.png"),
}


def eval_intervals(args: dict[str, Any]) -> dict[str, Any]:
    """Step intervals for each side (explicit, or about eval_every_s seconds at the measured speed)."""
    source = "assumed (no benchmarks/results/speed.json)"
    sps = dict(ASSUMED_SPS)
    speed = RESULTS_DIR / "speed.json"
    if speed.exists():
        try:
            fast = json.loads(speed.read_text())["pairs"]["fast"]
            sps = {"ours": fast["ours_sps_median"], "sb3": fast["sb3_sps_median"]}
            source = f"{rel(speed)} (pair fast)"
        except (KeyError, ValueError):
            pass

    def steps_for(side: str) -> int:
        return max(UPDATE, round(sps[side] * args["eval_every_s"] / UPDATE) * UPDATE)

    return {
        "ours": args["eval_every"] or steps_for("ours"),
        "sb3": args["sb3_eval_every"] or steps_for("sb3"),
        "sps_assumed": sps,
        "source": source if not (args["eval_every"] and args["sb3_eval_every"]) else "given",
    }


def first_reaching(evals: list[dict[str, Any]], threshold: float, budget_s: float) -> dict[str, Any] | None:
    for e in evals:
        if e["time_s"] <= budget_s and e["eval_return"] >= threshold:
            return e
    return None


def return_at(evals: list[dict[str, Any]], t: float) -> float | None:
    """The last evaluation at or before wall-clock t (None if none yet)."""
    before = [e for e in evals if e["time_s"] <= t]
    return before[-1]["eval_return"] if before else None


def interval_s(evals: list[dict[str, Any]]) -> float | None:
    times = [e["time_s"] for e in evals]
    return median([b - a for a, b in zip(times, times[1:])]) if len(times) >= 2 else None


def median_or_none(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return median(present) if present else None


def run_ours(task: str, seed: int, args: dict[str, Any], every: int, run_dir: Path) -> dict[str, Any]:
    overrides = ["device=cpu", f"eval.every_steps={every}", f"eval.episodes={args['eval_episodes']}"]
    if args["total_steps"] is not None:
        overrides.append(f"total_steps={int(args['total_steps'])}")
    cmd = ours_command(task, seed, run_dir, overrides)
    measured = run_measured(cmd, run_dir.parent / f"{run_dir.name}.log", stop_after_s=args["budget_s"])
    rows = read_metrics(path) if (path := metrics_file(run_dir)) else []  # live or archived (.gz)
    launch = measured.launch_time
    evals = [
        {"time_s": r["time"] - launch, "step": r["step"], "eval_return": r["eval_return"], "eval_return_std": r.get("eval_return_std")}
        for r in rows
        if r.get("eval_return") is not None
    ]
    total = resolved_config(run_dir)["total_steps"] if (run_dir / CONFIG_FILE).exists() else None
    return {
        "framework": "ours",
        "seed": seed,
        "evals": evals,
        "eval_every": every,
        "total_steps": total,
        "steps": rows[-1]["step"] if rows else 0,
        "end_s": rows[-1]["time"] - launch if rows else None,
        "finished_total_steps": bool(rows and total and rows[-1]["step"] >= total),
        **{k: v for k, v in measured.as_dict().items() if k != "log"},
        "command": " ".join(cmd[1:]),
    }


def run_sb3(task: str, seed: int, args: dict[str, Any], every: int, out: Path) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.scores.sb3_ppo",
        f"task={task}",
        "hparams=default",
        f"seed={seed}",
        f"total_steps={10**12}",
        f"budget_s={args['budget_s']}",
        f"eval_every={every}",
        f"eval_episodes={args['eval_episodes']}",
        f"launch_time={time.time()!r}",
        f"out={out}",
    ]
    measured = run_measured(cmd, out.with_suffix(".log"))
    result = json.loads(out.read_text())
    keep = ("evals", "steps", "sps", "startup_s", "stopped_by_budget", "eval_seconds", "hyperparameters", "torch_threads")
    return {
        "framework": "sb3",
        "seed": seed,
        "eval_every": every,
        **{k: result[k] for k in keep},
        **{k: v for k, v in measured.as_dict().items() if k != "log"},
        "command": " ".join(cmd[1:]),
    }


def summarize(task: str, threshold: float, runs: dict[str, list[dict[str, Any]]], budget_s: float) -> dict[str, Any]:
    ours, sb3 = runs.get("ours", []), runs.get("sb3", [])
    reached = [first_reaching(r["evals"], threshold, budget_s) for r in ours]
    times = [e["time_s"] if e else math.inf for e in reached]
    ours_median = median(times) if times else math.inf
    t_star = ours_median if math.isfinite(ours_median) else budget_s
    sb3_reached = [first_reaching(r["evals"], threshold, budget_s) for r in sb3]
    sb3_times = [e["time_s"] if e else math.inf for e in sb3_reached]
    sb3_at = [return_at(r["evals"], t_star) for r in sb3]
    ours_at = [return_at(r["evals"], t_star) for r in ours]
    return {
        "threshold": threshold,
        "ours_time_to_threshold_s": [None if math.isinf(t) else t for t in times],
        "ours_step_at_threshold": [e["step"] if e else None for e in reached],
        "ours_seeds_reached": sum(e is not None for e in reached),
        "ours_median_time_s": ours_median if math.isfinite(ours_median) else None,
        "compare_at_s": t_star,
        "compare_at": "ours' median time to threshold" if math.isfinite(ours_median) else "end of budget",
        "sb3_return_at_compare": sb3_at,
        "sb3_return_at_compare_median": median_or_none(sb3_at),
        "ours_return_at_compare": ours_at,
        "ours_return_at_compare_median": median_or_none(ours_at),
        "sb3_time_to_threshold_s": [None if math.isinf(t) else t for t in sb3_times],
        "sb3_seeds_reached": sum(e is not None for e in sb3_reached),
        "sb3_median_time_s": (median(sb3_times) if math.isfinite(median(sb3_times)) else None) if sb3_times else None,
        "ours_steps_in_budget": [r["steps"] for r in ours],
        "sb3_steps_in_budget": [r["steps"] for r in sb3],
        "ours_eval_interval_s": median_or_none([interval_s(r["evals"]) for r in ours]),
        "sb3_eval_interval_s": median_or_none([interval_s(r["evals"]) for r in sb3]),
    }


def describe_run(run: dict[str, Any], threshold: float, budget_s: float) -> str:
    hit = first_reaching(run["evals"], threshold, budget_s)
    when = f"reached {threshold:g} at {hit['time_s']:.0f} s (step {hit['step']:,})" if hit else f"did not reach {threshold:g}"
    best = max((e["eval_return"] for e in run["evals"]), default=float("nan"))
    return f"{when}; {len(run['evals'])} evals, best {best:.0f}, {run['steps']:,} steps (load at launch {run['load_before']:.2f})"


def _fmt_time(t: float | None, budget_s: float) -> str:
    return f"> {budget_s:.0f} s" if t is None else f"{t:.0f} s"


def _fmt_list(xs: list[Any], fmt: str) -> str:
    return ", ".join("-" if x is None else format(x, fmt) for x in xs)


def table(data: dict[str, Any]) -> str:
    budget = data["budget_s"]
    rows = []
    for task, entry in data["tasks"].items():
        s = entry.get("summary")
        if not s:
            continue
        seeds = len(s["ours_time_to_threshold_s"])
        sb3_ret = s["sb3_return_at_compare_median"]
        ours_times = _fmt_list([None if t is None else round(t) for t in s["ours_time_to_threshold_s"]], "d")
        sb3_at = "-" if sb3_ret is None else f"{sb3_ret:.0f}"
        rows.append(
            [
                task,
                f"{s['threshold']:g}",
                f"**{_fmt_time(s['ours_median_time_s'], budget)}** ({ours_times})",
                f"{s['ours_seeds_reached']}/{seeds}",
                f"{sb3_at} ({_fmt_list(s['sb3_return_at_compare'], '.0f')}) at {s['compare_at_s']:.0f} s",
                f"{_fmt_time(s['sb3_median_time_s'], budget)} ({s['sb3_seeds_reached']}/{len(s['sb3_time_to_threshold_s'])})",
                f"{median(s['ours_steps_in_budget']) / 1e6:.2f}M / {median(s['sb3_steps_in_budget']) / 1e6:.2f}M"
                if s["sb3_steps_in_budget"]
                else f"{median(s['ours_steps_in_budget']) / 1e6:.2f}M / -",
                f"{_fmt_list([s['ours_eval_interval_s']], '.0f')} / {_fmt_list([s['sb3_eval_interval_s']], '.0f')}",
            ]
        )
    return markdown_table(
        [
            "task",
            "threshold",
            "ours: time to threshold, median (per seed)",
            "ours seeds reached",
            "SB3 return then, median (per seed)",
            "SB3 time to threshold (seeds)",
            "steps in budget ours / SB3 (median)",
            "eval every ~s ours / SB3",
        ],
        rows,
    )


def plot(data: dict[str, Any], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = [t for t, e in data["tasks"].items() if e.get("runs")]
    if not tasks:
        print("nothing to plot yet")
        return
    cols = min(2, len(tasks))
    rows = math.ceil(len(tasks) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.2 * cols, 4.2 * rows), squeeze=False)
    colors = {"ours": "tab:blue", "sb3": "tab:orange"}
    labels = {"ours": "ppo_control (fast preset)", "sb3": "SB3 PPO (defaults)"}
    budget = data["budget_s"]
    for ax, task in zip(axes.flat, tasks):
        entry = data["tasks"][task]
        for side in ("ours", "sb3"):
            for i, run in enumerate(entry["runs"].get(side, [])):
                ev = [e for e in run["evals"] if e["time_s"] <= budget * 1.05]
                ax.plot(
                    [e["time_s"] for e in ev],
                    [e["eval_return"] for e in ev],
                    color=colors[side],
                    lw=1.0,
                    alpha=0.75,
                    marker=".",
                    ms=3,
                    label=labels[side] if i == 0 else None,
                )
        threshold = entry["threshold"]
        ax.axhline(threshold, color="gray", ls="--", lw=1, label=f"threshold {threshold:g}")
        s = entry.get("summary")
        if s and s.get("ours_median_time_s") is not None:
            ax.axvline(s["ours_median_time_s"], color=colors["ours"], ls=":", lw=1, label=f"ours median {s['ours_median_time_s']:.0f} s")
        ax.set_xlim(0, budget)
        ax.set_title(f"{task}-v5")
        ax.set_xlabel("wall-clock seconds since launch")
        ax.set_ylabel(f"deterministic eval return ({data['eval_episodes']} episodes)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    for ax in list(axes.flat)[len(tasks) :]:
        ax.set_visible(False)
    cpu = data.get("versions", {}).get("cpu_model", "CPU")
    fig.suptitle(f"Time to score, {data.get('versions', {}).get('cpus', '?')} cores ({cpu}); each seed a line", fontsize=10)
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, png)
    plt.close(fig)


RESUME_MUST_MATCH = ("budget_s", "eval_episodes", "eval_every_s", "ours_total_steps")


def resumed_runs(out: Path, data: dict[str, Any]) -> tuple[dict[str, dict[str, list[dict[str, Any]]]], float]:
    """The runs of an earlier, interrupted benchmark in `out` that this one can keep, by task and side,
    and the wall-clock seconds that benchmark had spent; an `out` measured under other settings is an
    error (naming the first difference), not a mix."""
    if not out.exists():
        return {}, 0.0
    previous = json.loads(out.read_text())
    differences = [k for k in RESUME_MUST_MATCH if previous.get(k) != data[k]]
    for side in ("ours", "sb3"):
        if previous.get("eval_intervals", {}).get(side) != data["eval_intervals"][side]:
            differences.append(f"eval_intervals.{side}")
    for task, entry in previous.get("tasks", {}).items():
        if task in data["tasks"] and entry.get("threshold") != data["tasks"][task]["threshold"]:
            differences.append(f"{task} threshold")
    if differences:
        key = differences[0]
        raise SystemExit(f"resume: {rel(out)} was measured with another {key}; choose another out= or drop resume=true")
    kept = {task: entry.get("runs", {}) for task, entry in previous.get("tasks", {}).items() if task in data["tasks"]}
    return kept, float(previous.get("wall_s", 0.0))


def main(argv: list[str]) -> None:
    args = parse_args(argv, DEFAULTS, USAGE)
    out, png = Path(args["out"]), Path(args["png"])
    if args["plot_only"]:
        data = json.loads(out.read_text())
        for task, entry in data["tasks"].items():  # recomputed, so the table follows this file's definitions
            if entry.get("runs", {}).get("ours"):
                entry["summary"] = summarize(task, entry["threshold"], entry["runs"], data["budget_s"])
        plot(data, png)
        print(table(data))
        print(f"\ndrawn {rel(png)} from {rel(out)}")
        return

    thresholds = dict(THRESHOLDS)
    for item in args["thresholds"]:
        name, _, value = item.partition(":")
        thresholds[name] = float(value)
    missing = [t for t in args["tasks"] if t not in thresholds]
    if missing:
        raise SystemExit(f"no threshold for {missing}; pass thresholds=[{missing[0]}:<score>]")
    intervals = eval_intervals(args)
    budget = args["budget_s"]
    n_runs = len(args["tasks"]) * args["seeds"] * (2 if args["sb3"] else 1)
    print(
        f"eval every {intervals['ours']:,} steps (ours) / {intervals['sb3']:,} steps (SB3) from {intervals['source']}; "
        f"{n_runs} runs of {budget:.0f} s: about {n_runs * (budget + 8) / 60:.0f} min",
        flush=True,
    )

    data: dict[str, Any] = {
        "budget_s": budget,
        "seeds": args["seeds"],
        "eval_episodes": args["eval_episodes"],
        "eval_every_s": args["eval_every_s"],
        "eval_intervals": intervals,
        "ours_total_steps": args["total_steps"],
        "complete": False,
        "versions": versions(),
        "tasks": {t: {"threshold": thresholds[t], "runs": {"ours": [], "sb3": []}} for t in args["tasks"]},
    }
    kept, earlier_wall_s = resumed_runs(out, data) if args["resume"] else ({}, 0.0)
    tmp = None if args["work_dir"] else tempfile.TemporaryDirectory(prefix="time-to-score-")
    work = Path(args["work_dir"] or tmp.name).resolve()  # type: ignore[union-attr]
    work.mkdir(parents=True, exist_ok=True)
    started = time.time() - earlier_wall_s  # a resumed benchmark's wall_s counts the earlier attempts too
    try:
        for task in args["tasks"]:
            entry = data["tasks"][task]
            for seed in range(args["seeds"]):
                for side in ("ours", "sb3") if args["sb3"] else ("ours",):
                    earlier = [r for r in kept.get(task, {}).get(side, []) if r["seed"] == seed]
                    if earlier:
                        run, how = earlier[0], "kept from the earlier benchmark"
                    elif side == "ours":
                        run, how = run_ours(task, seed, args, intervals["ours"], work / f"ours-{task}-s{seed}"), "ran"
                    else:
                        run, how = run_sb3(task, seed, args, intervals["sb3"], work / f"sb3-{task}-s{seed}.json"), "ran"
                    entry["runs"][side].append(run)
                    print(f"{task} seed {seed} {side}: {describe_run(run, thresholds[task], budget)} ({how})", flush=True)
                entry["summary"] = summarize(task, thresholds[task], entry["runs"], budget)
                data["wall_s"] = time.time() - started
                write_json(out, data)  # after every run: an interrupted benchmark keeps what it measured
    finally:
        if tmp is not None:
            tmp.cleanup()
    data["complete"] = True
    write_json(out, data)
    plot(data, png)
    print(
        f"\nwall-clock budget {budget:.0f} s per run, CPU, {args['seeds']} seed(s); median over seeds, a seed that "
        f"never reached the threshold counts as > budget:\n"
    )
    print(table(data))
    print(f"\nwritten to {rel(out)} and {rel(png)} ({data['wall_s'] / 60:.1f} min)")


if __name__ == "__main__":
    main(sys.argv[1:])
