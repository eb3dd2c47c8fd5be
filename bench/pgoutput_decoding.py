"""What PG_LOGICAL on a pgoutput slot costs client side, against CHANGELOG's read (issue 33).

``bench.items`` with N rows (``bench.dataset``), a publication of it and a pgoutput slot
made before N single-row changes (``amount + 1``, as UPDATEs of ``TRANSACTION_ROWS`` rows
each: ``bench/logical.py``'s shape). The same N changes are also written, before the
slot (so the slot decodes the UPDATEs only), to a changelog table shaped as CHANGELOG's
(the table's columns after the change, ``gl_seq``, ``gl_op``). Each round, in this order,
times:

- ``changelog_read``: CHANGELOG's read, ``SELECT ... ORDER BY gl_seq`` through ADBC into
  Arrow in the lake's types (what a CHANGELOG extraction reads);
- ``peek``: ``pg_logical_slot_peek_binary_changes`` through ADBC into one Arrow binary
  column (the server decoding the WAL, and the transfer; the server's CPU is reported
  beside);
- ``scalar_decode``: ``gluon.source.pgoutput`` on the peeked messages (a bytes object
  each), one message and one value at a time, to text rows;
- ``batch_decode``: ``gluon.source.pgoutput_batch`` on the peeked Arrow column, to one
  Arrow string array per column;
- ``typed``: those columns in the lake's types (``gl_seq`` numbered as the PG_LOGICAL feed
  numbers it), through the same casts the test_decoding path uses.

Wall seconds, this process's CPU seconds and the server backend's (``/proc``, the bench
runs beside its cluster) of each, the fastest of ``--rounds``; the PG_LOGICAL total is
peek + batch decode + typed, its ratio to ``changelog_read`` what a pgoutput extraction's
read could reach against CHANGELOG's (both then write the same Arrow to Delta)::

    python -m bench.pgoutput_decoding --changes 100000 1000000 --rounds 3

The batch decoder's output is checked equal to the scalar decoder's before any figure.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from bench import dataset
from bench.harness import ROOT, Workspace, note
from gluon.api import TableRef, connect

DECODERS = ("gluon.source.pgoutput", "gluon.source.pgoutput_batch")
"""The decoders measured: internal modules no feed uses yet, which ``gluon.api`` may not
name (a plugin module: tests/unit/test_plugin_boundary.py). Imported by name, so a move
fails this bench at its start rather than measuring other code; once the PG_LOGICAL feed
reads pgoutput, ``bench.logical_typed`` measures them through ``offload``."""

TRANSACTION_ROWS = 10_000
SLOT = "bench_pgoutput"
"""With the size after it: slots are the cluster's, one per size's database."""
PUBLICATION = "bench_pgoutput"
COLUMNS = ["id", "part", "grp", "amount", "label", "updated_at"]
POSITION_BITS = 20
"""As the PG_LOGICAL feed numbers ``gl_seq``: commit LSN << 20 | position."""


def _peek(count: int) -> str:
    return (
        f"SELECT data FROM pg_logical_slot_peek_binary_changes('{SLOT}_{count}', NULL, NULL, "
        f"'proto_version', '1', 'publication_names', '{PUBLICATION}')"
    )


CHANGELOG_READ = (
    f"SELECT {', '.join(COLUMNS)}, gl_seq, gl_op FROM bench.items_changes ORDER BY gl_seq"
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pgoutput_decoding", description=__doc__)
    parser.add_argument("--changes", type=int, nargs="+", default=[100_000])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args(argv)
    for name in DECODERS:  # before any work: a moved module fails here
        importlib.import_module(name)
    figures: list[dict[str, Any]] = []
    with Workspace(Path(tempfile.mkdtemp(prefix="gluon-bench-"))) as workspace:
        for count in args.changes:
            url = workspace.server.create_database(f"pgoutput_{count}")
            _prepare(url, count)
            figures.append(_measure(url, count, args.rounds))
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"results-pgoutput-decoding-{'-'.join(map(str, args.changes))}.json"
    path.write_text(json.dumps({"rounds": args.rounds, "figures": figures}, indent=1) + "\n")
    note(f"wrote {path}")
    return 0


def _prepare(url: str, count: int) -> None:
    dataset.create_items(url, count, 10)
    after = "(amount + 1)::numeric(12,2) AS amount"  # the type the table declares
    selected = ", ".join(after if name == "amount" else name for name in COLUMNS)
    with dataset.connect(url) as conn:
        # CHANGELOG's side of the same changes (each row after its UPDATE, numbered),
        # written before the slot: its WAL is not the slot's to decode.
        conn.execute(
            f"CREATE TABLE bench.items_changes AS SELECT {selected}, id AS gl_seq, "
            "'U'::text AS gl_op FROM bench.items"
        )
        conn.execute("VACUUM ANALYZE bench.items_changes")
        conn.execute(f"CREATE PUBLICATION {PUBLICATION} FOR TABLE bench.items")
        conn.execute(f"SELECT pg_create_logical_replication_slot('{SLOT}_{count}', 'pgoutput')")
        for low in range(1, count + 1, TRANSACTION_ROWS):
            high = min(low + TRANSACTION_ROWS, count + 1) - 1
            with conn.transaction():
                conn.execute(
                    "UPDATE bench.items SET amount = amount + 1 WHERE id BETWEEN %s AND %s",
                    (low, high),
                )
    note(f"{count:,} changes written")


def _server_cpu(pid: int) -> float:
    """CPU seconds (user + system) of the server backend ``pid`` so far (same machine)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class _Timer:
    """Wall, this process's CPU and the server backend's CPU seconds per stage, the
    fastest of the rounds (by wall time)."""

    def __init__(self, backend: int) -> None:
        self.backend = backend
        self.best: dict[str, tuple[float, float, float]] = {}

    def __call__(self, stage: str, work: Callable[[], Any]) -> Any:
        wall, cpu = time.perf_counter(), time.process_time()
        server = _server_cpu(self.backend)
        result = work()
        taken = (
            time.perf_counter() - wall,
            time.process_time() - cpu,
            _server_cpu(self.backend) - server,
        )
        if stage not in self.best or taken[0] < self.best[stage][0]:
            self.best[stage] = taken
        return result


def _measure(url: str, count: int, rounds: int) -> dict[str, Any]:
    import adbc_driver_postgresql.dbapi as adbc

    source = connect(url)
    spec = source.describe_table(TableRef("bench", "items"))
    schema = pa.schema(
        [*spec.arrow_schema, pa.field("gl_seq", pa.int64()), pa.field("gl_op", pa.string())]
    )
    with adbc.connect(dataset.libpq_url(url)) as conn, conn.cursor() as cursor:
        cursor.execute("SELECT 'bench.items'::regclass::oid, pg_backend_pid()")
        row = cursor.fetchone()
        assert row is not None
        tables = {int(row[0])}
        timer = _Timer(int(row[1]))

        def read(sql: str) -> pa.Table:
            cursor.execute(sql)
            return cursor.fetch_arrow_table()

        for number in range(rounds):
            changelog = timer("changelog_read", lambda: read(CHANGELOG_READ))
            assert changelog.num_rows == count
            messages = timer("peek", lambda: read(_peek(count))["data"].combine_chunks())
            as_bytes = messages.to_pylist()  # what a psycopg read of the slot gives
            ops, rows = timer("scalar_decode", partial(_scalar, as_bytes, tables))
            changes, seqs = timer("batch_decode", partial(_batched, messages, tables))
            typed = timer("typed", partial(changes.as_arrow, seqs, spec, schema))
            assert typed.num_rows == count
            if number == 0:
                _check_equal(ops, rows, changes)
            note(f"{count:,} changes, round {number + 1} done")
        cursor.execute(f"SELECT pg_drop_replication_slot('{SLOT}_{count}')")
    stages = {
        stage: {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "server_cpu_s": round(server, 2)}
        for stage, (wall, cpu, server) in timer.best.items()
    }
    logical = sum(timer.best[stage][0] for stage in ("peek", "batch_decode", "typed"))
    figure = {
        "changes": count,
        "stages": stages,
        "pg_logical_read_wall_s": round(logical, 3),
        "ratio_to_changelog_read": round(logical / timer.best["changelog_read"][0], 2),
        "batch_speedup_over_scalar": round(
            timer.best["scalar_decode"][0] / timer.best["batch_decode"][0], 1
        ),
    }
    for stage, figures in stages.items():
        note(
            f"{count:,} {stage}: {figures['wall_s']:.3f} s wall, {figures['cpu_s']:.3f} s CPU, "
            f"server {figures['server_cpu_s']:.2f} s CPU"
        )
    note(
        f"{count:,}: PG_LOGICAL read (peek + batch decode + typed) {logical:.3f} s, "
        f"{figure['ratio_to_changelog_read']}x CHANGELOG's read; batch decode "
        f"{figure['batch_speedup_over_scalar']}x faster than scalar"
    )
    return figure


def _scalar(messages: list[bytes], tables: set[int]) -> tuple[list[str], list[list[str | None]]]:
    relations: dict[int, Any] = {}
    ops: list[str] = []
    rows: list[list[str | None]] = []
    scalar = importlib.import_module(DECODERS[0])
    for transaction in scalar.transactions(messages, relations):
        found_ops, found_rows = scalar.table_rows(transaction, relations, tables, COLUMNS)
        ops += found_ops
        rows += found_rows
    return ops, rows


def _batched(messages: pa.Array, tables: set[int]) -> tuple[Any, pa.Array]:
    batch = importlib.import_module(DECODERS[1]).frame(messages, {})
    changes = batch.table(tables, COLUMNS)
    commits = batch.commit_lsns[changes.transactions]
    seqs = np.left_shift(commits, POSITION_BITS) | changes.positions
    return changes, pa.array(seqs, type=pa.int64())


def _check_equal(ops: list[str], rows: list[list[str | None]], changes: Any) -> None:
    columns = [column.to_pylist() for column in changes.columns]
    assert changes.ops.to_pylist() == ops, "batch and scalar decoders disagree on the ops"
    assert [list(row) for row in zip(*columns, strict=True)] == rows, "values disagree"


if __name__ == "__main__":
    sys.exit(main())
