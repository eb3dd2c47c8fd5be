"""Partially offloaded tables: offload older data in steps, never a row twice.

PostgreSQL with declarative RANGE partitions (partition-based offload) and
SQLite (predicate-based offload), real Sail and Delta.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.cli import error_lines
from support.incremental import RunCli, lake_rows

from gluon.config import load_settings
from gluon.lake.storage import delta_version
from gluon.repo import Repository


def _sales_pg(url: str) -> sa.Engine:
    engine = sa.create_engine(url)
    with engine.begin() as db:
        db.execute(sa.text("CREATE SCHEMA sh"))
        db.execute(
            sa.text(
                "CREATE TABLE sh.sales (sale_id INTEGER, sold_on DATE NOT NULL, "
                "amount NUMERIC(10,2),"
                " PRIMARY KEY (sale_id, sold_on)) PARTITION BY RANGE (sold_on)"
            )
        )
        for month in range(1, 7):
            start, end = dt.date(2017, month, 1), dt.date(2017, month + 1, 1)
            db.execute(
                sa.text(
                    f"CREATE TABLE sh.sales_2017_{month:02d} PARTITION OF sh.sales "
                    f"FOR VALUES FROM ('{start}') TO ('{end}')"
                )
            )
        db.execute(
            sa.text(
                "INSERT INTO sh.sales SELECT g, DATE '2017-01-01' + (g % 180), g * 1.25 "
                "FROM generate_series(1, 600) g"
            )
        )
    return engine


def lake_ids(table: str) -> list[int]:
    return sorted(int(str(r["sale_id"])) for r in lake_rows(f"SELECT sale_id FROM {table}"))


def source_ids(engine: sa.Engine, where: str) -> list[int]:
    with engine.connect() as db:
        return sorted(
            r[0] for r in db.execute(sa.text(f"SELECT sale_id FROM sh.sales WHERE {where}"))
        )


def test_partition_based_offload_in_steps(
    pg_url: str, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = _sales_pg(pg_url)
    monkeypatch.setenv("GLUON_SOURCE_URL", pg_url)
    first = run_cli("offload", "-t", "sh.sales", "-x", "--older-than-date=2017-03-01")
    assert first.exit_code == 0, first.stderr
    assert lake_ids("sh.sales") == source_ids(engine, "sold_on < DATE '2017-03-01'")
    # Not above the last boundary: refused, nothing changes.
    path = Repository(load_settings().repo_url).get_table("SH.SALES").base_path  # type: ignore[union-attr]
    version = delta_version(path)
    again = run_cli("offload", "-t", "sh.sales", "-x", "--older-than-date=2017-02-01")
    assert again.exit_code == 1 and "not above the last boundary" in again.stderr
    assert len(error_lines(again)) == 1 and delta_version(path) == version
    # The next step appends only the new range.
    second = run_cli("offload", "-t", "sh.sales", "-x", "--less-than-value=2017-04-01")
    assert second.exit_code == 0, second.stderr
    assert lake_ids("sh.sales") == source_ids(engine, "sold_on < DATE '2017-04-01'")
    # Named partitions: April is fine, March is already in the lake.
    overlap = run_cli("offload", "-t", "sh.sales", "-x", "--partition-names=sales_2017_03")
    assert overlap.exit_code == 1 and "overlap" in overlap.stderr, overlap.stderr
    named = run_cli("offload", "-t", "sh.sales", "-x", "--partition-names=sales_2017_04")
    assert named.exit_code == 0, named.stderr
    assert lake_ids("sh.sales") == source_ids(engine, "sold_on < DATE '2017-05-01'")
    # Older data dropped from the source stays in the lake.
    with engine.begin() as db:
        db.execute(sa.text("DROP TABLE sh.sales_2017_01"))
    assert len(lake_ids("sh.sales")) == len(
        source_ids(engine, "sold_on < DATE '2017-05-01'")
    ) + len([d for d in range(1, 601) if (d % 180) < 31])
    record = Repository(load_settings().repo_url).get_table("SH.SALES")
    assert record is not None and record.offload_type == "INCREMENTAL"


def test_method_rules_per_offload_type(
    pg_url: str, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    _sales_pg(pg_url)
    monkeypatch.setenv("GLUON_SOURCE_URL", pg_url)
    assert run_cli("offload", "-t", "sh.sales", "-x", "--older-than-date=2017-03-01").exit_code == 0
    for method in ("CHANGELOG", "UPDATABLE_CHANGELOG", "CHANGELOG_INSERT"):
        refused = run_cli(
            "offload",
            "-t",
            "sh.sales",
            "-x",
            "--incremental-updates-enabled",
            f"--incremental-extraction-method={method}",
        )
        assert refused.exit_code == 1, method
        assert f"{method} does not support offload type INCREMENTAL (90/10)" in refused.stderr
        assert Repository(load_settings().repo_url).incremental.get_state("SH.SALES") is None
    allowed = run_cli(
        "offload",
        "-t",
        "sh.sales",
        "-x",
        "--incremental-updates-enabled",
        "--incremental-extraction-method=UPDATABLE",
    )
    assert allowed.exit_code == 0, allowed.stderr


def _sqlite_orders(path: Path) -> sa.Engine:
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.begin() as db:
        db.execute(
            sa.text(
                "CREATE TABLE orders (id INTEGER PRIMARY KEY, region TEXT, placed TIMESTAMP, "
                "total NUMERIC(10,2))"
            )
        )
        for i in range(1, 201):
            db.execute(
                sa.text("INSERT INTO orders VALUES (:i, :r, :p, :t)"),
                {
                    "i": i,
                    "r": ["EU", "US", "APAC"][i % 3],
                    "p": dt.datetime(2020, 1, 1) + dt.timedelta(days=i),
                    "t": f"{i}.50",
                },
            )
    return engine


def test_predicate_based_offload_in_steps(
    tmp_path: Path, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = _sqlite_orders(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", str(engine.url))
    steps = [
        'column(placed) < datetime(2020-03-01 00:00:00) and column(region) = string("EU")',
        'column(placed) < datetime(2020-03-01 00:00:00) and column(region) != string("EU")',
        "column(placed) >= datetime(2020-03-01 00:00:00) and "
        "column(placed) < datetime(2020-05-01 00:00:00)",
    ]
    for predicate in steps:
        result = run_cli("offload", "-t", "main.orders", "-x", f"--offload-predicate={predicate}")
        assert result.exit_code == 0, result.stderr
    with engine.connect() as db:
        expected = sorted(
            r[0] for r in db.execute(sa.text("SELECT id FROM orders WHERE placed < '2020-05-01'"))
        )
    assert sorted(int(str(r["id"])) for r in lake_rows("SELECT id FROM main.orders")) == expected
    overlapping = run_cli(
        "offload", "-t", "main.orders", "-x", "--offload-predicate=column(id) = numeric(5)"
    )
    assert overlapping.exit_code == 1 and "overlap" in overlapping.stderr
    # Rows dropped from the source: the lake still catches a repeat (the lake check).
    with engine.begin() as db:
        db.execute(sa.text("DELETE FROM orders WHERE placed < '2020-03-01'"))
        db.execute(sa.text("INSERT INTO orders VALUES (1000, 'EU', '2020-01-15', 1)"))
    repeat = run_cli(
        "offload",
        "-t",
        "main.orders",
        "-x",
        "--offload-predicate=column(placed) < datetime(2020-02-01 00:00:00)",
    )
    assert repeat.exit_code == 1 and "already" in repeat.stderr, repeat.stderr


@pytest.mark.parametrize("partitioned", [False, True], ids=["unpartitioned", "partitioned"])
def test_an_increment_keeps_rows_its_predicate_is_null_for(
    partitioned: bool,
    tmp_path: Path,
    offload_home: Path,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An increment replaces the rows its predicate is TRUE for, never those it is NULL for.

    Sail's replaceWhere dropped the rows of a rewritten file whose predicate was NULL (found
    by the model test: a NULL-key row vanished when the next increment was offloaded)."""
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'app.db'}")
    with engine.begin() as db:
        db.execute(sa.text("CREATE TABLE items (id INTEGER UNIQUE, name TEXT)"))
        db.execute(sa.text("INSERT INTO items VALUES (NULL, 'no key'), (1, 'a'), (2, 'b')"))
        db.execute(sa.text("INSERT INTO items VALUES (1000, 'later'), (1001, 'later')"))
    monkeypatch.setenv("GLUON_SOURCE_URL", str(engine.url))
    parts = ("--partition-columns=id", "--partition-granularity=10") if partitioned else ()
    first = run_cli(
        "offload",
        "-t",
        "main.items",
        "-x",
        "--offload-predicate=column(id) < numeric(1000) or column(id) is null",
        *parts,
    )
    assert first.exit_code == 0, first.stderr
    increment = run_cli(
        "offload", "-t", "main.items", "-x", "--offload-predicate=column(id) >= numeric(1000)"
    )
    assert increment.exit_code == 0, increment.stderr
    shown = {
        (None if r["id"] is None else int(str(r["id"])), r["name"])
        for r in lake_rows("SELECT id, name FROM main.items")
    }
    assert shown == {(None, "no key"), (1, "a"), (2, "b"), (1000, "later"), (1001, "later")}


@pytest.mark.parametrize(
    "predicate, message",
    [
        ("placed < 2020", "cannot read"),
        ("column(nope) = numeric(1)", "no column nope"),
        ("column(id) = numeric(x1)", "is not a number"),
        ("column(id) = numeric(1) and", "expected column(NAME)"),
        ("column(id) = numeric(1); drop table orders", "cannot read"),
    ],
)
def test_malformed_predicates_change_nothing(
    predicate: str,
    message: str,
    tmp_path: Path,
    offload_home: Path,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    engine = _sqlite_orders(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", str(engine.url))
    result = run_cli("offload", "-t", "main.orders", "-x", f"--offload-predicate={predicate}")
    assert result.exit_code == 2, result.stderr
    assert len(error_lines(result)) == 1 and message in result.stderr
    assert Repository(load_settings().repo_url).get_table("MAIN.ORDERS") is None
    assert not (offload_home / "lake").exists() or not any(
        (offload_home / "lake").rglob("_delta_log")
    )


def test_changes_to_rows_not_yet_offloaded_are_detected(
    pg_url: str, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The spec's warning, as a check: captured changes must not precede their offload."""
    engine = _sales_pg(pg_url)
    monkeypatch.setenv("GLUON_SOURCE_URL", pg_url)
    assert run_cli("offload", "-t", "sh.sales", "-x", "--older-than-date=2017-02-01").exit_code == 0
    enabled = run_cli(
        "offload",
        "-t",
        "sh.sales",
        "-x",
        "--incremental-updates-enabled",
        "--incremental-extraction-method=UPDATABLE",
    )
    assert enabled.exit_code == 0, enabled.stderr
    with engine.begin() as db:  # a patch of a February row, which is not offloaded yet
        db.execute(sa.text("UPDATE sh_h.sales_uv SET amount = 0 WHERE sold_on = DATE '2017-02-10'"))
    assert run_cli("offload", "-t", "sh.sales", "-x", "--incremental-run-extraction").exit_code == 0
    refused = run_cli("offload", "-t", "sh.sales", "-x", "--older-than-date=2017-03-01")
    assert refused.exit_code == 1
    assert "captured changes touch rows" in refused.stderr and len(error_lines(refused)) == 1


def test_full_100_10_allows_every_method(
    pg_url: str, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    _sales_pg(pg_url)
    monkeypatch.setenv("GLUON_SOURCE_URL", pg_url)
    first = run_cli(
        "offload", "-t", "sh.sales", "-x", "--offload-type=FULL", "--older-than-date=2017-03-01"
    )
    assert first.exit_code == 0, first.stderr
    record = Repository(load_settings().repo_url).get_table("SH.SALES")
    assert record is not None and record.offload_type == "FULL_100_10"
    enabled = run_cli(
        "offload",
        "-t",
        "sh.sales",
        "-x",
        "--incremental-updates-enabled",
        "--incremental-extraction-method=CHANGELOG",
    )
    assert enabled.exit_code == 0, enabled.stderr
    wrong_type = run_cli(
        "offload",
        "-t",
        "sh.sales",
        "-x",
        "--offload-type=INCREMENTAL",
        "--older-than-date=2017-04-01",
    )
    assert wrong_type.exit_code == 1 and "keep using it" in wrong_type.stderr
