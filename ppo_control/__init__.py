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


_choose_headless_gl()

__version__ = "0.1.0"
