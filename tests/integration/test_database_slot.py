"""One pgoutput slot per source database (gluon.source.publication, issue 33 item 1): tables
of one database share the slot and its publication, each ships exactly its own changes from
its own position, and a table enabled later starts exactly at its offload's snapshot.

Each test plays the lake with the real parts: the copy is read through the source's Arrow
path under the exported snapshot, the changes are decoded by ``gluon.source.pgoutput`` and
typed by ``changes_as_arrow`` (the extraction's typing), applied in ``gl_seq`` order, and
the result must equal the source read the same way, value for value.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pytest
import sqlalchemy as sa

from gluon.capture.objects import change_fields
from gluon.errors import StateError
from gluon.naming import TableRef
from gluon.schema import TableSpec
from gluon.source import connect, pgoutput, publication, shared_shipping
from gluon.source.base import SourceDialect
from gluon.source.logical_values import changes_as_arrow
from gluon.source.publication import DatabaseSlot
from gluon.source.shared_shipping import TablePosition

INSTALLATION = "0123456789abcdef0123456789abcdef"
LARGE = "x" * 100_000  # stored out of line (TOAST): an UPDATE leaving it alone omits it


@dataclass
class LakeTable:
    """A table's lake copy as rows by key, and where it stands in the shared slot."""

    spec: TableSpec
    leaves: frozenset[int]
    position: TablePosition
    rows: dict[tuple[Any, ...], dict[str, Any]] = field(default_factory=dict)
    shipped: int = 0

    def key(self, row: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(row[name] for name in self.spec.primary_key)

    def apply(self, changes: pa.Table) -> None:
        """Apply ``changes`` strictly: an INSERT of a key the lake holds was shipped twice (or
        copied and shipped), an UPDATE or DELETE of a key it lacks follows a lost change."""
        for row in changes.sort_by("gl_seq").to_pylist():
            op, seq = row.pop("gl_op"), row.pop("gl_seq")
            key = self.key(row)
            if op == "T":
                self.rows.clear()
                continue
            assert (key in self.rows) == (op != "I"), f"{op} {key} at {seq}: doubled or lost"
            if op == "D":
                del self.rows[key]
            else:
                self.rows[key] = row
        self.shipped += changes.num_rows


@pytest.fixture
def source(pg_url: str) -> Iterator[SourceDialect]:
    engine = sa.create_engine(pg_url)
    with engine.begin() as db:
        for statement in (
            "CREATE SCHEMA app",
            'CREATE TABLE app."order" (region TEXT, "select" INTEGER, note TEXT, big TEXT, '
            'PRIMARY KEY (region, "select"))',
            'ALTER TABLE app."order" ALTER COLUMN big SET STORAGE EXTERNAL',
            'ALTER TABLE app."order" REPLICA IDENTITY FULL',
            "CREATE TABLE app.events (day DATE, id INTEGER, amount NUMERIC(10,2), "
            "PRIMARY KEY (day, id)) PARTITION BY RANGE (day)",
            "CREATE TABLE app.events_2026 PARTITION OF app.events "
            "FOR VALUES FROM ('2026-01-01') TO ('2027-01-01')",
            "CREATE TABLE app.events_2027 PARTITION OF app.events "
            "FOR VALUES FROM ('2027-01-01') TO ('2028-01-01')",
            "CREATE TABLE app.plain (id INTEGER PRIMARY KEY, flag BOOLEAN, at TIMESTAMP)",
            "CREATE TABLE app.unpublished (id INTEGER PRIMARY KEY, v TEXT)",
        ):
            db.execute(sa.text(statement))
    engine.dispose()
    dialect = connect(pg_url)
    yield dialect
    publication.drop_database_slot(dialect, DatabaseSlot.of(dialect, INSTALLATION))
    dialect.engine.dispose()


def _run(source: SourceDialect, *statements: str) -> None:
    with source.engine.begin() as db:
        for statement in statements:
            db.execute(sa.text(statement))


def _read(source: SourceDialect, spec: TableSpec) -> dict[tuple[Any, ...], dict[str, Any]]:
    rows = [
        row for batch in source.read_batches(spec, batch_rows=10_000) for row in batch.to_pylist()
    ]
    return {tuple(row[name] for name in spec.primary_key): row for row in rows}


def _enable(source: SourceDialect, shared: DatabaseSlot, table: str) -> LakeTable:
    """Publish the table, then copy it under the offload snapshot (as an enable would)."""
    publication.ensure_database_slot(source, shared)
    start = publication.publish_table(source, shared, "app", table)
    spec = source.describe_table(TableRef("app", table))
    with publication.offload_snapshot(source) as snapshot:
        copy = _read(source, spec)
    leaves = publication.table_leaves(source, "app", table)
    return LakeTable(spec, leaves, TablePosition(start, snapshot), copy)


def _extract(source: SourceDialect, shared: DatabaseSlot, tables: list[LakeTable]) -> None:
    """One extraction of ``tables`` (of all the database's tables): one stream up to the
    flush position, each table's changes from its position, then the slot confirmed to
    the least position over every table."""
    upto = publication.wal_flush_position(source)
    relations: dict[int, pgoutput.Relation] = {}
    messages = [
        m for chunk in publication.stream_database_slot(source, shared, upto) for m in chunk
    ]
    transactions = list(pgoutput.transactions(messages, relations))
    for table in tables:
        names = [column.name for column in table.spec.columns]
        shipped, after = shared_shipping.table_changes(
            transactions, relations, table.leaves, table.position, names, table.spec.primary_key
        )
        changes: list[list[str | None]] = []
        for transaction in shipped:
            first = transaction.commit_lsn << 20
            changes += [
                [*row, str(first + at), op]
                for at, (op, row) in enumerate(zip(transaction.ops, transaction.rows, strict=True))
            ]
        schema = pa.schema([*table.spec.arrow_schema, *change_fields()])
        table.apply(changes_as_arrow(changes, table.spec, schema))
        table.position = after.past(upto)


def _confirm(source: SourceDialect, shared: DatabaseSlot, tables: list[LakeTable]) -> None:
    positions = {table.spec.name: table.position.position for table in tables}
    target = shared_shipping.confirm_plan(positions, 0, None).target
    assert target is not None
    publication.confirm(source, shared, target)


def _assert_equal(source: SourceDialect, table: LakeTable) -> None:
    assert table.rows == _read(source, table.spec), table.spec.name


def test_tables_share_the_slot_and_each_ships_its_own_changes(
    source: SourceDialect, pg_server: Any
) -> None:
    shared = DatabaseSlot.of(source, INSTALLATION)
    _run(
        source,
        "INSERT INTO app.\"order\" VALUES ('eu', 1, NULL, 'small'), ('us', 2, 'n''2', 'b')",
        "INSERT INTO app.events VALUES ('2026-03-01', 1, 1.5), ('2027-03-01', 2, NULL)",
        "INSERT INTO app.plain VALUES (1, true, '2026-01-01 10:00:00')",
    )
    order = _enable(source, shared, "order")
    events = _enable(source, shared, "events")
    _run(source, "INSERT INTO app.\"order\" VALUES ('eu', 3, 'after', NULL)")
    plain = _enable(source, shared, "plain")
    tables = [order, events, plain]
    assert {t.spec.name for t in tables} == {"order", "events", "plain"}
    # Another database of the cluster, and a table of this one outside the publication.
    foreign_name = f"dbslot_foreign_{uuid.uuid4().hex[:8]}"
    foreign = pg_server.create_database(foreign_name)
    foreign_engine = sa.create_engine(foreign)
    try:
        with foreign_engine.begin() as db:
            db.execute(sa.text("CREATE TABLE f (id INTEGER PRIMARY KEY)"))
            db.execute(sa.text("INSERT INTO f SELECT generate_series(1, 1000)"))
        for round_ in range(3):
            _run(
                source,
                f"INSERT INTO app.\"order\" VALUES ('eu', {10 + round_}, NULL, '{LARGE}')",
                f'UPDATE app."order" SET note = \'r{round_}\' WHERE "select" = {10 + round_}',
                # The key changes: the old key's row must leave the lake.
                f'UPDATE app."order" SET region = \'ap{round_}\' WHERE "select" = 2',
                f"INSERT INTO app.events VALUES ('2026-05-0{round_ + 1}', {10 + round_}, 2.25)",
                # A row moving between partitions, under the root's name.
                f"UPDATE app.events SET day = '2027-06-0{round_ + 1}' WHERE id = {10 + round_}",
                f"INSERT INTO app.unpublished VALUES ({round_}, 'x')",
            )
            _run(source, f"INSERT INTO app.plain VALUES ({10 + round_}, NULL, NULL)")
            if round_ == 1:
                _run(source, "TRUNCATE app.plain")
                _run(source, "INSERT INTO app.plain VALUES (99, false, now())")
            _run(source, "DELETE FROM app.events WHERE id = 1")
            # Any order, some tables skipped in a round: the slot waits for the least.
            picked = [tables[(round_ + at) % 3] for at in range(3 - (round_ % 2))]
            _extract(source, shared, picked)
            _confirm(source, shared, tables)
        _extract(source, shared, tables)
        for table in tables:
            _assert_equal(source, table)
        assert plain.rows.keys() == {(12,), (99,)}
        assert ("ap2", 2) in order.rows and ("us", 2) not in order.rows
        assert order.rows["eu", 11]["big"] == LARGE and order.rows["eu", 11]["note"] == "r1"
        # A further extraction ships nothing twice.
        shipped = [table.shipped for table in tables]
        _extract(source, shared, tables)
        assert [table.shipped for table in tables] == shipped
    finally:
        foreign_engine.dispose()
        pg_server.drop_database(foreign_name)


def test_the_slot_is_confirmed_to_the_least_table_position(source: SourceDialect) -> None:
    shared = DatabaseSlot.of(source, INSTALLATION)
    order = _enable(source, shared, "order")
    plain = _enable(source, shared, "plain")
    _run(source, "INSERT INTO app.\"order\" VALUES ('eu', 1, NULL, NULL)")
    _run(source, "INSERT INTO app.plain VALUES (1, true, NULL)")
    _extract(source, shared, [order])  # plain is not extracted: its position stays
    _confirm(source, shared, [order, plain])
    confirmed = publication.slot_state(source, shared).confirmed
    assert confirmed is not None and confirmed <= plain.position.position
    _extract(source, shared, [plain])
    _assert_equal(source, plain)
    assert plain.shipped == 1
    _confirm(source, shared, [order, plain])
    state = publication.slot_state(source, shared).confirmed
    assert state == min(order.position.position, plain.position.position)


def test_a_table_enabled_while_a_writer_commits_loses_and_doubles_nothing(
    source: SourceDialect,
) -> None:
    shared = DatabaseSlot.of(source, INSTALLATION)
    order = _enable(source, shared, "order")  # the slot exists before: plain joins it later
    stop = threading.Event()
    writes = {"count": 0}

    def writer() -> None:
        engine = sa.create_engine(source.engine.url)
        key = 0
        try:
            while not stop.is_set():
                key += 1
                with engine.begin() as db:
                    db.execute(sa.text(f"INSERT INTO app.plain VALUES ({key}, true, now())"))
                    db.execute(
                        sa.text(f"UPDATE app.plain SET flag = NOT flag WHERE id = {key // 2 + 1}")
                    )
                    if key % 7 == 0:
                        db.execute(sa.text(f"DELETE FROM app.plain WHERE id = {key - 3}"))
                writes["count"] = key
        finally:
            engine.dispose()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        while writes["count"] < 50:
            time.sleep(0.01)
        plain = _enable(source, shared, "plain")
        enabled_at = writes["count"]
        while writes["count"] < enabled_at + 100:
            time.sleep(0.01)
    finally:
        stop.set()
        thread.join()
    _extract(source, shared, [order, plain])
    _assert_equal(source, plain)
    assert plain.shipped > 0


def _held_writer(source: SourceDialect) -> tuple[sa.Connection, sa.Engine]:
    """A transaction that wrote to app.plain and is still open."""
    engine = sa.create_engine(source.engine.url)
    connection = engine.connect()
    connection.execute(sa.text("INSERT INTO app.plain VALUES (500, true, NULL)"))
    return connection, engine


def test_a_change_written_before_the_table_was_published_reaches_the_copy(
    source: SourceDialect,
) -> None:
    """pgoutput does not send a change written before ALTER PUBLICATION committed, even
    when its transaction commits later: publish_table waits for it, so the copy holds it."""
    shared = DatabaseSlot.of(source, INSTALLATION)
    publication.ensure_database_slot(source, shared)
    held, engine = _held_writer(source)
    started = threading.Event()
    result: dict[str, Any] = {}

    def enable() -> None:
        started.set()
        result["table"] = _enable(source, shared, "plain")

    thread = threading.Thread(target=enable)
    thread.start()
    started.wait()
    time.sleep(1.0)
    assert "table" not in result  # waiting for the held transaction
    held.execute(sa.text("UPDATE app.plain SET flag = false WHERE id = 500"))
    held.commit()
    held.close()
    engine.dispose()
    thread.join()
    plain: LakeTable = result["table"]
    assert plain.rows[(500,)]["flag"] is False
    _run(source, "UPDATE app.plain SET flag = true WHERE id = 500")
    _extract(source, shared, [plain])
    _assert_equal(source, plain)
    assert plain.shipped == 1


def test_a_transaction_older_than_the_publication_is_named_when_the_wait_ends(
    source: SourceDialect,
) -> None:
    shared = DatabaseSlot.of(source, INSTALLATION)
    publication.ensure_database_slot(source, shared)
    held, engine = _held_writer(source)
    try:
        with pytest.raises(StateError, match=r"older than the table's addition .* backend \d+"):
            publication.publish_table(source, shared, "app", "plain", wait_seconds=0.3)
    finally:
        held.rollback()
        held.close()
        engine.dispose()


def test_a_table_taken_out_stops_and_the_last_one_drops_the_slot(source: SourceDialect) -> None:
    shared = DatabaseSlot.of(source, INSTALLATION)
    order = _enable(source, shared, "order")
    plain = _enable(source, shared, "plain")
    publication.unpublish_table(source, shared, "app", "order")
    _run(source, "INSERT INTO app.\"order\" VALUES ('eu', 1, NULL, NULL)")
    _run(source, "INSERT INTO app.plain VALUES (1, true, NULL)")
    _extract(source, shared, [order, plain])
    assert order.shipped == 0  # out of the publication: the slot sends none of its changes
    _assert_equal(source, plain)
    _confirm(source, shared, [plain])
    publication.unpublish_table(source, shared, "app", "plain")
    assert publication.published_tables(source, shared) == {}
    publication.drop_database_slot(source, shared)
    state = publication.slot_state(source, shared)
    assert (state.has_publication, state.plugin) == (False, None)


def test_an_offload_snapshot_sees_by_transaction_id_until_its_boundary() -> None:
    snapshot = shared_shipping.OffloadSnapshot.parse("100:105:101,103", boundary=5000)
    assert [snapshot.sees(xid) for xid in (99, 100, 101, 102, 103, 104, 105)] == [
        True,
        True,
        False,
        True,
        False,
        True,
        False,
    ]
    assert snapshot.ships(101, 4000) and not snapshot.ships(102, 4000)
    assert snapshot.ships(102, 5000)  # committed past the boundary: not in the copy
    assert shared_shipping.OffloadSnapshot.parse(snapshot.text(), 5000) == snapshot
    # 32-bit ids from pgoutput, next to a 64-bit snapshot past the first wraparound.
    wrapped = shared_shipping.OffloadSnapshot.parse(f"{2**32 + 5}:{2**32 + 9}:", boundary=1)
    assert wrapped.sees(6) and not wrapped.sees(9) and wrapped.sees(2**32 - 3)


def test_a_partition_s_truncate_is_refused_and_the_whole_table_s_ships(
    source: SourceDialect,
) -> None:
    """Through the root, PostgreSQL 15 sends no TRUNCATE of one partition at all (its rows
    would stay in the lake unnoticed); under the partitions' names the shared slot shows it."""
    shared = DatabaseSlot.of(source, INSTALLATION)
    events = _enable(source, shared, "events")
    _run(source, "INSERT INTO app.events VALUES ('2026-02-01', 1, 1), ('2027-02-01', 2, 2)")
    _run(source, "TRUNCATE app.events")
    _run(source, "INSERT INTO app.events VALUES ('2027-03-01', 3, NULL)")
    _extract(source, shared, [events])
    _assert_equal(source, events)
    assert events.rows.keys() == {(dt.date(2027, 3, 1), 3)}
    _run(source, "TRUNCATE app.events_2027")
    with pytest.raises(
        shared_shipping.PartialTruncateError, match=r"some partitions only \(events_2027\)"
    ):
        _extract(source, shared, [events])


def test_a_stuck_table_is_released_past_the_bound_and_the_others_go_on(
    source: SourceDialect,
) -> None:
    """A table that never ships holds the slot where it stands, until it lags the WAL by
    more than the bound: then the slot moves on for the others, and it is named."""
    shared = DatabaseSlot.of(source, INSTALLATION)
    stuck = _enable(source, shared, "order")
    plain = _enable(source, shared, "plain")
    for key in range(1, 4):
        _run(source, f"INSERT INTO app.\"order\" VALUES ('eu', {key}, NULL, '{LARGE}')")
        _run(source, f"INSERT INTO app.plain VALUES ({key}, true, NULL)")
        _extract(source, shared, [plain])  # the order table's extraction keeps failing
    flushed = publication.wal_flush_position(source)
    positions = {"order": stuck.position.position, "plain": plain.position.position}
    unbounded = shared_shipping.confirm_plan(positions, flushed, None)
    assert unbounded.target == stuck.position.position and not unbounded.released
    bounded = shared_shipping.confirm_plan(positions, flushed, 64 * 1024)
    assert list(bounded.released) == ["order"] and bounded.released["order"] > 64 * 1024
    assert bounded.target == plain.position.position
    publication.confirm(source, shared, bounded.target)
    confirmed = publication.slot_state(source, shared).confirmed
    assert confirmed is not None and confirmed > stuck.position.position
    _run(source, "UPDATE app.plain SET flag = false WHERE id = 2")
    _extract(source, shared, [plain])
    _assert_equal(source, plain)
