"""Training steps/s of the gymnasium backend with domain randomization against without, same settings.

    python benchmarks/randomization_speed.py [task=Hopper] [total_steps=65536] [repeats=3] [seed=0]
        [out=benchmarks/results/randomization_speed.json]

Each repeat trains the task twice from scratch, interleaved (plain, then randomized) so drifting
machine load hits both alike: the task's own settings with env.backend=gymnasium, evaluation only at
the end. "randomized" turns every randomize.* key on at once (physics scales drawn every episode,
observation and action noise, action delay, pushes): the most the randomizer can cost. steps/s is
`common.ours_steps_per_second` (first update excluded); the table shows medians over the repeats.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
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
VARIANTS = {"plain": [], "randomized": EVERY_KEY}
DEFAULTS = {"task": "Hopper", "total_steps": 65536, "repeats": 3, "seed": 0, "out": str(RESULTS_DIR / "randomization_speed.json")}


def main(argv: list[str]) -> None:
    args = parse_args(argv, DEFAULTS, __doc__)
    common = ["env.backend=gymnasium", f"total_steps={args['total_steps']}", "eval.every_steps=0", "eval.episodes=1"]
    runs: dict[str, list[dict]] = {name: [] for name in VARIANTS}
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(args["repeats"]):
            for name, extra in VARIANTS.items():
                run_dir = Path(tmp) / f"{name}-{repeat}"
                measured = run_measured(
                    ours_command(args["task"], args["seed"], run_dir, [*common, *extra]), Path(tmp) / f"{name}-{repeat}.log"
                )
                rate = ours_steps_per_second(read_metrics(run_dir))
                runs[name].append({**rate, "wall_s": measured.wall_s, "load_before": measured.load_before})
                print(f"repeat {repeat + 1}/{args['repeats']} {name:>10}: {rate['sps']:,.0f} steps/s (load {measured.load_before:.2f})")
    medians = {name: median([r["sps"] for r in rows]) for name, rows in runs.items()}
    ratio = medians["randomized"] / medians["plain"]
    table = markdown_table(
        ["variant", "steps/s (median)", "runs"],
        [[name, f"{medians[name]:,.0f}", ", ".join(f"{r['sps']:,.0f}" for r in runs[name])] for name in VARIANTS],
    )
    print(table)
    print(f"randomized / plain: {ratio:.3f}")
    write_json(
        Path(args["out"]),
        {
            "args": args,
            "overrides": {"common": common, **VARIANTS},
            "runs": runs,
            "median_sps": medians,
            "randomized_over_plain": ratio,
            "versions": versions(),
        },
    )
    print(f"written {rel(args['out'])}")


if __name__ == "__main__":
    main(sys.argv[1:])
