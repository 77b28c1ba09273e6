"""The wheel carries every Python package of the source tree: pyproject.toml lists its packages by
name, so a new subpackage that is not listed would be missing from a wheel install."""

from __future__ import annotations

import tomllib

from tests.helpers import ROOT


def test_every_subpackage_with_an_init_is_listed_in_pyproject():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {".".join(init.parent.relative_to(ROOT).parts) for init in (ROOT / "ppo_control").rglob("__init__.py")}
    assert on_disk <= listed, f"not in pyproject.toml's packages: {sorted(on_disk - listed)}"
