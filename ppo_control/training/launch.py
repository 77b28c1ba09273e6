"""Starting a training run or continuing one: what the train command and `ppo_control.train()` run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ppo_control.config import compose, compose_resume, parse_overrides
from ppo_control.runs.layout import resume_candidates


@dataclass(frozen=True)
class TrainResult:
    """What `train` returns: where the run lives and its last evaluation (None if it did not run)."""

    run_dir: Path
    step: int
    eval_return: float | None
    eval_return_std: float | None
    eval_length: float | None
    videos: tuple[str, ...] = ()


def train_from_overrides(overrides, resume: str | None, max_updates: int | None = None) -> TrainResult:
    """Train from overrides, a mapping (the `train` function) or key=value strings (the train command)."""
    # torch and what loads it only once the path and the config are checked: a mistake is refused in
    # one line without them (tests/runs/test_resume.py checks it), and importing ppo_control loads
    # no torch (tests/config/test_config.py)
    if resume:
        candidates = resume_candidates(resume)
        from ppo_control.runs.directory import find_resume_checkpoint  # loads torch: see above

        path, state = find_resume_checkpoint(Path(resume), candidates)
        cfg = compose_resume(overrides, state["config"], resume)
        print(f"resuming from {path} (step {int(state['step']):,})", flush=True)
    else:
        cfg, state = compose(overrides), None
    from ppo_control.training.trainer import Trainer  # loads torch: see above

    trainer = Trainer(cfg, resume_state=state)
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
