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

from ppo_control.config.errors import UserError
from ppo_control.deploy.module import METADATA_FILE, ONNX_HISTORY_INPUT, ONNX_INPUT, ONNX_RNN_INPUT
from ppo_control.rl.history import ObservationHistory
from ppo_control.runs.directory import load_run


class LoadedPolicy:
    """The deterministic policy: `policy(obs)` maps a raw observation, [obs_dim] or [batch, obs_dim],
    to the clipped mean action of the same leading shape (float32 numpy).

    `reset()` is to be called at each episode start. A policy with observation history (`history`
    > 1) keeps its previous observations between calls: each call is one control step, and the
    batch size stays the same within an episode. Without history, reset() does nothing, and
    calling it keeps a control loop right for either.
    """

    def __init__(
        self,
        act: Callable[[np.ndarray], np.ndarray],
        obs_dim: int,
        action_dim: int,
        source: Path,
        metadata: dict[str, Any],
        reset: Callable[[], None] | None = None,
        history: int = 1,
    ):
        self._act = act
        self._reset = reset
        self.obs_dim, self.action_dim, self.history = obs_dim, action_dim, history
        self.source = source
        self.metadata = metadata

    def __call__(self, obs: Any) -> np.ndarray:
        # Contiguous, so that the same observation gives the same action whatever array it was
        # sliced from (a strided input takes another matmul kernel, a last-bit different action).
        obs = np.ascontiguousarray(obs, dtype=np.float32)
        if obs.ndim not in (1, 2) or obs.shape[-1] != self.obs_dim:
            raise UserError(
                f"policy from '{self.source}' takes observations of shape [{self.obs_dim}] or "
                f"[batch, {self.obs_dim}]; got shape {list(obs.shape)}"
            )
        return self._act(obs)

    def reset(self) -> None:
        """Start of an episode: forget the previous observations (nothing to do without history)."""
        if self._reset is not None:
            self._reset()

    def __repr__(self) -> str:
        return f"LoadedPolicy(obs_dim={self.obs_dim}, action_dim={self.action_dim}, history={self.history}, source='{self.source}')"


def load_policy(path: Path, checkpoint: str | None = None) -> LoadedPolicy:
    """A run directory, a training checkpoint, or an exported TorchScript/ONNX file."""
    if path.is_dir():
        return _from_run(path, checkpoint)
    if not path.is_file():
        raise UserError(f"'{path}' does not exist; give a run directory, a checkpoint (.pt) or an export (.pt, .onnx)")
    if path.suffix == ".onnx":
        return load_onnx(path)
    if is_torchscript(path):
        return load_torchscript(path)
    return _from_run(path.parent.parent, str(path))  # <run>/checkpoints/<name>.pt


def is_torchscript(path: Path) -> bool:
    """TorchScript archives hold compiled code; training checkpoints hold only pickled tensors."""
    try:
        with zipfile.ZipFile(path) as archive:
            return any("/code/" in name for name in archive.namelist())
    except zipfile.BadZipFile:
        return False


def _from_run(run_dir: Path, checkpoint: str | None) -> LoadedPolicy:
    loaded = load_run(run_dir, checkpoint)
    policy, index = loaded.policy, loaded.policy.actor_frame_index
    obs_dim = loaded.env_info.obs_dim if index is None else len(index)  # like an export: the actor's groups only
    stateful = policy.history > 1 or policy.recurrent
    history = ObservationHistory(policy.history)
    state: list[torch.Tensor | None] = [None]  # the recurrent state between calls

    def act(obs: np.ndarray) -> np.ndarray:
        frame = obs.reshape(-1, obs_dim)
        if index is not None:  # place them in the full layout; the actor reads nothing else
            full = np.zeros((len(frame), loaded.env_info.obs_dim), dtype=np.float32)
            full[:, index.numpy()] = frame
            frame = full
        if not stateful or history.stacked is None:  # an episode's first step (or no state at all)
            stacked, state[0] = history.reset(frame), policy.initial_state(len(frame))
        elif len(history.stacked) != len(frame):
            raise UserError(f"the batch size changed from {len(history.stacked)} to {len(frame)} within an episode; call reset() first")
        else:
            stacked = history.step(frame, np.zeros(len(frame), dtype=bool))
        with torch.inference_mode():
            action, state[0] = policy.deterministic_step(torch.from_numpy(stacked), state[0])
        action = action.numpy()
        return action[0] if obs.ndim == 1 else action

    def reset() -> None:
        history.stacked = None

    metadata = {"task": str(loaded.cfg.task), "env_id": str(loaded.cfg.env.id), "step": int(loaded.state["step"])}
    return LoadedPolicy(act, obs_dim, loaded.env_info.action_dim, loaded.checkpoint_path, metadata, reset, policy.actor_history)


def load_torchscript(path: Path) -> LoadedPolicy:
    """An exported TorchScript file, through plain torch.jit.load (its state lives in the module)."""
    extra = {METADATA_FILE: ""}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit is deprecated in torch >= 2.10
        module = torch.jit.load(str(path), _extra_files=extra)

    def act(obs: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            try:
                return module(torch.from_numpy(obs)).numpy()
            except torch.jit.Error as exc:  # the stateful module's batch-size check
                raise UserError(f"policy from '{path}': {str(exc).strip().splitlines()[-1].split('Error: ')[-1]}") from None

    history = int(getattr(module, "history", 1))  # exports older than history support have none
    reset = module.reset if hasattr(module, "reset") else None
    return LoadedPolicy(act, int(module.obs_dim), int(module.action_dim), path, json.loads(extra[METADATA_FILE] or "{}"), reset, history)


def load_onnx(path: Path) -> LoadedPolicy:
    """An exported ONNX file through onnxruntime; its state (history, recurrent state) is fed back
    from call to call here, as a controller would: at an episode start the first observation
    repeated as history and a zero recurrent state."""
    try:
        import onnxruntime  # the onnx extra (pip install -e ".[onnx]")
    except ImportError:
        raise UserError("loading an ONNX policy needs onnxruntime (pip install onnxruntime)") from None

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    metadata = json.loads(session.get_modelmeta().custom_metadata_map.get(METADATA_FILE, "{}"))
    history, rnn_state_size = int(metadata.get("history", 1)), int(metadata.get("rnn_state_size", 0))
    state_inputs = [name for name, used in ((ONNX_HISTORY_INPUT, history > 1), (ONNX_RNN_INPUT, rnn_state_size > 0)) if used]
    state: dict[str, np.ndarray] = {}  # what the graph handed back last step; empty after reset

    def act(obs: np.ndarray) -> np.ndarray:
        batch = obs.reshape(-1, obs.shape[-1])  # the graph takes [batch, obs_dim]
        if state_inputs and not state:  # an episode start
            state[ONNX_HISTORY_INPUT] = np.repeat(batch[:, None], history - 1, axis=1)
            state[ONNX_RNN_INPUT] = np.zeros((len(batch), rnn_state_size), dtype=np.float32)
        elif state and len(state[ONNX_RNN_INPUT]) != len(batch):
            before = len(state[ONNX_RNN_INPUT])
            raise UserError(f"the batch size changed from {before} to {len(batch)} within an episode; call reset() first")
        action, *next_state = session.run(None, {ONNX_INPUT: batch, **{name: state[name] for name in state_inputs}})
        state.update(zip(state_inputs, next_state))
        return action[0] if obs.ndim == 1 else action

    return LoadedPolicy(act, int(metadata["obs_dim"]), int(metadata["action_dim"]), path, metadata, state.clear, history)
