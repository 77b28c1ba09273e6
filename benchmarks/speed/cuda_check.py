"""One prepared pass over the CUDA path, for a machine with a GPU (CI has none).

    python -m benchmarks.speed.cuda_check [out=cuda_check]

Checks, each printed as PASS/FAIL with its numbers, and written to <out>/<timestamp>/cuda_check.json:
  1. training on device=cuda learns InvertedPendulum (the learning test's bar: eval >= 950)
  2. its checkpoint loads with weights_only=True on a CPU-only torch.load (map_location=cpu)
  3. `evaluate` (CPU) reproduces the CUDA run's final deterministic eval return (within 1%)
  4. the CUDA run resumes on device=cpu and finishes
  5. TorchScript and ONNX export of the CUDA-trained run (export checks parity itself)
  6. torchrun on cuda: 1 rank trains; more ranks than GPUs are refused with one line
  7. steps/s of HalfCheetah on cuda vs cpu with the default config (informs device=auto)
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import torch

from benchmarks.common import ROOT
from ppo_control.runs.layout import CHECKPOINT_DIR, LAST_CHECKPOINT


def run(*args: str, timeout: float = 600) -> tuple[int, str, float]:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout + proc.stderr, time.perf_counter() - started


def metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def steady_sps(run_dir: Path) -> float:
    rows = metrics(run_dir)[1:]
    return sum(r["steps_this_update"] for r in rows) / sum(r["steps_this_update"] / r["sps"] for r in rows)


def main(argv: list[str]) -> int:
    args = dict(a.split("=", 1) for a in argv)
    out = Path(args.get("out", "cuda_check")) / time.strftime("%Y%m%d-%H%M%S")  # fresh run dirs every time
    out.mkdir(parents=True)
    results: dict[str, dict] = {
        "env": {
            "torch": torch.__version__,
            "cuda": torch.cuda.is_available(),
            "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        }
    }
    print(json.dumps(results["env"]), flush=True)

    def record(name: str, ok: bool, **info) -> None:
        results[name] = {"ok": ok, **info}
        print(f"{'PASS' if ok else 'FAIL'} {name}: {json.dumps(info)}", flush=True)
        (out / "cuda_check.json").write_text(json.dumps(results, indent=2))

    common = ["eval.episodes=5", "checkpoint.every_steps=0", "log.every_updates=1000"]
    pendulum = out / "pendulum_cuda"
    rc, log, seconds = run(
        "-m",
        "ppo_control.train",
        "task=InvertedPendulum",
        "device=cuda",
        "total_steps=32768",
        "eval.every_steps=0",
        *common,
        f"run_dir={pendulum}",
    )
    final = (metrics(pendulum) or [{}])[-1] if (pendulum / "metrics.jsonl").exists() else {}
    record(
        "1_train_cuda_learns",
        rc == 0 and final.get("eval_return", 0) >= 950,
        rc=rc,
        seconds=round(seconds, 1),
        eval_return=final.get("eval_return"),
        tail=log[-600:] if rc else "",
    )

    try:
        state = torch.load(pendulum / CHECKPOINT_DIR / LAST_CHECKPOINT, map_location="cpu", weights_only=True)
        devices = {str(t.device) for t in state["policy"].values()}
        record("2_checkpoint_loads_on_cpu", devices == {"cpu"}, step=int(state["step"]))
    except Exception as exc:  # report and go on: the other checks still say something
        record("2_checkpoint_loads_on_cpu", False, error=repr(exc))

    # evaluate runs on the CPU: it must reproduce the return the CUDA run measured at its end.
    rc, log, _ = run("-m", "ppo_control.evaluate", f"run={pendulum}", "episodes=5")
    eval_json = pendulum / "eval.json"
    cpu_return = json.loads(eval_json.read_text())["return_mean"] if rc == 0 and eval_json.exists() else None
    cuda_return = final.get("eval_return")
    ok = None not in (cpu_return, cuda_return) and abs(cpu_return - cuda_return) <= 0.01 * max(abs(cuda_return), 1)
    record("3_evaluate_on_cpu_matches_cuda_eval", ok, cpu=cpu_return, cuda=cuda_return)

    rc, log, seconds = run("-m", "ppo_control.train", f"resume={pendulum}", "total_steps=40960", "device=cpu")
    record("4_resume_cuda_run_on_cpu", rc == 0 and metrics(pendulum)[-1]["step"] >= 40960, rc=rc, tail=log[-600:])

    for fmt in ("torchscript", "onnx"):
        rc, log, _ = run("-m", "ppo_control.export", f"run={pendulum}", f"format={fmt}", "overwrite=true")
        record(f"5_export_{fmt}", rc == 0, output=log.strip().splitlines()[-3:])

    # One GPU: a single rank (torchrun's env, the cuda device per local rank); two ranks cannot
    # share one GPU under nccl, and must be refused with one clear line.
    dist_dir = out / "pendulum_torchrun"
    torchrun = ["-m", "torch.distributed.run", "--standalone"]
    train = ["-m", "ppo_control.train", "task=InvertedPendulum", "device=cuda", "total_steps=8192", "eval.every_steps=0", *common]
    rc, log, seconds = run(*torchrun, "--nproc_per_node=1", *train, f"run_dir={dist_dir}")
    record("6a_torchrun_1_rank_cuda", rc == 0, rc=rc, seconds=round(seconds, 1), tail=log[-800:] if rc else "")
    rc, log, _ = run(*torchrun, f"--nproc_per_node={torch.cuda.device_count() + 1}", *train, f"run_dir={out / 'too_many'}")
    record(
        "6b_more_ranks_than_gpus_refused",
        rc != 0 and "needs its own GPU" in log,
        rc=rc,
        message=[line for line in log.splitlines() if "needs its own GPU" in line][:1],
    )

    speed = {}
    for device in ("cuda", "cpu"):
        run_dir = out / f"halfcheetah_{device}"
        rc, log, _ = run(
            "-m",
            "ppo_control.train",
            "task=HalfCheetah",
            f"device={device}",
            "total_steps=61440",
            "eval.every_steps=0",
            *common,
            f"run_dir={run_dir}",
        )
        speed[device] = round(steady_sps(run_dir)) if rc == 0 else None
    record("7_speed_halfcheetah", None not in speed.values(), steps_per_second=speed)
    return 0 if all(v.get("ok", True) for v in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
