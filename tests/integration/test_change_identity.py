"""Shipped changes are identified exactly (issue 12, reproduction 3).

A changelog sequence that is reset hands out ``gl_seq`` values of changes
already in the lake. Extraction must never take the new changes for shipped
ones (and delete them from the changelog): it refuses, in one line, and the
changes stay in the changelog. Real PostgreSQL and SQLite sources, the real
embedded Sail engine and Delta tables.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.cli import error_lines
from support.incremental import (
    SEED,
    Source,
    enable,
    extract,
    lake_state,
    workload_for,
)
from support.workload import Workload
from typer.testing import Result

from gluon.config import load_settings
from gluon.methods.base import SourceObject
from gluon.repo import Repository, migrations
from gluon.repo.incremental import IncrementalState


def _object(source: Source, kind: SourceObject) -> str:
    state = Repository(load_settings().repo_url).incremental.get_state(source.table.upper())
    assert state is not None
    item = next(o for o in state.source_objects if o.kind == kind.value)
    return f"{item.schema}.{item.name}" if source.dialect == "postgresql" else item.name


def _changelog_rows(source: Source, workload: Workload) -> int:
    changelog = _object(source, SourceObject.CHANGELOG_TABLE)
    if source.dialect == "sqlite":
        changelog = f"{source.schema}.{changelog}"
    with workload.engine.connect() as db:
        return int(db.execute(sa.text(f"SELECT COUNT(*) FROM {changelog}")).scalar_one())


def _reset_sequence(source: Source, workload: Workload) -> None:
    """What a DBA's ``RESTART WITH 1`` does (SQLite: rewinding ``sqlite_sequence``)."""
    with workload.engine.begin() as db:
        if source.dialect == "postgresql":
            sequence = _object(source, SourceObject.CHANGELOG_SEQUENCE)
            db.execute(sa.text(f"ALTER SEQUENCE {sequence} RESTART WITH 1"))
        else:
            changelog = _object(source, SourceObject.CHANGELOG_TABLE)
            db.execute(
                sa.text("UPDATE sqlite_sequence SET seq = 0 WHERE name = :name"),
                {"name": changelog},
            )


def _enabled_workload(
    source: Source, run_cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> Workload:
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = workload_for(source, "CHANGELOG", SEED)
    workload.create()
    enable(run_cli, source, "CHANGELOG")
    workload.round(12)
    extract(run_cli, source)
    assert lake_state(source.schema) == workload.expected
    return workload


def test_sequence_reset_below_shipped_is_refused(
    source: Source,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    workload = _enabled_workload(source, run_cli, monkeypatch)
    _reset_sequence(source, workload)
    workload.round(5)
    waiting = _changelog_rows(source, workload)
    assert waiting >= 5

    result = run_cli("offload", "-t", source.table, "-x", "--incremental-run-extraction")

    assert result.exit_code == 1, result.stdout
    lines = error_lines(result)
    assert len(lines) == 1 and "was reset" in lines[0] and "Changelog sequence reset" in lines[0]
    assert _changelog_rows(source, workload) == waiting, "the new changes left the changelog"


def test_reused_sequence_values_are_never_taken_for_shipped_ones(
    source: Source,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The sequence was reset and has since climbed past what was shipped: still refused."""
    workload = _enabled_workload(source, run_cli, monkeypatch)
    _reset_sequence(source, workload)
    workload.round(40)
    waiting = _changelog_rows(source, workload)

    result = run_cli("offload", "-t", source.table, "-x", "--incremental-run-extraction")

    assert result.exit_code == 1, result.stdout
    lines = error_lines(result)
    assert len(lines) == 1 and "already shipped" in lines[0], lines
    assert _changelog_rows(source, workload) == waiting, "the new changes left the changelog"


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_revision_0009_adds_shipped_seq_to_an_existing_repository(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """A repository made before revision 0009 gains the column and keeps its rows."""
    url = (
        f"sqlite:///{tmp_path / 'repo.db'}"
        if backend == "sqlite"
        else request.getfixturevalue("pg_url")
    )
    repo = Repository(url, create=True)
    state = IncrementalState(
        table_key="APP.T",
        method="CHANGELOG",
        status="enabled",
        key_columns=("ID",),
        source_objects=(),
        delta_table="app_load.t_changes",
        delta_path="/lake/t_changes",
    )
    repo.incremental.save_state(state)
    with repo.engine.begin() as db:  # back to the repository as revision 0008 left it
        db.execute(sa.text("ALTER TABLE incremental_state DROP COLUMN shipped_seq"))
        db.execute(sa.text(f"UPDATE {migrations.VERSION_TABLE} SET version_num = '0008'"))
    repo.engine.dispose()

    migrated = Repository(url)

    assert migrated.revision == migrations.HEAD
    assert migrated.incremental.get_state("APP.T") == state
    migrated.incremental.record_shipping("APP.T", 41)
    migrated.incremental.record_shipping("APP.T", 7)  # never lowered
    recorded = migrated.incremental.get_state("APP.T")
    assert recorded is not None and recorded.shipped_seq == 41
    migrated.engine.dispose()
