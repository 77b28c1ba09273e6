"""The benchmark suite, as `python -m ppo_control.benchmark` runs it (the command's usage and
description: ppo_control/benchmark.py): the jobs, their share of the cores, resuming finished
and interrupted runs, and the results tables and figures.
"""

from __future__ import annotations

import csv
import difflib
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, fields
from pathlib import Path
from typing import IO, List, Optional, Sequence

import numpy as np
from omegaconf import MISSING, OmegaConf

from ppo_control.analysis.curves import (
    Reference,
    Run,
    algorithm_config,
    load_references,
    load_run,
    plot_learning_curves,
    reference_sources,
)
from ppo_control.config import (
    RESUME_CHANGEABLE,
    ConfigError,
    TrainConfig,
    available_tasks,
    compose,
    parse_command_args,
    parse_overrides,
)
from ppo_control.config.errors import TrainingStopped, UserError
from ppo_control.runs.layout import CHECKPOINT_DIR, CONFIG_FILE
from ppo_control.runs.locks import RUN_LOCK_FILE, is_held, try_lock
from ppo_control.training.metrics import format_duration

RESULTS_ROOT = Path("benchmarks") / "results"
PER_RUN_KEYS = ("task", "seed", "run_dir", "resume")  # the benchmark sets these for each run
LOG_TAIL_LINES = 15
OUT_LOCK_FILE = ".benchmark.lock"  # held by the benchmark writing into an out= directory
REFERENCES_NAME = "configs/references.yaml"  # as the tables name plot.REFERENCES_FILE


@dataclass
class BenchmarkArgs:
    tasks: List[str] = MISSING  # task names, e.g. [HalfCheetah,Hopper]
    seeds: int = 3  # seeds first_seed..first_seed+seeds-1 per task
    first_seed: int = 0  # e.g. first_seed=5 seeds=5: seeds 5-9, ones the settings were not chosen on
    total_steps: Optional[int] = None  # default: the task's (or preset's) own total_steps
    preset: Optional[str] = None  # passed to train only when given
    jobs: int = 1  # trainings running at once
    out: Optional[str] = None  # default: benchmarks/results/<preset>


BENCHMARK_KEYS = tuple(f.name for f in fields(BenchmarkArgs))


@dataclass
class Job:
    """One (task, seed) run of the benchmark and what has to happen to it."""

    task: str
    seed: int
    run_dir: Path
    total_steps: int
    action: str = "train"  # train | resume | restart | skip
    steps_done: int = 0  # the last metrics row's step

    @property
    def name(self) -> str:
        return f"{self.task} s{self.seed}"

    @property
    def log(self) -> Path:
        return self.run_dir.parent / f"{self.run_dir.name}.log"

    def done(self, run: Optional[Run]) -> bool:
        """Whether `run` finished the training this job asks for (not a shorter one)."""
        return run is not None and run.finished and int(run.config["total_steps"]) == self.total_steps

    def load(self) -> Optional[Run]:
        return load_run(self.run_dir) if (self.run_dir / CONFIG_FILE).is_file() else None


@dataclass
class RunResult:
    task: str
    seed: int
    eval_return: float
    eval_return_std: float
    total_steps: int  # steps trained: the last metrics row's step
    wall_clock_s: float
    steps_per_s: float


# ---------------------------------------------------------------------------------------------
# Arguments and plan


def split_args(argv: list[str]) -> tuple[list[str], list[str]]:
    """(benchmark arguments, training overrides passed on to every run)."""
    own, train = [], []
    train_keys = [f.name for f in fields(TrainConfig)]
    for arg in parse_overrides(argv):
        key, value = arg.split("=", 1)
        root = key.split(".")[0]
        if root == "tasks" and not value.lstrip().startswith("["):
            arg = f"tasks=[{value}]"  # tasks=Hopper or tasks=Hopper,Ant: a list all the same
        if root in BENCHMARK_KEYS:
            own.append(arg)
        elif root in PER_RUN_KEYS:
            raise ConfigError(
                f"benchmark: {key}= is chosen per run by the benchmark; use tasks=[...], seeds=N and first_seed=S (seeds S..S+N-1)"
            )
        elif root in train_keys:
            train.append(arg)
        else:
            close = difflib.get_close_matches(root, [*BENCHMARK_KEYS, *train_keys], n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            raise ConfigError(
                f"benchmark: unknown argument '{key}'.{hint} Benchmark arguments: {', '.join(BENCHMARK_KEYS)}; "
                "any training key (e.g. env.n_envs=4) is passed to every run"
            )
    return own, train


def parse_args(argv: list[str]) -> tuple[BenchmarkArgs, list[str]]:
    own, train = split_args(argv)
    args = parse_command_args(BenchmarkArgs, own, "benchmark")
    tasks = list(dict.fromkeys(str(t) for t in args.tasks))
    known = available_tasks()
    for task in tasks:
        if task not in known:
            close = difflib.get_close_matches(task, known, n=1)
            hint = f" Did you mean '{close[0]}'?" if close else ""
            raise ConfigError(f"benchmark: unknown task '{task}'.{hint} Available tasks: {', '.join(known)}")
    for key, minimum in (("seeds", 1), ("first_seed", 0), ("jobs", 1), ("total_steps", 1)):
        value = args[key]
        if value is not None and value < minimum:
            raise ConfigError(f"benchmark: {key}={value} is not allowed: {key} must be >= {minimum}")
    if not tasks:
        raise ConfigError("benchmark: tasks=[] is empty; name at least one task, e.g. tasks=[Hopper]")
    args.tasks = tasks
    return args, train


def run_overrides(args: BenchmarkArgs, train: list[str]) -> list[str]:
    """What every new run of the benchmark gets besides task=, seed= and run_dir=."""
    given = [f"preset={args.preset}"] if args.preset is not None else []
    given += [f"total_steps={args.total_steps}"] if args.total_steps is not None else []
    return given + train


def plan_job(task: str, seed: int, requested: dict, total_steps: int, run_dir: Path) -> Job:
    """Decide what a run needs: train it, resume it, restart it (nothing to resume from) or skip it.
    A run already there must be the same experiment (same config but for what a resume may change)."""
    job = Job(task, seed, run_dir, total_steps)
    if not run_dir.exists() or (run_dir.is_dir() and not any(run_dir.iterdir())):
        return job
    if not run_dir.is_dir():
        raise UserError(f"'{run_dir}' is not a directory; choose another out=")
    if is_held(run_dir / RUN_LOCK_FILE):
        raise UserError(f"run_dir '{run_dir}' is in use by a training process; wait for it or stop it first")
    has_checkpoint = any((run_dir / CHECKPOINT_DIR).glob("*.pt"))
    if not (run_dir / CONFIG_FILE).is_file():
        if has_checkpoint:
            raise UserError(f"'{run_dir}' holds checkpoints but no {CONFIG_FILE}; remove it or choose another out=")
        job.action = "restart"
        return job
    run = load_run(run_dir)
    saved = {**run.algorithm, "seed": run.seed}
    wanted = {**requested, "seed": seed}
    for key in wanted.keys() & saved.keys():  # a key added since that run was made reads as its default (plot.load_run)
        if wanted[key] != saved[key]:
            raise UserError(
                f"'{run_dir}' holds a run with {key}={saved[key]!r}, but this benchmark asks for {key}={wanted[key]!r}; "
                "choose another out= (or remove that run)"
            )
    saved_total = int(run.config["total_steps"])
    if saved_total > total_steps:
        raise UserError(
            f"'{run_dir}' holds a run of total_steps={saved_total:,}, more than this benchmark's {total_steps:,}; choose another out="
        )
    job.steps_done = run.steps
    if job.done(run):
        job.action = "skip"
    elif has_checkpoint:
        job.action = "resume"  # also a finished run this benchmark asks to train longer
    else:
        job.action = "restart"  # killed before its first checkpoint: nothing to continue from
    return job


def plan(args: BenchmarkArgs, train: list[str], out: Path) -> list[Job]:
    """Every (task, seed) job, checked before anything runs, so bad input changes nothing."""
    jobs = []
    for task in args.tasks:
        cfg = compose([f"task={task}", "seed=0", *run_overrides(args, train)])  # validates the overrides: one line, exit 2
        requested = algorithm_config(OmegaConf.to_container(cfg, resolve=True))
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            jobs.append(plan_job(task, seed, requested, int(cfg.total_steps), out / "runs" / task / f"s{seed}"))
    return jobs


# ---------------------------------------------------------------------------------------------
# Running


def train_command(job: Job, args: BenchmarkArgs, train: list[str]) -> list[str]:
    base = [sys.executable, "-m", "ppo_control.train"]
    if job.action == "resume":
        # only what a resume may change goes along; the config check in plan_job covers the rest
        allowed = [a for a in train if a.split("=", 1)[0].startswith(RESUME_CHANGEABLE)]
        return [*base, f"resume={job.run_dir}", f"total_steps={job.total_steps}", *allowed]
    return [*base, f"task={job.task}", f"seed={job.seed}", *run_overrides(args, train), f"run_dir={job.run_dir}"]


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return "    (no log)"
    return "\n".join(f"    {line}" for line in text[-lines:])


def core_shares(cores: list[int], jobs: int) -> list[set[int]] | None:
    """Split the cores into `jobs` disjoint sets, one per concurrent training, or None when there are
    fewer cores than jobs. A training sizes its env and torch threads to its share (envs.usable_cores),
    so N trainings don't each start a thread per core and fight over all of them."""
    if jobs < 2 or len(cores) < jobs:
        return None
    return [set(cores[i * len(cores) // jobs : (i + 1) * len(cores) // jobs]) for i in range(jobs)]


class Runner:
    """Runs the jobs as training subprocesses, `args.jobs` at a time, one console line per start and end."""

    def __init__(self, args: BenchmarkArgs, train: list[str]):
        self.args, self.train = args, train
        self.active: dict[subprocess.Popen, tuple[Job, IO[str], float, set[int] | None]] = {}
        self.failed: list[Job] = []
        cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_setaffinity") else []
        self.free_shares: list[set[int] | None] = core_shares(cores, args.jobs) or [None] * args.jobs

    def run(self, jobs: list[Job]) -> list[Job]:
        pending = [job for job in jobs if job.action != "skip"]
        count = len(pending)
        try:
            while pending or self.active:
                while pending and len(self.active) < self.args.jobs:
                    self._start(pending.pop(0), count - len(pending), count)
                time.sleep(0.2)
                for proc in [p for p in self.active if p.poll() is not None]:
                    self._finish(proc)
        except KeyboardInterrupt:
            self._stop_all()
            raise
        return self.failed

    def _start(self, job: Job, number: int, count: int) -> None:
        if job.action == "restart":
            shutil.rmtree(job.run_dir)  # no checkpoint, so nothing a resume could use is lost
        command = train_command(job, self.args, self.train)
        job.log.parent.mkdir(parents=True, exist_ok=True)
        log = open(job.log, "a", encoding="utf-8")
        log.write(f"\n# {time.strftime('%Y-%m-%d %H:%M:%S')} python {' '.join(command[1:])}\n")
        log.flush()
        share = self.free_shares.pop(0)
        pin = (lambda: os.sched_setaffinity(0, share)) if share else None  # set before the child starts a thread
        # Own session: a Ctrl-C reaches only the benchmark, which then asks each training once.
        proc = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=pin
        )
        self.active[proc] = (job, log, time.monotonic(), share)
        what = {"train": "training", "resume": "resuming from its last checkpoint", "restart": "restarting (no checkpoint to resume)"}[
            job.action
        ]
        print(f"[{number}/{count}] {job.name}: {what}, log {job.log}", flush=True)

    def _finish(self, proc: subprocess.Popen) -> None:
        job, log, started, share = self.active.pop(proc)
        self.free_shares.append(share)
        log.close()
        run = job.load()
        if proc.returncode == 0 and job.done(run):
            result = run_result(run)
            print(
                f"done    {job.name}: eval {result.eval_return:.1f} ± {result.eval_return_std:.1f}, "
                f"{result.total_steps:,} steps in {format_duration(result.wall_clock_s)} ({result.steps_per_s:,.0f} steps/s)",
                flush=True,
            )
            return
        self.failed.append(job)
        code = proc.returncode
        why = f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}" if code else "exited without finishing"
        print(
            f"FAILED  {job.name}: {why} after {format_duration(time.monotonic() - started)}; end of {job.log}:\n{log_tail(job.log)}",
            flush=True,
        )

    def _stop_all(self) -> None:
        """Ask every training to finish its update and checkpoint (a second Ctrl-C: stop at once)."""
        print(
            f"\ninterrupted: {len(self.active)} training(s) finish their update and save a checkpoint "
            "(Ctrl-C again to stop them at once); run the same command again to continue",
            flush=True,
        )
        self._signal_all()
        try:
            for proc in self.active:
                proc.wait()
        except KeyboardInterrupt:
            self._signal_all()  # a trainer's second SIGINT stops it at once; its last checkpoint stays valid
            for proc in self.active:
                proc.wait()
        for _, log, _, _ in self.active.values():
            log.close()

    def _signal_all(self) -> None:
        for proc in self.active:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)


# ---------------------------------------------------------------------------------------------
# Results


def run_result(run: Run) -> RunResult:
    """A finished run's numbers, all from its metrics.jsonl (see plot.elapsed_seconds for the clock):
    the evaluation of the final policy (the last row), never of checkpoints/best.pt."""
    wall = run.wall_clock_s
    return RunResult(
        run.task,
        run.seed,
        float(run.final["eval_return"]),
        float(run.final["eval_return_std"]),
        run.steps,
        wall,
        run.steps / wall if wall > 0 else float("nan"),
    )


def write_csv(path: Path, columns: list[str], rows: list[dict]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


def task_rows(
    jobs: list[Job],
    results: dict[tuple[str, int], RunResult],
    runs: dict[tuple[str, int], Run],
    references: Optional[dict[str, list[Reference]]] = None,
) -> list[dict]:
    """results.csv: one row per task, over the seeds that finished, then one column per published
    source (`references`, default configs/references.yaml): its value for the task, '' if none."""
    references = load_references() if references is None else references
    rows = []
    for task in dict.fromkeys(job.task for job in jobs):
        done = [results[(task, j.seed)] for j in jobs if j.task == task and (task, j.seed) in results]
        returns = np.array([r.eval_return for r in done])
        preset = runs[(task, done[0].seed)].preset if done else ""
        published = {ref.source: ref.value for ref in references.get(task, [])}
        rows.append(
            {
                "task": task,
                "preset": preset,
                "seeds": len(done),
                "total_steps": done[0].total_steps if done else "",
                "eval_return_mean": float(returns.mean()) if done else "",
                "eval_return_std": float(returns.std()) if done else "",  # population std over seeds
                "eval_return_worst": float(returns.min()) if done else "",
                "eval_return_median": float(np.median(returns)) if done else "",
                "seed_ids": ";".join(str(r.seed) for r in done),
                "eval_returns": ";".join(repr(r.eval_return) for r in done),
                "wall_clock_s_mean": float(np.mean([r.wall_clock_s for r in done])) if done else "",
                "wall_clocks_s": ";".join(repr(r.wall_clock_s) for r in done),
                "steps_per_s_mean": float(np.mean([r.steps_per_s for r in done])) if done else "",
                **{source: published.get(source, "") for source in reference_sources(references)},
            }
        )
    return rows


CURVES = {"steps": "learning_curves.png", "time": "learning_curves_time.png"}


def markdown(
    command: str,
    jobs: list[Job],
    rows: list[dict],
    results: dict[tuple[str, int], RunResult],
    sources: Sequence[str] = (),
) -> str:
    """results.md: the table of task_rows, with a column per published source in `sources`."""
    published = (
        f" {', '.join(sources)}: the published final return for the task ({REFERENCES_NAME}; each entry's note says "
        "how it was measured: other task versions, and not always a mean over seeds), - where none is listed."
        if sources
        else ""
    )
    lines = [
        "# Benchmark results",
        "",
        f"`{command}`",
        "",
        f"Machine: {platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}.",
        "",
        "Eval return: each seed's final deterministic evaluation (mean action); worst, median and mean ± std "
        "(population std) over the seeds. The tables report each run's final policy, never its checkpoints/best.pt "
        "(the best-evaluated policy, kept beside it). Wall-clock per run: the mean over the seeds (each run's is in "
        "runs.csv), from the start of the first update to the end of the last one, with the evaluations and checkpoints "
        "in between; the final evaluation and any time a run spent stopped before a resume are not counted (derived from "
        "metrics.jsonl). Steps/s: steps / wall-clock." + published,
        "",
        "| task | preset | steps | seeds | worst | median | mean ± std | per seed | "
        + "".join(f"{source} | " for source in sources)
        + "wall-clock per run | steps/s |",
        "|---|---|---:|---:|---:|---:|---:|---|" + "---:|" * len(sources) + "---:|---:|",
    ]
    for row in rows:
        task = row["task"]
        missing = [j.seed for j in jobs if j.task == task and (task, j.seed) not in results]
        per_seed = ", ".join(f"{results[(task, int(s))].eval_return:.1f}" for s in row["seed_ids"].split(";") if s)
        per_seed += f" (not finished: {', '.join(f's{s}' for s in missing)})" if missing else ""
        refs = "".join(f"{row[source]:.1f} | " if row.get(source, "") != "" else "- | " for source in sources)
        if row["seeds"]:
            lines.append(
                f"| {task} | {row['preset']} | {row['total_steps']:,} | {row['seeds']} | "
                f"{row['eval_return_worst']:.1f} | {row['eval_return_median']:.1f} | "
                f"{row['eval_return_mean']:.1f} ± {row['eval_return_std']:.1f} | {per_seed} | {refs}"
                f"{format_duration(row['wall_clock_s_mean'])} | {row['steps_per_s_mean']:,.0f} |"
            )
        else:
            lines.append(f"| {task} | | | 0 | — | — | — | {per_seed} | {refs}— | — |")
    if results:
        lines += ["", f"![learning curves]({CURVES['steps']})", "", f"![learning curves over wall-clock time]({CURVES['time']})"]
    return "\n".join(lines) + "\n"


def write_results(out: Path, jobs: list[Job], command: str) -> list[Path]:
    """results.csv, runs.csv, results.md and both learning-curve figures, from the finished runs."""
    runs: dict[tuple[str, int], Run] = {}
    for job in jobs:
        run = job.load()
        if job.done(run):
            runs[(job.task, job.seed)] = run
    results = {key: run_result(run) for key, run in runs.items()}
    references = load_references()
    rows = task_rows(jobs, results, runs, references)
    written = [out / "results.csv", out / "runs.csv", out / "results.md"]
    write_csv(written[0], list(rows[0]), rows)
    write_csv(
        written[1], [f.name for f in fields(RunResult)], [vars(results[(j.task, j.seed)]) for j in jobs if (j.task, j.seed) in results]
    )
    written[2].write_text(markdown(command, jobs, rows, results, reference_sources(references)), encoding="utf-8")
    for x, name in CURVES.items():
        if runs:
            written.append(plot_learning_curves(list(runs.values()), x, out / name, references))
        else:
            (out / name).unlink(missing_ok=True)  # a previous invocation's figure would not match these results
    return written


def report(out: Path, jobs: list[Job], command: str) -> None:
    for path in write_results(out, jobs, command):
        print(f"written     {path}", flush=True)


# ---------------------------------------------------------------------------------------------
# Command line


def main(argv: list[str]) -> None:
    args, train = parse_args(argv)
    if args.out:
        out = Path(args.out)
    else:  # named after the preset the runs get (the config's default when none is given)
        out = RESULTS_ROOT / str(compose([f"task={args.tasks[0]}", *run_overrides(args, train)]).get("preset", "default"))
    jobs = plan(args, train, out)  # every check before anything is created or changed
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"out: cannot create '{out}' ({exc.strerror or exc}); choose a writable location") from None
    # Each invocation writes its own seeds' tables: two at once into one out= would leave only the
    # last writer's.
    out_lock, holder = try_lock(out / OUT_LOCK_FILE)
    if out_lock is None:
        raise UserError(f"out '{out}' is in use by another benchmark ({holder}); wait for it, or give each benchmark its own out=")

    counts = {action: sum(j.action == action for j in jobs) for action in ("train", "resume", "restart", "skip")}
    print(
        f"benchmark   {len(args.tasks)} task(s) x {args.seeds} seed(s) -> {out}  "
        f"({counts['train'] + counts['restart']} to train, {counts['resume']} to resume, {counts['skip']} finished; {args.jobs} at a time)",
        flush=True,
    )
    for job in jobs:
        if job.action == "skip":
            print(f"skip    {job.name}: finished ({job.steps_done:,} steps)", flush=True)

    command = " ".join(["python -m ppo_control.benchmark", *argv])
    # SIGTERM stops the suite like Ctrl-C, and so does SIGINT even where the shell started the suite
    # with SIGINT ignored (`benchmark ... &` in a script), as the trainings do.
    previous = {sig: signal.signal(sig, signal.default_int_handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        failed = Runner(args, train).run(jobs)
    except KeyboardInterrupt:
        report(out, jobs, command)  # the runs that finished before the stop still get their table
        raise
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    report(out, jobs, command)
    if failed:
        raise TrainingStopped(
            f"{len(failed)} of {len(jobs)} runs failed ({', '.join(j.name for j in failed)}); "
            "see their logs above, then run the same command again to retry them"
        )
