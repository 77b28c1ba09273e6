"""MetricsLogger without training: TensorBoard event files (values, steps, purge on resume), the plain
progress lines a log file gets (rate limit, evaluations, final row), and the terminal progress bar."""

import json
import math
import re
import subprocess
import sys

import numpy as np
import pytest

from ppo_control.config import compose
from ppo_control.runs.layout import METRICS_FILE
from ppo_control.training.metrics import MetricsLogger, NullLogger, format_duration, tensorboard_tag
from tests.helpers import ROOT

STEPS = 1000  # steps per update in the hand-made rows
LINE = re.compile(
    r"step +[\d,]+/[\d,]+ \( *[\d.]+%\) \| +[\d,]+ sps \| return +(-?[\d.]+|n/a)"
    r"( \| kl [\d.]+)?( \| eval -?[\d.]+)? \| eta \S+"
)  # the plain progress line


def make_cfg(run_dir, *overrides):
    return compose(["task=Hopper", f"run_dir={run_dir}", *overrides])


def make_row(update, evaluated=False, start=0):
    """A row shaped like the trainer's, with values that differ per update and per key."""
    row = {
        "step": start + update * STEPS,
        "update": update,
        "episode_return": None if update == 1 else 100.0 + 10.0 * update + 0.5,  # no episode has ended yet in the first
        "episode_length": 50.0 + update,
        "episodes": 3 * update,
        "approx_kl": 0.01 + 1e-4 * update,
        "clip_fraction": 0.1 + 1e-3 * update,
        "entropy": 1.5 - 0.01 * update,
        "explained_variance": 0.5 + 0.001 * update,
        "grad_norm": 0.3 + 0.01 * update,
        "policy_loss": -0.02 + 1e-4 * update,
        "value_loss": 10.0 / update,
        "learning_rate": 3e-4 * (1 - update / 1000),
        "epochs_run": 5 - update % 2,
        "kl_early_stop": update % 2 == 1,
        "log_std_mean": -1.0 - 0.001 * update,
        "sps": 5000.0 + update,
        "steps_this_update": STEPS,
        "time": 1.7e9 + update,
    }
    if evaluated:
        row.update(eval_return=1000.0 + update, eval_return_std=5.0 + update, eval_length=900.0 + update, videos=["/tmp/x.mp4"])
    return row


def feed(logger, updates, eval_every=0, final=None, start=0):
    """Log and show rows 1..updates (an evaluation every `eval_every` updates and at `final`)."""
    rows = []
    for update in updates:
        evaluated = (eval_every and update % eval_every == 0) or update == final
        row = make_row(update, evaluated, start)
        logger.log(row)
        logger.progress(row, update, force=update == final)
        rows.append(row)
    return rows


def read_events(run_dir, reader="standalone"):
    """{tag: {step: value}} as TensorBoard reads the run: `standalone` is EventAccumulator; `server`
    the accumulator the tensorboard server uses (--load_fast=false), which handles restarts differently."""
    if reader == "standalone":
        from tensorboard.backend.event_processing.event_accumulator import SCALARS, EventAccumulator

        accumulator = EventAccumulator(str(run_dir), size_guidance={SCALARS: 0})  # 0: keep every point
        accumulator.Reload()
        return {tag: {e.step: e.value for e in accumulator.Scalars(tag)} for tag in accumulator.Tags()["scalars"]}
    from tensorboard.backend.event_processing.plugin_event_accumulator import TENSORS, EventAccumulator
    from tensorboard.util import tensor_util

    accumulator = EventAccumulator(str(run_dir), size_guidance={TENSORS: 0})
    accumulator.Reload()
    events = {}
    for tag in accumulator.Tags()["tensors"]:
        points = [(e.step, tensor_util.make_ndarray(e.tensor_proto).item()) for e in accumulator.Tensors(tag)]
        assert len({step for step, _ in points}) == len(points), (tag, points)  # no step shown twice
        events[tag] = dict(points)
    return events


def event_files(run_dir):
    return sorted(run_dir.glob("events.out.tfevents.*"))


# ------------------------------------------------------------------------------------------------
# TensorBoard


def test_tensorboard_holds_every_numeric_value_of_every_row(tmp_path):
    logger = MetricsLogger(tmp_path, make_cfg(tmp_path, "log.tensorboard=true"), "run", interactive=False)
    rows = feed(logger, range(1, 13), eval_every=5, final=12)
    nan_row = {**make_row(13), "explained_variance": float("nan")}  # TensorBoard keeps NaN; metrics.jsonl has null
    logger.log(nan_row)
    logger.close()
    rows.append(nan_row)
    (events_file,) = event_files(tmp_path)  # directly in the run directory: tensorboard --logdir runs shows <task>/<run>
    assert events_file.parent == tmp_path

    for reader in ("standalone", "server"):  # EventAccumulator, and the tensorboard server's own reader
        events = read_events(tmp_path, reader)
        expected_tags = set()
        for row in rows:
            for key, value in row.items():
                if key in ("step", "time", "videos") or value is None:
                    continue
                tag = tensorboard_tag(key)
                expected_tags.add(tag)
                got = events[tag][row["step"]]
                want = float(value)  # bools: 0/1
                if math.isnan(want):
                    assert math.isnan(got), (tag, row["step"])
                else:
                    assert got == pytest.approx(np.float32(want), rel=1e-6), (tag, row["step"])
        assert set(events) == expected_tags  # nothing else: no step, time, videos
        assert not any(tag.startswith("other/") for tag in events)  # every key the trainer logs has its group
        assert events["train/episode_return"].keys() == {r["step"] for r in rows[1:]}  # None (first row): not written
        assert sorted(events["eval/return"]) == [5 * STEPS, 10 * STEPS, 12 * STEPS]  # exactly the evaluation rows
        assert events["eval/return"][10 * STEPS] == 1010.0 and events["loss/policy"][3 * STEPS] == pytest.approx(-0.0197)
        assert events["ppo/kl_early_stop"] == {r["step"]: float(r["update"] % 2 == 1) for r in rows}
    assert json.loads((tmp_path / METRICS_FILE).read_text().splitlines()[-1])["explained_variance"] is None


def test_tensorboard_scalars_are_readable_while_the_run_goes_on(tmp_path):
    """An evaluation row flushes: a TensorBoard watching the run shows it before close()."""
    logger = MetricsLogger(tmp_path, make_cfg(tmp_path), "run", interactive=False)
    try:
        feed(logger, range(1, 6), eval_every=5)
        events = read_events(tmp_path)
        assert events["eval/return"] == {5 * STEPS: 1005.0}
        assert sorted(events["perf/sps"]) == [u * STEPS for u in range(1, 6)]
    finally:
        logger.close()


def test_tensorboard_off_writes_no_event_file_and_imports_no_tensorboard(tmp_path):
    logger = MetricsLogger(tmp_path, make_cfg(tmp_path, "log.tensorboard=false"), "run", interactive=False)
    feed(logger, range(1, 4), final=3)
    logger.close()
    assert event_files(tmp_path) == [] and len((tmp_path / METRICS_FILE).read_text().splitlines()) == 3
    # Lazy import: a logger without TensorBoard does not pay for importing it (checked in a fresh process).
    code = (
        "import sys; from pathlib import Path; from ppo_control.config import compose; "
        "from ppo_control.training.metrics import MetricsLogger; "
        "d = Path(sys.argv[1]); MetricsLogger(d, compose(['task=Hopper', f'run_dir={d}', 'log.tensorboard=false']), 'r').close(); "
        "assert 'tensorboard' not in sys.modules and 'torch.utils.tensorboard' not in sys.modules, 'imported'"
    )
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    result = subprocess.run([sys.executable, "-c", code, str(fresh)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]


def test_resume_hides_the_events_a_killed_run_logged_after_its_checkpoint(tmp_path):
    """Run 1 logs to step 10,000 but its last checkpoint is at 6,000; run 2 resumes there (start_step=6,000)
    and logs 7,000..8,000 with other values. TensorBoard then shows run 1 up to 6,000, run 2 after it, and
    nothing of run 1 past 6,000: run 2's SessionLog START at purge_step=6,001 drops steps >= 6,001. (The
    server's reader takes a run's first START for its beginning, so run 1 must write one too.)"""
    first = MetricsLogger(tmp_path, make_cfg(tmp_path), "run", interactive=False)
    feed(first, range(1, 11), eval_every=4)  # evaluations at 4,000 and 8,000
    first.close()
    # Event files are read in name order, which starts with the creation time in seconds: the killed
    # run's file was created when it started, long before the resume. Here both are created within a
    # second, so date the first back an hour (as it would be) to make the order independent of the clock.
    (old,) = event_files(tmp_path)
    stamp = int(old.name.split(".")[3])
    old.rename(old.with_name(old.name.replace(f".{stamp:010d}.", f".{stamp - 3600:010d}.")))

    resumed = MetricsLogger(tmp_path, make_cfg(tmp_path), "run", start_step=6 * STEPS, interactive=False)
    second_rows = []
    for update in (7, 8):
        row = {**make_row(update, evaluated=update == 8), "value_loss": -1.0 * update, "eval_return": 2000.0 if update == 8 else None}
        resumed.log(row)
        second_rows.append(row)
    resumed.close()
    assert len(event_files(tmp_path)) == 2

    for reader in ("standalone", "server"):
        events = read_events(tmp_path, reader)
        assert sorted(events["loss/value"]) == [u * STEPS for u in range(1, 9)], reader  # 9,000 and 10,000 are gone
        assert [events["loss/value"][u * STEPS] for u in range(1, 9)] == pytest.approx([10.0 / u for u in range(1, 7)] + [-7.0, -8.0])
        assert events["eval/return"] == {4 * STEPS: 1004.0, 8 * STEPS: 2000.0}, reader  # run 2's evaluation replaced run 1's
        assert max(events["perf/sps"]) == 8 * STEPS, reader


# ------------------------------------------------------------------------------------------------
# Plain lines (stdout is not a terminal: a log file, CI, the benchmark)


class FakeClock:
    """time.monotonic stand-in: one second passes per row (feed advances it)."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def feed_with_clock(logger, clock, updates, eval_every=0, final=None):
    for update in updates:
        clock.now = float(update)  # row u is shown at t = u seconds
        feed(logger, [update], eval_every=eval_every, final=final)


def printed_steps(text):
    lines = text.splitlines()
    assert all(LINE.fullmatch(line) for line in lines), lines  # nothing but well-formed progress lines
    return [int(line.split()[1].split("/")[0].replace(",", "")) // STEPS for line in lines]


@pytest.mark.parametrize(
    "line_seconds, every_updates, expected",
    [
        # The first line, then the evaluations (25, 50, 75) and the final row only.
        (1e9, 1, [1, 25, 50, 75, 100]),
        # At most one line per 10 s (rows come at 1 s), counted from the last line printed, evaluations included.
        (10, 1, [1, 11, 21, 25, 35, 45, 50, 60, 70, 75, 85, 95, 100]),
        # line_seconds=0: every every_updates-th update (today's behaviour), plus the evaluations (25, 75).
        (0, 1, list(range(1, 101))),
        (0, 10, [10, 20, 25, 30, 40, 50, 60, 70, 75, 80, 90, 100]),
        # Both limits: lines on every 10th update, no closer than 15 s apart (the evaluations always print).
        (15, 10, [10, 25, 40, 50, 70, 75, 90, 100]),
    ],
)
def test_plain_lines_are_rate_limited_but_evaluations_and_the_final_row_always_print(
    tmp_path, capsys, line_seconds, every_updates, expected
):
    cfg = make_cfg(
        tmp_path, "total_steps=100000", f"log.line_seconds={line_seconds}", f"log.every_updates={every_updates}", "log.tensorboard=false"
    )
    clock = FakeClock()
    logger = MetricsLogger(tmp_path, cfg, "run", interactive=False, clock=clock)
    feed_with_clock(logger, clock, range(1, 101), eval_every=25, final=100)
    logger.close()
    out = capsys.readouterr().out
    assert printed_steps(out) == expected
    assert "\r" not in out and "%|" not in out  # no bar


def test_plain_line_format_is_unchanged(tmp_path, capsys):
    """Users and scripts grep these lines: the same format as before the bar existed."""
    cfg = make_cfg(tmp_path, "total_steps=100000", "log.tensorboard=false", "log.line_seconds=0")
    logger = MetricsLogger(tmp_path, cfg, "run", interactive=False)
    feed(logger, [1, 25], eval_every=25)
    logger.close()
    first, second = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"step      1,000/100,000 \(  1\.0%\) \|   5,001 sps \| return       n/a \| kl 0\.0101 \| eta \S+", first)
    assert re.fullmatch(
        r"step     25,000/100,000 \( 25\.0%\) \|   5,025 sps \| return     350\.5 \| kl 0\.0125 \| eval 1025\.0 \| eta \S+", second
    )


def test_write_prints_plainly_without_a_bar(tmp_path, capsys):
    logger = MetricsLogger(tmp_path, make_cfg(tmp_path, "log.tensorboard=false"), "run", interactive=False)
    logger.write("stopped at step 1,000; checkpoint saved")
    logger.close()
    NullLogger().write("from another rank")
    assert capsys.readouterr().out == "stopped at step 1,000; checkpoint saved\nfrom another rank\n"


def test_null_logger_writes_nothing(tmp_path, capsys):
    logger = NullLogger()
    logger.log(make_row(1))
    logger.progress(make_row(1), 1, force=True)
    logger.close()
    assert capsys.readouterr() == ("", "") and list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------------------------
# Progress bar (stdout is a terminal)


def segments(text):
    """What a terminal would have shown, piece by piece: the bar redraws with \\r, lines end with \\n."""
    return [s.strip() for s in re.split(r"[\r\n]", text) if s.strip()]


def test_bar_on_a_terminal_with_the_fields_of_the_line(tmp_path, capsys):
    cfg = make_cfg(tmp_path, "total_steps=20000", "log.tensorboard=false", "log.line_seconds=0")
    logger = MetricsLogger(tmp_path, cfg, "run", interactive=True)
    feed(logger, range(1, 4))
    logger.write("a message from the trainer")
    feed(logger, range(4, 21), eval_every=10, final=20)
    logger.write("done: after the bar")
    logger.close()
    captured = capsys.readouterr()
    out = captured.out
    parts = segments(out)
    bars = [s for s in parts if "%|" in s]
    assert bars and all("step/s" in s or "?step/s" in s for s in bars)  # tqdm's own rate and ETA
    # Drawn for sure (tqdm skips draws closer than 0.1 s apart): the first row, the evaluations, the end.
    assert any(s.startswith("100%") and "20.0k/20.0k" in s and "sps 5,020 | return 300.5 | kl 0.0120 | eval 1020.0" in s for s in bars)
    assert any(s.startswith("50%") and "sps 5,010 | return 200.5 | kl 0.0110 | eval 1010.0" in s for s in bars)
    assert "return n/a" in out  # the first row: no episode yet
    # Plain lines: only the evaluations (10, 20), kept above the bar; none per row.
    plain = [s for s in parts if LINE.fullmatch(s)]
    assert [int(s.split()[1].split("/")[0].replace(",", "")) for s in plain] == [10 * STEPS, 20 * STEPS]
    assert "a message from the trainer" in parts
    assert parts[-1] == "done: after the bar" and out.endswith("done: after the bar\n")  # the bar was closed first
    assert captured.err == ""


def test_bar_redraws_at_most_every_every_updates_updates(tmp_path, capsys):
    cfg = make_cfg(tmp_path, "total_steps=40000", "log.tensorboard=false", "log.every_updates=5")
    logger = MetricsLogger(tmp_path, cfg, "run", interactive=True)
    feed(logger, range(1, 38), eval_every=12)  # stopped at update 37, before total_steps
    logger.close()
    out = capsys.readouterr().out
    updates = {round((float(r) - 100.5) / 10) for r in re.findall(r"\| return (\d+\.\d)", out)}  # return = 100.5 + 10 * update
    assert updates <= {5, 10, 12, 15, 20, 24, 25, 30, 35, 36}  # every 5th update and the evaluations, never the others
    assert {5, 12, 24, 36} <= updates  # the first (drawn when the bar opens) and the evaluations (forced redraw)


def test_bar_of_a_resumed_run_starts_where_it_left_off(tmp_path, capsys):
    cfg = make_cfg(tmp_path, "total_steps=20000", "log.tensorboard=false")
    logger = MetricsLogger(tmp_path, cfg, "run", start_step=10 * STEPS, interactive=True)
    feed(logger, range(1, 3), start=10 * STEPS)
    logger.close()
    bars = [s for s in segments(capsys.readouterr().out) if "%|" in s]
    assert "10.0k/20.0k" in bars[0] and "0.00/20.0k" not in "".join(bars)  # opened where the run resumed, not at 0
    assert bars[1].startswith("55%") and "11.0k/20.0k" in bars[1]  # and drawn at once with the first row's step


@pytest.mark.parametrize("tty, columns, interactive", [(True, 120, True), (False, 120, False), (True, 0, False)])
def test_interactive_defaults_to_whether_stdout_is_a_terminal(tmp_path, monkeypatch, tty, columns, interactive):
    """A bar on a terminal; plain lines elsewhere, and on a pseudo-terminal of width 0 (`docker run -t`
    without a size), where tqdm would draw nothing."""
    import os

    import ppo_control.training.metrics as metrics

    class Stream:
        def isatty(self):
            return tty

        def fileno(self):
            return 1

    monkeypatch.setattr(sys, "stdout", Stream())
    monkeypatch.setattr(metrics.os, "get_terminal_size", lambda fd: os.terminal_size((columns, 40)))
    logger = MetricsLogger(tmp_path, make_cfg(tmp_path, "log.tensorboard=false"), "run")
    assert logger.interactive is interactive
    logger.close()


def test_format_duration():
    assert format_duration(59.6) == "1m00s" and format_duration(3725) == "1h02m05s" and format_duration(float("nan")) == "?"
