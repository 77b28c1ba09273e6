"""python -m ppo_control.tasks

Lists the shipped tasks, one row per file in tasks/: the task name (what `task=` takes), its
environment id, the backend that describes it (its reference), its observation groups with their
sizes (`policy`, and `privileged` where the env provides it), the action size, and the control
period dt (simulated seconds per env step, i.e. per policy action), as the task's reference backend
describes it (`envs.describe_task`: one env built from the composed task config, env.kwargs
included, and closed again). Takes no arguments.
"""

from ppo_control.config.runtime import prepare_process

prepare_process()  # before torch or mujoco load: see ppo_control/config/runtime.py

from ppo_control.config import command_help  # noqa: E402
from ppo_control.config.errors import run_cli  # noqa: E402
from ppo_control.envs.catalog import main  # noqa: E402

if __name__ == "__main__":
    run_cli(main, help=lambda: command_help(__doc__, example="python -m ppo_control.tasks"))
