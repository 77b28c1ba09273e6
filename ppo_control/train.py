"""python -m ppo_control.train task=HalfCheetah [key=value ...]"""

from __future__ import annotations

from ppo_control.config import compose
from ppo_control.errors import run_cli


def main(argv: list[str]) -> None:
    cfg = compose(argv)
    from ppo_control.trainer import Trainer  # heavy imports (torch, gymnasium) after the config is valid

    Trainer(cfg).train()


if __name__ == "__main__":
    run_cli(main)
