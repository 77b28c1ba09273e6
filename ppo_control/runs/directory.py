"""The run directory: where a run lives, creating it safely, and loading a finished one back."""

from __future__ import annotations

import gzip
import json
import tempfile
import zlib
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import numpy as np
from omegaconf import DictConfig, OmegaConf

from ppo_control.config import saved_run_config
from ppo_control.config.errors import UserError
from ppo_control.envs import EnvInfo
from ppo_control.rl.policy import ActorCritic, build_policy
from ppo_control.runs.checkpoint import (
    CheckpointError,
    atomic_write,
    load_checkpoint,
    periodic_checkpoint_name,
    prune_periodic_checkpoints,
    save_checkpoint,
)
from ppo_control.runs.layout import (
    ARCHIVED_METRICS_FILE,
    BEST_CHECKPOINT,
    CHECKPOINT_DIR,
    CONFIG_FILE,
    LAST_CHECKPOINT,
    METRICS_FILE,
    checkpoint_to_load,
    resume_candidates,
)
from ppo_control.runs.locks import RUN_LOCK_FILE, try_lock


def default_run_dir(cfg: DictConfig) -> Path:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / str(cfg.task) / f"{stamp}-s{cfg.seed}"


def claim_run_dir(cfg: DictConfig) -> Path:
    """Decide the run directory, refusing one that already holds anything (checked before any work)."""
    run_dir = Path(cfg.run_dir) if cfg.run_dir else default_run_dir(cfg)
    if run_dir.exists() and (not run_dir.is_dir() or any(run_dir.iterdir())):
        raise UserError(
            f"run_dir '{run_dir}' already exists and is not empty; to continue that run use resume={run_dir}, "
            "otherwise choose another run_dir (nothing was changed)"
        )
    cfg.run_dir = str(run_dir)
    return run_dir


def ensure_writable_dir(directory: Path, what: str) -> Path:
    """Create `directory` if needed and prove it takes files, or say which setting to change."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        probe = tempfile.NamedTemporaryFile(dir=directory, prefix=".write-test-")
        probe.close()
    except OSError as exc:
        raise UserError(f"{what}: cannot write to '{directory}' ({exc.strerror or exc}); choose a writable location") from None
    return directory


def create_run_dir(run_dir: Path) -> Path:
    ensure_writable_dir(run_dir / CHECKPOINT_DIR, "run_dir")
    return run_dir


def write_config(run_dir: Path, cfg: DictConfig) -> None:
    """Write the fully resolved config (atomically: a resume rewrites it with the new total_steps)."""
    atomic_write(run_dir / CONFIG_FILE, lambda tmp: OmegaConf.save(cfg, tmp, resolve=True))


def lock_run_dir(run_dir: Path) -> IO[str]:
    """Hold an exclusive lock on the run directory for as long as the returned file stays open:
    two processes training into one run would interleave checkpoints and metrics."""
    handle, holder = try_lock(Path(run_dir) / RUN_LOCK_FILE)
    if handle is None:
        raise UserError(f"run_dir '{run_dir}' is in use by a training process ({holder}); wait for it or stop it first")
    return handle


class RunDirectory:
    """The training process's hold on its run directory (rank 0 only): created and locked by
    `open`, the config written, checkpoints saved through it, the lock released by `close`."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._lock: IO[str] | None = None

    @property
    def name(self) -> str:
        return self.path.name

    def open(self, cfg: DictConfig, resumed_step: int | None = None) -> None:
        """Create and lock the directory, write the config; on resume, unpack archived metrics and
        drop the rows logged after the checkpoint being continued (`resumed_step`)."""
        create_run_dir(self.path)
        self._lock = lock_run_dir(self.path)
        if resumed_step is not None and unarchive_metrics(self.path):
            print(f"resume: {ARCHIVED_METRICS_FILE} unpacked to {METRICS_FILE}, which the resumed run appends to", flush=True)
        write_config(self.path, cfg)
        if resumed_step is not None:
            dropped = truncate_metrics(self.path, resumed_step)
            if dropped:
                print(f"resume: dropped {dropped} metrics rows logged after the checkpoint (step {resumed_step:,})", flush=True)

    def save_checkpoint(self, state: dict[str, Any], step: int, periodic: bool, keep: int, best: bool = False) -> None:
        """last.pt always; with `periodic`, also step_<N>.pt, keeping the newest `keep` of those;
        with `best`, also best.pt (each written atomically)."""
        directory = self.path / CHECKPOINT_DIR
        if periodic and keep > 0:
            save_checkpoint(directory / periodic_checkpoint_name(step), state)
            prune_periodic_checkpoints(directory, keep)
        if best:
            save_checkpoint(directory / BEST_CHECKPOINT, state)
        save_checkpoint(directory / LAST_CHECKPOINT, state)

    def close(self) -> None:
        if self._lock is not None:
            self._lock.close()  # releases the lock
            self._lock = None


def env_info_to_dict(info: EnvInfo) -> dict[str, Any]:
    return {
        "obs_dim": info.obs_dim,
        "action_dim": info.action_dim,
        "action_low": info.action_low.tolist(),
        "action_high": info.action_high.tolist(),
        "max_episode_steps": info.max_episode_steps,
        "groups": [[name, size] for name, size in info.groups],
    }


def env_info_from_dict(data: dict[str, Any]) -> EnvInfo:
    return EnvInfo(
        obs_dim=int(data["obs_dim"]),
        action_dim=int(data["action_dim"]),
        action_low=np.asarray(data["action_low"], dtype=np.float32),
        action_high=np.asarray(data["action_high"], dtype=np.float32),
        max_episode_steps=data["max_episode_steps"],
        groups=tuple((str(name), int(size)) for name, size in data.get("groups", ())),  # older runs: one group
    )


@dataclass
class LoadedRun:
    run_dir: Path
    checkpoint_path: Path
    cfg: DictConfig
    state: dict[str, Any]
    policy: ActorCritic
    env_info: EnvInfo

    @property
    def name(self) -> str:
        return self.run_dir.name


def load_run(run_dir: str | Path, checkpoint: str | Path | None = None) -> LoadedRun:
    """Load a run's config and a checkpoint (default checkpoints/last.pt) into a frozen policy."""
    run_dir = Path(run_dir)
    path = checkpoint_to_load(run_dir, checkpoint)
    state = load_checkpoint(path)
    try:
        cfg = saved_run_config(state["config"])
        info = env_info_from_dict(state["env_info"])
        policy = build_policy(cfg.policy, cfg.normalize, info)
        policy.load_state_dict(state["policy"])
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(f"checkpoint '{path}' does not match its own config ({first})") from None
    policy.eval()
    for parameter in policy.parameters():
        parameter.requires_grad_(False)
    return LoadedRun(run_dir, path, cfg, state, policy, info)


def unarchive_metrics(run_dir: Path) -> bool:
    """A run archived with its rows gzipped (metrics.jsonl.gz) and then resumed: unpack them to
    metrics.jsonl, which training appends to, so the history stays one file. Whether it did."""
    archived, live = run_dir / ARCHIVED_METRICS_FILE, run_dir / METRICS_FILE
    if live.exists() or not archived.is_file():
        return False
    try:
        rows = gzip.decompress(archived.read_bytes())
    except (OSError, EOFError, zlib.error) as exc:
        raise UserError(f"cannot resume: '{archived}' does not unpack ({exc}); restore it or remove it") from None
    atomic_write(live, lambda tmp: tmp.write_bytes(rows))
    archived.unlink()
    return True


def truncate_metrics(run_dir: Path, step: int) -> int:
    """Drop metrics rows past `step` (work lost with a killed process) so a resumed run's rows
    follow on without duplicates. Returns how many rows were dropped; rewrites only if any."""
    path = run_dir / METRICS_FILE
    if not path.is_file():
        return 0
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    keep = []
    for line in lines:
        try:
            row = json.loads(line)
        except json.JSONDecodeError:  # a line cut short by a kill
            continue
        if row.get("step", 0) <= step:
            keep.append(line if line.endswith("\n") else line + "\n")
    if len(keep) == len(lines) and all(line.endswith("\n") for line in lines):
        return 0
    atomic_write(path, lambda tmp: tmp.write_text("".join(keep), encoding="utf-8"))
    return len(lines) - len(keep)


def find_resume_checkpoint(run_dir: Path, candidates: list[Path] | None = None) -> tuple[Path, dict[str, Any]]:
    """The newest checkpoint of a run that loads: last.pt, else periodic ones, newest first
    (`candidates`: resume_candidates(run_dir), when the caller has already listed them)."""
    candidates = resume_candidates(run_dir) if candidates is None else candidates
    problems = []
    for path in candidates:
        try:
            state = load_checkpoint(path)
        except CheckpointError as exc:
            problems.append(str(exc))
            continue
        if problems:
            print(f"resume: skipped unreadable checkpoints ({'; '.join(problems)}); using {path.name}", flush=True)
        return path, state
    raise CheckpointError(f"cannot resume from '{run_dir}': no checkpoint loads ({'; '.join(problems)})")
