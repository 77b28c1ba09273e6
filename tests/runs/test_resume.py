"""Never lose a run: exact resume, clean interruption, SIGKILL, non-finite guards, hostile input."""

import json
import os
import pickle
import random
import signal
import subprocess
import sys
import time

import pytest
import torch

from tests.helpers import ROOT, TINY, USER_ENVS, run_module

VOLATILE = ("sps", "time")


def rows(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def stable(run_dir):
    return [{k: v for k, v in r.items() if k not in VOLATILE} for r in rows(run_dir)]


def resume_in_process(run_dir, *overrides):
    from ppo_control.config import compose_resume
    from ppo_control.runs.directory import find_resume_checkpoint
    from ppo_control.training.trainer import Trainer

    _, state = find_resume_checkpoint(run_dir)
    cfg = compose_resume([f"resume={run_dir}", *overrides], state["config"], str(run_dir))
    return Trainer(cfg, resume_state=state).train()


# Hopper falls often, so episodes end (and reset) inside the rollouts on both sides of the cut.
EXACT = ["task=Hopper", "total_steps=768", *[o for o in TINY if not o.startswith("eval.every")], "eval.every_steps=256"]


# Every randomization at once: per-episode physics scales, noise, latency and pushes must all resume exactly.
RANDOMIZED = [
    "randomize.body_mass=[0.7,1.3]",
    "randomize.friction=[0.5,1.5]",
    "randomize.joint_damping=[0.5,2.0]",
    "randomize.actuator_gain=[0.8,1.2]",
    "randomize.obs_noise=0.05",
    "randomize.action_noise=0.1",
    "randomize.action_delay=[0,2]",
    "randomize.push_velocity=0.5",
    "randomize.push_interval=7",
    "policy.critic_obs=[policy,privileged]",  # the asymmetric critic reads the randomized parameters too
]


# Each network reads past frames (different counts): the stacks must continue across the cut.
HISTORY = ["policy.actor_history=3", "policy.critic_history=2"]
# The recurrent state continues across the cut, mid-sequence included (4 sequences per rollout).
RECURRENT = ["policy.rnn=lstm", "policy.rnn_size=16", "policy.rnn_sequence_length=16"]


@pytest.mark.parametrize(
    "vectorization, extra",
    [("sync", []), pytest.param("async", [], marks=pytest.mark.slow), ("sync", RANDOMIZED), ("sync", HISTORY), ("sync", RECURRENT)],
    ids=["sync", "async", "randomized", "history", "recurrent"],
)
def test_interrupted_and_resumed_run_matches_uninterrupted_row_for_row(tmp_path, vectorization, extra):
    from ppo_control.config import compose
    from ppo_control.training.trainer import Trainer

    args = [*EXACT, f"env.vectorization={vectorization}", *extra]
    Trainer(compose([*args, f"run_dir={tmp_path / 'whole'}"])).train()
    Trainer(compose([*args, f"run_dir={tmp_path / 'cut'}"])).train(max_updates=3)  # stops at an update boundary
    assert [r["step"] for r in rows(tmp_path / "cut")] == [128, 256, 384]
    resume_in_process(tmp_path / "cut")
    whole, cut = stable(tmp_path / "whole"), stable(tmp_path / "cut")
    assert len(whole) == 6
    assert cut == whole
    a = torch.load(tmp_path / "whole" / "checkpoints" / "last.pt", weights_only=True)
    b = torch.load(tmp_path / "cut" / "checkpoints" / "last.pt", weights_only=True)
    for key in a["policy"]:
        assert torch.equal(a["policy"][key], b["policy"][key]), key
    assert a["optimizer"]["param_groups"][0]["lr"] == b["optimizer"]["param_groups"][0]["lr"]
    # The best-evaluated checkpoint survives the cut too: the same step, the same policy.
    a, b = (torch.load(tmp_path / run / "checkpoints" / "best.pt", weights_only=True) for run in ("whole", "cut"))
    evaluated = [r for r in whole if "eval_return" in r]
    assert a["step"] == b["step"] == max(evaluated, key=lambda r: r["eval_return"])["step"]
    assert all(torch.equal(a["policy"][key], b["policy"][key]) for key in a["policy"])


@pytest.mark.slow
def test_resume_extends_total_steps_and_appends(tmp_path):
    run = tmp_path / "r"
    first = run_module("ppo_control.train", "task=InvertedPendulum", "total_steps=256", *TINY, f"run_dir={run}")
    assert first.returncode == 0, first.stderr
    again = run_module("ppo_control.train", f"resume={run}", "total_steps=512")
    assert again.returncode == 0, again.stderr
    assert [r["step"] for r in rows(run)] == [128, 256, 384, 512]
    assert "resuming from" in again.stdout
    state = torch.load(run / "checkpoints" / "last.pt", weights_only=True)
    assert state["step"] == 512 and state["config"]["total_steps"] == 512


def test_resuming_an_archived_run_keeps_its_history_in_one_file(tmp_path):
    """A finished run archived with gzipped metrics (as in benchmarks/results) and trained longer:
    the resumed rows follow the archived ones in metrics.jsonl, and no stale .gz is left beside it.
    An archive that does not unpack is one clear error, and the file is left as it was."""
    import gzip

    from ppo_control.config.errors import UserError
    from tests.helpers import train_in_process

    run = tmp_path / "r"
    train_in_process(run, "task=InvertedPendulum", "total_steps=256", *TINY)
    (run / "metrics.jsonl.gz").write_bytes(gzip.compress((run / "metrics.jsonl").read_bytes()))
    (run / "metrics.jsonl").unlink()
    resume_in_process(run, "total_steps=384")
    assert [r["step"] for r in rows(run)] == [128, 256, 384]
    assert not (run / "metrics.jsonl.gz").exists()

    (run / "metrics.jsonl").unlink()
    (run / "metrics.jsonl.gz").write_bytes(b"not gzip")
    config = (run / "config.yaml").read_text()
    with pytest.raises(UserError, match="metrics.jsonl.gz' does not unpack"):
        resume_in_process(run, "total_steps=512")
    assert (run / "metrics.jsonl.gz").read_bytes() == b"not gzip" and (run / "config.yaml").read_text() == config


@pytest.mark.slow
def test_envpool_run_resumes_with_new_episodes_and_says_so(tmp_path):
    run = tmp_path / "pool"
    first = run_module("ppo_control.train", "task=InvertedPendulum", "total_steps=256", *TINY, "env.backend=envpool", f"run_dir={run}")
    assert first.returncode == 0, first.stderr
    again = run_module("ppo_control.train", f"resume={run}", "total_steps=512")
    assert again.returncode == 0, again.stderr
    assert "cannot save its state; every sub-env starts a new episode" in again.stdout
    assert [r["step"] for r in rows(run)] == [128, 256, 384, 512]


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_finishes_update_checkpoints_and_prints_resume_command(tmp_path, sig):
    run = tmp_path / "int"
    proc = subprocess.Popen(
        [sys.executable, "-m", "ppo_control.train", "task=Hopper", "total_steps=1000000", *TINY, f"run_dir={run}"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 120
    while not (run / "metrics.jsonl").exists() or not rows(run):
        assert time.time() < deadline and proc.poll() is None
        time.sleep(0.2)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert f"python -m ppo_control.train resume={run}" in out
    state = torch.load(run / "checkpoints" / "last.pt", weights_only=True)
    assert state["step"] == rows(run)[-1]["step"]  # the checkpoint is exactly where the metrics end


@pytest.mark.slow
def test_second_sigint_stops_at_once_and_keeps_the_last_checkpoint(tmp_path):
    run = tmp_path / "twice"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ppo_control.train",
            "task=Hopper",
            "total_steps=1000000",
            "env.n_envs=2",
            "ppo.rollout_steps=2048",
            "ppo.minibatches=64",  # many small optimizer steps: updates of seconds even on a fast machine
            "ppo.epochs=20",
            "checkpoint.save_last_seconds=0",
            f"run_dir={run}",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 120
    while not (run / "checkpoints" / "last.pt").exists():  # long updates: the signals land mid-update
        assert time.time() < deadline and proc.poll() is None
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted; the last checkpoint on disk is intact" in err and "Traceback" not in err
    assert torch.load(run / "checkpoints" / "last.pt", weights_only=True)["step"] == 4096


@pytest.mark.slow
def test_sigkill_at_random_moments_always_leaves_a_resumable_run(tmp_path):
    run = tmp_path / "kill"
    rng = random.Random(1)
    base = [sys.executable, "-m", "ppo_control.train"]
    first = ["task=Hopper", "total_steps=2048", *TINY, "checkpoint.save_last_seconds=0", f"run_dir={run}"]
    for attempt in range(3):
        args = first if attempt == 0 else [f"resume={run}"]
        proc = subprocess.Popen(base + args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 120
        while not (run / "checkpoints" / "last.pt").exists() or len(rows(run)) < 2 * (attempt + 1):
            assert time.time() < deadline and proc.poll() is None, proc.stderr.read() if proc.poll() is not None else "timeout"
            time.sleep(0.05)
        time.sleep(rng.uniform(0.0, 1.5))  # somewhere inside an update, a save or a log write
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        torch.load(run / "checkpoints" / "last.pt", weights_only=True)  # complete and loadable
    done = run_module("ppo_control.train", f"resume={run}")
    assert done.returncode == 0, done.stderr
    steps = [r["step"] for r in rows(run)]
    assert steps == list(range(128, 2048 + 1, 128))  # no gaps, no duplicates


@pytest.mark.slow
def test_second_process_on_same_run_is_refused(tmp_path):
    from ppo_control.runs.directory import lock_run_dir

    run = tmp_path / "busy"
    assert run_module("ppo_control.train", "task=InvertedPendulum", "total_steps=128", *TINY, f"run_dir={run}").returncode == 0
    before = (run / "metrics.jsonl").read_text()
    lock = lock_run_dir(run)
    try:
        result = run_module("ppo_control.train", f"resume={run}", "total_steps=512")
    finally:
        lock.close()
    assert result.returncode == 2 and "in use" in result.stderr
    assert (run / "metrics.jsonl").read_text() == before


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("fin") / "run"
    result = run_module("ppo_control.train", "task=InvertedPendulum", "total_steps=256", *TINY, f"run_dir={run}")
    assert result.returncode == 0, result.stderr
    return run


def snapshot(directory):
    return {p.relative_to(directory): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(
    "extra, message",
    [
        (["ppo.gamma=0.9"], "cannot change ppo.gamma on resume"),
        (["env.n_envs=4"], "cannot change env.n_envs on resume"),
        (["policy.hidden_sizes=[32]"], "cannot change policy.hidden_sizes on resume"),
        (["policy.actor_history=3"], "cannot change policy.actor_history on resume"),
        (["policy.rnn=gru"], "cannot change policy.rnn on resume"),
        (["task=Hopper"], "trained task 'InvertedPendulum', not 'Hopper'"),
        (["total_steps=-5"], "total_steps"),
        (["ppo.lerning_rate=1"], "Did you mean: 'learning_rate'"),
    ],
)
@pytest.mark.slow
def test_resume_refuses_changes_that_alter_the_optimization(finished_run, extra, message):
    before = snapshot(finished_run)
    result = run_module("ppo_control.train", f"resume={finished_run}", *extra)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert snapshot(finished_run) == before


REFUSE_WITHOUT_TORCH = """
import contextlib, io, json, sys
from ppo_control.analysis import evaluate_run, robustness_grid
from ppo_control.config.errors import run_cli
from ppo_control.deploy import exporter
from ppo_control.training import launch
outcomes = []
for name, argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            run_cli({"train": launch, "evaluate": evaluate_run, "export": exporter, "robustness": robustness_grid}[name].main, argv)
            code = 0
        except SystemExit as exc:
            code = exc.code
    outcomes.append([code, err.getvalue()])
print(json.dumps({"outcomes": outcomes, "torch": "torch" in sys.modules}))
"""


def test_a_wrong_run_path_is_refused_before_torch_is_imported(tmp_path):
    empty = tmp_path / "empty"
    (empty / "checkpoints").mkdir(parents=True)
    (empty / "checkpoints" / "step_x.txt").write_text("not a checkpoint")
    missing = tmp_path / "missing"
    cases = [
        ("train", [f"resume={missing}"], "cannot resume: run directory"),
        ("train", [f"resume={empty}"], "holds no checkpoint"),
        ("evaluate", [f"run={missing}"], "does not exist"),
        ("evaluate", [f"run={empty}"], "holds no checkpoint"),
        ("evaluate", [f"run={empty}", "checkpoint=best"], "checkpoint 'best' does not exist"),
        ("export", [f"run={missing}"], "does not exist"),
        ("export", [f"run={empty}", "checkpoint=step_1.pt"], "checkpoint 'step_1.pt' does not exist"),
        ("robustness", [f"run={empty}"], "holds no checkpoint"),
    ]
    before = snapshot(tmp_path)
    result = subprocess.run(
        [sys.executable, "-c", REFUSE_WITHOUT_TORCH, json.dumps([[name, argv] for name, argv, _ in cases])],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    for (name, argv, message), (code, err) in zip(cases, report["outcomes"]):
        assert code == 2 and err.startswith("error: ") and err.count("\n") == 1 and message in err, (name, argv, err)
    assert not report["torch"]  # the cheap path checks come before the heavy imports: the error is immediate
    assert snapshot(tmp_path) == before


@pytest.mark.slow
def test_bad_run_directories(tmp_path, finished_run):
    broken = tmp_path / "broken"
    (broken / "checkpoints").mkdir(parents=True)
    data = (finished_run / "checkpoints" / "last.pt").read_bytes()
    (broken / "checkpoints" / "last.pt").write_bytes(data[: len(data) // 3])
    not_ours = tmp_path / "notours"
    (not_ours / "checkpoints").mkdir(parents=True)
    torch.save({"weights": torch.zeros(3)}, not_ours / "checkpoints" / "last.pt")
    cases = [
        ("ppo_control.train", f"resume={broken}", "truncated or corrupt"),
        ("ppo_control.train", f"resume={not_ours}", "not a ppo_control checkpoint"),
        ("ppo_control.evaluate", f"run={broken}", "truncated or corrupt"),
    ]
    for module, arg, message in cases:
        before = snapshot(tmp_path)
        result = run_module(module, arg)
        assert result.returncode == 2, (arg, result.stderr)
        assert message in result.stderr and result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
        assert snapshot(tmp_path) == before


@pytest.mark.slow
def test_resume_falls_back_to_newest_periodic_checkpoint_when_last_is_corrupt(tmp_path):
    run = tmp_path / "fallback"
    overrides = [o for o in TINY if not o.startswith("checkpoint.")]
    assert (
        run_module(
            "ppo_control.train", "task=InvertedPendulum", "total_steps=384", *overrides, "checkpoint.every_steps=128", f"run_dir={run}"
        ).returncode
        == 0
    )
    last = run / "checkpoints" / "last.pt"
    last.write_bytes(last.read_bytes()[:100])
    result = run_module("ppo_control.train", f"resume={run}", "total_steps=512")
    assert result.returncode == 0, result.stderr
    assert "using step_0000000384.pt" in result.stdout
    assert [r["step"] for r in rows(run)] == [128, 256, 384, 512]


class _Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.slow
def test_pickle_payload_checkpoint_is_refused_and_never_runs(tmp_path):
    marker = tmp_path / "pwned"
    run = tmp_path / "evil"
    (run / "checkpoints").mkdir(parents=True)
    with open(run / "checkpoints" / "last.pt", "wb") as f:
        pickle.dump({"format_version": 1, "x": _Payload(marker)}, f)
    torch.save({"format_version": 1, "x": _Payload(marker)}, run / "checkpoints" / "step_0000000001.pt")
    for module, arg in [("ppo_control.train", f"resume={run}"), ("ppo_control.evaluate", f"run={run}")]:
        result = run_module(module, arg)
        assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
        assert "refused by the safe loader" in result.stderr or "truncated or corrupt" in result.stderr
    assert not marker.exists()  # the payload never ran


@pytest.mark.slow
def test_unwritable_locations_are_refused_up_front(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    result = run_module("ppo_control.train", "task=InvertedPendulum", *TINY, f"run_dir={blocker / 'run'}")
    assert result.returncode == 2 and "run_dir" in result.stderr and "Traceback" not in result.stderr
    result = run_module(
        "ppo_control.train",
        "task=InvertedPendulum",
        *TINY,
        "eval.video=true",
        f"eval.video_dir={blocker / 'videos'}",
        f"run_dir={tmp_path / 'run'}",
    )
    assert result.returncode == 2 and "eval.video_dir" in result.stderr
    assert not (tmp_path / "run").exists()
    assert blocker.read_text() == "not a directory"


@pytest.mark.slow
def test_nonfinite_observation_stops_training_and_keeps_last_good_checkpoint(tmp_path):
    task = tmp_path / "NaNTask.yaml"
    task.write_text("env:\n  id: nan_env:NaNAfterEnv\n  max_episode_steps: 1000\n  kwargs: {nan_after: 300}\n")
    run = tmp_path / "nan"
    env = {**os.environ, "PYTHONPATH": str(USER_ENVS)}
    result = subprocess.run(
        [sys.executable, "-m", "ppo_control.train", f"task={task}", *TINY, "checkpoint.save_last_seconds=0", f"run_dir={run}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 1
    assert "non-finite observation from sub-env" in result.stderr and "Traceback" not in result.stderr
    # each sub-env turns bad at its 300th step: during update 5 (steps 257..320 of each env)
    assert "(update 5)" in result.stderr
    state = torch.load(run / "checkpoints" / "last.pt", weights_only=True)
    assert state["step"] == 4 * 128
    assert all(torch.isfinite(t).all() for t in state["policy"].values() if t.is_floating_point())


def test_nonfinite_loss_raises_before_touching_parameters():
    from omegaconf import OmegaConf

    from ppo_control.config.errors import NonFiniteError
    from ppo_control.rl.policy import ActorCritic, Inputs
    from ppo_control.rl.ppo import Batch, ppo_update

    policy = ActorCritic(3, 1, -torch.ones(1).numpy(), torch.ones(1).numpy(), inputs=Inputs(normalize_obs=False))
    n = 32
    obs, actions = torch.randn(n, 3), torch.randn(n, 1)
    with torch.no_grad():
        log_probs, _, values = policy.evaluate_actions(obs, actions)
    returns = torch.randn(n)
    returns[5] = float("nan")
    batch = Batch(obs, actions, log_probs, values, torch.randn(n), returns)
    hp = OmegaConf.create(
        dict(
            epochs=1,
            minibatches=1,
            clip_range=0.2,
            clip_value_loss=False,
            ent_coef=0.0,
            vf_coef=0.5,
            max_grad_norm=0.5,
            target_kl=None,
            normalize_adv=True,
            normalize_adv_over="minibatch",
            lr_schedule="constant",
        )
    )
    before = {k: v.clone() for k, v in policy.state_dict().items()}
    with pytest.raises(NonFiniteError, match="non-finite loss"):
        ppo_update(policy, torch.optim.Adam(policy.parameters()), batch, hp, torch.Generator().manual_seed(0))
    assert all(torch.equal(before[k], v) for k, v in policy.state_dict().items())


@pytest.mark.slow
def test_dead_async_worker_is_named_and_last_checkpoint_kept(tmp_path):
    run = tmp_path / "worker"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ppo_control.train",
            "task=Hopper",
            "total_steps=1000000",
            *TINY,
            "env.vectorization=async",
            "checkpoint.save_last_seconds=0",
            f"run_dir={run}",
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 120
    while not (run / "checkpoints" / "last.pt").exists():
        assert time.time() < deadline and proc.poll() is None
        time.sleep(0.1)
    children = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()
    assert len(children) >= 2  # one worker per sub-env
    os.kill(int(children[-1]), signal.SIGKILL)
    _, err = proc.communicate(timeout=60)  # bounded: no hang on the dead pipe
    assert proc.returncode == 1, err
    assert "worker process of sub-env" in err and "died" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    state = torch.load(run / "checkpoints" / "last.pt", weights_only=True)
    assert state["step"] == rows(run)[-1]["step"]
