"""Tests of ppo_control/config/."""
