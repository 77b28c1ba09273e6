"""Every config key is documented where it is declared: a `# ...` comment in configs/train.yaml."""

from __future__ import annotations

from ppo_control.config import all_keys, train_yaml_keys


def test_every_key_has_a_description() -> None:
    comments = {key: doc for key, _, doc in train_yaml_keys()}
    assert [key for key in all_keys() if not comments.get(key)] == []
