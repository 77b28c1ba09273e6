"""Tests of ppo_control/rendering/."""
