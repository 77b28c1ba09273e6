"""docs/configuration.md is generated from configs/train.yaml and the commands' schemas: it must
match what the generator writes now, cover every key, and describe each one."""

from __future__ import annotations

import importlib.util
import re

from ppo_control.config import all_keys
from tests.helpers import ROOT

PAGE = ROOT / "docs" / "configuration.md"


def generator():
    spec = importlib.util.spec_from_file_location("config_reference", ROOT / "scripts" / "config_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_page_is_what_the_generator_writes() -> None:
    assert PAGE.read_text(encoding="utf-8") == generator().render(), "run: python scripts/config_reference.py"


def test_every_training_key_is_in_the_page() -> None:
    documented = set(re.findall(r"^\| `([\w.]+)` \|", PAGE.read_text(encoding="utf-8"), flags=re.MULTILINE))
    assert [key for key in all_keys() if key not in documented] == []


def test_every_key_of_every_command_has_a_description() -> None:
    rows = re.findall(r"^\| `([\w.]+)` \| `[^`]*` \| (.*) \|$", PAGE.read_text(encoding="utf-8"), flags=re.MULTILINE)
    assert len(rows) > 100
    assert [key for key, doc in rows if not doc.strip()] == []
