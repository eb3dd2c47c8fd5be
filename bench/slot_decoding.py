"""How much WAL a PG_LOGICAL extraction makes the server decode, batch by batch (issue 33).

One table, N single-row changes written as UPDATEs of ``TRANSACTION_ROWS`` rows each (the
shape of ``bench/logical.py``), two test_decoding slots made before them. Each slot is read
to the end in batches of ``--batch`` rows and advanced after each batch, as an extraction
does, the two ways gluon has read a slot:

- ``repeated``: a ``pg_logical_slot_peek_changes(slot, NULL, batch)`` per batch (gluon
  before wp/peek1m);
- ``stream``: one ``pg_logical_slot_peek_changes(slot, upto_lsn, NULL)`` bounded by the
  flush position read first, fetched from one server-side cursor (gluon since).

Each batch prints the slot's ``restart_lsn`` and ``confirmed_flush_lsn`` before and after
its advance, and how long the peek (or fetch) and the advance took::

    python -m bench.slot_decoding --changes 1000000 --batch 100000

Nothing of gluon runs: this measures the server's side alone.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from bench import dataset
from bench.harness import Workspace, note

TRANSACTION_ROWS = 10_000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.slot_decoding", description=__doc__)
    parser.add_argument("--changes", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=20_000)
    args = parser.parse_args(argv)
    with Workspace(Path(tempfile.mkdtemp(prefix="gluon-bench-"))) as workspace:
        url = workspace.server.create_database("slot_decoding")
        with dataset.connect(url) as conn:
            _write(conn, args.changes)
            for way, read in (("repeated", _repeated), ("stream", _stream)):
                started = time.perf_counter()
                changes = read(conn, url, way, args.batch)
                note(f"{way}: {changes:,} changes in {time.perf_counter() - started:.2f} s")
                conn.execute("SELECT pg_drop_replication_slot(%s)", (way,))
    return 0


def _write(conn: psycopg.Connection[Any], changes: int) -> None:
    conn.execute("CREATE TABLE t (id int PRIMARY KEY, amount int)")
    conn.execute("INSERT INTO t SELECT g, 0 FROM generate_series(1, %s) g", (changes,))
    for slot in ("repeated", "stream"):
        conn.execute("SELECT pg_create_logical_replication_slot(%s, 'test_decoding')", (slot,))
    for low in range(1, changes + 1, TRANSACTION_ROWS):
        high = min(low + TRANSACTION_ROWS, changes + 1) - 1
        conn.execute("UPDATE t SET amount = amount + 1 WHERE id BETWEEN %s AND %s", (low, high))


def _position(conn: psycopg.Connection[Any], slot: str) -> tuple[str, str]:
    row = conn.execute(
        "SELECT restart_lsn::text, confirmed_flush_lsn::text FROM pg_replication_slots "
        "WHERE slot_name = %s",
        (slot,),
    ).fetchone()
    assert row is not None, slot
    return str(row[0]), str(row[1])


def _advance(
    conn: psycopg.Connection[Any], slot: str, batch: int, rows: list[Any], read_seconds: float
) -> int:
    """Advance ``slot`` past the last COMMIT of ``rows``; print the batch; its changes."""
    before = _position(conn, slot)
    last = next((lsn for lsn, data in reversed(rows) if data.startswith("COMMIT")), None)
    started = time.perf_counter()
    if last is not None:
        conn.execute("SELECT pg_replication_slot_advance(%s, %s::pg_lsn)", (slot, last))
    advance_seconds = time.perf_counter() - started
    after = _position(conn, slot)
    changes = sum(1 for _, data in rows if data.startswith("table "))
    note(
        f"{slot} batch {batch}: {len(rows):,} rows, read {read_seconds:.3f} s, advance "
        f"{advance_seconds:.3f} s; restart_lsn {before[0]} -> {after[0]}, "
        f"confirmed_flush_lsn {before[1]} -> {after[1]}"
    )
    return changes


def _repeated(conn: psycopg.Connection[Any], url: str, slot: str, batch: int) -> int:
    total, number = 0, 0
    while True:
        started = time.perf_counter()
        rows = conn.execute(
            "SELECT lsn::text, data FROM pg_logical_slot_peek_changes(%s, NULL, %s)",
            (slot, batch),
        ).fetchall()
        total += _advance(conn, slot, number, rows, time.perf_counter() - started)
        number += 1
        if len(rows) < batch:
            return total


def _stream(conn: psycopg.Connection[Any], url: str, slot: str, batch: int) -> int:
    upto = conn.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()
    assert upto is not None
    total, number = 0, 0
    with psycopg.connect(dataset.libpq_url(url)) as reader, reader.cursor(name="peek") as cursor:
        started = time.perf_counter()
        cursor.execute(
            "SELECT lsn::text, data FROM pg_logical_slot_peek_changes(%s, %s::pg_lsn, NULL)",
            (slot, upto[0]),
        )
        while rows := cursor.fetchmany(batch):
            total += _advance(conn, slot, number, rows, time.perf_counter() - started)
            number += 1
            started = time.perf_counter()
    return total


if __name__ == "__main__":
    sys.exit(main())
