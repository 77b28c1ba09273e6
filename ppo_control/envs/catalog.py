"""The shipped tasks as `python -m ppo_control.tasks` and `ppo_control.list_tasks()` list them
(the command's usage and description: ppo_control/tasks.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from ppo_control.config import available_tasks, compose
from ppo_control.config.errors import UserError
from ppo_control.config.resources import TASKS_DIR
from ppo_control.envs import describe_task, reference_backend


@dataclass(frozen=True)
class TaskInfo:
    name: str  # the task's name, as in `task=<name>`
    env_id: str  # Gymnasium id (HalfCheetah-v5), envpool's Playground id, or `package.module:EnvClass`
    backend: str  # the backend the task is described by (its reference: gymnasium, envpool, mjx)
    groups: tuple[tuple[str, int], ...]  # the observation groups the env provides, (name, size) in layout order
    action_dim: int
    dt: float | None  # seconds per env step (per policy action); None where the env has no `dt`

    @property
    def obs_dim(self) -> int:
        return sum(size for _, size in self.groups)


def task_info(name: str) -> TaskInfo:
    """Describe one task: a name from tasks/ or a path to a task .yaml (a UserError if it is invalid)."""
    cfg = compose([f"task={name}"])
    task = describe_task(cfg.env)
    groups = tuple((group, int(size)) for group, size in task.group_sizes.items())
    return TaskInfo(str(cfg.task), str(cfg.env.id), reference_backend(cfg.env), groups, task.action_dim, task.control_period_s)


def list_tasks() -> list[TaskInfo]:
    """Every shipped task (one per file in tasks/), sorted by name."""
    names = available_tasks()
    if not names:  # an install without its data files (see resources.py): say so instead of an empty table
        raise UserError(f"no task files found in {TASKS_DIR}")
    return [task_info(name) for name in names]


def format_table(infos: list[TaskInfo]) -> str:
    rows = [("task", "env id", "backend", "observation groups", "act", "dt (s)")]
    for i in infos:
        groups = ", ".join(f"{group} {size}" for group, size in i.groups)
        rows.append((i.name, i.env_id, i.backend, groups, str(i.action_dim), "-" if i.dt is None else f"{i.dt:g}"))
    widths = [max(len(row[c]) for row in rows) for c in range(len(rows[0]))]
    right = (False, False, False, False, True, True)
    lines = ["  ".join(cell.rjust(w) if r else cell.ljust(w) for cell, w, r in zip(row, widths, right)).rstrip() for row in rows]
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    if argv:
        raise UserError(f"tasks: takes no arguments (got {' '.join(argv)!r}); usage: python -m ppo_control.tasks")
    print(format_table(list_tasks()))
