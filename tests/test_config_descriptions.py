"""Every config key is documented where it is declared: a `# ...` comment in configs/train.yaml."""

from __future__ import annotations

import re

from ppo_control.config import all_keys
from ppo_control.resources import CONFIG_DIR


def yaml_comments() -> dict[str, str]:
    comments: dict[str, str] = {}
    stack: list[str] = []
    for line in (CONFIG_DIR / "train.yaml").read_text().splitlines():
        match = re.match(r"(\s*)(\w+):\s*([^#]*?)\s*(?:#\s*(.*))?$", line)
        if match:
            stack = [*stack[: len(match.group(1)) // 2], match.group(2)]
            comments[".".join(stack)] = (match.group(4) or "").strip()
    return comments


def test_every_key_has_a_description() -> None:
    comments = yaml_comments()
    assert [key for key in all_keys() if not comments.get(key)] == []
