"""Where numbers go: a progress line on the console, metrics.jsonl, and (optionally) wandb."""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

METRICS_FILE = "metrics.jsonl"


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


class MetricsLogger:
    """Appends one JSON row per update to metrics.jsonl, mirrors it to wandb, prints progress."""

    def __init__(self, run_dir: Path, cfg: DictConfig, run_name: str, start_step: int = 0):
        self.run_dir = Path(run_dir)
        self.every_updates = cfg.log.every_updates
        self.total_steps = cfg.total_steps
        self._file = open(self.run_dir / METRICS_FILE, "a", encoding="utf-8")
        self._wandb = None
        if cfg.log.wandb and cfg.log.wandb_mode != "disabled":
            import wandb  # imported lazily: it is slow to import and optional

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

    def log(self, row: dict[str, Any]) -> None:
        row = {key: _json_safe(value) for key, value in row.items()}
        self._file.write(json.dumps(row) + "\n")
        self._file.flush()
        if self._wandb is not None:
            data = {k: v for k, v in row.items() if v is not None and k not in ("step", "videos")}
            for i, path in enumerate(row.get("videos") or []):
                data[f"video/episode{i}"] = self._wandb_module.Video(path, format="mp4")
            self._wandb.log(data, step=row["step"])

    def progress(self, row: dict[str, Any], update: int, force: bool = False) -> None:
        if not force and update % self.every_updates:
            return
        step = row["step"]
        elapsed = time.perf_counter() - self._started
        done = step - self._start_step
        pace = done / elapsed if elapsed > 0 else float("nan")
        eta = max(self.total_steps - step, 0) / pace if pace and pace > 0 else float("nan")
        ret = row.get("episode_return")
        parts = [
            f"step {step:>10,}/{self.total_steps:,} ({100.0 * step / self.total_steps:5.1f}%)",
            f"{row.get('sps', 0):>7,.0f} sps",
            f"return {ret:9.1f}" if ret is not None else "return       n/a",
            f"kl {row['approx_kl']:.4f}" if row.get("approx_kl") is not None else "",
            f"eval {row['eval_return']:.1f}" if row.get("eval_return") is not None else "",
            f"eta {format_duration(eta)}",
        ]
        print(" | ".join(p for p in parts if p), file=sys.stdout, flush=True)

    def close(self) -> None:
        self._file.close()
        if self._wandb is not None:
            self._wandb.finish()
            self._wandb = None


class NullLogger:
    """What ranks other than 0 log with: nothing (only rank 0 writes files and talks to wandb)."""

    def log(self, row: dict[str, Any]) -> None:
        pass

    def progress(self, row: dict[str, Any], update: int, force: bool = False) -> None:
        pass

    def close(self) -> None:
        pass
