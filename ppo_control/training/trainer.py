"""The training loop: collect -> batch -> update -> log -> evaluate -> checkpoint.

The data path lives in its own rooms (collector.py drives the envs, ppo.py turns a rollout into a
batch and updates the policy); the run's files in runs.py and run_state.py. This module wires them
together, decides when to evaluate and checkpoint, and handles stop signals.
"""

from __future__ import annotations

import math
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig

from ppo_control.config.errors import NonFiniteError, UserError
from ppo_control.config.schema import batch_size, minibatch_size
from ppo_control.envs import VecEnv, check_run, make_vec_env, usable_cores
from ppo_control.envs.observations import needs_privileged
from ppo_control.envs.randomization import Randomization
from ppo_control.rendering.video import record_run_videos, video_directory
from ppo_control.rl.device_rollout import DeviceRolloutCollector
from ppo_control.rl.distributed import Distributed, init_distributed
from ppo_control.rl.evaluation import EVAL_SEED_OFFSET, eval_randomization, evaluate_episodes, make_eval_envs
from ppo_control.rl.penalty_curriculum import PenaltyCurriculum, build_penalty_curriculum
from ppo_control.rl.policy import build_policy
from ppo_control.rl.ppo import PPOLearner, explained_variance, prepare_batch
from ppo_control.rl.rollout import NonFiniteEnvOutput, Rollout, RolloutCollector
from ppo_control.rl.symmetry import build_mirror
from ppo_control.runs.checkpoint import load_checkpoint
from ppo_control.runs.directory import RunDirectory, claim_run_dir, ensure_writable_dir
from ppo_control.runs.layout import checkpoint_to_load
from ppo_control.training import run_state
from ppo_control.training.metrics import MetricsLogger, NullLogger
from ppo_control.training.run_state import Progress

RANK_SEED_STRIDE = 7919  # spreads the per-rank action-sampling seeds apart
MULTITHREAD_MINIBATCH = 512  # smaller minibatches update on one thread (see thread_counts)


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise UserError("device=cuda but no CUDA device is available; use device=cpu or device=auto")
    return torch.device(name)


def check_finite_parameters(policy: torch.nn.Module, update: int) -> None:
    for name, tensor in policy.state_dict().items():
        if tensor.is_floating_point() and not torch.isfinite(tensor).all():
            raise NonFiniteError(f"non-finite values in policy '{name}' after update {update}; the last checkpoint is kept")


def metrics_row(progress: Progress, stats: dict[str, Any], log_std_mean: float, steps: int, seconds: float) -> dict[str, Any]:
    """One update's row of metrics.jsonl (and of the console, TensorBoard and wandb)."""
    keys = (
        "approx_kl",
        "clip_fraction",
        "entropy",
        "explained_variance",
        "grad_norm",
        "policy_loss",
        "value_loss",
        "learning_rate",
        "ent_coef",
        "gamma",
        "gae_lambda",
        "epochs_run",
        "kl_early_stop",
    )
    return {
        "step": progress.step,
        "update": progress.update,
        "episode_return": progress.mean_return(),
        "episode_length": progress.mean_length(),
        "episodes": progress.episodes,
        **{key: stats[key] for key in keys},
        "log_std_mean": log_std_mean,
        "sps": steps / seconds if seconds > 0 else None,
        "steps_this_update": steps,
        "time": time.time(),
    }


class StopSignals:
    """SIGINT/SIGTERM ask the loop to finish the current update and checkpoint (`requested`). A
    second SIGINT raises KeyboardInterrupt at once; the last checkpoint on disk stays valid (atomic
    writes). Installed only in the main thread (signal handlers cannot be set elsewhere)."""

    def __init__(self, say: Callable[[str], None] = print):
        self.requested = False
        self._say = say  # the console line, through the logger so that a progress bar stays intact
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            self._previous = {sig: signal.signal(sig, self._request) for sig in (signal.SIGINT, signal.SIGTERM)}
        return self

    def __exit__(self, *exc_info) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _request(self, signum, frame) -> None:
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = True
        self._say(f"{signal.Signals(signum).name}: finishing this update, then saving a checkpoint (Ctrl-C again to stop at once)")


def thread_counts(torch_threads: int, minibatch: int) -> tuple[int, int]:
    """(torch threads while collecting, while updating). torch_threads=0: one thread while
    collecting (the env workers have the cores then; one small forward pass gains nothing from more),
    every core for the update unless its minibatches are small (small updates ran faster on one
    thread; docs/training.md, Speed)."""
    collect = torch_threads or 1
    update = torch_threads or (1 if minibatch < MULTITHREAD_MINIBATCH else usable_cores())
    return collect, update


def make_collector(
    cfg: DictConfig, envs: VecEnv, policy: torch.nn.Module, device: torch.device, curriculum: PenaltyCurriculum | None
) -> RolloutCollector | DeviceRolloutCollector:
    """The rollout collector of `envs`: envs that simulate on the training device get the collector
    that keeps the rollout there (build_penalty_curriculum refuses them a curriculum)."""
    ppo, normalize = cfg.ppo, cfg.normalize
    settings = (ppo.rollout_steps, ppo.gamma, normalize.reward_clip, normalize.reward, device, cfg.policy.rnn_sequence_length)
    if envs.capabilities.device_resident:
        return DeviceRolloutCollector(envs, policy, *settings)
    collector = RolloutCollector(envs, policy, *settings)
    if curriculum is not None:
        collector.training_reward = curriculum.reward
    return collector


def next_multiple(step: int, every: int) -> int | None:
    """The first multiple of `every` strictly after `step` (None when disabled)."""
    if every <= 0:
        return None
    return (step // every + 1) * every


def decide_together(dist: Distributed, stop: bool, save_due: bool, evaluated: float | None) -> tuple[bool, bool, float | None]:
    """(stop now, refresh last.pt now, this update's evaluation return), the same on every rank of
    `dist` (a signal may reach one rank only; rank 0 alone evaluates): each is the ranks' maximum."""
    flags = dist.all_reduce(
        torch.tensor([float(stop), float(save_due), -math.inf if evaluated is None else evaluated], dtype=torch.float64), "max"
    )
    return bool(flags[0]), bool(flags[1]), None if flags[2] == -math.inf else float(flags[2])


def load_initial_policy(init_from: str) -> dict[str, Any]:
    """The checkpoint `init_from` names (a run directory's last.pt, or a file), read before anything
    of the new run is claimed or built."""
    path = Path(init_from)
    return load_checkpoint(checkpoint_to_load(path) if path.is_dir() else path)


def start_from(policy: torch.nn.Module, state: dict[str, Any], info, env_id: str, init_from: str) -> None:
    """Fine-tuning: the new run's policy takes the checkpoint's weights and normalizer statistics,
    or the run is refused in one line when the two policies do not have the same shape."""
    run_state.check_compatible(state, info, env_id)
    try:
        policy.load_state_dict(state["policy"])
    except RuntimeError as exc:
        lines = str(exc).strip().splitlines()
        first = lines[1].strip() if len(lines) > 1 else lines[0]
        raise UserError(f"init_from={init_from}: its policy is not this run's shape (policy.* settings differ: {first})") from None


class Trainer:
    """Owns the envs, the policy, the learner and the loop for one training run.

    `resume_state` is a loaded checkpoint: the run continues in its own directory exactly where the
    checkpoint left it (counters, optimizer, normalizer, reward scaler, RNGs, and the envs' episodes).
    """

    def __init__(self, cfg: DictConfig, resume_state: dict[str, Any] | None = None):
        self.cfg = cfg
        self.device = resolve_device(cfg.device)
        self.dist = init_distributed(self.device.type, cfg.dist_timeout)
        try:
            self._build(cfg, resume_state)
        except BaseException:
            self.dist.close()  # leave the process group before exiting: gloo aborts a process that does not
            raise

    def _build(self, cfg: DictConfig, resume_state: dict[str, Any] | None) -> None:
        if self.dist.enabled and self.device.type == "cuda":
            self.device = torch.device("cuda", self.dist.local_rank)  # one GPU per local rank
        self.dist.check_same_config(cfg)
        check_run(cfg)  # before anything is claimed or built
        self.curriculum = build_penalty_curriculum(cfg)
        initial = load_initial_policy(cfg.init_from) if cfg.init_from and resume_state is None else None
        if resume_state is None:
            self.dist.on_main_then_share(lambda: claim_run_dir(cfg))
            cfg.run_dir = self.dist.broadcast_object(cfg.run_dir)  # rank 0's timestamp names the run
        self.collect_threads, self.update_threads = thread_counts(int(cfg.torch_threads), minibatch_size(cfg))
        torch.manual_seed(cfg.seed)  # identical initial weights on every rank
        np.random.seed(cfg.seed)
        self.generator = torch.Generator().manual_seed(cfg.seed + self.dist.rank)  # minibatch shuffling
        self.env_seed = cfg.seed + self.dist.rank * cfg.env.n_envs  # sub-env i of rank r: seed + r*n_envs + i

        self.envs = make_vec_env(
            cfg.env,
            randomization=Randomization.from_config(cfg.randomize),
            privileged=needs_privileged(cfg.policy),
            device=str(self.device),
        )
        self.info = self.envs.info
        # One thread while initializing: the orthogonal init's QR rounds differently with more, and a
        # seed should give the same weights on any machine and any torch_threads.
        torch.set_num_threads(1)
        self.policy = build_policy(cfg.policy, cfg.normalize, self.info).to(self.device)
        if initial is not None:
            start_from(self.policy, initial, self.info, str(cfg.env.id), str(cfg.init_from))
        self.dist.broadcast_parameters(self.policy)
        if self.dist.enabled:
            torch.manual_seed(cfg.seed + RANK_SEED_STRIDE * self.dist.rank)  # each rank samples its own actions
        self.mirror = build_mirror(cfg, self.info, self.device)
        self.learner = PPOLearner(
            self.policy, cfg.ppo, cfg.total_steps, self.generator, self.dist, compiled=bool(cfg.ppo.compile), mirror=self.mirror
        )
        self.collector = make_collector(cfg, self.envs, self.policy, self.device, self.curriculum)
        self.progress = Progress()
        self.eval_envs = None
        self.eval_randomization = eval_randomization(cfg.eval, cfg.randomize)
        self.collector.reset(self.env_seed)
        if resume_state is not None:
            self._restore(resume_state)

        self.run = RunDirectory(cfg.run_dir)
        self.dist.on_main_then_share(lambda: self._open_run_dir(resume_state is not None))
        start = self.progress.step
        self.logger = MetricsLogger(self.run.path, cfg, self.run.name, start_step=start) if self.dist.is_main else NullLogger()
        self.stop = StopSignals(self.logger.write)
        self._last_saved = time.monotonic()

    @property
    def optimizer(self) -> torch.optim.Optimizer:
        return self.learner.optimizer

    def _open_run_dir(self, resuming: bool) -> None:
        """Rank 0 only: everything this run writes goes through it."""
        if self.cfg.eval.video:  # fail now, not after hours of training at the first evaluation
            ensure_writable_dir(video_directory(self.cfg.eval.video_dir, self.cfg.task, self.run.name), "eval.video_dir")
        self.run.open(self.cfg, resumed_step=self.progress.step if resuming else None)

    # ----------------------------------------------------------------------------------------
    def train(self, max_updates: int | None = None) -> dict[str, Any]:
        """Train to total_steps. Stops early, with a checkpoint, after `max_updates` updates of this
        call or on SIGINT/SIGTERM (a second SIGINT stops at once). Returns the last evaluation."""
        with self.stop:  # until the envs and files are closed: a second Ctrl-C is handled throughout
            try:
                return self._loop(max_updates)
            finally:
                self.close()

    def _loop(self, max_updates: int | None) -> dict[str, Any]:
        cfg, progress = self.cfg, self.progress
        next_eval = next_multiple(progress.step, cfg.eval.every_steps)
        next_checkpoint = next_multiple(progress.step, cfg.checkpoint.every_steps)
        self._announce()
        final: dict[str, Any] = {}
        updates_this_call = 0
        while progress.step < cfg.total_steps:
            row = self.train_one_update()
            updates_this_call += 1
            finished = progress.step >= cfg.total_steps
            evaluated = None
            if finished or (next_eval is not None and progress.step >= next_eval):
                if self.dist.is_main:
                    final = self.evaluate()  # the last update always gets one
                    row.update(final)
                    evaluated = final["eval_return"]
                next_eval = next_multiple(progress.step, cfg.eval.every_steps)
            periodic = next_checkpoint is not None and progress.step >= next_checkpoint
            if periodic:
                next_checkpoint = next_multiple(progress.step, cfg.checkpoint.every_steps)
            stop = self.stop.requested or (max_updates is not None and updates_this_call >= max_updates)
            save_due = time.monotonic() - self._last_saved >= cfg.checkpoint.save_last_seconds
            stopping, save_due, evaluated = decide_together(self.dist, stop, save_due, evaluated)
            best = evaluated is not None and progress.record_evaluation(evaluated)  # before the state is captured
            saving = periodic or finished or stopping or save_due or best
            # The state is captured before the row is logged (capturing reads the envs, which can fail:
            # then neither is recorded), and written after it, so a resume finds its row.
            state = self.checkpoint_state() if saving else None
            self.logger.log(row)
            self.logger.progress(row, progress.update, force=finished)
            if saving:
                self.save_checkpoint(periodic=periodic, state=state, best=best)
            if stopping and not finished:
                self._say(f"stopped at step {progress.step:,}; checkpoint saved. Resume with:\n  {self._resume_command()}")
                return final
        if updates_this_call == 0:
            self._say(f"run already at step {progress.step:,} >= total_steps={cfg.total_steps:,}; pass total_steps=N to train longer")
        else:
            self._say(
                f"done: eval return {final.get('eval_return', float('nan')):.1f} +- "
                f"{final.get('eval_return_std', float('nan')):.1f}; run saved in {self.run.path}"
            )
            if progress.best_step is not None and progress.best_step != progress.step:
                self._say(f"best evaluation: {progress.best_eval_return:.1f} at step {progress.best_step:,} (checkpoint=best)")
        return final

    def train_one_update(self) -> dict[str, Any]:
        """Collect one rollout, update the policy and the normalizer; returns the update's metrics row."""
        started = time.perf_counter()
        torch.set_num_threads(self.collect_threads)
        if self.curriculum is not None:
            self.curriculum.at_step(self.progress.step)
        rollout = self._collect()
        torch.set_num_threads(self.update_threads)
        for returns, lengths in self.dist.all_gather_object((rollout.episode_returns, rollout.episode_lengths)):
            self.progress.record_episodes(returns, lengths)  # every rank's episodes, in rank order
        gamma, gae_lambda = self.learner.gamma(self.progress.step), self.learner.gae_lambda(self.progress.step)
        batch = prepare_batch(self.policy, rollout.storage, rollout.last_values, gamma, gae_lambda, self.mirror)
        if self.cfg.normalize.obs:  # after the batch is normalized; over every rank's observations, so all ranks agree
            raw_obs = self.policy.current_frame(rollout.storage.observations).reshape(-1, self.info.obs_dim)
            self.policy.obs_normalizer.merge(*self.dist.global_moments(raw_obs))
        stats = self.learner.update(batch, self.progress.step)
        stats["explained_variance"] = explained_variance(batch.values, batch.returns)
        stats["gamma"], stats["gae_lambda"] = gamma, gae_lambda
        # The KL is averaged every minibatch already; the schedules' values are the same on every rank.
        stats = self.dist.mean_stats(stats, exclude=("approx_kl", "learning_rate", "ent_coef", "gamma", "gae_lambda"))
        check_finite_parameters(self.policy, self.progress.update + 1)

        steps = batch_size(self.cfg) * self.dist.world_size
        self.progress.step += steps
        self.progress.update += 1
        log_std = float(self.policy.log_std.detach().mean())
        row = metrics_row(self.progress, stats, log_std, steps, time.perf_counter() - started)
        if self.mirror is not None:
            row["mirror_loss"] = stats["mirror_loss"]
        if self.curriculum is not None:
            row["penalty_factor"] = self.curriculum.factor
        row.update(self.dist.mean_stats(rollout.diagnostics))  # reward terms, tracking error: every rank's mean
        return row

    def _collect(self) -> Rollout:
        try:
            return self.collector.collect()
        except NonFiniteEnvOutput as exc:
            rank = f" on rank {self.dist.rank}" if self.dist.enabled else ""
            step = self.progress.step + exc.rollout_step * self.envs.num_envs * self.dist.world_size
            raise NonFiniteError(
                f"non-finite {exc.what} from sub-env {exc.env_index}{rank} of {self.cfg.env.id} at step ~{step:,} "
                f"(update {self.progress.update + 1}); training stopped, the last checkpoint is kept"
            ) from None

    def _announce(self) -> None:
        cfg = self.cfg
        verb = "resuming" if self.progress.step else "training"
        ranks = f" on {self.dist.world_size} ranks" if self.dist.enabled else ""
        cores = usable_cores()
        self._say(
            f"{verb} {cfg.task} ({cfg.env.id}){ranks} at step {self.progress.step:,} of {cfg.total_steps:,}, "
            f"{cores} core{'s' if cores > 1 else ''} -> {self.run.path}"
        )

    def _say(self, text: str) -> None:
        """A line on rank 0's console (through the logger, so a progress bar is not garbled)."""
        if self.dist.is_main:
            self.logger.write(text)

    def _resume_command(self) -> str:
        launcher = f"torchrun --nproc_per_node={self.dist.world_size} -m" if self.dist.enabled else "python -m"
        return f"{launcher} ppo_control.train resume={self.run.path}"

    def evaluate(self) -> dict[str, Any]:
        """Evaluate the deterministic policy on the run's own evaluation seeds (and record videos)."""
        cfg = self.cfg
        if self.eval_envs is None:
            self.eval_envs = make_eval_envs(
                cfg.env, cfg.eval.episodes, self.eval_randomization, needs_privileged(cfg.policy), str(self.device)
            )
        seed = cfg.seed + EVAL_SEED_OFFSET
        result: dict[str, Any] = evaluate_episodes(self.policy, self.eval_envs, cfg.eval.episodes, seed, self.device).summary()
        if cfg.eval.video:
            result["videos"] = record_run_videos(
                self.policy, cfg, self.run.name, self.progress.step, seed, self.device, self.eval_randomization
            )
        return result

    # --- checkpoints ----------------------------------------------------------------------------
    def checkpoint_state(self) -> dict[str, Any]:
        """The whole run. Collective: every rank must call it at the same point."""
        own = run_state.rank_state(self.generator, self.collector)
        return run_state.capture(self.cfg, self.policy, self.optimizer, self.progress, self.info, self.dist, own)

    def save_checkpoint(self, periodic: bool = False, state: dict[str, Any] | None = None, best: bool = False) -> None:
        """Write `state` (default: captured now, a collective every rank takes part in) as last.pt,
        as a periodic checkpoint with `periodic`, and as best.pt with `best`."""
        state = self.checkpoint_state() if state is None else state
        if self.dist.is_main:
            self.run.save_checkpoint(state, self.progress.step, periodic, self.cfg.checkpoint.keep, best)
        self._last_saved = time.monotonic()

    def _restore(self, state: dict[str, Any]) -> None:
        """Load a checkpoint's training state into this freshly built trainer."""
        run_state.check_compatible(state, self.info, str(self.cfg.env.id))
        self.policy.load_state_dict(state["policy"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.progress.load_state_dict(state)
        outcome = run_state.restore_rank_state(state, self.dist, self.generator, self.collector)
        if outcome == "other_world_size":
            torch.manual_seed(self.cfg.seed + RANK_SEED_STRIDE * self.dist.rank + self.progress.update)
        if outcome != "exact":
            self.collector.reset(self.env_seed + self.progress.update)

    def close(self) -> None:
        self.logger.close()
        self.envs.close()
        if self.eval_envs is not None:
            self.eval_envs.close()
        self.run.close()
        self.dist.close()
