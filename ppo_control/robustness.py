"""python -m ppo_control.robustness run=<run_dir> [episodes=5] [mass=[0.5,...]] [friction=[0.5,...]] [delay=[0,1,2,3]]
    [checkpoint=<file>] [seed=...]

Evaluates a run's deterministic policy over a grid of perturbations of the robot: every body mass
scale x every friction scale (no delay), and every action delay (nominal mass and friction). Each
cell is an evaluation with fixed scales (randomize.body_mass=[m,m], randomize.friction=[f,f],
randomize.action_delay=[d,d]) on the run's own evaluation seeds, so the (1, 1, 0) cell is the
nominal evaluation. A robot with a MuJoCo reference (envpool cannot change its model) is evaluated
on the reference instead, through its controller contract as `sim2sim` drives it, with the delay as
latency; its cells add the fall rate and the tracking error. Writes into <run_dir>/robustness/:
robustness.csv (one row per cell), robustness.md (the grids and a summary: nominal, worst cell,
mean over cells) and robustness.png (mass x friction heatmap beside return against delay).
"""

from ppo_control.config.runtime import prepare_process

prepare_process()  # before torch or mujoco load: see ppo_control/config/runtime.py

from ppo_control.analysis.robustness_grid import main  # noqa: E402
from ppo_control.config import RobustnessArgs, command_help  # noqa: E402
from ppo_control.config.errors import run_cli  # noqa: E402

if __name__ == "__main__":
    run_cli(
        main,
        help=lambda: command_help(__doc__, RobustnessArgs, example="python -m ppo_control.robustness run=runs/Hopper/<run> episodes=3"),
    )
