import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("WANDB_SILENT", "true")

# Small, fast settings shared by the tests that train for a few updates. Gymnasium backend: its
# runs resume bit-exactly, which many tests rely on; envpool has tests of its own.
TINY = [
    "env.backend=gymnasium",
    "env.n_envs=2",
    "ppo.rollout_steps=64",
    "ppo.epochs=2",
    "ppo.minibatches=4",
    "eval.episodes=2",
    "eval.every_steps=0",
    "checkpoint.every_steps=0",
    "log.every_updates=1",
]


def tiny_overrides() -> dict:
    """TINY as the Python API takes it: dotted keys with Python values."""
    from omegaconf import OmegaConf

    return {o.split("=")[0]: OmegaConf.select(OmegaConf.from_dotlist([o]), o.split("=")[0]) for o in TINY}


def run_module(module: str, *args: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run `python -m <module> args...` as a user would."""
    return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd or ROOT, capture_output=True, text=True, timeout=timeout)


def train_in_process(run_dir: Path, *overrides: str):
    """Train in this process and return the Trainer's final eval dict (imports kept local)."""
    from ppo_control.config import compose
    from ppo_control.trainer import Trainer

    cfg = compose([*overrides, f"run_dir={run_dir}"])
    return Trainer(cfg).train()


@pytest.fixture
def tiny():
    return list(TINY)
