"""Writing a run's policy as a file a controller loads, as `python -m ppo_control.export` and
`ppo_control.export()` run it (the command's usage and description: ppo_control/export.py):
the metadata (the controller's contract), the probe episodes the written file is checked against,
and the atomic write.

Torch, and the modules that load it, are imported inside the functions that use them: the export
command refuses a wrong argument or run path without torch (tests/runs/test_resume.py checks it).
"""

from __future__ import annotations

import importlib
import json
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf

from ppo_control.config import ConfigError, ExportArgs, Overrides, parse_command_args
from ppo_control.config.errors import UserError
from ppo_control.config.resources import VERSION
from ppo_control.deploy.contract import actor_groups, controller_contract
from ppo_control.rl.history import ObservationHistory
from ppo_control.runs.layout import checkpoint_to_load

FORMATS = {"torchscript": "policy.pt", "onnx": "policy.onnx"}
EXPORT_DIR = "export"
PROBE_OBSERVATIONS = 256
PROBE_STEPS = 16  # control steps the probe observations are fed as, for a policy with history
PARITY_ATOL = 1e-5


class ExportMismatch(RuntimeError):
    """The written file does not compute what the training policy computes (a bug, not user error)."""


def parse_args(argv: Overrides) -> DictConfig:
    """`key=value` arguments (or the Python API's mapping); every mistake is a one-line error naming
    what would be valid."""
    args = parse_command_args(ExportArgs, argv, "export")
    args.format = str(args.format).lower()
    if args.format not in FORMATS:
        raise ConfigError(f"export: format={args.format!r} is not valid; choose one of: {', '.join(FORMATS)}")
    for key in ("out", "checkpoint"):
        if args[key] is not None and not str(args[key]):
            raise ConfigError(f"export: {key}= needs a value (or leave it out for the default)")
    return args


def out_path(args: DictConfig) -> Path:
    return Path(args.out) if args.out else Path(args.run) / EXPORT_DIR / FORMATS[args.format]


def require_onnx_packages() -> None:
    """format=onnx needs onnx + onnxscript (the exporter) and onnxruntime (to check the file)."""
    missing = []
    for name in ("onnx", "onnxscript", "onnxruntime"):
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if missing:
        raise UserError(
            f'format=onnx needs the packages {", ".join(missing)} (not installed); install the onnx extra: pip install -e ".[onnx]"'
        )


def check_out_path(path: Path, overwrite: bool) -> None:
    if path.is_dir():
        raise UserError(f"out='{path}' is a directory; give a file path, e.g. out={path / 'policy.pt'}")
    if path.exists() and not overwrite:
        raise UserError(f"'{path}' already exists; choose another out=<path> or pass overwrite=true to replace it (nothing was written)")


def build_metadata(loaded, fmt: str) -> dict[str, Any]:
    """Where the policy came from and how to call it; deploy.py adds dims, bounds and the weight hash."""
    # these load torch: see the module's docstring
    import torch

    from ppo_control.deploy.module import EXPORT_FORMAT_VERSION

    cfg = loaded.cfg
    return {
        # the controller's contract: control period, actuator names, observation groups (element names where proven)
        **controller_contract(cfg.env, actor_groups(loaded.env_info.groups, list(cfg.policy.actor_obs)), int(cfg.policy.actor_history)),
        "format": fmt,
        "format_version": EXPORT_FORMAT_VERSION,
        "task": str(cfg.task),
        "env_id": str(cfg.env.id),
        "env_kwargs": OmegaConf.to_container(cfg.env.kwargs) if cfg.env.kwargs else {},  # they can change the obs layout
        "max_episode_steps": loaded.env_info.max_episode_steps,
        "step": int(loaded.state.get("step", 0)),
        "seed": int(cfg.seed),
        "run": loaded.name,
        "checkpoint": loaded.checkpoint_path.name,
        "hidden_sizes": list(cfg.policy.hidden_sizes),
        "activation": str(cfg.policy.activation),
        "rnn": str(cfg.policy.rnn),  # none | gru | lstm: the recurrent layer before the actor MLP
        **call_convention(fmt, int(cfg.policy.actor_history), loaded.policy.memory.state_size if loaded.policy.recurrent else 0),
        "exported_with": f"ppo_control {VERSION}, torch {torch.__version__}, python {platform.python_version()}",
    }


def call_convention(fmt: str, history: int, rnn_state_size: int = 0) -> dict[str, str]:
    """How a controller calls the exported file: its inputs, outputs and episode starts."""
    convention = {
        "input": "obs: float32 raw observation, [obs_dim] or [batch, obs_dim] (ONNX: [batch, obs_dim] only)",
        "output": "action: float32 actor mean brought into [action_low, action_high]: clipped, or squashed (action_squash)",
        "reset": "nothing to do at an episode start (no state); reset() exists and does nothing",
    }
    kept = [f"the previous {history - 1} observations"] * (history > 1) + [f"a recurrent state of {rnn_state_size}"] * (rnn_state_size > 0)
    if not kept:
        return convention
    if fmt == "torchscript":
        convention["reset"] = (
            f"stateful: the module keeps {' and '.join(kept)}; call reset() at every episode start "
            "(the next call then starts the history with its observation and the recurrent state from zeros), "
            "and keep one module per robot and a fixed batch size"
        )
        return convention
    starts = []
    if history > 1:
        convention["input"] += f"; history: float32 [batch, {history - 1}, obs_dim], the previous raw observations, oldest first"
        convention["output"] += "; next_history: the history to pass with the next observation"
        starts.append("history = the first observation repeated")
    if rnn_state_size > 0:
        convention["input"] += f"; rnn_state: float32 [batch, {rnn_state_size}], the recurrent state"
        convention["output"] += "; next_rnn_state: the state to pass with the next observation"
        starts.append("rnn_state = zeros")
    convention["reset"] = f"at an episode start pass {' and '.join(starts)}"
    return convention


def probe_observations(policy, count: int = PROBE_OBSERVATIONS):
    """Observations around the training statistics, some far enough out to hit the clips."""
    import torch  # not at import: see the module's docstring

    generator = torch.Generator().manual_seed(0)
    stats = policy.obs_normalizer
    std = torch.sqrt(stats.var + stats.epsilon).to(torch.float32)
    scale = torch.logspace(-1, 2, count).unsqueeze(1)  # 0.1 to 100 standard deviations
    noise = torch.randn(count, std.numel(), generator=generator)
    return stats.mean.to(torch.float32) + noise * std * scale


def probe_episodes(policy, count: int = PROBE_OBSERVATIONS):
    """Probe observations as [steps, batch, obs_dim] control steps: one step of the whole batch for
    a stateless policy; for one with history or a recurrent layer, PROBE_STEPS steps with an
    episode start at the first and the middle one, so the state a stateful export keeps (and
    forgets at reset) is checked too."""
    steps = 1 if policy.history == 1 and not policy.recurrent else PROBE_STEPS
    obs = probe_observations(policy, count)
    return obs.view(count // steps, steps, -1).transpose(0, 1)  # each env's steps span the scales


def episode_starts(steps: int) -> set[int]:
    return {0, steps // 2}


def expected_actions(policy, episodes):
    """What the training policy does on `probe_episodes`' steps: [steps, batch, action_dim]."""
    import torch  # not at import: see the module's docstring

    history = ObservationHistory(policy.history)
    starts = episode_starts(len(episodes))
    actions, state = [], None
    with torch.inference_mode():
        for k, obs in enumerate(episodes.numpy()):
            if k in starts:
                stacked, state = history.reset(obs), policy.initial_state(len(obs))
            else:
                stacked = history.step(obs, np.zeros(len(obs), dtype=bool))
            action, state = policy.deterministic_step(torch.from_numpy(stacked), state)
            actions.append(action)
    return torch.stack(actions)


def run_file(path: Path, fmt: str, episodes):
    """Load `path` the way a user would (`load_policy`: plain torch.jit.load or onnxruntime, the
    state fed back as a controller would) and run it over `episodes` [steps, batch, obs_dim] (the
    actor's groups), resetting at the episode starts: (batched actions [steps, batch, action_dim],
    actions of sub-env 0 fed one observation at a time [steps, action_dim])."""
    from ppo_control.deploy.loading import load_onnx, load_torchscript  # loads torch: see the module's docstring

    starts = episode_starts(len(episodes))
    load = load_torchscript if fmt == "torchscript" else load_onnx

    def run(batch_of):
        policy, actions = load(path), []
        for k, obs in enumerate(episodes.numpy()):
            if k in starts:
                policy.reset()
            actions.append(policy(batch_of(obs)))
        return np.stack(actions)

    return run(lambda obs: obs), run(lambda obs: obs[0])


def verify_file(path: Path, fmt: str, episodes, expected) -> float:
    """Run `path` over the probe episodes and return the max |difference| from `expected`."""
    batched, single = run_file(path, fmt, episodes)
    expected = expected.numpy()
    if batched.shape != expected.shape or single.shape != expected[:, 0].shape:
        raise ExportMismatch(f"exported {fmt} returns shapes {batched.shape} and {single.shape}, expected {expected.shape}")
    return float(max(np.abs(batched - expected).max(), np.abs(single - expected[:, 0]).max()))


@dataclass(frozen=True)
class ExportResult:
    path: Path
    source_checkpoint: Path
    probe_count: int
    max_diff: float
    metadata_json: str
    obs_dim: int
    stateful: bool  # history or a recurrent state: checked over probe episodes


def export_policy(args: DictConfig) -> ExportResult:
    """Write and verify the export that `args` (see `parse_args`) describe."""
    if args.format == "onnx":
        require_onnx_packages()
    checkpoint = checkpoint_to_load(args.run, args.checkpoint)
    # these load torch: see the module's docstring
    from ppo_control.deploy import module as deploy
    from ppo_control.runs.directory import load_run

    loaded = load_run(args.run, checkpoint)
    out = out_path(args)
    check_out_path(out, args.overwrite)

    module = deploy.DeployedPolicy.from_actor_critic(loaded.policy, build_metadata(loaded, args.format))
    full_obs = probe_episodes(loaded.policy)
    expected = expected_actions(loaded.policy, full_obs)
    actor_index = loaded.policy.actor_frame_index
    obs = full_obs if actor_index is None else full_obs[..., actor_index]  # what the export is fed: the actor's groups
    max_diff: list[float] = []

    def check(tmp: Path) -> None:  # runs on the temp file, before it replaces anything
        max_diff.append(verify_file(tmp, args.format, obs, expected))
        if not max_diff[0] <= PARITY_ATOL:
            raise ExportMismatch(f"exported {args.format} differs from the training policy by {max_diff[0]:.3g} (> {PARITY_ATOL})")

    save = deploy.save_torchscript if args.format == "torchscript" else deploy.save_onnx
    try:
        save(module, out, check=check)
    except OSError as exc:
        raise UserError(f"cannot write '{out}': {exc.strerror or exc}") from None
    probes, stateful = obs.shape[0] * obs.shape[1], len(obs) > 1
    return ExportResult(out, loaded.checkpoint_path, probes, max_diff[0], module.metadata_json, module.obs_dim, stateful)


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    result = export_policy(args)
    out = result.path
    print(f"wrote {out} ({args.format}, {out.stat().st_size / 1024:.1f} KiB) from {result.source_checkpoint}")
    print(
        f"verified: matches the training policy on {result.probe_count} probe observations"
        f"{f' fed as {PROBE_STEPS} control steps with episode starts' if result.stateful else ''}, single and batched "
        f"(max |diff| {result.max_diff:.2g})"
    )
    print("metadata:")
    for key, value in json.loads(result.metadata_json).items():
        print(f"  {key}: {json.dumps(value) if not isinstance(value, str) else value}")
    print("load it:")
    print(usage_hint(out, args.format, result.obs_dim, result.stateful))


def usage_hint(out: Path, fmt: str, obs_dim: int, stateful: bool = False) -> str:
    from ppo_control.deploy.module import METADATA_FILE  # loads torch: see the module's docstring

    if fmt == "torchscript":
        return (
            f"  python: policy = torch.jit.load('{out}')  # needs only torch\n"
            + ("          policy.reset()  # at every episode start: the module keeps its state (see reset above)\n" if stateful else "")
            + f"          action = policy(torch.as_tensor(obs, dtype=torch.float32))  # obs: [{obs_dim}] or [batch, {obs_dim}], raw\n"
            f"          extra = {{'{METADATA_FILE}': ''}}; torch.jit.load('{out}', _extra_files=extra)  # fills extra\n"
            f'  C++:    torch::jit::load("{out}") with libtorch; see examples/cpp/README.md'
        )
    if stateful:
        return (
            f"  python: session = onnxruntime.InferenceSession('{out}')\n"
            "          inputs and outputs: 'input', 'output' and 'reset' above (the state goes in and comes back out)\n"
            f"          or ppo_control.api.load_policy('{out}'), which feeds the state back: action = policy(obs); policy.reset()\n"
            f"          metadata: onnx.load('{out}').metadata_props"
        )
    return (
        f"  python: session = onnxruntime.InferenceSession('{out}')\n"
        f"          action = session.run(None, {{'obs': obs.reshape(-1, {obs_dim}).astype('float32')}})[0]  # input is [batch, {obs_dim}]\n"
        f"          metadata: onnx.load('{out}').metadata_props"
    )
