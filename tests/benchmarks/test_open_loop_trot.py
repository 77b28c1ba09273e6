"""open_loop_trot: the scripted trot moves Spot on its reference, and holding still does not."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.robots.open_loop_trot import reference_task, trot_actions, trot_speed


@pytest.fixture(scope="module")
def spot():
    task = reference_task("SpotFlatTerrainJoystick", None)
    yield task
    task.physics.close()


def test_diagonal_feet_swing_together_and_the_knee_flexes_in_swing(spot):
    actions = trot_actions(spot, 0.05, 2.5, 1.0, 0.5, 1.0)[0].reshape(len(spot.FEET), 3)
    by_foot = dict(zip(spot.FEET, actions))
    np.testing.assert_array_equal(by_foot["FL"], by_foot["HR"])
    np.testing.assert_array_equal(by_foot["FR"], by_foot["HL"])
    assert by_foot["FL"][2] == -1.0 and by_foot["FR"][2] == 0.5  # one pair in swing, the other in stance
    assert np.all(actions[:, 0] == 0.0)


def test_the_trot_at_the_action_bound_walks_spot_forward_and_zero_actions_stand(spot):
    walking = trot_speed(spot, 2.5, 1.0, 0.5, 1.0, seconds=3.0)
    standing = trot_speed(spot, 2.5, 0.0, 0.0, 1.0, seconds=3.0)
    assert walking["fell_at_step"] is None and walking["speed"] > 0.3
    assert standing["fell_at_step"] is None and abs(standing["speed"]) < 0.02


def test_unknown_task_names_the_valid_ones():
    with pytest.raises(SystemExit, match="valid: Go1JoystickFlatTerrain, SpotFlatTerrainJoystick"):
        reference_task("T1JoystickFlatTerrain", None)
