"""What one PPO update costs on its own (`ppo.ppo_update` over one rollout's batch, no environment),
for the formulations of the update side by side.

    python -m benchmarks.speed.update_cost [--shapes halfcheetah,robot] [--threads 1,2] [--repeats 5]
        [--updates 0] [--variants baseline,eager,compiled] [--baseline-ref REF] [--profile]
        [--out benchmarks/results/update_cost.json]

Shapes (the batch, the networks and the PPO settings of a task's resolved config):
  halfcheetah  tasks/HalfCheetah.yaml: 32 sub-envs x 64 steps, 5 epochs x 4 minibatches, actor and
               critic 64-64 tanh, 17 observations, 6 actions
  robot        configs/regimes/robot.yaml via tasks/Go1JoystickFlatTerrain.yaml: 256 x 16 steps,
               5 x 4, actor 256-128 on the 48 `policy` observations, critic 512-256-128 on the 123
               `privileged` ones, elu, 12 actions (the observation sizes are Go1's; no env is built)
Variants:
  baseline  `ppo_update` of ppo_control/rl/ppo.py as it was at `--baseline-ref` (the commit before the
            update was split into `minibatch_loss`), run eagerly
  eager     this checkout's `ppo_update`, eager (what `PPOLearner` runs by default)
  compiled  this checkout's `ppo_update` with `compiled_minibatch_loss()` (PPOLearner(compiled=True))

For each shape and thread count, in this one process, every variant gets its own copy of the same
initial policy, its own Adam and the same batch (random observations and advantages, actions drawn
from the policy, so the ratios start at 1); one untimed update each first (the compiled variant
compiles then: `compile_s` is that update's time less a timed one's). Then `--repeats` rounds,
the variants in a different order each round so drifting load hits all alike; each round times
`--updates` updates per variant (0: enough for about a second). Every update runs all its epochs
(ppo.target_kl is set to null: the same batch again and again would otherwise stop them early).
Each variant's `ratio` is its time over the baseline's in the same round, the median over rounds.

Inductor's on-disk caches go to a fresh temporary directory, so `compile_s` is a first compile on
this machine; a run that reuses a warm cache (TORCHINDUCTOR_CACHE_DIR set to a directory an
earlier run filled) compiles the same shapes again in a fraction of that time.
`--profile` adds, per shape and thread count, torch.profiler's busiest operators of each variant
(self CPU time per update) to the output and prints their table.
"""

from __future__ import annotations

import argparse
import atexit
import copy
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Before torch is imported: the compile is measured cold, in a cache of this run's own, deleted at
# exit (a TORCHINDUCTOR_CACHE_DIR set by the caller is used as it is, to measure a warm one).
if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="update_cost_inductor_")
    atexit.register(shutil.rmtree, os.environ["TORCHINDUCTOR_CACHE_DIR"], ignore_errors=True)

import numpy as np  # noqa: E402
import torch  # noqa: E402

from benchmarks.common import ROOT, rel, versions, write_json  # noqa: E402
from ppo_control.config import compose  # noqa: E402
from ppo_control.envs import EnvInfo  # noqa: E402
from ppo_control.rl import ppo  # noqa: E402
from ppo_control.rl.policy import build_policy  # noqa: E402

# The last commit that changed ppo.py before `minibatch_loss` and `compiled_minibatch_loss`: the
# update in its previous formulation.
DEFAULT_BASELINE_REF = "cc30fbdae34f0148af71c92a3ae59721fa3c538a"
# name: (task file, observation groups (name, size), action size)
SHAPES = {
    "halfcheetah": ("HalfCheetah", (("policy", 17),), 6),
    "robot": ("Go1JoystickFlatTerrain", (("policy", 48), ("privileged", 123)), 12),
}
VARIANTS = ("baseline", "eager", "compiled")
PROFILE_ROWS = 15


def load_baseline(ref: str):
    """ppo_control/rl/ppo.py as it was at git `ref`, imported as its own module (it imports the rest
    of ppo_control from this checkout, whose interfaces it uses are unchanged)."""
    source = subprocess.run(["git", "show", f"{ref}:ppo_control/rl/ppo.py"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    with tempfile.TemporaryDirectory(prefix="update_cost_baseline_") as tmp:
        path = Path(tmp) / "ppo_baseline.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location("ppo_baseline", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return module


def make_problem(shape: str, seed: int = 0):
    """(the task's resolved config, its policy, one batch of rollout size) for `shape`."""
    task, groups, action_dim = SHAPES[shape]
    cfg = compose([f"task={task}"])
    cfg.ppo.target_kl = None
    obs_dim = sum(size for _, size in groups)
    info = EnvInfo(obs_dim, action_dim, -np.ones(action_dim, np.float32), np.ones(action_dim, np.float32), None, groups)
    torch.manual_seed(seed)
    policy = build_policy(cfg.policy, cfg.normalize, info)
    n = cfg.env.n_envs * cfg.ppo.rollout_steps
    generator = torch.Generator().manual_seed(seed)
    obs = policy.normalize(torch.randn(n, obs_dim, generator=generator))
    with torch.no_grad():
        mean = policy.actor_mean(policy.actor_input(obs))
        actions = mean + policy.log_std.exp() * torch.randn(mean.shape, generator=generator)
        log_probs, _, values = policy.evaluate_actions(obs, actions)
    advantages = torch.randn(n, generator=generator)
    batch = ppo.Batch(obs, actions, log_probs, values, advantages, values + advantages)
    return cfg, policy, batch


class Variant:
    """One formulation of the update with its own copy of the policy and optimizer."""

    def __init__(self, name: str, cfg, policy, batch, baseline_module):
        self.name, self.hp, self.batch = name, cfg.ppo, batch
        self.policy = copy.deepcopy(policy)
        self.optimizer = ppo._adam(list(self.policy.parameters()), cfg.ppo.learning_rate)
        self.generator = torch.Generator().manual_seed(0)
        if name == "baseline":
            self._update = lambda: baseline_module.ppo_update(self.policy, self.optimizer, batch, self.hp, self.generator)
        else:
            loss_fn = ppo.compiled_minibatch_loss() if name == "compiled" else ppo.minibatch_loss
            self._update = lambda: ppo.ppo_update(self.policy, self.optimizer, batch, self.hp, self.generator, loss_fn=loss_fn)

    def seconds(self, updates: int) -> float:
        """Wall-clock seconds per update over `updates` updates."""
        started = time.perf_counter()
        for _ in range(updates):
            self._update()
        return (time.perf_counter() - started) / updates

    def profile(self, updates: int) -> list[dict[str, Any]]:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(updates):
                self._update()
        events = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)[:PROFILE_ROWS]
        print(f"-- {self.name}: busiest operators, self CPU per update")
        rows = []
        for e in events:
            rows.append({"op": e.key, "self_ms": e.self_cpu_time_total / 1e3 / updates, "calls": e.count / updates})
            print(f"   {rows[-1]['self_ms']:9.3f} ms  {rows[-1]['calls']:7.1f} calls  {e.key}")
        return rows


def measure(shape: str, threads: int, args, baseline_module) -> list[dict[str, Any]]:
    torch.set_num_threads(threads)
    torch._dynamo.reset()  # each shape and thread count compiles its own kernels
    cfg, policy, batch = make_problem(shape)
    variants = [Variant(name, cfg, policy, batch, baseline_module) for name in args.variants]
    first = {v.name: v.seconds(1) for v in variants}
    updates = args.updates or max(1, round(1.0 / min(v.seconds(1) for v in variants)))
    times: dict[str, list[float]] = {v.name: [] for v in variants}
    for round_ in range(args.repeats):
        shift = round_ % len(variants)
        for v in variants[shift:] + variants[:shift]:
            times[v.name].append(v.seconds(updates))
        laps = ", ".join(f"{name} {t[-1] * 1e3:.1f} ms" for name, t in times.items())
        print(f"{shape} threads={threads} round {round_ + 1}: {laps}", flush=True)
    rows = []
    reference = times.get("baseline")
    for v in variants:
        row = {
            "shape": shape,
            "threads": threads,
            "variant": v.name,
            "batch": len(batch),
            "minibatches_per_update": cfg.ppo.epochs * cfg.ppo.minibatches,
            "updates_per_round": updates,
            "update_s": statistics.median(times[v.name]),
            "update_s_rounds": times[v.name],
            "first_update_s": first[v.name],
        }
        if reference is not None:
            ratios = [t / b for t, b in zip(times[v.name], reference)]
            row["ratio"] = statistics.median(ratios)
            row["ratio_rounds"] = ratios
        if v.name == "compiled":
            row["compile_s"] = first[v.name] - row["update_s"]
        if args.profile:
            row["profile"] = v.profile(max(1, updates // 2))
        rows.append(row)
    return rows


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", default="halfcheetah,robot", help=f"comma-separated, of {', '.join(SHAPES)}")
    parser.add_argument("--threads", default="1,2", help="comma-separated torch thread counts")
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds (the medians are over them)")
    parser.add_argument("--updates", type=int, default=0, help="updates per variant per round; 0 = about a second's worth")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {', '.join(VARIANTS)}")
    parser.add_argument("--baseline-ref", default=DEFAULT_BASELINE_REF, help="git ref whose ppo_control/rl/ppo.py is the baseline")
    parser.add_argument("--profile", action="store_true", help="also profile each variant (torch.profiler)")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    args = parser.parse_args(argv)
    args.shapes = [s for s in args.shapes.split(",") if s]
    args.variants = [v for v in args.variants.split(",") if v]
    args.threads = [int(t) for t in args.threads.split(",") if t]
    for value, valid, flag in ((args.shapes, SHAPES, "--shapes"), (args.variants, VARIANTS, "--variants")):
        unknown = [v for v in value if v not in valid]
        if unknown:
            parser.error(f"{flag}: unknown {unknown[0]!r}; valid: {', '.join(valid)}")
    return args


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    baseline_module = load_baseline(args.baseline_ref) if "baseline" in args.variants else None
    results = [row for shape in args.shapes for threads in args.threads for row in measure(shape, threads, args, baseline_module)]
    print("| shape | threads | variant | ms/update | ratio to baseline | compile s |\n|---|---|---|---|---|---|")
    for r in results:
        ratio = f"{r['ratio']:.3f}" if "ratio" in r else "-"
        compile_s = f"{r['compile_s']:.1f}" if "compile_s" in r else "-"
        print(f"| {r['shape']} | {r['threads']} | {r['variant']} | {r['update_s'] * 1e3:.1f} | {ratio} | {compile_s} |")
    if args.out is not None:
        settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
        write_json(args.out, {"machine": versions(), "settings": settings, "results": results})
        print(f"wrote {rel(args.out)}")


if __name__ == "__main__":
    main(sys.argv[1:])
