"""A built wheel, installed non-editable, runs the commands from any directory.

The wheel is built (offline, --no-isolation) from a clean copy of the source tree and installed with
pip into a fresh virtual environment that reuses the already installed dependencies. Every command
then runs there from a directory outside the repository, so what it reads (configs/train.yaml,
presets, tasks) must come from the wheel's ppo_control/data/, never from the checkout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.helpers import ROOT

pytestmark = pytest.mark.slow

# Left out of the copy the wheel is built from: VCS data, earlier build outputs, run outputs.
_NOT_SOURCE_ANYWHERE = shutil.ignore_patterns(
    ".git",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    ".pytest_cache",
    ".ruff_cache",
    ".venv",
    "wandb",
    "results",
    "videos",
    "MUJOCO_LOG.TXT",
)


def _not_source(folder: str, names: list[str]) -> set[str]:
    """_NOT_SOURCE_ANYWHERE, and the checkout's own runs/ (top level only: ppo_control/runs is the package's)."""
    left_out = set(_NOT_SOURCE_ANYWHERE(folder, names))
    if Path(folder) == ROOT and "runs" in names:
        left_out.add("runs")
    return left_out


SHIPPED_YAML = sorted(
    [f"ppo_control/data/configs/{p.relative_to(ROOT / 'configs').as_posix()}" for p in (ROOT / "configs").rglob("*.yaml")]
    + [f"ppo_control/data/tasks/{p.name}" for p in (ROOT / "tasks").glob("*.yaml")]
)
TINY_WHEEL = [
    "task=Hopper",
    "total_steps=256",
    "env.backend=gymnasium",
    "env.n_envs=2",
    "ppo.rollout_steps=64",
    "ppo.epochs=1",
    "ppo.minibatches=2",
    "eval.episodes=1",
    "eval.every_steps=0",
    "log.tensorboard=false",
]


class Venv:
    def __init__(self, path: Path, outside: Path):
        self.path = path
        self.python = path / "bin" / "python"
        self.outside = outside  # a working directory outside the repository
        self.env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
        self.env["WANDB_MODE"] = "disabled"

    def run(self, *args: str, timeout: float = 240) -> subprocess.CompletedProcess:
        return subprocess.run([str(self.python), *args], cwd=self.outside, env=self.env, capture_output=True, text=True, timeout=timeout)

    def module(self, module: str, *args: str) -> subprocess.CompletedProcess:
        return self.run("-m", module, *args)


def _ok(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, f"exit {result.returncode}\nstdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-3000:]}"
    return result


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    pytest.importorskip("build", reason="building the wheel needs `build` (pip install -e '.[dev]')")
    work = tmp_path_factory.mktemp("wheel")
    source = work / "src"
    shutil.copytree(ROOT, source, ignore=_not_source)  # a clean tree: no stale build/lib in the wheel, no junk in the repo
    dist = work / "dist"
    _ok(
        subprocess.run(
            [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(dist), str(source)],
            cwd=work,
            capture_output=True,
            text=True,
            timeout=300,
        )
    )
    (path,) = dist.glob("ppo_control-*.whl")
    return path


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Venv:
    root = tmp_path_factory.mktemp("venv")
    _ok(
        subprocess.run(
            [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(root / "env")],
            capture_output=True,
            text=True,
            timeout=120,
        )
    )
    outside = root / "cwd"
    outside.mkdir()
    env = Venv(root / "env", outside)
    # --system-site-packages reaches the base interpreter's site-packages only; where these tests run
    # inside a virtual environment, its site-packages hold the dependencies (and pip): add them too,
    # after the new environment's own site-packages, so the wheel's ppo_control is found first.
    probe = "import json, sys, sysconfig; print(json.dumps([sysconfig.get_path('purelib'), sys.path]))"
    purelib, inner_path = json.loads(_ok(env.run("-c", probe)).stdout)
    outer = [p for p in sys.path if p.rstrip("/").endswith(("site-packages", "dist-packages")) and Path(p).is_dir()]
    outer = [p for p in outer if p not in inner_path]
    if outer:  # one line: a .pth line that starts with `import` is executed
        line = "import site; " + "; ".join(f"site.addsitedir({p!r})" for p in outer)
        (Path(purelib) / "_outer_site_packages.pth").write_text(line + "\n")
    # --ignore-installed: the editable install of this checkout is visible through the outer
    # site-packages; pip must install beside it, not try to replace it.
    _ok(
        env.run(
            "-m", "pip", "install", "--no-deps", "--no-index", "--ignore-installed", "--disable-pip-version-check", "--quiet", str(wheel)
        )
    )
    return env


def test_wheel_ships_the_yaml_files(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert sorted(n for n in names if n.endswith(".yaml")) == SHIPPED_YAML
    assert "ppo_control/data/configs/train.yaml" in names and "ppo_control/data/configs/presets/paper.yaml" in names
    assert "ppo_control/data/configs/regimes/robot.yaml" in names  # the Playground robots' shared settings
    # 11 MuJoCo tasks, 2 partially observed, 9 robots, 2 robot variants (Go1's and Spot's trot)
    assert len([n for n in names if n.startswith("ppo_control/data/tasks/")]) == 24
    assert not [n for n in names if n.startswith(("configs/", "tasks/", "tests/"))], "top-level folders leaked into site-packages"


def test_venv_imports_the_wheel_not_the_checkout(venv):
    code = (
        "import json, ppo_control, ppo_control.config as c, ppo_control.config.resources as r; "
        "print(json.dumps([ppo_control.__file__, str(r.DATA_ROOT), str(c.CONFIG_DIR), str(c.TASKS_DIR)]))"
    )
    paths = [Path(p).resolve() for p in json.loads(_ok(venv.run("-c", code)).stdout)]
    for path in paths:
        assert path.is_relative_to(venv.path.resolve()), f"{path} is not inside the virtual environment {venv.path}"
        assert not path.is_relative_to(ROOT.resolve())
    assert paths[1].name == "data" and paths[1].parent == paths[0].parent


@pytest.mark.slow
def test_wheel_trains_evaluates_exports_from_outside_the_repository(venv):
    run = venv.outside / "run"
    _ok(venv.module("ppo_control.train", *TINY_WHEEL, f"run_dir={run}"))
    assert (run / "checkpoints" / "last.pt").is_file()

    resumed = _ok(venv.module("ppo_control.train", f"resume={run}", "total_steps=384"))  # compose_resume reads train.yaml
    assert "resuming from" in resumed.stdout

    _ok(venv.module("ppo_control.evaluate", f"run={run}", "episodes=1"))
    assert json.loads((run / "eval.json").read_text())["episodes"] == 1

    _ok(venv.module("ppo_control.export", f"run={run}"))
    assert (run / "export" / "policy.pt").is_file()

    _ok(venv.module("ppo_control.plot", str(run)))
    assert (run / "learning_curves.png").is_file()


def test_wheel_takes_a_user_task_file_and_the_paper_preset(venv):
    task = venv.outside / "MyHopper.yaml"
    task.write_text("env:\n  id: Hopper-v5\n")
    run = venv.outside / "user_task_run"
    # preset=paper reads configs/presets/paper.yaml from the wheel; the command line still wins over it
    _ok(venv.module("ppo_control.train", *TINY_WHEEL, f"task={task}", "preset=paper", f"run_dir={run}"))
    assert (run / "checkpoints" / "last.pt").is_file()


@pytest.mark.slow
def test_wheel_runs_a_benchmark_suite(venv):
    out = venv.outside / "bench"  # each (task, seed) trains in its own `python -m ppo_control.train` process
    _ok(
        venv.module(
            "ppo_control.benchmark",
            "tasks=[InvertedPendulum]",
            "seeds=1",
            "total_steps=256",
            f"out={out}",
            "env.backend=gymnasium",
            "env.n_envs=2",
            "ppo.rollout_steps=64",
            "eval.episodes=1",
            "eval.every_steps=0",
        )
    )
    assert (out / "results.csv").is_file() and (out / "runs" / "InvertedPendulum" / "s0" / "checkpoints" / "last.pt").is_file()


def test_wheel_lists_tasks_and_reports_errors_in_one_line(venv):
    listed = _ok(venv.module("ppo_control.tasks")).stdout.splitlines()[1:]
    assert [line.split()[0] for line in listed] == sorted(p.stem for p in (ROOT / "tasks").glob("*.yaml"))
    bad = venv.module("ppo_control.train", "task=Hoper")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "Did you mean 'Hopper'" in bad.stderr
