"""Tests of ppo_control/rl/."""
