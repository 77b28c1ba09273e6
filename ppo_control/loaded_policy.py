"""A trained policy as a plain callable (numpy in, numpy out), from a run, a checkpoint or an export."""

from __future__ import annotations

import json
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ppo_control.errors import UserError


class Policy:
    """The deterministic policy: `policy(obs)` maps a raw observation, [obs_dim] or [batch, obs_dim],
    to the clipped mean action of the same leading shape (float32 numpy).

    `reset()` is to be called at each episode start. These policies keep no state between steps, so
    it does nothing now; calling it keeps a control loop right for stateful policies too.
    """

    def __init__(self, act: Callable[[np.ndarray], np.ndarray], obs_dim: int, action_dim: int, source: Path, metadata: dict[str, Any]):
        self._act = act
        self.obs_dim, self.action_dim = obs_dim, action_dim
        self.source = source
        self.metadata = metadata

    def __call__(self, obs: Any) -> np.ndarray:
        obs = np.asarray(obs, dtype=np.float32)
        if obs.ndim not in (1, 2) or obs.shape[-1] != self.obs_dim:
            raise UserError(
                f"policy from '{self.source}' takes observations of shape [{self.obs_dim}] or "
                f"[batch, {self.obs_dim}]; got shape {list(obs.shape)}"
            )
        return self._act(obs)

    def reset(self) -> None:
        """Start of an episode (no state to clear in a feed-forward policy)."""

    def __repr__(self) -> str:
        return f"Policy(obs_dim={self.obs_dim}, action_dim={self.action_dim}, source='{self.source}')"


def load_policy(path: Path, checkpoint: str | None = None) -> Policy:
    """A run directory, a training checkpoint, or an exported TorchScript/ONNX file."""
    if path.is_dir():
        return _from_run(path, checkpoint)
    if not path.is_file():
        raise UserError(f"'{path}' does not exist; give a run directory, a checkpoint (.pt) or an export (.pt, .onnx)")
    if path.suffix == ".onnx":
        return _from_onnx(path)
    if _is_torchscript(path):
        return _from_torchscript(path)
    return _from_run(path.parent.parent, str(path))  # <run>/checkpoints/<name>.pt


def _is_torchscript(path: Path) -> bool:
    """TorchScript archives hold compiled code; training checkpoints hold only pickled tensors."""
    try:
        with zipfile.ZipFile(path) as archive:
            return any("/code/" in name for name in archive.namelist())
    except zipfile.BadZipFile:
        return False


def _from_run(run_dir: Path, checkpoint: str | None) -> Policy:
    from ppo_control.runs import load_run

    loaded = load_run(run_dir, checkpoint)
    policy, index = loaded.policy, loaded.policy.actor_index
    obs_dim = loaded.env_info.obs_dim if index is None else len(index)  # like an export: the actor's groups only

    def act(obs: np.ndarray) -> np.ndarray:
        obs_t = torch.from_numpy(obs)
        if index is not None:  # place them in the full layout; the actor reads nothing else
            full = torch.zeros(*obs_t.shape[:-1], loaded.env_info.obs_dim)
            full[..., index] = obs_t
            obs_t = full
        with torch.inference_mode():
            return policy.deterministic_action(obs_t).numpy()

    metadata = {"task": str(loaded.cfg.task), "env_id": str(loaded.cfg.env.id), "step": int(loaded.state["step"])}
    return Policy(act, obs_dim, loaded.env_info.action_dim, loaded.checkpoint_path, metadata)


def _from_torchscript(path: Path) -> Policy:
    from ppo_control.deploy import METADATA_FILE

    extra = {METADATA_FILE: ""}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit is deprecated in torch >= 2.10
        module = torch.jit.load(str(path), _extra_files=extra)

    def act(obs: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            return module(torch.from_numpy(obs)).numpy()

    return Policy(act, int(module.obs_dim), int(module.action_dim), path, json.loads(extra[METADATA_FILE] or "{}"))


def _from_onnx(path: Path) -> Policy:
    try:
        import onnxruntime
    except ImportError:
        raise UserError("loading an ONNX policy needs onnxruntime (pip install onnxruntime)") from None
    from ppo_control.deploy import METADATA_FILE, ONNX_INPUT

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    metadata = json.loads(session.get_modelmeta().custom_metadata_map.get(METADATA_FILE, "{}"))

    def act(obs: np.ndarray) -> np.ndarray:
        batch = obs.reshape(-1, obs.shape[-1])  # the graph takes [batch, obs_dim]
        action = session.run(None, {ONNX_INPUT: batch})[0]
        return action[0] if obs.ndim == 1 else action

    return Policy(act, int(metadata["obs_dim"]), int(metadata["action_dim"]), path, metadata)
