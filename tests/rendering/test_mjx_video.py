"""Videos of MJX-trained policies: the episodes run in an MjxVecEnv on the policy's device, the frames
are drawn on the host from their physics states, by the renderer the Gymnasium videos use."""

import json

import imageio
import numpy as np
import pytest

from tests.envs.test_mjx import LIMIT, MJX_TINY

WIDTH, HEIGHT = 160, 120  # small, but the robot is not hidden behind the overlay's corner


def read_video(path):
    reader = imageio.get_reader(path)
    try:
        meta = reader.get_meta_data()
    finally:
        reader.close()
    return np.stack(imageio.mimread(path, memtest=False)), meta


@pytest.mark.slow
def test_evaluate_records_a_video_of_an_mjx_run(tmp_path):
    pytest.importorskip("brax", reason="the mjx extra is installed by .ci/run; pip install -e '.[mjx]'")
    from ppo_control import api
    from ppo_control.config import compose
    from ppo_control.rendering import video
    from ppo_control.training.trainer import Trainer

    run_dir, video_dir = tmp_path / "run", tmp_path / "videos"
    overrides = [
        *MJX_TINY,
        "total_steps=64",
        "eval.every_steps=0",  # the last update's evaluation only
        "eval.episodes=1",  # the evaluation env then has the video's shape: MJX is traced once for both
        f"eval.video_dir={video_dir}",
        "eval.video_episodes=1",
        f"eval.video_width={WIDTH}",
        f"eval.video_height={HEIGHT}",
        f"run_dir={run_dir}",
    ]
    Trainer(compose(overrides)).train()

    evaluated = api.evaluate(run_dir, episodes=1, video=True)  # -> record_run_videos
    (path,) = evaluated["videos"]
    assert path == str(video_dir / "Hopper" / "run" / "step000000064-episode0.mp4")
    assert json.loads((run_dir / "eval.json").read_text())["videos"] == [path]

    drawn = np.argwhere((video.draw_overlay(np.full((HEIGHT, WIDTH, 3), 128, np.uint8), 0.16, 20, -19.5) != 128).any(-1))
    corner = drawn.max(0) + 1  # the overlay's box: rows and columns it covers
    length = evaluated["lengths"][0]
    assert 1 <= length <= LIMIT
    frames, meta = read_video(path)
    # The reset's frame, then one per step, as the Gymnasium videos: the video's episode is the
    # evaluation's episode 0 (the same seed, sub-env and policy call).
    assert frames.shape == (length + 1, HEIGHT, WIDTH, 3)
    assert meta["fps"] == pytest.approx(125)  # Brax's Hopper: a control period of 8 ms, in real time
    assert frames.std() > 10  # something is drawn, not a blank frame
    # The robot moves, and the last frame is the episode's last state (not the next episode's
    # first): pixels change outside the overlay's corner (12 steps are 0.1 s, and the robot is a
    # few pixels wide at this size; the floor's pattern stays where it is).
    changed = np.abs(frames[-1].astype(int) - frames[0].astype(int)).max(-1) > 40
    changed[: corner[0], : corner[1]] = False
    assert changed.sum() >= 5, changed.sum()
