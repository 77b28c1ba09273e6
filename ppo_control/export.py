"""python -m ppo_control.export run=<run_dir> [format=torchscript|onnx] [out=<path>] [checkpoint=<file>] [overwrite=false]

Writes the deterministic policy of a run (normalizer + actor + action clipping, see deploy.py) as
a file that loads without ppo_control: TorchScript for libtorch/C++ controllers, or ONNX. The file
is checked against the training policy before it is put in place, and an existing file is never
replaced unless overwrite=true.
"""

from ppo_control.config.runtime import prepare_process

prepare_process()  # before torch or mujoco load: see ppo_control/config/runtime.py

from ppo_control.config import ExportArgs, command_help  # noqa: E402
from ppo_control.config.errors import run_cli  # noqa: E402
from ppo_control.deploy.exporter import main  # noqa: E402

if __name__ == "__main__":
    run_cli(main, help=lambda: command_help(__doc__, ExportArgs, example="python -m ppo_control.export run=runs/Hopper/<run> format=onnx"))
