"""How close training gets to envpool's own stepping rate as the cores grow: raw envpool vs our
training, side by side, per core count.

    python -m benchmarks.speed.cpu_scaling [--task Ant] [--threads 1,2,4,8,16] [--n-envs 64] [--seconds 10]
        [--repeats 3] [--torch-threads k|0] [--out benchmarks/results/cpu_scaling.json]

For each thread count k (capped at the cores this process may use, os.sched_getaffinity), in this
one process, every thread of it is confined to k of those cores (a k-core machine: the env
threads, the policy's threads and the main thread share them), then `--repeats` times in turn (so
drifting load hits both alike), each measured for about `--seconds`:
  raw    envpool alone: the task's env id (tasks/<task>.yaml), `--n-envs` sub-envs, k threads, sync
         mode, uniform random actions within the bounds (drawn beforehand); sub-env steps per second.
  sync   our training, env.num_threads=k, torch_threads=k (or 0, the default: one thread while
         collecting, k for the update), env.vectorization=sync: whole updates (collect + update),
         steps/s as metrics.jsonl's `sps` (the row `Trainer.train_one_update` returns and logs),
         over the updates after a first, warm-up one. `collect_sps` is the same steps over the
         time spent in `collect()` alone: what the update's share of the time leaves aside.
The JSON holds the medians, every repetition, and each training rate's ratio to raw. PPO settings
are the task's defaults except env.n_envs (the same n_envs for raw and training); training runs
write to a temporary run_dir, deleted afterwards. Raw stepping's uniform actions are not the
policy's (an untrained policy's are smaller), so the physics may cost more or less per step.

Default n_envs 64 (for a 16-core machine): four sub-envs per thread at 16 threads, while the
batch (n_envs x rollout_steps) stays within a factor two of the default one the task settings were
tuned for.

The results in benchmarks/results/cpu_scaling/ also measured overlapped collection (two groups of
sub-envs, one stepping while the policy acts for the other: overlap_prototype.diff there, against
the commit that added this script); it was within noise of sync and is not part of the package.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import versions

WARMUP_STEPS = 20  # raw stepping: steps before the clock starts (threads spun up, caches warm)


def confine_to(cpus: list[int]) -> None:
    """Run every thread of this process on `cpus` only; threads started later inherit it from
    the thread that starts them (the main thread)."""
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except (ProcessLookupError, PermissionError):  # a thread that has just ended
            pass


def raw_steps_per_second(env_id: str, n_envs: int, threads: int, seconds: float, seed: int = 0) -> float:
    """envpool alone: sub-env steps per second over about `seconds`."""
    import envpool

    envs = envpool.make_gymnasium(env_id, num_envs=n_envs, batch_size=n_envs, num_threads=threads, seed=seed)
    try:
        space = envs.action_space
        rng = np.random.default_rng(seed)
        actions = [rng.uniform(space.low, space.high, size=(n_envs, *space.shape)) for _ in range(16)]
        envs.reset()
        for i in range(WARMUP_STEPS):
            envs.step(actions[i % len(actions)])
        steps, started = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - started) < seconds:
            for _ in range(10):  # the clock read per batch of steps, not per step
                envs.step(actions[steps % len(actions)])
                steps += 1
        return steps * n_envs / elapsed
    finally:
        envs.close()


def train_steps_per_second(task: str, n_envs: int, threads: int, torch_threads: int, seconds: float, run_dir: Path) -> tuple[float, float]:
    """Our training: whole updates for about `seconds` after one warm-up update. Returns (steps/s
    from the updates' `sps`: total steps / total update time; steps/s of `collect()` alone)."""
    from ppo_control.config import compose
    from ppo_control.training.trainer import Trainer

    cfg = compose(
        [
            f"task={task}",
            "device=cpu",
            "env.backend=envpool",
            f"env.n_envs={n_envs}",
            f"env.num_threads={threads}",
            f"torch_threads={torch_threads}",
            "total_steps=1000000000",  # never reached: training does not end, nor does the linear lr reach 0
            "eval.every_steps=0",
            "checkpoint.every_steps=0",
            "log.wandb=false",
            "log.tensorboard=false",
            f"run_dir={run_dir}",
        ]
    )
    trainer = Trainer(cfg)
    collect, collect_seconds = trainer.collector.collect, []

    def timed_collect():
        started = time.perf_counter()
        try:
            return collect()
        finally:
            collect_seconds.append(time.perf_counter() - started)

    trainer.collector.collect = timed_collect
    try:
        trainer.train_one_update()  # warm-up
        rows, started = [], time.perf_counter()
        while not rows or time.perf_counter() - started < seconds:
            rows.append(trainer.train_one_update())
    finally:
        trainer.close()
        shutil.rmtree(run_dir, ignore_errors=True)
    steps = sum(row["steps_this_update"] for row in rows)
    return steps / sum(row["steps_this_update"] / row["sps"] for row in rows), steps / sum(collect_seconds[1:])


def machine_and_versions() -> tuple[dict[str, Any], dict[str, Any]]:
    info = versions()
    machine = {"cpu_model": info.get("cpu_model"), "cores": len(os.sched_getaffinity(0)), "platform": info.get("platform")}
    return machine, {name: info.get(name) for name in ("python", "torch", "envpool", "numpy", "mujoco")}


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="Ant", help="a task file name (tasks/<task>.yaml)")
    parser.add_argument("--threads", default="1,2,4,8,16", help="comma-separated thread counts, capped at the usable cores")
    parser.add_argument("--n-envs", type=int, default=64, help="sub-envs for raw and training alike")
    parser.add_argument("--seconds", type=float, default=10.0, help="measured time of each repetition")
    parser.add_argument("--repeats", type=int, default=3, help="repetitions per measurement (medians are reported)")
    parser.add_argument(
        "--torch-threads", default="k", choices=["k", "0"], help="training's torch_threads: k, or 0 (the default: 1 collecting, k updating)"
    )
    parser.add_argument("--out", default="benchmarks/results/cpu_scaling.json")
    args = parser.parse_args(argv)
    if args.n_envs < 1:
        parser.error(f"--n-envs must be >= 1, got {args.n_envs}")
    try:
        args.threads = sorted({int(k) for k in args.threads.split(",") if k.strip()})
    except ValueError:
        parser.error(f"--threads: expected comma-separated integers, got {args.threads!r}")
    if not args.threads or min(args.threads) < 1:
        parser.error("--threads: expected positive thread counts")
    return args


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    from ppo_control.config import compose

    env_id = str(compose([f"task={args.task}"]).env.id)
    machine, library_versions = machine_and_versions()
    cores = machine["cores"]
    threads = sorted({min(k, cores) for k in args.threads})
    if threads != args.threads:
        print(f"threads {args.threads} capped at {cores} usable cores: {threads}", flush=True)

    all_cpus = sorted(os.sched_getaffinity(0))
    results: dict[str, Any] = {}
    work = Path(tempfile.mkdtemp(prefix="cpu_scaling-"))
    try:
        for k in threads:
            confine_to(all_cpus[:k])
            torch_threads = k if args.torch_threads == "k" else 0
            runs: dict[str, list[float]] = {"raw": []}
            for repeat in range(args.repeats):
                runs["raw"].append(raw_steps_per_second(env_id, args.n_envs, k, args.seconds))
                train, collect = train_steps_per_second(args.task, args.n_envs, k, torch_threads, args.seconds, work / f"k{k}-r{repeat}")
                runs.setdefault("sync", []).append(train)
                runs.setdefault("collect", []).append(collect)
                print(f"k={k:<3d} repeat {repeat}: " + "  ".join(f"{m} {v[-1]:>10,.0f}" for m, v in runs.items()), flush=True)
            median = {name: statistics.median(values) for name, values in runs.items()}
            raw = median["raw"]
            results[str(k)] = {"cpus": all_cpus[:k], "raw_sps": raw}
            train, collect = median["sync"], median["collect"]
            results[str(k)].update(train_sps=train, ratio_train_to_raw=train / raw, collect_sps=collect, ratio_collect_to_raw=collect / raw)
            results[str(k)]["repeats"] = runs
    finally:
        confine_to(all_cpus)
        shutil.rmtree(work, ignore_errors=True)

    report = {
        "benchmark": "cpu_scaling",
        "task": args.task,
        "env_id": env_id,
        "n_envs": args.n_envs,
        "seconds": args.seconds,
        "repeats": args.repeats,
        "torch_threads": args.torch_threads,
        "env_threads": "env.num_threads=k",
        "machine": machine,
        "versions": library_versions,
        "threads": results,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\n{args.task} ({env_id}), n_envs={args.n_envs}, torch_threads={args.torch_threads}, {machine['cpu_model']}, {cores} cores")
    print(f"medians of {args.repeats}; steps/s (collect(): collection alone, the update left out)")
    print("| cores | raw | train | train/raw | collect() | collect()/raw |")
    print("|---:|---:|---:|---:|---:|---:|")
    for k, r in results.items():
        print(
            f"| {k} | {r['raw_sps']:,.0f} | {r['train_sps']:,.0f} | {r['ratio_train_to_raw']:.2f} | "
            f"{r['collect_sps']:,.0f} | {r['ratio_collect_to_raw']:.2f} |"
        )
    print(f"wrote {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
