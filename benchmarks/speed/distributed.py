"""Steps/s of 1 rank vs 2 ranks (torchrun, gloo on CPU / nccl on CUDA), run back to back.

    python -m benchmarks.speed.distributed [task=HalfCheetah] [total_steps=65536] [repeats=3] [device=cpu]

Each configuration trains `total_steps` (counted over all ranks) from scratch `repeats` times; the
reported steps/s is the median over repeats of (steps after the first update) / (their wall-clock),
read from metrics.jsonl, so start-up and the first update are excluded. Results are written to
benchmarks/results/distributed.json and printed as a table.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.common import ROOT


def measure(ranks: int, task: str, total_steps: int, device: str, run_dir: Path) -> float:
    launcher = (
        [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}"] if ranks > 1 else [sys.executable]
    )
    cmd = [
        *launcher,
        "-m",
        "ppo_control.train",
        f"task={task}",
        f"total_steps={total_steps}",
        f"device={device}",
        "eval.every_steps=0",
        "eval.episodes=1",
        "checkpoint.every_steps=0",
        "log.every_updates=1000",
        f"run_dir={run_dir}",
    ]
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True)
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = sum(r["steps_this_update"] for r in rows[1:])
    seconds = sum(r["steps_this_update"] / r["sps"] for r in rows[1:])
    return steps / seconds


def main(argv: list[str]) -> None:
    args = dict(a.split("=", 1) for a in argv)
    task, total, repeats, device = (
        args.get("task", "HalfCheetah"),
        int(args.get("total_steps", 65536)),
        int(args.get("repeats", 3)),
        args.get("device", "cpu"),
    )
    results: dict[str, list[float]] = {"1": [], "2": []}
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(repeats):
            for ranks in (1, 2):  # interleaved, so drifting machine load hits both alike
                sps = measure(ranks, task, total, device, Path(tmp) / f"r{ranks}-{repeat}")
                results[str(ranks)].append(sps)
                print(f"repeat {repeat}: {ranks} rank(s): {sps:,.0f} steps/s", flush=True)
    medians = {k: statistics.median(v) for k, v in results.items()}
    summary = {
        "task": task,
        "total_steps": total,
        "device": device,
        "repeats": repeats,
        "steps_per_second": results,
        "median": medians,
        "speedup_2_vs_1": medians["2"] / medians["1"],
    }
    out = ROOT / "benchmarks" / "results" / f"distributed-{device}.json"
    out.write_text(json.dumps(summary, indent=2) + "\n")
    print(f"\n| ranks | steps/s (median of {repeats}) |\n|---|---|")
    for k, v in medians.items():
        print(f"| {k} | {v:,.0f} |")
    print(f"\n2 ranks / 1 rank: {summary['speedup_2_vs_1']:.2f}x  (written to {out.relative_to(ROOT)})")


if __name__ == "__main__":
    main(sys.argv[1:])
