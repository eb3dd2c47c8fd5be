"""Source schema changes reach the lake or are refused (issue 12, reproduction 5, lake side).

Added columns and widened types are carried at the next extraction: the user
view then equals the source row for row, the added column's values included.
Dropped columns and types the lake cannot widen to stop the extraction in one
line and change nothing. Real PostgreSQL and SQLite sources, the real embedded
Sail engine and Delta tables.
"""

from __future__ import annotations

import decimal
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from support.cli import error_lines
from support.incremental import (
    SEED,
    Source,
    enable,
    extract,
    lake_rows,
    lake_state,
    postgres_source,
    run_offload_process,
    sqlite_source,
    workload_for,
)
from support.tables import status_json, status_text
from support.workload import Workload
from typer.testing import Result

from gluon.config import load_settings
from gluon.faults import FAULT_EXIT_CODE
from gluon.repo import Repository

SCHEMA_CODES = {"schema_changed", "schema_refused"}


def _value(value: Any) -> Any:
    if isinstance(value, float | decimal.Decimal):
        return str(decimal.Decimal(repr(value) if isinstance(value, float) else value).normalize())
    if isinstance(value, str) and value[:4].isdigit() and value[4:5] == "-":
        return value.replace(" ", "T")  # SQLite timestamps come back as text
    if hasattr(value, "isoformat"):  # a date has no time zone to drop
        return (value.replace(tzinfo=None) if hasattr(value, "tzinfo") else value).isoformat()
    return value


def _rows(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    normalised = [{key.lower(): _value(v) for key, v in row.items()} for row in rows]
    return sorted((tuple(sorted(row.items())) for row in normalised), key=repr)


def _source_rows(source: Source) -> list[tuple[Any, ...]]:
    with source.engine.connect() as db:
        result = db.execute(sa.text(f"SELECT * FROM {source.table}"))
        return _rows([dict(row._mapping) for row in result])


def _lake_view(source: Source) -> list[tuple[Any, ...]]:
    return _rows(lake_rows(f"SELECT * FROM {source.schema}.items"))


def _enabled(
    source: Source,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
    method: str = "CHANGELOG",
) -> Workload:
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = workload_for(source, method, SEED)
    workload.create()
    enable(run_cli, source, method)
    workload.round(8)
    extract(run_cli, source)
    assert lake_state(source.schema) == workload.expected
    return workload


def _run(source: Source, *statements: str) -> None:
    with source.engine.begin() as db:
        for statement in statements:
            db.execute(sa.text(statement))


def _recorded_columns(source: Source) -> list[str]:
    record = Repository(load_settings().repo_url).get_table(source.table.upper())
    assert record is not None
    return [column.name.lower() for column in record.columns]


def test_added_column_with_a_default_reaches_every_lake_row(
    source: Source,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _enabled(source, run_cli, monkeypatch, "CHANGELOG")
    table = source.table
    _run(
        source,
        f"ALTER TABLE {table} ADD COLUMN extra VARCHAR(20) DEFAULT 'preset'",
        f"UPDATE {table} SET extra = 'set before' WHERE id % 3 = 0",
    )
    extract(run_cli, source)
    assert "extra" in _recorded_columns(source)
    assert _lake_view(source) == _source_rows(source)

    _run(
        source,
        f"INSERT INTO {table} (id, name, extra) VALUES (100001, 'new', 'after')",
        f"UPDATE {table} SET extra = 'changed' WHERE id % 4 = 1",
        f"UPDATE {table} SET name = 'renamed' WHERE id % 5 = 2",
        f"DELETE FROM {table} WHERE id % 7 = 3",
    )
    extract(run_cli, source)
    assert _lake_view(source) == _source_rows(source)


def test_added_column_keeps_the_patches_made_through_the_view(
    source: Source,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """UPDATABLE_CHANGELOG: the table's rows are not recorded again after ADD COLUMN, since
    their images would undo the patches (found by the model test: a key changed through the
    view came back). Rows unchanged since the column was carried show it as NULL."""
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    table = source.table
    _run(
        source,
        f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, name VARCHAR(20))",
        f"INSERT INTO {table} VALUES (1, 'a'), (2, 'b'), (3, 'c')",
    )
    enable(run_cli, source, "UPDATABLE_CHANGELOG")
    state = Repository(load_settings().repo_url).incremental.get_state(table.upper())
    assert state is not None
    view = next(o for o in state.source_objects if o.kind == "updatable_view")
    view_name = view.name if source.dialect == "sqlite" else f"{view.schema}.{view.name}"
    _run(source, f"ALTER TABLE {table} ADD COLUMN extra VARCHAR(20) DEFAULT 'preset'")
    _run(
        source,
        f"UPDATE {view_name} SET id = 100 WHERE id = 1",
        f"UPDATE {view_name} SET name = 'patched' WHERE id = 2",
    )
    extract(run_cli, source)  # carries the column
    _run(source, f"UPDATE {table} SET name = 'C', extra = 'set' WHERE id = 3")
    extract(run_cli, source)
    shown = {dict(row)["id"]: dict(row) for row in _lake_view(source)}
    assert sorted(shown) == [2, 3, 100]
    assert (shown[2]["name"], shown[2]["extra"]) == ("patched", None)
    assert (shown[3]["name"], shown[3]["extra"]) == ("C", "set")


def test_added_column_on_a_partially_offloaded_table_records_only_offloaded_rows(
    source: Source,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Rows not offloaded yet stay out of the recorded images: they reach the lake with
    their own increment, which is not refused as touched by captured changes (found while
    writing the model test's add-column rule)."""
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    table = source.table
    _run(
        source,
        f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, name VARCHAR(20))",
        f"INSERT INTO {table} VALUES (1, 'a'), (2, 'b'), (1000, 'later'), (1001, 'later')",
    )
    first = run_cli(
        "offload",
        "-t",
        table,
        "-x",
        "--offload-type=FULL",
        "--offload-predicate=column(id) < numeric(1000)",
    )
    assert first.exit_code == 0, first.stderr
    enable(run_cli, source, "CHANGELOG")
    _run(source, f"ALTER TABLE {table} ADD COLUMN extra VARCHAR(20) DEFAULT 'preset'")
    extract(run_cli, source)
    shown = _lake_view(source)
    assert [dict(row)["id"] for row in shown] == [1, 2]
    assert all(dict(row)["extra"] == "preset" for row in shown)

    later = run_cli("offload", "-t", table, "-x", "--offload-predicate=column(id) >= numeric(1000)")
    assert later.exit_code == 0, later.stderr
    assert _lake_view(source) == _source_rows(source)


def test_widened_types_reach_the_lake(
    pg_url: str,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """PostgreSQL: varchar longer, int -> bigint (the key), numeric with more digits.

    (SQLite cannot change a column's type.)
    """
    source = postgres_source(pg_url)
    _enabled(source, run_cli, monkeypatch)
    table = source.table
    _run(
        source,
        f"ALTER TABLE {table} ALTER COLUMN name TYPE VARCHAR(80)",
        f"ALTER TABLE {table} ALTER COLUMN id TYPE BIGINT",
        f"ALTER TABLE {table} ALTER COLUMN amount TYPE NUMERIC(20,2)",
    )
    extract(run_cli, source)
    assert _lake_view(source) == _source_rows(source)
    # The changelog keeps its wide types: the application's declared ones would narrow it.
    with source.engine.connect() as db:
        logged: dict[str, str] = dict(
            db.execute(
                sa.text(
                    "SELECT a.attname, format_type(a.atttypid, a.atttypmod)"
                    " FROM pg_catalog.pg_attribute a"
                    " JOIN pg_catalog.pg_class c ON c.oid = a.attrelid"
                    " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
                    " WHERE n.nspname = 'app_h' AND c.relname = 'items_log'"
                    " AND a.attname IN ('id', 'name', 'amount')"
                )
            ).all()
        )
    assert logged == {"id": "bigint", "name": "text", "amount": "numeric"}

    _run(
        source,
        f"INSERT INTO {table} (id, name, amount) "
        f"VALUES (3000000000, '{'w' * 70}', 123456789012345.67)",
        f"UPDATE {table} SET amount = 99999999999999.99 WHERE id % 3 = 0",
    )
    extract(run_cli, source)
    assert _lake_view(source) == _source_rows(source)
    with source.engine.connect() as db:
        assert db.execute(sa.text(f"SELECT COUNT(*) FROM {table}")).scalar_one() > 1


def _drop_name_column(source: Source) -> None:
    if source.dialect == "postgresql":
        _run(source, f"ALTER TABLE {source.table} DROP COLUMN name")
        return
    # SQLite refuses DROP COLUMN while a trigger names it: a DBA rebuilds the table instead.
    _run(
        source,
        "CREATE TABLE main.items_new (id INTEGER PRIMARY KEY, amount NUMERIC(12,2), "
        "updated TIMESTAMP)",
        "INSERT INTO main.items_new SELECT id, amount, updated FROM main.items",
        "DROP TABLE main.items",
        "ALTER TABLE main.items_new RENAME TO items",
    )


def test_dropped_column_is_refused(
    source: Source,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _enabled(source, run_cli, monkeypatch)
    before = _lake_view(source)
    _drop_name_column(source)

    result = run_cli("offload", "-t", source.table, "-x", "--incremental-run-extraction")

    assert result.exit_code == 1, result.stdout
    lines = error_lines(result)
    assert len(lines) == 1 and "column name was dropped" in lines[0], lines
    assert "Source schema changes" in lines[0]
    assert _lake_view(source) == before
    assert "name" in _recorded_columns(source)


def test_changed_type_is_refused(
    pg_url: str,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """numeric(12,2) -> integer loses the fraction: the lake cannot follow."""
    source = postgres_source(pg_url)
    _enabled(source, run_cli, monkeypatch)
    before = _lake_view(source)
    _run(source, f"ALTER TABLE {source.table} ALTER COLUMN amount TYPE INTEGER")

    result = run_cli("offload", "-t", source.table, "-x", "--incremental-run-extraction")

    assert result.exit_code == 1, result.stdout
    lines = error_lines(result)
    assert len(lines) == 1 and "amount changed from numeric(12,2) to integer" in lines[0], lines
    assert _lake_view(source) == before


def _report_findings(run_cli: Callable[..., Result], out: Path) -> set[tuple[str, str]]:
    result = run_cli("offload_status_report", "--output-format=json", f"--output-dir={out}")
    assert result.exit_code == 0, result.stderr
    saved = [line for line in result.stdout.splitlines() if line.startswith("Report saved to ")]
    document = json.loads(Path(saved[0].removeprefix("Report saved to ")).read_text())
    return {(finding["code"], finding["message"]) for finding in document["findings"]}


def test_status_and_report_show_schema_changes(
    source: Source,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    _enabled(source, run_cli, monkeypatch)
    table = source.table.upper()
    assert status_json(run_cli, table)["schema_drift"] is None
    assert not {code for code, _ in _report_findings(run_cli, tmp_path)} & SCHEMA_CODES

    _run(source, f"ALTER TABLE {source.table} ADD COLUMN extra INTEGER")
    drift = status_json(run_cli, table)["schema_drift"]
    assert drift["summary"].lower() == "added extra integer" and drift["refused"] is False
    assert re.search(r"Source schema changes:\s+added extra", status_text(run_cli, table), re.I)
    codes = {code for code, _ in _report_findings(run_cli, tmp_path)}
    assert "schema_changed" in codes

    extract(run_cli, source)
    assert status_json(run_cli, table)["schema_drift"] is None

    _drop_name_column(source)
    drift = status_json(run_cli, table)["schema_drift"]
    assert drift["refused"] and "column name was dropped" in drift["summary"]
    assert "schema_refused" in {code for code, _ in _report_findings(run_cli, tmp_path)}


SCHEMA_FAULT_POINTS = (
    "schema.after_capture_objects",
    "schema.after_row_images",
    "schema.after_delta_evolution",
)


def test_crash_while_carrying_a_change_is_completed_by_the_next_run(
    source: Source,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _enabled(source, run_cli, monkeypatch)
    for index, point in enumerate(SCHEMA_FAULT_POINTS):
        _run(
            source,
            f"ALTER TABLE {source.table} ADD COLUMN extra_{index} INTEGER DEFAULT {index + 7}",
            f"UPDATE {source.table} SET extra_{index} = id WHERE id % 2 = 0",
        )
        crashed = run_offload_process(
            "-t", source.table, "-x", "--incremental-run-extraction", env={"GLUON_FAULT": point}
        )
        assert crashed.returncode == FAULT_EXIT_CODE, (point, crashed.stderr)
        _run(source, f"UPDATE {source.table} SET name = 'after {index}' WHERE id % 3 = 0")
        extract(run_cli, source)
        assert _lake_view(source) == _source_rows(source), f"after a crash at {point}"


def test_added_column_waits_for_a_compaction_under_way(
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A compaction rewrites the base with the columns it read at its start: carry after it."""
    source = sqlite_source(tmp_path / "app.db")
    _enabled(source, run_cli, monkeypatch)
    compact = ("offload", "-t", source.table, "-x", "--incremental-run-compaction")
    stopped = run_cli(*compact, "--incremental-wait-time=0", "--incremental-terminate-compaction")
    assert stopped.exit_code == 0 and "stopped at the acknowledgement step" in stopped.stdout
    _run(source, f"ALTER TABLE {source.table} ADD COLUMN extra INTEGER DEFAULT 5")

    extract(run_cli, source)  # acknowledges the diversion; the column waits
    assert "extra" not in _recorded_columns(source)
    finished = run_cli(*compact, "--incremental-wait-time=0")
    assert finished.exit_code == 0 and "complete" in finished.stdout, finished.stderr

    extract(run_cli, source)
    assert "extra" in _recorded_columns(source)
    assert _lake_view(source) == _source_rows(source)


@pytest.mark.parametrize("slot", ["table", "database"])
def test_added_column_with_a_default_reaches_every_lake_row_under_pg_logical(
    pg_url: str,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
    slot: str,
) -> None:
    """PG_LOGICAL records no row images: rows unchanged since a column was added with a
    default must still show the default in the lake, as they do in the source."""
    source = postgres_source(pg_url)
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = workload_for(source, "PG_LOGICAL", SEED)
    workload.create()
    enable(run_cli, source, "PG_LOGICAL", f"--incremental-pg-logical-slot={slot}")
    workload.round(8)
    extract(run_cli, source)
    table = source.table
    _run(source, f"ALTER TABLE {table} ADD COLUMN extra VARCHAR(20) DEFAULT 'preset'")
    _run(source, f"UPDATE {table} SET extra = 'set after' WHERE id % 3 = 0")
    extract(run_cli, source)
    assert _lake_view(source) == _source_rows(source)


def _pg_logical_table(
    pg_url: str, run_cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch, *options: str
) -> Source:
    source = postgres_source(pg_url)
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = workload_for(source, "PG_LOGICAL", SEED)
    workload.create()
    enable(run_cli, source, "PG_LOGICAL", *options)
    workload.round(8)
    extract(run_cli, source)
    return source


@pytest.mark.parametrize(
    ("slot", "merge_mode"),
    [
        ("table", "DEFERRED"),
        ("database", "DEFERRED"),
        ("table", "IMMEDIATE"),
        ("database", "IMMEDIATE"),
    ],
)
def test_changes_on_both_sides_of_an_added_default_ship_in_one_extraction(
    pg_url: str,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
    slot: str,
    merge_mode: str,
) -> None:
    """Changes made before the ADD COLUMN, not shipped yet, are decoded without the column:
    they get the stored default; changes after it keep what they hold, an explicit NULL too."""
    source = _pg_logical_table(
        pg_url,
        run_cli,
        monkeypatch,
        f"--incremental-pg-logical-slot={slot}",
        f"--incremental-merge-mode={merge_mode}",
    )
    table = source.table
    _run(
        source,
        f"UPDATE {table} SET name = 'before' WHERE id % 4 = 1",
        f"INSERT INTO {table} (id, name) VALUES (1001, 'inserted before')",
        f"DELETE FROM {table} WHERE id % 4 = 2",
        # a new key: decoded by the careful reader (old key, new tuple)
        f"UPDATE {table} SET id = id + 5000 WHERE id = (SELECT min(id) FROM {table})",
    )
    _run(
        source,
        f"ALTER TABLE {table} ADD COLUMN extra VARCHAR(20) DEFAULT 'it''s preset', "
        "ADD COLUMN qty INTEGER NOT NULL DEFAULT 7, ADD COLUMN plain INTEGER",
    )
    _run(
        source,
        f"UPDATE {table} SET extra = NULL WHERE id % 4 = 3",
        f"UPDATE {table} SET name = 'after', qty = 8, plain = 1 WHERE id % 4 = 0",
        f"INSERT INTO {table} (id, name) VALUES (1002, 'inserted after')",
        f"INSERT INTO {table} (id, name, extra) VALUES (1003, 'null after', NULL)",
        f"UPDATE {table} SET id = 1004, extra = NULL WHERE id = (SELECT max(id) FROM {table} "
        "WHERE id < 1000)",
    )
    extract(run_cli, source)
    lake = _lake_view(source)
    assert lake == _source_rows(source)
    by_id = {dict(row)["id"]: dict(row) for row in lake}
    assert by_id[1001]["extra"] == "it's preset" and by_id[1001]["qty"] == 7
    assert by_id[1003]["extra"] is None and by_id[1004]["extra"] is None
    assert by_id[1002]["plain"] is None and by_id[1002]["extra"] == "it's preset"
    assert any(id_ > 5000 and row["extra"] == "it's preset" for id_, row in by_id.items())


@pytest.mark.parametrize(
    "point", ["schema.after_delta_evolution", "schema.after_fill_stored_defaults"]
)
def test_crash_while_filling_an_added_default_is_completed_by_the_next_run(
    pg_url: str,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
    point: str,
) -> None:
    """A kill after the base table's evolution or fill: the next run fills again (the
    record still has the old columns), with the same lake as an uninterrupted run."""
    source = _pg_logical_table(pg_url, run_cli, monkeypatch)
    table = source.table
    _run(source, f"UPDATE {table} SET name = 'before' WHERE id % 3 = 1")
    _run(source, f"ALTER TABLE {table} ADD COLUMN extra INTEGER DEFAULT 5")
    _run(source, f"UPDATE {table} SET extra = NULL WHERE id % 3 = 2")
    crashed = run_offload_process(
        "-t", table, "-x", "--incremental-run-extraction", env={"GLUON_FAULT": point}
    )
    assert crashed.returncode == FAULT_EXIT_CODE, crashed.stderr
    assert "extra" not in _recorded_columns(source)
    extract(run_cli, source)
    assert "extra" in _recorded_columns(source)
    assert _lake_view(source) == _source_rows(source)


def test_a_volatile_added_default_is_reported_with_the_way_to_its_values(
    pg_url: str,
    tmp_path: Path,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A volatile default rewrites the table with a value per row, which logical decoding
    does not carry: the extraction, status and the report say so, with the way out."""
    source = _pg_logical_table(pg_url, run_cli, monkeypatch)
    table = source.table
    _run(source, f"ALTER TABLE {table} ADD COLUMN token DOUBLE PRECISION DEFAULT random()")
    carried = run_offload_process("-t", table, "-x", "--incremental-run-extraction")
    hint = "--reset-backend-table"
    assert carried.returncode == 0, carried.stderr
    log_file = re.search(r"(\S+\.log)\s*$", carried.stdout)
    assert log_file, carried.stdout
    logged = Path(log_file.group(1)).read_text()
    assert re.search(r"WARNING .*token was added with a default computed for each row", logged)
    assert hint in logged
    assert re.search(
        r"Source schema changes:.*token was added.*reset-backend-table", status_text(run_cli, table)
    )
    findings = dict(_report_findings(run_cli, tmp_path))
    assert "token" in findings["unfilled_default"] and hint in findings["unfilled_default"]
    extract(run_cli, source)  # carried once: the record keeps the note, nothing to redo
    assert "unfilled_default" in dict(_report_findings(run_cli, tmp_path))


def test_typed_defaults_added_to_a_partitioned_table_reach_every_lake_row(
    pg_url: str,
    offload_home: Path,
    run_cli: Callable[..., Result],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The stored default of each lake type, read from the partitions (a partitioned
    table's own catalog row keeps none), typed as a decoded change's value is."""
    source = postgres_source(pg_url)
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    _run(
        source,
        "CREATE TABLE app.items (id int PRIMARY KEY, name text) PARTITION BY RANGE (id)",
        "CREATE TABLE app.items_low PARTITION OF app.items FOR VALUES FROM (MINVALUE) TO (10)",
        "CREATE TABLE app.items_high PARTITION OF app.items FOR VALUES FROM (10) TO (MAXVALUE)",
        "INSERT INTO app.items SELECT g, 'r' || g FROM generate_series(1, 20) g",
    )
    enable(run_cli, source, "PG_LOGICAL")
    _run(source, "UPDATE app.items SET name = 'before' WHERE id % 5 = 0")
    _run(
        source,
        "ALTER TABLE app.items ADD COLUMN amount numeric(10,2) DEFAULT 12.50, "
        "ADD COLUMN flag boolean DEFAULT true, ADD COLUMN day date DEFAULT '2020-01-02', "
        "ADD COLUMN at timestamp DEFAULT '2020-01-02 03:04:05.000006', "
        "ADD COLUMN raw bytea DEFAULT '\\x00ff', ADD COLUMN ratio double precision DEFAULT 1.5, "
        "ADD COLUMN note text DEFAULT 'it''s {a,b} \"q\" \\ end'",
    )
    _run(source, "UPDATE app.items SET name = 'after' WHERE id % 7 = 0")
    extract(run_cli, source)
    lake = _lake_view(source)
    assert lake == _source_rows(source)
    assert dict(lake[0])["note"] == 'it\'s {a,b} "q" \\ end' and dict(lake[0])["flag"] is True
