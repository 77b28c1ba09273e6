"""python -m ppo_control.train task=HalfCheetah [key=value ...]
python -m ppo_control.train resume=<run_dir> [total_steps=N] [eval.*/log.*/checkpoint.* ...]"""

from __future__ import annotations

from pathlib import Path

from ppo_control.api import TrainResult
from ppo_control.config import command_help, compose, compose_resume, parse_overrides
from ppo_control.errors import run_cli
from ppo_control.run_layout import resume_candidates


def train_from_overrides(overrides, resume: str | None, max_updates: int | None = None) -> TrainResult:
    """Train from overrides, a mapping (the `train` function) or key=value strings (the train command)."""
    if resume:
        candidates = resume_candidates(resume)  # a wrong path is refused before the heavy imports (torch)
        from ppo_control.runs import find_resume_checkpoint
        from ppo_control.trainer import Trainer

        path, state = find_resume_checkpoint(Path(resume), candidates)
        cfg = compose_resume(overrides, state["config"], resume)
        print(f"resuming from {path} (step {int(state['step']):,})", flush=True)
        trainer = Trainer(cfg, resume_state=state)
    else:
        cfg = compose(overrides)
        from ppo_control.trainer import Trainer  # heavy imports (torch, gymnasium) after the config is valid

        trainer = Trainer(cfg)
    final = trainer.train(max_updates=max_updates)
    return TrainResult(
        run_dir=Path(cfg.run_dir),
        step=trainer.progress.step,
        eval_return=final.get("eval_return"),
        eval_return_std=final.get("eval_return_std"),
        eval_length=final.get("eval_length"),
        videos=tuple(final.get("videos", ())),
    )


def main(argv: list[str]) -> None:
    overrides = parse_overrides(argv)
    resume = [a.split("=", 1)[1] for a in overrides if a.startswith("resume=")]
    train_from_overrides(overrides, resume=resume[-1] if resume and resume[-1] not in ("", "null") else None)


if __name__ == "__main__":
    run_cli(
        main,
        help=lambda: command_help(__doc__, example="python -m ppo_control.train task=Hopper total_steps=200000 env.n_envs=8", train=True),
    )
