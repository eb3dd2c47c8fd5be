"""Keys of more than one column, in both merge modes (issue 26, item 1).

The merge condition joined its ``IS NOT DISTINCT FROM`` terms with ``AND`` unparenthesized;
deltalake's parser binds ``IS NOT DISTINCT FROM`` looser than ``AND``, so every extraction of
a table with a composite key failed with a ``type_coercion`` error. Real SQLite and
PostgreSQL sources, the embedded Sail engine, and the base table read without gluon
(``deltalake``), value for value against the source; in DEFERRED mode the merging view (its
``<=>`` key joins) and the base table after compaction too.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.incremental import Source, lake_rows
from typer.testing import Result

from gluon.config import load_settings
from gluon.lake import storage
from gluon.repo import Repository

Values = tuple[str, ...]

SHAPES: dict[str, tuple[tuple[str, str], list[tuple[object, str]]]] = {
    # table: (key column types, first rows)
    "pairs": (("INTEGER", "VARCHAR(10)"), [(1, "a"), (1, "b"), (2, "a"), (3, "c")]),
    "days": (
        ("DATE", "VARCHAR(10)"),
        [
            (dt.date(2024, 1, 1), "a"),
            (dt.date(2024, 1, 1), "b"),
            (dt.date(2024, 2, 29), "a"),
            (dt.date(2025, 12, 31), "c"),
        ],
    ),
}


def _canonical(row: dict[str, object]) -> Values:
    """A row as text (SQLite hands dates back as ISO text, deltalake as ``date``)."""
    return tuple("" if row[name] is None else str(row[name]) for name in ("k1", "k2", "val"))


def _create(source: Source, table: str) -> None:
    (first, second), rows = SHAPES[table]
    with source.engine.begin() as db:
        db.execute(
            sa.text(
                f"CREATE TABLE {source.schema}.{table} (k1 {first} NOT NULL, "
                f"k2 {second} NOT NULL, val VARCHAR(20), PRIMARY KEY (k1, k2))"
            )
        )
        for k1, k2 in rows:
            db.execute(
                sa.text(f"INSERT INTO {source.schema}.{table} VALUES (:k1, :k2, 'v0')"),
                {"k1": k1, "k2": k2},
            )


def _change(source: Source, table: str, round_number: int) -> None:
    """Updates, a delete, a key change of one column, inserts sharing the first key column."""
    rows = SHAPES[table][1]
    (k1, _), (_, _), (k1_third, _), (k1_last, _) = rows
    name = f"{source.schema}.{table}"
    statements = [
        (f"UPDATE {name} SET val = :v WHERE k1 = :k1 AND k2 = 'a'", {"k1": k1}),
        (f"DELETE FROM {name} WHERE k1 = :k1 AND k2 = 'c'", {"k1": k1_last}),
        (f"UPDATE {name} SET k2 = :v WHERE k1 = :k1 AND k2 = 'a'", {"k1": k1_third}),
        (f"INSERT INTO {name} VALUES (:k1, :v, :v)", {"k1": k1}),
        (f"INSERT INTO {name} VALUES (:k1, 'c', :v)", {"k1": k1_last}),
    ]
    with source.engine.begin() as db:
        for statement, parameters in statements:
            db.execute(sa.text(statement), {**parameters, "v": f"r{round_number}"})


def _source_rows(source: Source, table: str) -> set[Values]:
    with source.engine.connect() as db:
        rows = db.execute(sa.text(f"SELECT k1, k2, val FROM {source.schema}.{table}"))
        return {_canonical(dict(row._mapping)) for row in rows}


def _view_rows(name: str) -> set[Values]:
    rows = [_canonical(row) for row in lake_rows(f"SELECT k1, k2, val FROM {name}")]
    assert len(rows) == len(set(rows)), "the view shows a row twice"
    return set(rows)


def _base_rows(table_key: str) -> set[Values]:
    record = Repository(load_settings().repo_url).get_table(table_key)
    assert record is not None
    rows = [_canonical(row) for row in storage.read_delta(record.base_path).to_pylist()]
    assert len(rows) == len(set(rows)), "the base table holds a row twice"
    return set(rows)


@pytest.mark.parametrize("mode", ["IMMEDIATE", "DEFERRED"])
@pytest.mark.parametrize("table", sorted(SHAPES))
def test_a_composite_key_matches_the_source(
    table: str,
    mode: str,
    source: Source,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    _create(source, table)
    name = f"{source.schema}.{table}"
    enabled = run_cli(
        "offload",
        "-t",
        name,
        "-x",
        "--incremental-updates-enabled",
        "--incremental-extraction-method=CHANGELOG",
        f"--incremental-merge-mode={mode}",
    )
    assert enabled.exit_code == 0, enabled.stderr
    for round_number in (1, 2):
        _change(source, table, round_number)
        extracted = run_cli("offload", "-t", name, "-x", "--incremental-run-extraction")
        assert extracted.exit_code == 0, extracted.stderr
        expected = _source_rows(source, table)
        if mode == "IMMEDIATE":
            assert _base_rows(name.upper()) == expected, f"round {round_number}"
        else:
            assert _view_rows(name) == expected, f"round {round_number}: the merging view"
    if mode == "DEFERRED":
        compacted = run_cli(
            "offload", "-t", name, "-x", "--incremental-run-compaction", "--incremental-wait-time=0"
        )
        assert compacted.exit_code == 0, compacted.stderr
        assert _base_rows(name.upper()) == _source_rows(source, table), "after compaction"
