"""Every command answers -h/--help with its usage, its keys and their defaults, and exit status 0."""

from __future__ import annotations

import subprocess
import sys

import pytest

COMMANDS = {
    "train": ["task=null", "total_steps=1000000", "ppo.*", "docs/configuration.md"],
    "evaluate": ["run=(required)", "episodes=10", "randomize.body_mass=null"],
    "export": ["format=torchscript", "overwrite=False"],
    "robustness": ["episodes=5", "delay=[0,1,2,3]"],
    "sim2sim": ["export=null", "latency=0", "kp_scale=1.0"],
    "plot": ["x=steps", "out=null"],
    "benchmark": ["tasks=(required)", "seeds=3"],
    "tasks": ["python -m ppo_control.tasks"],
}


@pytest.mark.parametrize("flag", ["--help", "-h"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_help(command: str, flag: str) -> None:
    done = subprocess.run([sys.executable, "-m", f"ppo_control.{command}", flag], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    for text in [f"python -m ppo_control.{command}", "example:", "docs/", *COMMANDS[command]]:
        assert text in done.stdout, (command, text, done.stdout)
