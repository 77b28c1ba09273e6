"""Tests of ppo_control/deploy/."""
