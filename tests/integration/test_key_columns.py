"""Key columns of a merging method identify one row (issue 12, reproduction 12).

CHANGELOG keeps the latest change per key: with ``--incremental-key-columns``
shared by several rows, one update made the lake show 99 rows for the
source's 100. Real PostgreSQL and SQLite sources, the real embedded Sail
engine and Delta tables.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.cli import error_lines
from support.incremental import Source, extract, lake_rows
from typer.testing import Result

from gluon.config import load_settings
from gluon.repo import Repository


def _create(source: Source) -> None:
    """100 rows without a primary key: ``id`` is unique, ``grp`` is shared by two rows each."""
    with source.engine.begin() as db:
        db.execute(
            sa.text(
                f"CREATE TABLE {source.table} "
                "(id INTEGER NOT NULL, grp INTEGER NOT NULL, name VARCHAR(20))"
            )
        )
        for key in range(100):
            db.execute(
                sa.text(f"INSERT INTO {source.table} VALUES (:id, :grp, 'n')"),
                {"id": key, "grp": key % 50},
            )


def _enable(run_cli: Callable[..., Result], source: Source, *flags: str) -> Result:
    return run_cli(
        "offload",
        "-t",
        source.table,
        "-x",
        "--incremental-updates-enabled",
        "--incremental-extraction-method=CHANGELOG",
        *flags,
    )


def _source_rows(source: Source) -> list[tuple[int, int, str]]:
    with source.engine.connect() as db:
        rows = db.execute(sa.text(f"SELECT id, grp, name FROM {source.table} ORDER BY id"))
        return [(int(r[0]), int(r[1]), str(r[2])) for r in rows]


def _lake_rows(source: Source) -> list[tuple[int, int, str]]:
    rows = lake_rows(f"SELECT id, grp, name FROM {source.schema}.items ORDER BY id")
    return [(int(str(r["id"])), int(str(r["grp"])), str(r["name"])) for r in rows]


def test_shared_key_columns_are_refused(
    source: Source,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    _create(source)

    result = _enable(run_cli, source, "--incremental-key-columns=grp")

    assert result.exit_code == 1, result.stdout
    lines = error_lines(result)
    assert len(lines) == 1, lines
    assert "50 duplicated values of (grp)" in lines[0]
    assert "--incremental-no-verify-primary-key" in lines[0]
    repo = Repository(load_settings().repo_url)
    assert repo.incremental.get_state(source.table.upper()) is None, "enable changed something"


def test_unique_key_columns_without_a_primary_key_keep_every_row(
    source: Source,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    _create(source)
    result = _enable(run_cli, source, "--incremental-key-columns=id")
    assert result.exit_code == 0, result.stderr

    with source.engine.begin() as db:
        db.execute(sa.text(f"UPDATE {source.table} SET name = 'changed' WHERE id = 7"))
    extract(run_cli, source)

    assert _lake_rows(source) == _source_rows(source)
    assert len(_lake_rows(source)) == 100


def test_no_verify_primary_key_lets_shared_key_columns_through(
    source: Source,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The escape the insert-only methods have: the user vouches for the key."""
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    _create(source)

    result = _enable(
        run_cli, source, "--incremental-key-columns=grp", "--incremental-no-verify-primary-key"
    )

    assert result.exit_code == 0, result.stderr
