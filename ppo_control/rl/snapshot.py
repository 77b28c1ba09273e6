"""A run's in-memory state as checkpoint-safe values: numpy <-> tensors, every RNG's state.

`torch.load(weights_only=True)` accepts tensors and plain Python values only, so whatever the
rollout and the trainer save goes through these first.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch


def to_tensors(obj: Any) -> Any:
    """numpy arrays -> tensors, recursively, so the safe loader accepts them."""
    if isinstance(obj, np.ndarray):
        return torch.from_numpy(obj.copy())
    if isinstance(obj, dict):
        return {key: to_tensors(value) for key, value in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_tensors(value) for value in obj]
    return obj


def to_numpy(obj: Any) -> Any:
    """The inverse of `to_tensors`."""
    if isinstance(obj, torch.Tensor):
        return obj.numpy()
    if isinstance(obj, dict):
        return {key: to_numpy(value) for key, value in obj.items()}
    if isinstance(obj, list):
        return [to_numpy(value) for value in obj]
    return obj


def capture_rng_state(generator: torch.Generator) -> dict[str, Any]:
    """Every RNG the training run draws from, as tensors and plain values (weights_only-safe)."""
    np_state = np.random.get_state()
    return {
        "torch": torch.get_rng_state(),
        "generator": generator.get_state(),
        "numpy": {
            "keys": torch.from_numpy(np_state[1].astype(np.int64)),
            "pos": int(np_state[2]),
            "has_gauss": int(np_state[3]),
            "cached_gaussian": float(np_state[4]),
        },
        "python": [random.getstate()[0], list(random.getstate()[1]), random.getstate()[2]],
    }


def restore_rng_state(state: dict[str, Any], generator: torch.Generator) -> None:
    torch.set_rng_state(state["torch"])
    generator.set_state(state["generator"])
    np_state = state["numpy"]
    np.random.set_state(
        ("MT19937", np_state["keys"].numpy().astype(np.uint32), np_state["pos"], np_state["has_gauss"], np_state["cached_gaussian"])
    )
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
