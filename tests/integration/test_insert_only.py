"""Insert-only methods (CHANGELOG_INSERT, UPDATABLE_INSERT) never show a key twice.

The delta view of an insert-only method appends every insert, so the lake
shows a key twice as soon as the source lets one in twice. These tests run the
real ``offload`` command against real SQLite and PostgreSQL sources and read
the lake's user view with the embedded engine.
"""

from __future__ import annotations

import datetime as dt
import decimal
import random
import subprocess
from pathlib import Path

import pyarrow as pa
import pytest
import sqlalchemy as sa
from deltalake import DeltaTable, write_deltalake
from support.cli import error_lines
from support.incremental import (
    SEED,
    RunCli,
    Source,
    enable,
    extract,
    lake_rows,
    postgres_source,
    run_offload_process,
    sqlite_source,
)
from support.patching import SalesTable, sales_rows
from typer.testing import Result

from gluon.config import load_settings
from gluon.extract.insert_only import rejected_changes
from gluon.faults import FAULT_EXIT_CODE
from gluon.repo import Repository
from gluon.repo.rejects import DUPLICATE_KEY

INSERT_ONLY = ("CHANGELOG_INSERT", "UPDATABLE_INSERT")


@pytest.fixture(params=["sqlite", "postgresql"])
def source(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    offload_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Source:
    if request.param == "sqlite":
        chosen = sqlite_source(tmp_path / "app.db")
    else:
        chosen = postgres_source(request.getfixturevalue("pg_url"))
    monkeypatch.setenv("GLUON_SOURCE_URL", chosen.url)
    return chosen


def create_events(source: Source, constraint: str = "", *, seq: str = "INTEGER") -> None:
    """``events`` (code, seq, note): no primary key; ``constraint`` is appended to the DDL,
    ``seq`` is the type of the seq column."""
    with source.engine.begin() as db:
        db.execute(
            sa.text(
                f"CREATE TABLE {source.schema}.events (code INTEGER NOT NULL, "
                f"seq {seq}, note VARCHAR(20){constraint})"
            )
        )
        db.execute(
            sa.text(
                f"INSERT INTO {source.schema}.events VALUES (1, 1, 'a'), (2, 1, 'b'), (3, 2, 'c')"
            )
        )


def enable_events(run_cli: RunCli, source: Source, method: str, *extra: str) -> Result:
    return run_cli(
        "offload",
        "-t",
        f"{source.schema}.events",
        "-x",
        "--incremental-updates-enabled",
        f"--incremental-extraction-method={method}",
        *extra,
    )


def source_objects(source: Source) -> set[str]:
    """Names of the tables, views and triggers in the source (to see that nothing was made)."""
    inspector = sa.inspect(source.engine)
    schemas = [source.schema] + ([f"{source.schema}_h"] if source.dialect == "postgresql" else [])
    names: set[str] = set()
    for schema in schemas:
        if schema not in inspector.get_schema_names():
            continue
        names |= set(inspector.get_table_names(schema=schema))
        names |= set(inspector.get_view_names(schema=schema))
    return names


# -- deliverable 1: a key constraint is required --------------------------------------------


@pytest.mark.parametrize("method", INSERT_ONLY)
def test_unique_data_without_a_constraint_is_refused(
    method: str, source: Source, offload_home: Path, run_cli: RunCli
) -> None:
    # The data is unique today, but nothing stops a second insert of code 1 tomorrow.
    create_events(source)
    result = enable_events(run_cli, source, method, "--incremental-key-columns=code")
    lines = error_lines(result)
    assert len(lines) == 1, result.stderr
    assert "needs a primary key or unique constraint on exactly (code)" in lines[0]
    assert "--incremental-no-verify-primary-key" in lines[0]
    assert "Traceback" not in result.stderr
    assert result.exit_code == 1
    assert source_objects(source) == {"events"}
    assert (
        Repository(load_settings().repo_url).incremental.get_state(
            f"{source.schema}.events".upper()
        )
        is None
    )
    assert list(offload_home.rglob("_delta_log")) == []


@pytest.mark.parametrize(
    ("constraint", "keys", "accepted"),
    [
        (", UNIQUE (code)", "code", True),
        (", UNIQUE (code, seq)", "code,seq", False),  # seq is nullable: NULL keys repeat
        (", UNIQUE (seq, code)", "code", False),  # not exactly the key columns
        (", PRIMARY KEY (code)", "", True),
    ],
)
def test_a_unique_constraint_on_exactly_the_key_columns_is_accepted(
    constraint: str, keys: str, accepted: bool, source: Source, run_cli: RunCli
) -> None:
    create_events(source, constraint)
    extra = (f"--incremental-key-columns={keys}",) if keys else ()
    result = enable_events(run_cli, source, "CHANGELOG_INSERT", *extra)
    if accepted:
        assert result.exit_code == 0, result.stderr
    else:
        assert result.exit_code == 1
        assert "needs a primary key or unique constraint" in result.stderr


def create_unique_index(source: Source, name: str, where: str = "") -> str:
    """A unique index on events (code); SQLite names the schema on the index, not the table."""
    if source.dialect == "sqlite":
        return f"CREATE UNIQUE INDEX {source.schema}.{name} ON events (code) {where}"
    return f"CREATE UNIQUE INDEX {name} ON {source.schema}.events (code) {where}"


def test_a_unique_index_counts_and_a_partial_one_does_not(source: Source, run_cli: RunCli) -> None:
    create_events(source)
    with source.engine.begin() as db:
        db.execute(sa.text(create_unique_index(source, "events_partial", "WHERE seq > 0")))
    extra = "--incremental-key-columns=code"
    assert enable_events(run_cli, source, "CHANGELOG_INSERT", extra).exit_code == 1
    with source.engine.begin() as db:
        db.execute(sa.text(create_unique_index(source, "events_code")))
    result = enable_events(run_cli, source, "CHANGELOG_INSERT", extra)
    assert result.exit_code == 0, result.stderr


def test_no_verify_accepts_a_table_without_a_constraint(source: Source, run_cli: RunCli) -> None:
    create_events(source)
    result = enable_events(
        run_cli,
        source,
        "CHANGELOG_INSERT",
        "--incremental-key-columns=code",
        "--incremental-no-verify-primary-key",
    )
    assert result.exit_code == 0, result.stderr


def test_no_verify_help_states_the_risk(run_cli: RunCli) -> None:
    result = run_cli("offload", "--help")
    text = " ".join(result.stdout.split())
    assert "a key inserted twice shows twice in the user view" in text


# -- deliverable 2: an insert of a key only the lake holds never shows it twice ---------------


@pytest.fixture
def sales(source: Source) -> SalesTable:
    return SalesTable(source.dialect, source.url, source.schema)


def test_updatable_insert_of_a_key_only_the_lake_holds_is_kept_out(
    sales: SalesTable, run_cli: RunCli
) -> None:
    rows = sales_rows(random.Random(SEED), 30)
    sales.create(rows)
    sales.enable(run_cli, "UPDATABLE_INSERT")
    by_id = {row[0]: row for row in rows}
    dropped = sorted(key for key, row in by_id.items() if row[1].month == 2)
    assert dropped, "the seed put no rows in February"
    sales.dropped_from_source(dropped)  # offloaded data no longer in the source, not staged
    lake_only = by_id[dropped[0]]
    again = (lake_only[0], lake_only[1], "AGAIN", lake_only[3])
    new = (900, dt.date(2017, 2, 20), "EMEA", decimal.Decimal("9.00"))
    # The view cannot see the lake-only key, so its trigger takes the insert.
    sales.insert(sales.view, [again, new])

    result = sales.extract(run_cli)

    assert sales.lake() == {**by_id, new[0]: new}  # each key once; the lake's row kept
    warnings = [line for line in error_lines(result) if "warning" in line]
    assert any(
        "1 inserts were kept out of the lake because it already shows their key" in line
        and f"id={lake_only[0]}" in line
        for line in warnings
    ), result.stderr
    assert sales.changes() == []
    rejected = rejected_changes(Repository(load_settings().repo_url))
    assert rejected.rows(sales.table.upper(), DUPLICATE_KEY) == [
        {
            "id": again[0],
            "sold_on": again[1].isoformat(),
            "region": "AGAIN",
            "amount": str(again[3]),
        }
    ]


# -- deliverable 4: nothing silent ------------------------------------------------------------


def items_table(source: Source) -> None:
    with source.engine.begin() as db:
        db.execute(
            sa.text(
                f"CREATE TABLE {source.table} (id INTEGER PRIMARY KEY, name VARCHAR(40), "
                "amount NUMERIC(12,2), updated TIMESTAMP)"
            )
        )
        for key in range(1, 6):
            db.execute(
                sa.text(f"INSERT INTO {source.table} (id, name) VALUES (:id, :name)"),
                {"id": key, "name": f"n{key}"},
            )


def lake_items(source: Source) -> list[tuple[object, ...]]:
    rows = lake_rows(f"SELECT id, name FROM {source.schema}.items")
    return sorted((int(str(row["id"])), row["name"]) for row in rows)


def test_updates_and_deletes_under_changelog_insert_are_reported(
    source: Source, run_cli: RunCli
) -> None:
    items_table(source)
    enable(run_cli, source, "CHANGELOG_INSERT")
    with source.engine.begin() as db:
        db.execute(sa.text(f"UPDATE {source.table} SET name = 'changed' WHERE id = 2"))
        db.execute(sa.text(f"UPDATE {source.table} SET name = name WHERE id = 4"))  # no change
        db.execute(sa.text(f"DELETE FROM {source.table} WHERE id = 3"))
        db.execute(sa.text(f"INSERT INTO {source.table} (id, name) VALUES (6, 'n6')"))

    result = extract(run_cli, source)

    line = next(line for line in error_lines(result) if "were not captured" in line)
    assert line.startswith(f"offload: warning: {source.table.upper()}: 2 updates/deletes")
    assert "(CHANGELOG_INSERT: 1 updates, 1 deletes; keys id=2; id=3)" in line
    assert "--reset-backend-table" in line and "CHANGELOG" in line
    # The insert is applied; the update and the delete are not (insert-only), but reported.
    assert lake_items(source) == [(1, "n1"), (2, "n2"), (3, "n3"), (4, "n4"), (5, "n5"), (6, "n6")]
    with source.engine.connect() as db:
        log = db.execute(sa.text(f"SELECT COUNT(*) FROM {changelog(source)}")).scalar()
    assert log == 0  # moved to the repository, so disable is not blocked

    # Deleted in the source, inserted again: the lake still shows the old row, never both.
    with source.engine.begin() as db:
        db.execute(sa.text(f"INSERT INTO {source.table} (id, name) VALUES (3, 'again')"))
    result = extract(run_cli, source)
    assert lake_items(source) == [(1, "n1"), (2, "n2"), (3, "n3"), (4, "n4"), (5, "n5"), (6, "n6")]
    text = " ".join(error_lines(result))
    assert "2 updates/deletes on the application table were not captured" in text  # still shown
    assert "1 inserts were kept out of the lake" in text

    # A later no-op extraction still says so.
    assert "were not captured" in extract(run_cli, source).stderr


@pytest.mark.parametrize("method", INSERT_ONLY)
def test_the_view_shows_only_the_inserts_of_the_delta_table(
    method: str,
    tmp_path: Path,
    offload_home: Path,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The insert-only view appends the delta table's inserts (``gl_op = 'I'``), nothing else.

    Extraction screens updates and deletes out before the Delta commit (they are recorded,
    see gluon/extract/insert_only.py), so only a delta table written otherwise (by a gluon from
    before
    the screen) holds them; such rows are written here directly: two uncaptured updates of
    base rows and a delete. A view filtering ``gl_op <> 'D'``
    would show the updated keys twice (issue 26, item 10)."""
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    items_table(source)
    enable(run_cli, source, method)
    state = Repository(load_settings().repo_url).incremental.get_state(source.table.upper())
    assert state is not None
    schema = DeltaTable(state.delta_path).to_pyarrow_table().schema
    empty = dict.fromkeys(schema.names)
    legacy = [
        {**empty, "id": key, "name": name, "gl_op": op, "gl_seq": 1000 + key}
        for key, name, op in [(2, "updated", "U"), (3, "n3", "D"), (4, "again", "U")]
    ]
    for row in legacy:
        row.update(gl_extraction_id=1000, gl_control_partition=state.active_partition)
    write_deltalake(state.delta_path, pa.Table.from_pylist(legacy, schema=schema), mode="append")

    assert lake_items(source) == [(1, "n1"), (2, "n2"), (3, "n3"), (4, "n4"), (5, "n5")]


def test_a_composite_key_given_out_of_table_order_is_matched_column_by_column(
    source: Source, run_cli: RunCli
) -> None:
    """Key columns listed in another order than the table's: the lake check compares each
    key column with itself (it paired the values by the table's order, so a key inserted
    again reached the lake twice)."""
    create_events(source, ", UNIQUE (code, seq)", seq="INTEGER NOT NULL")
    result = enable_events(
        run_cli, source, "CHANGELOG_INSERT", "--incremental-key-columns=seq,code"
    )
    assert result.exit_code == 0, result.stderr
    with source.engine.begin() as db:
        db.execute(sa.text(f"DELETE FROM {source.schema}.events WHERE code = 3"))
        db.execute(sa.text(f"INSERT INTO {source.schema}.events VALUES (3, 2, 'again')"))
    extracted = run_cli(
        "offload", "-t", f"{source.schema}.events", "-x", "--incremental-run-extraction"
    )
    assert extracted.exit_code == 0, extracted.stderr
    assert "1 inserts were kept out of the lake" in extracted.stderr
    rows = lake_rows(f"SELECT code, seq, note FROM {source.schema}.events")
    assert sorted((int(str(r["code"])), int(str(r["seq"])), r["note"]) for r in rows) == [
        (1, 1, "a"),
        (2, 1, "b"),
        (3, 2, "c"),
    ]


def source_object(source: Source, kind: str) -> str:
    state = Repository(load_settings().repo_url).incremental.get_state(source.table.upper())
    assert state is not None
    found = next(o for o in state.source_objects if o.kind == kind)
    return f"{found.schema}.{found.name}"


def changelog(source: Source) -> str:
    return source_object(source, "changelog_table")


def test_status_and_report_list_uncaptured_changes_as_needing_attention(
    source: Source, run_cli: RunCli, offload_home: Path
) -> None:
    items_table(source)
    enable(run_cli, source, "CHANGELOG_INSERT")
    with source.engine.begin() as db:
        db.execute(sa.text(f"DELETE FROM {source.table} WHERE id = 5"))
    extract(run_cli, source)

    status = run_cli("display_incremental_status", "-t", source.table)
    assert status.exit_code == 0, status.stderr
    assert "NEEDS ATTENTION" in status.stdout
    assert "1 updates/deletes on the application table were not captured" in status.stdout
    report = run_cli("offload_status_report", f"--output-dir={offload_home}")
    assert report.exit_code == 0, report.stderr
    text = "\n".join(path.read_text() for path in offload_home.glob("*.txt"))
    assert "Nothing needs attention" not in text
    assert "1 updates/deletes on the application table were not captured" in text


# -- deliverable 3: compacting an insert-only table never shows a key twice ------------------


def compaction_process(source: Source, *flags: str, fault: str) -> subprocess.CompletedProcess[str]:
    """A compaction in a child process, killed (like kill -9) at fault point ``fault``."""
    done = run_offload_process(
        "-t",
        source.table,
        "-x",
        "--incremental-run-compaction",
        "--incremental-wait-time=0",
        *flags,
        env={"GLUON_FAULT": fault},
    )
    assert done.returncode == FAULT_EXIT_CODE, done.stderr
    return done


def compaction_killed_after(
    source: Source, run_cli: RunCli, *flags: str, step: str
) -> subprocess.CompletedProcess[str]:
    """Start a compaction (killed once it requested diversion), let an extraction acknowledge
    it, then resume it in a process killed after ``step``; return the first process."""
    first = compaction_process(source, *flags, fault="compact.after_request_diversion")
    extract(run_cli, source)
    compaction_process(source, *flags, fault=f"compact.after_{step}")
    return first


def inserted_and_extracted(source: Source, run_cli: RunCli, method: str) -> None:
    """Items 1-5 offloaded, 6-10 inserted (through the updatable view if the method has one)."""
    items_table(source)
    enable(run_cli, source, method, "--partition-columns=id", "--partition-granularity=4")
    target = source_object(source, "updatable_view") if "UPDATABLE" in method else source.table
    with source.engine.begin() as db:
        for key in range(6, 11):
            db.execute(
                sa.text(f"INSERT INTO {target} (id, name) VALUES (:id, :name)"),
                {"id": key, "name": f"n{key}"},
            )
    extract(run_cli, source)


EXPECTED_ITEMS = [(key, f"n{key}") for key in range(1, 11)]


@pytest.mark.parametrize("method", INSERT_ONLY)
def test_default_compaction_of_an_insert_only_table_shows_each_key_once(
    method: str, source: Source, run_cli: RunCli
) -> None:
    inserted_and_extracted(source, run_cli, method)
    # Stopped during its wait for running queries: a reader then sees each key once.
    compaction_killed_after(source, run_cli, step="wait_for_queries")
    assert lake_items(source) == EXPECTED_ITEMS
    result = run_cli(
        "offload",
        "-t",
        source.table,
        "-x",
        "--incremental-run-compaction",
        "--incremental-wait-time=0",
    )
    assert result.exit_code == 0, result.stderr
    assert "(FULL) complete" in result.stdout
    assert "twice" not in result.stderr
    assert lake_items(source) == EXPECTED_ITEMS


def test_explicit_in_place_compaction_warns_at_the_start_and_in_the_report(
    source: Source, run_cli: RunCli, offload_home: Path
) -> None:
    inserted_and_extracted(source, run_cli, "CHANGELOG_INSERT")
    done = compaction_killed_after(
        source, run_cli, "--incremental-in-place-compaction", step="compact"
    )
    # Killed before the end: the warning was printed when the run started.
    assert "offload: warning: CHANGELOG_INSERT with in-place compaction" in done.stderr
    report = run_cli("offload_status_report", f"--output-dir={offload_home}")
    assert report.exit_code == 0, report.stderr
    text = "\n".join(path.read_text() for path in offload_home.glob("*.txt"))
    assert "is unfinished: CHANGELOG_INSERT with in-place compaction" in text

    result = run_cli(
        "offload",
        "-t",
        source.table,
        "-x",
        "--incremental-run-compaction",
        "--incremental-wait-time=0",
        "--incremental-in-place-compaction",
    )
    assert result.exit_code == 0, result.stderr
    assert "(IN_PLACE) complete" in result.stdout
    # Once: told when the run starts, not again with the result (issue 30).
    assert result.stderr.count("CHANGELOG_INSERT with in-place compaction") == 1, result.stderr
    assert lake_items(source) == EXPECTED_ITEMS
    for old in offload_home.glob("*.txt"):
        old.unlink()
    run_cli("offload_status_report", f"--output-dir={offload_home}")
    text = "\n".join(path.read_text() for path in offload_home.glob("*.txt"))
    assert "is unfinished" not in text
    assert "Nothing needs attention" in text


@pytest.mark.parametrize(
    "fault",
    [
        "extract.before_delta_commit",
        "extract.after_delta_commit",
        "extract.before_changelog_delete",
        "extract.after_changelog_delete",
    ],
)
def test_an_extraction_killed_at_any_step_records_each_rejection_once(
    fault: str, source: Source, run_cli: RunCli
) -> None:
    items_table(source)
    enable(run_cli, source, "CHANGELOG_INSERT")
    with source.engine.begin() as db:
        db.execute(sa.text(f"DELETE FROM {source.table} WHERE id = 2"))
        db.execute(sa.text(f"INSERT INTO {source.table} (id, name) VALUES (2, 'again')"))
        db.execute(sa.text(f"UPDATE {source.table} SET name = 'changed' WHERE id = 4"))
        db.execute(sa.text(f"INSERT INTO {source.table} (id, name) VALUES (7, 'n7')"))
    died = run_offload_process(
        "-t", source.table, "-x", "--incremental-run-extraction", env={"GLUON_FAULT": fault}
    )
    assert died.returncode == FAULT_EXIT_CODE, died.stderr
    result = extract(run_cli, source)

    assert lake_items(source) == [(1, "n1"), (2, "n2"), (3, "n3"), (4, "n4"), (5, "n5"), (7, "n7")]
    text = " ".join(error_lines(result))
    assert "2 updates/deletes on the application table were not captured" in text
    assert "1 inserts were kept out of the lake" in text
    rejected = rejected_changes(Repository(load_settings().repo_url))
    assert rejected.summary(source.table.upper()).counts == {
        "duplicate_key": 1,
        "uncaptured_delete": 1,
        "uncaptured_update": 1,
    }
    with source.engine.connect() as db:
        assert db.execute(sa.text(f"SELECT COUNT(*) FROM {changelog(source)}")).scalar() == 0


def test_a_reset_offload_clears_what_was_reported(
    tmp_path: Path, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    items_table(source)
    enable(run_cli, source, "CHANGELOG_INSERT")
    with source.engine.begin() as db:
        db.execute(sa.text(f"DELETE FROM {source.table} WHERE id = 5"))
        db.execute(sa.text(f"INSERT INTO {source.table} (id, name) VALUES (6, 'n6')"))
    extract(run_cli, source)
    compact = ("--incremental-run-compaction", "--incremental-wait-time=0")
    for command in (
        (*compact, "--incremental-terminate-compaction"),
        ("--incremental-run-extraction",),  # acknowledges the diversion
        compact,
        ("--incremental-updates-disabled",),
        ("--reset-backend-table",),
    ):
        done = run_cli("offload", "-t", source.table, "-x", *command)
        assert done.exit_code == 0, done.stderr
    # The lake is a fresh copy of the source: nothing is left to report.
    assert lake_items(source) == [(1, "n1"), (2, "n2"), (3, "n3"), (4, "n4"), (6, "n6")]
    status = run_cli("display_incremental_status", "-t", source.table)
    assert "NEEDS ATTENTION" not in status.stdout
    rejected = rejected_changes(Repository(load_settings().repo_url))
    assert rejected.summary(source.table.upper()).total == 0
