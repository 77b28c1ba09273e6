"""ppo_control: PPO for continuous-control robot policies on MuJoCo."""

import os

# Headless MuJoCo rendering: EGL works on CPU-only machines with Mesa; respect a user's choice.
os.environ.setdefault("MUJOCO_GL", "egl")

__version__ = "0.1.0"
