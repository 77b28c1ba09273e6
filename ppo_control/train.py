"""python -m ppo_control.train task=HalfCheetah [key=value ...]
python -m ppo_control.train resume=<run_dir> [total_steps=N] [eval.*/log.*/checkpoint.* ...]"""

from __future__ import annotations

from ppo_control.config import compose, compose_resume, parse_overrides
from ppo_control.errors import run_cli


def main(argv: list[str]) -> None:
    resume = [a.split("=", 1)[1] for a in parse_overrides(argv) if a.startswith("resume=")]
    if resume and resume[-1] not in ("", "null"):
        from ppo_control.runs import find_resume_checkpoint  # heavy imports (torch) only when needed
        from ppo_control.trainer import Trainer

        path, state = find_resume_checkpoint(resume[-1])
        cfg = compose_resume(argv, state["config"], resume[-1])
        print(f"resuming from {path} (step {int(state['step']):,})", flush=True)
        Trainer(cfg, resume_state=state).train()
        return
    cfg = compose(argv)
    from ppo_control.trainer import Trainer  # heavy imports (torch, gymnasium) after the config is valid

    Trainer(cfg).train()


if __name__ == "__main__":
    run_cli(main)
