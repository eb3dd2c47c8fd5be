"""PG_LOGICAL values typed in gluon, not cast back by the source (issue 33): the text
test_decoding prints is what reaches the lake, exactly, whatever the database's
``bytea_output``; and WAL other databases write is confirmed, not decoded again by every
extraction. The type matrix (tests/integration/test_shapes_types.py) covers the
types at their edges in the default settings."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.incremental import lake_rows
from support.postgres import PostgresServer
from typer.testing import Result


def test_bytea_printed_in_the_escape_format_reaches_the_lake_byte_for_byte(
    pg_url: str,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GLUON_SOURCE_URL", pg_url)
    engine = sa.create_engine(pg_url)
    database = engine.url.database
    with engine.begin() as db:
        db.execute(sa.text(f"ALTER DATABASE \"{database}\" SET bytea_output = 'escape'"))
    engine.dispose()  # new sessions take the database's setting
    with engine.begin() as db:
        db.execute(sa.text("CREATE SCHEMA app"))
        db.execute(sa.text("CREATE TABLE app.t (id int PRIMARY KEY, b bytea, note text)"))
        db.execute(sa.text("INSERT INTO app.t VALUES (0, '\\x00', 'before')"))
    result = run_cli(
        "offload", "-t", "app.t", "-x", "--incremental-updates-enabled",
        "--incremental-extraction-method=PG_LOGICAL",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    every_byte = bytes(range(256))
    values = {
        1: every_byte,
        2: b"\\\\" + b"\\000" + b"'\"",  # backslashes and octal-looking text as data
        3: b"",
        4: None,
        5: "ünïcode ✓ 漢字".encode(),
    }
    with engine.begin() as db:
        for key, value in values.items():
            db.execute(sa.text("INSERT INTO app.t VALUES (:id, :b, 'x')"), {"id": key, "b": value})
        db.execute(sa.text("UPDATE app.t SET b = :b WHERE id = 0"), {"b": every_byte[::-1]})
        printed = db.execute(sa.text("SELECT b::text FROM app.t WHERE id = 1")).scalar_one()
    assert not printed.startswith("\\x"), "the database prints bytea in the escape format"
    result = run_cli("offload", "-t", "app.t", "-x", "--incremental-run-extraction")
    assert result.exit_code == 0, result.stderr
    with engine.connect() as db:
        source = {row.id: row.b for row in db.execute(sa.text("SELECT id, b FROM app.t"))}
    engine.dispose()
    lake = {row["id"]: row["b"] for row in lake_rows("SELECT id, b FROM app.t")}
    assert lake == {key: None if b is None else bytes(b) for key, b in source.items()}
    assert lake[0] == every_byte[::-1]


def _confirmed(engine: sa.Engine) -> int:
    with engine.connect() as db:
        lag = db.execute(
            sa.text(
                "SELECT pg_wal_lsn_diff(pg_current_wal_flush_lsn(), confirmed_flush_lsn) "
                "FROM pg_replication_slots WHERE database = current_database()"
            )
        ).scalar_one()
    return int(lag)


def test_an_extraction_confirms_the_wal_other_databases_wrote(
    pg_url: str,
    pg_server: PostgresServer,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """WAL written to another database of the cluster holds no change of the table, and no
    peek shows it: an extraction confirms it, so the next one does not decode it again."""
    monkeypatch.setenv("GLUON_SOURCE_URL", pg_url)
    engine = sa.create_engine(pg_url)
    with engine.begin() as db:
        db.execute(sa.text("CREATE SCHEMA app"))
        db.execute(sa.text("CREATE TABLE app.t (id int PRIMARY KEY, note text)"))
    result = run_cli(
        "offload", "-t", "app.t", "-x", "--incremental-updates-enabled",
        "--incremental-extraction-method=PG_LOGICAL",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    foreign = f"{engine.url.database}_other"
    pg_server.create_database(foreign)
    try:
        with pg_server.connect(foreign) as other:
            other.execute("CREATE TABLE big AS SELECT g AS id FROM generate_series(1, 50000) g")
        assert _confirmed(engine) > 1_000_000, "the other database wrote WAL past the slot"
        extracted = run_cli("offload", "-t", "app.t", "-x", "--incremental-run-extraction")
        assert extracted.exit_code == 0, extracted.stderr
        assert _confirmed(engine) < 100_000, "the extraction confirmed the foreign WAL"
        with engine.begin() as db:  # and the table's own changes still arrive
            db.execute(sa.text("INSERT INTO app.t VALUES (1, 'after')"))
        extracted = run_cli("offload", "-t", "app.t", "-x", "--incremental-run-extraction")
        assert extracted.exit_code == 0, extracted.stderr
        assert lake_rows("SELECT id, note FROM app.t") == [{"id": 1, "note": "after"}]
    finally:
        engine.dispose()
        pg_server.drop_database(foreign)
