"""The tests' own SQL on a source database: a setup run once, statements in one transaction."""

from __future__ import annotations

import pytest
import sqlalchemy as sa


def run_sql(engine: sa.Engine, *statements: str) -> None:
    """Run ``statements`` in one transaction."""
    with engine.begin() as db:
        for statement in statements:
            db.execute(sa.text(statement))


def configured_source(url: str, monkeypatch: pytest.MonkeyPatch, *setup: str) -> sa.Engine:
    """The source gluon reads (``GLUON_SOURCE_URL``), with ``setup`` run on it; its engine."""
    monkeypatch.setenv("GLUON_SOURCE_URL", url)
    engine = sa.create_engine(url)
    run_sql(engine, *setup)
    return engine
