import os
from pathlib import Path

import pytest

from tests.helpers import MJX_LIMIT, TINY

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("WANDB_SILENT", "true")
# The MJX tests build the same small jitted functions in several processes: JAX's on-disk cache
# compiles each once per machine instead of once per test.
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(Path(os.environ.get("TMPDIR", "/tmp")) / "ppo_control_jax_cache"))
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")


@pytest.fixture
def tiny():
    return list(TINY)


@pytest.fixture(scope="module")
def hopper():
    """Four MJX Hoppers with the short time limit (tests/envs/test_mjx*.py)."""
    pytest.importorskip("brax", reason="the mjx extra is installed by .ci/run; pip install -e '.[mjx]'")
    from ppo_control.envs.mjx_backend import MjxVecEnv

    return MjxVecEnv("hopper", 4, max_episode_steps=MJX_LIMIT)
