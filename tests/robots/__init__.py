"""Tests of ppo_control/robots/."""
