"""What one slot per database saves (issue 33 item 1): per-table test_decoding slots (gluon's
PG_LOGICAL today) against one pgoutput slot with a publication shared by the tables
(``gluon.source.publication``), on the same WAL, with a foreign writer.

One database holds ``--tables`` published tables and one unpublished table; another database
of the cluster is the foreign writer's. Each way has its slots made before any write:

- ``per_table``: one test_decoding slot per table, each peeked up to the flush position
  (``pg_logical_slot_peek_changes``, one decoding per table, as an extraction does);
- ``shared``: one pgoutput slot, peeked once up to the flush position with the publication
  (``pg_logical_slot_peek_binary_changes``) for all the tables.

Three backlogs, each measured on the same WAL for both ways (a peek does not consume: the
slots are advanced to the flush position between backlogs), ways interleaved ``--repeats``
times:

1. ``changes``: ``--changes`` single-row UPDATEs spread over the published tables;
2. ``foreign_db``: the same number written to the other database: no change of the tables;
3. ``unpublished``: the same number written to the unpublished table of the same database.

Each figure is the wall time of the read (query to last row fetched) and the server
backend's CPU time (utime + stime of ``/proc/<pid>/stat``, the server runs on this host),
summed over the way's peeks::

    python -m bench.database_slot --changes 200000 --tables 3

Nothing of gluon runs: this measures the server's side of the two ways.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from bench import dataset
from bench.harness import Workspace, note

TRANSACTION_ROWS = 1_000
PUBLICATION = "bench_shared"
SHARED = "bench_shared"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.database_slot", description=__doc__)
    parser.add_argument("--changes", type=int, default=200_000)
    parser.add_argument("--tables", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    with Workspace(Path(tempfile.mkdtemp(prefix="gluon-bench-"))) as workspace:
        url = workspace.server.create_database("dbslot_source")
        foreign = workspace.server.create_database("dbslot_foreign")
        with dataset.connect(url) as conn, dataset.connect(foreign) as other:
            conn.autocommit = other.autocommit = True
            tables = [f"t{n}" for n in range(args.tables)]
            per_row = max(args.changes // len(tables), 1)
            for table in [*tables, "unpublished"]:
                _create(conn, table, per_row if table != "unpublished" else args.changes)
            _create(other, "foreign_rows", args.changes)
            names = ", ".join(tables)
            conn.execute(
                f"CREATE PUBLICATION {PUBLICATION} FOR TABLE {names} "
                "WITH (publish_via_partition_root = true)"
            )
            conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (SHARED,))
            for table in tables:
                conn.execute(
                    "SELECT pg_create_logical_replication_slot(%s, 'test_decoding')",
                    (f"bench_{table}",),
                )
            backlogs: dict[str, list[tuple[psycopg.Connection[Any], str, int]]] = {
                "changes": [(conn, table, per_row) for table in tables],
                "foreign_db": [(other, "foreign_rows", args.changes)],
                "unpublished": [(conn, "unpublished", args.changes)],
            }
            for backlog, writes in backlogs.items():
                before = _wal(conn)
                for writer, table, rows in writes:
                    _update(writer, table, rows)
                upto = _flushed(conn)
                note(f"{backlog}: {_wal_bytes(conn, before, upto) / 2**20:.1f} MiB of WAL")
                totals: dict[str, list[tuple[float, float, int]]] = {"per_table": [], "shared": []}
                for round_ in range(args.repeats):
                    ways = ["per_table", "shared"] if round_ % 2 == 0 else ["shared", "per_table"]
                    for way in ways:
                        if way == "per_table":
                            read = [_peek_text(url, f"bench_{t}", upto) for t in tables]
                        else:
                            read = [_peek_shared(url, upto)]
                        totals[way].append(
                            (
                                sum(r[0] for r in read),
                                sum(r[1] for r in read),
                                sum(r[2] for r in read),
                            )
                        )
                for way, runs in totals.items():
                    wall = sorted(run[0] for run in runs)
                    cpu = sorted(run[1] for run in runs)
                    note(
                        f"{backlog} {way}: wall {_spread(wall)} s, server CPU {_spread(cpu)} s, "
                        f"{runs[0][2]:,} rows"
                    )
                for slot in [SHARED, *(f"bench_{t}" for t in tables)]:
                    conn.execute("SELECT pg_replication_slot_advance(%s, %s::pg_lsn)", (slot, upto))
    return 0


def _spread(values: list[float]) -> str:
    return f"{values[0]:.2f}" if len(values) == 1 else f"{values[0]:.2f}-{values[-1]:.2f}"


def _create(conn: psycopg.Connection[Any], table: str, rows: int) -> None:
    conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, amount int, note text)")
    conn.execute(
        f"INSERT INTO {table} SELECT g, 0, 'row ' || g FROM generate_series(1, %s) g", (rows,)
    )


def _update(conn: psycopg.Connection[Any], table: str, rows: int) -> None:
    """``rows`` single-row changes as UPDATEs of ``TRANSACTION_ROWS`` rows."""
    for low in range(1, rows + 1, TRANSACTION_ROWS):
        high = min(low + TRANSACTION_ROWS, rows + 1) - 1
        conn.execute(
            f"UPDATE {table} SET amount = amount + 1 WHERE id BETWEEN %s AND %s", (low, high)
        )


def _wal(conn: psycopg.Connection[Any]) -> str:
    row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    assert row is not None
    return str(row[0])


def _flushed(conn: psycopg.Connection[Any]) -> str:
    row = conn.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()
    assert row is not None
    return str(row[0])


def _wal_bytes(conn: psycopg.Connection[Any], low: str, high: str) -> int:
    row = conn.execute("SELECT pg_wal_lsn_diff(%s::pg_lsn, %s::pg_lsn)", (high, low)).fetchone()
    assert row is not None
    return int(row[0])


def _cpu_seconds(pid: int) -> float:
    """The server backend ``pid``'s CPU time so far (user + system)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _timed(url: str, sql: str, params: tuple[Any, ...]) -> tuple[float, float, int]:
    """Run ``sql`` from a server-side cursor to its last row: wall seconds, the backend's
    CPU seconds, rows."""
    with psycopg.connect(dataset.libpq_url(url)) as reader:
        row = reader.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        pid = int(row[0])
        cpu = _cpu_seconds(pid)
        started = time.perf_counter()
        count = 0
        with reader.cursor(name="peek") as cursor:
            cursor.execute(sql, params)
            while rows := cursor.fetchmany(10_000):
                count += len(rows)
        wall = time.perf_counter() - started
        return wall, _cpu_seconds(pid) - cpu, count


def _peek_text(url: str, slot: str, upto: str) -> tuple[float, float, int]:
    return _timed(
        url,
        "SELECT lsn::text, xid::text, data FROM pg_logical_slot_peek_changes("
        "%s, %s::pg_lsn, NULL, 'include-timestamp', 'on')",
        (slot, upto),
    )


def _peek_shared(url: str, upto: str) -> tuple[float, float, int]:
    return _timed(
        url,
        "SELECT lsn::text, data FROM pg_logical_slot_peek_binary_changes("
        "%s, %s::pg_lsn, NULL, 'proto_version', '1', 'publication_names', %s)",
        (SHARED, upto, PUBLICATION),
    )


if __name__ == "__main__":
    sys.exit(main())
