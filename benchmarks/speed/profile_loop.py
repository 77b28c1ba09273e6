"""Where one training update's wall-clock goes: env stepping, policy inference + storage, GAE +
batch, and the PPO update, for any config (same overrides as `ppo_control.train`).

    python -m benchmarks.speed.profile_loop task=HalfCheetah [updates=10] [key=value ...]

The first update is a warm-up and is not counted. Env time is measured inside the VecEnv's step;
"collect (rest)" is everything else in the rollout loop (inference, clipping, storage, reward
scaling). It runs the trainer's own update (`Trainer.train_one_update`), timing its phases in
place. Prints a table of seconds per update and per 1,000 steps.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections import defaultdict

from ppo_control.config import compose
from ppo_control.training.trainer import Trainer


def time_calls(owner: object, method: str, label: str, timings: dict[str, float]) -> None:
    """Wrap `owner.method` in place so its wall-clock adds up in timings[label]."""
    original = getattr(owner, method)

    def timed(*args, **kwargs):
        started = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            timings[label] += time.perf_counter() - started

    setattr(owner, method, timed)


def main(argv: list[str]) -> None:
    updates = 10
    overrides = []
    for arg in argv:
        if arg.startswith("updates="):
            updates = int(arg.split("=", 1)[1])
        else:
            overrides.append(arg)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = compose([*overrides, f"run_dir={tmp}/run", "eval.every_steps=0", "checkpoint.every_steps=0"])
        trainer = Trainer(cfg)
        timings: dict[str, float] = defaultdict(float)
        time_calls(trainer.envs, "step", "env step", timings)
        time_calls(trainer.collector, "collect", "collect (total)", timings)
        time_calls(trainer.learner, "update", "ppo update", timings)
        for update in range(updates + 1):
            if update == 1:
                timings.clear()
            t0 = time.perf_counter()
            trainer.train_one_update()
            timings["whole update"] += time.perf_counter() - t0
        trainer.close()
    steps = cfg.env.n_envs * cfg.ppo.rollout_steps
    timings["collect (rest)"] = timings["collect (total)"] - timings["env step"]
    timings["gae + batch + normalizer"] = timings["whole update"] - timings["collect (total)"] - timings["ppo update"]
    total = timings["whole update"]
    print(
        f"{cfg.task}: {cfg.env.backend} x{cfg.env.n_envs}, batch {steps}, {cfg.ppo.epochs} epochs x {cfg.ppo.minibatches} "
        f"minibatches, torch threads {trainer.collect_threads} collecting / {trainer.update_threads} updating; {updates} updates"
    )
    print("| phase | s/update | s per 1k steps | share |\n|---|---|---|---|")
    for name in ("env step", "collect (rest)", "gae + batch + normalizer", "ppo update"):
        print(f"| {name} | {timings[name] / updates:.3f} | {timings[name] / updates / steps * 1000:.4f} | {timings[name] / total:.0%} |")
    print(f"steps/s (without evaluation or checkpoints): {steps * updates / total:,.0f}")


if __name__ == "__main__":
    main(sys.argv[1:])
