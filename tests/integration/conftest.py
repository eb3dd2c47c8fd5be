"""Fixtures of the integration tests that run once per source dialect.

A module that needs a different ``source`` defines its own, which takes precedence.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.incremental import Source, postgres_source, sqlite_source


@pytest.fixture(params=["sqlite", "postgresql"])
def source(request: pytest.FixtureRequest, tmp_path: Path) -> Source:
    """An empty source of each dialect (PostgreSQL: schema ``app`` of a fresh database)."""
    if request.param == "sqlite":
        return sqlite_source(tmp_path / "app.db")
    return postgres_source(request.getfixturevalue("pg_url"))
