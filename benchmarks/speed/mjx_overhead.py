"""What our MJX env's step costs per env step against the engine's own scan, on one JAX device.

    python -m benchmarks.speed.mjx_overhead [--sizes 8,128] [--steps 100] [--repeats 9] [--out mjx_overhead.json]

The same task, batch and actions through five paths, interleaved within each repeat (so a load
that changes during the run slows every path alike), each from the same freshly reset states:
- engine_scan: Brax's step vmapped over the envs, `--steps` of them in one jitted `lax.scan`: no
  reset, nothing leaves the device, one dispatch in all (the engine's ceiling, and the reference
  every ratio divides by);
- engine_step: that vmapped step jitted alone and called once per env step: what one dispatch per
  step costs the engine itself, with its own state as the carry;
- ours_scan: our batched step (the time limit, episode returns and lengths, the auto-reset of
  ended sub-envs, the outputs the trainer needs) in one `lax.scan`: the compute our episode
  semantics add, without any dispatch;
- ours_step: our jitted step called once per env step with JAX arrays;
- ours_step_device: `MjxVecEnv.step_device` from torch, what the device collector calls: the
  above plus the hand-over of actions in and of the outputs out (DLPack), as torch tensors.

So ours_scan / engine_scan is the price of the semantics (resets included: the engine's scan does
none, and `reset_rate` says how often ours did), ours_step / ours_scan our per-dispatch cost, and
ours_step_device / engine_scan the whole gap the device collector sees. A repeat's ratio divides
that repeat's times; the reported ratio is the median over repeats, by wall-clock and by this
process's CPU time.

The actions are seeded uniform draws in [-1, 1] (`--actions random`: Hoppers fall, so resets
happen) or zeros (`--actions zero`, as gpu_scale.py's mjx_raw part). `--device cuda` runs on the
GPU that torch and JAX share.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from benchmarks.speed.gpu_scale import machine, versions

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # JAX and torch share a GPU

PATHS = ("engine_scan", "engine_step", "ours_scan", "ours_step", "ours_step_device")
# Wall-clock is what a user waits; this process's CPU time (all its threads) leaves out the time
# other processes took the core, so on a loaded machine its ratios are the steadier of the two.
CLOCKS = ("wall", "cpu")


def measure_size(args, n: int) -> dict:
    """Every path's seconds per env step for `n` envs, `args.repeats` interleaved repeats."""
    import jax
    import jax.numpy as jnp
    import torch

    from ppo_control.envs.mjx_backend import MjxVecEnv, batched_functions, batched_step, jax_device, shared_engine_env

    name, steps = args.task, args.steps
    env, _ = shared_engine_env(name, {})
    ours = MjxVecEnv(name, n, max_episode_steps=args.limit, device=args.device)
    functions = batched_functions(name, {}, n, args.limit)
    reset, step = functions.reset, functions.step
    raw_step = batched_step(env, n, args.limit, functions.episodes, functions.outputs)
    device = jax_device(torch.device(args.device))
    if args.actions == "random":
        torch_actions = torch.rand(steps, n, env.action_size, generator=torch.Generator().manual_seed(0)) * 2 - 1
    else:
        torch_actions = torch.zeros(steps, n, env.action_size)
    torch_actions = torch_actions.to(args.device)
    actions = jax.device_put(torch_actions.cpu().numpy(), device)
    per_step_actions = [actions[t] for t in range(steps)]
    per_step_torch = list(torch_actions.unbind(0))
    seed = jax.device_put(jnp.int32(0), device)
    # The engine starts where ours does: sub-env i from PRNGKey(i) (batched_reset's contract).
    engine_reset = jax.jit(lambda: jax.vmap(env.reset)(jax.vmap(jax.random.PRNGKey)(jnp.arange(n))))
    engine_vstep = jax.jit(jax.vmap(env.step))

    @jax.jit
    def engine_scan(states, actions):
        return jax.lax.scan(lambda s, a: (jax.vmap(env.step)(s, a), None), states, actions)[0]

    @jax.jit
    def ours_scan(carry, actions):
        return jax.lax.scan(lambda c, a: (raw_step(c, a)[0], None), carry, actions)[0]

    sync = torch.cuda.synchronize if args.device == "cuda" else lambda: None

    def run_engine_scan():
        states = jax.block_until_ready(engine_reset())
        started = clock()
        jax.block_until_ready(engine_scan(states, actions))
        return since(started)

    def run_engine_step():
        states = jax.block_until_ready(engine_reset())
        started = clock()
        for a in per_step_actions:
            states = engine_vstep(states, a)
        jax.block_until_ready(states)
        return since(started)

    def run_ours_scan():
        carry, _ = jax.block_until_ready(reset(seed))
        started = clock()
        jax.block_until_ready(ours_scan(carry, actions))
        return since(started)

    def run_ours_step():
        carry, _ = jax.block_until_ready(reset(seed))
        started = clock()
        for a in per_step_actions:
            carry, outputs = step(carry, a)
        jax.block_until_ready((carry, outputs))
        return since(started)

    def run_ours_step_device():
        ours.reset_device(0)
        sync()
        started = clock()
        for a in per_step_torch:
            out = ours.step_device(a)
        float(out.reward.sum())  # waits for the last step
        sync()
        return since(started)

    runners = dict(
        engine_scan=run_engine_scan,
        engine_step=run_engine_step,
        ours_scan=run_ours_scan,
        ours_step=run_ours_step,
        ours_step_device=run_ours_step_device,
    )
    started = time.perf_counter()
    for run in runners.values():  # compiles each path (a short first pass would compile as much)
        run()
    compile_s = time.perf_counter() - started

    seconds: dict[str, dict[str, list[float]]] = {clock_name: {path: [] for path in PATHS} for clock_name in CLOCKS}
    for repeat in range(args.repeats):
        order = PATHS if repeat % 2 == 0 else PATHS[::-1]  # neither end of a repeat is always the same path
        for path in order:
            for clock_name, value in zip(CLOCKS, runners[path]()):
                seconds[clock_name][path].append(value)

    ended = 0  # how many episodes our step ended over one pass: the resets the engine's scan does not do
    ours.reset_device(0)
    for a in per_step_torch:
        out = ours.step_device(a)
        ended += int((out.terminated | out.truncated).sum())

    env_steps = n * steps
    ratio = lambda times, a, b: statistics.median(x / y for x, y in zip(times[a], times[b]))
    result = {"n_envs": n, "steps": steps, "compile_s": compile_s, "reset_rate": ended / env_steps}
    for clock_name, times in seconds.items():
        result[clock_name] = {
            "us_per_env_step": {p: 1e6 * statistics.median(t) / env_steps for p, t in times.items()},
            "ratio_to_engine_scan": {p: ratio(times, p, "engine_scan") for p in PATHS},
            "ours_step_device_over_ours_scan": ratio(times, "ours_step_device", "ours_scan"),
        }
    result["seconds"] = seconds
    return result


def clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def since(started: tuple[float, float]) -> tuple[float, float]:
    """(wall-clock, CPU) seconds since `started` (a `clock()`)."""
    return tuple(now - then for now, then in zip(clock(), started))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="hopper", help="a Brax MJX env name")
    parser.add_argument("--sizes", default="8,128", help="comma-separated numbers of envs")
    parser.add_argument("--steps", type=int, default=100, help="env steps per timed pass")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--limit", type=int, default=1000, help="our time limit (max_episode_steps)")
    parser.add_argument("--actions", choices=("random", "zero"), default="random")
    parser.add_argument("--device", default="cpu", help="torch's device; JAX runs on the one it shares")
    parser.add_argument("--out", type=Path, default=Path("mjx_overhead.json"))
    args = parser.parse_args()

    import jax
    import torch

    from ppo_control.envs import mjx_backend
    from ppo_control.envs.mjx_backend import jax_device

    report = {
        "script": "benchmarks/speed/mjx_overhead.py",
        "args": vars(args) | {"out": str(args.out)},
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "jax_version": jax.__version__,
        "jax_device": str(jax_device(torch.device(args.device))),
        "module": mjx_backend.__file__,
        "load_average_at_start": os.getloadavg(),
        "machine": machine(),
        "versions": versions(),
        "sizes": [],
    }
    for n in (int(s) for s in args.sizes.split(",")):
        result = measure_size(args, n)
        report["sizes"].append(result)
        print(json.dumps({k: v for k, v in result.items() if k != "seconds"}), flush=True)
        report["load_average_at_end"] = os.getloadavg()
        args.out.write_text(json.dumps(report, indent=1))  # after every size: a later failure keeps these
    print(f"wrote {args.out}", flush=True)


if __name__ == "__main__":
    main()
