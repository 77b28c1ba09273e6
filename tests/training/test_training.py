"""End-to-end: real learning, the run directory contract, checkpoints, determinism, wandb offline."""

import json
import re
import time

import numpy as np
import pytest
import torch

from tests.helpers import TINY, RecordedRollouts, run_module, train_in_process

REQUIRED_METRICS = {
    "step",
    "episode_return",
    "episode_length",
    "approx_kl",
    "clip_fraction",
    "entropy",
    "explained_variance",
    "grad_norm",
    "policy_loss",
    "value_loss",
    "learning_rate",
    "epochs_run",
    "sps",
}


def read_metrics(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
@pytest.mark.parametrize("squash", ["none", "tanh"])
def test_inverted_pendulum_learns_to_balance(tmp_path, squash):
    """The real learning test: the task's defaults, 32,768 steps (~15 s here), deterministic eval >= 950;
    with the Gaussian's actions clipped and squashed into the bounds."""
    run_dir = tmp_path / "ip"
    result = run_module(
        "ppo_control.train",
        "task=InvertedPendulum",
        "total_steps=32768",
        "seed=1",
        "eval.every_steps=16384",
        f"run_dir={run_dir}",
        f"policy.squash={squash}",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    rows = read_metrics(run_dir)
    final = rows[-1]
    assert final["step"] == 32768
    assert final["eval_return"] >= 950, [r.get("eval_return") for r in rows]
    assert "done: eval return" in result.stdout and "sps" in result.stdout and "eta" in result.stdout


@pytest.mark.slow
def test_halfcheetah_smoke_run_writes_the_run_directory_contract(tmp_path):
    run_dir = tmp_path / "hc"
    result = run_module("ppo_control.train", "task=HalfCheetah", "total_steps=256", *TINY, f"run_dir={run_dir}")
    assert result.returncode == 0, result.stderr[-2000:]
    assert (run_dir / "config.yaml").is_file()
    from omegaconf import OmegaConf

    saved = OmegaConf.load(run_dir / "config.yaml")
    assert saved.task == "HalfCheetah" and saved.env.id == "HalfCheetah-v5" and saved.run_dir == str(run_dir)
    rows = read_metrics(run_dir)
    assert [r["step"] for r in rows] == [128, 256]
    for row in rows:
        assert REQUIRED_METRICS <= row.keys()
    assert {"eval_return", "eval_return_std"} <= rows[-1].keys()
    assert "eval_return" not in rows[0]  # eval.every_steps=0: only the final evaluation

    state = torch.load(run_dir / "checkpoints" / "last.pt", weights_only=True)
    assert state["step"] == 256 and state["update"] == 2
    assert state["config"]["task"] == "HalfCheetah"
    assert state["policy"]["obs_normalizer.count"].item() == 256  # stats from the collected observations
    assert {"optimizer", "reward_scaler", "rng", "env_info"} <= state.keys()

    from ppo_control.runs.directory import load_run

    loaded = load_run(run_dir)  # rebuilds the policy from the checkpoint alone, strict state_dict load
    assert torch.equal(loaded.policy.obs_normalizer.mean, state["policy"]["obs_normalizer.mean"])


def test_periodic_checkpoints_are_pruned(tmp_path):
    run_dir = tmp_path / "ck"
    overrides = [o for o in TINY if not o.startswith("checkpoint.")]
    train_in_process(run_dir, "task=InvertedPendulum", "total_steps=640", *overrides, "checkpoint.every_steps=128", "checkpoint.keep=2")
    names = sorted(p.name for p in (run_dir / "checkpoints").iterdir())
    assert names == ["best.pt", "last.pt", "step_0000000512.pt", "step_0000000640.pt"]  # best.pt is never pruned


@pytest.mark.parametrize("backend", ["gymnasium", "envpool"])
def test_same_seed_same_metrics(tmp_path, backend):
    """A seed's run repeats number for number on one machine, with envpool's thread pool too (the
    benchmarks' runs are envpool runs; across machines the floats may differ, docs/benchmarks.md)."""
    settings = [*TINY, f"env.backend={backend}", "env.num_threads=2"]
    rows = []
    for name in ("a", "b"):
        train_in_process(tmp_path / name, "task=Hopper", "total_steps=384", *settings)
        rows.append([{k: v for k, v in r.items() if k not in ("sps", "time")} for r in read_metrics(tmp_path / name)])
    assert len(rows[0]) == 3 and rows[0] == rows[1]
    train_in_process(tmp_path / "c", "task=Hopper", "total_steps=384", "seed=1", *settings)
    other = [{k: v for k, v in r.items() if k not in ("sps", "time")} for r in read_metrics(tmp_path / "c")]
    assert other != rows[0]


@pytest.mark.parametrize(
    "key, end, end_at_fraction, scheduled",
    [("gae_lambda", 0.0, 1.0, [0.9, 0.6, 0.3]), ("gamma", 0.6, 1.0, [0.9, 0.8, 0.7]), ("gamma", 0.6, 0.5, [0.9, 0.7, 0.6])],
)
def test_gamma_and_gae_lambda_schedules_reach_the_advantages(tmp_path, key, end, end_at_fraction, scheduled):
    """With ppo.<key>_end each update's advantages use the scheduled value (logged as <key>), which
    reaches the end at ppo.end_at_fraction of the run and stays there: the first update, at the
    start value, trains exactly like a constant run; the later ones train differently."""
    runs = {}
    for name, schedule in (("constant", []), ("scheduled", [f"ppo.{key}_end={end}", f"ppo.end_at_fraction={end_at_fraction}"])):
        train_in_process(tmp_path / name, "task=InvertedPendulum", "total_steps=384", f"ppo.{key}=0.9", *schedule, *TINY)
        runs[name] = read_metrics(tmp_path / name)
    assert [row[key] for row in runs["constant"]] == [0.9, 0.9, 0.9]
    assert [row[key] for row in runs["scheduled"]] == pytest.approx(scheduled)
    losses = {name: [(row["policy_loss"], row["value_loss"]) for row in rows] for name, rows in runs.items()}
    assert losses["scheduled"][0] == losses["constant"][0]
    assert losses["scheduled"][1] != losses["constant"][1]


@pytest.mark.parametrize("backend", ["gymnasium", "envpool"])
def test_truncated_steps_bootstrap_from_final_observation_value(backend):
    """The stored truncation value of (t, i) is V(normalize(final observation of sub-env i at t)) with
    the rollout's frozen statistics: a wrong index, a wrong observation or updated statistics fail."""
    recorded = RecordedRollouts("task=InvertedPendulum", "env.max_episode_steps=5", f"env.backend={backend}")
    assert type(recorded.envs).__name__ == {"gymnasium": "GymnasiumVecEnv", "envpool": "EnvpoolVecEnv"}[backend]
    policy, results = recorded.policy, recorded.results
    frozen = {k: v.clone() for k, v in policy.obs_normalizer.state_dict().items()}
    storage = recorded.collect().storage
    recorded.close()
    truncated = storage.truncated
    assert truncated.sum() >= 4  # 64 steps with a 5-step limit: many time-limit ends
    assert (storage.truncation_values[~truncated] == 0).all()
    assert all(torch.equal(v, frozen[k]) for k, v in policy.obs_normalizer.state_dict().items())  # collecting left them alone
    with torch.no_grad():
        for t, result in enumerate(results):
            index = np.flatnonzero(result.truncated)
            if not len(index):
                continue
            final_obs = torch.from_numpy(result.final_obs[index])
            assert not torch.equal(final_obs, torch.from_numpy(result.obs[index]))  # the pre-reset observation, not the reset one
            expected = policy.value(policy.normalize(final_obs))
            assert torch.equal(storage.truncation_values[t, torch.from_numpy(index)], expected), (t, index)


def test_existing_run_dir_is_refused_and_left_alone(tmp_path):
    run_dir = tmp_path / "taken"
    run_dir.mkdir()
    (run_dir / "metrics.jsonl").write_text("precious\n")
    result = run_module("ppo_control.train", "task=Hopper", f"run_dir={run_dir}")
    assert result.returncode == 2 and "already exists" in result.stderr and "Traceback" not in result.stderr
    assert (run_dir / "metrics.jsonl").read_text() == "precious\n"
    assert sorted(p.name for p in run_dir.iterdir()) == ["metrics.jsonl"]


@pytest.mark.slow
def test_default_run_dir_layout(tmp_path):
    result = run_module("ppo_control.train", "task=InvertedPendulum", "total_steps=128", "seed=3", *TINY, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    (run_dir,) = (tmp_path / "runs" / "InvertedPendulum").iterdir()
    assert re.fullmatch(r"\d{8}-\d{6}-s3", run_dir.name)
    assert (run_dir / "checkpoints" / "last.pt").is_file()


def test_wandb_offline_run_records_the_metrics(tmp_path):
    run_dir = tmp_path / "wb"
    train_in_process(
        run_dir,
        "task=InvertedPendulum",
        "total_steps=256",
        *TINY,
        "log.wandb=true",
        "log.wandb_mode=offline",
        "eval.video=true",
        "eval.video_width=64",
        "eval.video_height=48",
        f"eval.video_dir={tmp_path / 'videos'}",
    )
    (offline,) = (run_dir / "wandb").glob("offline-run-*")
    assert len(list(offline.glob("files/media/videos/**/*.mp4"))) == 1  # the evaluation video went to wandb too
    (record,) = offline.glob("run-*.wandb")
    rows = read_metrics(run_dir)
    deadline = time.monotonic() + 30  # wandb's service process may still be writing the record after finish()
    while json.dumps(rows[-1]["eval_return"]).encode() not in (data := record.read_bytes()) and time.monotonic() < deadline:
        time.sleep(0.2)
    for row in rows:  # every logged value is in wandb's record, exactly as in metrics.jsonl
        for key in ("approx_kl", "entropy", "value_loss"):
            assert json.dumps(row[key]).encode() in data
    assert json.dumps(rows[-1]["eval_return"]).encode() in data


@pytest.mark.parametrize(
    "overrides, small",
    [
        (["preset=paper"], True),  # 1 env x 2048 steps / 32 minibatches: 64 samples
        (["task=Hopper"], True),  # its task file: 32 minibatches of 64
        ([], False),  # the fast defaults: 4 minibatches of 512
        (["preset=paper", "torch_threads=2"], False),  # the user's choice wins
    ],
)
def test_small_minibatches_update_on_one_thread(tmp_path, overrides, small):
    from ppo_control.config import compose
    from ppo_control.envs import usable_cores
    from ppo_control.training.trainer import Trainer

    cfg = compose(["task=HalfCheetah", *overrides, "eval.every_steps=0", f"run_dir={tmp_path / 'r'}"])
    trainer = Trainer(cfg)
    try:
        expected = 1 if small else (cfg.torch_threads or usable_cores())
        assert (trainer.collect_threads, trainer.update_threads) == (cfg.torch_threads or 1, expected)
    finally:
        trainer.close()


def test_initial_weights_do_not_depend_on_the_thread_count(tmp_path):
    import torch

    from ppo_control.config import compose
    from ppo_control.training.trainer import Trainer

    weights = []
    for threads in (2, 1):
        torch.set_num_threads(threads)  # what an earlier run in this process (or the machine) left
        trainer = Trainer(compose(["task=Hopper", *TINY, f"run_dir={tmp_path / str(threads)}"]))
        try:
            weights.append({k: v.clone() for k, v in trainer.policy.state_dict().items()})
        finally:
            trainer.close()
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
