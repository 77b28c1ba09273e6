"""Tests of ppo_control/training/."""
