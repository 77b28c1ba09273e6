"""python -m ppo_control.export run=<run_dir> [format=torchscript|onnx] [out=<path>] [checkpoint=<file>] [overwrite=false]

Writes the deterministic policy of a run (normalizer + actor + action clipping, see deploy.py) as
a file that loads without ppo_control: TorchScript for libtorch/C++ controllers, or ONNX. The file
is checked against the training policy before it is put in place, and an existing file is never
replaced unless overwrite=true.
"""

from __future__ import annotations

import importlib
import json
import platform
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from ppo_control.config import ConfigError, ExportArgs, Overrides, parse_command_args
from ppo_control.errors import UserError, run_cli

FORMATS = {"torchscript": "policy.pt", "onnx": "policy.onnx"}
EXPORT_DIR = "export"
PROBE_OBSERVATIONS = 256
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
    import torch
    from omegaconf import OmegaConf

    from ppo_control import __version__
    from ppo_control.contract import actor_groups, controller_contract
    from ppo_control.deploy import EXPORT_FORMAT_VERSION

    cfg = loaded.cfg
    return {
        # the controller's contract: control period, actuator names, observation groups (element names where proven)
        **controller_contract(cfg.env, actor_groups(loaded.env_info.groups, list(cfg.policy.actor_obs))),
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
        "input": "obs: float32 raw observation, [obs_dim] or [batch, obs_dim] (ONNX: [batch, obs_dim] only)",
        "output": "action: float32 deterministic action (actor mean) clipped to [action_low, action_high]",
        "exported_with": f"ppo_control {__version__}, torch {torch.__version__}, python {platform.python_version()}",
    }


def probe_observations(policy, count: int = PROBE_OBSERVATIONS):
    """Observations around the training statistics, some far enough out to hit the clips."""
    import torch

    generator = torch.Generator().manual_seed(0)
    stats = policy.obs_normalizer
    std = torch.sqrt(stats.var + stats.epsilon).to(torch.float32)
    scale = torch.logspace(-1, 2, count).unsqueeze(1)  # 0.1 to 100 standard deviations
    noise = torch.randn(count, std.numel(), generator=generator)
    return stats.mean.to(torch.float32) + noise * std * scale


def verify_file(path: Path, fmt: str, obs, expected) -> float:
    """Load `path` the way a user would and return the max |difference| from `expected`."""
    import numpy as np
    import torch

    if fmt == "torchscript":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit is deprecated in torch >= 2.10
            module = torch.jit.load(str(path))
        with torch.inference_mode():
            batched = module(obs).numpy()
            single = module(obs[0]).numpy()
    else:
        import onnxruntime

        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        batched = session.run(None, {"obs": obs.numpy()})[0]
        single = session.run(None, {"obs": obs[:1].numpy()})[0][0]
    expected = expected.numpy()
    if batched.shape != expected.shape or single.shape != expected[0].shape:
        raise ExportMismatch(f"exported {fmt} returns shapes {batched.shape} and {single.shape}, expected {expected.shape}")
    return float(max(np.abs(batched - expected).max(), np.abs(single - expected[0]).max()))


@dataclass(frozen=True)
class ExportResult:
    path: Path
    source_checkpoint: Path
    probe_count: int
    max_diff: float
    metadata_json: str
    obs_dim: int


def export_policy(args: DictConfig) -> ExportResult:
    """Write and verify the export that `args` (see `parse_args`) describe."""
    if args.format == "onnx":
        require_onnx_packages()

    import torch

    from ppo_control import deploy
    from ppo_control.runs import load_run

    loaded = load_run(args.run, args.checkpoint)
    out = out_path(args)
    check_out_path(out, args.overwrite)

    module = deploy.DeployedPolicy.from_actor_critic(loaded.policy, build_metadata(loaded, args.format))
    full_obs = probe_observations(loaded.policy)
    with torch.inference_mode():
        expected = loaded.policy.deterministic_action(full_obs)
    actor_index = loaded.policy.actor_index
    obs = full_obs if actor_index is None else full_obs[:, actor_index]  # what the export is fed: the actor's groups
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
    return ExportResult(out, loaded.checkpoint_path, len(obs), max_diff[0], module.metadata_json, module.obs_dim)


def main(argv: list[str]) -> None:
    args = parse_args(argv)
    result = export_policy(args)
    out = result.path
    print(f"wrote {out} ({args.format}, {out.stat().st_size / 1024:.1f} KiB) from {result.source_checkpoint}")
    print(
        f"verified: matches the training policy on {result.probe_count} probe observations, single and batched "
        f"(max |diff| {result.max_diff:.2g})"
    )
    print("metadata:")
    for key, value in json.loads(result.metadata_json).items():
        print(f"  {key}: {json.dumps(value) if not isinstance(value, str) else value}")
    print("load it:")
    print(usage_hint(out, args.format, result.obs_dim))


def usage_hint(out: Path, fmt: str, obs_dim: int) -> str:
    from ppo_control.deploy import METADATA_FILE

    if fmt == "torchscript":
        return (
            f"  python: policy = torch.jit.load('{out}')  # needs only torch\n"
            f"          action = policy(torch.as_tensor(obs, dtype=torch.float32))  # obs: [{obs_dim}] or [batch, {obs_dim}], raw\n"
            f"          extra = {{'{METADATA_FILE}': ''}}; torch.jit.load('{out}', _extra_files=extra)  # fills extra\n"
            f'  C++:    torch::jit::load("{out}") with libtorch; see examples/cpp/README.md'
        )
    return (
        f"  python: session = onnxruntime.InferenceSession('{out}')\n"
        f"          action = session.run(None, {{'obs': obs.reshape(-1, {obs_dim}).astype('float32')}})[0]  # input is [batch, {obs_dim}]\n"
        f"          metadata: onnx.load('{out}').metadata_props"
    )


if __name__ == "__main__":
    run_cli(main)
