"""Train, load and run a policy from Python: the API a notebook or a script uses.

    python examples/python_api.py [total_steps]   (default 4096: a few seconds, to show the calls)

It trains a short InvertedPendulum run through the package's API, loads its policy as a plain
callable (numpy observation in, action out), drives a Gymnasium env with it, evaluates the run,
exports it to TorchScript and checks that the exported file acts exactly like the loaded policy.
"""

import sys
import tempfile
from pathlib import Path

import gymnasium as gym
import numpy as np

from ppo_control import evaluate, export, load_policy, train


def main(total_steps: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        result = train(
            "InvertedPendulum",
            total_steps=total_steps,
            run_dir=str(Path(tmp) / "run"),
            env={"backend": "gymnasium", "n_envs": 4},
            eval={"episodes": 3, "every_steps": 0},
            **{"ppo.rollout_steps": 256, "log.tensorboard": False},
        )
        print(f"trained {result.step:,} steps -> {result.run_dir}; eval return {result.eval_return:.1f}")

        policy = load_policy(result.run_dir)
        env = gym.make("InvertedPendulum-v5")
        obs, _ = env.reset(seed=0)
        policy.reset()
        episode_return, steps, done = 0.0, 0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(policy(obs))
            episode_return += float(reward)
            steps += 1
            done = terminated or truncated
        env.close()
        print(f"one episode driven by the loaded policy: return {episode_return:.1f} in {steps} steps")

        report = evaluate(result.run_dir, episodes=3)
        print(f"evaluate: {report['return_mean']:.1f} +- {report['return_std']:.1f} over {report['episodes']} episodes")

        exported = load_policy(export(result.run_dir, format="torchscript"))
        probe = np.random.default_rng(0).normal(size=(8, policy.obs_dim)).astype(np.float32)
        assert np.allclose(exported(probe), policy(probe), atol=1e-5), "the export must act like the trained policy"
        print(f"exported {exported.source.name}: acts like the trained policy on {len(probe)} observations")


if __name__ == "__main__":
    main(int(float(sys.argv[1])) if len(sys.argv) > 1 else 4096)
