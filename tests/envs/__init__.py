"""Tests of ppo_control/envs/."""
