"""The benchmark suite (train, skip, resume, restart, fail, results files) and the plot command."""

import csv
import json
import os
import shutil
import signal
import subprocess
import sys

import imageio.v3 as iio
import numpy as np
import pytest

from conftest import ROOT, TINY, run_module

TASKS = ("InvertedPendulum", "Reacher")
# 2 updates of 128 steps, an evaluation at the end, and a periodic checkpoint at each step (so a
# run can be cut back to step 128 and resumed without training one for the purpose)
OVERRIDES = [*[o for o in TINY if not o.startswith("checkpoint.every_steps")], "checkpoint.every_steps=128", "env.backend=gymnasium"]
BENCH = ["tasks=[InvertedPendulum,Reacher]", "seeds=2", "total_steps=256", "jobs=2", *OVERRIDES]
STABLE = lambda rows: [{k: v for k, v in r.items() if k not in ("sps", "time")} for r in rows]  # noqa: E731


def read_rows(run_dir):
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def assert_one_error_line(code, err, fragment):
    assert code == 2 and len(err.strip().splitlines()) == 1 and err.startswith("error: ") and fragment in err, err


def assert_image(path):
    assert path.is_file() and path.stat().st_size > 0
    image = iio.imread(path)
    assert image.ndim == 3 and image.shape[0] > 100 and image.shape[1] > 100


def cli_in_process(main, argv, capsys):
    """Run a command's main through run_cli as `python -m` would; returns (exit status, stdout, stderr)."""
    from ppo_control.errors import run_cli

    try:
        run_cli(main, argv)
        code = 0
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    """One benchmark of 2 tasks x 2 seeds, started where a run was killed before its first
    checkpoint (Reacher s0: a config and a metrics row, nothing to resume from)."""
    from omegaconf import OmegaConf

    from ppo_control.config import compose

    out = tmp_path_factory.mktemp("bench")
    early = out / "runs" / "Reacher" / "s0"
    early.mkdir(parents=True)
    OmegaConf.save(compose(["task=Reacher", "seed=0", "total_steps=256", *OVERRIDES, f"run_dir={early}"]), early / "config.yaml")
    (early / "metrics.jsonl").write_text('{"step": 128, "episode_return": 1.0}\n')

    result = run_module("ppo_control.benchmark", *BENCH, f"out={out}")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return out, result


def cut_back(run_dir):
    """Make a finished run look killed after update 1 of 2: only the step-128 checkpoint, and
    metrics holding a row logged past it and half a line."""
    for name in ("last.pt", "step_0000000256.pt"):
        (run_dir / "checkpoints" / name).unlink()
    first = read_rows(run_dir)[0]
    lost = {**first, "step": 256, "update": 2, "time": first["time"] + 1}
    (run_dir / "metrics.jsonl").write_text(json.dumps(first) + "\n" + json.dumps(lost) + "\n" + '{"step": 3')


@pytest.mark.slow
def test_benchmark_trains_restarts_and_reports_the_runs_numbers(bench):
    out, result = bench
    assert "4 to train, 0 to resume, 0 finished" in result.stdout
    assert "Reacher s0: restarting (no checkpoint to resume)" in result.stdout
    assert result.stdout.count("done    ") == 4

    runs = {(r["task"], int(r["seed"])): r for r in read_csv(out / "runs.csv")}
    assert sorted(runs) == [(t, s) for t in TASKS for s in (0, 1)]
    for (task, seed), row in runs.items():
        run_dir = out / "runs" / task / f"s{seed}"
        metrics = read_rows(run_dir)
        assert [m["step"] for m in metrics] == [128, 256]
        final = metrics[-1]
        wall = final["time"] - metrics[0]["time"] + metrics[0]["steps_this_update"] / metrics[0]["sps"]
        assert float(row["eval_return"]) == final["eval_return"]
        assert float(row["eval_return_std"]) == final["eval_return_std"]
        assert int(row["total_steps"]) == 256
        assert float(row["wall_clock_s"]) == pytest.approx(wall, rel=1e-9)
        assert float(row["steps_per_s"]) == pytest.approx(256 / wall, rel=1e-9)
        log = (run_dir.parent / f"s{seed}.log").read_text()
        assert "done: eval return" in log
        # jobs=2: each training got half the cores and sized its threads to them
        cores = len(os.sched_getaffinity(0))
        share = cores // 2 if cores >= 2 else cores
        assert f"of 256, {share} core{'s' if share > 1 else ''} -> " in log, log[:500]

    results = {r["task"]: r for r in read_csv(out / "results.csv")}
    assert list(results) == list(TASKS)
    for task, row in results.items():
        returns = [runs[(task, s)] for s in (0, 1)]
        evals = np.array([float(r["eval_return"]) for r in returns])
        assert row["preset"] == "fast" and int(row["seeds"]) == 2 and int(row["total_steps"]) == 256
        assert row["seed_ids"] == "0;1"
        assert [float(v) for v in row["eval_returns"].split(";")] == list(evals)
        assert float(row["eval_return_mean"]) == pytest.approx(evals.mean())
        assert float(row["eval_return_std"]) == pytest.approx(evals.std())
        assert float(row["wall_clock_s_mean"]) == pytest.approx(np.mean([float(r["wall_clock_s"]) for r in returns]))
        assert float(row["steps_per_s_mean"]) == pytest.approx(np.mean([float(r["steps_per_s"]) for r in returns]))

    table = (out / "results.md").read_text()
    assert "| task | preset | steps | seeds | eval return | per seed | wall-clock | steps/s |" in table
    for task, row in results.items():
        mean_std = f"{float(row['eval_return_mean']):.1f} ± {float(row['eval_return_std']):.1f}"
        assert f"| {task} | fast | 256 | 2 | {mean_std} |" in table
    for name in ("learning_curves.png", "learning_curves_time.png"):
        assert_image(out / name)
        assert f"written     {out / name}" in result.stdout


@pytest.mark.slow
def test_running_the_benchmark_again_retrains_nothing(bench, capsys):
    out, _ = bench
    metrics = sorted(out.glob("runs/*/s*/metrics.jsonl")) + sorted(out.glob("runs/*/s*/checkpoints/*.pt"))
    before = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in metrics}
    results = (out / "results.csv").read_text()
    again = run_module("ppo_control.benchmark", *BENCH, f"out={out}")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "0 to train, 0 to resume, 4 finished" in again.stdout and again.stdout.count("skip    ") == 4
    assert {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in metrics} == before
    assert (out / "results.csv").read_text() == results

    from ppo_control.benchmark import main

    code, _, err = cli_in_process(main, [*BENCH, "ppo.epochs=3", f"out={out}"], capsys)  # another experiment, same out
    assert_one_error_line(code, err, "holds a run with ppo.epochs=2, but this benchmark asks for ppo.epochs=3")
    assert {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in metrics} == before


@pytest.mark.slow
def test_interrupted_run_is_resumed_and_a_failed_run_does_not_stop_the_suite(bench, tmp_path):
    """s0 has a corrupt checkpoint and fails, with its log's tail; s1 was killed after update 1 and
    is then resumed to exactly the rows of the uninterrupted run; exit status 1 for s0."""
    out, _ = bench
    for seed in (0, 1):
        shutil.copytree(out / "runs" / "InvertedPendulum" / f"s{seed}", tmp_path / "runs" / "InvertedPendulum" / f"s{seed}")
    s0, s1 = (tmp_path / "runs" / "InvertedPendulum" / f"s{seed}" for seed in (0, 1))
    cut_back(s0)
    for checkpoint in (s0 / "checkpoints").iterdir():
        checkpoint.write_bytes(b"not a checkpoint")
    cut_back(s1)

    result = run_module("ppo_control.benchmark", "tasks=InvertedPendulum", "seeds=2", "total_steps=256", *OVERRIDES, f"out={tmp_path}")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "0 to train, 2 to resume, 0 finished" in result.stdout
    assert "FAILED  InvertedPendulum s0: exit status 2" in result.stdout and "no checkpoint loads" in result.stdout
    assert "done    InvertedPendulum s1" in result.stdout
    assert "1 of 2 runs failed (InvertedPendulum s0)" in result.stderr
    assert STABLE(read_rows(s1)) == STABLE(read_rows(out / "runs" / "InvertedPendulum" / "s1"))  # no duplicate row, no half line
    assert "resuming from" in (tmp_path / "runs" / "InvertedPendulum" / "s1.log").read_text()

    (row,) = read_csv(tmp_path / "results.csv")
    assert row["seeds"] == "1" and row["seed_ids"] == "1" and float(row["eval_returns"]) == read_rows(s1)[-1]["eval_return"]
    assert [r["seed"] for r in read_csv(tmp_path / "runs.csv")] == ["1"]
    assert "(not finished: s0)" in (tmp_path / "results.md").read_text()


@pytest.mark.slow
def test_a_stopped_suite_still_writes_the_table_of_the_runs_that_finished(bench, tmp_path):
    """SIGTERM while s1 starts: the suite stops (s1 is left to a rerun) and s0's result is written."""
    out, _ = bench
    shutil.copytree(out / "runs" / "InvertedPendulum" / "s0", tmp_path / "runs" / "InvertedPendulum" / "s0")
    command = [
        sys.executable,
        "-m",
        "ppo_control.benchmark",
        "tasks=InvertedPendulum",
        "seeds=2",
        "total_steps=256",
        *OVERRIDES,
        f"out={tmp_path}",
    ]
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in proc.stdout:
        if "InvertedPendulum s1: training" in line:
            proc.send_signal(signal.SIGTERM)  # the training is still starting up: it cannot finish
            break
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode != 0, stdout + stderr
    assert "interrupted" in stderr
    # Usually s1 stops unfinished; if the signal reached it during its last update it finishes
    # that update, and so the run. Either way the table holds exactly the runs that finished.
    s1 = tmp_path / "runs" / "InvertedPendulum" / "s1"
    last = read_rows(s1)[-1] if (s1 / "metrics.jsonl").exists() else {}
    s1_finished = last.get("step") == 256 and "eval_return" in last
    assert [r["seed"] for r in read_csv(tmp_path / "runs.csv")] == (["0", "1"] if s1_finished else ["0"])
    assert ("(not finished: s1)" in (tmp_path / "results.md").read_text()) != s1_finished


@pytest.mark.parametrize(
    "args, message",
    [
        (["tasks=[Hopper,Foo]"], "unknown task 'Foo'"),
        (["tasks=Hopper", "seed=1"], "seed= is chosen per run by the benchmark"),
        (["tasks=Hopper", "job=2"], "Did you mean 'jobs'?"),
        (["tasks=Hopper", "ppo.lerning_rate=1e-4"], "Did you mean: 'learning_rate'?"),
    ],
)
def test_benchmark_bad_input_is_one_line(tmp_path, capsys, args, message):
    from ppo_control.benchmark import main

    code, _, err = cli_in_process(main, [*args, f"out={tmp_path / 'b'}"], capsys)
    assert_one_error_line(code, err, message)
    assert not (tmp_path / "b").exists()


@pytest.mark.slow
def test_plot_over_time_and_single_run_diagnostics(bench, tmp_path, capsys):
    out, _ = bench
    result = run_module("ppo_control.plot", str(out / "runs"), "x=time", f"out={tmp_path / 'time.png'}")
    assert result.returncode == 0, result.stderr
    assert "runs        4 (2 experiments, x=time)" in result.stdout
    assert_image(tmp_path / "time.png")
    assert not (tmp_path / "time_diagnostics.png").exists()  # only for a single run

    from ppo_control.plot import main

    single = tmp_path / "single"
    shutil.copytree(out / "runs" / "Reacher" / "s1", single)
    code, stdout, _ = cli_in_process(main, [str(single)], capsys)
    assert code == 0
    for name in ("learning_curves.png", "diagnostics.png"):
        assert f"written     {single / name}" in stdout
        assert_image(single / name)


@pytest.mark.parametrize(
    "args, message",
    [
        ([], "give at least one run directory"),
        (["{runs}", "x=hours"], "x='hours' is not valid; choose one of: steps, time"),
        (["{runs}", "colour=red"], "unknown argument 'colour'"),
        (["{empty}"], "no runs with metrics found"),
        (["{runs}", "out={tmp}/curves.txt"], "does not end in an image type"),
    ],
)
@pytest.mark.slow
def test_plot_bad_input_is_one_line(bench, tmp_path, capsys, args, message):
    from ppo_control.plot import main

    (tmp_path / "empty").mkdir()
    paths = {"runs": bench[0] / "runs", "empty": tmp_path / "empty", "tmp": tmp_path}
    code, _, err = cli_in_process(main, [a.format(**paths) for a in args], capsys)
    assert_one_error_line(code, err, message)


def test_elapsed_seconds_counts_evaluations_but_not_a_pause_before_a_resume():
    from ppo_control.plot import MAX_PAUSE_S, elapsed_seconds

    rows = [
        {"step": 100, "steps_this_update": 100, "sps": 50.0, "time": 1000.0},  # 2 s update: started at 998
        {"step": 200, "steps_this_update": 100, "sps": 50.0, "time": 1005.0},  # 2 s update + 3 s evaluation before it
        {"step": 300, "steps_this_update": 100, "sps": 25.0, "time": 1005.0 + MAX_PAUSE_S + 100},  # stopped, resumed later
    ]
    assert elapsed_seconds(rows).tolist() == [2.0, 7.0, 11.0]


def test_seeds_on_different_grids_are_interpolated_and_cut_to_the_shortest():
    from ppo_control.plot import mean_std_over_seeds

    grid, mean, std = mean_std_over_seeds(
        [
            (np.array([0.0, 10.0, 20.0, 30.0]), np.array([0.0, 10.0, 20.0, 30.0])),
            (np.array([0.0, 5.0, 25.0]), np.array([0.0, 50.0, 250.0])),  # ends first: its x points are the grid
        ]
    )
    assert grid.tolist() == [0.0, 5.0, 25.0]
    assert mean.tolist() == [0.0, 27.5, 137.5] and std.tolist() == [0.0, 22.5, 112.5]


@pytest.mark.parametrize(
    "cores, jobs, shares",
    [
        ([0, 1], 2, [{0}, {1}]),
        ([0, 1, 2, 3, 4], 2, [{0, 1}, {2, 3, 4}]),
        ([2, 5, 7, 9], 4, [{2}, {5}, {7}, {9}]),
        ([0, 1], 3, None),  # more trainings than cores: no pinning, they share
        ([0, 1, 2, 3], 1, None),  # one at a time: the training gets every core
    ],
)
def test_concurrent_trainings_get_disjoint_shares_of_the_cores(cores, jobs, shares):
    from ppo_control.benchmark import core_shares

    assert core_shares(cores, jobs) == shares
