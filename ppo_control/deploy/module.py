"""The deployable policy: raw observation in, clipped deterministic action out, nothing else.

`DeployedPolicy` is what `python -m ppo_control.export` writes, as TorchScript (for libtorch / C++
robot controllers) or ONNX. It holds only what acting needs: the observation normalizer's
statistics (float32 buffers), a copy of the actor MLP and the action bounds. No critic, no log-std,
no ppo_control code: the exported file loads with plain `torch.jit.load` or onnxruntime.

A policy trained with observation history (`policy.actor_history` > 1) is stateful: the
TorchScript module keeps the previous raw frames itself, and `reset()` (to be called at every
episode start) clears them, so the next call starts the stack with its frame repeated, as in
training. The ONNX graph is pure: the previous frames are an explicit input, `history`
[batch, history - 1, obs_dim], and output, `next_history`, which the caller feeds back; at an
episode start it passes the first observation repeated.

This module imports only torch and the standard library (onnx lazily), so it can be read, and even
copied, on its own.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import os
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

if TYPE_CHECKING:
    from ppo_control.rl.policy import ActorCritic

# Bump when the exported module's interface (inputs, outputs, attributes, metadata keys) changes.
EXPORT_FORMAT_VERSION = 1
METADATA_FILE = "metadata.json"  # name of the TorchScript extra file holding the metadata
ONNX_OPSET = 18
ONNX_INPUT = "obs"
ONNX_OUTPUT = "action"
ONNX_HISTORY_INPUT = "history"  # only for policies with history > 1
ONNX_HISTORY_OUTPUT = "next_history"
ONNX_RNN_INPUT = "rnn_state"  # only for recurrent policies
ONNX_RNN_OUTPUT = "next_rnn_state"


class NoMemory(nn.Module):
    """The recurrent layer of a feed-forward policy: none (its state has size 0)."""

    def __init__(self):
        super().__init__()
        self.state_size = 0

    def forward(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x, state


@dataclass(frozen=True)
class FrozenNormalizer:
    """The observation normalizer as an export applies it, per element of the actor's frame:
    (obs - mean) / std, clipped to +-clip; `enabled` False when the run trained without
    observation normalization (observations go in as they are)."""

    mean: torch.Tensor
    std: torch.Tensor
    clip: float
    enabled: bool


class DeployedPolicy(nn.Module):
    """obs [obs_dim] or [batch, obs_dim] (float32, raw) -> action of the same leading shape.

    Computes exactly `ActorCritic.deterministic_step`: normalize each observation frame with the
    frozen running statistics ((obs - mean) / sqrt(var + eps), clipped to +-obs_clip; skipped when
    the run trained without observation normalization), take the newest `history` frames, oldest
    first, through the recurrent layer if the policy has one (`rnn_state_size` > 0) and the actor
    MLP, bring the mean action into the action bounds: clipped, or squashed with tanh when the
    policy trained squashed (`squash`).

    State (history > 1 or a recurrent layer) lives in the module between calls and is cleared by
    `reset()`; `step` is the same computation as a pure function of explicit state (the ONNX graph).
    """

    def __init__(
        self,
        actor: nn.Sequential,
        normalizer: FrozenNormalizer,
        action_low: torch.Tensor,
        action_high: torch.Tensor,
        metadata_json: str = "{}",
        history: int = 1,
        memory: nn.Module | None = None,
        squash: bool = False,
    ):
        super().__init__()
        self.actor = actor
        self.memory = memory if memory is not None else NoMemory()
        # Plain int/bool/str attributes survive scripting: C++ reads module.attr("obs_dim"), Python
        # reads module.obs_dim. (No class-level annotations: under `from __future__ import
        # annotations` TorchScript cannot resolve them; it infers these types from the values.)
        self.obs_dim = int(normalizer.mean.numel())
        self.action_dim = int(action_low.numel())
        self.history = int(history)
        self.rnn_state_size = int(self.memory.state_size)
        self.normalize_obs = bool(normalizer.enabled)
        self.squash = bool(squash)
        self.metadata_json = metadata_json
        # The state: the previous raw frames [batch, history - 1, obs_dim] and the recurrent state
        # [batch, rnn_state_size] (plain attributes, not buffers: state, not weights). Batch 0 means
        # "after reset()": the next call starts an episode.
        self.previous_frames = torch.zeros(0, self.history - 1, self.obs_dim)
        self.rnn_state = torch.zeros(0, self.rnn_state_size)
        self.register_buffer("obs_mean", normalizer.mean.detach().to(torch.float32).clone())
        self.register_buffer("obs_std", normalizer.std.detach().to(torch.float32).clone())
        # A buffer rather than a constant so the weight hash covers it too.
        self.register_buffer("obs_clip", torch.tensor(float(normalizer.clip), dtype=torch.float32))
        self.register_buffer("action_low", action_low.detach().to(torch.float32).clone())
        self.register_buffer("action_high", action_high.detach().to(torch.float32).clone())

    @classmethod
    def from_actor_critic(cls, policy: ActorCritic, metadata: dict[str, Any] | None = None) -> DeployedPolicy:
        """Copy what acting needs out of a trained `ActorCritic` (the source is left untouched)."""
        normalizer = policy.obs_normalizer
        clip = normalizer.clip if normalizer.clip is not None else float("inf")
        # The same float64 -> float32 steps as RunningMeanStd.normalize, so results match bit for bit.
        obs_mean = normalizer.mean.to(torch.float32)
        obs_std = torch.sqrt(normalizer.var + normalizer.epsilon).to(torch.float32)
        if policy.actor_frame_index is not None:  # the export reads only the actor's groups, in the actor's order
            obs_mean, obs_std = obs_mean[policy.actor_frame_index], obs_std[policy.actor_frame_index]
        actor = _frozen_copy(policy.actor_mean)
        memory = _frozen_copy(policy.memory) if policy.memory is not None else None
        module = cls(
            actor,
            FrozenNormalizer(obs_mean.cpu(), obs_std.cpu(), clip, policy.normalize_obs),
            policy.action_low.cpu(),
            policy.action_high.cpu(),
            history=policy.actor_history,
            memory=memory,
            squash=policy.squash,
        )
        module.eval()
        if metadata is not None:
            module.metadata_json = metadata_to_json({**metadata, **module.describe()})
        return module

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        obs = obs.to(torch.float32)
        if self.history == 1 and self.rnn_state_size == 0:  # no state: any batch, any call
            return self.act(obs)
        batch = obs.unsqueeze(0) if obs.dim() == 1 else obs
        if self.rnn_state.size(0) == 0:  # the first step after reset(): the episode's first frame and zero state
            self.previous_frames = batch.unsqueeze(1).repeat(1, self.history - 1, 1)
            self.rnn_state = torch.zeros(batch.size(0), self.rnn_state_size)
        elif self.rnn_state.size(0) != batch.size(0):
            raise RuntimeError("the batch size changed within an episode; call reset() first")
        action, self.previous_frames, self.rnn_state = self.step(batch, self.previous_frames, self.rnn_state)
        return action.squeeze(0) if obs.dim() == 1 else action

    @torch.jit.export
    def reset(self) -> None:
        """Start of an episode: forget the previous frames and the recurrent state (a no-op for a
        policy without either)."""
        self.previous_frames = torch.zeros(0, self.history - 1, self.obs_dim)
        self.rnn_state = torch.zeros(0, self.rnn_state_size)

    def step(
        self, obs: torch.Tensor, previous_frames: torch.Tensor, rnn_state: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One control step as a pure function: obs [batch, obs_dim], the previous frames [batch,
        history - 1, obs_dim] and the recurrent state [batch, rnn_state_size] -> (action, the frames
        and the state to pass next time)."""
        frames = torch.cat([previous_frames, obs.unsqueeze(1)], dim=1)
        features, rnn_state = self.memory(self.normalize(frames).flatten(1), rnn_state)
        return self.bound(self.actor(features)), frames[:, 1:], rnn_state

    def act(self, obs: torch.Tensor) -> torch.Tensor:
        """The stateless action for raw observations [..., obs_dim] (history 1, no recurrent layer)."""
        return self.bound(self.actor(self.normalize(obs)))

    def normalize(self, obs: torch.Tensor) -> torch.Tensor:
        """Raw observations (any leading shape) with the frozen statistics, clipped; as they are
        when the run trained without observation normalization."""
        if not self.normalize_obs:
            return obs
        return torch.clamp((obs - self.obs_mean) / self.obs_std, -self.obs_clip, self.obs_clip)

    def bound(self, mean: torch.Tensor) -> torch.Tensor:
        """The mean action in the bounds: squashed (tanh, rescaled to them) or clipped."""
        if self.squash:
            return self.action_low + (self.action_high - self.action_low) / 2 * (torch.tanh(mean) + 1)
        return torch.maximum(torch.minimum(mean, self.action_high), self.action_low)

    def describe(self) -> dict[str, Any]:
        """The facts about this module that its metadata must state (dims, bounds, state, hash)."""
        return {
            "obs_dim": self.obs_dim,
            "action_dim": self.action_dim,
            "history": self.history,
            "rnn_state_size": self.rnn_state_size,
            "action_low": self.action_low.tolist(),
            "action_high": self.action_high.tolist(),
            "normalize_obs": self.normalize_obs,
            "action_squash": "tanh" if self.squash else "none",
            "obs_clip": float(self.obs_clip),
            "weights_sha256": weights_sha256(self.state_dict()),
        }


def _frozen_copy(module: nn.Module) -> nn.Module:
    """A float32 CPU copy for inference (exports live on the CPU; a controller moves the loaded
    module wherever it wants)."""
    module = copy.deepcopy(module).to("cpu", torch.float32).eval()
    for parameter in module.parameters():
        parameter.requires_grad_(False)
    return module


def weights_sha256(state: dict[str, torch.Tensor]) -> str:
    """sha256 over a state dict, reproducible anywhere without ppo_control.

    Recipe: for each entry in sorted key order, feed the header `"{key}:{dtype}:{shape}\\n"` (dtype
    like `float32`, shape comma-separated, e.g. `actor.0.weight:float32:64,17`) followed by the
    tensor's raw little-endian C-contiguous bytes. Works on a `torch.jit.load`-ed module's state_dict.
    """
    digest = hashlib.sha256()
    for key in sorted(state):
        tensor = state[key].detach().cpu().contiguous()
        dtype = str(tensor.dtype).removeprefix("torch.")
        shape = ",".join(str(s) for s in tensor.shape)
        digest.update(f"{key}:{dtype}:{shape}\n".encode())
        digest.update(tensor.numpy().tobytes())  # numpy: no copy for contiguous CPU tensors
    return digest.hexdigest()


def metadata_to_json(metadata: dict[str, Any]) -> str:
    return json.dumps(metadata, sort_keys=True)


# --- writing files ---------------------------------------------------------------------------


def save_torchscript(module: DeployedPolicy, path: str | os.PathLike, check: Callable[[Path], None] | None = None) -> None:
    """Script `module` and save it with metadata.json as an extra file.

    Written atomically; `check(temp_path)` may inspect the file and raise before it is put in place.
    """
    scripted = to_torchscript(module)
    extra = {METADATA_FILE: module.metadata_json}
    _atomic_write(Path(path), lambda tmp: torch.jit.save(scripted, str(tmp), _extra_files=extra), check)


def to_torchscript(module: DeployedPolicy) -> torch.jit.ScriptModule:
    """torch.jit.script the module.

    Scripting, not tracing: a trace would drop the obs_dim/action_dim/metadata_json attributes and
    freeze the batch rank it saw, so there is deliberately no silent fallback to torch.jit.trace.
    """
    with warnings.catch_warnings():
        # torch >= 2.10 deprecates torch.jit in favour of torch.export, but libtorch's C++ loader
        # still reads only TorchScript, and that is what robot controllers link against.
        warnings.simplefilter("ignore", DeprecationWarning)
        return torch.jit.script(module)


def save_onnx(
    module: DeployedPolicy, path: str | os.PathLike, check: Callable[[Path], None] | None = None, opset: int = ONNX_OPSET
) -> None:
    """Export to ONNX with a dynamic batch axis and the metadata in model.metadata_props.

    Each metadata key is its own entry (non-strings JSON-encoded); "metadata.json" holds them all.
    Written atomically; `check(temp_path)` may inspect the file and raise before it is put in place.

    The graph's input is always 2-D, [batch, obs_dim]: a rank-polymorphic ONNX graph is not worth
    its complexity, so a single observation is fed as a batch of one. With history, the previous
    frames are a second input and the frames to feed back a second output (see the module docstring).
    """
    import onnx  # optional dependency, checked by the CLI before any work

    proto = to_onnx_proto(module, opset)
    metadata = json.loads(module.metadata_json)
    for key, value in metadata.items():
        entry = proto.metadata_props.add()
        entry.key = key
        entry.value = value if isinstance(value, str) else json.dumps(value)
    entry = proto.metadata_props.add()
    entry.key = METADATA_FILE  # the whole document too, for readers that want one JSON blob
    entry.value = module.metadata_json
    onnx.checker.check_model(proto, full_check=True)
    _atomic_write(Path(path), lambda tmp: onnx.save_model(proto, str(tmp)), check)


def to_onnx_proto(module: DeployedPolicy, opset: int = ONNX_OPSET):
    """The ONNX ModelProto of `module`, via the torch.export-based exporter (dynamo=True).

    dynamo=False selects the TorchScript-based exporter, which torch >= 2.9 deprecates (it warns on
    every call); the dynamo exporter is the default and handles this small MLP without help.
    """
    batch = torch.export.Dim("batch", min=1)
    examples = (torch.zeros(2, module.obs_dim),)  # batch 2, not 1: torch.export specializes size-1 dims
    inputs, outputs, dynamic = [ONNX_INPUT], [ONNX_OUTPUT], {"obs": {0: batch}}
    graph: nn.Module = module
    if module.history > 1 or module.rnn_state_size > 0:
        graph = _PureStep(module)
        if module.history > 1:
            examples += (torch.zeros(2, module.history - 1, module.obs_dim),)
            inputs.append(ONNX_HISTORY_INPUT)
            outputs.append(ONNX_HISTORY_OUTPUT)
        if module.rnn_state_size > 0:
            examples += (torch.zeros(2, module.rnn_state_size),)
            inputs.append(ONNX_RNN_INPUT)
            outputs.append(ONNX_RNN_OUTPUT)
        dynamic = (tuple({0: batch} for _ in examples),)  # one spec per input of the *inputs argument
    onnx_logger = logging.getLogger("torch.onnx")
    level = onnx_logger.level
    onnx_logger.setLevel(logging.ERROR)  # otherwise it logs "torchvision is not installed" warnings
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch.export's internal deprecation notices: nothing a user can act on
            program = torch.onnx.export(
                graph,
                examples,
                dynamo=True,
                opset_version=opset,
                input_names=inputs,
                output_names=outputs,
                dynamic_shapes=dynamic,
                external_data=False,
                verbose=False,
            )
    finally:
        onnx_logger.setLevel(level)
    return program.model_proto


class _PureStep(nn.Module):
    """A stateful policy as a pure function: (obs, [previous frames], [recurrent state]) ->
    (action, [next frames], [next state]), each state input present only where the policy has it."""

    def __init__(self, policy: DeployedPolicy):
        super().__init__()
        self.policy = policy

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        policy = self.policy
        obs, rest = inputs[0].to(torch.float32), list(inputs[1:])
        frames = rest.pop(0).to(torch.float32) if policy.history > 1 else obs.new_zeros(obs.shape[0], 0, policy.obs_dim)
        state = rest.pop(0).to(torch.float32) if policy.rnn_state_size > 0 else obs.new_zeros(obs.shape[0], 0)
        action, frames, state = policy.step(obs, frames, state)
        return (action, *([frames] if policy.history > 1 else []), *([state] if policy.rnn_state_size > 0 else []))


def _atomic_write(path: Path, write: Callable[[Path], None], check: Callable[[Path], None] | None = None) -> None:
    """Write through a temp file in the same directory, then rename: no half-written exports."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp_name))
        if check is not None:
            check(Path(tmp_name))
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
