"""Fixtures of the lifecycle model tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def stateful_tmp(tmp_path: Path) -> Iterator[Path]:
    """Where each example of the machine makes its OFFLOAD_HOME and SQLite databases."""
    os.environ["GLUON_STATEFUL_TMP"] = str(tmp_path)
    yield tmp_path
    os.environ.pop("GLUON_STATEFUL_TMP", None)
