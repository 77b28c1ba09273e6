"""Where numbers go: metrics.jsonl, TensorBoard event files, wandb (optional), and the console.

metrics.jsonl (always): one JSON row per update, the run's record (plots and the benchmark read it).

TensorBoard (`log.tensorboard=true`, the default): every numeric value of every row, as scalars in
event files written directly in the run directory, so `tensorboard --logdir runs` lists the runs as
`<task>/<run>`. The x axis (global_step) is the row's `step`. A row key becomes `<group>/<name>`:

    train/   episode_return, episode_length, episodes        (the training episodes)
    eval/    return, return_std, length                      (row keys eval_return, eval_return_std, eval_length)
    loss/    policy, value                                   (row keys policy_loss, value_loss)
    policy/  entropy, log_std_mean
    ppo/     approx_kl, clip_fraction, explained_variance, grad_norm, learning_rate, ent_coef,
             gamma, gae_lambda, epochs_run, kl_early_stop (0/1)
    perf/    sps, steps_this_update, update
    reward/  <term>                                          (row keys reward/<term>: each reward term the env reports, rollout mean)
    tracking/ error_lin, error_ang                           (joystick tasks: commanded vs measured base velocity, rollout mean)
    response/ forward, backward, left, right, turn_left, turn_right   (joystick tasks: speed reached / speed commanded per direction)
    eval/    fall_rate, tracking_error_lin, tracking_error_ang, reward/<term>   (the same at evaluation)
    other/   <key>                                           (any key not listed above)

Not written: `step` (it is the x axis), `time` (every event carries its own wall time; a float32
scalar would round a Unix time to ~2 minutes), None values (metrics.jsonl's null) and anything not
a number (`videos`). Bools are written as 0/1; NaN and inf are written as they are (metrics.jsonl
has null there). Values are float32, TensorBoard's scalar type. The writer flushes every
FLUSH_SECONDS, at every evaluation row and at close(), so a running TensorBoard follows the run.
The writer is opened with purge_step=start_step + 1, so that on resume TensorBoard hides what a
killed run logged after the checkpoint it resumes from (as metrics.jsonl drops those rows). How
completely depends on TensorBoard's reader: the Python one (`--load_fast=false`, and
EventAccumulator) drops every tag's later points at the resumed run's SessionLog START; the Rust
data server (`--load_fast=auto` where it is installed) ignores that record and drops a tag's later
points when the resumed run writes that tag at a smaller step, i.e. at its first update for the
training tags, but only at its next evaluation for eval/*.

Console: on a terminal (interactive), a tqdm progress bar over cfg.total_steps (from start_step on
resume) with postfix `sps | return | kl | eval` (eval: the latest evaluation), redrawn at most every
`log.every_updates` updates; each evaluation and the final row also leave a plain line above the
bar, so the scrollback keeps the evaluations. The bar closes when the run reaches total_steps (and in
close()). Elsewhere (a log file, CI, the benchmark): plain lines

    step     12,288/1,000,000 (  1.2%) |   4,101 sps | return    -120.4 | kl 0.0112 | eval 31.0 | eta 4m01s

at most one per `log.line_seconds` seconds since the last line (and only on every
`log.every_updates`-th update); the first such update, rows with an evaluation and the final row
(force=True) always print. line_seconds=0 is a line every every_updates updates. A terminal of width
0 (`docker run -t` without a size) gets plain lines too. Others print through `write(text)` so as
not to break the bar.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import wandb
from omegaconf import DictConfig, OmegaConf
from tqdm import tqdm

from ppo_control.runs.layout import METRICS_FILE

FLUSH_SECONDS = 10  # TensorBoard: longest a written scalar waits in the buffer before a reader can see it

# Row key -> TensorBoard tag (see the module docstring). Keys not listed go to other/<key>.
TENSORBOARD_TAGS = {
    "episode_return": "train/episode_return",
    "episode_length": "train/episode_length",
    "episodes": "train/episodes",
    "eval_return": "eval/return",
    "eval_return_std": "eval/return_std",
    "eval_length": "eval/length",
    "policy_loss": "loss/policy",
    "value_loss": "loss/value",
    "entropy": "policy/entropy",
    "log_std_mean": "policy/log_std_mean",
    "approx_kl": "ppo/approx_kl",
    "clip_fraction": "ppo/clip_fraction",
    "explained_variance": "ppo/explained_variance",
    "grad_norm": "ppo/grad_norm",
    "learning_rate": "ppo/learning_rate",
    "ent_coef": "ppo/ent_coef",
    "gamma": "ppo/gamma",
    "gae_lambda": "ppo/gae_lambda",
    "epochs_run": "ppo/epochs_run",
    "kl_early_stop": "ppo/kl_early_stop",
    "sps": "perf/sps",
    "steps_this_update": "perf/steps_this_update",
    "update": "perf/update",
    "tracking_error_lin": "tracking/error_lin",
    "tracking_error_ang": "tracking/error_ang",
}
TENSORBOARD_SKIPPED = ("step", "time")


def tensorboard_tag(key: str) -> str:
    if key in TENSORBOARD_TAGS:
        return TENSORBOARD_TAGS[key]
    if key.startswith(("reward/", "response/")):  # already a tag
        return key
    if key.startswith("eval_"):
        return f"eval/{key[len('eval_') :]}"
    return f"other/{key}"


def tensorboard_scalars(row: dict[str, Any]) -> dict[str, float]:
    """The row's values TensorBoard gets, by tag: numbers (bools as 0/1); no None, no lists or text."""
    scalars = {}
    for key, value in row.items():
        if key in TENSORBOARD_SKIPPED or value is None:
            continue
        if isinstance(value, (numbers.Real, np.bool_)):  # bool is a Real too: True -> 1.0
            scalars[tensorboard_tag(key)] = float(value)
    return scalars


def _json_safe(value: Any) -> Any:
    """JSON has no NaN/inf; write null instead so every line stays valid JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def format_duration(seconds: float) -> str:
    if not math.isfinite(seconds) or seconds < 0:
        return "?"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


def _stdout_is_terminal() -> bool:
    """stdout is a terminal a bar can be drawn on (a pseudo-terminal of width 0, as `docker run -t`
    or `script` without a size give, would show nothing of the bar: plain lines there)."""
    try:
        if sys.stdout is None or not sys.stdout.isatty():
            return False
        return os.get_terminal_size(sys.stdout.fileno()).columns > 0
    except (AttributeError, ValueError, OSError):  # replaced by an object without isatty/fileno, or closed
        return False


class MetricsLogger:
    """Appends one JSON row per update to metrics.jsonl, mirrors it to TensorBoard and wandb, shows
    progress (a bar on a terminal, rate-limited plain lines elsewhere).

    interactive: bar (True) or plain lines (False); None = whether stdout is a terminal.
    clock: the monotonic clock that spaces plain lines (tests pass their own).
    """

    def __init__(
        self,
        run_dir: Path,
        cfg: DictConfig,
        run_name: str,
        start_step: int = 0,
        *,
        interactive: bool | None = None,
        clock: Callable[[], float] | None = None,
    ):
        self.run_dir = Path(run_dir)
        self.every_updates = cfg.log.every_updates
        self.line_seconds = float(cfg.log.line_seconds)
        self.total_steps = cfg.total_steps
        self.interactive = _stdout_is_terminal() if interactive is None else interactive
        self._clock = clock or time.monotonic
        self._last_line: float | None = None  # clock() when the last plain line printed
        self._bar = None  # tqdm bar, opened at the first progress row (after the trainer's header line)
        self._last_eval: float | None = None
        self._file = open(self.run_dir / METRICS_FILE, "a", encoding="utf-8")
        self._tensorboard = None
        if cfg.log.tensorboard:
            # imported here: a logger without TensorBoard does not load it (tests/training/test_logging.py checks it)
            from torch.utils.tensorboard import SummaryWriter

            # purge_step writes a SessionLog START at that step; at a later START (a resume), TensorBoard
            # drops the events at steps >= it that earlier event files hold: what a killed run logged
            # after the checkpoint this run resumes from. A new run writes one too (at step 1): the
            # tensorboard server's reader treats the first START of a run as its beginning, not a restart.
            self._tensorboard = SummaryWriter(log_dir=str(self.run_dir), purge_step=start_step + 1, flush_secs=FLUSH_SECONDS)
        self._wandb = None
        if cfg.log.wandb and cfg.log.wandb_mode != "disabled":
            self._wandb_module = wandb
            self._wandb = wandb.init(
                project=cfg.log.project,
                name=run_name,
                mode=cfg.log.wandb_mode,
                dir=str(self.run_dir),
                config=OmegaConf.to_container(cfg, resolve=True),
            )
        self._started = time.perf_counter()  # ETA from this process's own pace (a resumed run starts mid-way)
        self._start_step = start_step

    # ---------------------------------------------------------------------------------------------
    def log(self, row: dict[str, Any]) -> None:
        if self._tensorboard is not None:
            step = row["step"]
            for tag, value in tensorboard_scalars(row).items():
                self._tensorboard.add_scalar(tag, value, step)
            if row.get("eval_return") is not None:
                self._tensorboard.flush()
        row = {key: _json_safe(value) for key, value in row.items()}
        self._file.write(json.dumps(row) + "\n")
        self._file.flush()
        if self._wandb is not None:
            data = {k: v for k, v in row.items() if v is not None and k not in ("step", "videos")}
            for i, path in enumerate(row.get("videos") or []):
                data[f"video/episode{i}"] = self._wandb_module.Video(path, format="mp4")
            self._wandb.log(data, step=row["step"])

    def progress(self, row: dict[str, Any], update: int, force: bool = False) -> None:
        """Show the row: redraw the bar, or print a plain line when one is due (see the module docstring)."""
        evaluated = row.get("eval_return") is not None
        if evaluated:
            self._last_eval = row["eval_return"]
        if self.interactive:
            self._progress_bar(row, update, force, evaluated)
            return
        if not (force or evaluated):
            if update % self.every_updates:
                return
            now = self._clock()
            if self.line_seconds > 0 and self._last_line is not None and now - self._last_line < self.line_seconds:
                return
        self._last_line = self._clock()
        print(self.line(row), file=sys.stdout, flush=True)

    def line(self, row: dict[str, Any]) -> str:
        """The plain progress line of a row."""
        step = row["step"]
        elapsed = time.perf_counter() - self._started
        done = step - self._start_step
        pace = done / elapsed if elapsed > 0 else float("nan")
        eta = max(self.total_steps - step, 0) / pace if pace and pace > 0 else float("nan")
        ret = row.get("episode_return")
        parts = [
            f"step {step:>10,}/{self.total_steps:,} ({100.0 * step / self.total_steps:5.1f}%)",
            f"{row.get('sps') or 0:>7,.0f} sps",
            f"return {ret:9.1f}" if ret is not None else "return       n/a",
            f"kl {row['approx_kl']:.4f}" if row.get("approx_kl") is not None else "",
            f"track {row['tracking_error_lin']:.2f} m/s {row['tracking_error_ang']:.2f} rad/s" if "tracking_error_lin" in row else "",
            f"eval {row['eval_return']:.1f}" if row.get("eval_return") is not None else "",
            f"eta {format_duration(eta)}",
        ]
        return " | ".join(p for p in parts if p)

    def _progress_bar(self, row: dict[str, Any], update: int, force: bool, evaluated: bool) -> None:
        step = row["step"]
        if force or evaluated:  # a permanent line above the bar: the scrollback keeps the evaluations
            self.write(self.line(row))
        if not (force or evaluated) and update % self.every_updates:
            return
        ret, kl = row.get("episode_return"), row.get("approx_kl")
        parts = [
            f"sps {row.get('sps') or 0:,.0f}",
            f"return {ret:.1f}" if ret is not None else "return n/a",
            f"kl {kl:.4f}" if kl is not None else "",
            f"eval {self._last_eval:.1f}" if self._last_eval is not None else "",
        ]
        postfix = " | ".join(p for p in parts if p)
        opened = self._bar is None
        if opened:
            self._bar = tqdm(
                total=self.total_steps,
                initial=min(self._start_step, self.total_steps),
                unit="step",
                unit_scale=True,
                dynamic_ncols=True,
                file=sys.stdout,
                postfix=postfix,
            )
        self._bar.set_postfix_str(postfix, refresh=False)
        self._bar.update(max(min(step, self.total_steps) - self._bar.n, 0))  # draws (tqdm: at most every 0.1 s)
        if force or evaluated or opened:  # tqdm itself skips draws closer than 0.1 s apart
            self._bar.refresh()
        if step >= self.total_steps:
            self._close_bar()

    def write(self, text: str) -> None:
        """Print a line without breaking the progress bar (above it, when one is shown)."""
        if self._bar is not None:
            self._bar.write(text, file=sys.stdout)
            sys.stdout.flush()
        else:
            print(text, file=sys.stdout, flush=True)

    def _close_bar(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def close(self) -> None:
        self._close_bar()
        self._file.close()
        if self._tensorboard is not None:
            self._tensorboard.close()  # flushes
            self._tensorboard = None
        if self._wandb is not None:
            self._wandb.finish()
            self._wandb = None


class NullLogger:
    """What ranks other than 0 log with: nothing (only rank 0 writes files and talks to wandb).
    write() prints (there is no bar to keep clear); callers decide which ranks print."""

    def log(self, row: dict[str, Any]) -> None:
        pass

    def progress(self, row: dict[str, Any], update: int, force: bool = False) -> None:
        pass

    def write(self, text: str) -> None:
        print(text, file=sys.stdout, flush=True)

    def close(self) -> None:
        pass
