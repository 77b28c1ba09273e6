"""Where the shipped YAML files are: configs/ (train.yaml, presets/, backends/) and tasks/.

The repository's top-level configs/ and tasks/ folders are the one source. A built wheel (or a
non-editable install) carries copies of them inside the package, under ppo_control/data/ (see
pyproject.toml); a source checkout or an editable install reads them at the repository root.
"""

from __future__ import annotations

from pathlib import Path

VERSION = "0.1.0"  # the package's version (pyproject.toml's), as ppo_control.__version__

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # ppo_control/
_PACKAGED = PACKAGE_DIR / "data"
_SOURCE = PACKAGE_DIR.parent


def _root() -> Path:
    return _PACKAGED if (_PACKAGED / "configs" / "train.yaml").is_file() else _SOURCE


DATA_ROOT = _root()
CONFIG_DIR = DATA_ROOT / "configs"
PRESETS_DIR = CONFIG_DIR / "presets"
REGIMES_DIR = CONFIG_DIR / "regimes"  # settings shared by a family of tasks (regimes/robot.yaml)
BACKENDS_DIR = CONFIG_DIR / "backends"  # settings of a backend's regime (backends/mjx.yaml)
TASKS_DIR = DATA_ROOT / "tasks"
