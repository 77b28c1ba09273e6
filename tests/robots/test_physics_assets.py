"""The physics-only copy of each robot's model (ppo_control/robots/physics_assets.py) simulates what
the full model does, and holds a small part of its memory."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from ppo_control.robots import physics_assets, playground

envpool = pytest.importorskip("envpool")

STEPS = 120
N_ENVS = 3


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "ppo_control" / "physics_assets"


def rollout(env_id: str, **base_path) -> list:
    pool = envpool.make_gymnasium(env_id, num_envs=N_ENVS, batch_size=N_ENVS, num_threads=1, seed=5, **base_path)
    obs, info = pool.reset()
    rng = np.random.default_rng(0)
    steps = [(obs, info)]
    for _ in range(STEPS):
        steps.append(pool.step(rng.uniform(-1, 1, (N_ENVS, *pool.action_space.shape)).astype(np.float32)))
    return steps


def flat(value, prefix=""):
    """(name, array) for every array in an observation, info or step tuple."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from flat(item, f"{prefix}{key}/")
    elif isinstance(value, tuple):
        for i, item in enumerate(value):
            yield from flat(item, f"{prefix}{i}/")
    else:
        yield prefix, np.asarray(value)


# Go1 flat in the fast tier, every robot in the full suite.
@pytest.mark.parametrize(
    "name", [name if name == "Go1JoystickFlatTerrain" else pytest.param(name, marks=pytest.mark.slow) for name in playground.ROBOT_TASKS]
)
def test_the_physics_only_model_steps_as_the_full_one_does(name, cache):
    task = playground.robot_task(name)
    original = envpool.make_spec(task.env_id).config.base_path
    lean = physics_assets.base_path(task, original)
    full_model = mujoco.MjModel.from_xml_path(f"{original}/{task.xml}")
    lean_model = mujoco.MjModel.from_xml_path(f"{lean}/{task.xml}")
    assert lean_model.nbuffer < full_model.nbuffer / 10
    assert lean_model.nmesh < full_model.nmesh or full_model.nmesh == 0
    for field in ("body_mass", "body_inertia", "body_ipos", "jnt_range", "actuator_gainprm", "dof_damping"):
        assert np.array_equal(getattr(full_model, field), getattr(lean_model, field)), field
    full, physics_only = rollout(task.env_id), rollout(task.env_id, base_path=lean)
    ends = 0
    for step, (a, b) in enumerate(zip(full, physics_only)):
        for (key, x), (_, y) in zip(flat(a), flat(b), strict=True):
            assert np.array_equal(x, y), f"step {step}: {key}"
        if step:
            ends += int(np.sum(a[2]) + np.sum(a[3]))
    if name.startswith(("Go1Joystick", "G1", "T1", "Berkeley")):
        assert ends > 0  # random actions topple these robots: the comparison covers resets


def test_the_copy_links_to_the_original_files_and_is_reused(cache):
    task = playground.robot_task("Go1JoystickFlatTerrain")
    original = envpool.make_spec(task.env_id).config.base_path
    lean = physics_assets.base_path(task, original)
    root = cache / lean.rsplit("/", 1)[1]
    assert root.parent == cache
    written = sorted(path.name for path in root.rglob("*") if path.is_file() and not path.is_symlink())
    assert written == ["go1_mjx_feetonly.xml", "scene_mjx_feetonly_flat_terrain.xml", "sensor_feet.xml"]
    main = root / task.xml
    mtime = main.stat().st_mtime_ns
    assert physics_assets.base_path(task, original) == lean
    assert main.stat().st_mtime_ns == mtime  # found, not written again
    assert "<texture" not in main.read_text()
    assert (root / task.xml).parent.joinpath("assets").is_symlink()  # the rest is the original's
