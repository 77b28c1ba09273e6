"""Why a Go1 joystick policy gives up walking forward: per commanded direction, what the training
(sampled) policy of each saved checkpoint does, how often it falls and how well its critic knows it.

    python -m benchmarks.robots.go1_forward_diagnosis run=<run dir> [sub_envs=64] [steps=1000] [out=<json>]

Every periodic checkpoint of the run (`checkpoints/step_*.pt`) drives `sub_envs` envpool sub-envs for
`steps` control steps with sampled actions, as in training. Each step is put in the bucket of its
command's dominant axis (forward, backward, left, right, turn left, turn right; at least 0.3 m/s or
rad/s, else "small"). Per bucket:
- response: the speed reached along the commanded axis over the speed commanded (1 follows, 0 stands);
- falls per 1,000 steps: terminations while that command was held;
- reward per step: the task's reward (each step's clipped sum of terms times dt);
- return, value, value error: the discounted return that followed each step (the run's gamma,
  terminations cut, the rollout's end bootstrapped with the critic) against the critic's value of the
  step, both in raw reward units (the critic's output times the reward scaler's scale).
Per checkpoint (`actions`): the share of the steps at which the deterministic action (the mean,
clipped or squashed) sits at its bound (within 1% of the range), overall and per joint, and the
mean log-std: a Gaussian whose mean has left the bounds holds those joints at a fixed target, and
its samples there are clipped to one value, so they explore nothing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch

from benchmarks.common import parse_args, run_directory
from ppo_control.envs.joystick import RESPONSE_DIRECTIONS, RESPONSE_MIN_COMMAND, tracking_indices

DEFAULTS = {"run": None, "sub_envs": 64, "steps": 1000, "out": None, "seed": 2_000_000}
DIRECTIONS = {name: (axis, sign) for name, axis, sign in RESPONSE_DIRECTIONS}


def bucket_of(command: np.ndarray) -> np.ndarray:
    """The dominant commanded axis of each row as a direction name ("small" when every axis is under
    RESPONSE_MIN_COMMAND, the command response's own threshold)."""
    axis = np.abs(command).argmax(axis=1)
    value = command[np.arange(len(command)), axis]
    names = np.full(len(command), "small", dtype=object)
    for name, (index, sign) in DIRECTIONS.items():
        names[(axis == index) & (np.sign(value) == sign) & (np.abs(value) >= RESPONSE_MIN_COMMAND)] = name
    return names


def discounted_returns(rewards, terminated, truncated, values, last_value, gamma):
    """Returns-to-go [T, N]: terminations end the sum, truncations and the rollout's end bootstrap
    from the critic (a truncated step's own value stands in for its final observation's)."""
    returns = np.zeros_like(rewards)
    following = last_value
    for t in range(len(rewards) - 1, -1, -1):
        following = np.where(truncated[t], values[t], following)
        following = rewards[t] + gamma * following * (1.0 - terminated[t])
        returns[t] = following
    return returns


def rollout(policy, envs, where, steps: int, seed: int, value_scale: float):
    """`where`: the task's TrackingIndices (the command's columns and the clean measurements')."""
    torch.manual_seed(seed)  # the sampled actions, reproducible from the seed
    obs = envs.reset(seed=seed)
    record = {key: [] for key in ("command", "measured", "value", "reward", "terminated", "truncated", "at_bound")}
    margin = 0.01 * (policy.action_high - policy.action_low)
    with torch.inference_mode():
        for _ in range(steps):
            tensor = torch.as_tensor(obs)
            action, _ = policy.sample_action(tensor)
            mean, _ = policy.deterministic_step(tensor)
            at_bound = (mean <= policy.action_low + margin) | (mean >= policy.action_high - margin)
            record["at_bound"].append(at_bound.numpy().astype(np.float64))
            record["value"].append(policy.value(policy.normalize(tensor)).numpy().reshape(-1) * value_scale)
            record["command"].append(where.commanded(obs))
            result = envs.step(policy.env_action(action).numpy())
            # the measurement after the step, against the command the step was taken under
            measured = np.where(result.terminated[:, None] | result.truncated[:, None], result.final_obs, result.obs)
            record["measured"].append(where.measured(measured))
            record["reward"].append(result.reward.astype(np.float64))
            record["terminated"].append(result.terminated.astype(np.float64))
            record["truncated"].append(result.truncated.astype(np.float64))
            obs = result.obs
        last_value = policy.value(policy.normalize(torch.as_tensor(obs))).numpy().reshape(-1) * value_scale
    return {key: np.stack(value) for key, value in record.items()}, last_value


def summarize(record, last_value, gamma: float) -> dict[str, dict[str, float]]:
    returns = discounted_returns(record["reward"], record["terminated"], record["truncated"], record["value"], last_value, gamma)
    command = record["command"].reshape(-1, 3)
    measured = record["measured"].reshape(-1, 3)
    names = bucket_of(command)
    flat = {key: record[key].reshape(-1) for key in ("value", "reward", "terminated")}
    error = returns.reshape(-1) - flat["value"]
    out = {}
    for name in [*DIRECTIONS, "small"]:
        mask = names == name
        if not mask.any():
            continue
        row = {
            "share_of_steps": float(mask.mean()),
            "falls_per_1000_steps": float(1000 * flat["terminated"][mask].mean()),
            "reward_per_step": float(flat["reward"][mask].mean()),
            "return": float(returns.reshape(-1)[mask].mean()),
            "value": float(flat["value"][mask].mean()),
            "value_error": float(error[mask].mean()),
            "value_abs_error": float(np.abs(error[mask]).mean()),
        }
        if name in DIRECTIONS:
            axis, sign = DIRECTIONS[name]
            row["response"] = float((measured[mask, axis] * sign).mean() / (command[mask, axis] * sign).mean())
        out[name] = row
    return out


def action_summary(record, policy) -> dict[str, float | list[float]]:
    per_joint = record["at_bound"].mean(axis=(0, 1))
    return {
        "at_bound_share": float(per_joint.mean()),
        "at_bound_per_joint": [round(float(x), 3) for x in per_joint],
        "log_std_mean": float(policy.log_std.detach().mean()),
    }


def main(argv: list[str]) -> None:
    args = parse_args(argv, DEFAULTS, __doc__)
    run = run_directory(args)
    from ppo_control.envs.registry import make_vec_env
    from ppo_control.runs.directory import load_run

    checkpoints = sorted((run / "checkpoints").glob("step_*.pt"))
    report = {}
    for path in checkpoints:
        loaded = load_run(run, path)
        cfg, policy = loaded.cfg, loaded.policy
        scaler = loaded.state["reward_scaler"]
        value_scale = float(np.sqrt(float(scaler["stats.var"]) + 1e-8)) if cfg.normalize.reward else 1.0
        envs = make_vec_env(cfg.env, num_envs=int(args["sub_envs"]), privileged=True)
        try:
            where = tracking_indices(str(cfg.env.id), envs.info.groups)
            record, last_value = rollout(policy, envs, where, int(args["steps"]), int(args["seed"]), value_scale)
        finally:
            envs.close()
        step = int(path.stem.split("_")[1])
        row = summarize(record, last_value, float(cfg.ppo.gamma))
        actions = action_summary(record, policy)
        report[step] = {**row, "actions": actions}
        print(
            f"{step:>10,}  at bound {actions['at_bound_share']:.2f}  log-std {actions['log_std_mean']:+.2f}  "
            + "  ".join(
                f"{name} resp {row[name].get('response', float('nan')):+.2f} falls {row[name]['falls_per_1000_steps']:.1f}" for name in row
            ),
            flush=True,
        )
    text = json.dumps(report, indent=1)
    if args["out"]:
        Path(args["out"]).write_text(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main(sys.argv[1:])
