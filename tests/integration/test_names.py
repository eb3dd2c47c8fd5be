"""Any legal name works (issue 12, reproduction 6): tables and columns named with ``#``,
``$``, spaces, unicode and mixed case go through offload, enable, extraction, compaction
and ``gluon query`` on PostgreSQL and SQLite, and the user view equals the source.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.incremental import RunCli

from gluon.config import load_settings
from gluon.repo import Repository


@dataclass(frozen=True)
class NameKind:
    table: str
    """The table's name in the source."""
    column: str
    """An odd column's name in the source."""
    typed: str
    """How a user types the table after the schema in ``-t``."""


KINDS = {
    "hash": NameKind("a#b", "qty#", "a#b"),
    "dollar": NameKind("t$x", "amt$", "t$x"),
    "space": NameKind("order items", "unit price", '"order items"'),
    "unicode": NameKind("bücher", "größe", "bücher"),
    "mixed_case": NameKind("MixedCase", "MixedCol", '"MixedCase"'),
}


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _source_rows(engine: sa.Engine, table: str, column: str) -> dict[int, tuple[object, object]]:
    with engine.connect() as db:
        rows = db.execute(sa.text(f"SELECT id, label, {_quoted(column)} FROM {table}"))
        return {int(row[0]): (row[1], None if row[2] is None else int(row[2])) for row in rows}


def _lake_rows(view: str, column: str) -> dict[int, tuple[object, object]]:
    from support.cli import run_cli

    result = run_cli("gluon", "query", "--json", f"SELECT * FROM {view}")
    assert result.exit_code == 0, result.stderr
    rows = json.loads(result.stdout)
    assert rows == [] or set(rows[0]) == {"id", "label", column.lower()}
    return {int(row["id"]): (row["label"], row[column.lower()]) for row in rows}


@pytest.mark.parametrize("dialect", ["sqlite", "postgresql"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_table_and_a_column_of_each_name_kind(
    kind: str,
    dialect: str,
    tmp_path: Path,
    offload_home: Path,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    name = KINDS[kind]
    if dialect == "sqlite":
        url, schema = f"sqlite:///{tmp_path / 'app.db'}", "main"
    else:
        url, schema = str(request.getfixturevalue("pg_url")), "shop"
    monkeypatch.setenv("GLUON_SOURCE_URL", url)
    engine = sa.create_engine(url)
    table = f"{schema}.{_quoted(name.table)}"
    with engine.begin() as db:
        if dialect == "postgresql":
            db.execute(sa.text("CREATE SCHEMA IF NOT EXISTS shop"))
        db.execute(
            sa.text(
                f"CREATE TABLE {table} (id integer PRIMARY KEY, label varchar(20), "
                f"{_quoted(name.column)} integer)"
            )
        )
        db.execute(
            sa.text(f"INSERT INTO {table} VALUES (:id, :label, :value)"),
            [{"id": n, "label": f"row {n}", "value": n * 10} for n in range(1, 31)],
        )
    typed = f"{schema}.{name.typed}"
    view = f"`{schema}`.`{name.table.lower()}`"
    enabled = run_cli(
        "offload",
        "-t",
        typed,
        "-x",
        "--incremental-updates-enabled",
        "--incremental-extraction-method=CHANGELOG",
        "--partition-columns=id",
        "--partition-granularity=10",
    )
    assert enabled.exit_code == 0, enabled.stderr
    assert _lake_rows(view, name.column) == _source_rows(engine, table, name.column)

    def change(round_: int) -> None:
        with engine.begin() as db:
            db.execute(
                sa.text(f"UPDATE {table} SET {_quoted(name.column)} = id + :r WHERE id % 3 = 0"),
                {"r": round_},
            )
            db.execute(sa.text(f"DELETE FROM {table} WHERE id = :id"), {"id": round_})
            db.execute(
                sa.text(f"INSERT INTO {table} VALUES (:id, 'new', NULL)"), {"id": 100 + round_}
            )

    def offload(*flags: str) -> str:
        result = run_cli("offload", "-t", typed, "-x", *flags)
        assert result.exit_code == 0, result.stderr
        return str(result.stdout)

    change(1)
    offload("--incremental-run-extraction")
    assert _lake_rows(view, name.column) == _source_rows(engine, table, name.column)
    compaction = ("--incremental-run-compaction", "--incremental-wait-time=0")
    assert "stopped" in offload(*compaction, "--incremental-terminate-compaction")
    change(2)
    offload("--incremental-run-extraction")
    assert "complete" in offload(*compaction)
    assert _lake_rows(view, name.column) == _source_rows(engine, table, name.column)

    # Lake directories are plain names that every object store accepts.
    record = Repository(load_settings().repo_url).get_table(f"{schema}.{name.table}".upper())
    assert record is not None
    for path in Path(load_settings().lake_root).rglob("*"):
        relative = path.relative_to(load_settings().lake_root).as_posix()
        assert all(c.isascii() and (c.isalnum() or c in "._-=/") for c in relative), relative
