"""Data-parallel training on torch.distributed (launched by torchrun).

Each rank runs its own vector env and collects its own rollout; the ranks then act as one learner:
gradients are averaged every minibatch, the observation normalizer is merged over the union of all
ranks' observations every update, and the KL early-stopping decision uses the KL averaged over ranks,
so every rank holds identical parameters and statistics at every step.

`Distributed()` with world_size 1 is the single-process case: every collective is a no-op, so the
trainer reads the same either way.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from omegaconf import DictConfig, OmegaConf

from ppo_control.config.errors import TrainingStopped, UserError


class RankLostError(TrainingStopped):
    """Another rank died, or a collective timed out."""


@dataclass
class Distributed:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")  # where collectives run: nccl needs CUDA tensors

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def all_reduce(self, tensor: torch.Tensor, op: str = "sum") -> torch.Tensor:
        """In-place all-reduce ('sum', 'mean' or 'max') of a tensor; returns it."""
        if self.enabled:
            reduce_op = dist.ReduceOp.MAX if op == "max" else dist.ReduceOp.SUM
            work = tensor.to(self.device)  # the trainer's small CPU tensors (flags, stats) travel too
            self._call(dist.all_reduce, work, op=reduce_op)
            if op == "mean":
                work /= self.world_size
            if work is not tensor:
                tensor.copy_(work)
        return tensor

    def average_gradients(self, params: list[torch.nn.Parameter], extra: torch.Tensor) -> torch.Tensor:
        """Average the gradients of `params` and the small tensor `extra` across ranks in one
        all-reduce of a flat buffer; returns the averaged `extra`."""
        if not self.enabled:
            return extra
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flat = torch.cat([g.reshape(-1) for g in grads] + [extra.reshape(-1).to(grads[0].dtype)])
        self.all_reduce(flat, "mean")
        offset = 0
        for p, g in zip(params, grads):
            n = g.numel()
            if p.grad is None:
                p.grad = g
            p.grad.copy_(flat[offset : offset + n].view_as(g))
            offset += n
        return flat[offset:].view_as(extra).to(extra.dtype)

    def mean_stats(self, stats: dict[str, Any], exclude: tuple[str, ...] = ()) -> dict[str, Any]:
        """The float entries of `stats` (other than `exclude`) averaged over ranks, in one all-reduce."""
        if not self.enabled:
            return stats
        keys = [k for k, v in stats.items() if isinstance(v, float) and k not in exclude]
        values = self.all_reduce(torch.tensor([stats[k] for k in keys], dtype=torch.float64), "mean")
        return {**stats, **{k: float(v) for k, v in zip(keys, values)}}

    def global_moments(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
        """(mean, variance, count) over the union of every rank's rows of `x`, in float64.
        Two passes (mean first, then squared deviations about it): exact and numerically stable."""
        x = x.reshape(x.shape[0], -1).to(torch.float64)
        head = torch.cat([torch.tensor([float(x.shape[0])], dtype=torch.float64, device=x.device), x.sum(dim=0)])
        self.all_reduce(head)
        count = head[0]
        mean = head[1:] / count
        squares = self.all_reduce(((x - mean) ** 2).sum(dim=0))
        return mean, squares / count, int(count.item())

    def broadcast_object(self, obj: Any) -> Any:
        """Rank 0's `obj` on every rank."""
        if not self.enabled:
            return obj
        holder = [obj]
        self._call(dist.broadcast_object_list, holder, src=0)
        return holder[0]

    def all_gather_object(self, obj: Any) -> list[Any]:
        if not self.enabled:
            return [obj]
        gathered: list[Any] = [None] * self.world_size
        self._call(dist.all_gather_object, gathered, obj)
        return gathered

    def broadcast_parameters(self, module: torch.nn.Module) -> None:
        """Make every rank start from rank 0's weights and buffers."""
        if self.enabled:
            for tensor in module.state_dict().values():
                self._call(dist.broadcast, tensor, src=0)

    def on_main_then_share(self, action: Callable[[], Any]) -> None:
        """Run `action` on rank 0; if it fails with a UserError, every rank raises it (no rank is left
        waiting in a collective for a rank that has already given up)."""
        message = None
        if self.is_main:
            try:
                action()
            except UserError as exc:
                message = str(exc)
                if not self.enabled:
                    raise
        message = self.broadcast_object(message)
        if message is not None:
            raise UserError(message)

    def check_same_config(self, cfg: DictConfig) -> None:
        """Refuse to train when ranks were launched with different configs (run_dir aside: the
        default name holds a timestamp, and rank 0's is used)."""
        if not self.enabled:
            return
        mine = OmegaConf.to_container(cfg, resolve=True)
        mine.pop("run_dir", None)
        digest = hashlib.sha256(json.dumps(mine, sort_keys=True).encode()).hexdigest()
        digests = self.all_gather_object(digest)
        different = [rank for rank, d in enumerate(digests) if d != digests[0]]
        if different:
            raise UserError(
                f"ranks {different} were started with a config different from rank 0's; launch every rank with the same arguments"
            )

    def _call(self, fn, *args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (RuntimeError, dist.DistError) as exc:  # gloo/nccl report a lost peer or a timeout this way
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise RankLostError(
                f"rank {self.rank}: lost contact with the other ranks ({first}); training stopped, the last checkpoint is kept"
            ) from None

    def close(self) -> None:
        if self.enabled and dist.is_initialized():
            dist.destroy_process_group()


def init_distributed(device: str, timeout_seconds: float) -> Distributed:
    """Join the process group torchrun set up (WORLD_SIZE > 1), or return the single-process case.
    Backend: nccl for CUDA, gloo on CPU."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return Distributed()
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    backend = "nccl" if device.startswith("cuda") else "gloo"
    collective_device = torch.device("cpu")
    if backend == "nccl":
        if local_rank >= torch.cuda.device_count():
            raise UserError(
                f"rank {rank} (local rank {local_rank}) needs its own GPU but this machine has "
                f"{torch.cuda.device_count()}; use --nproc_per_node <= {torch.cuda.device_count()} or device=cpu"
            )
        torch.cuda.set_device(local_rank)
        collective_device = torch.device("cuda", local_rank)
    try:
        dist.init_process_group(backend, timeout=timedelta(seconds=timeout_seconds))
    except (RuntimeError, ValueError) as exc:
        raise UserError(f"cannot join the torch.distributed process group (rank {rank} of {world_size}): {exc}") from None
    return Distributed(rank=rank, world_size=world_size, local_rank=local_rank, device=collective_device)
