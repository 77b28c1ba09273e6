"""User-facing errors: one line on stderr, exit status 2, no traceback."""

from __future__ import annotations

import sys
from collections.abc import Callable


class UserError(Exception):
    """Something the user can fix (bad config, missing run, unknown task). Its message is one line."""


class CheckpointError(UserError):
    """A checkpoint is missing, corrupt or not one of ours."""


class TrainingStopped(Exception):
    """Training cannot go on (exit status 1). Nothing is saved after it, so the last checkpoint on
    disk is the last good one."""


class NonFiniteError(TrainingStopped):
    """Training produced or received NaN/inf."""


class EnvWorkerError(TrainingStopped):
    """A sub-environment's worker process died or its env raised."""


class CheckFailed(Exception):
    """A check the user asked a command to gate on failed (exit status 1): its result is written and
    printed all the same, so a pipeline can stop on the status and a person can read why."""


HELP_FLAGS = ("-h", "--help")


def run_cli(main: Callable[[list[str]], None], argv: list[str] | None = None, *, help: Callable[[], str] | None = None) -> None:
    """Run a command's main: a UserError becomes one `error: ...` line on stderr and exit status 2,
    a TrainingStopped the same with exit status 1, a CheckFailed one `check failed: ...` line and
    exit status 1. `-h`/`--help` anywhere prints `help()` (the command's usage and keys, see
    config.command_help) and exits 0 without running anything."""
    argv = sys.argv[1:] if argv is None else argv
    if help is not None and any(arg in HELP_FLAGS for arg in argv):
        print(help())
        sys.exit(0)
    try:
        main(argv)
    except UserError as exc:
        print(f"error: {_one_line(exc)}", file=sys.stderr)
        sys.exit(2)
    except TrainingStopped as exc:
        print(f"error: {_one_line(exc)}", file=sys.stderr)
        sys.exit(1)
    except CheckFailed as exc:
        print(f"check failed: {_one_line(exc)}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print("interrupted; the last checkpoint on disk is intact", file=sys.stderr)
        sys.exit(130)


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())
