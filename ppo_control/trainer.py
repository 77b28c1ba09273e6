"""The training loop: collect -> advantages -> update -> log -> evaluate -> checkpoint."""

from __future__ import annotations

import collections
import hashlib
import json
import signal
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig, OmegaConf

from ppo_control.checkpoint import (
    capture_rng_state,
    periodic_checkpoint_name,
    prune_periodic_checkpoints,
    restore_rng_state,
    save_checkpoint,
    to_numpy,
    to_tensors,
)
from ppo_control.envs import make_vec_env, usable_cores
from ppo_control.errors import NonFiniteError, UserError
from ppo_control.evaluation import EVAL_SEED_OFFSET, evaluate_policy, make_eval_envs
from ppo_control.distributed import init_distributed
from ppo_control.metrics import MetricsLogger, NullLogger
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
from ppo_control.runs import (
    CHECKPOINT_DIR,
    LAST_CHECKPOINT,
    build_policy,
    claim_run_dir,
    create_run_dir,
    ensure_writable_dir,
    lock_run_dir,
    env_info_to_dict,
    truncate_metrics,
    write_config,
)
from ppo_control.video import record_videos, video_directory

EPISODE_WINDOW = 20  # episode_return/length in metrics are the mean of this many recent episodes
RANK_SEED_STRIDE = 7919  # spreads the per-rank action-sampling seeds apart
MULTITHREAD_MINIBATCH = 512  # smaller minibatches update on one thread (see Trainer.__init__)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise UserError("device=cuda but no CUDA device is available; use device=cpu or device=auto")
    return torch.device(name)


def _all_finite(result) -> bool:
    """Observations, rewards and (only where an episode ended, a separate array) final observations."""
    finite = np.isfinite(result.obs).all() and np.isfinite(result.reward).all()
    return finite and (result.final_obs is result.obs or np.isfinite(result.final_obs).all())


def check_finite_parameters(policy: torch.nn.Module, update: int) -> None:
    for name, tensor in policy.state_dict().items():
        if tensor.is_floating_point() and not torch.isfinite(tensor).all():
            raise NonFiniteError(f"non-finite values in policy '{name}' after update {update}; the last checkpoint is kept")


class Trainer:
    """Owns the envs, the policy, the optimizer and the loop for one training run.

    `resume_state` is a loaded checkpoint: the run continues in its own directory exactly where the
    checkpoint left it (counters, optimizer, normalizer, reward scaler, RNGs, and the envs' episodes).
    """

    def __init__(self, cfg: DictConfig, resume_state: dict[str, Any] | None = None):
        self.cfg = cfg
        self.device = resolve_device(cfg.device)
        self.dist = init_distributed(self.device.type, cfg.dist_timeout)
        if self.dist.enabled and self.device.type == "cuda":
            self.device = torch.device("cuda", self.dist.local_rank)  # one GPU per local rank
        self._check_same_config_on_all_ranks()
        if resume_state is None:
            self._on_main_then_share(lambda: claim_run_dir(cfg))
            cfg.run_dir = self.dist.broadcast_object(cfg.run_dir)  # rank 0's timestamp names the run
        # torch_threads=0: one thread while collecting (the env workers have the cores then; one
        # small forward pass gains nothing from more), every core for the update unless its
        # minibatches are small: preset=paper's 64 samples ran at 905 steps/s on 1 thread vs 597 on
        # 2 (784 with spinning OpenMP waits), while 512 samples were even (HalfCheetah, 2 cores).
        minibatch_size = cfg.env.n_envs * cfg.ppo.rollout_steps // cfg.ppo.minibatches
        self.collect_threads = cfg.torch_threads or 1
        self.update_threads = cfg.torch_threads or (1 if minibatch_size < MULTITHREAD_MINIBATCH else usable_cores())
        torch.manual_seed(cfg.seed)  # identical initial weights on every rank
        np.random.seed(cfg.seed)
        self.generator = torch.Generator().manual_seed(cfg.seed + self.dist.rank)  # minibatch shuffling
        self.env_seed = cfg.seed + self.dist.rank * cfg.env.n_envs  # sub-env i of rank r: seed + r*n_envs + i

        self.envs = make_vec_env(cfg.env)
        self.info = self.envs.info
        # One thread while initializing: the orthogonal init's QR rounds differently with more, and a
        # seed should give the same weights on any machine and any torch_threads.
        torch.set_num_threads(1)
        self.policy = build_policy(cfg, self.info).to(self.device)
        self.dist.broadcast_parameters(self.policy)
        if self.dist.enabled:
            torch.manual_seed(cfg.seed + RANK_SEED_STRIDE * self.dist.rank)  # each rank samples its own actions
        # fused: one kernel for all parameters instead of a loop of small ops (~12% of a small-MLP update)
        self.optimizer = torch.optim.Adam(self.policy.parameters(), lr=cfg.ppo.learning_rate, eps=1e-5, fused=True)
        self.reward_scaler = RewardScaler(cfg.env.n_envs, cfg.ppo.gamma, cfg.normalize.reward_clip, enabled=cfg.normalize.reward)
        self.storage = RolloutStorage(cfg.ppo.rollout_steps, cfg.env.n_envs, self.info.obs_dim, self.info.action_dim, self.device)
        self.eval_envs = None

        self.step = 0  # environment steps summed over all ranks
        self.update = 0
        self.episodes = 0
        self.recent_returns: collections.deque[float] = collections.deque(maxlen=EPISODE_WINDOW)
        self.recent_lengths: collections.deque[int] = collections.deque(maxlen=EPISODE_WINDOW)
        self.obs = self.envs.reset(self.env_seed)
        if resume_state is not None:
            self._restore(resume_state)

        self.run_dir = Path(cfg.run_dir)
        self.run_name = self.run_dir.name
        self._lock = None
        self._on_main_then_share(lambda: self._prepare_run_dir(resume_state is not None))
        self.logger = MetricsLogger(self.run_dir, cfg, self.run_name, start_step=self.step) if self.dist.is_main else NullLogger()
        self._stop_requested = False
        self._last_saved = time.monotonic()

    def _prepare_run_dir(self, resuming: bool) -> None:
        """Rank 0 only: everything this run writes goes through it."""
        cfg = self.cfg
        if cfg.eval.video:  # fail now, not after hours of training at the first evaluation
            ensure_writable_dir(video_directory(cfg.eval.video_dir, cfg.task, self.run_name), "eval.video_dir")
        create_run_dir(self.run_dir)
        self._lock = lock_run_dir(self.run_dir)
        write_config(self.run_dir, cfg)
        if resuming:
            dropped = truncate_metrics(self.run_dir, self.step)
            if dropped:
                print(f"resume: dropped {dropped} metrics rows logged after the checkpoint (step {self.step:,})", flush=True)

    def _on_main_then_share(self, action) -> None:
        """Run `action` on rank 0; if it fails with a UserError, every rank raises it (no rank is left
        waiting in a collective for a rank that has already given up)."""
        message = None
        if self.dist.is_main:
            try:
                action()
            except UserError as exc:
                message = str(exc)
                if not self.dist.enabled:
                    raise
        message = self.dist.broadcast_object(message)
        if message is not None:
            raise UserError(message)

    def _check_same_config_on_all_ranks(self) -> None:
        if not self.dist.enabled:
            return
        mine = OmegaConf.to_container(self.cfg, resolve=True)
        mine.pop("run_dir", None)  # the default name holds a timestamp; rank 0's is used
        digest = hashlib.sha256(json.dumps(mine, sort_keys=True).encode()).hexdigest()
        digests = self.dist.all_gather_object(digest)
        different = [rank for rank, d in enumerate(digests) if d != digests[0]]
        if different:
            raise UserError(f"ranks {different} were started with a config different from rank 0's; launch every rank with the same arguments")

    # ----------------------------------------------------------------------------------------
    def train(self, max_updates: int | None = None) -> dict[str, Any]:
        """Train to total_steps. Stops early, with a checkpoint, after `max_updates` updates of this
        call or on SIGINT/SIGTERM (a second SIGINT stops at once)."""
        cfg = self.cfg
        steps_per_update = cfg.env.n_envs * cfg.ppo.rollout_steps * self.dist.world_size
        next_eval = self._next_multiple(cfg.eval.every_steps)
        next_checkpoint = self._next_multiple(cfg.checkpoint.every_steps)
        verb = "resuming" if self.step else "training"
        ranks = f" on {self.dist.world_size} ranks" if self.dist.enabled else ""
        if self.dist.is_main:
            cores = usable_cores()
            print(f"{verb} {cfg.task} ({cfg.env.id}){ranks} at step {self.step:,} of {cfg.total_steps:,}, "
                  f"{cores} core{'s' if cores > 1 else ''} -> {self.run_dir}", flush=True)
        final: dict[str, Any] = {}
        updates_this_call = 0
        previous_handlers = self._install_signal_handlers()
        try:
            while self.step < cfg.total_steps:
                started = time.perf_counter()
                lr = scheduled_learning_rate(
                    cfg.ppo.lr_schedule, cfg.ppo.learning_rate, self.optimizer.param_groups[0]["lr"], self.step, cfg.total_steps
                )
                set_learning_rate(self.optimizer, lr)

                torch.set_num_threads(self.collect_threads)
                episodes = self._collect_rollout()
                torch.set_num_threads(self.update_threads)
                self._record_episodes(episodes)
                batch = self._build_batch()
                stats = ppo_update(self.policy, self.optimizer, batch, cfg.ppo, self.generator, self.dist)
                stats["explained_variance"] = explained_variance(batch.values, batch.returns)
                stats = self._mean_over_ranks(stats)
                check_finite_parameters(self.policy, self.update + 1)
                if cfg.ppo.lr_schedule == "adaptive":
                    set_learning_rate(self.optimizer, adapt_learning_rate(lr, stats["approx_kl"], cfg.ppo.target_kl))

                self.step += steps_per_update
                self.update += 1
                updates_this_call += 1
                row = self._metrics_row(stats, lr, steps_per_update, time.perf_counter() - started)
                finished = self.step >= cfg.total_steps
                if finished or (next_eval is not None and self.step >= next_eval):
                    if self.dist.is_main:
                        final = self._evaluate()  # the last update always gets one
                        row.update(final)
                    next_eval = self._next_multiple(cfg.eval.every_steps)
                self.logger.log(row)  # before any checkpoint of this step, so a resume finds its row
                self.logger.progress(row, self.update, force=finished)

                periodic = next_checkpoint is not None and self.step >= next_checkpoint
                if periodic:
                    next_checkpoint = self._next_multiple(cfg.checkpoint.every_steps)
                # Decisions every rank must take together (a signal may reach one rank only).
                flags = self.dist.all_reduce(torch.tensor([
                    float(self._stop_requested or (max_updates is not None and updates_this_call >= max_updates)),
                    float(time.monotonic() - self._last_saved >= cfg.checkpoint.save_last_seconds),
                ]), "max")
                stopping, save_due = bool(flags[0]), bool(flags[1])
                if periodic or finished or stopping or save_due:
                    self._save_checkpoints(periodic=periodic)
                if stopping and not finished:
                    if self.dist.is_main:
                        print(f"stopped at step {self.step:,}; checkpoint saved. Resume with:\n  {self._resume_command()}", flush=True)
                    return final

            if self.dist.is_main:
                if updates_this_call == 0:
                    print(f"run already at step {self.step:,} >= total_steps={cfg.total_steps:,}; pass total_steps=N to train longer", flush=True)
                else:
                    print(f"done: eval return {final.get('eval_return', float('nan')):.1f} +- {final.get('eval_return_std', float('nan')):.1f}"
                          f"; run saved in {self.run_dir}", flush=True)
            return final
        finally:
            self._restore_signal_handlers(previous_handlers)
            self.close()

    def _resume_command(self) -> str:
        launcher = f"torchrun --nproc_per_node={self.dist.world_size} -m" if self.dist.enabled else "python -m"
        return f"{launcher} ppo_control.train resume={self.run_dir}"

    def _install_signal_handlers(self) -> dict[int, Any]:
        """SIGINT/SIGTERM ask the loop to finish the current update and checkpoint. A second SIGINT
        raises KeyboardInterrupt at once; the last checkpoint on disk stays valid (atomic writes)."""
        if threading.current_thread() is not threading.main_thread():
            return {}

        def request_stop(signum, frame):
            if self._stop_requested and signum == signal.SIGINT:
                raise KeyboardInterrupt
            self._stop_requested = True
            print(f"\n{signal.Signals(signum).name}: finishing this update, then saving a checkpoint "
                  "(Ctrl-C again to stop at once)", flush=True)

        return {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}

    @staticmethod
    def _restore_signal_handlers(previous: dict[int, Any]) -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

    # ----------------------------------------------------------------------------------------
    def _collect_rollout(self) -> tuple[list[float], list[int]]:
        """Step the envs for rollout_steps, storing observations, actions, rewards and episode ends;
        returns the (returns, lengths) of the episodes that ended.

        Per step only the actor runs (the sampled action is all the envs need); the log-probs and
        values of the rollout are computed in one batch by `_build_batch`. The normalizer is frozen
        during collection: every observation of the batch, including the final observations that
        truncated steps bootstrap from, sees the same statistics.
        """
        storage, policy, device = self.storage, self.policy, self.device
        storage.truncation_values.zero_()
        returns: list[float] = []
        lengths: list[int] = []
        with torch.inference_mode():
            for t in range(storage.num_steps):
                obs = torch.from_numpy(self.obs).to(device)
                action = policy.sample_action(obs)
                result = self.envs.step(action.cpu().numpy())
                if not _all_finite(result):
                    self._report_nonfinite_env(result, t)

                storage.observations[t] = obs
                storage.actions[t] = action
                storage.rewards_np[t] = self.reward_scaler(result.reward, result.terminated | result.truncated)
                storage.terminated_np[t] = result.terminated
                storage.truncated_np[t] = result.truncated
                if result.truncated.any():
                    index = np.flatnonzero(result.truncated)
                    final_obs = torch.from_numpy(result.final_obs[index]).to(device)
                    storage.truncation_values[t, torch.from_numpy(index).to(device)] = policy.value(policy.normalize(final_obs))
                if len(result.episode_returns):
                    returns.extend(result.episode_returns.tolist())
                    lengths.extend(result.episode_lengths.tolist())
                self.obs = result.obs
            self.last_values = policy.value(policy.normalize(torch.from_numpy(self.obs).to(device)))
        return returns, lengths

    def _record_episodes(self, episodes: tuple[list[float], list[int]]) -> None:
        """Episode statistics over all ranks, identical everywhere (rank order)."""
        for returns, lengths in self.dist.all_gather_object(episodes):
            self.recent_returns.extend(returns)
            self.recent_lengths.extend(lengths)
            self.episodes += len(returns)

    def _mean_over_ranks(self, stats: dict[str, Any]) -> dict[str, Any]:
        """Diagnostics averaged over ranks (the KL already is: it is reduced every minibatch)."""
        if not self.dist.enabled:
            return stats
        keys = [k for k, v in stats.items() if isinstance(v, float) and k != "approx_kl"]
        values = self.dist.all_reduce(torch.tensor([stats[k] for k in keys], dtype=torch.float64), "mean")
        return {**stats, **{k: float(v) for k, v in zip(keys, values)}}

    def _report_nonfinite_env(self, result, t: int) -> None:
        bad_obs = ~np.isfinite(result.obs).all(axis=1) | ~np.isfinite(result.final_obs).all(axis=1)
        bad_reward = ~np.isfinite(result.reward)
        what = "observation" if bad_obs.any() else "reward"
        env_index = int(np.flatnonzero(bad_obs | bad_reward)[0])
        step = self.step + (t + 1) * self.envs.num_envs * self.dist.world_size
        rank = f" on rank {self.dist.rank}" if self.dist.enabled else ""
        raise NonFiniteError(
            f"non-finite {what} from sub-env {env_index}{rank} of {self.cfg.env.id} at step ~{step:,} (update {self.update + 1}); "
            "training stopped, the last checkpoint is kept"
        )

    def _build_batch(self) -> Batch:
        """The rollout's log-probs and values in one batched pass, GAE, then flatten. Normalizes with
        the statistics used while acting, then updates them."""
        cfg, storage = self.cfg, self.storage
        raw_obs = storage.observations.view(-1, self.info.obs_dim)
        actions = storage.actions.view(-1, self.info.action_dim)
        with torch.no_grad():
            norm_obs = self.policy.normalize(raw_obs)
            log_probs, _, values = self.policy.evaluate_actions(norm_obs, actions)
        advantages, returns = storage.compute_advantages(
            values.view(storage.num_steps, storage.num_envs), self.last_values, cfg.ppo.gamma, cfg.ppo.gae_lambda
        )
        if cfg.normalize.obs:  # over the union of every rank's observations: all ranks normalize alike
            self.policy.obs_normalizer.merge(*self.dist.global_moments(raw_obs))
        return Batch(
            obs=norm_obs,
            actions=actions,
            log_probs=log_probs,
            values=values,
            advantages=advantages.view(-1),
            returns=returns.view(-1),
        )

    def _metrics_row(self, stats: dict[str, Any], lr: float, steps: int, seconds: float) -> dict[str, Any]:
        return {
            "step": self.step,
            "update": self.update,
            "episode_return": float(np.mean(self.recent_returns)) if self.recent_returns else None,
            "episode_length": float(np.mean(self.recent_lengths)) if self.recent_lengths else None,
            "episodes": self.episodes,
            "approx_kl": stats["approx_kl"],
            "clip_fraction": stats["clip_fraction"],
            "entropy": stats["entropy"],
            "explained_variance": stats["explained_variance"],
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

    def _rank_state(self) -> dict[str, Any]:
        """What differs between ranks: their RNGs, envs, and reward scalers."""
        env_state = self.envs.get_state()
        return {
            "rng": capture_rng_state(self.generator),
            "obs": torch.from_numpy(self.obs.copy()),
            "env_state": None if env_state is None else to_tensors(env_state),
            "reward_scaler": self.reward_scaler.state_dict(),
        }

    def checkpoint_state(self) -> dict[str, Any]:
        """The whole run. Collective: every rank must call it at the same point. The top level holds
        rank 0's own state, so a single process resumes from a multi-rank checkpoint too."""
        ranks = self.dist.all_gather_object(self._rank_state())
        return {
            "config": OmegaConf.to_container(self.cfg, resolve=True),
            "policy": self.policy.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "step": self.step,
            "update": self.update,
            "episodes": self.episodes,
            "recent_returns": list(self.recent_returns),
            "recent_lengths": list(self.recent_lengths),
            "env_info": env_info_to_dict(self.info),
            "world_size": self.dist.world_size,
            **ranks[0],
            **({"ranks": ranks} if self.dist.enabled else {}),
        }

    def _restore(self, state: dict[str, Any]) -> None:
        """Load a checkpoint's training state into this freshly built trainer."""
        saved = state["env_info"]
        if (saved["obs_dim"], saved["action_dim"]) != (self.info.obs_dim, self.info.action_dim):
            raise UserError(
                f"checkpoint was trained with obs_dim={saved['obs_dim']}, action_dim={saved['action_dim']} but "
                f"{self.cfg.env.id} has obs_dim={self.info.obs_dim}, action_dim={self.info.action_dim}"
            )
        self.policy.load_state_dict(state["policy"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.step, self.update, self.episodes = int(state["step"]), int(state["update"]), int(state["episodes"])
        self.recent_returns.extend(state["recent_returns"])
        self.recent_lengths.extend(state["recent_lengths"])

        saved_world = int(state.get("world_size", 1))
        if saved_world == self.dist.world_size:
            mine = state["ranks"][self.dist.rank] if self.dist.enabled else state
        else:
            mine = None
            if self.dist.is_main:
                print(f"resume: the checkpoint comes from {saved_world} rank(s), this run has {self.dist.world_size}: "
                      "every sub-env starts a new episode, RNGs are reseeded and rank 0's reward scale is used", flush=True)
        if mine is None:
            self.reward_scaler.load_state_dict(state["reward_scaler"])
            torch.manual_seed(self.cfg.seed + RANK_SEED_STRIDE * self.dist.rank + self.update)
            self.obs = self.envs.reset(self.env_seed + self.update)
            return
        self.reward_scaler.load_state_dict(mine["reward_scaler"])
        restore_rng_state(mine["rng"], self.generator)
        if mine.get("env_state") is not None:
            self.envs.set_state(to_numpy(mine["env_state"]))
            self.obs = mine["obs"].numpy().copy()
        else:
            print("resume: this env backend cannot save its state; every sub-env starts a new episode "
                  "(the resumed run is not bit-identical to an uninterrupted one)", flush=True)
            self.obs = self.envs.reset(self.env_seed + self.update)

    def _save_checkpoints(self, periodic: bool) -> None:
        state = self.checkpoint_state()  # collective: every rank takes part
        if not self.dist.is_main:
            return
        directory = self.run_dir / CHECKPOINT_DIR
        if periodic and self.cfg.checkpoint.keep > 0:
            save_checkpoint(directory / periodic_checkpoint_name(self.step), state)
            prune_periodic_checkpoints(directory, self.cfg.checkpoint.keep)
        save_checkpoint(directory / LAST_CHECKPOINT, state)
        self._last_saved = time.monotonic()

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
        if self._lock is not None:
            self._lock.close()  # releases the run-directory lock
        self.dist.close()
