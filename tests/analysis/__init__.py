"""Tests of ppo_control/analysis/."""
