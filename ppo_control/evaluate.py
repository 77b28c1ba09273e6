"""python -m ppo_control.evaluate run=<run_dir> [checkpoint=<file>] [episodes=10] [seed=...] [video=true] [deterministic=true]
    [randomize.body_mass=[1.3,1.3] ...] [eval.randomize=true] [env.kwargs.<option>=<value> ...]

Rolls out the trained policy (mean action by default, normalizer frozen, raw rewards), prints a
table and writes <run_dir>/eval.json. The checkpoint and its statistics are only ever read. The robot
is the nominal one (or the run's own eval.randomize setting); `randomize.*` keys evaluate under
chosen perturbations, starting from the run's training randomization with eval.randomize=true.
`env.kwargs.*` evaluate under other task options than the run's (a training option set back to
the task's own), as long as the policy's observation and action layout stays the same.
"""

from ppo_control.config.runtime import prepare_process

prepare_process()  # before torch or mujoco load: see ppo_control/config/runtime.py

from ppo_control.analysis.evaluate_run import main  # noqa: E402
from ppo_control.config import EvaluateArgs, command_help  # noqa: E402
from ppo_control.config.errors import run_cli  # noqa: E402

if __name__ == "__main__":
    run_cli(
        main, help=lambda: command_help(__doc__, EvaluateArgs, example="python -m ppo_control.evaluate run=runs/Hopper/<run> episodes=5")
    )
