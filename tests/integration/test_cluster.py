"""gluon on a Sail cluster over Spark Connect: the shape of a real deployment (issue 29).

A Sail server in local-cluster mode (``tests/support/sail_cluster.py``) plans each job and
sends its tasks to workers; gluon reaches it through ``SPARK_REMOTE``, as it would reach a
cluster. One table shaped like a warehouse's (a composite key, partitioned by month, text
with a newline and other scripts) goes through offload, enable, extractions, every
compaction method and ``gluon query``, in both merge modes; after each step the lake read
through gluon equals the source, and after each compaction so does the base table read
without gluon (deltalake).

Found here: Sail 0.7's cluster mode cannot send ``substring`` (nor ``left``, ``lpad``,
``date_trunc``) to its workers, so the first offload of a date-partitioned table failed with
``ExtendedScalarUdf: no UDF found for substr``; partition expressions now use
``date_format`` and ``regexp_extract`` (``gluon.lake.sql``), checked equal to the old ones
below.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from deltalake import DeltaTable
from support.cli import query_json
from support.incremental import RunCli
from support.sail_cluster import sail_cluster

from gluon.config import load_settings
from gluon.lake.session import open_session
from gluon.repo import Repository

COLUMNS = ("region", "id", "sold_on", "amount", "note")
COMPACTIONS = {
    "IN_PLACE": "--incremental-in-place-compaction",
    "FULL": "--incremental-full-compaction",
    "PARTITION_WISE_FULL": "--incremental-partition-wise-full-compaction",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with sail_cluster(tmp_path_factory.mktemp("sail") / "server.log") as url:
        yield url


@pytest.fixture
def source(offload_home: Path, monkeypatch: pytest.MonkeyPatch, cluster: str) -> sa.Engine:
    """``main.sales`` in SQLite, 60 rows over three months; gluon set to use the cluster."""
    monkeypatch.setenv("SPARK_REMOTE", cluster)
    path = offload_home.parent / "app.db"
    monkeypatch.setenv("GLUON_SOURCE_URL", f"sqlite:///{path}")
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.begin() as db:
        db.exec_driver_sql(
            "CREATE TABLE sales (region TEXT NOT NULL, id INTEGER NOT NULL, sold_on DATE, "
            "amount INTEGER, note TEXT, PRIMARY KEY (region, id))"
        )
        for n in range(60):
            db.execute(
                sa.text("INSERT INTO sales VALUES (:r, :i, :d, :a, :n)"),
                {
                    "r": ("north", "süd", "東")[n % 3],
                    "i": n // 3,
                    "d": f"2024-0{1 + n % 3}-{1 + n % 27:02d}",
                    "a": n * 10,
                    "n": None if n % 7 == 0 else f"row {n}\nline two",
                },
            )
    return engine


def _source_rows(engine: sa.Engine) -> list[tuple[str, ...]]:
    with engine.connect() as db:
        rows = db.execute(sa.text(f"SELECT {', '.join(COLUMNS)} FROM sales"))
        return sorted(_canonical(dict(row._mapping)) for row in rows)


def _canonical(row: dict[str, Any]) -> tuple[str, ...]:
    return tuple("NULL" if row[name] is None else str(row[name]) for name in COLUMNS)


def _through_gluon() -> list[tuple[str, ...]]:
    return sorted(_canonical(row) for row in query_json("SELECT * FROM main.sales"))


def _base() -> DeltaTable:
    record = Repository(load_settings().repo_url).get_table("MAIN.SALES")
    assert record is not None and record.base_path
    return DeltaTable(record.base_path)


def _base_without_gluon() -> list[tuple[str, ...]]:
    rows = _base().to_pyarrow_table(columns=list(COLUMNS)).to_pylist()
    return sorted(_canonical(row) for row in rows)


def _change(engine: sa.Engine, step: int) -> None:
    """Updates in place and across months, deletes, inserts of new keys."""
    with engine.begin() as db:
        db.execute(sa.text("UPDATE sales SET amount = amount + :s WHERE id % 4 = 0"), {"s": step})
        db.execute(
            sa.text("UPDATE sales SET sold_on = '2024-03-15', note = :n WHERE id % 5 = :m"),
            {"n": f"moved in step {step}", "m": step % 5},
        )
        db.execute(sa.text("DELETE FROM sales WHERE id % 6 = :m"), {"m": step})
        db.execute(
            sa.text("INSERT INTO sales VALUES ('west', :i, '2024-02-02', :a, NULL)"),
            {"i": 100 + step, "a": step},
        )


def _offload(run_cli: RunCli, *flags: str) -> str:
    result = run_cli("offload", "-t", "main.sales", "-x", *flags)
    assert result.exit_code == 0, result.stderr
    return str(result.stdout)


@pytest.mark.parametrize("merge_mode", ["DEFERRED", "IMMEDIATE"])
def test_a_partitioned_table_with_a_composite_key_through_a_sail_cluster(
    source: sa.Engine, run_cli: RunCli, merge_mode: str
) -> None:
    _offload(run_cli, "--partition-columns=sold_on", "--partition-granularity=M")
    assert _through_gluon() == _source_rows(source)
    _offload(
        run_cli,
        "--incremental-updates-enabled",
        "--incremental-extraction-method=CHANGELOG",
        "--incremental-key-columns=region,id",
        f"--incremental-merge-mode={merge_mode}",
    )
    methods = list(COMPACTIONS) if merge_mode == "DEFERRED" else ["IN_PLACE"]
    for step, method in enumerate(methods, start=1):
        _change(source, step)
        _offload(run_cli, "--incremental-run-extraction")
        assert _through_gluon() == _source_rows(source), f"after extraction {step}"
        finished = _offload(
            run_cli,
            "--incremental-run-compaction",
            "--incremental-wait-time=0",
            *([COMPACTIONS[method]] if merge_mode == "DEFERRED" else []),
        )
        assert "complete" in finished
        assert _through_gluon() == _source_rows(source), f"after the {method} compaction"
        assert _base_without_gluon() == _source_rows(source), f"base after {method}"
    base = _base().to_pyarrow_table(columns=["sold_on", "gl_part_sold_on"])
    months = {(str(d)[:7], m) for d, m in zip(*base.to_pydict().values(), strict=True)}
    assert months == {("2024-01", "2024-01"), ("2024-02", "2024-02"), ("2024-03", "2024-03")}


def test_partition_expressions_give_the_values_substring_gave(offload_home: Path) -> None:
    """On the embedded engine: the expressions that travel to a cluster's workers compute
    what the earlier ``substring`` ones did, on edge values (a newline, other scripts,
    characters outside the BMP, NULL, the first and last years)."""
    with open_session(load_settings()) as session:
        rows = session.sql(
            r"""SELECT
          regexp_extract(s, '(?s)^.{0,3}', 0) <=> substring(s, 1, 3) AS text_same,
          date_format(CAST(d AS DATE), 'yyyy') <=> substring(CAST(d AS STRING), 1, 4) AS y,
          date_format(CAST(d AS DATE), 'yyyy-MM') <=> substring(CAST(d AS STRING), 1, 7) AS m,
          date_format(CAST(d AS DATE), 'yyyy-MM-dd') <=> CAST(d AS STRING) AS d
        FROM VALUES ('a\nbcd', DATE '0001-01-01'), ('日本語テキスト', DATE '9999-12-31'),
          (NULL, NULL), ('', DATE '1970-01-01'), ('😀x😀y', DATE '2024-02-29') AS t(s, d)"""
        ).collect()
    assert len(rows) == 5 and all(all(row) for row in rows), rows
