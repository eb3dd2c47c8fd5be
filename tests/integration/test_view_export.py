"""``gluon views``: the merged latest state exported for engines other than gluon's sessions
(issue 28 deliverable 2).

The exported SELECTs run in DataFusion (deltalake's ``QueryBuilder``) and in a plain Spark
session that registers nothing (the embedded engine, as a Spark user would run the
``spark`` export), with updates and deletes pending, and must equal the source value for
value. The command prints one script; bad input is one line and exit code 2.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from support.incremental import RunCli, enable, extract, sqlite_source, workload_for
from support.workload import Row, Workload, canonical

from gluon.config import load_settings
from gluon.lake.session import open_session
from gluon.read.export import exported_view
from gluon.repo import Repository


def _source_rows(workload: Workload) -> dict[int, Row]:
    return workload.source_rows()


def _by_key(rows: list[dict[str, object]]) -> dict[int, Row]:
    canonical_rows = [canonical(row) for row in rows]
    assert len(canonical_rows) == len({row[0] for row in canonical_rows}), "a key shown twice"
    return {row[0]: row for row in canonical_rows}


@pytest.fixture
def pending(tmp_path: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch) -> Workload:
    """A DEFERRED table with updates, deletes and inserts extracted and not compacted."""
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = workload_for(source, "CHANGELOG", 2828)
    workload.create(40)
    enable(run_cli, source, "CHANGELOG")
    workload.round(25)
    extract(run_cli, source)
    workload.round(10)
    extract(run_cli, source)
    return workload


@pytest.mark.usefixtures("offload_home")
def test_the_exported_views_equal_the_source_in_datafusion_and_a_plain_spark_session(
    pending: Workload,
) -> None:
    from deltalake import DeltaTable, QueryBuilder

    settings = load_settings()
    repo = Repository(settings.repo_url)
    record = repo.get_table("MAIN.ITEMS")
    assert record is not None
    expected = _source_rows(pending)
    assert expected == pending.expected  # the workload's model agrees with the source

    datafusion = exported_view(repo, record, "datafusion")
    assert set(datafusion.relations) == {"main.items_data", "main_load.items_changes"}
    builder = QueryBuilder()
    for name, folder in datafusion.relations.items():
        builder.register(name.replace(".", "__"), DeltaTable(folder))
    batches = pa.table(builder.execute(datafusion.select).read_all())
    assert _by_key(batches.to_pylist()) == expected

    spark = exported_view(repo, record, "spark")
    with open_session(settings) as session:  # registers nothing: the folders only
        rows = session.spark.sql(spark.select).toArrow().to_pylist()
    assert _by_key(rows) == expected


@pytest.mark.usefixtures("offload_home")
def test_the_command_prints_every_dialect_and_refuses_bad_input_in_one_line(
    pending: Workload, run_cli: RunCli
) -> None:
    for dialect, relation in (
        ("spark", "delta.`"),
        ("duckdb", "DELTA_SCAN("),
        ("trino", "delta.main_load.items_changes"),
        ("datafusion", '"main_load__items_changes"'),
    ):
        printed = run_cli("gluon", "views", "-t", "main.items", "--dialect", dialect)
        assert printed.exit_code == 0, printed.stderr
        assert "CREATE OR REPLACE VIEW" in printed.stdout
        assert ("`main`.`items`" if dialect == "spark" else '"main"."items"') in printed.stdout
        assert relation in printed.stdout, printed.stdout
        assert "<=>" not in printed.stdout or dialect == "spark"

    every = run_cli("gluon", "views", "--all", "--dialect", "trino")
    assert every.exit_code == 0, every.stderr
    assert every.stdout.count("CREATE OR REPLACE VIEW") == 1

    for args, words in (
        (("--dialect", "spark"), "give -t SCHEMA.TABLE or --all"),
        (("-t", "main.items", "--dialect", "oracle"), "unknown --dialect 'oracle'"),
        (("-t", "main.nothing"), "MAIN.NOTHING is not offloaded"),
    ):
        refused = run_cli("gluon", "views", *args)
        assert refused.exit_code == 2, refused.stdout
        lines = [line for line in refused.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and words in lines[0], refused.stderr
