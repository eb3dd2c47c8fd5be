"""The raw baselines, each run in a child process: ``python -m bench.worker JOB ...``.

A baseline does the same work as gluon with the same tools and nothing else:
ADBC fetch into Arrow -> ``spark.createDataFrame`` -> Delta on an embedded
Sail server started the same way gluon starts it, Spark SQL ``MERGE INTO`` and
overwrites on Sail over Delta tables registered with ``CREATE TABLE ... USING
delta LOCATION``. The job reports its own timing (after imports) on a
``BENCH_RESULT`` line; the parent measures the process as a whole.

The bench tables all have the shape of ``bench.items`` (bench/dataset.py).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Iterator
from typing import Any

ITEM_COLUMNS = ("id", "part", "grp", "amount", "label", "updated_at")
KEY = "id"
PART_COLUMN = "gl_part_part"
PART_EXPRESSION = "CAST(part AS BIGINT)"
"""The lake partition column gluon derives from ``--partition-columns=part``."""
SPARK_SCHEMA = (
    "id BIGINT, part INT, grp INT, amount DECIMAL(12,2), label STRING, updated_at TIMESTAMP_NTZ"
)
CHANGE_SCHEMA = SPARK_SCHEMA + ", gl_seq BIGINT, gl_op STRING"


def report(**values: Any) -> None:
    print("BENCH_RESULT " + json.dumps(values), flush=True)


_SERVERS: list[Any] = []
_SESSIONS: list[Any] = []


def spark_session() -> Any:
    """A Spark Connect session on an in-process Sail server, as gluon opens its own."""
    os.environ.setdefault("RUST_LOG", "error")
    from pysail.spark import SparkConnectServer
    from pyspark.sql import SparkSession

    server = SparkConnectServer("127.0.0.1", 0)
    server.start(background=True)
    _SERVERS.append(server)
    host, port = server.listening_address
    spark = (
        SparkSession.builder.remote(f"sc://{host}:{port}")
        .config("spark.sql.session.timeZone", "UTC")
        .create()
    )
    _SESSIONS.append(spark)
    return spark


def shutdown() -> None:
    """Close the session before the server (a client left open retries a dead server at exit)."""
    for spark in _SESSIONS:
        spark.stop()
    for server in _SERVERS:
        server.stop()


def register(spark: Any, name: str, location: str) -> None:
    schema = name.split(".")[0]
    spark.sql(f"CREATE SCHEMA IF NOT EXISTS {schema}").collect()
    spark.sql(f"DROP TABLE IF EXISTS {name}").collect()
    spark.sql(f"CREATE TABLE {name} USING delta LOCATION '{location}'").collect()


# -- load: source rows -> Arrow -> Delta ----------------------------------------------------


def arrow_batches(url: str, query: str, batch: int, changes: bool) -> Iterator[Any]:
    """Rows of ``query`` (items columns, maybe gl_seq and gl_op) as Arrow tables of ``batch``.

    The fastest raw path: the ADBC PostgreSQL driver reads the result into Arrow in C
    (COPY in binary); each column is then cast once to the lake type (numeric arrives
    as its text, in an ``arrow.opaque`` extension type).
    """
    import adbc_driver_postgresql.dbapi as adbc
    import pyarrow as pa
    import pyarrow.compute as pc

    fields = [
        pa.field("id", pa.int64()),
        pa.field("part", pa.int32()),
        pa.field("grp", pa.int32()),
        pa.field("amount", pa.decimal128(12, 2)),
        pa.field("label", pa.string()),
        pa.field("updated_at", pa.timestamp("us")),
    ]
    if changes:
        fields += [pa.field("gl_seq", pa.int64()), pa.field("gl_op", pa.string())]
    schema = pa.schema(fields)

    def typed(table: Any) -> Any:
        arrays = []
        for column, f in zip(table.columns, fields, strict=True):
            array = column.combine_chunks()
            if isinstance(array, pa.ExtensionArray):
                array = array.storage
            arrays.append(pc.cast(array, f.type))
        return pa.Table.from_arrays(arrays, schema=schema)

    with adbc.connect(url) as conn, conn.cursor() as cursor:
        cursor.execute(query)
        pending: list[Any] = []
        held = 0
        for record_batch in cursor.fetch_record_batch():
            pending.append(record_batch)
            held += record_batch.num_rows
            while held >= batch:
                table = pa.Table.from_batches(pending)
                yield typed(table.slice(0, batch))
                rest = table.slice(batch)
                pending, held = rest.to_batches(), rest.num_rows
        if held:
            yield typed(pa.Table.from_batches(pending))


def job_load(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    spark = spark_session()
    session_ready = time.perf_counter()
    rows = commits = 0
    schema = CHANGE_SCHEMA if args.changes else SPARK_SCHEMA
    for table in arrow_batches(args.url, args.query, args.batch, args.changes):
        frame = spark.createDataFrame(table, schema=schema)
        if args.partitioned:
            frame = frame.selectExpr("*", f"{PART_EXPRESSION} AS {PART_COLUMN}")
        mode = "overwrite" if args.overwrite and commits == 0 else "append"
        writer = frame.write.format("delta").mode(mode)
        if args.partitioned:
            writer = writer.partitionBy(PART_COLUMN)
        writer.save(args.target)
        rows += table.num_rows
        commits += 1
    done = time.perf_counter()
    report(
        rows=rows,
        commits=commits,
        seconds=done - started,
        work_seconds=done - session_ready,
    )


# -- merge and rewrite: the changes into a copy of the base ---------------------------------


def latest_changes(columns: list[str]) -> str:
    """The latest change per key (a MERGE source must not repeat a key)."""
    listed = ", ".join(columns)
    return (
        f"SELECT {listed}, gl_op FROM ("
        f"SELECT {listed}, gl_op, ROW_NUMBER() OVER (PARTITION BY {KEY} "
        "ORDER BY gl_seq DESC) AS gl_rank FROM raw.changes) WHERE gl_rank = 1"
    )


def job_merge(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    spark = spark_session()
    register(spark, "raw.base", args.base)
    register(spark, "raw.changes", args.changes)
    ready = time.perf_counter()
    columns = list(ITEM_COLUMNS)
    updates = ", ".join(f"t.{c} = s.{c}" for c in columns if c != KEY)
    targets = ", ".join([*columns, PART_COLUMN])
    values = ", ".join([*(f"s.{c}" for c in columns), "CAST(s.part AS BIGINT)"])
    spark.sql(
        f"MERGE INTO raw.base t USING ({latest_changes(columns)}) s ON t.{KEY} = s.{KEY} "
        "WHEN MATCHED AND s.gl_op = 'D' THEN DELETE "
        f"WHEN MATCHED THEN UPDATE SET {updates}, t.{PART_COLUMN} = CAST(s.part AS BIGINT) "
        f"WHEN NOT MATCHED AND s.gl_op <> 'D' THEN INSERT ({targets}) VALUES ({values})"
    ).collect()
    done = time.perf_counter()
    rows = spark.sql("SELECT COUNT(*) FROM raw.base").collect()[0][0] if args.count else None
    report(seconds=done - started, work_seconds=done - ready, rows=rows)


def job_rewrite(args: argparse.Namespace) -> None:
    started = time.perf_counter()
    spark = spark_session()
    register(spark, "raw.base", args.base)
    register(spark, "raw.changes", args.changes)
    ready = time.perf_counter()
    columns = list(ITEM_COLUMNS)
    listed = ", ".join(columns)
    merged = (
        f"WITH latest AS ({latest_changes(columns)}) "
        f"SELECT {listed}, {PART_COLUMN} FROM raw.base b "
        f"WHERE NOT EXISTS (SELECT 1 FROM latest l WHERE l.{KEY} = b.{KEY}) "
        f"UNION ALL SELECT {listed}, {PART_EXPRESSION} AS {PART_COLUMN} FROM latest "
        "WHERE gl_op <> 'D'"
    )
    spark.sql(merged).write.format("delta").mode("overwrite").partitionBy(PART_COLUMN).save(
        args.target
    )
    done = time.perf_counter()
    report(seconds=done - started, work_seconds=done - ready)


def job_deltamerge(args: argparse.Namespace) -> None:
    """The changelog rows -> Arrow -> the latest per key -> one deltalake ``merge`` commit.

    The hand-written path gluon's merge mode IMMEDIATE competes with: no engine (deltalake
    merges in-process, faster than Sail's ``MERGE INTO`` on a batch this size), no staging.
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    started = time.perf_counter()
    changes = pa.concat_tables(arrow_batches(args.url, args.query, 1_000_000, True))
    latest = changes.group_by(KEY).aggregate([("gl_seq", "max")]).rename_columns([KEY, "gl_seq"])
    changes = changes.join(latest, [KEY, "gl_seq"], join_type="inner")
    base = DeltaTable(args.base)
    schema = base.schema().to_arrow()
    names = [field.name for field in schema]
    changes = changes.append_column(PART_COLUMN, pc.cast(changes.column("part"), pa.int64()))
    source = (
        changes.select(names)
        .cast(pa.schema(schema))
        .append_column("gl_op", changes.column("gl_op"))
    )
    values = {f'"{name}"': f's."{name}"' for name in names}
    (
        base.merge(source, f"t.{KEY} = s.{KEY}", source_alias="s", target_alias="t")
        .when_matched_delete("s.gl_op = 'D'")
        .when_matched_update(values, "s.gl_op <> 'D'")
        .when_not_matched_insert(values, "s.gl_op <> 'D'")
        .execute()
    )
    done = time.perf_counter()
    report(seconds=done - started, work_seconds=done - started, rows=changes.num_rows)


# -- reads through gluon's user view and of the base table alone ----------------------------


def job_reads(args: argparse.Namespace) -> None:
    from gluon.api import Repository, lake_session, load_settings

    settings = load_settings()
    record = Repository(settings.repo_url).get_table(args.table.upper())
    assert record is not None, f"{args.table} is not offloaded"
    relations = {"view": record.user_view, "base": record.base_table}
    queries = {
        "count": "SELECT COUNT(*) FROM {rel}",
        "sum": "SELECT SUM(amount) FROM {rel}",
        "lookup": f"SELECT * FROM {{rel}} WHERE id = {int(args.key)}",
        "filter": "SELECT SUM(amount) FROM {rel} WHERE part = 3",
    }
    timings: dict[str, dict[str, float]] = {}
    plans: dict[str, str] = {}
    with lake_session(settings) as session:
        for query, template in queries.items():
            for kind, relation in relations.items():
                sql = template.format(rel=relation)
                session.sql(sql).collect()  # warm-up: metadata, file listing
                samples, cpus = [], []
                for _ in range(args.repeats):
                    begun, cpu = time.perf_counter(), cpu_seconds()
                    session.sql(sql).collect()
                    samples.append(time.perf_counter() - begun)
                    cpus.append(cpu_seconds() - cpu)
                timings.setdefault(query, {})[kind] = statistics.median(samples)
                timings[query][f"{kind}_cpu"] = statistics.median(cpus)
                if args.explain and kind == "view":
                    plans[query] = explain(session.spark, sql)
    report(timings=timings, plans=plans)


def cpu_seconds() -> float:
    """CPU time of this process, the embedded engine's threads included (Sail runs in it):
    steadier than wall time on a loaded machine."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def job_count(args: argparse.Namespace) -> None:
    from gluon.api import lake_session, load_settings

    with lake_session(load_settings()) as session:
        rows = session.sql(f"SELECT COUNT(*) FROM {args.table}").collect()[0][0]
    report(rows=int(rows))


def explain(spark: Any, sql: str) -> str:
    rows = spark.sql(f"EXPLAIN {sql}").collect()
    return "\n".join(str(row[0]) for row in rows)


# -- the least a no-op extraction must do ---------------------------------------------------


def job_noop(args: argparse.Namespace) -> None:
    import psycopg

    started = time.perf_counter()
    with psycopg.connect(args.url) as conn:
        count = conn.execute(f"SELECT COUNT(*) FROM {args.changelog}").fetchone()
    report(seconds=time.perf_counter() - started, pending=count[0] if count else None)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.worker")
    jobs = parser.add_subparsers(dest="job", required=True)
    load = jobs.add_parser("load", help="source query -> Arrow -> Delta append")
    load.add_argument("--url", required=True, help="libpq URL of the source")
    load.add_argument("--query", required=True)
    load.add_argument("--target", required=True)
    load.add_argument("--batch", type=int, default=100_000)
    load.add_argument("--changes", action="store_true", help="rows carry gl_seq, gl_op")
    load.add_argument("--partitioned", action="store_true")
    load.add_argument("--overwrite", action="store_true", help="first batch overwrites")
    load.set_defaults(run=job_load)
    for name, run in (("merge", job_merge), ("rewrite", job_rewrite)):
        sub = jobs.add_parser(name)
        sub.add_argument("--base", required=True)
        sub.add_argument("--changes", required=True)
        sub.add_argument("--target", default="")
        sub.add_argument("--count", action="store_true")
        sub.set_defaults(run=run)
    deltamerge = jobs.add_parser("deltamerge", help="changelog -> Arrow -> deltalake merge")
    deltamerge.add_argument("--url", required=True)
    deltamerge.add_argument("--query", required=True)
    deltamerge.add_argument("--base", required=True)
    deltamerge.set_defaults(run=job_deltamerge)
    reads = jobs.add_parser("reads")
    reads.add_argument("--table", required=True)
    reads.add_argument("--key", type=int, required=True)
    reads.add_argument("--repeats", type=int, default=3)
    reads.add_argument("--explain", action="store_true")
    reads.set_defaults(run=job_reads)
    count = jobs.add_parser("count", help="rows in a gluon user view")
    count.add_argument("--table", required=True)
    count.set_defaults(run=job_count)
    noop = jobs.add_parser("noop")
    noop.add_argument("--url", required=True)
    noop.add_argument("--changelog", required=True)
    noop.set_defaults(run=job_noop)
    args = parser.parse_args(argv)
    try:
        args.run(args)
    finally:
        shutdown()
    sys.stdout.flush()


if __name__ == "__main__":
    main()
