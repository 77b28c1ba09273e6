"""Directory locks between processes: a training holds its run directory, a benchmark its out=
directory. flock locks are dropped by the OS when the holder exits, even on SIGKILL, so a crash
never leaves a directory locked."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

RUN_LOCK_FILE = ".lock"  # in a run directory, held by its training process


def try_lock(lock_file: Path) -> tuple[IO[str] | None, str]:
    """(handle, '') with an exclusive lock held for as long as the handle stays open, stamped with
    this process's pid; or (None, holder) when another process holds it."""
    handle = open(lock_file, "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        return None, holder
    handle.seek(0)
    handle.truncate()
    handle.write(f"pid {os.getpid()}")
    handle.flush()
    return handle, ""


def is_held(lock_file: Path) -> bool:
    """Whether another process holds `lock_file`'s lock (checked without taking it for long)."""
    if not lock_file.is_file():
        return False
    with open(lock_file, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False
