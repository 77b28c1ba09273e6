"""What the tests share besides fixtures (those are in conftest.py): the repository root, the tiny
training settings, running a command as a user would, a recorded rollout, MJX's short time limit.
Import it as `from tests.helpers import ...`."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
USER_ENVS = ROOT / "tests" / "user_envs"  # modules a user's env.id names (module:Class): put on the path by the tests that use them

# Small, fast settings shared by the tests that train for a few updates. Gymnasium backend: its
# runs resume bit-exactly, which many tests rely on; envpool has tests of its own.
TINY = [
    "env.backend=gymnasium",
    "env.n_envs=2",
    "ppo.rollout_steps=64",
    "ppo.epochs=2",
    "ppo.minibatches=4",
    "eval.episodes=2",
    "eval.every_steps=0",
    "checkpoint.every_steps=0",
    "log.every_updates=1",
]


def tiny_overrides() -> dict:
    """TINY as the Python API takes it: dotted keys with Python values."""
    from omegaconf import OmegaConf

    return {o.split("=")[0]: OmegaConf.select(OmegaConf.from_dotlist([o]), o.split("=")[0]) for o in TINY}


def run_module(module: str, *args: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run `python -m <module> args...` as a user would."""
    return subprocess.run([sys.executable, "-m", module, *args], cwd=cwd or ROOT, capture_output=True, text=True, timeout=timeout)


def assert_training_refused(tmp_path: Path, overrides: list[str], message: str) -> None:
    """A short training with `overrides` exits 2 with one line containing `message` and leaves no run directory."""
    run_dir = tmp_path / "run"
    result = run_module("ppo_control.train", *overrides, "total_steps=128", f"run_dir={run_dir}")
    assert result.returncode == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not run_dir.exists()


def train_in_process(run_dir: Path, *overrides: str):
    """Train in this process and return the Trainer's final eval dict (imports kept local)."""
    from ppo_control.config import compose
    from ppo_control.training.trainer import Trainer

    cfg = compose([*overrides, f"run_dir={run_dir}"])
    return Trainer(cfg).train()


class RecordedRollouts:
    """A collector on `task` with TINY settings + `overrides`, its policy's normalizer statistics
    far from the identity, every env step's result recorded (`results`, cleared by `collect`)."""

    def __init__(self, *overrides: str):
        import torch

        from ppo_control.config import compose
        from ppo_control.envs import make_vec_env
        from ppo_control.rl.policy import build_policy
        from ppo_control.rl.rollout import RolloutCollector

        self.cfg = cfg = compose([*TINY, *overrides])
        self.envs = make_vec_env(cfg.env)
        torch.manual_seed(0)
        self.policy = build_policy(cfg.policy, cfg.normalize, self.envs.info)
        self.policy.obs_normalizer.update(torch.randn(500, self.envs.info.obs_dim) * 2.0 + 0.5)
        self.results = []
        env_step = self.envs.step

        def recording_step(actions):
            self.results.append(env_step(actions))
            return self.results[-1]

        self.envs.step = recording_step
        ppo = cfg.ppo
        self.collector = RolloutCollector(
            self.envs,
            self.policy,
            ppo.rollout_steps,
            ppo.gamma,
            cfg.normalize.reward_clip,
            True,
            sequence_length=cfg.policy.rnn_sequence_length,
        )
        self.collector.reset(0)

    def collect(self):
        """One rollout (the envs are closed if it fails)."""
        self.results.clear()
        try:
            return self.collector.collect()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        self.envs.close()


MJX_LIMIT = 12  # a short time limit for the MJX Hopper: truncations within a few dozen steps, beside its falls


def random_actions(steps, n, action_dim, seed=0):
    """Seeded uniform actions in [-1, 1], [steps, n, action_dim]."""
    import torch

    return torch.rand(steps, n, action_dim, generator=torch.Generator().manual_seed(seed)) * 2 - 1
