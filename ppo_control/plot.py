"""python -m ppo_control.plot <run_dir or parent dir> [more dirs ...] [x=steps|time] [out=<path>.png]

Learning curves from runs' metrics.jsonl, one subplot per task: per experiment, every seed's
deterministic evaluation return (thin, faint), its mean over the seeds (thick) and the mean training
episode return (dotted), with the task's published returns from configs/references.yaml as dashed,
labelled horizontal lines. A single run also gets a diagnostics figure (approx KL, clip fraction,
entropy, explained variance, learning rate, steps/s). Headless: figures are drawn with matplotlib's
Figure API (Agg), never pyplot, so importing this module does not touch a caller's matplotlib backend.

Run discovery, grouping, the wall-clock timeline and the published references live here too;
benchmark.py reuses them.
"""

from ppo_control.config.runtime import prepare_process

prepare_process()  # before torch or mujoco load: see ppo_control/config/runtime.py

from ppo_control.analysis.curves import PlotArgs, main  # noqa: E402
from ppo_control.config import command_help  # noqa: E402
from ppo_control.config.errors import run_cli  # noqa: E402

if __name__ == "__main__":
    run_cli(main, help=lambda: command_help(__doc__, PlotArgs, example="python -m ppo_control.plot runs/Hopper x=time"))
