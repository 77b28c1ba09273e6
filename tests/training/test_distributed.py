"""Data parallel on torch.distributed: 2 ranks with gloo on loopback."""

import json
import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from tests.helpers import ROOT, TINY

WORKER = str(ROOT / "tests" / "dist_worker.py")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_ranks(args_per_rank, port):
    """Start one process per rank the way torchrun would (env vars), without torchrun's supervision."""
    procs = []
    for rank, args in enumerate(args_per_rank):
        env = {
            **os.environ,
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "WORLD_SIZE": str(len(args_per_rank)),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "PYTHONPATH": str(ROOT / "tests"),
        }
        procs.append(
            subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        )
    return procs


def rows(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
@pytest.mark.parametrize("policy", [[], ["policy.rnn=gru", "policy.rnn_size=16"]], ids=["feedforward", "recurrent"])
def test_two_ranks_hold_identical_parameters_and_union_statistics(tmp_path, policy):
    run = tmp_path / "run"
    args = [WORKER, str(tmp_path), "normal", "3", "task=Hopper", "total_steps=100000", *TINY, *policy, f"run_dir={run}"]
    procs = launch_ranks([args, args], free_port())
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    r0, r1 = (torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in (0, 1))
    for key in r0["policy"]:
        assert torch.equal(r0["policy"][key], r1["policy"][key]), key
    assert not torch.equal(r0["observed"], r1["observed"])  # the ranks really saw different data
    union = torch.cat([r0["observed"], r1["observed"]]).double().numpy()
    np.testing.assert_allclose(r0["policy"]["obs_normalizer.mean"].numpy(), union.mean(axis=0), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(r0["policy"]["obs_normalizer.var"].numpy(), union.var(axis=0), rtol=1e-9, atol=1e-12)
    assert r0["policy"]["obs_normalizer.count"].item() == len(union) == 3 * 2 * 128

    # Only rank 0 wrote: one run directory, and nothing else besides the two dumps.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rank0.pt", "rank1.pt", "run"]
    assert [r["step"] for r in rows(run)] == [256, 512, 768]  # steps count over both ranks
    state = torch.load(run / "checkpoints" / "last.pt", weights_only=True)
    assert state["world_size"] == 2 and len(state["ranks"]) == 2 and state["step"] == 768


@pytest.mark.slow
def test_torchrun_run_resumes_on_two_ranks_and_on_one(tmp_path):
    run = tmp_path / "run"
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    first = subprocess.run(
        [*torchrun, "-m", "ppo_control.train", "task=InvertedPendulum", "total_steps=512", *TINY, f"run_dir={run}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert first.returncode == 0, first.stderr[-3000:]
    assert [r["step"] for r in rows(run)] == [256, 512]
    assert "eval_return" in rows(run)[-1]
    second = subprocess.run(
        [*torchrun, "-m", "ppo_control.train", f"resume={run}", "total_steps=1024"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert second.returncode == 0, second.stderr[-3000:]
    assert [r["step"] for r in rows(run)] == [256, 512, 768, 1024]
    single = subprocess.run(
        [sys.executable, "-m", "ppo_control.train", f"resume={run}", "total_steps=1280"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert single.returncode == 0, single.stderr
    assert "comes from 2 rank(s), this run has 1" in single.stdout
    assert [r["step"] for r in rows(run)][-1] == 1280


@pytest.mark.slow
def test_a_crashing_rank_ends_the_other_with_an_error_in_bounded_time(tmp_path):
    run = tmp_path / "run"
    args = [
        WORKER,
        str(tmp_path),
        "crash",
        "100",
        "task=InvertedPendulum",
        "total_steps=100000",
        *TINY,
        "checkpoint.save_last_seconds=0",
        "dist_timeout=60",
        f"run_dir={run}",
    ]
    started = time.time()
    rank0, rank1 = launch_ranks([args, args], free_port())
    rank1.communicate(timeout=300)
    assert rank1.returncode == 3
    _, err = rank0.communicate(timeout=120)
    assert rank0.returncode == 1, err
    assert "lost contact with the other ranks" in err and "Traceback" not in err
    assert time.time() - started < 180
    state = torch.load(run / "checkpoints" / "last.pt", weights_only=True)  # the last checkpoint is intact
    assert state["step"] == 2 * 256


def test_ranks_with_different_configs_are_refused(tmp_path):
    base = ["-m", "ppo_control.train", "task=InvertedPendulum", "total_steps=512", *TINY, f"run_dir={tmp_path / 'run'}"]
    procs = launch_ranks([base, [*base, "ppo.clip_range=0.3"]], free_port())
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 2, err
        assert "ranks [1] were started with a config different from rank 0's" in err
    assert not (tmp_path / "run").exists()
