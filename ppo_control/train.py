"""python -m ppo_control.train task=HalfCheetah [key=value ...]
python -m ppo_control.train resume=<run_dir> [total_steps=N] [eval.*/log.*/checkpoint.* ...]"""

from __future__ import annotations

from ppo_control.config import command_help, parse_overrides
from ppo_control.config.errors import run_cli
from ppo_control.training.launch import train_from_overrides


def main(argv: list[str]) -> None:
    overrides = parse_overrides(argv)
    resume = [a.split("=", 1)[1] for a in overrides if a.startswith("resume=")]
    train_from_overrides(overrides, resume=resume[-1] if resume and resume[-1] not in ("", "null") else None)


if __name__ == "__main__":
    run_cli(
        main,
        help=lambda: command_help(__doc__, example="python -m ppo_control.train task=Hopper total_steps=200000 env.n_envs=8", train=True),
    )
