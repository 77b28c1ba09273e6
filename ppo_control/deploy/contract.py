"""The controller's contract of a task: what a robot controller running the exported policy must
feed it and what it gets back, as the task's reference backend describes it (`envs.describe_task`).

- `control_period_s`: seconds between policy steps.
- `action_names`: the actuators (a PD-driven robot: its joints) in action order.
- `observation`: the groups the policy reads, each with its size and, where this can be proven, the
  name of every element (null where the task does not say: never guessed).
- `robot` (PD-driven robots only): joint names, default pose, action scale and the rule that turns
  an action into a PD target, the gains, the command's layout.
"""

from __future__ import annotations

from typing import Any

from ppo_control.envs import describe_task


def actor_groups(groups, actor_obs: list[str]) -> list[tuple[str, int]]:
    """(name, size) of the groups the actor reads, in its order: all an exported policy takes."""
    sizes = dict(groups)
    return [(name, int(sizes[name])) for name in actor_obs]


def controller_contract(env_cfg, groups: list[tuple[str, int]] | None = None, history: int = 1) -> dict[str, Any]:
    """The contract of the task in `env_cfg` (the run config's `env` section); `groups` are the
    observation groups the controller feeds (default: the `policy` group alone), `history` how many
    of the most recent observations the policy reads (it keeps them itself)."""
    task = describe_task(env_cfg)
    groups = groups or [("policy", task.group_sizes.get("policy"))]
    contract = {
        "control_period_s": task.control_period_s,
        "action_names": task.action_names,
        "observation": {
            "groups": [
                {"name": name, "size": size, "element_names": _checked(task.element_names.get(name), size)} for name, size in groups
            ],
            "history": history,
        },
    }
    if task.robot is not None:
        contract["robot"] = task.robot
    return contract


def _checked(names: list[str] | None, size: int | None) -> list[str] | None:
    """Names only where they cover the group exactly."""
    return names if names is not None and size is not None and len(names) == size else None
