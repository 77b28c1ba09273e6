"""Stable-Baselines3 PPO on a Gymnasium MuJoCo task, measured the way our benchmarks measure ours.

    pip install -r benchmarks/requirements.txt   # stable-baselines3 (benchmark env only)
    python -m benchmarks.scores.sb3_ppo task=HalfCheetah [hparams=default|paper] [seed=0] [total_steps=65536]
        [budget_s=0] [eval_every=0] [eval_episodes=5] [launch_time=<unix s>] [torch_threads=0] [out=result.json]

The other benchmarks run this file once per run in its own subprocess (so peak RSS and timing
are per run); `train_sb3()` is the same thing as a function.

Setup: `make_vec_env("<task>-v5", n_envs=1, seed=seed)` (DummyVecEnv of Monitor-wrapped envs) inside
`VecNormalize(norm_obs=True, norm_reward=True, clip_obs=10, clip_reward=10, gamma=<PPO gamma>)`,
`PPO("MlpPolicy", ..., device="cpu")`; torch uses its default thread count (one per core) unless
torch_threads > 0. Note: with 2 threads on 2 cores, any other load on the machine slows SB3 far more
than proportionally (threads wait for each other), so measure on an idle machine.

hparams:
  default  SB3's own defaults: n_steps 2048, batch 64, 10 epochs, lr 3e-4 *constant*, gamma .99,
           gae .95, clip .2, no value clipping, ent 0, vf .5, max_grad_norm .5, 64-64 tanh (separate
           pi/vf nets), orthogonal init, log_std_init 0, Adam eps 1e-5, advantage normalization.
  paper    matched to ours `preset=paper` (configs/presets/paper.yaml): the same, plus the learning
           rate linear to 0 over total_steps (`lambda f: 3e-4 * f`) and value clipping at 0.2
           (`clip_range_vf=0.2`; SB3 clips the prediction and takes the clipped loss only, CleanRL
           and ours take max(clipped, unclipped) -- the same compute, slightly different loss).
           1 env, 2048 rollout steps, 2048/64 = 32 minibatches, 10 epochs.

Timing (all in the result JSON):
  sps          steps/s with the first rollout+update excluded: (steps after the first iteration) /
               (seconds from the start of the 2nd rollout to the end of learn()). Each interval holds
               one rollout + SB3's (silent) log dump + train(), like ours' per-update time. With
               evaluations on (eval_every > 0) their time is inside it too; speed runs use none.
  sps_total    all steps / learn() seconds (first iteration included).
  startup_s    launch (`launch_time`, the parent's clock just before it started this process;
               else this script's first line) to the start of learn(): imports, env and model build.
  peak_rss_mib ru_maxrss of this process.

Evaluation (eval_every > 0): at the start of the first rollout at or after each multiple of
eval_every env steps -- that is, right after an update, as ours evaluates after an update -- a
deterministic evaluation of eval_episodes episodes on its own `make_vec_env(id, n_envs=eval_episodes,
seed=seed+1_000_000)` inside a VecNormalize with training=False, norm_reward=False and the training
statistics copied in (`sync_envs_normalization`); returns are the raw Monitor returns. Each record
is (time_s = wall-clock since launch when the evaluation *started*, step, return mean/std). A run
that ends by reaching total_steps also evaluates at the end.

budget_s > 0 stops training at launch_time + budget_s (checked every env step); use it with a huge
total_steps (the default lr is constant, so total_steps changes nothing else).
"""

from __future__ import annotations

import json
import resource
import sys
import time

_SCRIPT_START = time.time()  # before the heavy imports, in case no launch_time is given

from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from benchmarks.common import parse_args, versions, write_json  # noqa: E402

EVAL_SEED_OFFSET = 1_000_000  # as ppo_control: evaluation envs never share seeds with training envs

USAGE = __doc__
DEFAULTS: dict[str, Any] = {
    "task": "HalfCheetah",  # <task>-v5 unless env_id is given
    "env_id": None,
    "hparams": "default",
    "seed": 0,
    "total_steps": 65536,
    "n_envs": 1,
    "budget_s": 0.0,
    "eval_every": 0,
    "eval_episodes": 5,
    "launch_time": 0.0,
    "torch_threads": 0,  # 0 = torch's default (one per core)
    "out": None,
}


def sb3_hyperparameters(hparams: str) -> dict[str, Any]:
    """PPO keyword arguments (besides policy, env, seed, device) for `hparams`."""
    if hparams == "default":
        return {}
    if hparams == "paper":
        import torch.nn as nn

        base = 3e-4
        return {
            "learning_rate": lambda progress_remaining: base * progress_remaining,  # linear to 0
            "n_steps": 2048,
            "batch_size": 64,
            "n_epochs": 10,
            "gamma": 0.99,
            "gae_lambda": 0.95,
            "clip_range": 0.2,
            "clip_range_vf": 0.2,
            "normalize_advantage": True,
            "ent_coef": 0.0,
            "vf_coef": 0.5,
            "max_grad_norm": 0.5,
            "policy_kwargs": {
                "net_arch": {"pi": [64, 64], "vf": [64, 64]},
                "activation_fn": nn.Tanh,
                "ortho_init": True,
                "log_std_init": 0.0,
            },
        }
    raise SystemExit(f"hparams={hparams!r} is not valid; choose default or paper")


def describe_hyperparameters(model) -> dict[str, Any]:
    """What the built PPO object actually uses (so the results file shows SB3's real defaults)."""
    policy = model.policy
    return {
        "n_envs": model.n_envs,
        "n_steps": model.n_steps,
        "batch_size": model.batch_size,
        "n_epochs": model.n_epochs,
        "learning_rate_at_start": float(model.lr_schedule(1.0)),
        "learning_rate_at_end": float(model.lr_schedule(0.0)),
        "gamma": model.gamma,
        "gae_lambda": model.gae_lambda,
        "clip_range": float(model.clip_range(1.0)),
        "clip_range_vf": None if model.clip_range_vf is None else float(model.clip_range_vf(1.0)),
        "ent_coef": model.ent_coef,
        "vf_coef": model.vf_coef,
        "max_grad_norm": model.max_grad_norm,
        "normalize_advantage": model.normalize_advantage,
        "target_kl": model.target_kl,
        "net_arch": policy.net_arch,
        "activation_fn": policy.activation_fn.__name__,
        "ortho_init": policy.ortho_init,
        "log_std_init": policy.log_std_init,
        "optimizer": type(policy.optimizer).__name__,
        "optimizer_eps": policy.optimizer.defaults.get("eps"),
    }


def train_sb3(
    env_id: str,
    hparams: str = "default",
    seed: int = 0,
    total_steps: int = 65536,
    n_envs: int = 1,
    budget_s: float = 0.0,
    eval_every: int = 0,
    eval_episodes: int = 5,
    launch_time: float | None = None,
    torch_threads: int = 0,
) -> dict[str, Any]:
    """Train SB3 PPO and return the measurements described in the module docstring."""
    import numpy as np
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.vec_env import VecNormalize, sync_envs_normalization

    if torch_threads > 0:
        torch.set_num_threads(torch_threads)
    launch = launch_time or _SCRIPT_START
    deadline = launch + budget_s if budget_s > 0 else None
    kwargs = sb3_hyperparameters(hparams)
    gamma = kwargs.get("gamma", 0.99)  # PPO's default gamma; VecNormalize's return scaling must use the same

    class Recorder(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.rollout_starts: list[tuple[float, int]] = []  # (perf_counter, num_timesteps)
            self.evals: list[dict[str, Any]] = []
            self.eval_env = None
            self.next_eval = eval_every if eval_every > 0 else None
            self.stopped_by_budget = False
            self.eval_seconds = 0.0

        def evaluate(self) -> None:
            started_unix, started = time.time(), time.perf_counter()
            if self.eval_env is None:
                self.eval_env = VecNormalize(
                    make_vec_env(env_id, n_envs=eval_episodes, seed=seed + EVAL_SEED_OFFSET),
                    training=False,
                    norm_obs=True,
                    norm_reward=False,
                    gamma=gamma,
                )
            sync_envs_normalization(self.training_env, self.eval_env)
            returns, lengths = evaluate_policy(
                self.model, self.eval_env, n_eval_episodes=eval_episodes, deterministic=True, return_episode_rewards=True
            )
            self.eval_seconds += time.perf_counter() - started
            self.evals.append(
                {
                    "time_s": started_unix - launch,
                    "step": int(self.num_timesteps),
                    "eval_return": float(np.mean(returns)),
                    "eval_return_std": float(np.std(returns)),
                    "eval_length": float(np.mean(lengths)),
                    "eval_seconds": time.perf_counter() - started,
                }
            )

        def _on_rollout_start(self) -> None:
            self.rollout_starts.append((time.perf_counter(), int(self.num_timesteps)))
            # Right after an update (the first rollout has no update before it); none past the budget.
            past_budget = deadline is not None and time.time() >= deadline
            if self.next_eval is not None and self.num_timesteps >= self.next_eval and not past_budget:
                self.evaluate()
                while self.next_eval <= self.num_timesteps:
                    self.next_eval += eval_every

        def _on_step(self) -> bool:
            if deadline is not None and time.time() >= deadline:
                self.stopped_by_budget = True
                return False
            return True

    env = VecNormalize(
        make_vec_env(env_id, n_envs=n_envs, seed=seed), norm_obs=True, norm_reward=True, clip_obs=10.0, clip_reward=10.0, gamma=gamma
    )
    model = PPO("MlpPolicy", env, seed=seed, device="cpu", verbose=0, **kwargs)
    recorder = Recorder()
    learn_start = time.perf_counter()
    learn_start_unix = time.time()
    model.learn(total_timesteps=total_steps, callback=recorder)
    learn_end = time.perf_counter()
    if recorder.next_eval is not None and not recorder.stopped_by_budget:
        recorder.evaluate()  # like ours: a run that reaches total_steps ends with an evaluation

    steps = int(model.num_timesteps)
    starts = recorder.rollout_starts
    result: dict[str, Any] = {
        "framework": "sb3",
        "env_id": env_id,
        "hparams": hparams,
        "seed": seed,
        "total_steps": total_steps,
        "budget_s": budget_s,
        "eval_every": eval_every,
        "eval_episodes": eval_episodes,
        "steps": steps,
        "iterations_started": len(starts),
        "stopped_by_budget": recorder.stopped_by_budget,
        "startup_s": learn_start_unix - launch,
        "learn_s": learn_end - learn_start,
        "sps_total": steps / (learn_end - learn_start),
        "sps": None,
        "sps_note": "first rollout+update excluded",
        "eval_seconds": recorder.eval_seconds,
        "evals": recorder.evals,
        "torch_threads": torch.get_num_threads(),
        "hyperparameters": describe_hyperparameters(model),
        "vecnormalize": {
            "norm_obs": env.norm_obs,
            "norm_reward": env.norm_reward,
            "clip_obs": env.clip_obs,
            "clip_reward": env.clip_reward,
            "gamma": env.gamma,
            "epsilon": env.epsilon,
        },
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "versions": versions(),
    }
    if len(starts) >= 2 and not recorder.stopped_by_budget:
        t1, steps_before = starts[1]
        result["sps"] = (steps - steps_before) / (learn_end - t1)
    elif len(starts) >= 3:  # stopped mid-rollout: measure whole iterations only, up to the last rollout start
        (t1, s1), (tn, sn) = starts[1], starts[-1]
        result["sps"] = (sn - s1) / (tn - t1)
    env.close()
    if recorder.eval_env is not None:
        recorder.eval_env.close()
    return result


def main(argv: list[str]) -> None:
    args = parse_args(argv, DEFAULTS, USAGE)
    env_id = args["env_id"] or f"{args['task']}-v5"
    result = train_sb3(
        env_id,
        args["hparams"],
        args["seed"],
        args["total_steps"],
        args["n_envs"],
        args["budget_s"],
        args["eval_every"],
        args["eval_episodes"],
        args["launch_time"] or None,
        args["torch_threads"],
    )
    if args["out"]:
        write_json(Path(args["out"]), result)
    sps = f"{result['sps']:,.0f}" if result["sps"] else "n/a"
    last = result["evals"][-1]["eval_return"] if result["evals"] else float("nan")
    print(
        f"sb3 {env_id} hparams={args['hparams']} seed={args['seed']}: {result['steps']:,} steps, {sps} steps/s "
        f"(first iteration excluded), startup {result['startup_s']:.1f} s, peak RSS {result['peak_rss_mib']:.0f} MiB, "
        f"{len(result['evals'])} evals (last {last:.1f})",
        flush=True,
    )
    if not args["out"]:
        print(json.dumps({k: v for k, v in result.items() if k not in ("evals", "versions")}, indent=2))


if __name__ == "__main__":
    main(sys.argv[1:])
