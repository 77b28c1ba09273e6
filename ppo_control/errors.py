"""User-facing errors: one line on stderr, exit status 2, no traceback."""

from __future__ import annotations

import sys
from typing import Callable


class UserError(Exception):
    """Something the user can fix (bad config, missing run, unknown task). Its message is one line."""


def run_cli(main: Callable[[list[str]], None], argv: list[str] | None = None) -> None:
    """Run a command's main; a UserError becomes one `error: ...` line on stderr and exit status 2."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        main(argv)
    except UserError as exc:
        message = " ".join(str(exc).split())  # guarantee a single line
        print(f"error: {message}", file=sys.stderr)
        sys.exit(2)
