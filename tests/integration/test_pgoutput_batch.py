"""The batch decoder (gluon.source.pgoutput_batch) against the scalar one
(gluon.source.pgoutput), on real pgoutput slots: the same changes, value for value, in the
same order and transactions, with the same errors (issue 33, deliverable 2)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pytest
import sqlalchemy as sa
from support import shapes
from support.shapes import Shape

from gluon.capture.objects import change_fields
from gluon.errors import SourceError
from gluon.naming import TableRef
from gluon.schema import TableSpec
from gluon.source import connect, pgoutput
from gluon.source.adbc import ArrowDatabase
from gluon.source.logical_values import changes_as_arrow
from gluon.source.pgoutput import Relation
from gluon.source.pgoutput_batch import frame

SLOT = "gluon_batch_test"
PUBLICATION = "gluon_batch_test"
LARGE = "x" * 100_000  # stored out of line: an UPDATE that leaves it alone omits it


@dataclass
class Decoded:
    """One table's changes in a batch: per change its op, values, commit LSN, position."""

    ops: list[str]
    rows: list[list[str | None]]
    commits: list[tuple[int, int]]
    positions: list[int]


def scalar(
    messages: list[bytes], tables: set[int], names: list[str], keys: tuple[str, ...] = ()
) -> Decoded:
    """The scalar path as a feed uses it: each transaction's rows taken as it is yielded
    (so a change is read with the relation as described when it was made)."""
    relations: dict[int, Relation] = {}
    found = Decoded([], [], [], [])
    for transaction in pgoutput.transactions(messages, relations):
        assert transaction.commit is not None
        ops, rows = pgoutput.table_rows(transaction, relations, tables, names, keys)
        commit = transaction.commit
        found.ops += ops
        found.rows += rows
        found.commits += [(commit.commit_lsn, commit.end_lsn)] * len(ops)
        found.positions += range(len(ops))
    return found


def batched(
    messages: list[bytes] | pa.Array | pa.ChunkedArray,
    tables: set[int],
    names: list[str],
    keys: tuple[str, ...] = (),
) -> Decoded:
    batch = frame(messages, {})
    changes = batch.table(tables, names, keys)
    columns = [column.to_pylist() for column in changes.columns]
    at = changes.transactions
    lsns = zip(batch.commit_lsns[at], batch.end_lsns[at], strict=True)
    return Decoded(
        ops=changes.ops.to_pylist(),
        rows=[list(row) for row in zip(*columns, strict=True)] if names else [[]] * len(changes),
        commits=[(int(commit), int(end)) for commit, end in lsns],
        positions=[int(position) for position in changes.positions],
    )


def _run(engine: sa.Engine, *statements: str) -> None:
    with engine.begin() as db:
        for statement in statements:
            db.execute(sa.text(statement))


def _start(engine: sa.Engine, *tables: str) -> None:
    """A publication of ``tables`` (partitions through their root) and its slot."""
    _run(
        engine,
        f"CREATE PUBLICATION {PUBLICATION} FOR TABLE {', '.join(tables)} "
        "WITH (publish_via_partition_root = true)",
    )
    _run(engine, f"SELECT pg_create_logical_replication_slot('{SLOT}', 'pgoutput')")


PEEK = (
    f"SELECT data FROM pg_logical_slot_peek_binary_changes('{SLOT}', NULL, NULL, "
    f"'proto_version', '1', 'publication_names', '{PUBLICATION}')"
)


def _peek(engine: sa.Engine) -> list[bytes]:
    with engine.connect() as db:
        return [bytes(row[0]) for row in db.execute(sa.text(PEEK))]


def _oid(engine: sa.Engine, qualified: str) -> int:
    with engine.connect() as db:
        return int(db.execute(sa.text(f"SELECT '{qualified}'::regclass::oid")).scalar_one())


@pytest.fixture
def engine(pg_url: str) -> Iterator[sa.Engine]:
    engine = sa.create_engine(pg_url)
    yield engine
    with engine.begin() as db:
        db.execute(
            sa.text(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                f"WHERE slot_name = '{SLOT}'"
            )
        )
    engine.dispose()


def _shape_cases() -> list[object]:
    named = {shape.id: shape for shape in shapes.name_shapes("postgresql")}
    keys = {shape.id: shape for shape in shapes.key_shapes("postgresql")}
    parts = {shape.id: shape for shape in shapes.partitioned_shapes()}
    chosen = [
        named["keywords"],
        named["spaces_non_ascii"],
        keys["int_text"],
        keys["date_text"],
        keys["uuid"],
        keys["numeric"],
        parts["list"],
        parts["two_levels"],
        shapes.pg_type_shape(),
    ]
    return [pytest.param(shape, id=shape.id) for shape in chosen]


def _typed(found: Decoded, spec: TableSpec) -> object:
    """The scalar decoder's rows, numbered as the feed numbers them, in the lake's types
    (``changes_as_arrow``); or the error."""
    schema = pa.schema([*spec.arrow_schema, *change_fields()])
    rows = [
        [*row, str(commit << 20 | position), op]
        for op, row, (commit, _), position in zip(
            found.ops, found.rows, found.commits, found.positions, strict=True
        )
    ]
    try:
        return _comparable(changes_as_arrow(rows, spec, schema))
    except SourceError as exc:
        return str(exc)


def _typed_batch(messages: list[bytes], tables: set[int], spec: TableSpec) -> object:
    schema = pa.schema([*spec.arrow_schema, *change_fields()])
    batch = frame(messages, {})
    changes = batch.table(tables, [column.name for column in spec.columns])
    seqs = (batch.commit_lsns[changes.transactions] << 20) | changes.positions
    try:
        return _comparable(changes.as_arrow(pa.array(seqs, type=pa.int64()), spec, schema))
    except SourceError as exc:
        return str(exc)


def _comparable(table: pa.Table) -> tuple[pa.Schema, list[dict[str, object]]]:
    """``table``'s schema and rows, a float NaN spelled out (NaN equals nothing, itself
    included, in Arrow's and Python's comparisons; the type matrix has one)."""
    rows = [
        {k: "NaN" if isinstance(v, float) and math.isnan(v) else v for k, v in row.items()}
        for row in table.to_pylist()
    ]
    return table.schema, rows


@pytest.mark.parametrize("shape", _shape_cases())
def test_a_shape_s_changes_decode_as_the_scalar_decoder_does(
    engine: sa.Engine, pg_url: str, shape: Shape
) -> None:
    """The shape's first rows and every round the shape matrix runs for PG_LOGICAL (key
    changes, multi-row statements, one key changed many times in a transaction), read in
    one batch: equal to the scalar decoder's, change for change, as text and in the
    lake's types."""
    *create, first_rows = shape.create()
    _run(engine, *create)
    _start(engine, shape.qualified)
    _run(engine, first_rows)
    for round_ in shapes.rounds_for(shape, "PG_LOGICAL"):
        for transaction in round_.transactions(shape):
            _run(engine, *transaction)
    messages = _peek(engine)
    table = {_oid(engine, shape.qualified)}
    names = [column.name for column in shape.columns]  # a generated column: not published
    expected = scalar(messages, table, names)
    assert len(expected.ops) > shape.rows and set(expected.ops) >= {"I", "U", "D"}
    assert batched(messages, table, names) == expected
    assert batched(messages, table, names[::-1]) == scalar(messages, table, names[::-1])
    spec = connect(pg_url).describe_table(TableRef(shape.schema, shape.table))
    expected_typed = _typed(scalar(messages, table, [c.name for c in spec.columns]), spec)
    assert isinstance(expected_typed, tuple) and len(expected_typed[1]) == len(expected.ops)
    assert _typed_batch(messages, table, spec) == expected_typed


@pytest.fixture
def order(engine: sa.Engine) -> sa.Engine:
    """A keyword-named table with a composite key and a large column, a partitioned
    table, both published; and a table outside the publication."""
    _run(
        engine,
        "CREATE SCHEMA app",
        'CREATE TABLE app."order" (region TEXT, "select" INTEGER, note TEXT, big TEXT, '
        'flag BOOLEAN, PRIMARY KEY (region, "select"))',
        'ALTER TABLE app."order" ALTER COLUMN big SET STORAGE EXTERNAL',
        "CREATE TABLE app.events (day DATE, id INTEGER, PRIMARY KEY (day, id)) "
        "PARTITION BY RANGE (day)",
        "CREATE TABLE app.events_2026 PARTITION OF app.events "
        "FOR VALUES FROM ('2026-01-01') TO ('2027-01-01')",
        "CREATE TABLE app.other (id INTEGER PRIMARY KEY, v TEXT)",
    )
    _start(engine, 'app."order"', "app.events")
    return engine


def test_key_updates_truncates_and_a_column_added_mid_batch(order: sa.Engine) -> None:
    _run(
        order,
        "INSERT INTO app.\"order\" VALUES ('eu', 1, NULL, 'small', true), "
        "('us', 2, 'n''2 ✓ — 日本語', 'b', false), ('ap', 3, '', NULL, NULL)",
        "INSERT INTO app.events VALUES ('2026-03-01', 7)",
        "INSERT INTO app.other VALUES (1, 'not published')",
    )
    _run(order, 'UPDATE app."order" SET region = \'af\' WHERE "select" = 2')
    _run(order, 'UPDATE app."order" SET "select" = "select" + 10, flag = NOT flag')
    _run(order, "DELETE FROM app.\"order\" WHERE region = 'eu'")
    _run(order, 'ALTER TABLE app."order" ADD COLUMN added TEXT')
    _run(order, "INSERT INTO app.\"order\" VALUES ('eu', 4, 'after', 'c', true, 'new column')")
    _run(order, 'UPDATE app."order" SET added = \'set\' WHERE "select" = 4')
    _run(order, 'TRUNCATE app."order", app.events')
    _run(order, "INSERT INTO app.events VALUES ('2026-04-01', 8)")
    messages = _peek(order)
    tables = {_oid(order, 'app."order"'), _oid(order, "app.events")}
    names = ["added", "note", "select", "region", "missing", "flag", "big", "day", "id"]
    expected = scalar(messages, tables, names)
    assert expected.ops.count("T") == 1 and expected.ops.count("D") == 1
    assert batched(messages, tables, names) == expected
    for oid in tables:  # one table of the two
        assert batched(messages, {oid}, names) == scalar(messages, {oid}, names)
    assert batched(messages, {_oid(order, "app.other")}, names) == Decoded([], [], [], [])
    # With the key (as the shared slot's reader asks): an UPDATE of it is a DELETE of the
    # old row and an INSERT, numbered in the transaction as the scalar path numbers them.
    key = ("region", "select")
    with_key = scalar(messages, tables, names, key)
    assert with_key.ops.count("D") > expected.ops.count("D")
    assert batched(messages, tables, names, key) == with_key
    # The same batch read through ADBC, as Arrow: the slot's buffer, no bytes per message.
    url = order.url.set(drivername="postgresql").render_as_string(hide_password=False)
    database = ArrowDatabase(url)
    try:
        arrow = pa.Table.from_batches(list(database.stream(PEEK)))["data"]
    finally:
        database.close()
    assert batched(arrow.combine_chunks(), tables, names) == expected
    # As ADBC's batches come (chunks), as a slice of a larger buffer, with 64-bit offsets.
    whole = arrow.combine_chunks()
    assert batched(pa.chunked_array([whole[:5], whole[5:]]), tables, names) == expected
    sliced = pa.concat_arrays([pa.array([b"not a message"], pa.binary()), whole])[1:]
    assert sliced.offset == 1 and batched(sliced, tables, names) == expected
    assert batched(whole.cast(pa.large_binary()), tables, names) == expected


def test_an_unchanged_large_value_comes_from_the_old_row_or_fails_the_same(
    order: sa.Engine,
) -> None:
    _run(order, f"INSERT INTO app.\"order\" VALUES ('eu', 1, 'a', '{LARGE}', true)")
    _run(order, "UPDATE app.\"order\" SET note = 'b'")
    messages = _peek(order)
    table = {_oid(order, 'app."order"')}
    names = ["region", "select", "note", "big"]
    with pytest.raises(pgoutput.UnloggedValueError) as scalar_error:
        scalar(messages, table, names)
    with pytest.raises(pgoutput.UnloggedValueError) as batch_error:
        batched(messages, table, names)
    assert batch_error.value.columns == scalar_error.value.columns == ["big"]
    # With the old row in the WAL the value is taken from it.
    _run(order, 'ALTER TABLE app."order" REPLICA IDENTITY FULL')
    _run(order, "UPDATE app.\"order\" SET note = 'c'")
    _run(order, "UPDATE app.\"order\" SET region = 'us'")
    later = _peek(order)[len(messages) :]
    found = batched(later, table, names)
    assert found == scalar(later, table, names)
    assert [row[3] == LARGE for row in found.rows] == [True, True]


def test_a_transaction_the_batch_ends_inside_is_left_for_the_next(order: sa.Engine) -> None:
    for number in range(3):
        _run(order, f"INSERT INTO app.\"order\" VALUES ('eu', {number}, 'n', 'b', true)")
    messages = _peek(order)
    table = {_oid(order, 'app."order"')}
    for cut in range(len(messages) + 1):
        assert batched(messages[:cut], table, ["select"]) == scalar(
            messages[:cut], table, ["select"]
        )
    assert frame(messages[:-1], {}).commit_lsns.tolist() == [
        t.commit.commit_lsn for t in pgoutput.transactions(messages[:-1], {}) if t.commit
    ]


def test_a_malformed_message_is_named_in_one_line(order: sa.Engine) -> None:
    _run(order, "INSERT INTO app.\"order\" VALUES ('eu', 1, 'a', 'b', true)")
    messages = _peek(order)
    table = {_oid(order, 'app."order"')}
    insert = next(at for at, message in enumerate(messages) if message[:1] == b"I")
    for broken, why in (
        (messages[insert][:-3], "truncated or malformed pgoutput 'I' message"),
        # Byte 8: the first value's kind (after I, the relation, N and the column count).
        (messages[insert][:8] + b"x" + messages[insert][9:], "a column value of kind 'x'"),
        (b"Z", "kind 'Z'"),
    ):
        batch = [*messages[:insert], broken, *messages[insert + 1 :]]
        with pytest.raises(pgoutput.ProtocolError, match=why) as error:
            batched(batch, table, ["note"])
        assert "\n" not in str(error.value)
        with pytest.raises(pgoutput.ProtocolError, match=why):
            scalar(batch, table, ["note"])
    with pytest.raises(pgoutput.ProtocolError, match="a change outside a transaction"):
        batched(messages[insert:], table, ["note"])
    with pytest.raises(pgoutput.ProtocolError, match="before its description"):
        batched([m for m in messages if m[:1] != b"R"], table, ["note"])


def test_positions_number_a_table_s_changes_within_each_transaction(order: sa.Engine) -> None:
    _run(
        order,
        "INSERT INTO app.\"order\" SELECT 'eu', g, 'n', 'b', true FROM generate_series(1, 5) g",
        "INSERT INTO app.events VALUES ('2026-03-01', 1)",
        "UPDATE app.\"order\" SET note = 'm'",
    )
    _run(order, 'DELETE FROM app."order" WHERE "select" < 3')
    messages = _peek(order)
    table = {_oid(order, 'app."order"')}
    found = batched(messages, table, ["note"])
    assert found.positions == [*range(10), 0, 1]
    assert np.all(np.diff([commit for commit, _ in found.commits]) >= 0)


def test_a_transaction_moving_keys_of_a_full_identity_table_nets_as_the_scalar_does(
    engine: sa.Engine,
) -> None:
    """REPLICA IDENTITY FULL, no unique index on the key: a transaction that moves rows
    onto each other's keys ships its net change per key (``gluon.source.key_moves``), the
    same in both decoders; one that moves none, or that also truncates, is left as it is."""
    _run(
        engine,
        "CREATE SCHEMA app",
        "CREATE TABLE app.nokey (id INTEGER NOT NULL, flag BOOLEAN, note TEXT)",
        "ALTER TABLE app.nokey REPLICA IDENTITY FULL",
    )
    _start(engine, "app.nokey")
    _run(engine, "INSERT INTO app.nokey VALUES (1, false, 'a'), (2, false, 'b'), (3, true, 'c')")
    _run(engine, "UPDATE app.nokey SET id = id + 1", "UPDATE app.nokey SET note = 'x' WHERE id = 2")
    _run(engine, "UPDATE app.nokey SET flag = NOT flag")  # no key moved: three UPDATEs
    _run(engine, "UPDATE app.nokey SET id = id - 1", "TRUNCATE app.nokey")  # left as it is
    messages = _peek(engine)
    table = {_oid(engine, "app.nokey")}
    names = ["id", "flag", "note"]
    expected = scalar(messages, table, names, ("id",))
    assert batched(messages, table, names, ("id",)) == expected
    changes = list(zip(expected.ops, expected.rows, strict=True))
    assert changes[3:7] == [  # the net change: the key each row left or holds at commit
        ("D", ["1", "false", "a"]),
        ("I", ["3", "false", "b"]),
        ("I", ["4", "true", "c"]),
        ("I", ["2", "false", "x"]),
    ]
    assert sorted(changes[7:10]) == [
        ("U", ["2", "true", "x"]),
        ("U", ["3", "true", "b"]),
        ("U", ["4", "false", "c"]),
    ]
    assert expected.ops[10:] == ["D", "I", "D", "I", "D", "I", "T"]
