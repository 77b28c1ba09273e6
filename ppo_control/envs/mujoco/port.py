"""What the ports of envpool's Playground C++ tasks share: finding the robot's model in envpool's
asset package, the task options (the C++ DefaultConfig and the user's env.kwargs), the C++'s
rounding, and `PlaygroundPort`, the part of a task every robot module (go1, t1, panda) builds the
same way: its model on a PhysicsBatch, its layout and timing, its home pose, its sensors' addresses
and its per-sub-env state for checkpoints.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import mujoco
import numpy as np

from ppo_control.config.errors import UserError
from ppo_control.envs.mujoco.batch import PhysicsBatch
from ppo_control.envs.observations import GROUP_OF_KEY, POLICY
from ppo_control.robots import physics_assets, playground

MAX_EPISODE_STEPS = 1000  # envpool's registration default for the Playground tasks


def asset_base_path(env_id: str, robot: str) -> str:
    """Where envpool's asset package of `env_id` lies (the spec's base_path), found without importing
    envpool; one line with the pip command when it is not installed."""
    package = playground.robot_task(env_id).asset_package
    spec = importlib.util.find_spec(package.replace("-", "_"))
    if spec is None or not spec.submodule_search_locations:
        raise UserError(f"the {robot} reference needs the robot model from {package}; install it with: pip install {package}")
    return str(list(spec.submodule_search_locations)[0])


def round_half_away(x: np.ndarray | float) -> np.ndarray:
    """std::round / std::llround: halves round away from zero (numpy's round goes to even)."""
    x = np.asarray(x, dtype=np.float64)
    return (np.sign(x) * np.floor(np.abs(x) + 0.5)).astype(np.int64)


class PlaygroundPort:
    """A C++ port's task on a PhysicsBatch of `num_envs` sub-envs. A robot's class names its
    ENV_IDS, DEFAULTS (the C++ DefaultConfig less frame_stack and task_name), BOOLEAN_OPTIONS, NU
    (actuated joints), ROBOT (its name in messages) and STATE (its per-sub-env arrays), and writes
    into the loaded model what its C++ constructor writes (`configure_model`)."""

    ENV_IDS: tuple[str, ...] = ()
    DEFAULTS: dict[str, Any] = {}
    BOOLEAN_OPTIONS: tuple[str, ...] = ()
    # Options of the reference alone (the C++ port has none of them), with their defaults: off for
    # a boolean switch.
    REFERENCE_OPTIONS: dict[str, Any] = {}
    NU = 0
    ROBOT = ""
    STATE: tuple[str, ...] = ()
    MAX_EPISODE_STEPS = MAX_EPISODE_STEPS  # the spec's max_episode_steps

    def __init__(
        self, env_id: str, num_envs: int, kwargs: dict[str, Any] | None = None, num_threads: int | None = None, base_path: str | None = None
    ):
        self.env_id = env_id
        self.options = options = self.resolve_options(env_id, kwargs or {})
        task = playground.robot_task(env_id)
        self._base_path = base_path
        model = self.load_model(base_path or asset_base_path(env_id, self.ROBOT))
        self.physics = PhysicsBatch(model, num_envs, num_threads)
        self.num_envs = num_envs
        self.action_dim = self.NU
        self.max_episode_steps = self.MAX_EPISODE_STEPS
        self.control_period_s = options["ctrl_dt"]
        self.substeps = int(round_half_away(options["ctrl_dt"] / options["sim_dt"]))
        # envpool's observation keys as the envpool backend names its groups (a single Box: policy).
        self.groups = tuple((GROUP_OF_KEY.get(key, POLICY), len(names)) for key, names in task.groups.items())
        self.init_qpos = model.key("home").qpos.copy()
        self.default_pose = self.init_qpos[7 : 7 + self.NU].copy()

    @classmethod
    def resolve_options(cls, env_id: str, kwargs: dict[str, Any]) -> dict[str, Any]:
        """DEFAULTS with the user's env.kwargs; one line for an option the C++ port does not have."""
        if env_id not in cls.ENV_IDS:
            raise UserError(f"env.id '{env_id}': the {cls.ROBOT} reference has {', '.join(cls.ENV_IDS)}")
        kwargs = dict(kwargs)
        frame_stack = int(kwargs.pop("frame_stack", 1))
        if frame_stack != 1:
            raise UserError(f"env.kwargs.frame_stack={frame_stack}: the MuJoCo reference has no frame stacking; use 1")
        known = {**cls.DEFAULTS, **cls.REFERENCE_OPTIONS}
        unknown = sorted(key for key in kwargs if key not in known)
        if unknown:
            valid = ", ".join(known)
            raise UserError(f"env.kwargs.{unknown[0]}: {env_id} has no such option; valid options: frame_stack, {valid}")
        boolean = (*cls.BOOLEAN_OPTIONS, *(key for key, default in cls.REFERENCE_OPTIONS.items() if isinstance(default, bool)))
        given = {key: bool(value) if key in boolean else float(value) for key, value in kwargs.items()}
        return {**known, **given}

    @staticmethod
    def describe_variant(options: dict[str, Any], facts: dict[str, Any]) -> dict[str, Any]:
        """The task's description (envpool_backend.describe's facts) under the reference's own
        `options` (REFERENCE_OPTIONS given by the user): unchanged unless a robot's variant says so."""
        return facts

    def load_model(self, base_path: str):
        """The model the C++ builds: its XML with what its constructor writes in."""
        model = mujoco.MjModel.from_xml_path(playground.model_path(playground.robot_task(self.env_id), base_path))
        if model.nq < 7 + self.NU or model.nv < 6 + self.NU or model.nu != self.NU:
            raise ValueError(f"{self.env_id}: unexpected {self.ROBOT} model dimensions")
        self.configure_model(model)
        return model

    def configure_model(self, model) -> None:
        """What the robot's C++ constructor writes into its model (timestep, solver, gains)."""
        raise NotImplementedError

    def physics_model(self):
        """A new copy of the task's model without what only drawing uses (visual meshes, textures;
        the same dynamics, ppo_control/robots/physics_assets.py): a randomized sub-env's own model."""
        task = playground.robot_task(self.env_id)
        return self.load_model(physics_assets.base_path(task, self._base_path or asset_base_path(self.env_id, self.ROBOT)))

    def actions_for_targets(self, targets: np.ndarray) -> np.ndarray:
        """The actions whose next step makes `targets` (a row per sub-env) the actuators' targets:
        how sim2sim delivers a controller's targets through the task's own step. Here the default
        pose's rule, target = default_pose + action_scale * action."""
        return (targets - self.default_pose) / self.options["action_scale"]

    @staticmethod
    def sensor_adr(model, name: str) -> int:
        """The address of sensor `name`'s first value in sensordata."""
        return int(model.sensor_adr[model.sensor(name).id])

    def _sensor(self, sensordata: np.ndarray, name: str) -> np.ndarray:
        """A 3-axis sensor's values for every row of `sensordata` (its address in `self.adr`)."""
        adr = self.adr[name]
        return sensordata[:, adr : adr + 3]

    # --- state for checkpoints ----------------------------------------------------------------
    def get_state(self) -> dict[str, np.ndarray]:
        return {name: getattr(self, name).copy() for name in self.STATE}

    def set_state(self, state: dict[str, np.ndarray]) -> None:
        for name in self.STATE:
            getattr(self, name)[:] = np.asarray(state[name])
