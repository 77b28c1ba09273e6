"""The exported file on the robot's MuJoCo reference, driven through its metadata alone, as
`python -m ppo_control.sim2sim` runs it (the command's usage and description:
ppo_control/sim2sim.py): the controller loop, the perturbations of the world, the episodes and
their table.

Loading this module loads mujoco (the controller, the reference) but not torch: the modules that
load torch (the policy, the episode loop, the video) are imported inside the functions that use
them, because the robustness grid imports `drive` and refuses a wrong run path without torch
(tests/runs/test_resume.py checks it).
"""

from __future__ import annotations

import json
import math
from collections import deque
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import OmegaConf

from ppo_control.config import ConfigError, Sim2SimArgs, parse_command_args
from ppo_control.config.errors import CheckFailed, UserError
from ppo_control.deploy.controller import Controller, RobotContract, configure_model
from ppo_control.envs.joystick import tracking_indices
from ppo_control.envs.mujoco import REFERENCE_TASKS, has_reference, make_reference_vec_env

OUT_DIR = "sim2sim"  # inside the run directory
OUT_FILE = "sim2sim.json"


def check_args(args) -> None:
    if args.run is None and args.export is None:
        raise ConfigError("sim2sim: give run=<run_dir> (its export/policy.pt) or export=<file>")
    for key, ok, allowed in (
        ("episodes", lambda v: v >= 1, ">= 1"),
        ("latency", lambda v: 0 <= v <= 10, "between 0 and 10 control periods"),
        ("friction", lambda v: 0.05 <= v <= 5.0, "a scale between 0.05 and 5"),
        ("added_mass", lambda v: -5.0 <= v <= 20.0, "kg between -5 and 20"),
        ("kp_scale", lambda v: 0.1 <= v <= 5.0, "a scale between 0.1 and 5"),
    ):
        if not ok(args[key]):
            raise ConfigError(f"sim2sim: {key}={args[key]} is not allowed: {key} must be {allowed}")


def export_path(args) -> Path:
    if args.export is not None:
        path = Path(args.export)
    else:
        path = Path(args.run) / "export" / "policy.pt"
        if not path.is_file():
            raise UserError(
                f"'{path}' does not exist: export the run first (python -m ppo_control.export run={args.run}) or give export=<file>"
            )
    if not path.is_file():
        raise UserError(f"export '{path}' does not exist; give an exported policy file (.pt TorchScript or .onnx)")
    from ppo_control.deploy.loading import is_torchscript  # loads torch: see the module's docstring

    if path.suffix != ".onnx" and not is_torchscript(path):
        raise UserError(f"'{path}' is not an exported policy (TorchScript or ONNX): sim2sim runs what `export` wrote, never a checkpoint")
    return path


class ControllerLoop:
    """A reference world whose robots are driven by controllers built from an export's contract.

    `reset` and `step` follow the VecEnv protocol's shapes: observations are what each robot's
    controller reads from its MuJoCo data, `step` takes the policy's actions, turns them into PD
    targets through the contract (after `latency` control periods) and steps the world with them.
    The world's own observation (its noise, its layout) is never shown to the policy; it scores the
    episodes (reward terms, falls, tracking error from the simulator's state)."""

    def __init__(self, world, contract, latency: int = 0):
        self.world, self.contract, self.task = world, contract, world.task
        self.num_envs = world.num_envs
        self.controllers = [Controller(self.task.physics.model(i), contract) for i in range(self.num_envs)]
        self._queue: deque[np.ndarray] = deque()
        self.latency = int(latency)

    def _command(self, i: int) -> np.ndarray | None:
        """Sub-env i's joystick command, None for a task without one (a manipulator)."""
        command = getattr(self.task, "command", None)
        return None if command is None else np.asarray(command[i], dtype=np.float64).copy()

    def _observe(self) -> np.ndarray:
        rows = []
        for i, controller in enumerate(self.controllers):
            command = self._command(i)
            if command is not None:
                controller.command = command
            rows.append(controller.observation(self.task.physics.data[i]))
        return np.stack(rows)

    def reset(self, seed: int) -> np.ndarray:
        self.world_obs = self.world.reset(seed)  # the world's own view: for the video's overlay
        phase_dt = getattr(self.task, "phase_dt", None)  # a humanoid's gait clock: its step per control period
        for i, controller in enumerate(self.controllers):
            frequency = None if phase_dt is None else float(phase_dt[i] / (2.0 * math.pi * self.task.control_period_s))
            controller.reset(command=self._command(i), gait_frequency_hz=frequency)
        hold = np.broadcast_to(self.contract.resting_target, (self.num_envs, self.task.action_dim))  # until the first action arrives
        self._queue = deque([hold] * self.latency)
        return self._observe()

    def step(self, actions: np.ndarray):
        """The policy's actions: PD targets by the contract, delivered `latency` periods later, in
        the world's action units (its action rule: `actions_for_targets`) so that it writes those
        targets."""
        targets = np.stack([c.act(a, data) for c, a, data in zip(self.controllers, actions, self.task.physics.data)])
        self._queue.append(targets)
        result = self.world.step(self.task.actions_for_targets(self._queue.popleft()))
        return result, self._observe()


@dataclass(frozen=True)
class Perturbation:
    """The real robot against the trained one: what sim2sim and a robot's robustness grid vary."""

    latency: int = 0  # control periods between an observation and its action reaching the motors
    friction: float = 1.0  # scale of every geom's sliding friction
    mass_scale: float = 1.0  # scale of every body's mass and inertia
    added_mass: float = 0.0  # kg added to the base (after the scale)
    kp_scale: float = 1.0  # the motors' gain against the contract's


def perturb_world(world, contract, perturbation: Perturbation) -> None:
    """The contract's PD loop and timing on the world's model (as a controller configures its
    robot), then the perturbations of the real robot against it."""
    model, p = world.mj_model, perturbation  # the model is shared by every sub-env
    configure_model(model, replace(contract, kp=contract.kp * p.kp_scale))
    world.task.substeps = contract.sim_substeps  # the controller's control period, not the world's
    model.geom_friction[:, 0] *= p.friction
    model.body_mass[:] *= p.mass_scale
    model.body_inertia[:] *= p.mass_scale
    if p.added_mass:
        base = getattr(world.task, "torso_body", None)
        if base is None:
            raise UserError(f"sim2sim: added_mass={p.added_mass}: {world.task.env_id}'s robot has no floating base to add it to; use 0")
        if model.body_mass[base] + p.added_mass <= 0:
            raise UserError(f"sim2sim: added_mass={p.added_mass} leaves the base with no mass (it weighs {model.body_mass[base]:.2f} kg)")
        model.body_inertia[base] *= (model.body_mass[base] + p.added_mass) / model.body_mass[base]
        model.body_mass[base] += p.added_mass


def drive(policy, metadata: dict[str, Any], env_kwargs: dict[str, Any], episodes: int, seed: int, perturbation: Perturbation, record=None):
    """`policy` (a LoadedPolicy) driving the reference of metadata's robot through the contract in
    `metadata` (an export's, or one built the same way for a checkpoint), episodes as long as the
    run's (metadata's max_episode_steps): (Evaluation, the recorded sub-env's PhysicsEpisode or None,
    the world's model, its control period)."""
    contract = RobotContract.from_metadata(metadata)
    env_id = str(metadata.get("env_id", ""))
    if not has_reference(env_id):
        raise UserError(f"{env_id or 'this export'} has no MuJoCo reference; robots with one: {', '.join(REFERENCE_TASKS)}")
    world = make_reference_vec_env(env_id, episodes, env_kwargs, max_episode_steps=metadata.get("max_episode_steps"))
    try:
        perturb_world(world, contract, perturbation)
        evaluation, episode = run_episodes(ControllerLoop(world, contract, perturbation.latency), policy, seed, record)
        return evaluation, episode, world.mj_model, world.control_period_s
    finally:
        world.close()


class ControlledWorld:
    """A ControllerLoop as the episode loop's vector env: the observations are the controllers'
    (what the policy reads), the rest (rewards, episode ends, final observations) the world's."""

    def __init__(self, loop: ControllerLoop):
        self.loop, self.num_envs = loop, loop.num_envs

    def reset(self, seed: int) -> np.ndarray:
        return self.loop.reset(seed)

    def step(self, actions: np.ndarray):
        result, obs = self.loop.step(actions)
        return replace(result, obs=obs)


def run_episodes(loop: ControllerLoop, policy, seed: int, record: int | None = None):
    """The first episode of every sub-env under the exported policy, stepped by evaluation's loop;
    returns (Evaluation by sub-env, the recorded sub-env's PhysicsEpisode or None)."""
    # these load torch: see the module's docstring
    from ppo_control.rendering.video import PhysicsRecorder
    from ppo_control.rl.episodes import EpisodeLoop, Episodes, PolicyMemory, numpy_act
    from ppo_control.rl.evaluation import Evaluation

    world = loop.world
    episode_loop = EpisodeLoop(ControlledWorld(loop), numpy_act(policy), PolicyMemory())
    episode_loop.reset(seed)
    policy.reset()  # the export keeps its own history and state
    recorder = None
    if record is not None:
        recorder = PhysicsRecorder(world, [record], loop.world_obs, tracking_indices(world.task.env_id, world.info.groups))
    episodes = episode_loop.run(Episodes.first(loop.num_envs), on_step=recorder)
    return Evaluation.of(episodes, by_env=True), None if recorder is None else recorder.episodes[record]


def sim2sim(**arguments: Any) -> dict[str, Any]:
    """Run the export on the reference as the module docstring says; writes and returns the result."""
    args = parse_command_args(Sim2SimArgs, arguments, "sim2sim")
    check_args(args)
    path = export_path(args)
    # these load torch: see the module's docstring
    from ppo_control.deploy.loading import load_policy
    from ppo_control.rl.evaluation import EVAL_SEED_OFFSET
    from ppo_control.runs.checkpoint import atomic_write

    policy = load_policy(path)
    run_cfg = None
    if args.run is not None and (Path(args.run) / "config.yaml").is_file():
        run_cfg = OmegaConf.load(Path(args.run) / "config.yaml")
    # The task's options as trained (a variant's among them, which change its observation): the
    # export carries them; a run's config says the same.
    kwargs = dict(policy.metadata.get("env_kwargs") or {})
    if run_cfg is not None and run_cfg.env.get("kwargs"):
        kwargs = dict(OmegaConf.to_container(run_cfg.env.kwargs))
    seed = args.seed if args.seed is not None else (int(run_cfg.seed) if run_cfg is not None else 0) + EVAL_SEED_OFFSET
    out = Path(args.out) if args.out else (Path(args.run) if args.run else path.parent) / OUT_DIR / OUT_FILE
    perturbation = Perturbation(args.latency, args.friction, 1.0, args.added_mass, args.kp_scale)
    evaluation, episode, model, dt = drive(policy, policy.metadata, kwargs, args.episodes, seed, perturbation, 0 if args.video else None)
    env_id = str(policy.metadata["env_id"])
    result = {
        "export": str(path),
        "format": "onnx" if path.suffix == ".onnx" else "torchscript",
        "env_id": env_id,
        "step": policy.metadata.get("step"),
        "weights_sha256": policy.metadata.get("weights_sha256"),
        "episodes": args.episodes,
        "seed": seed,
        "perturbation": {"latency": args.latency, "friction": args.friction, "added_mass": args.added_mass, "kp_scale": args.kp_scale},
        "return_mean": float(evaluation.returns.mean()),
        "return_std": float(evaluation.returns.std()),
        "length_mean": float(evaluation.lengths.mean()),
        "fall_rate": float(evaluation.terminated.mean()),
        "diagnostics": evaluation.diagnostics,
        "returns": evaluation.returns.tolist(),
        "lengths": evaluation.lengths.tolist(),
    }
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        if episode is not None:
            result["video"] = str(write_video(out.with_suffix(".mp4"), model, dt, episode))
        atomic_write(out, lambda tmp: Path(tmp).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"cannot write '{out}' ({exc.strerror or exc})") from None
    result["written"] = str(out)
    return result


def write_video(path: Path, model, dt: float, episode) -> Path:
    # these load torch: see the module's docstring
    from ppo_control.rendering.video import HostScene, open_frames, write_physics_episode
    from ppo_control.runs.checkpoint import atomic_write

    scene = HostScene(model)
    scene.show(episode.qpos[0], episode.qvel[0])
    frames = open_frames(scene, 640, 480)
    try:
        atomic_write(path, lambda tmp: write_physics_episode(tmp, scene, frames, episode, int(round(1.0 / dt)), dt))
    finally:
        frames.close()
    return path


# |z| beyond this for the mean return or the fall rate: more than the episodes' noise explains.
DEPARTURE_Z = 3.0


def departure(result: dict[str, Any], evaluation: dict[str, Any]) -> dict[str, Any]:
    """sim2sim's episodes against evaluate's (eval.json): Welch's z of the mean returns and the
    two-proportion z of the fall rates; `departs` when either is beyond DEPARTURE_Z."""
    ours, theirs = np.asarray(result["returns"], dtype=float), np.asarray(evaluation["returns"], dtype=float)
    spread = np.sqrt(ours.var(ddof=1) / len(ours) + theirs.var(ddof=1) / len(theirs)) if min(len(ours), len(theirs)) > 1 else 0.0
    z_return = _z(ours.mean() - theirs.mean(), spread)
    falls = np.array([result["fall_rate"], evaluation["fall_rate"]])
    pooled = (falls[0] * len(ours) + falls[1] * len(theirs)) / (len(ours) + len(theirs))
    z_falls = _z(falls[0] - falls[1], np.sqrt(pooled * (1.0 - pooled) * (1.0 / len(ours) + 1.0 / len(theirs))))
    return {"z_return": z_return, "z_falls": z_falls, "departs": max(abs(z_return), abs(z_falls)) > DEPARTURE_Z}


def _z(difference: float, spread: float) -> float:
    """difference / spread, where a zero spread makes any difference infinitely unlikely."""
    if spread > 0:
        return float(difference / spread)
    return 0.0 if difference == 0 else float(np.copysign(np.inf, difference))


def verdict(result: dict[str, Any], evaluation: dict[str, Any], check: dict[str, Any]) -> str:
    """One line: whether sim2sim agrees with evaluate, and the figures that say so."""
    figures = (
        f"return {result['return_mean']:.2f} against {evaluation['return_mean']:.2f} (z = {check['z_return']:+.1f}), "
        f"falls {result['fall_rate']:.0%} against {evaluation['fall_rate']:.0%} (z = {check['z_falls']:+.1f})"
    )
    if not check["departs"]:
        return f"sim2sim agrees with evaluate within the episodes' noise: {figures}"
    perturbed = Perturbation(**result["perturbation"]) != Perturbation()
    cause = "the perturbation" if perturbed else "the export, its contract or the controller"
    return f"sim2sim DEPARTS from evaluate beyond the episodes' noise (|z| > {DEPARTURE_Z:g}): {figures}; look at {cause}"


# The table's task measures beside return and falls, where the episodes report them: a joystick's
# tracking errors, a manipulator's success (envs/success.py).
MEASURES = (
    ("tracking_error_lin", "planar error (m/s)", "{:.3f}"),
    ("tracking_error_ang", "yaw error (rad/s)", "{:.3f}"),
    ("success/at_target_at_end", "at target at the end", "{:.0%}"),
    ("success/target_distance_at_end", "target distance at the end (m)", "{:.4f}"),
    ("success/at_target", "steps at target", "{:.1%}"),
)


def table(result: dict[str, Any], evaluation: dict[str, Any] | None) -> str:
    """sim2sim's figures, beside the run's eval.json where there is one."""
    rows = [("sim2sim (export, reference)", result)] + ([("evaluate (eval.json)", evaluation)] if evaluation else [])
    reported = {key for _, r in rows for key in r.get("diagnostics", {})}
    columns = [m for m in MEASURES if m[0] in reported] or list(MEASURES[:2])
    lines = [
        "| | return | falls | " + " | ".join(label for _, label, _ in columns) + " |",
        "|---|---:|---:|" + "---:|" * len(columns),
    ]
    for name, r in rows:
        d = r.get("diagnostics", {})
        figures = " | ".join(form.format(d[key]) if key in d else "-" for key, _, form in columns)
        lines.append(f"| {name} | {r['return_mean']:.2f} ± {r['return_std']:.2f} | {r['fall_rate']:.0%} | {figures} |")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    arguments = parse_command_args(Sim2SimArgs, argv, "sim2sim")  # parsed here: errors name the CLI keys
    eval_file = Path(arguments.run) / "eval.json" if arguments.run is not None else None
    evaluation = json.loads(eval_file.read_text()) if eval_file is not None and eval_file.is_file() else None
    if arguments.fail_on_departure and not (evaluation and evaluation.get("returns")):
        raise UserError("fail_on_departure=true compares with the run's eval.json: give run=<dir> of a run `evaluate` has written one for")
    result = sim2sim(**arguments)
    print(table(result, evaluation))
    for key in ("written", "video"):
        if key in result:
            print(f"written     {result[key]}")
    if evaluation is not None and evaluation.get("returns"):
        check = departure(result, evaluation)
        line = verdict(result, evaluation, check)
        print(line)
        if check["departs"] and arguments.fail_on_departure:
            raise CheckFailed(line)
