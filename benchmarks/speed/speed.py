"""Training steps/s (and peak RSS) of ppo_control vs Stable-Baselines3 PPO, same task, same machine.

    pip install -r benchmarks/requirements.txt
    python -m benchmarks.speed.speed [task=HalfCheetah] [total_steps=65536] [fast_steps=262144] [repeats=3]
        [pairs=[paper,fast]] [seed=0] [sb3_threads=0] [work_dir=<keep run dirs here>] [out=benchmarks/results/speed.json]

Two comparisons, each `repeats` times, interleaved (ours paper, SB3 paper, ours fast, SB3 default,
then the next repeat) so drifting machine load hits both sides alike; every run is a fresh process
trained from scratch on the CPU, and the table shows medians over the repeats:

  paper  ours `preset=paper` vs SB3 PPO with the same hyperparameters (benchmarks/scores/sb3_ppo.py
         hparams=paper: 1 env, 2048 steps, 10 epochs x 32 minibatches of 64, lr 3e-4 linear, 64-64
         tanh, obs+reward normalization). Target: ours >= 1.5x.
  fast   ours with its default (`fast`) preset vs SB3's default PPO + VecNormalize. Target: >= 10x.

Both sides train `total_steps` env steps, except ours-fast, which trains `fast_steps` (default
4 x total_steps: it is much faster and its updates are larger, so this gives it a comparable number of
updates; steps/s is a rate, so the counts need not match).

steps/s excludes start-up and the first rollout+update on both sides:
  ours  sum(steps_this_update) / sum(steps_this_update / sps) over metrics.jsonl rows after the
        first (as benchmarks/speed/distributed.py): per-update collect + update time. With
        `eval.every_steps=0` the only evaluation runs after the last update, outside that time.
        `sps_wall` in the JSON also counts what happens between updates (logging, checkpoint writes).
  SB3   (steps after the first iteration) / (start of the 2nd rollout -> end of learn()).
Peak RSS and CPU seconds come from os.wait4 on each run's own process (per run, not a running max).
The resolved config of ours' paper run is checked against the SB3 paper hyperparameters; any
difference is printed and stored under `paper_mismatches`.

Writes benchmarks/results/speed.json and prints a markdown table. Run it on an otherwise idle
machine: each run's launch load average is stored (`load_before`) and printed.

Expected duration on the 2-core dev machine with the defaults (total_steps=65536, repeats=3), if
SB3 runs at ~1,000 steps/s, ours paper ~3,000 and ours fast ~15,000: per repeat 2 x ~72 s (SB3) +
~28 s (ours paper) + ~24 s (ours fast), start-up (~6 s per process) included, so ~10 min in all;
~15 min if SB3 only manages ~650 steps/s. Time scales linearly with total_steps.
"""

from __future__ import annotations

import json
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
    ours_steps_per_second,
    parse_args,
    read_metrics,
    rel,
    resolved_config,
    run_measured,
    versions,
    write_json,
)

USAGE = __doc__
DEFAULTS: dict[str, Any] = {
    "task": "HalfCheetah",
    "total_steps": 65536,  # 32 updates of 2048 for SB3 and ours-paper
    "fast_steps": 0,  # 0 = 4 x total_steps
    "repeats": 3,
    "pairs": ["paper", "fast"],
    "seed": 0,
    "sb3_threads": 0,  # torch threads in the SB3 runs; 0 = torch's default (one per core), as SB3 users get
    "work_dir": None,  # keep run dirs, logs and SB3 result files here (default: a temporary directory)
    "out": str(RESULTS_DIR / "speed.json"),
}
PAIRS = {  # name: (ours overrides, SB3 hparams, target ratio, description)
    "paper": (["preset=paper"], "paper", 1.5, "ours preset=paper vs SB3 at identical hyperparameters"),
    "fast": ([], "default", 10.0, "ours default (fast) preset vs SB3 default PPO + VecNormalize"),
}


def run_ours(task: str, seed: int, steps: int, overrides: list[str], run_dir: Path) -> dict[str, Any]:
    cmd = ours_command(task, seed, run_dir, [f"total_steps={steps}", "device=cpu", "eval.every_steps=0", "eval.episodes=1", *overrides])
    measured = run_measured(cmd, run_dir.parent / f"{run_dir.name}.log")
    rows = read_metrics(run_dir)
    cfg = resolved_config(run_dir)
    env, ppo = cfg["env"], cfg["ppo"]
    return {
        **ours_steps_per_second(rows),
        **measured.as_dict(),
        "steps": rows[-1]["step"],
        "command": " ".join(cmd[1:]),
        "config": {
            "preset": cfg.get("preset"),
            "backend": env.get("backend"),
            "n_envs": env["n_envs"],
            "vectorization": env.get("vectorization"),
            "rollout_steps": ppo["rollout_steps"],
            "epochs": ppo["epochs"],
            "minibatches": ppo["minibatches"],
            "hidden_sizes": cfg["policy"]["hidden_sizes"],
            "activation": cfg["policy"]["activation"],
        },
        "resolved_config": cfg,
    }


def run_sb3(task: str, seed: int, steps: int, hparams: str, out: Path, threads: int) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.scores.sb3_ppo",
        f"task={task}",
        f"hparams={hparams}",
        f"seed={seed}",
        f"total_steps={steps}",
        f"torch_threads={threads}",
        f"launch_time={time.time()!r}",
        f"out={out}",
    ]
    measured = run_measured(cmd, out.with_suffix(".log"))
    result = json.loads(out.read_text())
    result.pop("versions", None)
    return {
        **result,
        **measured.as_dict(),
        "peak_rss_mib_self": result["peak_rss_mib"],
        "peak_rss_mib": measured.peak_rss_mib,
        "command": " ".join(cmd[1:]),
    }


def paper_mismatches(cfg: dict[str, Any], sb3: dict[str, Any]) -> list[str]:
    """Differences between ours' resolved paper config and the SB3 paper run's actual settings."""
    hp, vn, ppo, pol, norm = sb3["hyperparameters"], sb3["vecnormalize"], cfg["ppo"], cfg["policy"], cfg["normalize"]
    batch = cfg["env"]["n_envs"] * ppo["rollout_steps"]
    checks = [
        ("env.n_envs vs n_envs", cfg["env"]["n_envs"], hp["n_envs"]),
        ("ppo.rollout_steps vs n_steps", ppo["rollout_steps"], hp["n_steps"]),
        ("ppo.epochs vs n_epochs", ppo["epochs"], hp["n_epochs"]),
        ("minibatch size vs batch_size", batch // ppo["minibatches"], hp["batch_size"]),
        ("ppo.learning_rate vs initial lr", ppo["learning_rate"], hp["learning_rate_at_start"]),
        ("lr_schedule linear vs lr at end == 0", ppo["lr_schedule"] == "linear", hp["learning_rate_at_end"] == 0.0),
        ("ppo.gamma", ppo["gamma"], hp["gamma"]),
        ("ppo.gae_lambda", ppo["gae_lambda"], hp["gae_lambda"]),
        ("ppo.clip_range", ppo["clip_range"], hp["clip_range"]),
        ("ppo.clip_value_loss vs clip_range_vf", ppo["clip_value_loss"], hp["clip_range_vf"] is not None),
        ("ppo.ent_coef", ppo["ent_coef"], hp["ent_coef"]),
        ("ppo.vf_coef", ppo["vf_coef"], hp["vf_coef"]),
        ("ppo.max_grad_norm", ppo["max_grad_norm"], hp["max_grad_norm"]),
        ("ppo.target_kl", ppo["target_kl"], hp["target_kl"]),
        ("ppo.normalize_adv", ppo["normalize_adv"], hp["normalize_advantage"]),
        ("policy.hidden_sizes vs net_arch.pi", list(pol["hidden_sizes"]), list(hp["net_arch"]["pi"])),
        ("policy.hidden_sizes vs net_arch.vf", list(pol["hidden_sizes"]), list(hp["net_arch"]["vf"])),
        ("policy.activation", pol["activation"], hp["activation_fn"].lower()),
        ("policy.log_std_init", pol["log_std_init"], hp["log_std_init"]),
        ("normalize.obs", norm["obs"], vn["norm_obs"]),
        ("normalize.reward", norm["reward"], vn["norm_reward"]),
        ("normalize.obs_clip", norm["obs_clip"], vn["clip_obs"]),
        ("normalize.reward_clip", norm["reward_clip"], vn["clip_reward"]),
    ]
    return [f"{name}: ours {a!r}, SB3 {b!r}" for name, a, b in checks if a != b]


def main(argv: list[str]) -> None:
    args = parse_args(argv, DEFAULTS, USAGE)
    task, total, repeats, seed = args["task"], args["total_steps"], args["repeats"], args["seed"]
    fast_steps = args["fast_steps"] or 4 * total
    pairs = args["pairs"]
    unknown = [p for p in pairs if p not in PAIRS]
    if unknown:
        raise SystemExit(f"pairs: unknown {unknown}; choose from {list(PAIRS)}")
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {p: {"ours": [], "sb3": []} for p in pairs}
    tmp = None if args["work_dir"] else tempfile.TemporaryDirectory(prefix="speed-")
    work = Path(args["work_dir"] or tmp.name).resolve()  # type: ignore[union-attr]
    work.mkdir(parents=True, exist_ok=True)
    started = time.time()
    try:
        for repeat in range(repeats):
            for pair in pairs:  # interleaved, so drifting machine load hits every configuration alike
                overrides, hparams, _, _ = PAIRS[pair]
                steps = fast_steps if pair == "fast" else total
                ours = run_ours(task, seed, steps, overrides, work / f"ours-{pair}-r{repeat}")
                runs[pair]["ours"].append(ours)
                print(
                    f"repeat {repeat}: {pair:5s} ours: {ours['sps']:>9,.0f} steps/s  peak RSS {ours['peak_rss_mib']:,.0f} MiB  "
                    f"({ours['steps']:,} steps, load {ours['load_before']:.2f})",
                    flush=True,
                )
                sb3 = run_sb3(task, seed, total, hparams, work / f"sb3-{pair}-r{repeat}.json", args["sb3_threads"])
                runs[pair]["sb3"].append(sb3)
                print(
                    f"repeat {repeat}: {pair:5s} SB3:  {sb3['sps']:>9,.0f} steps/s  peak RSS {sb3['peak_rss_mib']:,.0f} MiB  "
                    f"({sb3['steps']:,} steps, load {sb3['load_before']:.2f})",
                    flush=True,
                )
    finally:
        if tmp is not None:
            tmp.cleanup()

    summary: dict[str, Any] = {
        "task": task,
        "total_steps": total,
        "fast_steps": fast_steps,
        "repeats": repeats,
        "seed": seed,
        "sb3_threads": args["sb3_threads"],
        "wall_s": time.time() - started,
        "versions": versions(),
        "pairs": {},
    }
    table = []
    for pair in pairs:
        ours, sb3 = runs[pair]["ours"], runs[pair]["sb3"]
        _, hparams, target, description = PAIRS[pair]
        ours_sps, sb3_sps = median([r["sps"] for r in ours]), median([r["sps"] for r in sb3])
        ratio = ours_sps / sb3_sps
        entry = {
            "description": description,
            "sb3_hparams": hparams,
            "target_ratio": target,
            "ours_sps_median": ours_sps,
            "sb3_sps_median": sb3_sps,
            "ratio": ratio,
            "meets_target": ratio >= target,
            "ratio_per_repeat": [o["sps"] / s["sps"] for o, s in zip(ours, sb3)],
            "ours_sps_wall_median": median([r["sps_wall"] for r in ours]),
            "ours_peak_rss_mib_median": median([r["peak_rss_mib"] for r in ours]),
            "sb3_peak_rss_mib_median": median([r["peak_rss_mib"] for r in sb3]),
            "ours_config": ours[0]["config"],
            "sb3_hyperparameters": sb3[0]["hyperparameters"],
            "ours_runs": [{k: v for k, v in r.items() if k not in ("resolved_config", "log")} for r in ours],
            "sb3_runs": [{k: v for k, v in r.items() if k not in ("evals", "log")} for r in sb3],
        }
        if pair == "paper":
            entry["paper_mismatches"] = paper_mismatches(ours[0]["resolved_config"], sb3[0])
        summary["pairs"][pair] = entry
        c = entry["ours_config"]
        table.append(
            [
                f"{pair}: {description}",
                f"{ours_sps:,.0f}",
                f"{sb3_sps:,.0f}",
                f"**{ratio:.1f}x**",
                f">= {target:g}x {'(met)' if ratio >= target else '(NOT met)'}",
                f"{entry['ours_peak_rss_mib_median']:,.0f}",
                f"{entry['sb3_peak_rss_mib_median']:,.0f}",
                f"{c['backend']} x{c['n_envs']}, {c['rollout_steps']} steps, {c['epochs']}x{c['minibatches']} mb",
            ]
        )
    out = Path(args["out"])
    write_json(out, summary)

    print(f"\n{task}, CPU, median of {repeats} (first update excluded on both sides):\n")
    print(
        markdown_table(
            ["comparison", "ours steps/s", "SB3 steps/s", "ours / SB3", "target", "ours peak RSS MiB", "SB3 peak RSS MiB", "ours layout"],
            table,
        )
    )
    for pair in pairs:
        for line in summary["pairs"][pair].get("paper_mismatches", []):
            print(f"WARNING: paper hyperparameters differ: {line}")
    print(f"\nwritten to {rel(out)} ({summary['wall_s'] / 60:.1f} min)")


if __name__ == "__main__":
    main(sys.argv[1:])
