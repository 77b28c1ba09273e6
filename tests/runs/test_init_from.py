"""train init_from=<run or checkpoint>: a new run starts from another run's policy (fine-tuning)."""

from __future__ import annotations

import pytest
import torch

from ppo_control.config import compose
from ppo_control.runs.checkpoint import load_checkpoint
from ppo_control.training.trainer import Trainer
from tests.helpers import TINY, run_module, train_in_process


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    run = tmp_path_factory.mktemp("source") / "hopper"
    train_in_process(run, "task=Hopper", *TINY, "total_steps=256", "eval.episodes=1")
    return run


def test_a_new_run_starts_from_the_policy_and_normalizers_of_another(source, tmp_path):
    saved = load_checkpoint(source / "checkpoints" / "last.pt")["policy"]
    trainer = Trainer(compose(["task=Hopper", *TINY, "seed=7", f"init_from={source}", f"run_dir={tmp_path / 'tuned'}"]))
    try:
        mine = trainer.policy.state_dict()
        assert set(mine) == set(saved)
        for name, value in saved.items():
            torch.testing.assert_close(mine[name], value, rtol=0, atol=0)
        assert trainer.progress.step == 0  # counters and optimizer start fresh
    finally:
        trainer.envs.close()
    fresh = Trainer(compose(["task=Hopper", *TINY, "seed=7", f"run_dir={tmp_path / 'fresh'}"]))
    try:
        assert not torch.equal(fresh.policy.state_dict()["log_std"], saved["log_std"]) or any(
            not torch.equal(fresh.policy.state_dict()[k], v) for k, v in saved.items()
        )
    finally:
        fresh.envs.close()


def test_a_policy_of_another_shape_or_no_checkpoint_is_refused_before_anything_is_written(source, tmp_path):
    other_shape = ("task=Hopper", *TINY, "policy.hidden_sizes=[16]")
    result = run_module("ppo_control.train", *other_shape, f"init_from={source}", f"run_dir={tmp_path / 'a'}")
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert f"init_from={source}: its policy is not this run's shape" in result.stderr
    assert not (tmp_path / "a").exists()
    result = run_module("ppo_control.train", "task=Hopper", *TINY, f"init_from={tmp_path / 'nowhere'}", f"run_dir={tmp_path / 'b'}")
    assert result.returncode == 2 and "does not exist" in result.stderr, result.stderr
    assert not (tmp_path / "b").exists()
