"""Thin a finished run's full metric log into a compact curve file: metrics.jsonl[.gz] -> curve.csv.

    python -m benchmarks.scores.thin_curves [--rows 200] [--name curve.csv] <run dir, metrics file or folder> [...]
    python -m benchmarks.scores.thin_curves --combine [--combined-name curves.csv] <suite folder> [...]

A folder is searched for every metrics.jsonl / metrics.jsonl.gz under it (metrics.jsonl wins where
both exist, as in `plot`); each gets a curve.csv beside it. The curve keeps `step` and only the
columns a README's tables and plots read, where the log has them:

- training rows: episode_return, episode_length, sps, time_s (wall-clock seconds since the run
  started, as `plot x=time` counts them), and on the robot tasks log_std_mean / action_std, the
  tracking errors and tracking rewards and the per-direction `response/<direction>`;
- evaluation rows: eval_return, eval_return_std, the episode length, falls, tracking errors,
  `eval_response/<direction>` and every `eval_reward/<term>`, with the time_s of their update.

The training rows are thinned to at most `--rows`: the steps are cut into equal bins aligned on a
round width (1, 2, 2.5 or 5 x 10^k steps: 10,000 for a run of 1,001,472 steps at 200 rows, 100,000
for a 10M-step run), and each bin becomes one row holding the mean of its rows' values, stamped
with the step (and time_s) of its last row. A mean over whole bins (a million steps, the last 250k)
is then the log's own mean there, to within the bins' unequal numbers of rows. Every evaluation is
kept as its own row (training columns empty), with its values as logged. Floats keep 4 significant
digits (training returns 5, evaluation returns 7); a column a row lacks is empty. Reading it back:
`csv.DictReader` or any CSV reader; the rows with an eval_return are the evaluations.

`--combine` then gathers the per-run curve files (`--name`) found under the paths into one file per
suite folder, `--combined-name` (default curves.csv) at that folder's top, and deletes the per-run
files (`git rm` them). A run's suite folder is the one above its `runs/` directory (where
`benchmark out=` puts it: `suite-1M/runs/Ant/s0` -> `suite-1M/curves.csv`); a run dir not under a
`runs/` directory belongs to the folder above it. The combined file's first column, `run`, is the
run dir relative to the suite folder (`runs/Ant/s0`), and selecting a run's rows gives back its
curve file's rows unchanged; the other columns are the union of the runs' columns, each run's left
empty where its curve lacks one. Runs are in natural order (s2 before s10), each run's rows in its
curve's order. A combined file already there is read first: its runs are kept but those given again,
whose rows are replaced, so a rerun run is added with `thin_curves <run dir>` and then
`thin_curves --combine <suite folder>`. A combined name ending in `.gz` is written gzipped (pandas
and `gzip.open` read it as it is). With `--combine` a path holding no metric log is not an error.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import math
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

METRICS_FILES = ("metrics.jsonl", "metrics.jsonl.gz")  # in order of preference, as `plot` reads them
TRAIN_COLUMNS = ("episode_return", "episode_length", "sps", "time_s")
ROBOT_TRAIN_COLUMNS = (
    "log_std_mean",
    "action_std",
    "tracking_error_lin",
    "tracking_error_ang",
    "reward/tracking_lin_vel",
    "reward/tracking_ang_vel",
)
EVAL_COLUMNS = (
    "eval_return",
    "eval_return_std",
    "eval_length",
    "eval_episode_length",
    "eval_fall_rate",
    "eval_falls",
    "eval_episodes",
    "eval_tracking_error_lin",
    "eval_tracking_error_ang",
)
PREFIXED = {"train": ("response/", "success/"), "eval": ("eval_response/", "eval_reward/", "eval_success/")}
# Significant digits: a README quotes a final return to its first decimal (HumanoidStandup: 155491.6),
# everything else to 3 or 4 digits at most.
DIGITS = {"eval_return": 7, "episode_return": 5, "eval_return_std": 5}
DEFAULT_DIGITS = 4
NICE = (1, 2, 2.5, 5)
# A gap between two rows this much longer than the later update itself is a stop and a resume
# (plot.MAX_PAUSE_S): only the update's own duration counts there.
MAX_PAUSE_S = 300.0


def metrics_files(paths: Iterable[Path]) -> list[Path]:
    """The metric log of every run at or under `paths` (metrics.jsonl preferred to its .gz)."""
    found: list[Path] = []
    for path in paths:
        if path.is_file():
            found.append(path)
            continue
        dirs = sorted({p.parent for name in METRICS_FILES for p in path.rglob(name)})
        found += [next(d / name for name in METRICS_FILES if (d / name).is_file()) for d in dirs]
    return found


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The log's rows with a numeric step; a line cut short by a killed process is skipped."""
    data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
    rows = []
    for line in data.decode("utf-8").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and is_number(row.get("step")):
            rows.append(row)
    return rows


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def with_elapsed(rows: list[dict[str, Any]]) -> None:
    """Set each row's time_s: wall-clock seconds from the run's start to the end of its update.

    Our rows stamp `time` when an update's training ends; an update lasts steps_this_update / sps,
    and a gap longer than that by more than MAX_PAUSE_S is a stop and a resume (only the update
    counts), as `plot x=time` counts it. rsl_rl's rows carry their own train_time_s / time_s.
    """
    total, previous = 0.0, None
    for row in rows:
        if "time" not in row:
            own = row.get("train_time_s", row.get("time_s"))
            if is_number(own):
                row["time_s"] = own
            continue
        sps = row.get("sps")
        duration = row.get("steps_this_update", 0) / sps if is_number(sps) and sps > 0 else 0.0
        gap = row["time"] - previous if is_number(row["time"]) and previous is not None else None
        total += gap if gap is not None and duration <= gap <= duration + MAX_PAUSE_S else duration
        previous = row["time"] if is_number(row["time"]) else previous
        row["time_s"] = total


def columns_of(rows: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """The training and evaluation columns this log has, in a fixed order."""
    keys = {k for row in rows for k in row}
    robot = any(k.startswith("reward/") for k in keys)  # the robot tasks log their reward terms
    train = [c for c in (*TRAIN_COLUMNS, *(ROBOT_TRAIN_COLUMNS if robot else ())) if c in keys]
    train += sorted(k for k in keys if k.startswith(PREFIXED["train"]))
    evals = [c for c in EVAL_COLUMNS if c in keys]
    for prefix in PREFIXED["eval"]:
        evals += sorted(k for k in keys if k.startswith(prefix))
    return train, evals


def bin_width(last_step: float, rows: int) -> float:
    """The smallest round width (1, 2, 2.5 or 5 x 10^k steps) that cuts last_step into <= rows bins."""
    target = max(last_step / max(rows, 1), 1.0)
    scale = 10.0 ** math.floor(math.log10(target))
    return next(n * scale for n in (*NICE, 10) if n * scale >= target)


def thin(rows: list[dict[str, Any]], max_rows: int) -> tuple[list[str], list[dict[str, Any]]]:
    """The curve's columns, and at most max_rows binned training rows plus every evaluation row in
    step order."""
    with_elapsed(rows)
    train_cols, eval_cols = columns_of(rows)
    training = [r for r in rows if any(is_number(r.get(c)) for c in train_cols if c != "time_s")]
    width = bin_width(max((r["step"] for r in training), default=1), max_rows)
    bins: dict[int, list[dict[str, Any]]] = {}
    for row in training:
        bins.setdefault(math.ceil(row["step"] / width), []).append(row)
    out: list[tuple[float, int, dict[str, Any]]] = []
    for members in bins.values():
        mean = {"step": members[-1]["step"]}
        for col in train_cols:
            values = [r[col] for r in members if is_number(r.get(col))]
            if col == "time_s":
                mean[col] = values[-1] if values else None
            else:
                mean[col] = sum(values) / len(values) if values else None
        out.append((mean["step"], 0, mean))
    for row in rows:
        if is_number(row.get("eval_return")):
            stamp = {"time_s": row["time_s"]} if "time_s" in row else {}
            out.append((row["step"], 1, {"step": row["step"], **stamp, **{c: row.get(c) for c in eval_cols}}))
    return ["step", *train_cols, *eval_cols], [row for _, _, row in sorted(out, key=lambda item: item[:2])]


def fmt(column: str, value: Any) -> str:
    """One cell: empty where the row lacks the value (or it is not a finite number)."""
    if not is_number(value):
        return ""
    if column in ("step", "sps", "time_s") or isinstance(value, int):
        return str(round(value))
    text = f"{value:.{DIGITS.get(column, DEFAULT_DIGITS)}g}"
    if "e" in text:  # positional notation: 1.2346e+05 -> 123460, 1.5e-05 -> 0.000015
        text = f"{float(text):f}".rstrip("0").rstrip(".")
    return text


def write_curve(source: Path, max_rows: int, name: str) -> Path:
    columns, rows = thin(read_rows(source), max_rows)
    target = source.with_name(name)
    with open(target, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(columns)
        for row in rows:
            writer.writerow([fmt(c, row.get(c)) for c in columns])
    return target


RUN_COLUMN = "run"


def open_text(path: Path, mode: str):
    """A combined file, gzipped where its name ends in .gz (written without a timestamp: reproducible)."""
    if path.suffix == ".gz":
        raw = gzip.GzipFile(path, mode[0] + "b", mtime=0) if "w" in mode else gzip.open(path, "rb")
        return io.TextIOWrapper(raw, encoding="utf-8", newline="")
    return open(path, mode, newline="", encoding="utf-8")


def suite_of(run_dir: Path) -> Path:
    """The folder a run's curve is combined into: the one above its `runs/` directory, or its parent."""
    for parent in run_dir.parents:
        if parent.name == "runs":
            return parent.parent
    return run_dir.parent


def natural_key(run: str) -> list[Any]:
    """Sort runs/Hopper/s2 before runs/Hopper/s10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", run)]


def merge_columns(columns: list[str], more: list[str]) -> None:
    """Add `more`'s columns missing from `columns`, each right after the column it follows in `more`."""
    for i, col in enumerate(more):
        if col not in columns:
            at = columns.index(more[i - 1]) + 1 if i > 0 and more[i - 1] in columns else len(columns)
            columns.insert(at, col)


def read_table(path: Path) -> tuple[list[str], list[list[str]]]:
    with open_text(path, "r") as handle:
        reader = csv.reader(handle)
        header = next(reader, [])
        return header, list(reader)


def combine(paths: Iterable[Path], name: str, combined_name: str) -> list[tuple[Path, int, int]]:
    """Gather every per-run `name` under `paths` into its suite folder's `combined_name` and delete the
    per-run files. Returns (combined file, runs in it, per-run files taken) for each suite folder."""
    curves: list[Path] = []
    for path in paths:
        curves += [path] if path.is_file() and path.name == name else sorted(path.rglob(name)) if path.is_dir() else []
    suites: dict[Path, list[Path]] = {}
    for curve in curves:
        suites.setdefault(suite_of(curve.parent), []).append(curve)
    written = []
    for suite, members in suites.items():
        target = suite / combined_name
        columns: list[str] = []
        runs: dict[str, tuple[list[str], list[list[str]]]] = {}
        if target.is_file():
            header, rows = read_table(target)
            if header[:1] != [RUN_COLUMN]:
                raise SystemExit(f"{target}: its first column is not {RUN_COLUMN!r}")
            merge_columns(columns, header[1:])
            for row in rows:
                runs.setdefault(row[0], (header[1:], []))[1].append(row[1:])
        for curve in members:
            header, rows = read_table(curve)
            merge_columns(columns, header)
            runs[curve.parent.relative_to(suite).as_posix()] = (header, rows)
        with open_text(target, "w") as handle:
            writer = csv.writer(handle, lineterminator="\n")
            writer.writerow([RUN_COLUMN, *columns])
            for run in sorted(runs, key=natural_key):
                header, rows = runs[run]
                at = [header.index(col) if col in header else None for col in columns]
                for row in rows:
                    writer.writerow([run, *("" if i is None else row[i] for i in at)])
        for curve in members:
            curve.unlink()
        written.append((target, len(runs), len(members)))
    return written


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+", type=Path, help="run dirs, metrics files or folders to search")
    parser.add_argument("--rows", type=int, default=200, help="at most this many training rows (default 200)")
    parser.add_argument("--name", default="curve.csv", help="the curve file's name beside each log (default curve.csv)")
    parser.add_argument(
        "--combine", action="store_true", help="then gather the per-run curve files into one file per suite folder and delete them"
    )
    parser.add_argument("--combined-name", default="curves.csv", help="the combined file's name (default curves.csv; .gz: gzipped)")
    args = parser.parse_args(argv)
    sources = metrics_files(args.paths)
    if not sources and not args.combine:
        parser.error("no metrics.jsonl or metrics.jsonl.gz found")
    for source in sources:
        target = write_curve(source, args.rows, args.name)
        print(f"{source} -> {target.name} ({target.stat().st_size:,} bytes)")
    if args.combine:
        written = combine(args.paths, args.name, args.combined_name)
        if not written:
            parser.error(f"no {args.name} found to combine")
        for target, runs, taken in written:
            print(f"{taken} {args.name} -> {target} ({runs} runs, {target.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main(sys.argv[1:])
