"""Scale on one big machine, measured side by side in one script (the device machine's checks).

Parts, each in its own process (a crash or a hang in one leaves the others' numbers; the GPU's
memory is free again between them), each appending to one JSON file as it goes:
- ours: `python -m ppo_control.train task=<T> env.backend=mjx device=cuda` (the whole PPO loop on
  the GPU, Brax's MJX env), training steps/s per update and the evaluation return against the
  wall-clock from launch (compilation included);
- brax: Brax's own PPO trainer (brax.training.agents.ppo) on the same MJX env, the same number of
  envs and steps, with Brax's published settings for Ant; its training steps/s and evaluation
  return against the wall-clock from launch;
- mjx_raw: the simulation alone (the engine's scan, and our env's step from torch), steps/s;
- cpu: benchmarks/speed/cpu_scaling.py on this machine's cores (envpool's raw stepping rate vs our
  training steps/s over 1, 2, 4, ... threads).

    python -m benchmarks.speed.gpu_scale --out results.json [--steps 30000000] [--smoke]

On the device machine: `bash benchmarks/device/prepare_wheels.sh` here first (the wheels that
machine lacks, into the git-ignored .whl/ and .whl-cpu/); the device command is in its header.

`--smoke` runs every part at a tiny size (on a machine without a GPU too: JAX's CPU, 8 envs) to
check the script itself.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from benchmarks.common import ROOT

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX and torch share the GPU

# Brax's published PPO settings for its MJX Ant (brax/training/agents/ppo README and MuJoCo
# Playground's brax_ppo_config): 4096 envs, 5-step unrolls, 32 minibatches of 2048 unrolls.
BRAX_ANT = dict(
    reward_scaling=10.0,
    normalize_observations=True,
    action_repeat=1,
    unroll_length=5,
    num_minibatches=32,
    num_updates_per_batch=4,
    discounting=0.97,
    learning_rate=3e-4,
    entropy_cost=1e-2,
    batch_size=2048,
)


def versions() -> dict:
    out = {"python": platform.python_version()}
    for name in ("torch", "jax", "jaxlib", "brax", "mujoco", "mujoco.mjx", "envpool", "numpy", "flax", "optax"):
        try:
            module = __import__(name, fromlist=["_"])
            out[name] = getattr(module, "__version__", "?")
        except Exception as exc:  # a missing engine is recorded, not fatal
            out[name] = f"unavailable ({type(exc).__name__})"
    return out


def machine() -> dict:
    import torch

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines() if "model name" in line), "?")
    return {
        "cpu": cpu,
        "cores": len(os.sched_getaffinity(0)),
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "platform": platform.platform(),
    }


# --- parts (each runs in a child process: `gpu_scale.py --part NAME --part-out FILE ...`) ------
def part_ours(args) -> dict:
    from ppo_control.config import compose
    from ppo_control.training.trainer import Trainer

    launched = time.time()
    run_dir = Path(tempfile.mkdtemp(prefix="ours-")) / "run"
    overrides = [
        f"task={args.task}",
        "env.backend=mjx",
        f"device={args.device}",
        f"env.n_envs={args.n_envs}",
        f"total_steps={args.steps}",
        f"eval.every_steps={args.eval_every}",
        f"run_dir={run_dir}",
        "log.tensorboard=false",
        "checkpoint.save_last_seconds=1e9",  # last.pt and best.pt at evaluations and the end only
        *args.ours_overrides,
    ]
    if args.smoke:
        overrides += ["ppo.rollout_steps=8", "ppo.minibatches=2", "env.max_episode_steps=50", "eval.episodes=4"]
    trainer = Trainer(compose(overrides))
    # Past the time budget the run stops as on Ctrl-C: it finishes the update and saves a checkpoint.
    deadline = threading.Timer(args.budget, lambda: setattr(trainer.stop, "requested", True))
    deadline.start()
    try:
        trainer.train()
    finally:
        deadline.cancel()
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").open()]
    steady = [r["sps"] for r in rows[2:] if r.get("sps")] or [r["sps"] for r in rows if r.get("sps")]
    return {
        "overrides": overrides,
        "train_sps_median": sorted(steady)[len(steady) // 2],
        "updates": len(rows),
        "first_update_after_launch_s": rows[0]["time"] - launched,
        "wall_s": rows[-1]["time"] - launched,
        "evals": [{"step": r["step"], "return": r["eval_return"], "wall_s": r["time"] - launched} for r in rows if "eval_return" in r],
        "curve": [
            {"step": r["step"], "sps": r["sps"], "episode_return": r["episode_return"], "wall_s": r["time"] - launched} for r in rows
        ],
    }


def part_mjx_raw(args) -> dict:
    """The simulation's own rate, without learning: Brax's step vmapped over the envs and scanned in
    JAX (the engine's ceiling), and our MjxVecEnv.step_device called from torch (the same step plus
    episode bookkeeping, resets and the DLPack hand-over each step), both with zero actions."""
    import jax
    import jax.numpy as jnp
    import torch

    from ppo_control.envs.mjx_backend import MjxVecEnv, engine_env

    n, steps = args.n_envs, args.raw_steps
    env = engine_env(args.task.lower())
    states = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(0), n))
    zeros = jnp.zeros((n, env.action_size))

    @jax.jit
    def scan(states):
        return jax.lax.scan(lambda s, _: (jax.vmap(env.step)(s, zeros), None), states, None, length=steps)[0]

    jax.block_until_ready(scan(states))  # compile
    started = time.perf_counter()
    jax.block_until_ready(scan(states))
    engine_sps = n * steps / (time.perf_counter() - started)

    ours = MjxVecEnv(args.task.lower(), n, device=args.device)
    ours.reset_device(0)
    actions = torch.zeros(n, env.action_size, device=args.device)
    for _ in range(3):  # compile
        ours.step_device(actions)
    sync = torch.cuda.synchronize if args.device == "cuda" else lambda: None
    sync()
    started = time.perf_counter()
    for _ in range(steps):
        out = ours.step_device(actions)
    float(out.reward.sum())
    sync()
    return {"n_envs": n, "steps": steps, "engine_scan_sps": engine_sps, "ours_step_device_sps": n * steps / (time.perf_counter() - started)}


def restore_device_put_replicated(jax) -> None:
    """Brax 0.14.2's PPO calls jax.device_put_replicated, which JAX 0.10 removed. On one device it
    is a stack of one along a new leading axis, placed on that device; this puts it back."""
    if "device_put_replicated" in vars(jax):
        return
    import jax.numpy as jnp

    def device_put_replicated(x, devices):
        if len(devices) != 1:
            raise NotImplementedError("this stand-in replicates onto one device only")
        return jax.device_put(jax.tree_util.tree_map(lambda a: jnp.expand_dims(jnp.asarray(a), 0), x), devices[0])

    jax.device_put_replicated = device_put_replicated


def part_brax(args) -> dict:
    import jax
    from brax import envs
    from brax.training.agents.ppo import train as ppo

    restore_device_put_replicated(jax)

    launched = time.time()
    env = envs.get_environment(args.task.lower(), backend="mjx")
    settings = dict(BRAX_ANT)
    settings.update(num_envs=args.n_envs, episode_length=1000, num_evals=args.brax_evals, deterministic_eval=True)
    if args.smoke:
        settings.update(batch_size=args.n_envs, num_minibatches=2, episode_length=50, num_eval_envs=4)
    evals = []
    progress_file = args.part_out.with_name("progress.jsonl")  # read by the parent even if this is killed

    def progress(step, metrics):
        evals.append(
            {
                "step": int(step),
                "return": float(metrics.get("eval/episode_reward", float("nan"))),
                "training_sps": float(metrics.get("training/sps", float("nan"))),
                "wall_s": time.time() - launched,
            }
        )
        with progress_file.open("a") as f:
            f.write(json.dumps(evals[-1]) + "\n")

    ppo.train(environment=env, num_timesteps=args.steps, seed=0, progress_fn=progress, **settings)
    steady = [e["training_sps"] for e in evals if e["training_sps"] == e["training_sps"] and e["step"] > 0]
    return {
        "settings": settings,
        "train_sps_median": sorted(steady)[len(steady) // 2] if steady else None,
        "wall_s": time.time() - launched,
        "evals": evals,
        "jax_devices": [str(d) for d in jax.devices()],
    }


def part_cpu(args) -> dict:
    out = Path(tempfile.mkdtemp(prefix="cpu-")) / "cpu.json"
    command = [
        sys.executable,
        "-m",
        "benchmarks.speed.cpu_scaling",
        "--task",
        args.task,
        "--threads",
        args.cpu_threads,
        "--seconds",
        str(args.cpu_seconds),
        "--out",
        str(out),
    ]
    subprocess.run(command, check=True, cwd=ROOT)
    return json.loads(out.read_text())


PARTS = {"mjx_raw": part_mjx_raw, "ours": part_ours, "brax": part_brax, "cpu": part_cpu}


def run_part(name: str, args, argv: list[str]) -> dict:
    """One part in a child process, with its own time limit; its result or what went wrong."""
    part_out = Path(tempfile.mkdtemp(prefix=f"{name}-")) / "part.json"
    started = time.time()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks.speed.gpu_scale", *argv, "--part", name, "--part-out", str(part_out)],
            cwd=ROOT,
            timeout=args.part_timeout,
            capture_output=True,
            text=True,
        )
    except subprocess.TimeoutExpired as exc:
        tail = (exc.stdout or "")[-3000:] if isinstance(exc.stdout, str) else ""
        progress = part_out.with_name("progress.jsonl")  # what a killed part had reported so far
        evals = [json.loads(line) for line in progress.open()] if progress.is_file() else []
        return {"error": f"stopped at its time limit, {args.part_timeout} s", "evals": evals, "log_tail": tail}
    if done.returncode != 0 or not part_out.is_file():
        return {"error": f"exit status {done.returncode}", "log_tail": (done.stdout + done.stderr)[-4000:]}
    result = json.loads(part_out.read_text())
    result["part_wall_s"] = time.time() - started
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("gpu_scale.json"))
    parser.add_argument("--parts", default="mjx_raw,ours,brax,cpu")
    parser.add_argument("--raw-steps", type=int, default=200)
    parser.add_argument("--task", default="Ant")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--n-envs", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=30_000_000)
    parser.add_argument("--eval-every", type=int, default=5_000_000)
    parser.add_argument("--brax-evals", type=int, default=7)
    parser.add_argument("--ours-overrides", nargs="*", default=[])
    parser.add_argument("--cpu-threads", default="1,2,4,8,16")
    parser.add_argument("--cpu-seconds", type=float, default=8.0)
    parser.add_argument("--budget", type=float, default=150.0, help="seconds our training runs before it stops (as on Ctrl-C)")
    parser.add_argument("--part-timeout", type=float, default=400.0, help="hard limit per part (Brax's trainer cannot stop early)")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--part", choices=sorted(PARTS), help=argparse.SUPPRESS)
    parser.add_argument("--part-out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.part:  # a child: run one part, write its result
        args.part_out.write_text(json.dumps(PARTS[args.part](args)))
        return
    argv = [a for a in sys.argv[1:]]
    report = {"script": "benchmarks/speed/gpu_scale.py", "argv": argv, "started": time.strftime("%Y-%m-%d %H:%M:%S"), "smoke": args.smoke}
    report["machine"], report["versions"] = machine(), versions()
    for name in args.parts.split(","):
        print(f"== {name}", flush=True)
        report[name] = run_part(name, args, argv)
        print(json.dumps({k: v for k, v in report[name].items() if k not in ("curve", "log_tail")})[:1500], flush=True)
        if "log_tail" in report[name]:
            print(report[name]["log_tail"], flush=True)
        args.out.write_text(json.dumps(report, indent=1))  # after every part: a later failure keeps these
    print(f"wrote {args.out}", flush=True)


if __name__ == "__main__":
    main()
