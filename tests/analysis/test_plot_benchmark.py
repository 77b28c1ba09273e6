"""The benchmark suite (train, skip, resume, restart, fail, results files) and the plot command."""

import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys

import imageio.v3 as iio
import numpy as np
import pytest

from tests.helpers import ROOT, TINY, run_module

TASKS = ("InvertedPendulum", "Reacher")
# 2 updates of 128 steps, an evaluation at the end, and a periodic checkpoint at each step (so a
# run can be cut back to step 128 and resumed without training one for the purpose)
OVERRIDES = [*[o for o in TINY if not o.startswith("checkpoint.every_steps")], "checkpoint.every_steps=128", "env.backend=gymnasium"]
BENCH = ["tasks=[InvertedPendulum,Reacher]", "seeds=2", "total_steps=256", "jobs=2", *OVERRIDES]
TABLE_HEADER = (
    "| task | preset | steps | seeds | worst | median | mean ± std | per seed | CleanRL | SB3 zoo | Tianshou final | Tianshou "
    "| wall-clock per run | steps/s |"
)
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
    from ppo_control.config.errors import run_cli

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
    evals_by_task = {}
    for task, row in results.items():
        returns = [runs[(task, s)] for s in (0, 1)]
        evals = evals_by_task[task] = np.array([float(r["eval_return"]) for r in returns])
        assert row["preset"] == "fast" and int(row["seeds"]) == 2 and int(row["total_steps"]) == 256
        assert row["seed_ids"] == "0;1"
        assert [float(v) for v in row["eval_returns"].split(";")] == list(evals)
        assert float(row["eval_return_mean"]) == pytest.approx(evals.mean())
        assert float(row["eval_return_std"]) == pytest.approx(evals.std())
        assert float(row["wall_clock_s_mean"]) == pytest.approx(np.mean([float(r["wall_clock_s"]) for r in returns]))
        assert float(row["steps_per_s_mean"]) == pytest.approx(np.mean([float(r["steps_per_s"]) for r in returns]))

    table = (out / "results.md").read_text()
    assert TABLE_HEADER in table
    for task, row in results.items():
        assert float(row["eval_return_worst"]) == evals_by_task[task].min()
        assert float(row["eval_return_median"]) == pytest.approx(np.median(evals_by_task[task]))
        spread = f"{evals_by_task[task].min():.1f} | {np.median(evals_by_task[task]):.1f} | "
        mean_std = f"{float(row['eval_return_mean']):.1f} ± {float(row['eval_return_std']):.1f}"
        assert f"| {task} | fast | 256 | 2 | {spread}{mean_std} |" in table
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

    from ppo_control.analysis.suite import main

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


def ignore_sigint() -> None:
    """What a non-interactive shell does to a command it starts with `&`."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.slow
@pytest.mark.parametrize("sig, preexec", [(signal.SIGTERM, None), (signal.SIGINT, ignore_sigint)], ids=["SIGTERM", "SIGINT-in-background"])
def test_a_stopped_suite_still_writes_the_table_of_the_runs_that_finished(bench, tmp_path, sig, preexec):
    """A signal while s1 starts: the suite stops (s1 is left to a rerun) and s0's result is written."""
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
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=preexec)
    for line in proc.stdout:
        if "InvertedPendulum s1: training" in line:
            proc.send_signal(sig)  # the training is still starting up: it cannot finish
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
    from ppo_control.analysis.suite import main

    code, _, err = cli_in_process(main, [*args, f"out={tmp_path / 'b'}"], capsys)
    assert_one_error_line(code, err, message)
    assert not (tmp_path / "b").exists()


def test_a_second_benchmark_into_the_same_out_is_refused(tmp_path, capsys):
    """Two benchmarks writing one out= at once would each write a table of their own seeds only:
    the second is refused with one line while the first holds the directory, and nothing in it
    changes; once the first is gone the directory is free again."""
    from ppo_control.analysis.suite import OUT_LOCK_FILE, main
    from ppo_control.runs.locks import try_lock

    out = tmp_path / "b"
    out.mkdir()
    (out / "results.md").write_text("the first benchmark's table")
    holder, _ = try_lock(out / OUT_LOCK_FILE)  # stands in for a running benchmark
    code, _, err = cli_in_process(main, ["tasks=[InvertedPendulum]", "seeds=1", f"out={out}"], capsys)
    assert_one_error_line(code, err, f"out '{out}' is in use by another benchmark (pid {os.getpid()})")
    assert sorted(p.name for p in out.iterdir()) == [OUT_LOCK_FILE, "results.md"]
    assert (out / "results.md").read_text() == "the first benchmark's table"
    holder.close()
    again, _ = try_lock(out / OUT_LOCK_FILE)
    assert again is not None


@pytest.mark.slow
def test_plot_over_time_and_single_run_diagnostics(bench, tmp_path, capsys):
    out, _ = bench
    result = run_module("ppo_control.plot", str(out / "runs"), "x=time", f"out={tmp_path / 'time.png'}")
    assert result.returncode == 0, result.stderr
    assert "runs        4 (2 experiments, x=time)" in result.stdout
    assert_image(tmp_path / "time.png")
    assert not (tmp_path / "time_diagnostics.png").exists()  # only for a single run

    from ppo_control.analysis.curves import main

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
    from ppo_control.analysis.curves import main

    (tmp_path / "empty").mkdir()
    paths = {"runs": bench[0] / "runs", "empty": tmp_path / "empty", "tmp": tmp_path}
    code, _, err = cli_in_process(main, [a.format(**paths) for a in args], capsys)
    assert_one_error_line(code, err, message)


def test_elapsed_seconds_counts_evaluations_but_not_a_pause_before_a_resume():
    from ppo_control.analysis.curves import MAX_PAUSE_S, elapsed_seconds

    rows = [
        {"step": 100, "steps_this_update": 100, "sps": 50.0, "time": 1000.0},  # 2 s update: started at 998
        {"step": 200, "steps_this_update": 100, "sps": 50.0, "time": 1005.0},  # 2 s update + 3 s evaluation before it
        {"step": 300, "steps_this_update": 100, "sps": 25.0, "time": 1005.0 + MAX_PAUSE_S + 100},  # stopped, resumed later
    ]
    assert elapsed_seconds(rows).tolist() == [2.0, 7.0, 11.0]


def test_seeds_on_different_grids_are_interpolated_and_cut_to_the_shortest():
    from ppo_control.analysis.curves import mean_std_over_seeds

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
    from ppo_control.analysis.suite import core_shares

    assert core_shares(cores, jobs) == shares


# ---------------------------------------------------------------------------------------------
# Every seed and the published references, on runs made up here (no training)


def made_up_rows(evals, train=(1.0, 2.0, 3.0, 4.0), every=100):
    """metrics.jsonl rows, one update of `every` steps each (2 s of training, 4 s apart), with an
    evaluation on the last len(evals) rows (the final row's evaluation is the run's result)."""
    rows = []
    for i, episode_return in enumerate(train):
        row = {"step": every * (i + 1), "steps_this_update": every, "sps": every / 2.0, "time": 1000.0 + 4.0 * i}
        row["episode_return"] = episode_return
        k = i - (len(train) - len(evals))
        if k >= 0:
            row["eval_return"], row["eval_return_std"] = float(evals[k]), 1.0
        rows.append(row)
    return rows


def made_up_config(task, seed, epochs=10, total_steps=400):
    return {"task": task, "seed": seed, "total_steps": total_steps, "preset": "fast", "ppo": {"epochs": epochs}}


def lines_of(ax, gid):
    return [line for line in ax.get_lines() if line.get_gid() == gid]


def test_learning_curves_show_every_seed_the_mean_and_the_labelled_references():
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.colors import to_rgba

    from ppo_control.analysis.curves import (
        GID_MEAN,
        GID_REFERENCE,
        GID_REFERENCE_LABEL,
        GID_SEED,
        GID_TRAIN,
        Reference,
        Run,
        learning_curves_figure,
    )

    # Hopper: two experiments (epochs 10: 3 seeds, epochs 5: 2 seeds), evaluated at steps 200, 300, 400
    evals = {10: [[10, 20, 30], [40, 50, 90], [70, 80, 30]], 5: [[1, 2, 3], [5, 6, 7]]}
    runs = [
        Run(ROOT, made_up_config("Hopper", seed, epochs), made_up_rows(returns))
        for epochs, seeds in evals.items()
        for seed, returns in enumerate(seeds)
    ]
    runs.append(Run(ROOT, made_up_config("Unlisted", 0), made_up_rows([5.0])))  # a task with no references
    references = {"Hopper": [Reference("CleanRL", 2382.86), Reference("SB3 zoo", 2410.435)], "Ant": [Reference("SB3 zoo", 1327.2)]}
    fig = learning_curves_figure(runs, "steps", references)
    FigureCanvasAgg(fig).draw()  # lay the text out, so label extents are real
    hopper, unlisted = (ax for ax in fig.axes if ax.get_visible())
    assert (hopper.get_title(), unlisted.get_title()) == ("Hopper", "Unlisted")

    seeds, means = lines_of(hopper, GID_SEED), lines_of(hopper, GID_MEAN)
    assert len(seeds) == 5 and len(means) == 2 and len(lines_of(hopper, GID_TRAIN)) == 2
    for color, (epochs, returns) in zip(("C0", "C1"), evals.items()):
        mine = [line for line in seeds if to_rgba(line.get_color()) == to_rgba(color)]
        assert sorted(line.get_ydata().tolist() for line in mine) == sorted(returns)
        assert all(list(line.get_xdata()) == [200, 300, 400] for line in mine)
        (mean,) = [line for line in means if to_rgba(line.get_color()) == to_rgba(color)]
        assert mean.get_ydata().tolist() == pytest.approx(np.mean(returns, axis=0).tolist())
        assert mean.get_label() == f"epochs={epochs} ({len(returns)} seeds)"
        for line in mine:  # faint and thin behind the mean
            assert line.get_alpha() < 0.5 and line.get_linewidth() < mean.get_linewidth() and line.get_zorder() < mean.get_zorder()
    assert [t.get_text() for t in hopper.get_legend().get_texts()] == ["epochs=10 (3 seeds)", "epochs=5 (2 seeds)"]

    refs = lines_of(hopper, GID_REFERENCE)
    assert sorted(line.get_ydata()[0] for line in refs) == [2382.86, 2410.435]
    assert all(line.get_linestyle() == "--" for line in refs)
    labels = {t.get_text(): t for t in hopper.texts if t.get_gid() == GID_REFERENCE_LABEL}
    assert sorted(labels) == ["CleanRL 2382.9", "SB3 zoo 2410.4"]
    low, high = (labels[name].get_window_extent() for name in sorted(labels))
    assert not low.overlaps(high)  # 1% apart on the y axis: one label below its line, one above
    assert hopper.get_ylim()[1] > 2410.435  # the references are in view

    assert len(lines_of(unlisted, GID_SEED)) == 1 and len(lines_of(unlisted, GID_MEAN)) == 1
    assert not lines_of(unlisted, GID_REFERENCE) and not unlisted.texts
    assert "published final return" in [t.get_text() for t in fig.legends[0].get_texts()]


def test_a_one_task_figure_keeps_its_title_and_key_inside_and_is_written_as_a_palette_png(tmp_path):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image

    from ppo_control.analysis.curves import Reference, Run, learning_curves_figure, plot_learning_curves

    runs = [Run(ROOT, made_up_config("Hopper", seed), made_up_rows([10, 20, 30 + seed])) for seed in range(2)]
    references = {"Hopper": [Reference("CleanRL", 2382.86)]}
    fig = learning_curves_figure(runs, "steps", references)
    renderer = FigureCanvasAgg(fig).get_renderer()
    fig.draw(renderer)
    width = fig.bbox.width
    (title,) = fig.texts
    for artist in (title, fig.legends[0]):  # the narrow figure cuts neither at its edges
        box = artist.get_window_extent(renderer)
        assert 0 <= box.x0 and box.x1 <= width, (artist, box, width)

    out = plot_learning_curves(runs, "steps", tmp_path / "curves.png", references)
    assert Image.open(out).mode == "P"  # a palette image: a third of the bytes of RGBA for line plots
    assert_image(out)
    assert len(np.unique(iio.imread(out).reshape(-1, 3), axis=0)) > 8  # the colours survive the palette


def test_the_shipped_references_name_known_tasks_and_are_drawn_by_default(tmp_path):
    from ppo_control.analysis.curves import (
        GID_REFERENCE_LABEL,
        REFERENCES_FILE,
        Run,
        learning_curves_figure,
        load_references,
        reference_sources,
    )
    from ppo_control.config import available_tasks

    references = load_references()
    assert REFERENCES_FILE.is_file() and set(references) <= set(available_tasks())
    values = {task: {ref.source: ref.value for ref in refs} for task, refs in references.items()}
    assert values["HalfCheetah"] == {"CleanRL": 1442.64, "SB3 zoo": 5819.099}
    assert values["Hopper"] == {"CleanRL": 2382.86, "SB3 zoo": 2410.435}
    assert "CleanRL" not in values["Ant"] and values["Pusher"] == {"CleanRL": -40.38}
    assert reference_sources(references) == ["CleanRL", "SB3 zoo", "Tianshou final", "Tianshou"]
    assert values["HumanoidStandup"] == {"Tianshou final": 135853.7}
    assert all(ref.note for refs in references.values() for ref in refs)

    fig = learning_curves_figure([Run(tmp_path, made_up_config("HalfCheetah", 0), made_up_rows([1.0]))], "time")
    (ax,) = fig.axes
    assert sorted(t.get_text() for t in ax.texts if t.get_gid() == GID_REFERENCE_LABEL) == ["CleanRL 1442.6", "SB3 zoo 5819.1"]


@pytest.mark.parametrize(
    "text, message",
    [
        ("Hopper:\n  - {source: CleanRL}\n", "every entry needs a source (text) and a value (a number)"),
        ("Hopper:\n  - {source: CleanRL, value: 1}\n  - {source: CleanRL, value: 2}\n", "two entries from 'CleanRL'"),
        ("Hopper:\n  - {source: CleanRL, value: 1, steps: 1000000}\n", "unknown key(s) steps"),
        ("Hopper: 2382.86\n", "expected a list of {source, value, note} entries"),
    ],
)
def test_bad_references_file_is_one_clear_error(tmp_path, text, message):
    from ppo_control.analysis.curves import load_references
    from ppo_control.config.errors import UserError

    path = tmp_path / "references.yaml"
    path.write_text(text)
    with pytest.raises(UserError, match=re.escape(message)):
        load_references(path)
    assert load_references(tmp_path / "absent.yaml") == {}


def test_results_tables_give_worst_median_and_mean_of_the_final_policies(tmp_path):
    """Made-up finished runs: Hopper (published references) with 3 seeds, one of which had a better
    evaluation earlier and a checkpoints/best.pt; MyHopper (none) with 2 of 3 seeds finished."""
    from omegaconf import OmegaConf

    from ppo_control.analysis.curves import load_references
    from ppo_control.analysis.suite import Job, write_results
    from ppo_control.training.metrics import format_duration

    finals = {"Hopper": [3295.1, 886.2, 3488.7], "MyHopper": [10.0, 30.0]}
    jobs = []
    for task, returns in finals.items():
        for seed in range(3):
            run_dir = tmp_path / "runs" / task / f"s{seed}"
            jobs.append(Job(task, seed, run_dir, 400))
            if seed >= len(returns):
                continue  # never started
            run_dir.mkdir(parents=True)
            OmegaConf.save(OmegaConf.create(made_up_config(task, seed)), run_dir / "config.yaml")
            evals = [5000.0, returns[seed]] if (task, seed) == ("Hopper", 1) else [returns[seed]]
            (run_dir / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in made_up_rows(evals)))
    (tmp_path / "runs" / "Hopper" / "s1" / "checkpoints").mkdir()
    (tmp_path / "runs" / "Hopper" / "s1" / "checkpoints" / "best.pt").write_bytes(b"the step-300 policy (5000.0)")

    write_results(tmp_path, jobs, "python -m ppo_control.benchmark (made up)")
    rows = {row["task"]: row for row in read_csv(tmp_path / "results.csv")}
    published = {ref.source: ref.value for ref in load_references()["Hopper"]}
    wall = 2.0 + 4.0 + 4.0 + 4.0  # 4 updates: the first 2 s, then 4 s apart (see made_up_rows)
    for task, returns in finals.items():
        row = rows[task]
        assert float(row["eval_return_worst"]) == min(returns)
        assert float(row["eval_return_median"]) == pytest.approx(np.median(returns))
        assert float(row["eval_return_mean"]) == pytest.approx(np.mean(returns))
        assert float(row["eval_return_std"]) == pytest.approx(np.std(returns))
        assert [float(v) for v in row["eval_returns"].split(";")] == returns
        assert [float(v) for v in row["wall_clocks_s"].split(";")] == [wall] * len(returns)
    assert rows["Hopper"]["eval_return_worst"] == "886.2" and rows["Hopper"]["eval_return_median"] == "3295.1"  # not 5000 (best.pt)
    assert rows["MyHopper"]["eval_return_median"] == "20.0"
    assert (float(rows["Hopper"]["CleanRL"]), float(rows["Hopper"]["SB3 zoo"])) == (published["CleanRL"], published["SB3 zoo"])
    assert (rows["MyHopper"]["CleanRL"], rows["MyHopper"]["SB3 zoo"]) == ("", "")

    table = (tmp_path / "results.md").read_text()
    assert "never its checkpoints/best.pt" in table
    assert TABLE_HEADER in table
    mean, std, clock = np.mean(finals["Hopper"]), np.std(finals["Hopper"]), format_duration(wall)
    assert (
        f"| Hopper | fast | 400 | 3 | 886.2 | 3295.1 | {mean:.1f} ± {std:.1f} | 3295.1, 886.2, 3488.7 | "
        f"{published['CleanRL']:.1f} | {published['SB3 zoo']:.1f} | - | - | {clock} | {400 / wall:,.0f} |"
    ) in table
    assert f"| MyHopper | fast | 400 | 2 | 10.0 | 20.0 | 20.0 ± 10.0 | 10.0, 30.0 (not finished: s2) | - | - | - | - | {clock} |" in table
    assert [r["seed"] for r in read_csv(tmp_path / "runs.csv")] == ["0", "1", "2", "0", "1"]
    assert_image(tmp_path / "learning_curves.png")


def test_an_archived_run_with_gzipped_metrics_reads_like_the_live_one(tmp_path):
    """Result folders keep finished runs' rows as metrics.jsonl.gz: find_run_dirs finds them,
    load_run reads the same rows, and the benchmark counts such a run as finished (skipped)."""
    import gzip

    from omegaconf import OmegaConf

    from ppo_control.analysis.curves import find_run_dirs, load_run
    from ppo_control.analysis.suite import Job
    from ppo_control.config.errors import UserError

    runs = {}
    for name in ("live", "archived"):
        run_dir = tmp_path / "runs" / "Hopper" / name
        run_dir.mkdir(parents=True)
        OmegaConf.save(OmegaConf.create(made_up_config("Hopper", 0)), run_dir / "config.yaml")
        text = "".join(json.dumps(row) + "\n" for row in made_up_rows([1234.5]))
        if name == "archived":
            (run_dir / "metrics.jsonl.gz").write_bytes(gzip.compress(text.encode()))
        else:
            (run_dir / "metrics.jsonl").write_text(text)
        runs[name] = run_dir
    assert find_run_dirs([tmp_path]) == [runs["archived"], runs["live"]]
    live, archived = load_run(runs["live"]), load_run(runs["archived"])
    assert archived.rows == live.rows and archived.rows[-1]["eval_return"] == 1234.5
    assert Job("Hopper", 0, runs["archived"], 400).done(archived)

    (runs["archived"] / "metrics.jsonl.gz").write_bytes(gzip.compress(b"{}")[:10])  # cut short
    with pytest.raises(UserError, match="cannot read the run"):
        load_run(runs["archived"])


def test_a_key_added_after_a_run_was_made_reads_as_its_default(tmp_path):
    """A run made before a config key existed behaved as that key's default: it groups with runs
    that set the default and apart from runs that set another value, and a benchmark asking for
    another value refuses it instead of skipping it as done."""
    from omegaconf import OmegaConf

    from ppo_control.analysis.curves import algorithm_config, group_runs, load_run
    from ppo_control.analysis.suite import plan_job
    from ppo_control.config import default_config
    from ppo_control.config.errors import UserError

    defaults = OmegaConf.to_container(default_config(), resolve=True)
    configs = {
        "old": made_up_config("Hopper", 0),  # no ppo.gae_lambda_end: made before it existed
        "default": {**made_up_config("Hopper", 1), "ppo": {"epochs": 10, "gae_lambda_end": None}},
        "scheduled": {**made_up_config("Hopper", 2), "ppo": {"epochs": 10, "gae_lambda_end": 0.9}},
    }
    runs = {}
    for name, config in configs.items():
        run_dir = tmp_path / name
        run_dir.mkdir()
        OmegaConf.save(OmegaConf.create(config), run_dir / "config.yaml")
        (run_dir / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in made_up_rows([1000.0])))
        runs[name] = load_run(run_dir)
    assert runs["old"].config["ppo"]["gae_lambda_end"] is None and runs["old"].config["ppo"]["epochs"] == 10
    experiments = group_runs(list(runs.values()))["Hopper"]
    assert [[run.seed for run in seeds] for seeds in experiments] == [[0, 1], [2]]

    def requested(gae_lambda_end):
        wanted = algorithm_config(runs["old"].config)
        return {**wanted, "ppo.gae_lambda_end": gae_lambda_end}

    assert plan_job("Hopper", 0, requested(None), 400, tmp_path / "old").action == "skip"
    assert defaults["ppo"]["gae_lambda_end"] is None
    with pytest.raises(UserError, match="gae_lambda_end=None, but this benchmark asks for ppo.gae_lambda_end=0.9"):
        plan_job("Hopper", 0, requested(0.9), 400, tmp_path / "old")
