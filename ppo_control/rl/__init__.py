"""The algorithm: actor-critic with its normalizers, rollout storage and GAE, the PPO update, the rollout loop, evaluation."""
