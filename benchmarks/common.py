"""Helpers shared by the benchmark scripts (no heavy imports: this runs in every benchmark process).

- `parse_args`: key=value command-line arguments, typed by their defaults.
- `run_measured`: run one training command in its own process and measure that process alone:
  wall-clock, peak RSS and CPU seconds from `os.wait4` on its pid (exact per run, unlike
  RUSAGE_CHILDREN, which is a running maximum over every child the parent ever waited for), with
  an optional wall-clock stop (SIGINT, which makes ppo_control finish its update, checkpoint and
  exit 0).
- `ours_command`, `read_metrics`, `ours_steps_per_second`: our trainer's command line and metrics.jsonl.
- `markdown_table`, `versions`, `write_json`.
"""

from __future__ import annotations

import json
import os
import platform
import signal
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = ROOT / "benchmarks"
RESULTS_DIR = BENCH_DIR / "results"


# ---------------------------------------------------------------------------------------------
# Arguments
def _parse_value(text: str, default: Any) -> Any:
    if isinstance(default, bool):
        if text.lower() in ("1", "true", "yes", "on"):
            return True
        if text.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"expected true or false, got {text!r}")
    if isinstance(default, list):
        items = [t.strip() for t in text.strip().strip("[]").split(",") if t.strip()]
        kind = type(default[0]) if default else str
        return [kind(t) for t in items]
    if isinstance(default, int):
        return int(float(text))  # accepts 1e6
    if isinstance(default, float):
        return float(text)
    if default is None:  # optional: int when it looks like one, else the string
        if text.lower() in ("none", "null", ""):
            return None
        try:
            return int(float(text)) if float(text) == int(float(text)) else float(text)
        except ValueError:
            return text
    return text


def parse_args(argv: Sequence[str], defaults: dict[str, Any], usage: str) -> dict[str, Any]:
    """`key=value` arguments over `defaults`; a bad argument exits 2 with one line naming it."""
    args = dict(defaults)
    for arg in argv:
        if arg in ("-h", "--help"):
            print(usage.strip())
            raise SystemExit(0)
        key, sep, value = arg.partition("=")
        if not sep or key not in defaults:
            valid = ", ".join(f"{k}={v}" for k, v in defaults.items())
            print(f"{arg!r}: expected key=value with key one of: {valid}", file=sys.stderr)
            raise SystemExit(2)
        try:
            args[key] = _parse_value(value, defaults[key])
        except ValueError as exc:
            print(f"{key}={value!r}: {exc}", file=sys.stderr)
            raise SystemExit(2) from None
    return args


# ---------------------------------------------------------------------------------------------
# Running one measured process
@dataclass
class Measured:
    returncode: int
    launch_time: float  # unix seconds just before the process was started
    wall_s: float  # launch to exit
    peak_rss_mib: float  # max resident set size of the process (and of any child it waited for)
    cpu_s: float  # user + system CPU seconds
    interrupted: bool  # a wall-clock stop (SIGINT) was sent
    log: str  # path of the combined stdout/stderr log
    load_before: float  # 1-minute load average at launch: well above 0 means something else was running

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_directory(args: dict[str, Any]) -> Path:
    """The `run=<dir>` argument a script needs; one line and exit 2 without it."""
    if not args.get("run"):
        print("error: give run=<run dir>", file=sys.stderr)
        raise SystemExit(2)
    return Path(args["run"])


def run_measured(
    cmd: Sequence[str],
    log_path: Path,
    stop_after_s: float | None = None,
    grace_s: float = 600.0,
    env: dict[str, str] | None = None,
    ok_codes: Sequence[int] = (0,),
) -> Measured:
    """Run `cmd` (cwd = repository root), stdout+stderr to `log_path`; measure it by `os.wait4`.

    With `stop_after_s`, SIGINT is sent that many seconds after launch; after `grace_s` more
    seconds it is killed (SIGKILL). An exit status outside `ok_codes` (plus 130/-2 after our own
    SIGINT) prints the log's tail and exits 1.
    """
    import subprocess

    log_path.parent.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()[0]
    with open(log_path, "w") as log:
        launch = time.time()
        proc = subprocess.Popen(list(cmd), cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
        interrupted = False
        killed = False
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid == proc.pid:
                break
            elapsed = time.time() - launch
            if stop_after_s is not None and not interrupted and elapsed >= stop_after_s:
                proc.send_signal(signal.SIGINT)
                interrupted = True
            elif interrupted and not killed and elapsed >= stop_after_s + grace_s:
                proc.kill()
                killed = True
            time.sleep(0.05)
        wall = time.time() - launch
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped by wait4; keep Popen consistent
    allowed = set(ok_codes) | ({130, -signal.SIGINT} if interrupted else set())
    if proc.returncode not in allowed:
        tail = "".join(Path(log_path).read_text(errors="replace").splitlines(keepends=True)[-30:])
        print(
            f"command failed with exit status {proc.returncode}: {' '.join(cmd)}\n--- last lines of {log_path} ---\n{tail}", file=sys.stderr
        )
        raise SystemExit(1)
    return Measured(
        proc.returncode,
        launch,
        wall,
        usage.ru_maxrss / 1024.0,  # Linux: KiB
        usage.ru_utime + usage.ru_stime,
        interrupted,
        str(log_path),
        load_before,
    )


# ---------------------------------------------------------------------------------------------
# Our trainer
def ours_command(task: str, seed: int, run_dir: Path, overrides: Sequence[str] = ()) -> list[str]:
    return [
        sys.executable,
        "-m",
        "ppo_control.train",
        f"task={task}",
        f"seed={seed}",
        f"run_dir={run_dir}",
        "checkpoint.every_steps=0",
        "log.every_updates=1000",
        *overrides,
    ]


def read_metrics(run_dir: Path) -> list[dict[str, Any]]:
    """A run's metrics rows, live or archived (plot.read_metrics: cut-short lines skipped)."""
    from ppo_control.analysis.curves import metrics_file
    from ppo_control.analysis.curves import read_metrics as read_rows

    path = metrics_file(Path(run_dir))
    if path is None:
        raise FileNotFoundError(f"no metrics in {run_dir}")
    return read_rows(path)


def ours_steps_per_second(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Training steps/s from metrics.jsonl, first update excluded (as benchmarks/speed/distributed.py).

    `sps`: steps / summed per-update training time (collect + update; evaluation, logging and
    checkpoint writes between updates are outside it). `sps_wall`: the same steps over the
    wall-clock between the first and the last row's `time`, so everything between updates counts.
    """
    later = rows[1:]
    if not later:
        raise ValueError("need at least 2 updates to exclude the first; raise total_steps")
    steps = sum(r["steps_this_update"] for r in later)
    seconds = sum(r["steps_this_update"] / r["sps"] for r in later)
    wall = rows[-1]["time"] - rows[0]["time"]
    return {
        "sps": steps / seconds,
        "sps_wall": steps / wall if wall > 0 else float("nan"),
        "steps_measured": steps,
        "updates_measured": len(later),
    }


def resolved_config(run_dir: Path) -> dict[str, Any]:
    """The run's resolved config.yaml as plain containers (omegaconf is a project dependency)."""
    from omegaconf import OmegaConf

    from ppo_control.runs.layout import CONFIG_FILE

    return OmegaConf.to_container(OmegaConf.load(Path(run_dir) / CONFIG_FILE), resolve=True)  # type: ignore[return-value]


# ---------------------------------------------------------------------------------------------
# Reporting
def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def cpu_model() -> str | None:
    """The CPU's model name from /proc/cpuinfo (None where there is none)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def versions() -> dict[str, Any]:
    """Library versions and the machine, for the results file (imports are cheap by then)."""
    from importlib import metadata

    out: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
    }
    model = cpu_model()
    if model is not None:
        out["cpu_model"] = model
    for dist in ("torch", "gymnasium", "mujoco", "numpy", "stable-baselines3", "envpool", "ppo_control"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)


def rel(path: Path | str) -> str:
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)
