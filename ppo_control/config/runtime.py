"""The process settings a command sets before torch or mujoco load. Importing ppo_control sets
nothing: the commands (`python -m ppo_control.<command>`) call `prepare_process()` first thing, and
the API's functions call it before their heavy imports (it cannot act where the caller has already
imported torch or mujoco). A setting the user made in the environment is always kept."""

from __future__ import annotations

import ctypes.util
import os


def choose_headless_gl() -> None:
    """Headless MuJoCo rendering: EGL (works on CPU-only machines with Mesa), else OSMesa.

    Only a library that is actually installed is chosen: `import mujoco` loads the named backend at
    once, so MUJOCO_GL=egl without libEGL would break training too, which needs no rendering at all.
    With neither, videos fail later with their own message.
    """
    if "MUJOCO_GL" in os.environ:
        return
    for backend, library in (("egl", "EGL"), ("osmesa", "OSMesa")):
        if ctypes.util.find_library(library):
            os.environ["MUJOCO_GL"] = backend
            return


def passive_openmp_waits() -> None:
    """Idle OpenMP threads sleep instead of spinning.

    Torch's update runs on every core (torch_threads=0). With the default spinning waits, one other
    busy process on the machine (a second seed, a benchmark job) stalls each of the thousands of tiny
    parallel regions of an update until the scheduler gives the spinning team a slice (the measured
    slowdown is in docs/development.md). OpenMP reads the setting when torch loads it.
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def prepare_process() -> None:
    choose_headless_gl()
    passive_openmp_waits()
