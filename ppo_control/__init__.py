"""ppo_control: PPO for continuous-control robot policies on MuJoCo."""

import ctypes.util
import os


def _choose_headless_gl() -> None:
    """Headless MuJoCo rendering: EGL (works on CPU-only machines with Mesa), else OSMesa.

    A user's MUJOCO_GL is respected. Only a library that is actually installed is chosen: `import
    mujoco` loads the named backend at once, so MUJOCO_GL=egl without libEGL would break training
    too, which needs no rendering at all. With neither, videos fail later with their own message.
    """
    if "MUJOCO_GL" in os.environ:
        return
    for backend, library in (("egl", "EGL"), ("osmesa", "OSMesa")):
        if ctypes.util.find_library(library):
            os.environ["MUJOCO_GL"] = backend
            return


def _passive_openmp_waits() -> None:
    """Idle OpenMP threads sleep instead of spinning (a user's OMP_WAIT_POLICY is respected).

    Torch's update runs on every core (torch_threads=0). With the default spinning waits, one other
    busy process on the machine (a second seed, a benchmark job) stalls each of the thousands of tiny
    parallel regions of an update until the scheduler gives the spinning team a slice (the measured
    slowdown is in docs/development.md). Must be set before torch loads OpenMP, hence here.
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


_choose_headless_gl()
_passive_openmp_waits()

__version__ = "0.1.0"

from ppo_control.config.errors import UserError  # noqa: E402  (the one exception the API raises for bad input)

__all__ = ["UserError", "__version__"]
