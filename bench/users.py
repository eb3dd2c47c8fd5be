"""What a data engineer would do instead of gluon, each job in a child process:
``python -m bench.users JOB ...``.

* ``reload``: the whole source table -> Arrow (ADBC) -> ``deltalake.write_deltalake``
  with ``mode="overwrite"`` (one commit replaces the table, partitioned on ``part``);
* ``upsert``: the rows whose ``updated_at`` is past the last run's watermark -> Arrow ->
  ``DeltaTable.merge`` on the key (update matched, insert the rest). A deleted source row
  never shows up in that query, so the upsert keeps it: a phantom row;
* ``phantoms``: the keys a Delta table holds that the source no longer has.

No engine: deltalake works in-process, the fastest hand-written path at these sizes.
Each job reports its own timing (after imports) on a ``BENCH_RESULT`` line, like
``bench.worker``.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from bench.worker import arrow_batches, report

ITEMS = "bench.items"
COLUMNS = "id, part, grp, amount, label, updated_at"


def _read(url: str, query: str) -> Any:
    import pyarrow as pa

    tables = list(arrow_batches(url, query, 1_000_000, False))
    if not tables:
        return None
    return pa.concat_tables(tables)


def job_reload(args: argparse.Namespace) -> None:
    from deltalake import write_deltalake

    started = time.perf_counter()
    table = _read(args.url, f"SELECT {COLUMNS} FROM {ITEMS}")
    write_deltalake(args.target, table, mode="overwrite", partition_by=["part"])
    report(seconds=time.perf_counter() - started, rows=table.num_rows)


def job_upsert(args: argparse.Namespace) -> None:
    """Merge the rows changed since ``--watermark`` (none: load everything) into ``--target``."""
    import pyarrow.compute as pc
    from deltalake import DeltaTable, write_deltalake

    started = time.perf_counter()
    where = f" WHERE updated_at > '{args.watermark}'" if args.watermark else ""
    batch = _read(args.url, f"SELECT {COLUMNS} FROM {ITEMS}{where}")
    rows = 0 if batch is None else batch.num_rows
    watermark = args.watermark
    if batch is not None and rows:
        watermark = str(pc.max(batch.column("updated_at")).as_py())
        if args.watermark:
            (
                DeltaTable(args.target)
                .merge(batch, "t.id = s.id", source_alias="s", target_alias="t")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute()
            )
        else:
            write_deltalake(args.target, batch, mode="overwrite", partition_by=["part"])
    report(seconds=time.perf_counter() - started, rows=rows, watermark=watermark)


def job_phantoms(args: argparse.Namespace) -> None:
    """Keys in the Delta table the source does not have, and the table's row count."""
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    held = DeltaTable(args.target).to_pyarrow_table(columns=["id"]).column("id")
    source = _read(args.url, f"SELECT {COLUMNS} FROM {ITEMS}").column("id")
    phantoms = int(pc.sum(pc.invert(pc.is_in(held, value_set=source))).as_py() or 0)
    report(rows=len(held), source_rows=len(source), phantoms=phantoms)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.users")
    jobs = parser.add_subparsers(dest="job", required=True)
    for name, run in (("reload", job_reload), ("upsert", job_upsert), ("phantoms", job_phantoms)):
        sub = jobs.add_parser(name)
        sub.add_argument("--url", required=True, help="libpq URL of the source")
        sub.add_argument("--target", required=True, help="the Delta table's folder")
        sub.set_defaults(run=run)
        if name == "upsert":
            sub.add_argument("--watermark", default="", help="the last run's max(updated_at)")
    args = parser.parse_args(argv)
    args.run(args)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
