"""pgoutput decoded in Python (gluon.source.pgoutput) from a real slot on the test cluster:
what a slot shared by a database's PG_LOGICAL tables will read (issue 33, deliverable 1)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from decimal import Decimal

import pyarrow as pa
import pytest
import sqlalchemy as sa

from gluon.capture.objects import change_fields
from gluon.schema import Column, TableSpec
from gluon.source import pgoutput
from gluon.source.logical_values import changes_as_arrow
from gluon.source.pgoutput import UNCHANGED_TOAST, Change, Relation, Truncate

SLOT = "gluon_pgoutput_test"
PUBLICATION = "gluon_pgoutput_test"
LARGE = "x" * 100_000  # stored out of line (TOAST): an UPDATE that leaves it alone omits it


@pytest.fixture
def engine(pg_url: str) -> Iterator[sa.Engine]:
    engine = sa.create_engine(pg_url)
    with engine.begin() as db:
        db.execute(sa.text("CREATE SCHEMA app"))
        # A keyword-named table with a composite key, a partitioned table published through
        # its root, and a table outside the publication.
        db.execute(
            sa.text(
                'CREATE TABLE app."order" (region TEXT, id INTEGER, note TEXT, big TEXT, '
                "PRIMARY KEY (region, id))"
            )
        )
        db.execute(sa.text('ALTER TABLE app."order" ALTER COLUMN big SET STORAGE EXTERNAL'))
        db.execute(
            sa.text(
                "CREATE TABLE app.events (day DATE, id INTEGER, PRIMARY KEY (day, id)) "
                "PARTITION BY RANGE (day)"
            )
        )
        db.execute(
            sa.text(
                "CREATE TABLE app.events_2026 PARTITION OF app.events "
                "FOR VALUES FROM ('2026-01-01') TO ('2027-01-01')"
            )
        )
        db.execute(sa.text("CREATE TABLE app.other (id INTEGER PRIMARY KEY, v TEXT)"))
        db.execute(
            sa.text(
                f'CREATE PUBLICATION {PUBLICATION} FOR TABLE app."order", app.events '
                "WITH (publish_via_partition_root = true)"
            )
        )
    with engine.begin() as db:  # its own transaction: a slot is made before any write
        db.execute(sa.text(f"SELECT pg_create_logical_replication_slot('{SLOT}', 'pgoutput')"))
    yield engine
    with engine.begin() as db:
        db.execute(sa.text(f"SELECT pg_drop_replication_slot('{SLOT}')"))
    engine.dispose()


def _peek(engine: sa.Engine) -> list[bytes]:
    with engine.connect() as db:
        rows = db.execute(
            sa.text(
                f"SELECT data FROM pg_logical_slot_peek_binary_changes('{SLOT}', NULL, NULL, "
                f"'proto_version', '1', 'publication_names', '{PUBLICATION}')"
            )
        )
        return [bytes(row[0]) for row in rows]


def _run(engine: sa.Engine, *statements: str) -> None:
    with engine.begin() as db:
        for statement in statements:
            db.execute(sa.text(statement))


def test_changes_of_published_tables_decode_in_commit_order(engine: sa.Engine) -> None:
    _run(
        engine,
        "INSERT INTO app.\"order\" VALUES ('eu', 1, NULL, 'small'), ('us', 2, 'n''2', 'b')",
        "INSERT INTO app.events VALUES ('2026-03-01', 7)",
    )
    _run(engine, "INSERT INTO app.other VALUES (1, 'not published')")
    _run(engine, "UPDATE app.\"order\" SET note = 'changed' WHERE id = 1")
    _run(engine, "UPDATE app.\"order\" SET region = 'ap' WHERE id = 2")
    _run(engine, "DELETE FROM app.events WHERE id = 7")
    relations: dict[int, Relation] = {}
    found = list(pgoutput.transactions(_peek(engine), relations))
    assert len(found) == 4  # app.other's transaction is filtered out at the source
    names = {oid: (r.schema, r.name) for oid, r in relations.items()}
    changed = {c.relation for t in found for c in t.changes if isinstance(c, Change)}
    # PostgreSQL 15 describes the partition too, but names its changes by the root.
    assert sorted(names[oid] for oid in changed) == [("app", "events"), ("app", "order")]
    order = next(r for r in relations.values() if r.name == "order")
    assert [(c.name, c.in_key) for c in order.columns] == [
        ("region", True),
        ("id", True),
        ("note", False),
        ("big", False),
    ]
    commits = [t.commit.commit_lsn for t in found if t.commit is not None]
    assert commits == sorted(commits) and len(set(commits)) == 4

    first = found[0].changes
    assert [(c.op, names[c.relation][1], c.new) for c in first if isinstance(c, Change)] == [
        ("I", "order", ("eu", "1", None, "small")),
        ("I", "order", ("us", "2", "n'2", "b")),
        ("I", "events", ("2026-03-01", "7")),  # the partition's row, named by its root
    ]
    update, key_change, delete = (t.changes[0] for t in found[1:])
    assert isinstance(update, Change) and isinstance(key_change, Change)
    assert (update.op, update.new, update.old) == ("U", ("eu", "1", "changed", "small"), None)
    assert key_change.old_is_key and key_change.old is not None
    assert key_change.old[:2] == ("us", "2") and key_change.new == ("ap", "2", "n'2", "b")
    assert isinstance(delete, Change) and delete.op == "D" and delete.old_is_key
    assert delete.old == ("2026-03-01", "7")


def test_an_untouched_large_value_and_a_truncate(engine: sa.Engine) -> None:
    _run(engine, f"INSERT INTO app.\"order\" VALUES ('eu', 1, 'a', '{LARGE}')")
    _run(engine, "UPDATE app.\"order\" SET note = 'b'")
    _run(engine, 'TRUNCATE app."order", app.events')
    relations: dict[int, Relation] = {}
    found = list(pgoutput.transactions(_peek(engine), relations))
    insert, update, truncate = (t.changes for t in found)
    order = next(oid for oid, r in relations.items() if r.name == "order")
    # Without the old row (REPLICA IDENTITY DEFAULT, key unchanged) the value is nowhere.
    with pytest.raises(pgoutput.UnloggedValueError, match="big"):
        pgoutput.table_rows(found[1], relations, {order}, ["region", "id", "note", "big"])
    assert isinstance(insert[0], Change) and insert[0].new == ("eu", "1", "a", LARGE)
    assert isinstance(update[0], Change) and update[0].new == ("eu", "1", "b", UNCHANGED_TOAST)
    assert len(truncate) == 1 and isinstance(truncate[0], Truncate)
    assert sorted(relations[oid].name for oid in truncate[0].relations) == ["events", "order"]


def test_a_table_s_rows_become_its_lake_types_without_the_source(engine: sa.Engine) -> None:
    """Each change's values in the table's column order, typed by the same path the
    test_decoding reader uses (``changes_as_arrow``): no round trip to PostgreSQL."""
    _run(
        engine,
        "CREATE TABLE app.typed (id INTEGER PRIMARY KEY, amount NUMERIC(12,2), at TIMESTAMP, "
        "flag BOOLEAN, raw BYTEA, note TEXT)",
        f"ALTER PUBLICATION {PUBLICATION} ADD TABLE app.typed",
    )
    _run(
        engine,
        "INSERT INTO app.typed VALUES (1, 12.5, '2026-11-26 10:00:01.5', true, '\\x00ff', "
        "'it''s'), (2, NULL, NULL, NULL, NULL, NULL)",
        "INSERT INTO app.other VALUES (1, 'not this table')",
    )
    _run(engine, "UPDATE app.typed SET id = 3 WHERE id = 2", "DELETE FROM app.typed WHERE id = 1")
    _run(engine, "TRUNCATE app.typed")
    relations: dict[int, Relation] = {}
    found = list(pgoutput.transactions(_peek(engine), relations))
    typed_oid = next(oid for oid, r in relations.items() if r.name == "typed")
    names = ["note", "id", "amount", "at", "flag", "raw"]  # not the source's order
    changes: list[list[str | None]] = []
    for transaction in found:
        assert transaction.commit is not None
        ops, rows = pgoutput.table_rows(transaction, relations, {typed_oid}, names)
        first = transaction.commit.commit_lsn << 20
        changes += [
            [*row, str(first + at), op] for at, (op, row) in enumerate(zip(ops, rows, strict=True))
        ]
    assert [change[-1] for change in changes] == ["I", "I", "U", "D", "T"]
    spec = TableSpec(
        "app",
        "typed",
        (
            Column("note", "text", "string"),
            Column("id", "integer", "int", False),
            Column("amount", "numeric(12,2)", "decimal(12,2)"),
            Column("at", "timestamp", "timestamp_ntz"),
            Column("flag", "boolean", "boolean"),
            Column("raw", "bytea", "binary"),
        ),
        primary_key=("id",),
    )
    schema = pa.schema([*spec.arrow_schema, *change_fields()])
    rows = changes_as_arrow(changes, spec, schema).to_pylist()
    assert rows[0] | {"gl_seq": 0} == {
        "note": "it's",
        "id": 1,
        "amount": Decimal("12.50"),
        "at": dt.datetime(2026, 11, 26, 10, 0, 1, 500000),
        "flag": True,
        "raw": b"\x00\xff",
        "gl_seq": 0,
        "gl_op": "I",
    }
    assert [(row["id"], row["note"], row["gl_op"]) for row in rows[1:]] == [
        (2, None, "I"),
        (3, None, "U"),
        (1, None, "D"),  # the key only
        (None, None, "T"),
    ]
    assert [row["gl_seq"] for row in rows] == sorted(row["gl_seq"] for row in rows)


def test_a_malformed_message_is_named_in_one_line() -> None:
    with pytest.raises(pgoutput.ProtocolError, match="truncated or malformed pgoutput 'I'"):
        pgoutput.decode(b"I\x00\x00")
    with pytest.raises(pgoutput.ProtocolError, match="kind 'Z'"):
        pgoutput.decode(b"Z")


def test_other_tables_writes_reach_no_peek_of_the_publication(engine: sa.Engine) -> None:
    """What a shared slot saves: a table outside the publication writes 100 transactions,
    and the peek returns not one message more (its empty transactions are skipped by
    PostgreSQL 15), where a test_decoding slot returns a BEGIN, a row and a COMMIT each."""
    with engine.begin() as db:
        db.execute(
            sa.text("SELECT pg_create_logical_replication_slot('gluon_td', 'test_decoding')")
        )
    try:
        _run(engine, "INSERT INTO app.\"order\" VALUES ('eu', 1, NULL, 'small')")
        before = len(_peek(engine))
        for key in range(100):
            _run(engine, f"INSERT INTO app.other VALUES ({key}, 'foreign')")
        _run(engine, "UPDATE app.\"order\" SET note = 'after'")
        published = _peek(engine)
        with engine.connect() as db:
            printed = db.execute(
                sa.text("SELECT count(*) FROM pg_logical_slot_peek_changes('gluon_td', NULL, NULL)")
            ).scalar()
    finally:
        with engine.begin() as db:
            db.execute(sa.text("SELECT pg_drop_replication_slot('gluon_td')"))
    assert before == 4  # Relation, Begin, Insert, Commit
    assert len(published) == before + 3  # Begin, Update, Commit: nothing of app.other
    assert printed == 3 * 102  # every transaction of the database, as text
