"""Learning curves, as `python -m ppo_control.plot` draws them (the command's usage and
description: ppo_control/plot.py); run discovery, grouping, the wall-clock timeline and the
published references live here too, and the benchmark suite (analysis/suite.py) reuses them.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import numpy as np
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException
from PIL import Image

from ppo_control.config import RESUME_CHANGEABLE, ConfigError, parse_command_args, saved_run_config
from ppo_control.config.errors import UserError
from ppo_control.config.resources import CONFIG_DIR
from ppo_control.runs.layout import ARCHIVED_METRICS_FILE, CONFIG_FILE, METRICS_FILE

# A finished run kept in benchmarks/results stores its rows gzipped (several times smaller); it is
# read like a live run's metrics.jsonl, which wins where both exist.
METRICS_FILES = (METRICS_FILE, ARCHIVED_METRICS_FILE)  # in order of preference
X_AXES = ("steps", "time")
DIAGNOSTICS = ("approx_kl", "clip_fraction", "entropy", "explained_variance", "learning_rate", "sps")
# A gap between two metrics rows this much longer than the later update itself is a stop and a
# resume (the process was not running), not an evaluation or checkpoint between two updates.
MAX_PAUSE_S = 300.0
# Keys that never make two runs different experiments: per-seed identity, plus what a resume may
# change (config.RESUME_CHANGEABLE: total_steps, device, eval.*, log.*, checkpoint.*, ...).
NOT_ALGORITHM = ("seed", "run_dir", "resume", *RESUME_CHANGEABLE)
# Published final returns per task (CleanRL, SB3 zoo, ...): the lines in the learning curves and the
# reference columns of the benchmark's tables. Shipped with the configs, so an installed wheel has it.
REFERENCES_FILE = CONFIG_DIR / "references.yaml"
REFERENCE_KEYS = ("source", "value", "note")
# What each kind of line in a learning-curve figure is (its gid), so tests and callers can find them.
GID_SEED, GID_MEAN, GID_TRAIN, GID_REFERENCE, GID_REFERENCE_LABEL = "eval_seed", "eval_mean", "train_mean", "reference", "reference_label"


@dataclass
class PlotArgs:
    x: str = "steps"  # steps | time (wall-clock seconds since the run started)
    out: Optional[str] = None  # default: <first dir>/learning_curves.png


# ---------------------------------------------------------------------------------------------
# Runs


@dataclass
class Run:
    """One run directory: its resolved config and its metrics rows (one per update)."""

    path: Path
    config: dict[str, Any]
    rows: list[dict[str, Any]]

    @property
    def task(self) -> str:
        return str(self.config.get("task"))

    @property
    def seed(self) -> int:
        return int(self.config.get("seed", 0))

    @property
    def preset(self) -> str:
        return str(self.config.get("preset", "-"))  # runs from before presets existed have none

    @property
    def steps(self) -> int:
        return int(self.rows[-1]["step"]) if self.rows else 0

    @property
    def finished(self) -> bool:
        """Trained to its total_steps and evaluated at the end (the last row of a finished run)."""
        return bool(self.rows) and self.steps >= int(self.config["total_steps"]) and _number(self.rows[-1].get("eval_return"))

    @property
    def final(self) -> dict[str, Any]:
        return self.rows[-1] if self.rows else {}

    @property
    def wall_clock_s(self) -> float:
        return float(elapsed_seconds(self.rows)[-1]) if self.rows else 0.0

    def x(self, axis: str) -> np.ndarray:
        return np.array([row["step"] for row in self.rows], dtype=float) if axis == "steps" else elapsed_seconds(self.rows)

    def series(self, key: str, axis: str) -> tuple[np.ndarray, np.ndarray]:
        """(x, value) at the rows where `key` holds a number (episode_return is null before the
        first episode ends, eval_return exists on evaluation rows only)."""
        keep = [i for i, row in enumerate(self.rows) if _number(row.get(key))]
        return self.x(axis)[keep], np.array([self.rows[i][key] for i in keep], dtype=float)

    @property
    def algorithm(self) -> dict[str, Any]:
        return algorithm_config(self.config)

    @property
    def group_key(self) -> str:
        """Runs with equal keys are seeds of one experiment."""
        return hashlib.sha256(json.dumps(self.algorithm, sort_keys=True, default=str).encode()).hexdigest()[:12]


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def flatten(node: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{'ppo': {'epochs': 10}} -> {'ppo.epochs': 10}"""
    out: dict[str, Any] = {}
    for key, value in node.items():
        if isinstance(value, dict) and value and key != "kwargs":  # env.kwargs is one value: the constructor's arguments
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def algorithm_config(config: dict[str, Any]) -> dict[str, Any]:
    """The flattened config keys that define the experiment (task, preset, env, normalize, policy,
    ppo, ...): everything except the seed, paths and what a resume may change."""
    return {k: v for k, v in flatten(config).items() if not k.startswith(NOT_ALGORITHM)}


def elapsed_seconds(rows: list[dict[str, Any]]) -> np.ndarray:
    """Wall-clock seconds from the start of the run to the end of each update's training.

    `time` is stamped when an update's training ends (before its evaluation), and an update lasts
    steps_this_update / sps, so the run started at time[0] - duration[0]. Between two rows the
    whole gap in `time` counts: the later update plus the earlier row's evaluation and checkpoint.
    A gap more than MAX_PAUSE_S longer than its update is a stop and a resume: only the update's
    own duration counts there, so idle time between a stop and its resume never enters. The final
    evaluation (after the last stamp) is not included. Derived from metrics.jsonl alone, so it
    survives any number of resumes.
    """
    elapsed = np.zeros(len(rows))
    total = 0.0
    for i, row in enumerate(rows):
        sps = row.get("sps")
        duration = row.get("steps_this_update", 0) / sps if _number(sps) and sps > 0 else 0.0
        gap = None
        if i > 0 and _number(row.get("time")) and _number(rows[i - 1].get("time")):
            gap = row["time"] - rows[i - 1]["time"]
        total += gap if gap is not None and duration <= gap <= duration + MAX_PAUSE_S else duration
        elapsed[i] = total
    return elapsed


def metrics_file(run_dir: Path) -> Optional[Path]:
    """The run's metrics.jsonl, else its archived metrics.jsonl.gz, else None."""
    return next((run_dir / name for name in METRICS_FILES if (run_dir / name).is_file()), None)


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """metrics.jsonl (or .jsonl.gz) rows; a line cut short by a killed process is skipped."""
    rows = []
    data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    for line in data.decode("utf-8").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and _number(row.get("step")):
            rows.append(row)
    return rows


def is_run_dir(path: Path) -> bool:
    return metrics_file(path) is not None and (path / CONFIG_FILE).is_file()


def load_run(path: str | Path) -> Run:
    path = Path(path)
    try:
        config = OmegaConf.to_container(OmegaConf.load(path / CONFIG_FILE), resolve=True)
        rows = read_metrics(metrics) if (metrics := metrics_file(path)) else []
    except (OmegaConfBaseException, ValueError, OSError, EOFError) as exc:  # EOFError: a truncated .gz
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"cannot read the run in '{path}': {first}") from None
    if not isinstance(config, dict) or "task" not in config or "total_steps" not in config:
        raise UserError(f"'{path / CONFIG_FILE}' is not a ppo_control run config (no task or total_steps)")
    try:  # a key the project added after this run was made reads as its default, as when it is evaluated
        config = OmegaConf.to_container(saved_run_config(config), resolve=True)
    except ConfigError as exc:
        raise UserError(f"cannot read the run in '{path}': {exc}") from None
    return Run(path, config, rows)


def find_run_dirs(paths: list[str | Path]) -> list[Path]:
    """Each path itself if it is a run directory, else every run directory below it."""
    found: list[Path] = []
    for given in map(Path, paths):
        if not given.is_dir():
            raise UserError(f"'{given}' is not a directory; give run directories or directories that contain runs")
        if is_run_dir(given):
            below = [given]
        else:
            candidates = {p.parent for name in METRICS_FILES for p in given.rglob(name)}
            below = sorted(p for p in candidates if is_run_dir(p))
        found += [p for p in below if p not in found]
    return found


def load_runs(paths: list[str | Path]) -> list[Run]:
    """Every run found under `paths` that has at least one metrics row."""
    runs = [run for run in map(load_run, find_run_dirs(paths)) if run.rows]
    if not runs:
        shown = ", ".join(str(p) for p in paths)
        raise UserError(f"no runs with metrics found in {shown} (a run directory holds {METRICS_FILE} and {CONFIG_FILE})")
    return runs


def group_runs(runs: list[Run]) -> dict[str, list[list[Run]]]:
    """task -> experiments (lists of seeds), in the order they were first seen."""
    groups: dict[str, dict[str, list[Run]]] = {}
    for run in runs:
        groups.setdefault(run.task, {}).setdefault(run.group_key, []).append(run)
    return {task: [sorted(seeds, key=lambda r: r.seed) for seeds in experiments.values()] for task, experiments in groups.items()}


def experiment_labels(experiments: list[list[Run]]) -> list[str]:
    """Name the experiments of one task by the keys in which they differ, shortened to the last
    part of the key (ppo.epochs -> epochs); '' when there is only one."""
    configs = [experiment[0].algorithm for experiment in experiments]
    differing = sorted({k for c in configs for k in c if any(c.get(k) != other.get(k) for other in configs)})
    labels = []
    for i, config in enumerate(configs):
        label = ", ".join(f"{k.rsplit('.', 1)[-1]}={config.get(k)}" for k in differing)
        labels.append((label[:42] + "...") if len(label) > 45 else label or (f"#{i + 1}" if len(configs) > 1 else ""))
    return labels


# ---------------------------------------------------------------------------------------------
# Published references


@dataclass(frozen=True)
class Reference:
    """A published final return for a task: one entry of configs/references.yaml."""

    source: str  # e.g. "CleanRL": the line's label and the benchmark table's column
    value: float
    note: str = ""

    @property
    def label(self) -> str:
        return f"{self.source} {self.value:.1f}"


def load_references(path: str | Path = REFERENCES_FILE) -> dict[str, list[Reference]]:
    """task -> its published returns, in the file's order; {} when there is no such file."""
    path = Path(path)
    if not path.is_file():
        return {}
    try:
        data = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    except (OmegaConfBaseException, ValueError, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"cannot read the published references '{path}': {first}") from None
    if not isinstance(data, dict):
        raise UserError(f"'{path}' must map task names to lists of {{source, value, note}}")
    references: dict[str, list[Reference]] = {}
    for task, entries in data.items():
        where = f"'{path}', {task}"
        if not isinstance(entries, list):
            raise UserError(f"{where}: expected a list of {{source, value, note}} entries, got {entries!r}")
        refs: list[Reference] = []
        for entry in entries:
            if not isinstance(entry, dict) or not isinstance(entry.get("source"), str) or not _number(entry.get("value")):
                raise UserError(
                    f"{where}: every entry needs a source (text) and a value (a number), e.g. {{source: CleanRL, value: 1442.64}}"
                )
            unknown = sorted(set(entry) - set(REFERENCE_KEYS))
            if unknown:
                raise UserError(
                    f"{where}: unknown key(s) {', '.join(map(str, unknown))} in an entry; an entry has {', '.join(REFERENCE_KEYS)}"
                )
            if any(ref.source == entry["source"] for ref in refs):
                raise UserError(f"{where}: two entries from '{entry['source']}'; give each source one value per task")
            refs.append(Reference(entry["source"], float(entry["value"]), str(entry.get("note") or "")))
        references[str(task)] = refs
    return references


def reference_sources(references: dict[str, list[Reference]]) -> list[str]:
    """Every source named in `references`, in order of first appearance (the benchmark table's columns)."""
    return list(dict.fromkeys(ref.source for refs in references.values() for ref in refs))


# ---------------------------------------------------------------------------------------------
# Curves


def mean_std_over_seeds(series: list[tuple[np.ndarray, np.ndarray]]) -> Optional[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(x, mean, std) over seeds (population std, as for eval_return_std). Seeds on one x grid are
    used as they are; otherwise every seed is interpolated onto the x points of the run that ends
    first, inside the range all seeds cover, so the curve stops where the shortest run stops."""
    series = [(x, y) for x, y in series if len(x)]
    if not series:
        return None
    first = series[0][0]
    if all(len(x) == len(first) and np.array_equal(x, first) for x, _ in series):
        grid, ys = first, np.stack([y for _, y in series])
    else:
        lo, hi = max(x[0] for x, _ in series), min(x[-1] for x, _ in series)
        shortest = min((x for x, _ in series), key=lambda x: x[-1])
        grid = shortest[(shortest >= lo) & (shortest <= hi)]
        if len(grid):
            ys = np.stack([np.interp(grid, x, y) for x, y in series])
        else:  # no x range every seed covers (e.g. one final evaluation each, at different times)
            grid = np.array([np.mean([x[-1] for x, _ in series])])
            ys = np.array([[y[-1]] for _, y in series])
    return grid, ys.mean(axis=0), ys.std(axis=0)


def _time_unit(seconds: float) -> tuple[float, str]:
    for scale, unit in ((3600.0, "hours"), (60.0, "minutes")):
        if seconds >= 3 * scale:
            return scale, unit
    return 1.0, "seconds"


def _x_scale(runs: list[Run], x: str) -> tuple[float, str]:
    if x == "steps":
        return 1.0, "environment steps"
    scale, unit = _time_unit(max(run.wall_clock_s for run in runs))
    return scale, f"wall-clock {unit} since the run started"


def learning_curves_figure(runs: list[Run], x: str, references: Optional[dict[str, list[Reference]]] = None) -> Any:
    """The learning-curve Figure: one subplot per task; per experiment (one colour), each seed's
    deterministic evaluation return as a thin faint line, the mean over its seeds as a thick line
    with markers, and the mean training episode return dotted; the task's published returns
    (`references`, default: configs/references.yaml) as dashed grey lines labelled "<source> <value>".
    The spread is shown by the seeds themselves, not a std band. Every line carries a gid (GID_*)."""
    references = load_references() if references is None else references
    by_task = group_runs(runs)
    cols = min(len(by_task), 3)
    rows = math.ceil(len(by_task) / cols)
    fig = Figure(figsize=(5.2 * cols, 3.9 * rows + 0.4), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    any_reference = False
    for ax, (task, experiments) in zip(axes, by_task.items()):
        scale, xlabel = _x_scale([run for experiment in experiments for run in experiment], x)
        for i, (experiment, label) in enumerate(zip(experiments, experiment_labels(experiments))):
            _draw_experiment(ax, experiment, label, f"C{i % 10}", x, scale)
        any_reference |= _draw_references(ax, references.get(task, []))
        ax.set_title(task)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("episode return")
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize="x-small")
    for ax in axes[len(by_task) :]:
        ax.set_visible(False)
    # What the marks mean, once for the whole figure; the subplots' legends name experiments.
    styles = [
        Line2D([], [], color="0.2", linewidth=2, marker="o", markersize=3.5, label="evaluation return, mean over seeds"),
        Line2D([], [], color="0.2", linewidth=0.8, alpha=0.4, label="evaluation return, each seed"),
        Line2D([], [], color="0.2", linewidth=1.2, linestyle=":", label="training episode return, mean over seeds"),
    ]
    if any_reference:
        styles.append(Line2D([], [], color="0.35", linewidth=1, linestyle="--", label="published final return"))
    # A one-task figure is narrow: its key takes one column and its title two lines, to fit the width.
    fig.legend(handles=styles, loc="outside lower center", ncols=1 if cols == 1 else len(styles), fontsize="small")
    fig.suptitle("deterministic evaluation return:" + ("\n" if cols == 1 else " ") + "every seed (faint) and the mean over seeds")
    return fig


def _draw_experiment(ax: Any, experiment: list[Run], label: str, color: str, x: str, scale: float) -> None:
    seeds = f"{len(experiment)} seed{'s' if len(experiment) > 1 else ''}"
    legend: Optional[str] = f"{label} ({seeds})" if label else seeds  # on the experiment's evaluation mean (else training mean)
    evaluation = mean_std_over_seeds([run.series("eval_return", x) for run in experiment])
    train = mean_std_over_seeds([run.series("episode_return", x) for run in experiment])
    if train is not None:
        grid, mean, _ = train
        single = len(grid) == 1
        ax.plot(
            grid / scale,
            mean,
            color=color,
            linestyle=":",
            linewidth=1.2,
            marker="." if single else None,
            label=legend if evaluation is None else None,
            gid=GID_TRAIN,
            zorder=2,
        )
    for run in experiment:
        xs, ys = run.series("eval_return", x)
        if len(xs):
            ax.plot(
                xs / scale,
                ys,
                color=color,
                linewidth=0.8,
                alpha=0.4,
                marker="o" if len(xs) == 1 else None,
                markersize=3,
                gid=GID_SEED,
                zorder=2.5,
            )
    if evaluation is not None:
        grid, mean, _ = evaluation
        ax.plot(grid / scale, mean, color=color, linewidth=2, marker="o", markersize=3.5, label=legend, gid=GID_MEAN, zorder=3)


def _draw_references(ax: Any, references: list[Reference]) -> bool:
    """Dashed lines at the published returns, each labelled at the left edge (above its line, or
    below it when the next higher reference is too close for both labels to sit above)."""
    if not references:
        return False
    for ref in references:
        ax.axhline(ref.value, color="0.35", linestyle="--", linewidth=1, gid=GID_REFERENCE, zorder=1.5)
    lo, hi = ax.get_ylim()  # with the lines: axhline widens the y range to show them
    close = 0.06 * (hi - lo)
    ordered = sorted(references, key=lambda r: r.value)
    for j, ref in enumerate(ordered):
        crowded = j + 1 < len(ordered) and ordered[j + 1].value - ref.value < close
        ax.annotate(
            ref.label,
            xy=(0.01, ref.value),
            xycoords=ax.get_yaxis_transform(),
            xytext=(0, -2 if crowded else 2),
            textcoords="offset points",
            ha="left",
            va="top" if crowded else "bottom",
            fontsize="x-small",
            color="0.2",
            bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.75, "pad": 0.8},
            gid=GID_REFERENCE_LABEL,
            zorder=4,
        )
    return True


def plot_learning_curves(runs: list[Run], x: str, out: str | Path, references: Optional[dict[str, list[Reference]]] = None) -> Path:
    """learning_curves_figure(runs, x, references), written to `out`."""
    out = _check_out(out)
    return _save(learning_curves_figure(runs, x, references), out)


def plot_diagnostics(run: Run, x: str, out: str | Path) -> Path:
    """The PPO health signals of one run, one small panel each; where the env reports them, also
    its reward terms (`reward/<term>`, one line each) and the velocity tracking error."""
    out = _check_out(out)
    keys = {key for row in run.rows for key in row}
    terms = sorted(key for key in keys if key.startswith("reward/"))
    tracking = [key for key in ("tracking_error_lin", "tracking_error_ang") if key in keys]
    panels: list[tuple[str, list[str]]] = [(key, [key]) for key in DIAGNOSTICS]
    panels += [("reward terms (rollout mean per step)", terms)] * bool(terms)
    panels += [("tracking error (m/s, rad/s)", tracking)] * bool(tracking)
    rows = math.ceil(len(panels) / 3)
    fig = Figure(figsize=(13, 3.25 * rows), layout="constrained")
    axes = fig.subplots(rows, 3).ravel()
    scale, xlabel = _x_scale([run], x)
    for ax, (title, series) in zip(axes, panels):
        for k, key in enumerate(series):
            xs, ys = run.series(key, x)
            ax.plot(xs / scale, ys, color=f"C{k % 10}", label=key.removeprefix("reward/") if len(series) > 1 else None)
        if len(series) > 1:
            ax.legend(fontsize="x-small", ncol=2)
        ax.set_title(title)
        ax.set_xlabel(xlabel, fontsize="small")
        ax.grid(alpha=0.3)
    for ax in axes[len(panels) :]:
        ax.set_visible(False)
    fig.suptitle(f"{run.task}, seed {run.seed}: {run.path}")
    return _save(fig, out)


def _check_out(out: str | Path) -> Path:
    out = Path(out)
    kinds = Figure().canvas.get_supported_filetypes()
    if out.suffix.lstrip(".").lower() not in kinds:
        raise ConfigError(f"out='{out}' does not end in an image type matplotlib writes; use .png, .pdf or .svg")
    return out


def _save(fig: Any, out: Path) -> Path:
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        save_figure(fig, out)
    except OSError as exc:
        raise UserError(f"cannot write '{out}' ({exc.strerror or exc}); choose a writable out=") from None
    return out


FIGURE_DPI = 110


def save_figure(fig: Any, out: Path) -> None:
    """fig at FIGURE_DPI; a PNG as a 256-colour palette image, which keeps line plots looking the
    same at about a third of the bytes (curves are committed with every benchmark)."""
    if out.suffix.lower() != ".png":
        fig.savefig(out, dpi=FIGURE_DPI)
        return
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=FIGURE_DPI)
    image = Image.open(buffer).convert("RGB")
    image.quantize(colors=256, dither=Image.Dither.NONE).save(out, optimize=True)


# ---------------------------------------------------------------------------------------------
# Command line


def main(argv: list[str]) -> None:
    dirs = [a for a in argv if "=" not in a]
    args = parse_command_args(PlotArgs, [a for a in argv if "=" in a], "plot")
    if args.x not in X_AXES:
        raise ConfigError(f"plot: x={args.x!r} is not valid; choose one of: {', '.join(X_AXES)}")
    if not dirs:
        raise ConfigError(
            "plot: give at least one run directory or a directory that contains runs, e.g. python -m ppo_control.plot runs/Hopper"
        )
    out = _check_out(args.out if args.out else Path(dirs[0]) / "learning_curves.png")
    runs = load_runs(dirs)
    written = [plot_learning_curves(runs, args.x, out)]
    if len(runs) == 1:
        diagnostics = Path(dirs[0]) / "diagnostics.png" if args.out is None else out.with_name(f"{out.stem}_diagnostics{out.suffix}")
        written.append(plot_diagnostics(runs[0], args.x, diagnostics))
    experiments = sum(len(e) for e in group_runs(runs).values())
    print(f"runs        {len(runs)} ({experiments} experiment{'s' if experiments > 1 else ''}, x={args.x})")
    for path in written:
        print(f"written     {path}")
