"""python -m ppo_control.train task=HalfCheetah [key=value ...]
python -m ppo_control.train resume=<run_dir> [total_steps=N] [eval.*/log.*/checkpoint.* ...]"""

from __future__ import annotations

from ppo_control.config.runtime import prepare_process

prepare_process()  # before torch or mujoco load: see ppo_control/config/runtime.py

from ppo_control.config import command_help  # noqa: E402
from ppo_control.config.errors import run_cli  # noqa: E402
from ppo_control.training.launch import main  # noqa: E402

if __name__ == "__main__":
    run_cli(
        main,
        help=lambda: command_help(__doc__, example="python -m ppo_control.train task=Hopper total_steps=200000 env.n_envs=8", train=True),
    )
