"""Capture on SQLite: the shared contract (``support.capture_contract``) on a fresh file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.capture_contract import CaptureContract, CaptureEnv, enable, snapshot_rows

from gluon.capture import changelog
from gluon.methods import registered_methods
from gluon.methods.base import ExtractionMethod, SourceObject
from gluon.source import connect

METHODS = sorted(name for name, m in registered_methods().items() if m.supports_dialect("sqlite"))

NAMES = {
    SourceObject.CHANGELOG_TABLE: ("main", "main_h_orders_log"),
    SourceObject.CHANGELOG_TRIGGER: ("main", "main_h_orders_ct"),
    SourceObject.UPDATABLE_VIEW: ("main", "main_h_orders_uv"),
    SourceObject.UPDATABLE_TRIGGER: ("main", "main_h_orders_uv"),
    SourceObject.LAKE_ROWS_TABLE: ("main", "main_h_orders_lk"),
}

# sqlite_sequence appears with the first AUTOINCREMENT table and can never be dropped; it is
# SQLite's bookkeeping, so the catalog is compared without it (its rows are compared instead).
CATALOG = """
SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name <> 'sqlite_sequence'
"""
SEQUENCE_ROWS = "SELECT name, seq FROM sqlite_sequence"


@pytest.fixture(params=METHODS)
def method(request: pytest.FixtureRequest) -> type[ExtractionMethod]:
    return registered_methods()[request.param]


@pytest.fixture
def env(tmp_path: Path) -> Iterator[CaptureEnv]:
    source = connect(f"sqlite:///{tmp_path / 'source.db'}")

    def create_table(name: str, primary_key: bool) -> None:
        key = " PRIMARY KEY" if primary_key else ""
        environment.run(
            f"CREATE TABLE main.{name} (id INTEGER{key}, name TEXT, amount NUMERIC(12,2), "
            "noted DATE)"
        )

    def snapshot() -> Any:
        catalog = snapshot_rows(source, CATALOG)
        has_sequences = any(
            row[1] == "sqlite_sequence"
            for row in snapshot_rows(source, "SELECT type, name FROM sqlite_master")
        )
        sequences = snapshot_rows(source, SEQUENCE_ROWS) if has_sequences else []
        return catalog, sequences

    environment = CaptureEnv(source, "main", create_table, snapshot, NAMES)
    yield environment
    source.engine.dispose()


class TestSQLiteCapture(CaptureContract):
    pass


def test_the_changelog_key_never_repeats(env: CaptureEnv) -> None:
    """AUTOINCREMENT: deleting the highest rows does not hand their values out again."""
    enabled = enable(env, registered_methods()["CHANGELOG"], seed=False)
    env.run("INSERT INTO main.orders (id) VALUES (1)", "INSERT INTO main.orders (id) VALUES (2)")
    first = enabled.seqs()
    changelog.delete_changes(env.source, enabled.objects, first)
    env.run("INSERT INTO main.orders (id) VALUES (3)")
    assert enabled.seqs()[0] > max(first)
