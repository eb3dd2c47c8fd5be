"""Where a shared-slot PG_LOGICAL extraction's time goes on the server (issue 33 item 2):
the floor under ``bench.logical_typed --shared-slot``.

One database holds ``bench.items`` (``--rows``), published, with a pgoutput slot; then
``--changes`` single-row UPDATEs in transactions of 10,000 (as ``bench.logical``). Each
way reads the same backlog (nothing consumes it), interleaved ``--repeats`` times; wall
seconds and the server backend's CPU seconds (``/proc/<pid>/stat``; the server runs here):

- ``peek_server``: ``count(*)`` over ``pg_logical_slot_peek_binary_changes`` with the
  publication: the server's decoding and the result it builds, nothing sent;
- ``peek_arrow``: the same peek read whole through ADBC (COPY, Arrow), as the shared slot's
  reader reads it (``gluon.source.shared_batches.slot_messages``);
- ``stream``: the replication protocol (``pg_recvlogical --start`` on a copy of the slot,
  ``--endpos`` the flush position, output discarded): the server decodes and sends as it
  goes, without building the whole result first;
- ``table_read``: the same number of rows of the table read through ADBC: what reading
  the changes costs once they are rows (what CHANGELOG reads, from its changelog).

::

    python -m bench.slot_read_floor --changes 1000000

Nothing of gluon runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from bench import dataset
from bench.harness import Workspace, note
from bench.logical import _update

SLOT = "bench_floor"
PUBLICATION = "bench_floor"
TICKS = os.sysconf("SC_CLK_TCK")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.slot_read_floor", description=__doc__)
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--changes", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    with Workspace(Path(tempfile.mkdtemp(prefix="gluon-bench-"))) as workspace:
        url = workspace.server.create_database("slot_floor")
        dataset.create_items(url, args.rows, 10)
        libpq = dataset.libpq_url(url)
        with dataset.connect(url) as conn:
            conn.execute(f"CREATE PUBLICATION {PUBLICATION} FOR TABLE {dataset.QUALIFIED}")
            conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (SLOT,))
            changed = _update(url, args.changes, args.rows)
            upto = str(conn.execute("SELECT pg_current_wal_flush_lsn()").fetchone()[0])  # type: ignore[index]
            peek = (
                f"pg_logical_slot_peek_binary_changes('{SLOT}', '{upto}', NULL, "
                f"'proto_version', '1', 'publication_names', '{PUBLICATION}')"
            )
            ways: dict[str, Callable[[], Any]] = {
                "peek_server": lambda: _server(conn, f"SELECT count(*) FROM {peek}"),
                "peek_arrow": lambda: _arrow(conn, libpq, f"SELECT lsn::text, data FROM {peek}"),
                "stream": lambda: _stream(conn, libpq, upto),
                "table_read": lambda: _arrow(
                    conn, libpq, f"SELECT * FROM {dataset.QUALIFIED} ORDER BY id LIMIT {changed}"
                ),
            }
            figures: dict[str, list[dict[str, float]]] = {way: [] for way in ways}
            for _ in range(args.repeats):
                for way, read in ways.items():
                    figures[way].append(read())
                    note(f"{way}: {figures[way][-1]}")
            conn.execute("SELECT pg_drop_replication_slot(%s)", (SLOT,))
    best = {way: min(runs, key=lambda run: run["wall_s"]) for way, runs in figures.items()}
    output = {"changes": changed, "rows": args.rows, "best": best, "runs": figures}
    print(json.dumps(output, indent=1))
    if args.out is not None:
        args.out.write_text(json.dumps(output, indent=1) + "\n")
    return 0


def _backend_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def _server(conn: psycopg.Connection[Any], sql: str) -> dict[str, float]:
    """A query counted on the server: nothing sent but its one row."""
    pid = conn.info.backend_pid
    cpu, started = _backend_cpu(pid), time.perf_counter()
    rows = conn.execute(sql).fetchone()[0]  # type: ignore[index]
    return _figures(started, _backend_cpu(pid) - cpu, rows)


def _arrow(conn: psycopg.Connection[Any], libpq: str, sql: str) -> dict[str, float]:
    """``sql`` read whole through ADBC (the connection's backend found by its pid)."""
    import adbc_driver_postgresql.dbapi

    with adbc_driver_postgresql.dbapi.connect(libpq) as arrow, arrow.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = int(cursor.fetchone()[0])  # type: ignore[index]
        arrow.commit()
        cpu, started = _backend_cpu(pid), time.perf_counter()
        cursor.execute(sql)
        rows = sum(batch.num_rows for batch in cursor.fetch_record_batch())
        return _figures(started, _backend_cpu(pid) - cpu, rows)


def _stream(conn: psycopg.Connection[Any], libpq: str, upto: str) -> dict[str, float]:
    """The slot's changes up to ``upto`` over the replication protocol, from a copy of the
    slot (a stream confirms what it received: the original stays where it is)."""
    copy = f"{SLOT}_copy"
    conn.execute("SELECT pg_copy_logical_replication_slot(%s, %s)", (SLOT, copy))
    try:
        started = time.perf_counter()
        child = subprocess.Popen(
            [
                "pg_recvlogical",
                "-d",
                libpq,
                "--slot",
                copy,
                "--start",
                "--no-loop",
                "--endpos",
                upto,
                "-o",
                "proto_version=1",
                "-o",
                f"publication_names={PUBLICATION}",
                "-f",
                "/dev/null",
            ]
        )
        # The walsender serving the copy: its CPU is the stream's server side.
        pid = None
        while pid is None and child.poll() is None:
            found = conn.execute(
                "SELECT active_pid FROM pg_replication_slots WHERE slot_name = %s", (copy,)
            ).fetchone()
            pid = found[0] if found else None
        cpu = _backend_cpu(pid) if pid else 0.0
        last = cpu
        while child.poll() is None:
            if pid:
                try:
                    last = _backend_cpu(pid)
                except OSError:
                    break
            time.sleep(0.02)
        child.wait()
        return _figures(started, last - cpu, 0)
    finally:
        conn.execute("SELECT pg_drop_replication_slot(%s)", (copy,))


def _figures(started: float, cpu: float, rows: int) -> dict[str, float]:
    return {"wall_s": round(time.perf_counter() - started, 3), "server_cpu_s": cpu, "rows": rows}


if __name__ == "__main__":
    sys.exit(main())
