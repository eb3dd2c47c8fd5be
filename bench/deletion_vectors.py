"""Can deletion vectors hide a DEFERRED view's replaced base rows? (issue 28 item 3)

Spread changes leave no base file untouched, so only hiding the replaced base rows before
the read avoids the view's join. This probe measures whether each library gluon reads the
base with can write and read Delta deletion vectors: a 1M-row, 10-partition table with the
table feature on, 1% of its rows deleted by ``deltalake`` and by Sail (``DELETE FROM``),
then each commit's actions, the rows Sail reads back and whether ``deltalake`` can open it.

    python -m bench.deletion_vectors
"""

from __future__ import annotations

import glob
import json
import tempfile
import time

import numpy as np
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from bench.worker import register, shutdown, spark_session

ROWS = 1_000_000
FEATURE = {"delta.enableDeletionVectors": "true"}


def last_commit(path: str) -> str:
    """What the table's last commit holds: a deletion vector, and its remove/add actions."""
    with open(sorted(glob.glob(f"{path}/_delta_log/*.json"))[-1]) as log:
        actions = [json.loads(line) for line in log if line.strip()]
    vectors = sum(1 for a in actions if (a.get("add") or {}).get("deletionVector"))
    removes = sum(1 for a in actions if "remove" in a)
    adds = sum(1 for a in actions if "add" in a)
    return f"add actions with a deletion vector: {vectors}, removes: {removes}, adds: {adds}"


def main() -> None:
    ids = np.arange(ROWS, dtype=np.int64)
    table = pa.table(
        {"id": ids, "part": (ids // (ROWS // 10)).astype(np.int32), "amount": np.ones(ROWS)}
    )
    with tempfile.TemporaryDirectory(prefix="deletion_vectors_") as root:
        by_deltalake, by_sail = f"{root}/deltalake", f"{root}/sail"
        for path in (by_deltalake, by_sail):
            write_deltalake(path, table, partition_by=["part"], configuration=FEATURE)
        started = time.perf_counter()
        metrics = DeltaTable(by_deltalake).delete("id % 100 = 0")
        print(f"deltalake delete: {time.perf_counter() - started:.2f} s, {metrics}")
        print(f"deltalake delete: {last_commit(by_deltalake)}")
        spark = spark_session()
        try:
            register(spark, "probe.t", by_sail)
            started = time.perf_counter()
            spark.sql("DELETE FROM probe.t WHERE id % 100 = 0").collect()
            print(f"Sail delete: {time.perf_counter() - started:.2f} s, {last_commit(by_sail)}")
            register(spark, "probe.after", by_sail)
            row = spark.sql("SELECT COUNT(*), SUM(amount) FROM probe.after").collect()[0]
            print(f"Sail reads back {row[0]:,} rows (expected {ROWS - ROWS // 100:,})")
        finally:
            shutdown()
        try:
            rows = DeltaTable(by_sail).to_pyarrow_table().num_rows
            print(f"deltalake reads the Sail table: {rows:,} rows")
        except Exception as exc:  # the probe's answer, not a failure
            print(f"deltalake cannot read the Sail table: {str(exc)[:160]}")


if __name__ == "__main__":
    main()
