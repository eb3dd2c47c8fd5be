"""PG_LOGICAL on tables shaped the way warehouses shape them (issue 26): keyword and odd
names, declaratively partitioned tables (test_decoding names the leaf partitions), and
TRUNCATE records. Real PostgreSQL (wal_level=logical), Sail and Delta tables; the lake is
read without gluon's extraction code (``gluon query`` for the DEFERRED view, deltalake for
the IMMEDIATE base table) and compared with the source value for value.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.incremental import RunCli, lake_rows, run_offload_process
from support.statements import configured_source, run_sql
from typer.testing import Result

from gluon.config import load_settings
from gluon.faults import FAULT_EXIT_CODE
from gluon.lake import storage
from gluon.naming import TableRef, slot_name
from gluon.repo import Repository
from gluon.source import logical

METHOD = "PG_LOGICAL"
OWN_SLOT = "--incremental-pg-logical-slot=table"
"""What the tests that pass it are about is the table's own test_decoding slot (its name, its
advance and fault points, its WAL); the others take the default, the shared slot."""
IMMEDIATE = "--incremental-merge-mode=IMMEDIATE"
Rows = set[tuple[object, ...]]


@pytest.fixture
def engine(pg_url: str, offload_home: Path, monkeypatch: pytest.MonkeyPatch) -> sa.Engine:
    return configured_source(pg_url, monkeypatch, "CREATE SCHEMA IF NOT EXISTS app")


def _source(engine: sa.Engine, table: str, columns: str) -> Rows:
    with engine.connect() as db:
        return {tuple(row) for row in db.execute(sa.text(f"SELECT {columns} FROM {table}"))}


def _offload(run_cli: RunCli, typed: str, *flags: str) -> Result:
    result = run_cli("offload", "-t", typed, "-x", *flags)
    assert result.exit_code == 0, result.stderr
    return result


def _enable(run_cli: RunCli, typed: str, *flags: str) -> None:
    _offload(
        run_cli,
        typed,
        "--incremental-updates-enabled",
        f"--incremental-extraction-method={METHOD}",
        *flags,
    )


def _query(run_cli: RunCli, view: str, columns: list[str]) -> Rows:
    result = run_cli("gluon", "query", "--json", f"SELECT * FROM {view}")
    assert result.exit_code == 0, result.stderr
    return {tuple(row[column] for column in columns) for row in json.loads(result.stdout)}


def _base(table_key: str, columns: list[str]) -> Rows:
    record = Repository(load_settings().repo_url).get_table(table_key)
    assert record is not None
    stored = {column.view_name: column.lake_name for column in record.spec().columns}
    rows = storage.read_delta(record.base_path).to_pylist()
    return {tuple(row[stored[column]] for column in columns) for row in rows}


def _lake(run_cli: RunCli, mode: str, view: str, table_key: str, columns: list[str]) -> Rows:
    """The lake's rows: the DEFERRED user view through ``gluon query``, the IMMEDIATE base
    table through deltalake."""
    if mode == "IMMEDIATE":
        return _base(table_key, columns)
    return _query(run_cli, view, columns)


def _confirmed(engine: sa.Engine, schema: str, table: str) -> str:
    name = slot_name(TableRef(schema, table), engine.url.database)
    with engine.connect() as db:
        return str(
            db.execute(
                sa.text(
                    "SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
                    "WHERE slot_name = :name"
                ),
                {"name": name},
            ).scalar_one()
        )


def _failed_extraction(run_cli: RunCli, typed: str) -> str:
    result = run_cli("offload", "-t", typed, "-x", "--incremental-run-extraction")
    assert result.exit_code != 0, result.stdout
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


KEYWORD_TABLE = '"select"."user"'
KEYWORD_COLUMNS = ['"order"', '"table"', '"Mixed Case"', '"größe"', '"a""b"', '"user id"']
LAKE_COLUMNS = ["order", "table", "mixed case", "größe", 'a"b', "user id"]
ODD_TABLES = {
    "keywords": (KEYWORD_TABLE, "select", "user"),
    "mixed_case_space_unicode": ('"Läger Nord"."Order Items"', "Läger Nord", "Order Items"),
    "punctuation": ('"we: ird"."a, b: c"', "we: ird", "a, b: c"),  # test_decoding's separators
}
"""How a user types the table, its schema and its name."""


@pytest.mark.parametrize("mode", ["DEFERRED", "IMMEDIATE"])
@pytest.mark.parametrize("kind", sorted(ODD_TABLES))
def test_keyword_mixed_case_and_quoted_names_reach_the_lake(
    engine: sa.Engine, run_cli: RunCli, mode: str, kind: str
) -> None:
    table, schema, name = ODD_TABLES[kind]
    run_sql(
        engine,
        f'CREATE SCHEMA "{schema}"',
        f'CREATE TABLE {table} ("order" int PRIMARY KEY, "table" text, '
        '"Mixed Case" int, "größe" text, "a""b" text, "user id" int)',
        f"INSERT INTO {table} SELECT g, 't' || g, g * 2, 'g' || g, 'q' || g, g "
        "FROM generate_series(1, 10) g",
    )
    _enable(run_cli, table, OWN_SLOT, f"--incremental-merge-mode={mode}")
    run_sql(
        engine,
        f"INSERT INTO {table} VALUES (11, 'new', 1, 'ü', 'x\"y', 7)",
        f'UPDATE {table} SET "table" = "table" || \'!\', "größe" = NULL WHERE "order" % 3 = 0',
        f'UPDATE {table} SET "order" = 100 WHERE "order" = 1',  # a key change
        f'DELETE FROM {table} WHERE "order" = 2',
    )
    before = _confirmed(engine, schema, name)
    extracted = _offload(run_cli, table, "--incremental-run-extraction")
    assert "Extracted 0 changes" not in extracted.stdout, extracted.stdout
    source = _source(engine, table, ", ".join(KEYWORD_COLUMNS))
    view = f"`{schema.lower()}`.`{name.lower()}`"
    lake = _lake(run_cli, mode, view, f"{schema}.{name}".upper(), LAKE_COLUMNS)
    assert lake == source
    assert _confirmed(engine, schema, name) != before


COLUMNS = ["id", "region", "amount"]
LIST_TABLE = [
    "CREATE TABLE app.items (id int NOT NULL, region text NOT NULL, amount int) "
    "PARTITION BY LIST (region)",
    "CREATE TABLE app.items_eu PARTITION OF app.items FOR VALUES IN ('eu')",
    "CREATE TABLE app.items_us PARTITION OF app.items FOR VALUES IN ('us')",
    # No primary key (it would have to hold region): every leaf logs its whole old row.
    "ALTER TABLE app.items_eu REPLICA IDENTITY FULL",
    "ALTER TABLE app.items_us REPLICA IDENTITY FULL",
    "INSERT INTO app.items SELECT g, CASE WHEN g % 2 = 0 THEN 'eu' ELSE 'us' END, g "
    "FROM generate_series(1, 20) g",
]
RANGE_HASH_TABLE = [
    "CREATE TABLE app.items (id int PRIMARY KEY, region text, amount int) PARTITION BY RANGE (id)",
    "CREATE TABLE app.items_low PARTITION OF app.items FOR VALUES FROM (MINVALUE) TO (100) "
    "PARTITION BY HASH (id)",
    "CREATE TABLE app.items_low_0 PARTITION OF app.items_low "
    "FOR VALUES WITH (MODULUS 2, REMAINDER 0)",
    "CREATE TABLE app.items_low_1 PARTITION OF app.items_low "
    "FOR VALUES WITH (MODULUS 2, REMAINDER 1)",
    "CREATE TABLE app.items_high PARTITION OF app.items FOR VALUES FROM (100) TO (1000)",
    "INSERT INTO app.items SELECT g, 'r' || g, g FROM generate_series(1, 20) g",
]


def _check_lake(run_cli: RunCli, engine: sa.Engine, mode: str) -> None:
    extracted = _offload(run_cli, "app.items", "--incremental-run-extraction")
    assert "Extracted 0 changes" not in extracted.stdout, extracted.stdout
    lake = _lake(run_cli, mode, "app.items", "APP.ITEMS", COLUMNS)
    assert lake == _source(engine, "app.items", ", ".join(COLUMNS))


@pytest.mark.parametrize("mode", ["DEFERRED", "IMMEDIATE"])
def test_a_list_partitioned_table_with_rows_moving_and_a_partition_attached_later(
    engine: sa.Engine, run_cli: RunCli, mode: str
) -> None:
    run_sql(engine, *LIST_TABLE)
    _enable(
        run_cli,
        "app.items",
        OWN_SLOT,
        "--incremental-key-columns=id",
        f"--incremental-merge-mode={mode}",
    )
    run_sql(
        engine,
        "UPDATE app.items SET amount = amount * 10 WHERE id % 3 = 0",
        # The partition column changes, the key does not: a DELETE from items_eu and an
        # INSERT into items_us of the same id, which must end as the INSERT.
        "UPDATE app.items SET region = 'us', amount = -id WHERE id IN (2, 4, 6)",
        "DELETE FROM app.items WHERE id = 5",
    )
    # Status counts the partitions' change rows: 6 updates, 3 moves (a DELETE from one
    # partition and an INSERT into the other each), 1 delete.
    status = run_cli("display_incremental_status", "-t", "app.items", "--json")
    assert status.exit_code == 0, status.stderr
    assert json.loads(status.stdout)["changelog"]["rows"] == 13, status.stdout
    _check_lake(run_cli, engine, mode)
    # A partition created after enable, without the replica identity the others have.
    run_sql(
        engine,
        "CREATE TABLE app.items_apac PARTITION OF app.items FOR VALUES IN ('apac')",
        "INSERT INTO app.items VALUES (30, 'apac', 30)",
    )
    before = _confirmed(engine, "app", "items")
    line = _failed_extraction(run_cli, "app.items")
    assert "app.items_apac" in line and "REPLICA IDENTITY FULL" in line, line
    assert _confirmed(engine, "app", "items") == before, "the slot kept the changes"
    run_sql(
        engine,
        "ALTER TABLE app.items_apac REPLICA IDENTITY FULL",
        # An empty table attached as a partition.
        "CREATE TABLE app.items_latam (LIKE app.items)",
        "ALTER TABLE app.items_latam REPLICA IDENTITY FULL",
        "ALTER TABLE app.items ATTACH PARTITION app.items_latam FOR VALUES IN ('latam')",
        "INSERT INTO app.items VALUES (31, 'latam', 31), (32, 'apac', 32)",
        "UPDATE app.items SET region = 'latam' WHERE id IN (30, 1)",
        "UPDATE app.items SET amount = 0 WHERE id = 32",
    )
    _check_lake(run_cli, engine, mode)
    if mode == "DEFERRED":
        _offload(run_cli, "app.items", "--incremental-run-compaction", "--incremental-wait-time=0")
        assert _query(run_cli, "app.items", COLUMNS) == _source(
            engine, "app.items", ", ".join(COLUMNS)
        )


@pytest.mark.parametrize("mode", ["DEFERRED", "IMMEDIATE"])
def test_a_range_table_with_a_hash_level_and_keys_moving_between_partitions(
    engine: sa.Engine, run_cli: RunCli, mode: str
) -> None:
    run_sql(engine, *RANGE_HASH_TABLE)
    _enable(run_cli, "app.items", f"--incremental-merge-mode={mode}")
    run_sql(
        engine,
        "UPDATE app.items SET id = id + 100 WHERE id < 5",  # low_0/low_1 -> high
        "UPDATE app.items SET id = 50 WHERE id = 7",  # one hash partition to the other?
        "UPDATE app.items SET amount = -amount WHERE id % 2 = 0",
        "DELETE FROM app.items WHERE id = 9",
        "CREATE TABLE app.items_top PARTITION OF app.items FOR VALUES FROM (1000) TO (2000)",
        "INSERT INTO app.items VALUES (1500, 'top', 1)",
        "UPDATE app.items SET id = 1501 WHERE id = 101",
    )
    _check_lake(run_cli, engine, mode)
    run_sql(engine, "UPDATE app.items SET id = 3, region = 'back' WHERE id = 1501")
    _check_lake(run_cli, engine, mode)


def _shipped(schema: str) -> list[tuple[str, object]]:
    """The delta table's changes in ``gl_seq`` order: operation and id."""
    rows = lake_rows(f"SELECT gl_op, id FROM {schema}_load.items_changes ORDER BY gl_seq")
    return [(str(row["gl_op"]), row["id"]) for row in rows]


def test_truncates_ship_as_changes_in_order_and_the_slot_advances(
    engine: sa.Engine, run_cli: RunCli
) -> None:
    run_sql(engine, *RANGE_HASH_TABLE)
    run_sql(engine, "CREATE TABLE app.other (id int PRIMARY KEY)")
    _enable(run_cli, "app.items", OWN_SLOT)
    run_sql(engine, "INSERT INTO app.items VALUES (200, 'a', 1)")
    with engine.begin() as db:  # TRUNCATE and INSERTs in one transaction, in this order
        db.execute(sa.text("INSERT INTO app.items VALUES (201, 'b', 1)"))
        db.execute(sa.text("TRUNCATE app.items RESTART IDENTITY"))  # names every partition
        db.execute(sa.text("INSERT INTO app.items VALUES (1, 'c', 1), (150, 'd', 1)"))
    # Another table first in a TRUNCATE naming several; then a table of no concern.
    run_sql(
        engine, "TRUNCATE app.other, app.items CASCADE", "INSERT INTO app.items VALUES (2, 'e', 1)"
    )
    run_sql(engine, "TRUNCATE app.other", "INSERT INTO app.other VALUES (1)")
    _offload(run_cli, "app.items", "--incremental-run-extraction")
    assert _shipped("app") == [
        ("I", 200),
        ("I", 201),
        ("T", None),
        ("I", 1),
        ("I", 150),
        ("T", None),
        ("I", 2),
    ]
    assert _query(run_cli, "app.items", COLUMNS) == _source(engine, "app.items", ", ".join(COLUMNS))
    confirmed = _confirmed(engine, "app", "items")
    again = _offload(run_cli, "app.items", "--incremental-run-extraction")
    assert "Extracted 0 changes" in again.stdout, again.stdout
    assert _confirmed(engine, "app", "items") == confirmed
    # A TRUNCATE of one partition empties part of the table only: refused, not skipped.
    run_sql(engine, "TRUNCATE app.items_high")
    line = _failed_extraction(run_cli, "app.items")
    assert "app.items_high" in line and "some partitions" in line, line
    assert _confirmed(engine, "app", "items") == confirmed


@pytest.mark.parametrize("mode", ["DEFERRED", "IMMEDIATE"])
def test_a_truncate_and_inserts_in_one_transaction_leave_the_lake_equal_to_the_source(
    engine: sa.Engine, run_cli: RunCli, mode: str
) -> None:
    run_sql(
        engine,
        "CREATE TABLE app.items (id int PRIMARY KEY, region text, amount int)",
        "INSERT INTO app.items SELECT g, 'r', g FROM generate_series(1, 10) g",
    )
    _enable(run_cli, "app.items", f"--incremental-merge-mode={mode}")
    with engine.begin() as db:
        db.execute(sa.text("INSERT INTO app.items VALUES (11, 'a', 1)"))
        db.execute(sa.text("UPDATE app.items SET amount = 0 WHERE id = 3"))
        db.execute(sa.text("TRUNCATE app.items"))
        db.execute(sa.text("INSERT INTO app.items VALUES (2, 'b', 2), (12, 'c', 3)"))
        db.execute(sa.text("UPDATE app.items SET amount = 5 WHERE id = 2"))
    _check_lake(run_cli, engine, mode)
    if mode == "DEFERRED":
        assert _shipped("app") == [
            ("I", 11),
            ("U", 3),
            ("T", None),
            ("I", 2),
            ("I", 12),
            ("U", 2),
        ]
        _offload(run_cli, "app.items", "--incremental-run-compaction", "--incremental-wait-time=0")
        assert _lake(run_cli, mode, "app.items", "APP.ITEMS", COLUMNS) == _source(
            engine, "app.items", ", ".join(COLUMNS)
        )
    run_sql(engine, "TRUNCATE app.items", "INSERT INTO app.items VALUES (7, 'd', 7)")
    _check_lake(run_cli, engine, mode)


def test_a_change_spelled_unlike_the_servers_label_stops_the_extraction(
    engine: sa.Engine, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Defence in depth: were gluon's labels ever spelled unlike test_decoding's (as when it
    left keywords unquoted), the table's changes would look like another table's and the
    slot would advance past them. A row naming the table in another spelling stops the
    extraction instead."""
    run_sql(
        engine,
        'CREATE SCHEMA "select"',
        f'CREATE TABLE {KEYWORD_TABLE} ("order" int PRIMARY KEY, "table" text)',
    )
    _enable(run_cli, KEYWORD_TABLE, OWN_SLOT)
    run_sql(engine, f"INSERT INTO {KEYWORD_TABLE} VALUES (1, 'a')")
    real = logical.relation_labels

    def unquoted(source: object, schema: str, table: str) -> logical.RelationLabels | None:
        labels = real(source, schema, table)  # type: ignore[arg-type]
        assert labels is not None
        wrong = tuple(
            dataclasses.replace(r, label=f"{r.schema}.{r.name}") for r in labels.relations
        )
        return dataclasses.replace(labels, root=wrong[0], relations=wrong)

    monkeypatch.setattr(logical, "relation_labels", unquoted)
    before = _confirmed(engine, "select", "user")
    line = _failed_extraction(run_cli, KEYWORD_TABLE)
    assert 'labelled "select"."user"' in line, line
    assert _confirmed(engine, "select", "user") == before
    monkeypatch.setattr(logical, "relation_labels", real)
    extracted = _offload(run_cli, KEYWORD_TABLE, "--incremental-run-extraction")
    assert "Extracted 1 change" in extracted.stdout, extracted.stdout
    assert _confirmed(engine, "select", "user") != before


def test_enable_refuses_a_partition_that_logs_no_key_in_one_line(
    engine: sa.Engine, run_cli: RunCli
) -> None:
    run_sql(engine, *LIST_TABLE, "ALTER TABLE app.items_us REPLICA IDENTITY DEFAULT")
    result = run_cli(
        "offload",
        "-t",
        "app.items",
        "-x",
        "--incremental-updates-enabled",
        f"--incremental-extraction-method={METHOD}",
        "--incremental-key-columns=id",
    )
    assert result.exit_code != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert "app.items_us (a partition of app.items)" in lines[0], lines[0]
    assert "ALTER TABLE app.items_us REPLICA IDENTITY FULL" in lines[0], lines[0]
    with engine.connect() as db:
        slots = db.execute(sa.text("SELECT count(*) FROM pg_replication_slots")).scalar_one()
    assert slots == 0, "nothing was created"


@pytest.mark.parametrize(
    ("mode", "point"),
    [
        ("DEFERRED", "extract.after_delta_commit"),
        ("DEFERRED", "extract.before_slot_advance"),
        ("IMMEDIATE", "extract.after_merge_commit"),
        ("IMMEDIATE", "extract.before_slot_advance"),
    ],
)
def test_an_extraction_killed_around_a_truncate_loses_and_repeats_nothing(
    engine: sa.Engine, run_cli: RunCli, mode: str, point: str
) -> None:
    run_sql(engine, *RANGE_HASH_TABLE)
    _enable(run_cli, "app.items", OWN_SLOT, f"--incremental-merge-mode={mode}")
    with engine.begin() as db:
        db.execute(sa.text("UPDATE app.items SET amount = 0 WHERE id < 5"))
        db.execute(sa.text("TRUNCATE app.items"))
        db.execute(sa.text("INSERT INTO app.items VALUES (1, 'a', 1), (500, 'b', 2)"))
    crashed = run_offload_process(
        "-t", "app.items", "-x", "--incremental-run-extraction", env={"GLUON_FAULT": point}
    )
    assert crashed.returncode == FAULT_EXIT_CODE, crashed.stderr
    run_sql(engine, "INSERT INTO app.items VALUES (2, 'c', 3)")
    _check_lake(run_cli, engine, mode)
    if mode == "DEFERRED":
        assert _shipped("app")[-4:] == [("T", None), ("I", 1), ("I", 500), ("I", 2)]
        assert len(_shipped("app")) == 8  # 4 updates, the T, 3 inserts: each once


@pytest.mark.parametrize("scope", [OWN_SLOT, "--incremental-pg-logical-slot=database"])
def test_a_table_dropped_with_changes_in_its_slot_can_be_disabled(
    engine: sa.Engine, run_cli: RunCli, scope: str
) -> None:
    """Disable refuses while the slot keeps a change of the dropped table (counted under its
    name: a member's from the slot's RELATION messages, its oid gone from the catalog),
    discards it, then disables; no slot is left."""
    run_sql(
        engine,
        'CREATE SCHEMA "select"',
        f'CREATE TABLE {KEYWORD_TABLE} ("order" int PRIMARY KEY, "table" text)',
    )
    _enable(run_cli, KEYWORD_TABLE, scope)
    run_sql(engine, f"INSERT INTO {KEYWORD_TABLE} VALUES (1, 'a')", f"DROP TABLE {KEYWORD_TABLE}")
    line = _failed_extraction(run_cli, KEYWORD_TABLE)
    assert "gone" in line or "does not exist" in line or "not found" in line, line
    status = run_cli("display_incremental_status", "-t", KEYWORD_TABLE, "--json")
    assert status.exit_code == 0, status.stderr
    waiting = json.loads(status.stdout)["changelog"]
    if scope == OWN_SLOT:  # test_decoding's labels are the catalog's: not counted, said why
        assert waiting["rows"] is None and "gone" in waiting["reason"], waiting
    else:  # counted under the name the slot's RELATION messages gave it
        assert waiting["rows"] == 1, waiting
    refused = run_cli("offload", "-t", KEYWORD_TABLE, "-x", "--incremental-updates-disabled")
    assert refused.exit_code != 0
    assert "1 change" in refused.stderr, refused.stderr  # counted under the dropped name
    _offload(run_cli, KEYWORD_TABLE, "--incremental-discard-changes")
    _offload(run_cli, KEYWORD_TABLE, "--incremental-updates-disabled")
    with engine.connect() as db:
        slots = db.execute(sa.text("SELECT count(*) FROM pg_replication_slots")).scalar_one()
    assert slots == 0


def test_the_servers_quoting_is_test_decodings_for_every_keyword(engine: sa.Engine) -> None:
    """Measured, not assumed: a column named after each keyword the server knows (and a few
    odd names) is printed by test_decoding exactly as ``quote_ident`` quotes it, which is
    what ``logical_columns`` and ``logical_relations`` ask."""
    with engine.connect() as db:
        words = [row[0] for row in db.execute(sa.text("SELECT word FROM pg_get_keywords()"))]
    names = [*words, "Mixed", "a b", "größe", 'a"b', "x$", "_u", "1st"]
    columns = ", ".join('"' + name.replace('"', '""') + '" int' for name in names)
    slot = "gluon_quoting_probe"
    run_sql(engine, f'CREATE TABLE app."user" ({columns})')
    run_sql(engine, f"SELECT pg_create_logical_replication_slot('{slot}', 'test_decoding')")
    try:
        run_sql(engine, 'INSERT INTO app."user" ("all") VALUES (1)')
        with engine.connect() as db:
            (row,) = [
                r[0]
                for r in db.execute(
                    sa.text(f"SELECT data FROM pg_logical_slot_get_changes('{slot}', NULL, NULL)")
                )
                if r[0].startswith("table ")
            ]
            quoted = db.execute(
                sa.text("SELECT n, quote_ident(n) FROM unnest(CAST(:names AS text[])) AS n"),
                {"names": names},
            ).all()
    finally:
        run_sql(engine, f"SELECT pg_drop_replication_slot('{slot}')")
    assert row.startswith('table app."user": INSERT: '), row[:80]
    for name, label in quoted:
        assert f" {label}[integer]:" in row, (name, label)
    assert len(words) > 400 and row.count("[integer]:") == len(names)
    # Plain lower-case names quoted for being keywords: what a name-shape rule misses.
    keywords = {name for name, label in quoted if name in words and label != name}
    assert {"select", "user", "order", "table", "int"} <= keywords
    assert not keywords & {"name", "type", "value"}  # unreserved: printed bare


SHIFTED_TABLE = (
    "CREATE TABLE app.shifted (id int PRIMARY KEY DEFERRABLE INITIALLY DEFERRED, note text)",
    "INSERT INTO app.shifted VALUES (1, 's1'), (2, 's2'), (3, 's3')",
)
IMMEDIATE_IDENTITY = (
    "CREATE UNIQUE INDEX shifted_id ON app.shifted (id)",
    "ALTER TABLE app.shifted REPLICA IDENTITY USING INDEX shifted_id",
)
"""The way out for a DEFERRABLE key: an immediate unique index on it as replica identity."""


def _refused_enable(run_cli: RunCli, engine: sa.Engine, *flags: str) -> str:
    result = run_cli(
        "offload",
        "-t",
        "app.shifted",
        "-x",
        "--incremental-updates-enabled",
        f"--incremental-extraction-method={METHOD}",
        *flags,
    )
    assert result.exit_code != 0, result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    with engine.connect() as db:
        slots = db.execute(sa.text("SELECT count(*) FROM pg_replication_slots")).scalar_one()
    assert slots == 0, "nothing was created"
    return lines[0]


@pytest.mark.parametrize("mode", ["DEFERRED", "IMMEDIATE"])
def test_a_deferrable_primary_key_is_refused_until_an_immediate_index_logs_the_key(
    engine: sa.Engine, run_cli: RunCli, mode: str
) -> None:
    """PostgreSQL logs no old key through a DEFERRABLE primary key (a replica identity
    index must be immediate), and under it two rows may hold one key inside a transaction:
    ``UPDATE ... SET id = id + 1`` reached the lake as upserts, (1, 's1') kept. REPLICA
    IDENTITY FULL logs the old rows but not which row a key's delete meant (the lake lost
    rows). Enable refuses both in one line in either scope; with an immediate unique index
    as replica identity the lake equals the source."""
    run_sql(engine, *SHIFTED_TABLE)
    mode_flag = f"--incremental-merge-mode={mode}"
    for scope in (OWN_SLOT, "--incremental-pg-logical-slot=database"):
        line = _refused_enable(run_cli, engine, scope, mode_flag)
        assert "primary key of app.shifted is DEFERRABLE" in line, line
        assert "REPLICA IDENTITY USING INDEX" in line, line
    run_sql(engine, "ALTER TABLE app.shifted REPLICA IDENTITY FULL")
    line = _refused_enable(run_cli, engine, OWN_SLOT, mode_flag)
    assert "primary key of app.shifted is DEFERRABLE" in line, line
    run_sql(engine, *IMMEDIATE_IDENTITY)
    _enable(run_cli, "app.shifted", OWN_SLOT, mode_flag)
    run_sql(
        engine,
        "UPDATE app.shifted SET id = id + 10 WHERE id < 3",
        "DELETE FROM app.shifted WHERE id = 3",
    )
    _offload(run_cli, "app.shifted", "--incremental-run-extraction")
    if mode == "DEFERRED":
        _offload(
            run_cli, "app.shifted", "--incremental-run-compaction", "--incremental-wait-time=0"
        )
    source = _source(engine, "app.shifted", "id, note")
    assert source == {(11, "s1"), (12, "s2")}
    assert _lake(run_cli, mode, "app.shifted", "APP.SHIFTED", ["id", "note"]) == source


@pytest.mark.parametrize(
    "change",
    [
        "ALTER TABLE app.shifted REPLICA IDENTITY NOTHING",
        "ALTER TABLE app.shifted REPLICA IDENTITY DEFAULT",  # the DEFERRABLE primary key
    ],
)
def test_an_extraction_refuses_a_table_that_stopped_logging_its_key(
    engine: sa.Engine, run_cli: RunCli, change: str
) -> None:
    """The replica identity changed after enable (NOTHING, or back to DEFAULT over a
    DEFERRABLE key): the extraction refuses in one line instead of shipping updates without
    their old key, and the slot is not confirmed past them."""
    run_sql(engine, *SHIFTED_TABLE, *IMMEDIATE_IDENTITY)
    _enable(run_cli, "app.shifted", OWN_SLOT)
    run_sql(engine, change, "UPDATE app.shifted SET id = id + 10")
    before = _confirmed(engine, "app", "shifted")
    line = _failed_extraction(run_cli, "app.shifted")
    assert "app.shifted" in line and "REPLICA IDENTITY" in line, line
    assert _confirmed(engine, "app", "shifted") == before
