"""Tests of ppo_control/runs/."""
