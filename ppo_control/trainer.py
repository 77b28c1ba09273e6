"""The training loop: collect -> advantages -> update -> log -> evaluate -> checkpoint."""

from __future__ import annotations

import collections
import time
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from ppo_control.checkpoint import (
    capture_rng_state,
    periodic_checkpoint_name,
    prune_periodic_checkpoints,
    save_checkpoint,
)
from ppo_control.envs import make_vec_env
from ppo_control.errors import UserError
from ppo_control.evaluation import EVAL_SEED_OFFSET, evaluate_policy, make_eval_envs
from ppo_control.metrics import MetricsLogger
from ppo_control.normalization import RewardScaler
from ppo_control.ppo import (
    Batch,
    adapt_learning_rate,
    explained_variance,
    ppo_update,
    scheduled_learning_rate,
    set_learning_rate,
)
from ppo_control.rollout import RolloutStorage
from ppo_control.runs import build_policy, claim_run_dir, env_info_to_dict, prepare_run_dir
from ppo_control.video import record_videos, video_directory

EPISODE_WINDOW = 20  # episode_return/length in metrics are the mean of this many recent episodes


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise UserError("device=cuda but no CUDA device is available; use device=cpu or device=auto")
    return torch.device(name)


class Trainer:
    """Owns the envs, the policy, the optimizer and the loop for one training run."""

    def __init__(self, cfg: DictConfig):
        self.cfg = cfg
        self.device = resolve_device(cfg.device)
        claim_run_dir(cfg)
        torch.manual_seed(cfg.seed)
        np.random.seed(cfg.seed)
        self.generator = torch.Generator().manual_seed(cfg.seed)  # minibatch shuffling

        self.envs = make_vec_env(cfg.env)
        self.info = self.envs.info
        self.policy = build_policy(cfg, self.info).to(self.device)
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=cfg.ppo.learning_rate, eps=1e-5)
        self.reward_scaler = RewardScaler(cfg.env.n_envs, cfg.ppo.gamma, cfg.normalize.reward_clip, enabled=cfg.normalize.reward)
        self.storage = RolloutStorage(cfg.ppo.rollout_steps, cfg.env.n_envs, self.info.obs_dim, self.info.action_dim, self.device)
        self.eval_envs = None

        self.step = 0
        self.update = 0
        self.episodes = 0
        self.recent_returns: collections.deque[float] = collections.deque(maxlen=EPISODE_WINDOW)
        self.recent_lengths: collections.deque[int] = collections.deque(maxlen=EPISODE_WINDOW)

        self.run_dir = prepare_run_dir(cfg)
        self.run_name = self.run_dir.name
        self.logger = MetricsLogger(self.run_dir, cfg, self.run_name)
        self.obs = self.envs.reset(cfg.seed)

    # ----------------------------------------------------------------------------------------
    def train(self) -> dict[str, Any]:
        cfg = self.cfg
        steps_per_update = cfg.env.n_envs * cfg.ppo.rollout_steps
        next_eval = self._next_multiple(cfg.eval.every_steps)
        next_checkpoint = self._next_multiple(cfg.checkpoint.every_steps)
        print(f"training {cfg.task} ({cfg.env.id}) for {cfg.total_steps:,} steps -> {self.run_dir}", flush=True)
        final: dict[str, float] = {}
        try:
            while self.step < cfg.total_steps:
                started = time.perf_counter()
                lr = scheduled_learning_rate(
                    cfg.ppo.lr_schedule, cfg.ppo.learning_rate, self.optimizer.param_groups[0]["lr"], self.step, cfg.total_steps
                )
                set_learning_rate(self.optimizer, lr)

                self._collect_rollout()
                batch = self._build_batch()
                stats = ppo_update(self.policy, self.optimizer, batch, cfg.ppo, self.generator)
                if cfg.ppo.lr_schedule == "adaptive":
                    set_learning_rate(self.optimizer, adapt_learning_rate(lr, stats["approx_kl"], cfg.ppo.target_kl))

                self.step += steps_per_update
                self.update += 1
                row = self._metrics_row(stats, batch, lr, steps_per_update, time.perf_counter() - started)
                finished = self.step >= cfg.total_steps
                if finished or (next_eval is not None and self.step >= next_eval):
                    final = self._evaluate()  # the last update always gets one
                    row.update(final)
                    next_eval = self._next_multiple(cfg.eval.every_steps)
                if next_checkpoint is not None and self.step >= next_checkpoint:
                    self._save_checkpoints(periodic=True)
                    next_checkpoint = self._next_multiple(cfg.checkpoint.every_steps)
                self.logger.log(row)
                self.logger.progress(row, self.update, force=finished)

            self._save_checkpoints(periodic=False)
            print(f"done: eval return {final.get('eval_return', float('nan')):.1f} +- {final.get('eval_return_std', float('nan')):.1f}"
                  f"; run saved in {self.run_dir}", flush=True)
            return final
        finally:
            self.close()

    # ----------------------------------------------------------------------------------------
    def _collect_rollout(self) -> None:
        """Step the envs for rollout_steps, storing everything the update needs.

        The normalizer is frozen during collection: every observation of the batch, including the
        final observations that truncated steps bootstrap from, sees the same statistics.
        """
        storage, policy, device = self.storage, self.policy, self.device
        storage.truncation_values.zero_()
        with torch.inference_mode():
            for t in range(storage.num_steps):
                obs = torch.from_numpy(self.obs).to(device)
                action, log_prob, value = policy.act(obs)
                result = self.envs.step(action.cpu().numpy())

                storage.observations[t] = obs
                storage.actions[t] = action
                storage.log_probs[t] = log_prob
                storage.values[t] = value
                terminated = torch.from_numpy(result.terminated)
                truncated = torch.from_numpy(result.truncated)
                storage.rewards[t] = self.reward_scaler(torch.from_numpy(result.reward), terminated | truncated).to(device)
                storage.terminated[t] = terminated.to(device)
                storage.truncated[t] = truncated.to(device)
                if result.truncated.any():
                    index = np.flatnonzero(result.truncated)
                    final_obs = torch.from_numpy(result.final_obs[index]).to(device)
                    storage.truncation_values[t, torch.from_numpy(index).to(device)] = policy.value(policy.normalize(final_obs))
                if len(result.episode_returns):
                    self.recent_returns.extend(result.episode_returns.tolist())
                    self.recent_lengths.extend(result.episode_lengths.tolist())
                    self.episodes += len(result.episode_returns)
                self.obs = result.obs
            self.last_values = policy.value(policy.normalize(torch.from_numpy(self.obs).to(device)))

    def _build_batch(self) -> Batch:
        """GAE, then flatten. Normalizes with the statistics used while acting, then updates them."""
        cfg, storage = self.cfg, self.storage
        advantages, returns = storage.compute_advantages(self.last_values, cfg.ppo.gamma, cfg.ppo.gae_lambda)
        raw_obs = storage.observations.view(-1, self.info.obs_dim)
        with torch.no_grad():
            norm_obs = self.policy.normalize(raw_obs)
        if cfg.normalize.obs:
            self.policy.obs_normalizer.update(raw_obs)
        return Batch(
            obs=norm_obs,
            actions=storage.actions.view(-1, self.info.action_dim),
            log_probs=storage.log_probs.view(-1),
            values=storage.values.view(-1),
            advantages=advantages.view(-1),
            returns=returns.view(-1),
        )

    def _metrics_row(self, stats: dict[str, Any], batch: Batch, lr: float, steps: int, seconds: float) -> dict[str, Any]:
        return {
            "step": self.step,
            "update": self.update,
            "episode_return": float(np.mean(self.recent_returns)) if self.recent_returns else None,
            "episode_length": float(np.mean(self.recent_lengths)) if self.recent_lengths else None,
            "episodes": self.episodes,
            "approx_kl": stats["approx_kl"],
            "clip_fraction": stats["clip_fraction"],
            "entropy": stats["entropy"],
            "explained_variance": explained_variance(batch.values, batch.returns),
            "grad_norm": stats["grad_norm"],
            "policy_loss": stats["policy_loss"],
            "value_loss": stats["value_loss"],
            "learning_rate": lr,
            "epochs_run": stats["epochs_run"],
            "kl_early_stop": stats["kl_early_stop"],
            "log_std_mean": float(self.policy.log_std.detach().mean()),
            "sps": steps / seconds if seconds > 0 else None,
            "steps_this_update": steps,
            "time": time.time(),
        }

    def _evaluate(self) -> dict[str, Any]:
        cfg = self.cfg
        if self.eval_envs is None:
            self.eval_envs = make_eval_envs(cfg.env, cfg.eval.episodes)
        seed = cfg.seed + EVAL_SEED_OFFSET
        returns, lengths = evaluate_policy(self.policy, self.eval_envs, cfg.eval.episodes, seed, self.device)
        result: dict[str, Any] = {
            "eval_return": float(returns.mean()),
            "eval_return_std": float(returns.std()),
            "eval_length": float(lengths.mean()),
        }
        if cfg.eval.video:
            directory = video_directory(cfg.eval.video_dir, cfg.task, self.run_name)
            paths = record_videos(self.policy, cfg.env, directory, self.step, cfg.eval.video_episodes, seed,
                                  cfg.eval.video_width, cfg.eval.video_height, cfg.eval.video_fps, self.device)
            result["videos"] = [str(p) for p in paths]
        return result

    def checkpoint_state(self) -> dict[str, Any]:
        return {
            "config": OmegaConf.to_container(self.cfg, resolve=True),
            "policy": self.policy.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "reward_scaler": self.reward_scaler.state_dict(),
            "step": self.step,
            "update": self.update,
            "episodes": self.episodes,
            "rng": capture_rng_state(self.generator),
            "env_info": env_info_to_dict(self.info),
        }

    def _save_checkpoints(self, periodic: bool) -> None:
        directory = self.run_dir / "checkpoints"
        state = self.checkpoint_state()
        if periodic and self.cfg.checkpoint.keep > 0:
            save_checkpoint(directory / periodic_checkpoint_name(self.step), state)
            prune_periodic_checkpoints(directory, self.cfg.checkpoint.keep)
        save_checkpoint(directory / "last.pt", state)

    def _next_multiple(self, every: int) -> int | None:
        """The first multiple of `every` strictly after the current step (None when disabled)."""
        if every <= 0:
            return None
        return (self.step // every + 1) * every

    def close(self) -> None:
        self.logger.close()
        self.envs.close()
        if self.eval_envs is not None:
            self.eval_envs.close()
