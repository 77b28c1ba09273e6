"""python -m ppo_control.benchmark tasks=[HalfCheetah,Hopper] [seeds=3] [first_seed=0] [total_steps=N]
    [preset=fast|paper] [jobs=1] [out=benchmarks/results/<preset>] [training overrides, e.g. env.n_envs=4]

Trains every (task, seed), seeds first_seed..first_seed+seeds-1, as its own `python -m ppo_control.train` process,
`jobs` at a time, into <out>/runs/<task>/s<seed> (its output goes to <out>/runs/<task>/s<seed>.log),
each on its own share of the CPU cores (jobs=2 on 8 cores: 4 each),
then writes results.csv, runs.csv, results.md, learning_curves.png and learning_curves_time.png
into <out>: per task the worst, median and mean of the seeds' final evaluations, each seed's, and the
published returns of configs/references.yaml beside them. Running the same command again skips
finished runs and resumes interrupted ones, so a long benchmark can be stopped (Ctrl-C: every
training checkpoints first) and continued at will.
"""

from ppo_control.config.runtime import prepare_process

prepare_process()  # before torch or mujoco load: see ppo_control/config/runtime.py

from ppo_control.analysis.suite import BenchmarkArgs, main  # noqa: E402
from ppo_control.config import command_help  # noqa: E402
from ppo_control.config.errors import run_cli  # noqa: E402

if __name__ == "__main__":
    run_cli(
        main,
        help=lambda: command_help(
            __doc__, BenchmarkArgs, example="python -m ppo_control.benchmark tasks=[Hopper] seeds=2 total_steps=100000"
        ),
    )
