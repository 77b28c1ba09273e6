"""Training steps/s on a Playground robot task against envpool's raw stepping of the same env.

    python -m benchmarks.robots.robot_throughput [task=Go1JoystickFlatTerrain] [total_steps=262144] [raw_seconds=20]
        [repeats=3] [threads=0] [out=benchmarks/results/robots/throughput-<task>.json]

Per repeat, interleaved so drifting machine load hits both alike:
  raw    envpool alone: the task's env with the task file's n_envs and worker threads, stepped with
         uniformly random actions in [-1, 1] for `raw_seconds` (envpool's own NEXT_STEP autoreset;
         no policy, no copies). Random actions make the robot fall and reset as an untrained policy's do.
  ours   `python -m ppo_control.train task=<task>` for `total_steps`, the task file's settings, its
         steps/s from metrics.jsonl (collect + update time per update, the first update excluded).
The table shows medians over the repeats and ours / raw: the share of envpool's own rate that
training keeps. Run it on an otherwise idle machine.
"""

from __future__ import annotations

import multiprocessing
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import (
    RESULTS_DIR,
    markdown_table,
    median,
    ours_command,
    ours_steps_per_second,
    parse_args,
    read_metrics,
    run_measured,
    versions,
    write_json,
)

DEFAULTS = {
    "task": "Go1JoystickFlatTerrain",
    "total_steps": 262144,
    "raw_seconds": 20.0,
    "repeats": 3,
    "threads": 0,  # envpool worker threads; 0 = what training uses (one per usable core)
    "out": "",
}


def raw_steps_per_second(env_id: str, n_envs: int, threads: int, seconds: float, seed: int = 0) -> float:
    """envpool's own rate on `env_id`: random actions, its own autoreset, nothing else. Measured in a
    child process: a closed pool's memory stays with the process that built it, and the training
    run measured next needs that memory for its own pool."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(_raw_rate, (env_id, n_envs, threads, seconds, seed))


def _raw_rate(env_id: str, n_envs: int, threads: int, seconds: float, seed: int) -> float:
    import envpool
    import numpy as np

    env = envpool.make_gymnasium(env_id, num_envs=n_envs, batch_size=n_envs, num_threads=threads, seed=seed)
    rng = np.random.default_rng(seed)
    actions = rng.uniform(-1.0, 1.0, (64, n_envs, *env.action_space.shape))
    env.reset()
    for k in range(20):  # warm-up
        env.step(actions[k % 64])
    steps, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        env.step(actions[steps % 64])
        steps += 1
    rate = steps * n_envs / (time.perf_counter() - started)
    env.close()
    return rate


def main(argv: list[str]) -> None:
    args = parse_args(argv, DEFAULTS, __doc__)
    from ppo_control.config import compose
    from ppo_control.envs import usable_cores

    cfg = compose([f"task={args['task']}"])
    threads = int(args["threads"]) or min(int(cfg.env.num_threads) or usable_cores(), int(cfg.env.n_envs))
    out = Path(args["out"] or RESULTS_DIR / "robots" / f"throughput-{args['task']}.json")
    raw, ours = [], []
    with tempfile.TemporaryDirectory() as work:
        for repeat in range(int(args["repeats"])):
            raw.append(raw_steps_per_second(str(cfg.env.id), int(cfg.env.n_envs), threads, float(args["raw_seconds"]), seed=repeat))
            run_dir = Path(work) / f"ours-{repeat}"
            overrides = [f"total_steps={args['total_steps']}", "eval.every_steps=0", "eval.episodes=1", f"env.num_threads={threads}"]
            run_measured(ours_command(args["task"], repeat, run_dir, overrides), Path(work) / f"ours-{repeat}.log")
            ours.append(ours_steps_per_second(read_metrics(run_dir))["sps"])
            print(f"repeat {repeat}: raw {raw[-1]:,.0f} steps/s, ours {ours[-1]:,.0f} steps/s", flush=True)
    result = {
        "task": args["task"],
        "env_id": str(cfg.env.id),
        "n_envs": int(cfg.env.n_envs),
        "envpool_threads": threads,
        "total_steps": int(args["total_steps"]),
        "raw_sps": raw,
        "ours_sps": ours,
        "raw_sps_median": median(raw),
        "ours_sps_median": median(ours),
        "ours_over_raw": median(ours) / median(raw),
        "versions": versions(),
    }
    write_json(out, result)
    rows = [[args["task"], f"{median(raw):,.0f}", f"{median(ours):,.0f}", f"{median(ours) / median(raw):.2f}"]]
    print(markdown_table(["task", "envpool raw steps/s", "training steps/s", "training / raw"], rows))
    print(f"written {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
