"""evaluate: reproduces the training evaluation, never touches the checkpoint; videos decode."""

import hashlib
import json

import imageio
import numpy as np
import pytest

from tests.helpers import TINY, run_module


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("evalrun")
    run_dir = root / "run"
    overrides = [o for o in TINY if not o.startswith("eval.episodes")]
    result = run_module(
        "ppo_control.train",
        "task=InvertedPendulum",
        "total_steps=1024",
        *overrides,
        "eval.episodes=3",
        "eval.video=true",
        "eval.video_width=64",
        "eval.video_height=48",
        f"eval.video_dir={root / 'videos'}",
        f"run_dir={run_dir}",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return run_dir


def final_row(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()][-1]


@pytest.mark.slow
def test_evaluate_reproduces_training_eval_and_leaves_checkpoint_untouched(trained_run):
    checkpoint = trained_run / "checkpoints" / "last.pt"
    before = sha256(checkpoint)
    result = run_module("ppo_control.evaluate", f"run={trained_run}", "episodes=3")
    assert result.returncode == 0, result.stderr
    assert sha256(checkpoint) == before
    report = json.loads((trained_run / "eval.json").read_text())
    assert report["episodes"] == 3 and len(report["returns"]) == 3 and report["deterministic"] is True
    assert report["return_mean"] == pytest.approx(final_row(trained_run)["eval_return"])  # same seed, same envs
    assert report["step"] == 1024
    assert f"{report['return_mean']:.1f} +- {report['return_std']:.1f}" in result.stdout


@pytest.mark.slow
def test_stochastic_evaluation_is_seeded(trained_run):
    outs = []
    for _ in range(2):
        result = run_module("ppo_control.evaluate", f"run={trained_run}", "episodes=2", "deterministic=false", "seed=5")
        assert result.returncode == 0, result.stderr
        outs.append(json.loads((trained_run / "eval.json").read_text())["returns"])
    assert outs[0] == outs[1]


def read_frames(path):
    reader = imageio.get_reader(path)
    frames = [frame for frame in reader]
    reader.close()
    return frames


def test_training_videos_decode_with_right_size_and_frames(trained_run):
    (video,) = final_row(trained_run)["videos"]
    frames = read_frames(video)
    assert frames[0].shape == (48, 64, 3)
    assert len(frames) >= 2
    assert any(np.abs(frames[0].astype(int) - f.astype(int)).mean() > 0.5 for f in frames[1:])  # it moves


def test_evaluate_video_shows_the_evaluated_episode(trained_run, tmp_path):
    result = run_module("ppo_control.evaluate", f"run={trained_run}", "episodes=1", "seed=123", "video=true", f"video_dir={tmp_path}")
    assert result.returncode == 0, result.stderr
    report = json.loads((trained_run / "eval.json").read_text())
    (video,) = report["videos"]
    assert video in result.stdout
    assert len(read_frames(video)) == report["lengths"][0] + 1  # the reset frame + one per step


@pytest.mark.slow
def test_evaluate_video_never_overwrites(trained_run, tmp_path):
    args = [f"run={trained_run}", "episodes=1", "video=true", f"video_dir={tmp_path}"]
    for _ in range(2):
        result = run_module("ppo_control.evaluate", *args)
        assert result.returncode == 0, result.stderr
    videos = sorted(p.name for p in (tmp_path / "InvertedPendulum" / "run").iterdir())
    assert videos == ["step000001024-episode0-2.mp4", "step000001024-episode0.mp4"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["run=/nonexistent/run"], "does not exist"),
        (["episodes=3"], "missing argument run="),
        (["run=.", "episods=3"], "Did you mean 'episodes'"),
        (["run=.", "episodes=0"], "episodes must be >= 1"),
    ],
)
def test_evaluate_bad_input(args, message):
    result = run_module("ppo_control.evaluate", *args)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and message in result.stderr and "Traceback" not in result.stderr


def test_evaluate_refuses_corrupt_checkpoint_without_touching_it(trained_run, tmp_path):
    broken = tmp_path / "broken.pt"
    data = (trained_run / "checkpoints" / "last.pt").read_bytes()
    broken.write_bytes(data[: len(data) // 2])
    result = run_module("ppo_control.evaluate", f"run={trained_run}", f"checkpoint={broken}")
    assert result.returncode == 2 and "truncated or corrupt" in result.stderr and "Traceback" not in result.stderr
    assert broken.read_bytes() == data[: len(data) // 2]


def test_render_failure_names_both_variables(monkeypatch, tmp_path):
    from omegaconf import OmegaConf

    from ppo_control.config.errors import UserError
    from ppo_control.rendering import video

    monkeypatch.setattr(video, "GL_BACKENDS", ("no-such-gl",))
    monkeypatch.setenv("MUJOCO_GL", "no-such-gl")
    env_cfg = OmegaConf.create(dict(id="InvertedPendulum-v5", kwargs={}, max_episode_steps=None))
    with pytest.raises(UserError, match="MUJOCO_GL=egl or MUJOCO_GL=osmesa"):
        video.make_render_env(env_cfg, 64, 48)


def test_a_variants_task_return_is_its_task_reward_over_the_episodes_steps():
    """task_reward is a per-step mean over every counted step; times the mean length it is the mean
    of the episodes' sums of the task's own reward."""
    from ppo_control.analysis.evaluate_run import task_return

    steps = [np.full(1000, 0.03), np.full(500, 0.01)]  # two episodes' task rewards
    mean_per_step = sum(s.sum() for s in steps) / sum(len(s) for s in steps)
    result = task_return({"task_reward": mean_per_step}, np.array([1000, 500]))
    assert result == {"task_return_mean": pytest.approx((30.0 + 5.0) / 2)}
    assert task_return({"reward/pose": 0.4}, np.array([1000])) == {}
