"""The release is declared once: ``gluon/__init__.py``, which pyproject.toml reads."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import gluon

ROOT = Path(__file__).resolve().parents[2]
HATCH_DEFAULT_PATTERN = r"(?i)^(__version__|VERSION) *= *([\'\"])v?(?P<version>.+?)\2"
"""Hatch's default ``regex`` version source pattern."""


def test_the_version_is_declared_only_in_the_package() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"], "a second declaration in pyproject.toml"
    assert "version" in project["project"]["dynamic"]
    source = ROOT / project["tool"]["hatch"]["version"]["path"]
    found = re.search(HATCH_DEFAULT_PATTERN, source.read_text(), re.MULTILINE)
    assert found is not None and found["version"] == gluon.__version__
