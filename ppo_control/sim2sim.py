"""python -m ppo_control.sim2sim run=<run_dir> [export=<file>] [episodes=16] [seed=...] [latency=0] [friction=1.0]
    [added_mass=0.0] [kp_scale=1.0] [video=false] [out=<file>]

Runs an exported policy file (TorchScript or ONNX, as `export` wrote it; never the training
checkpoint) on the robot's MuJoCo reference, driven through the export's metadata alone: a
controller per robot (ppo_control/deploy/controller.py) reads each observation element from the model's
sensors, sites, bodies and joints where `robot.observation_sources` says, keeps the previous action,
its last targets and the command, writes PD targets by `robot.action_rule` (default pose + action
scale x action; a manipulator's previous targets + action scale x action, clipped to its ctrl
range), gives the model the contract's gains and steps `sim_substeps` physics steps of
`sim_period_s` per action. The reference supplies only the world: the episodes (the evaluation's
initial states, commands and targets, same seeds), the reward terms, falls, tracking error and
success. A contract the metadata gets wrong (a joint order, a default pose,
a gain, a control period) therefore shows here as a policy that no longer drives the robot.

Perturbations of the robot: `latency` (control periods between an observation and its action
reaching the motors), `friction` (scale of every geom's sliding friction), `added_mass` (kg on the
floating base; a robot without one refuses it), `kp_scale` (the motors' real gain against the contract's). Sensors are exact (no noise).
Writes <run>/sim2sim/sim2sim.json (or `out`) and, with video=true, one episode's video beside it.
"""

from ppo_control.config.runtime import prepare_process

prepare_process()  # before torch or mujoco load: see ppo_control/config/runtime.py

from ppo_control.config import Sim2SimArgs, command_help  # noqa: E402
from ppo_control.config.errors import run_cli  # noqa: E402
from ppo_control.deploy.sim2sim import main  # noqa: E402

if __name__ == "__main__":
    example = "python -m ppo_control.sim2sim run=runs/Go1JoystickFlatTerrain/<run> latency=1"
    run_cli(main, help=lambda: command_help(__doc__, Sim2SimArgs, example=example))
