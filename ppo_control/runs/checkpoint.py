"""Checkpoints: atomic writes (temp file + fsync + rename) and safe loads (weights_only=True)."""

from __future__ import annotations

import os
import pickle
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ppo_control.config.errors import CheckpointError

FORMAT_VERSION = 1


def atomic_write(path: str | os.PathLike, write: Callable[[Path], None]) -> None:
    """Produce `path` through `write(temp_path)` so that `path` is always either the old complete
    file or the new complete one: temp file in the same directory (same suffix, for writers that go
    by it), fsync, rename, fsync of the directory so the rename itself survives a crash."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=f".partial{path.suffix}", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp_name))
        with open(tmp_name, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def save_checkpoint(path: str | os.PathLike, state: dict[str, Any]) -> None:
    atomic_write(path, lambda tmp: torch.save({"format_version": FORMAT_VERSION, **state}, tmp))


def load_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """Load with torch's safe unpickler: tensors and plain containers only, never arbitrary code."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint '{path}' does not exist")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise CheckpointError(f"checkpoint '{path}' was refused by the safe loader (it holds more than weights: {first})") from None
    except (RuntimeError, EOFError, OSError, ValueError, zipfile.BadZipFile) as exc:
        raise CheckpointError(f"checkpoint '{path}' is truncated or corrupt ({type(exc).__name__})") from None
    if not isinstance(state, dict) or state.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(f"'{path}' is not a ppo_control checkpoint (format {FORMAT_VERSION})")
    return state


def periodic_checkpoint_name(step: int) -> str:
    return f"step_{step:010d}.pt"


def prune_periodic_checkpoints(directory: Path, keep: int) -> None:
    """Keep the newest `keep` periodic checkpoints; last.pt is never touched."""
    periodic = sorted(directory.glob("step_*.pt"))
    for old in periodic[: max(len(periodic) - keep, 0)]:
        old.unlink()
