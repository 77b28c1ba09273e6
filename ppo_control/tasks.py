"""python -m ppo_control.tasks

Lists the shipped tasks, one row per file in tasks/: the task name (what `task=` takes), its
environment id, the observation and action sizes, and the control period dt (simulated seconds per
env step, i.e. per policy action). Each env is built from the composed task config exactly as
training builds it (env.kwargs included) and closed again. Takes no arguments.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ppo_control.config import available_tasks, compose
from ppo_control.errors import UserError, run_cli
from ppo_control.resources import TASKS_DIR


@dataclass(frozen=True)
class TaskInfo:
    name: str  # the task's name, as in `task=<name>`
    env_id: str  # Gymnasium id (HalfCheetah-v5) or `package.module:EnvClass`
    obs_dim: int
    action_dim: int
    dt: float | None  # seconds per env step (MuJoCo: frame_skip * timestep); None where the env has no `dt`


def task_info(name: str) -> TaskInfo:
    """Describe one task: a name from tasks/ or a path to a task .yaml (a UserError if it is invalid)."""
    from omegaconf import OmegaConf

    from ppo_control.envs import check_env_id, make_env_factory  # heavy imports (gymnasium, mujoco)

    cfg = compose([f"task={name}"])
    env_id = str(cfg.env.id)
    check_env_id(env_id)
    kwargs = OmegaConf.to_container(cfg.env.kwargs) if cfg.env.kwargs else {}
    env = make_env_factory(env_id, kwargs, cfg.env.max_episode_steps)()
    try:
        obs_dim = _flat_size(env.observation_space, "observation", cfg.task)
        action_dim = _flat_size(env.action_space, "action", cfg.task)
        dt = getattr(env.unwrapped, "dt", None)
    finally:
        env.close()
    return TaskInfo(name=str(cfg.task), env_id=env_id, obs_dim=obs_dim, action_dim=action_dim, dt=None if dt is None else float(dt))


def list_tasks() -> list[TaskInfo]:
    """Every shipped task (one per file in tasks/), sorted by name."""
    names = available_tasks()
    if not names:  # an install without its data files (see resources.py): say so instead of an empty table
        raise UserError(f"no task files found in {TASKS_DIR}")
    return [task_info(name) for name in names]


def _flat_size(space: Any, what: str, task: str) -> int:
    shape = getattr(space, "shape", None)
    if shape is None:
        raise UserError(f"task '{task}': its {what} space {space} has no shape (only Box spaces are supported)")
    return math.prod(shape)


def format_table(infos: list[TaskInfo]) -> str:
    rows = [("task", "env id", "obs", "act", "dt (s)")]
    rows += [(i.name, i.env_id, str(i.obs_dim), str(i.action_dim), "-" if i.dt is None else f"{i.dt:g}") for i in infos]
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    right = (False, False, True, True, True)
    lines = ["  ".join(cell.rjust(w) if r else cell.ljust(w) for cell, w, r in zip(row, widths, right)).rstrip() for row in rows]
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    if argv:
        raise UserError(f"tasks: takes no arguments (got {' '.join(argv)!r}); usage: python -m ppo_control.tasks")
    print(format_table(list_tasks()))


if __name__ == "__main__":
    run_cli(main)
