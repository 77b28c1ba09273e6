"""ppo_control: PPO for continuous-control robot policies on MuJoCo.

    import ppo_control as pc

    result = pc.train("Hopper", total_steps=200_000)
    policy = pc.load_policy(result.run_dir)

The functions are those of `ppo_control.api`; the commands are `python -m ppo_control.<command>`.
Importing the package sets no environment variable and loads neither torch nor mujoco.
"""

from ppo_control.api import TrainResult, evaluate, export, list_tasks, load_policy, robustness, train
from ppo_control.config.errors import UserError  # the one exception the API raises for bad input
from ppo_control.config.resources import VERSION as __version__

__all__ = ["TrainResult", "UserError", "__version__", "evaluate", "export", "list_tasks", "load_policy", "robustness", "train"]
