"""A trained robot policy evaluated on envpool (the engine it trained on) and on the MuJoCo
reference of its task (ppo_control/envs/mujoco), same episodes count and seed scheme on both.

    python -m benchmarks.robots.reference_cross_eval run=<run dir> [episodes=16] [checkpoint=<file>]
        [seed=<evaluation seed>] [noise_level=<override on both sides>] [rng=envpool|numpy] [out=<json path>]

Deterministic actions (the policy's mean), the evaluation seed `evaluate` uses (run seed +
EVAL_SEED_OFFSET), the run's env.kwargs on both sides, min(episodes, 16) sub-envs with episodes
assigned to them up front, as in `evaluate`. Per side: mean and std over episodes of the return,
the length, every reward term and the tracking errors (each the episode's mean per step), and the
fall rate; a command response `response/<direction>` is the episode's ratio of sums (episodes that
never command that direction count in nothing). `z` is the difference of the means in units of its
standard error: within about 2, the two sides agree within evaluation noise.

rng=envpool (the default): the reference replays envpool's random streams, so both sides run the
same episodes (resets, commands, noise) and only the simulation differs; per-episode numbers then
agree closely, and the JSON's `episodes_raw` can be compared pairwise. rng=numpy: the reference
draws from numpy's generators, independent episodes of the same distribution.
Writes a JSON file, the markdown table next to it (.md), and prints the table.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.common import RESULTS_DIR, markdown_table, parse_args, rel, run_directory, versions, write_json

DEFAULTS = {"run": None, "episodes": 16, "checkpoint": None, "seed": None, "noise_level": None, "rng": "envpool", "out": None}
ACHIEVED, COMMANDED = "/achieved", "/commanded"  # the parts of a ratio diagnostic (envs.base.RATIO_PARTS)


def run_episodes(policy, envs, episodes: int, seed: int) -> dict[str, np.ndarray]:
    """`episodes` deterministic episodes (quota per sub-env, as evaluation.evaluate_episodes does);
    per episode: return, length, fell, and the mean per step of every diagnostic."""
    from ppo_control.rl.history import ObservationHistory

    n = envs.num_envs
    quota = np.array([episodes // n + (i < episodes % n) for i in range(n)])
    finished = np.zeros(n, dtype=np.int64)
    sums: dict[str, np.ndarray] = {}
    rows: list[dict[str, float]] = []
    history = ObservationHistory(policy.history)
    obs = history.reset(envs.reset(seed))
    state = policy.initial_state(n)
    with torch.inference_mode():
        while (finished < quota).any():
            action, state = policy.deterministic_step(torch.from_numpy(obs), state)
            result = envs.step(action.numpy())
            for key, values in result.diagnostics.items():
                sums.setdefault(key, np.zeros(n))
                sums[key] += np.asarray(values, dtype=np.float64)
            done = result.terminated | result.truncated
            for k, i in enumerate(np.flatnonzero(done)):
                length = int(result.episode_lengths[k])
                if finished[i] < quota[i]:
                    row = {"return": float(result.episode_returns[k]), "length": float(length), "fall": float(result.terminated[i])}
                    row.update(episode_means(sums, i, length))
                    rows.append(row)
                finished[i] += 1
                for total in sums.values():
                    total[i] = 0.0
            obs = history.step(result.obs, done)
            state = policy.continue_state(state, done)
    return {key: np.array([row[key] for row in rows]) for key in rows[0]}


def episode_means(sums: dict[str, np.ndarray], i: int, length: int) -> dict[str, float]:
    """Sub-env i's episode: each diagnostic's mean per step; a ratio diagnostic's sum of achieved over
    sum of commanded (NaN where that direction was never commanded)."""
    out = {}
    for key, total in sums.items():
        if key.endswith(ACHIEVED):
            name = key[: -len(ACHIEVED)]
            commanded = float(sums[name + COMMANDED][i])
            out[name] = float(total[i]) / commanded if commanded > 0 else math.nan
        elif not key.endswith(COMMANDED):
            out[key] = float(total[i]) / length
    return out


def summarize(values: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    """Mean and std over the episodes where the metric is defined, and how many those are."""
    out = {}
    for key, v in values.items():
        v = v[~np.isnan(v)]
        out[key] = {"mean": float(v.mean()) if len(v) else math.nan, "std": float(v.std()) if len(v) else math.nan, "episodes": len(v)}
    return out


def z_score(a: np.ndarray, b: np.ndarray) -> float | None:
    """(mean a - mean b) over the standard error of that difference; None where it is zero."""
    a, b = a[~np.isnan(a)], b[~np.isnan(b)]
    error = math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b)) if len(a) > 1 and len(b) > 1 else 0.0
    return None if error == 0.0 else float((a.mean() - b.mean()) / error)


def cell(values: np.ndarray) -> str:
    """mean ± std over the episodes where the metric is defined, with their count when not all."""
    defined = values[~np.isnan(values)]
    if not len(defined):
        return "-"
    count = "" if len(defined) == len(values) else f" ({len(defined)} ep.)"
    return f"{defined.mean():.4g} ± {defined.std():.3g}{count}"


def main(argv: list[str]) -> None:
    args = parse_args(argv, DEFAULTS, __doc__)
    run = run_directory(args)
    from omegaconf import OmegaConf

    from ppo_control.envs.envpool_backend import EnvpoolVecEnv
    from ppo_control.envs.mujoco import has_reference, make_reference_vec_env
    from ppo_control.rl.evaluation import EVAL_SEED_OFFSET, MAX_EVAL_ENVS
    from ppo_control.runs.directory import load_run
    from ppo_control.runs.layout import checkpoint_to_load

    loaded = load_run(run, checkpoint_to_load(run, args["checkpoint"]))
    cfg, policy = loaded.cfg, loaded.policy
    env_id = str(cfg.env.id)
    if not has_reference(env_id):
        print(f"error: task {env_id} has no MuJoCo reference", file=sys.stderr)
        raise SystemExit(2)
    episodes = int(args["episodes"])
    n = min(episodes, MAX_EVAL_ENVS)
    seed = int(args["seed"]) if args["seed"] is not None else int(cfg.seed) + EVAL_SEED_OFFSET
    kwargs = OmegaConf.to_container(cfg.env.kwargs) if cfg.env.kwargs else {}
    if args["noise_level"] is not None:
        kwargs["noise_level"] = float(args["noise_level"])
    max_steps = cfg.env.max_episode_steps
    torch.set_num_threads(1)

    sides: dict[str, dict[str, np.ndarray]] = {}
    seconds: dict[str, float] = {}
    for side, make in (
        ("envpool", lambda: EnvpoolVecEnv(env_id, n, 1, kwargs, max_steps)),
        ("reference", lambda: make_reference_vec_env(env_id, n, kwargs, max_steps, num_threads=1, rng=str(args["rng"]))),
    ):
        envs = make()
        start = time.perf_counter()
        try:
            sides[side] = run_episodes(policy, envs, episodes, seed)
        finally:
            envs.close()
        seconds[side] = time.perf_counter() - start

    metrics = list(sides["envpool"])
    table_rows, comparison = [], {}
    for key in metrics:
        a, b = sides["envpool"][key], sides["reference"][key]
        z = z_score(a, b)
        comparison[key] = z
        name = "fall rate" if key == "fall" else key
        table_rows.append([name, cell(a), cell(b), "-" if z is None else f"{z:+.2f}"])
    table = markdown_table(["metric (per episode)", "envpool", "MuJoCo reference", "z"], table_rows)
    result: dict[str, Any] = {
        "run": rel(run),
        "checkpoint": rel(loaded.checkpoint_path),
        "task": str(cfg.task),
        "env_id": env_id,
        "episodes": episodes,
        "sub_envs": n,
        "seed": seed,
        "env_kwargs": kwargs,
        "rng": str(args["rng"]),
        "seconds": seconds,
        "envpool": summarize(sides["envpool"]),
        "reference": summarize(sides["reference"]),
        "z": comparison,
        "episodes_raw": {side: {key: values.tolist() for key, values in data.items()} for side, data in sides.items()},
        "versions": versions(),
        "table": table,
    }
    out = Path(args["out"]) if args["out"] else RESULTS_DIR / "reference_cross_eval" / f"{cfg.task}-{run.name}.json"
    write_json(out, result)
    out.with_suffix(".md").write_text(
        f"{cfg.task} ({rel(loaded.checkpoint_path)}), {episodes} episodes per side, seed {seed}, rng={args['rng']}\n\n{table}\n"
    )
    print(table)
    print(f"\nwritten to {rel(out)}")


if __name__ == "__main__":
    main(sys.argv[1:])
