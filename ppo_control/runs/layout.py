"""Where a run directory keeps its files, and which checkpoint a command will read.

Only pathlib here: the commands resolve and check a run's paths before they import torch, so a
mistyped run directory or checkpoint name is refused at once."""

from __future__ import annotations

from pathlib import Path

from ppo_control.config.errors import CheckpointError, UserError

CONFIG_FILE = "config.yaml"
CHECKPOINT_DIR = "checkpoints"
LAST_CHECKPOINT = "last.pt"
METRICS_FILE = "metrics.jsonl"
ARCHIVED_METRICS_FILE = METRICS_FILE + ".gz"  # a finished run's rows, gzipped to keep result folders small
BEST_CHECKPOINT = "best.pt"  # the best-evaluated policy so far


def checkpoint_to_load(run_dir: str | Path, checkpoint: str | Path | None = None) -> Path:
    """The file `evaluate`/`export` read: checkpoints/last.pt by default; else `checkpoint` as a
    path, or as a name in the run's checkpoints/ ("best" and "last" also without .pt)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UserError(f"run directory '{run_dir}' does not exist")
    if checkpoint is None:
        path = run_dir / CHECKPOINT_DIR / LAST_CHECKPOINT
        if not path.is_file():
            raise CheckpointError(
                f"'{run_dir}' holds no checkpoint ({CHECKPOINT_DIR}/{LAST_CHECKPOINT} is missing); is it a ppo_control run directory?"
            )
        return path
    path = Path(f"{checkpoint}.pt") if checkpoint in ("best", "last") else Path(checkpoint)
    if not path.is_file() and (run_dir / CHECKPOINT_DIR / path).is_file():
        path = run_dir / CHECKPOINT_DIR / path  # checkpoint=step_0000200000.pt or checkpoint=best
    if not path.is_file():
        names = sorted(p.name for p in (run_dir / CHECKPOINT_DIR).glob("*.pt"))
        raise CheckpointError(
            f"checkpoint '{checkpoint}' does not exist; give a file or one of {run_dir / CHECKPOINT_DIR}: "
            f"{', '.join(names) or 'none'} (best and last also work without .pt)"
        )
    return path


def resume_candidates(run_dir: str | Path) -> list[Path]:
    """The checkpoints a resume may start from, in the order it tries them: last.pt, then the
    periodic ones, newest first."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UserError(f"cannot resume: run directory '{run_dir}' does not exist")
    directory = run_dir / CHECKPOINT_DIR
    candidates = [directory / LAST_CHECKPOINT] + sorted(directory.glob("step_*.pt"), reverse=True)
    candidates = [c for c in candidates if c.is_file()]
    if not candidates:
        raise CheckpointError(f"cannot resume: '{run_dir}' holds no checkpoint ({CHECKPOINT_DIR}/ is empty or missing)")
    return candidates
