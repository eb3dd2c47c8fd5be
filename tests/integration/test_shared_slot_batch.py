"""The shared slot's reader (gluon.extract.feeds.shared_reader) decodes with the batch
decoder (gluon.source.pgoutput_batch, issue 33 item 2) and ships exactly what the scalar
decoder (gluon.source.pgoutput + shared_shipping.table_changes, typed by
``changes_as_arrow``) ships from the same real shared slot: change for change, value for
value, numbered alike, in the lake's types, read in small batches (transactions cut across
reads) or in one. The scalar path is made to fail inside the reader, and the per-message
decoding it still does (descriptions, truncates) is counted: a fallback to per-value
decoding fails the test.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import sqlalchemy as sa
from support import shapes
from support.shapes import Shape

from gluon.capture.objects import change_fields
from gluon.errors import SourceError
from gluon.extract.feeds import shared_slot
from gluon.extract.feeds.shared_reader import SharedSlotReader
from gluon.naming import TableRef
from gluon.repo import Repository
from gluon.schema import TableSpec
from gluon.source import (
    connect,
    pgoutput,
    pgoutput_batch,
    publication,
    shared_batches,
    shared_shipping,
)
from gluon.source.base import SourceDialect
from gluon.source.logical_values import changes_as_arrow

LARGE = "x" * 100_000  # stored out of line (TOAST): an UPDATE leaving it alone omits it


@dataclass
class World:
    source: SourceDialect
    repo: Repository
    joined: list[tuple[str, str]]


@pytest.fixture
def world(pg_url: str, tmp_path: Path) -> Iterator[World]:
    source = connect(pg_url)
    world = World(source, Repository(f"sqlite:///{tmp_path / 'repo.db'}", create=True), [])
    yield world
    for schema, table in world.joined:
        shared_slot.leave(source, world.repo, f"{schema}.{table}", schema, table)
    source.engine.dispose()


def _run(world: World, *statements: str) -> None:
    with world.source.engine.begin() as db:
        for statement in statements:
            db.execute(sa.text(statement))


def _join(world: World, schema: str, table: str) -> TableSpec:
    with shared_slot.joining(world.source, world.repo, f"{schema}.{table}", 1, schema, table):
        pass  # the copy under the snapshot is not what these tests compare
    world.joined.append((schema, table))
    return world.source.describe_table(TableRef(schema, table))


def _comparable(table: pa.Table) -> list[dict[str, object]]:
    """``table``'s rows, a float NaN spelled out (it equals nothing, itself included)."""
    return [
        {k: "NaN" if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()}
        for row in table.to_pylist()
    ]


def _scalar(world: World, schema: str, table: str, spec: TableSpec) -> tuple[pa.Table, int]:
    """What the scalar decoder ships of the table from its position (the slot is peeked:
    nothing is confirmed), and how many of the slot's messages are neither a change nor a
    BEGIN or COMMIT (descriptions, truncates: what the batch decoder decodes one by one)."""
    key = f"{schema}.{table}"
    shared = shared_slot.shared_slot(world.source, world.repo)
    upto = publication.wal_flush_position(world.source)
    chunks = publication.stream_database_slot(world.source, shared, upto)
    relations: dict[int, pgoutput.Relation] = {}
    messages = [m for chunk in chunks for m in chunk]
    rare = sum(1 for m in messages if m[:1] not in (b"B", b"C", b"I", b"U", b"D"))
    transactions = list(pgoutput.transactions(messages, relations))
    start = shared_slot.position_of(world.repo, key)
    assert start is not None
    names = [column.name for column in spec.columns]
    leaves = publication.table_leaves(world.source, schema, table)
    shipped, _ = shared_shipping.table_changes(
        transactions, relations, leaves, start, names, spec.primary_key
    )
    rows = [
        [*row, str((t.commit_lsn << 20) + at), op]
        for t in shipped
        for at, (op, row) in enumerate(zip(t.ops, t.rows, strict=True))
    ]
    schema_ = pa.schema([*spec.arrow_schema, *change_fields()])
    return changes_as_arrow(rows, spec, schema_), rare


def _batched(
    world: World,
    schema: str,
    table: str,
    spec: TableSpec,
    limit: int,
    monkeypatch: Any,
    *,
    small_frames: bool = False,
) -> tuple[pa.Table, int]:
    """What the reader ships, read ``limit`` changes at a time (each batch marked done),
    the scalar decoder failing if called; and how many messages it decoded one by one.
    ``small_frames``: the slot's stream comes 3 messages at a time, framed 5 at least (a
    transaction carried across chunks and frames)."""
    reader = SharedSlotReader(world.source, world.repo, f"{schema}.{table}", spec, spec.primary_key)
    one_by_one = [0]
    decode = pgoutput.decode

    def counted(data: bytes) -> pgoutput.Message | None:
        one_by_one[0] += 1
        return decode(data)

    def scalar_path(*_: object, **__: object) -> None:
        raise AssertionError("the shared slot's reader used the scalar decoder")

    with monkeypatch.context() as patch:
        patch.setattr(pgoutput_batch, "decode", counted)
        patch.setattr(pgoutput, "transactions", scalar_path)
        patch.setattr(pgoutput, "table_rows", scalar_path)
        patch.setattr(shared_shipping, "table_changes", scalar_path)
        if small_frames:
            patch.setattr(shared_batches, "FRAME_MESSAGES", 5)
            stream = shared_batches.slot_messages

            def rechunked(*args: Any) -> Iterator[pa.Array]:
                messages = pa.concat_arrays(list(stream(*args)))
                return iter([messages[at : at + 3] for at in range(0, len(messages), 3)])

            patch.setattr(shared_batches, "slot_messages", rechunked)
        parts = []
        while (part := reader.read(limit)).num_rows:
            parts.append(part)
            reader.done()
        reader.done()
    schema_ = pa.schema([*spec.arrow_schema, *change_fields()])
    return pa.concat_tables(parts) if parts else schema_.empty_table(), one_by_one[0]


def _shape_cases() -> list[object]:
    named = {shape.id: shape for shape in shapes.name_shapes("postgresql")}
    parts = {shape.id: shape for shape in shapes.partitioned_shapes()}
    chosen = [named["keywords"], parts["two_levels"], shapes.pg_type_shape()]
    return [pytest.param(shape, id=shape.id) for shape in chosen]


@pytest.mark.parametrize("shape", _shape_cases())
def test_a_shape_s_changes_ship_as_the_scalar_decoder_ships_them(
    world: World, shape: Shape, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shape's rows and every round the shape matrix runs for PG_LOGICAL (key changes,
    multi-row statements, one key changed many times in a transaction) through the shared
    slot, read 7 changes at a time: what the scalar decoder ships."""
    *create, first_rows = shape.create()
    _run(world, *create)
    spec = _join(world, shape.schema, shape.table)
    _run(world, first_rows)
    for round_ in shapes.rounds_for(shape, "PG_LOGICAL"):
        for transaction in round_.transactions(shape):
            _run(world, *transaction)
    expected, rare = _scalar(world, shape.schema, shape.table, spec)
    ops = expected.column("gl_op").to_pylist()
    assert len(ops) > shape.rows and set(ops) >= {"I", "U", "D"}
    shipped, one_by_one = _batched(
        world, shape.schema, shape.table, spec, 7, monkeypatch, small_frames=True
    )
    assert shipped.schema == expected.schema
    assert _comparable(shipped) == _comparable(expected)
    assert one_by_one == rare < len(ops)  # descriptions only, never a change


def test_key_updates_toast_and_a_truncate_ship_as_the_scalar_decoder_ships_them(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A composite keyword-named key changed by UPDATEs (with the large value left out of
    the WAL coming from the old row), a partitioned table beside it in the same
    transactions, a TRUNCATE; read in small batches and in one."""
    _run(
        world,
        "CREATE SCHEMA app",
        'CREATE TABLE app."order" (region TEXT, "select" INTEGER, note TEXT, big TEXT, '
        'flag BOOLEAN, PRIMARY KEY (region, "select"))',
        'ALTER TABLE app."order" ALTER COLUMN big SET STORAGE EXTERNAL',
        'ALTER TABLE app."order" REPLICA IDENTITY FULL',
        "CREATE TABLE app.events (day DATE, id INTEGER, PRIMARY KEY (day, id)) "
        "PARTITION BY RANGE (day)",
        "CREATE TABLE app.events_2026 PARTITION OF app.events "
        "FOR VALUES FROM ('2026-01-01') TO ('2027-01-01')",
        "CREATE TABLE app.events_2027 PARTITION OF app.events "
        "FOR VALUES FROM ('2027-01-01') TO ('2028-01-01')",
    )
    order = _join(world, "app", "order")
    events = _join(world, "app", "events")
    _run(
        world,
        f"INSERT INTO app.\"order\" SELECT CASE WHEN g % 2 = 0 THEN 'eu' ELSE 'us' END, g, "
        f"'n''' || g, CASE WHEN g % 3 = 0 THEN NULL ELSE '{LARGE}' || g END, g % 4 = 0 "
        "FROM generate_series(1, 40) g",
        "INSERT INTO app.events SELECT DATE '2026-06-01' + g, g FROM generate_series(1, 30) g",
    )
    _run(
        world,
        'UPDATE app."order" SET "select" = "select" + 100, flag = NOT flag WHERE "select" < 8',
        "UPDATE app.events SET day = day + 365 WHERE id < 5",  # moves to another partition
        'UPDATE app."order" SET note = NULL WHERE "select" BETWEEN 10 AND 15',
        'UPDATE app."order" SET region = \'ap\' WHERE "select" = 20',
        "DELETE FROM app.events WHERE id = 9",
    )
    _run(world, 'UPDATE app."order" SET region = region WHERE "select" = 21')  # key unchanged
    _run(world, "TRUNCATE app.events")
    _run(world, "INSERT INTO app.events VALUES ('2027-02-01', 1)")
    _run(world, 'DELETE FROM app."order" WHERE "select" > 35')
    tables = {"order": order, "events": events}
    scalar = {table: _scalar(world, "app", table, spec) for table, spec in tables.items()}
    expected = {table: found for table, (found, _) in scalar.items()}
    rare = scalar["order"][1]
    assert "T" in expected["events"].column("gl_op").to_pylist()
    for table, limit in (("order", 3), ("events", 1_000_000)):  # cut across reads, or one
        ops = expected[table].column("gl_op").to_pylist()
        assert set(ops) >= ({"I", "U", "D"} if table == "order" else {"I", "D", "T"})
        spec = tables[table]
        small_frames = limit == 3
        shipped, one_by_one = _batched(
            world, "app", table, spec, limit, monkeypatch, small_frames=small_frames
        )
        assert _comparable(shipped) == _comparable(expected[table]), table
        assert one_by_one == rare < len(ops)  # descriptions and the truncate only
        again, _ = _batched(world, "app", table, spec, limit, monkeypatch)
        assert again.num_rows == 0, f"{table}: its position was not saved past what it read"


def test_a_malformed_message_fails_the_read_in_one_line(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A message the batch decoder cannot frame (a COMMIT without its BEGIN) is a
    SourceError naming the table, not a decoder exception."""
    _run(world, "CREATE TABLE public.t (id INTEGER PRIMARY KEY)")
    spec = _join(world, "public", "t")
    commit = b"C" + bytes(25)
    monkeypatch.setattr(
        shared_batches, "slot_messages", lambda *_: iter([pa.array([commit], pa.binary())])
    )
    reader = SharedSlotReader(world.source, world.repo, "public.t", spec, spec.primary_key)
    expected = r"^shared slot of public\.t: a COMMIT without its BEGIN$"
    with pytest.raises(SourceError, match=expected):
        reader.read(10)
