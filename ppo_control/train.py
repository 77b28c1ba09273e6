"""python -m ppo_control.train task=HalfCheetah [key=value ...]
python -m ppo_control.train resume=<run_dir> [total_steps=N] [eval.*/log.*/checkpoint.* ...]"""

from __future__ import annotations

from ppo_control.api import _train
from ppo_control.config import parse_overrides
from ppo_control.errors import run_cli


def main(argv: list[str]) -> None:
    overrides = parse_overrides(argv)
    resume = [a.split("=", 1)[1] for a in overrides if a.startswith("resume=")]
    _train(overrides, resume=resume[-1] if resume and resume[-1] not in ("", "null") else None)


if __name__ == "__main__":
    run_cli(main)
