"""A robot's controller loop built from an exported policy's metadata alone: which MuJoCo sensor,
site, body or joint each observation element reads, what state the controller keeps (the previous
action, the last targets, the command, a gait clock, histories of readings), how an action becomes a PD target (the
contract's `robot.action_rule`) and which gains the PD loop has.

This is what `sim2sim` runs in a plain MuJoCo model, and what examples/cpp/robot_controller.cpp
does in C++, every source kind and action rule alike: neither reads anything from the training code or the envs,
so a contract the metadata gets wrong (a joint order, a default pose, a gain, a control period)
shows as a policy that no longer drives the robot. The vocabulary of `robot.observation_sources`
(and its parser, `source_of`) is in ppo_control/robots/playground.py.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np

from ppo_control.config.errors import UserError
from ppo_control.robots.playground import source_of

# The robot block's fields a controller loop cannot do without; those of the action rule go after
# the joint names.
REQUIRED = (
    "joint_names",
    "action_scale",
    "kp",
    "kd_parts",
    "control_period_s",
    "sim_period_s",
    "sim_substeps",
    "observation_sources",
)
# robot.action_rule -> what it reads besides the action scale. An export written before the field
# existed holds the legged robots' rule, default_pose.
RULES = {
    "default_pose": ("default_pose",),  # target = default_pose + action_scale * action
    "previous_target": ("initial_target", "ctrl_range"),  # target = clip(previous target + action_scale * action, ctrl_range)
}
AXES = {"x": 0, "y": 1, "z": 2}
FREE_JOINT = {"qpos": ("x", "y", "z", "qw", "qx", "qy", "qz"), "qvel": ("vx", "vy", "vz", "wx", "wy", "wz")}


def _per_joint_ranges(value: list[list[float]], n: int) -> np.ndarray:
    """robot.ctrl_range: [low, high] per joint."""
    ranges = np.asarray(value, dtype=np.float64)
    if ranges.shape != (n, 2):
        raise UserError(f"the export's robot.ctrl_range is not one [low, high] for each of its {n} joints")
    return ranges


def _per_joint(value: float | list[float], n: int, name: str) -> np.ndarray:
    """A gain given once for every joint, or one per joint."""
    values = np.broadcast_to(np.asarray(value, dtype=np.float64), (n,)) if np.ndim(value) == 0 else np.asarray(value, dtype=np.float64)
    if values.shape != (n,):
        raise UserError(f"the export's robot.{name} has {values.size} values for {n} joints")
    return values.copy()


@dataclass(frozen=True)
class RobotContract:
    """The controller's side of an export: read from its metadata.json, checked for completeness."""

    joint_names: tuple[str, ...]
    default_pose: np.ndarray | None  # the default_pose rule's (and joint_pos' reference)
    action_scale: float
    kp: np.ndarray
    joint_damping: np.ndarray
    actuator_damping: np.ndarray
    control_period_s: float
    sim_period_s: float
    sim_substeps: int
    elements: tuple[str, ...]  # the policy's observation, element by element
    sources: dict[str, dict[str, str]]
    command_names: tuple[str, ...] = ()
    gait_initial_rad: tuple[float, ...] = ()
    gait_frequency_hz_range: tuple[float, float] | None = None
    gait_hold_rad: float | None = None  # every foot's phase after an advance while the command is (near) zero
    gait_hold_command_norm: float = 0.0
    action_low: np.ndarray | None = None
    action_high: np.ndarray | None = None
    action_rule: str = "default_pose"
    initial_target: np.ndarray | None = None  # the previous_target rule's target after a reset
    ctrl_low: np.ndarray | None = None  # and the range it clips every target to
    ctrl_high: np.ndarray | None = None

    @classmethod
    def from_metadata(cls, metadata: dict[str, Any]) -> RobotContract:
        """One line naming what is missing where the export cannot drive a robot through its
        metadata alone."""
        robot = metadata.get("robot")
        if not isinstance(robot, dict):
            raise UserError("the export's metadata has no robot block: it was not trained on a PD-driven robot task")
        rule = str(robot.get("action_rule", "default_pose"))
        if rule not in RULES:
            raise UserError(f"the export's robot.action_rule is {rule}: a controller here drives the rules {', '.join(RULES)}")
        missing = [key for key in (REQUIRED[0], *RULES[rule], *REQUIRED[1:]) if key not in robot]
        if missing:
            raise UserError(
                f"the export's metadata lacks robot.{', robot.'.join(missing)}: a controller cannot drive the policy without them"
            )
        groups = metadata.get("observation", {}).get("groups", [])
        read = [g for g in groups if g.get("name") == "policy"] or groups[:1]
        elements = tuple(read[0].get("element_names") or ()) if read else ()
        if not elements or len(elements) != int(metadata.get("obs_dim", -1)):
            raise UserError("the export's metadata does not name every element of the policy's observation (observation.groups)")
        n = len(robot["joint_names"])
        period, sim_period, substeps = float(robot["control_period_s"]), float(robot["sim_period_s"]), int(robot["sim_substeps"])
        if substeps < 1 or sim_period <= 0 or abs(period - sim_period * substeps) > 1e-9 * max(period, 1.0):
            raise UserError(
                f"the export's robot.control_period_s ({period:g} s) is not robot.sim_substeps ({substeps}) "
                f"x robot.sim_period_s ({sim_period:g} s): its timing contradicts itself"
            )
        gait = robot.get("gait_phase") or {}
        ctrl_range = _per_joint_ranges(robot["ctrl_range"], n) if "ctrl_range" in robot else None
        return cls(
            joint_names=tuple(robot["joint_names"]),
            default_pose=_per_joint(robot["default_pose"], n, "default_pose") if "default_pose" in robot else None,
            action_scale=float(robot["action_scale"]),
            kp=_per_joint(robot["kp"], n, "kp"),
            joint_damping=_per_joint(robot["kd_parts"]["joint_damping"], n, "kd_parts.joint_damping"),
            actuator_damping=_per_joint(robot["kd_parts"]["actuator_damping"], n, "kd_parts.actuator_damping"),
            control_period_s=float(robot["control_period_s"]),
            sim_period_s=float(robot["sim_period_s"]),
            sim_substeps=int(robot["sim_substeps"]),
            elements=elements,
            sources={str(k): dict(v) for k, v in robot["observation_sources"].items()},
            command_names=tuple(robot.get("command_names") or ()),
            gait_initial_rad=tuple(float(v) for v in gait.get("initial_rad", ())),
            gait_frequency_hz_range=tuple(gait["frequency_hz_range"]) if "frequency_hz_range" in gait else None,
            gait_hold_rad=float(gait["hold_rad"]) if "hold_rad" in gait else None,
            gait_hold_command_norm=float(gait.get("hold_while_command_norm_at_most", 0.0)),
            action_low=np.asarray(metadata["action_low"], dtype=np.float64) if "action_low" in metadata else None,
            action_high=np.asarray(metadata["action_high"], dtype=np.float64) if "action_high" in metadata else None,
            action_rule=rule,
            initial_target=_per_joint(robot["initial_target"], n, "initial_target") if "initial_target" in robot else None,
            ctrl_low=None if ctrl_range is None else ctrl_range[:, 0].copy(),
            ctrl_high=None if ctrl_range is None else ctrl_range[:, 1].copy(),
        )

    @property
    def resting_target(self) -> np.ndarray:
        """The targets before the first action: robot.initial_target where the export has one (the
        previous_target rule's, or the zeros Spot's reset writes), else the default pose."""
        return self.default_pose if self.initial_target is None else self.initial_target


def configure_model(model: mujoco.MjModel, contract: RobotContract) -> None:
    """Give the model the contract's PD loop and timing: actuator i (the joint `joint_names[i]`) is a
    position servo with gain kp[i] and velocity term -actuator_damping[i], the joint's damping is
    joint_damping[i], and the physics steps at sim_period_s."""
    if model.nu != len(contract.joint_names):
        raise UserError(f"the model has {model.nu} actuators, the export's robot.joint_names {len(contract.joint_names)}")
    for i, name in enumerate(contract.joint_names):
        joint = _joint(model, name)
        if model.actuator_trnid[i, 0] != joint.id:
            driven = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, int(model.actuator_trnid[i, 0]))
            raise UserError(f"actuator {i} of the model drives joint {driven}, the export's robot.joint_names[{i}] is {name}")
        model.actuator_gainprm[i, 0] = contract.kp[i]
        model.actuator_biasprm[i, :3] = (0.0, -contract.kp[i], -contract.actuator_damping[i])
        model.dof_damping[joint.dofadr[0]] = contract.joint_damping[i]
    model.opt.timestep = contract.sim_period_s


def _joint(model: mujoco.MjModel, name: str):
    try:
        return model.joint(name)
    except KeyError:
        raise UserError(f"the export names joint {name}, which the model does not have") from None


class _History:
    """One element key's readings of a source over the controller's observations, newest first;
    zeros before the episode's first."""

    def __init__(self, read):
        self.read = read
        self.values = [0.0]

    def keep(self, age: int) -> None:
        self.values += [0.0] * (age + 1 - len(self.values))

    def clear(self) -> None:
        self.values = [0.0] * len(self.values)

    def record(self, data: mujoco.MjData) -> None:
        self.values = [self.read(data), *self.values[:-1]]


class Controller:
    """One robot's control loop on a MuJoCo model and data: `observation` after every control
    period, `act` with the policy's action. Keeps what the policy saw in training besides the
    sensors: the previous action, the command, the gait clock, the targets the actuators hold and
    the histories of readings the observation shows."""

    def __init__(self, model: mujoco.MjModel, contract: RobotContract):
        self.contract = contract
        self.model = model
        self._histories: dict[tuple[str, str], _History] = {}  # (inner source, element key) -> its readings
        self._readers = [self._reader(name) for name in contract.elements]
        n = len(contract.joint_names)
        self.previous_action = np.zeros(n)
        self._pending_action = np.zeros(n)
        self.command = np.zeros(len(contract.command_names))
        self.phase = np.asarray(contract.gait_initial_rad, dtype=np.float64)
        self._phase_step = 0.0
        self._stepped = False
        self._acted_command = self.command
        self.target = self._resting()
        self.held_target = self.target.copy()

    def _resting(self) -> np.ndarray:
        rest = self.contract.resting_target
        return np.zeros(len(self.contract.joint_names)) if rest is None else np.array(rest, dtype=np.float64)

    def reset(self, command: np.ndarray | None = None, gait_frequency_hz: float | None = None) -> None:
        """A new episode: no previous action, the targets at rest, the clock at its start."""
        self.previous_action[:] = 0.0
        self._pending_action[:] = 0.0
        self._stepped = False
        self.target = self._resting()
        self.held_target = self.target.copy()
        for history in self._histories.values():
            history.clear()
        if command is not None:
            self.command = np.asarray(command, dtype=np.float64).copy()
        self.phase = np.asarray(self.contract.gait_initial_rad, dtype=np.float64)
        if len(self.phase):
            if gait_frequency_hz is None:
                raise UserError("this robot's policy reads a gait clock: give its frequency (robot.gait_phase.frequency_hz_range)")
            self._phase_step = 2.0 * math.pi * self.contract.control_period_s * gait_frequency_hz

    def observation(self, data: mujoco.MjData) -> np.ndarray:
        """The policy's observation now (after a reset, then once per control period after the
        physics steps). As in training, the controller's own state in it lags by one control
        period: the action is the one sent before the most recent, the gait clock the one before
        this period's advance; both move on after they are read. A history records this period's
        reading before the observation shows it."""
        for history in self._histories.values():
            history.record(data)
        obs = np.array([read(data) for read in self._readers], dtype=np.float32)
        if self._stepped:
            self.previous_action = self._pending_action.copy()
            if len(self.phase):
                self.phase = np.mod(self.phase + self._phase_step + math.pi, 2.0 * math.pi) - math.pi
                hold = self.contract.gait_hold_rad  # the clock stops while the period's command was zero
                if hold is not None and np.linalg.norm(self._acted_command) <= self.contract.gait_hold_command_norm:
                    self.phase[:] = hold
            self._stepped = False
        return obs

    def act(self, action: np.ndarray, data: mujoco.MjData) -> np.ndarray:
        """Write the targets of `action` into data.ctrl and return them: default pose +
        action_scale * action (MuJoCo clamps them to the actuators' ctrlrange), or under the
        previous_target rule the last targets moved by action_scale * action, clipped to
        robot.ctrl_range (they are the next action's starting point). `held_target` is what the
        actuators hold: the targets within robot.ctrl_range, where MuJoCo clamps them."""
        action = np.asarray(action, dtype=np.float64).reshape(-1)
        c = self.contract
        if c.action_low is not None:
            action = np.clip(action, c.action_low, c.action_high)
        self._pending_action = action.copy()
        self._acted_command = self.command.copy()  # the command of this control period
        self._stepped = True
        if c.action_rule == "previous_target":
            self.target = np.clip(self.target + action * c.action_scale, c.ctrl_low, c.ctrl_high)
        else:
            self.target = c.default_pose + c.action_scale * action
        self.held_target = self.target if c.ctrl_low is None else np.clip(self.target, c.ctrl_low, c.ctrl_high)
        data.ctrl[: len(self.target)] = self.target
        return self.target.copy()

    def step_physics(self, data: mujoco.MjData) -> None:
        """One control period of physics."""
        for _ in range(self.contract.sim_substeps):
            mujoco.mj_step(self.model, data)

    # --- one element's reader ----------------------------------------------------------------
    def _reader(self, element: str):
        found = source_of(element, self.contract.sources)
        if found is None:
            raise UserError(
                f"the export's robot.observation_sources does not say where {element.split(':')[0]} (element {element}) is read"
            )
        quantity, key = found
        return self._read(self.contract.sources[quantity], quantity, key, element)

    def _read(self, source: dict[str, Any], quantity: str, key: str, element: str):
        """The reader of `source` for the element `element` (`quantity`:`key`)."""
        model, c = self.model, self.contract
        if "history" in source:
            return self._history_reader(source, quantity, key, element)
        if "minus" in source:
            plus = self._read({k: v for k, v in source.items() if k != "minus"}, quantity, key, element)
            minus = self._read(source["minus"], quantity, key, element)
            return lambda data: plus(data) - minus(data)
        if "sensor" in source:
            adr = int(model.sensor(source["sensor"]).adr[0]) + AXES[key]
            return lambda data: data.sensordata[adr]
        if "site_gravity" in source:
            site, k = int(model.site(source["site_gravity"]).id), AXES[key]
            return lambda data: -data.site_xmat[site, 6 + k]
        for kind, find, field in (
            ("site_pos", model.site, "site_xpos"),
            ("site_xmat", model.site, "site_xmat"),
            ("body_pos", model.body, "xpos"),
            ("body_xmat", model.body, "xmat"),
        ):
            if kind in source:
                row, k = int(_named(find, source[kind], kind)), AXES[key] if kind.endswith("pos") else _entry(key)
                return lambda data: getattr(data, field)[row, k]
        if "free_joint" in source:
            body = _named(model.body, source["body"], "body")
            which = source["free_joint"]
            k = FREE_JOINT[which].index(key)
            if which == "qvel":
                dof = int(model.jnt_dofadr[model.body_jntadr[body]]) + k
                return lambda data: data.qvel[dof]
            adr = int(model.jnt_qposadr[model.body_jntadr[body]]) + k
            return lambda data: data.qpos[adr]
        if "joint" in source:
            joint = _joint(model, key)
            if source["joint"] == "qvel":
                dof = int(joint.dofadr[0])
                return lambda data: data.qvel[dof]
            qpos = int(joint.qposadr[0])
            default = c.default_pose[c.joint_names.index(key)] if source["joint"] == "qpos - default_pose" else 0.0
            return lambda data: data.qpos[qpos] - default
        what = source.get("controller")
        if what == "previous_action":
            i = c.joint_names.index(key)
            return lambda data: self.previous_action[i]
        if what == "target":
            i = c.joint_names.index(key)
            return lambda data: self.held_target[i]
        if what == "command":
            i = c.command_names.index(element)
            return lambda data: self.command[i]
        if what in ("gait_phase_cos", "gait_phase_sin"):
            foot = [name.split(":", 1)[1] for name in c.elements if name.startswith(quantity + ":")].index(key)
            trig = math.cos if what == "gait_phase_cos" else math.sin
            return lambda data: trig(self.phase[foot])
        raise UserError(f"robot.observation_sources.{quantity}: unknown source {source}")

    def _history_reader(self, source: dict[str, Any], quantity: str, key: str, element: str):
        """`source["history"]`'s reading for `key`, `source["age"]` observations ago; the ages of
        one reading share its record."""
        age = source.get("age")
        if not isinstance(age, int) or age < 0:
            raise UserError(f"robot.observation_sources.{quantity}: a history needs an age >= 0 (observations ago), not {age!r}")
        inner = source["history"]
        name = (json.dumps(inner, sort_keys=True), key)
        if name not in self._histories:
            self._histories[name] = _History(self._read(inner, quantity, key, element))
        history = self._histories[name]
        history.keep(age)
        return lambda data: history.values[age]


def _named(find, name: str, what: str) -> int:
    try:
        return int(find(name).id)
    except KeyError:
        raise UserError(f"the export names {what} {name}, which the model does not have") from None


def _entry(key: str) -> int:
    """A rotation matrix's entry "rc" (row, column) in its row-major 9 values."""
    return 3 * int(key[0]) + int(key[1])


@dataclass
class Drive:
    """One robot driven from a keyframe with a fixed command: what the policy saw and did per control
    step, and what examples/cpp/robot_controller.cpp prints for the same run."""

    observations: np.ndarray  # [steps, obs_dim] float32, each after its step's physics
    actions: np.ndarray  # [steps, action_dim] float32
    planar_error: float  # mean |command xy - measured xy velocity| (m/s), 0 when the policy reads neither
    yaw_error: float  # mean |command yaw rate - measured yaw rate| (rad/s)
    fell_at: int | None  # the first step whose gravity reading points up, None without a fall


def drive(
    policy,
    xml_path: str,
    metadata: dict[str, Any],
    command: np.ndarray,
    steps: int,
    keyframe: str = "home",
    gait_frequency_hz: float | None = None,
) -> Drive:
    """The controller loop of examples/cpp/robot_controller.cpp in Python: the model from `xml_path`
    given the contract's PD loop and timing, reset to `keyframe`, then `steps` control periods of
    `policy` (an exported module, called on one raw observation)."""
    # Only this loop runs the policy: the controller itself needs no torch (as the C++ one), and sim2sim
    # imports this module for the robustness grid, which refuses a wrong run path without torch
    # (tests/runs/test_resume.py checks it).
    import torch

    contract = RobotContract.from_metadata(metadata)
    model = mujoco.MjModel.from_xml_path(xml_path)
    configure_model(model, contract)
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, model.key(keyframe).id)
    mujoco.mj_forward(model, data)
    controller = Controller(model, contract)
    controller.reset(np.asarray(command, dtype=np.float64), gait_frequency_hz)
    if hasattr(policy, "reset"):
        policy.reset()
    elements = contract.elements
    where = {name: elements.index(name) for name in ("linvel:x", "linvel:y", "gyro:z", "gravity:z") if name in elements}
    obs, observations, actions = controller.observation(data), [], []
    for _ in range(steps):
        with torch.no_grad():
            action = policy(torch.as_tensor(obs)).numpy()
        controller.act(action, data)
        controller.step_physics(data)
        obs = controller.observation(data)
        observations.append(obs)
        actions.append(np.asarray(action, dtype=np.float32).reshape(-1))
    observed, command = np.array(observations), np.asarray(command, dtype=np.float64)
    planar = yaw = 0.0
    if "linvel:x" in where and "linvel:y" in where:
        planar = float(np.mean(np.hypot(command[0] - observed[:, where["linvel:x"]], command[1] - observed[:, where["linvel:y"]])))
    if "gyro:z" in where:
        yaw = float(np.mean(np.abs(command[2] - observed[:, where["gyro:z"]])))
    fell = np.flatnonzero(observed[:, where["gravity:z"]] > 0.0) if "gravity:z" in where else np.zeros(0)
    return Drive(observed, np.array(actions), planar, yaw, int(fell[0]) if len(fell) else None)
