"""Training steps/s of variants of the same run, side by side: what a feature costs per step.

    python -m benchmarks.speed.variant_speed suite=randomization|recurrent|critic [task=Hopper] [total_steps=65536]
        [repeats=3] [seed=0] [out=benchmarks/results/<suite>_speed.json]

Each repeat trains the task once per variant from scratch, interleaved (the suite's first variant,
then the others) so drifting machine load hits all alike: the task's own settings with
env.backend=gymnasium (the critic suite: the task's own backend, what its users train on),
evaluation only at the end. steps/s is `common.ours_steps_per_second` (first
update excluded); the table shows medians over the repeats and each variant's ratio to the first.

Suites:
- randomization: "plain" vs "randomized", every randomize.* key on at once (physics scales drawn
  every episode, observation and action noise, action delay, pushes): the most the randomizer costs.
- recurrent: a feed-forward policy vs observation history 4 (actor and critic) vs a GRU and an LSTM
  actor (128 units, 16-step sequences), the same PPO settings.
- critic: a critic as wide as the actor (policy.critic_hidden_sizes=null) vs a wider one,
  policy.critic_hidden_sizes=[256,256] (the actor unchanged). results/critic_speed.json was measured
  before tasks/Hopper.yaml took the wider critic, when its first variant, then "task_critic" with no
  override, was the same 64 x 64 critic.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from benchmarks.common import (
    RESULTS_DIR,
    markdown_table,
    median,
    ours_command,
    ours_steps_per_second,
    parse_args,
    read_metrics,
    rel,
    run_measured,
    versions,
    write_json,
)

EVERY_KEY = [
    "randomize.body_mass=[0.8,1.2]",
    "randomize.friction=[0.5,1.5]",
    "randomize.joint_damping=[0.5,2.0]",
    "randomize.actuator_gain=[0.8,1.2]",
    "randomize.obs_noise=0.02",
    "randomize.action_noise=0.05",
    "randomize.action_delay=[0,2]",
    "randomize.push_velocity=0.5",
    "randomize.push_interval=200",
]
SUITES = {
    "randomization": {"plain": [], "randomized": EVERY_KEY},
    "recurrent": {
        "feedforward": [],
        "history4": ["policy.actor_history=4", "policy.critic_history=4"],
        "gru": ["policy.rnn=gru"],
        "lstm": ["policy.rnn=lstm"],
    },
    "critic": {"critic_as_actor": ["policy.critic_hidden_sizes=null"], "critic256": ["policy.critic_hidden_sizes=[256,256]"]},
}
# The randomizer needs per-sub-env MuJoCo models (the Gymnasium backend), so its suite, and the
# recurrent one measured beside it, run every variant there; None keeps the task's own backend.
BACKEND = {"randomization": "gymnasium", "recurrent": "gymnasium", "critic": None}
DEFAULTS = {"suite": "randomization", "task": "Hopper", "total_steps": 65536, "repeats": 3, "seed": 0, "out": None}


def main(argv: list[str]) -> None:
    args = parse_args(argv, DEFAULTS, __doc__)
    if args["suite"] not in SUITES:
        sys.exit(f"error: suite={args['suite']!r} is not valid; choose one of: {', '.join(SUITES)}")
    variants = SUITES[args["suite"]]
    args["out"] = args["out"] or str(RESULTS_DIR / f"{args['suite']}_speed.json")
    backend = BACKEND[args["suite"]]
    common = [f"total_steps={args['total_steps']}", "eval.every_steps=0", "eval.episodes=1"]
    common += [f"env.backend={backend}"] if backend else []
    runs: dict[str, list[dict]] = {name: [] for name in variants}
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args["repeats"]):
            for name, extra in variants.items():
                run_dir = Path(tmp) / f"{name}-{repeat}"
                measured = run_measured(
                    ours_command(args["task"], args["seed"], run_dir, [*common, *extra]), Path(tmp) / f"{name}-{repeat}.log"
                )
                rate = ours_steps_per_second(read_metrics(run_dir))
                runs[name].append({**rate, "wall_s": measured.wall_s, "load_before": measured.load_before})
                print(f"repeat {repeat + 1}/{args['repeats']} {name:>10}: {rate['sps']:,.0f} steps/s (load {measured.load_before:.2f})")
    medians = {name: median([r["sps"] for r in rows]) for name, rows in runs.items()}
    first = next(iter(variants))
    ratios = {name: medians[name] / medians[first] for name in variants}
    table = markdown_table(
        ["variant", "steps/s (median)", f"/ {first}", "runs"],
        [[name, f"{medians[name]:,.0f}", f"{ratios[name]:.2f}", ", ".join(f"{r['sps']:,.0f}" for r in runs[name])] for name in variants],
    )
    print(table)
    write_json(
        Path(args["out"]),
        {
            "args": args,
            "overrides": {"common": common, **variants},
            "runs": runs,
            "median_sps": medians,
            f"ratio_to_{first}": ratios,
            "versions": versions(),
        },
    )
    print(f"written {rel(args['out'])}")


if __name__ == "__main__":
    main(sys.argv[1:])
