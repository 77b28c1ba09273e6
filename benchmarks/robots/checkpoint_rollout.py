"""What the joystick diagnostics share: a run's checkpoint driving sub-envs of the run's own env,
and the JSON report they print or write."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any


def record_checkpoint(run: Path, args: dict[str, Any], record: Callable, backend: str | None = None) -> tuple[Any, dict]:
    """Loads `args["checkpoint"]` of `run` and calls `record(policy, envs, where, steps, seed)` on
    `args["sub_envs"]` sub-envs of its env (with the privileged group, for the measured velocities);
    returns (the loaded run, what `record` returned). `args["env_kwargs"]` (`key=value` items, as
    evaluate's env.kwargs) run the env under other task options than the run's; `backend` on
    another backend than the run's (a diagnostic that reads the physics needs the reference)."""
    from omegaconf import OmegaConf

    from ppo_control.analysis.evaluate_run import with_task_options
    from ppo_control.envs import make_vec_env
    from ppo_control.envs.joystick import tracking_indices
    from ppo_control.runs.directory import load_run

    loaded = load_run(run, run / "checkpoints" / str(args["checkpoint"]))
    cfg = with_task_options(loaded.cfg, OmegaConf.from_dotlist(list(args["env_kwargs"])))
    envs = make_vec_env(cfg.env, num_envs=int(args["sub_envs"]), backend=backend, privileged=True)
    try:
        where = tracking_indices(str(loaded.cfg.env.id), envs.info.groups)
        return loaded, record(loaded.policy, envs, where, int(args["steps"]), int(args["seed"]))
    finally:
        envs.close()


def emit_report(report: dict, out: str | None) -> None:
    """Prints the report as JSON and writes it to `out` too when given."""
    text = json.dumps(report, indent=1)
    if out:
        Path(out).write_text(text + "\n")
    print(text)
