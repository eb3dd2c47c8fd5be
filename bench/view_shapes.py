"""Where a DEFERRED view's time goes with changes pending, and what other view shapes save.

Profile for issue 28 item 3, kept apart from ``bench.run`` (no PostgreSQL, no offload: a
minute at 2M rows). It writes a base Delta table (``id`` bigint key, ``part`` int partition
of contiguous key ranges as in ``bench.dataset``, ``amount``, ``name``) and a delta table
of updates (gluon's change columns) with ``deltalake``, registers them in an in-process
Sail session with the read session's join limits, and times, on the same data:

* ``base``: the base table alone;
* ``general``: the merge view gluon registers (the ``merge_view`` template's shape:
  base anti-joined with the changed keys, plus each key's latest change);
* ``key_range``: the same with the base split by the changed keys' range (rows outside it
  pass without a join);
* ``partitions``: the base split by the partitions holding the changed keys' base rows
  (untouched partitions ``UNION ALL`` the general merge over the touched ones);
* ``pinned``: ``partitions`` as gluon registers it (``gluon.lake.touched``): both tables
  read ``VERSION AS OF`` the version the split was derived from.

Changes are ``spread`` (every 1/fraction-th key: every partition touched, as in
``bench/reads.py``) or ``clustered`` (the newest keys: the last 10% of the key range, 2 of
20 partitions by default). Every shape must return the general view's result (checked).

    python -m bench.view_shapes --rows 2000000 --fraction 0.01 --layout clustered [--explain]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from deltalake import write_deltalake

from bench.worker import register, shutdown, spark_session

COLUMNS = "`id`, `part`, `amount`, `name`"
JOIN_OPTIONS = {  # as gluon.read.catalog.READ_JOIN_OPTIONS
    "datafusion.optimizer.hash_join_single_partition_threshold": 64 * 1024 * 1024,
    "datafusion.optimizer.hash_join_single_partition_threshold_rows": 4 * 1024 * 1024,
}
PINNED_BASE = "(SELECT * FROM b VERSION AS OF 0)"
PINNED_DELTA = "(SELECT * FROM d VERSION AS OF 0)"
QUERIES = {
    "count": "SELECT COUNT(*) FROM {}",
    "sum": "SELECT SUM(amount) FROM {}",
    "lookup": "SELECT * FROM {} WHERE id = {key}",
}


def changed_keys(rows: int, fraction: float, layout: str) -> np.ndarray:
    count = max(1, int(rows * fraction))
    if layout == "spread":
        return np.arange(0, rows, rows // count, dtype=np.int64)[:count]
    span = rows // 10  # the newest tenth of the keys
    return np.arange(rows - span, rows, max(1, span // count), dtype=np.int64)[:count]


def write_tables(root: Path, rows: int, partitions: int, keys: np.ndarray) -> None:
    rng = np.random.default_rng(1)
    ids = np.arange(rows, dtype=np.int64)
    per_part = rows // partitions
    base = pa.table(
        {
            "id": ids,
            "part": (ids // per_part).astype(np.int32),
            "amount": rng.random(rows),
            "name": pa.array([f"item {i}" for i in range(rows)]),
        }
    )
    write_deltalake(str(root / "base"), base, partition_by=["part"])
    count = len(keys)
    delta = pa.table(
        {
            "id": keys,
            "part": (keys // per_part).astype(np.int32),
            "amount": rng.random(count),
            "name": pa.array([f"changed {i}" for i in keys]),
            "gl_seq": np.arange(count, dtype=np.int64),
            "gl_op": pa.array(["U"] * count),
            "gl_extraction_id": np.ones(count, dtype=np.int64),
            "gl_control_partition": np.ones(count, dtype=np.int32),
        }
    )
    write_deltalake(str(root / "delta"), delta, partition_by=["gl_control_partition"])


def base_side(where: str) -> str:
    return (
        f"SELECT {COLUMNS} FROM b gl_base WHERE {where} NOT EXISTS (SELECT 1 FROM d gl_changes "
        "WHERE gl_changes.gl_control_partition >= 1 AND gl_changes.`id` <=> gl_base.`id`)"
    )


LATEST_CHANGES = (
    f"SELECT {COLUMNS} FROM d gl_delta WHERE gl_delta.gl_control_partition >= 1 "
    "AND gl_delta.gl_op <> 'D' AND NOT EXISTS (SELECT 1 FROM d gl_later "
    "WHERE gl_later.gl_control_partition >= 1 AND gl_later.`id` <=> gl_delta.`id` "
    "AND (gl_later.gl_seq > gl_delta.gl_seq OR (gl_later.gl_seq = gl_delta.gl_seq "
    "AND gl_later.gl_extraction_id > gl_delta.gl_extraction_id)))"
)


def shapes(rows: int, partitions: int, keys: np.ndarray) -> dict[str, str]:
    low, high = int(keys.min()), int(keys.max())
    touched = ", ".join(
        str(part) for part in sorted({int(k) // (rows // partitions) for k in keys})
    )
    return {
        "general": f"{base_side('')} UNION ALL {LATEST_CHANGES}",
        "key_range": (
            f"SELECT {COLUMNS} FROM b WHERE NOT (`id` BETWEEN {low} AND {high}) UNION ALL "
            f"{base_side(f'`id` BETWEEN {low} AND {high} AND')} UNION ALL {LATEST_CHANGES}"
        ),
        "partitions": (
            f"SELECT {COLUMNS} FROM b WHERE `part` NOT IN ({touched}) UNION ALL "
            f"{base_side(f'`part` IN ({touched}) AND')} UNION ALL {LATEST_CHANGES}"
        ),
        # as gluon registers it: both tables pinned to the versions the split came from
        "pinned": (
            f"SELECT {COLUMNS} FROM {PINNED_BASE} gl_untouched WHERE NOT COALESCE("
            f"`part` IN ({touched}), false) UNION ALL "
            + (
                f"{base_side(f'`part` IN ({touched}) AND')} UNION ALL {LATEST_CHANGES}".replace(
                    "FROM b ", f"FROM {PINNED_BASE} "
                ).replace("FROM d ", f"FROM {PINNED_DELTA} ")
            )
        ),
    }


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)  # Sail runs in this process
    return usage.ru_utime + usage.ru_stime


def measure(spark: Any, text: str, repeats: int) -> tuple[float, float, Any]:
    spark.sql(text).collect()  # warm-up
    walls, cpus, result = [], [], None
    for _ in range(repeats):
        start, cpu = time.perf_counter(), cpu_seconds()
        result = spark.sql(text).collect()
        walls.append(time.perf_counter() - start)
        cpus.append(cpu_seconds() - cpu)
    return statistics.median(walls), statistics.median(cpus), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--fraction", type=float, default=0.01)
    parser.add_argument("--partitions", type=int, default=20)
    parser.add_argument("--layout", choices=("spread", "clustered"), default="spread")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--explain", action="store_true", help="EXPLAIN ANALYZE each shape")
    args = parser.parse_args()
    keys = changed_keys(args.rows, args.fraction, args.layout)
    with tempfile.TemporaryDirectory(prefix="view_shapes_") as work:
        root = Path(work)
        write_tables(root, args.rows, args.partitions, keys)
        spark = spark_session()
        try:
            for key, value in JOIN_OPTIONS.items():
                spark.sql(f"SET {key} = {value}").collect()
            register(spark, "bench.b", str(root / "base"))
            register(spark, "bench.d", str(root / "delta"))
            spark.sql("USE DATABASE bench").collect()
            views = shapes(args.rows, args.partitions, keys)
            for name, select in views.items():
                spark.sql(f"CREATE TEMPORARY VIEW {name} AS {select}").collect()
            report(spark, args, keys, list(views))
        finally:
            shutdown()


def canonical(rows: Any) -> list[tuple[Any, ...]]:
    """Rows to compare: floats rounded (a SUM's last bits depend on the order it adds in)."""
    return sorted(
        tuple(round(value, 6) if isinstance(value, float) else value for value in row)
        for row in rows
    )


def report(spark: Any, args: argparse.Namespace, keys: np.ndarray, views: list[str]) -> None:
    print(
        f"{args.rows:,} base rows in {args.partitions} partitions, {len(keys):,} changes "
        f"({args.fraction:.1%}, {args.layout}); "
        "median wall ms (CPU ms), ratio to the base table"
    )
    for query, template in QUERIES.items():
        key = int(keys[len(keys) // 2])
        base_wall, base_cpu, _ = measure(spark, template.format("b", key=key), args.repeats)
        cells = [f"base {base_wall * 1000:.0f} ({base_cpu * 1000:.0f})"]
        reference = None
        for view in views:
            wall, cpu, result = measure(spark, template.format(view, key=key), args.repeats)
            if reference is None:
                reference = result
            elif canonical(result) != canonical(reference):
                raise SystemExit(f"{view} answered {result} where general answered {reference}")
            cells.append(f"{view} {wall * 1000:.0f} ({cpu * 1000:.0f}) {wall / base_wall:.2f}x")
        print(f"{query:7s} " + " | ".join(cells), flush=True)
        if args.explain:
            for view in views:
                plan = spark.sql("EXPLAIN ANALYZE " + template.format(view, key=key)).collect()
                print(f"--- {query} {view}\n" + "\n".join(str(row[0]) for row in plan))


if __name__ == "__main__":
    main()
