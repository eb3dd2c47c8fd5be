"""A change the lake cannot take (issue 26, item 6): extraction names it in one line with the
command that sets just that change aside; setting it aside records it in the repository, where
status, the report and the service's metrics show it, and the other changes ship. Real
PostgreSQL and SQLite sources, the real Sail engine and Delta tables."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from prometheus_client import generate_latest
from support.incremental import (
    RunCli,
    Source,
    lake_rows,
    postgres_source,
    run_offload_process,
    sqlite_source,
)

from gluon.config import load_settings
from gluon.faults import FAULT_EXIT_CODE
from gluon.repo import Repository
from gluon.service.lag import table_lag
from gluon.service.metrics import ServiceMetrics
from gluon.status.changelog_counter import ChangelogCounter

KEY = "APP.EVENTS"
OPTION = "--incremental-set-aside-changes"


@pytest.fixture
def pg(pg_url: str, offload_home: Path, monkeypatch: pytest.MonkeyPatch) -> Source:
    chosen = postgres_source(pg_url)
    monkeypatch.setenv("GLUON_SOURCE_URL", chosen.url)
    return chosen


@pytest.fixture
def lite(tmp_path: Path, offload_home: Path, monkeypatch: pytest.MonkeyPatch) -> Source:
    chosen = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", chosen.url)
    return chosen


def run(source: Source, *statements: str) -> None:
    with source.engine.begin() as db:
        for statement in statements:
            db.execute(sa.text(statement))


def ok(result: Any) -> Any:
    assert result.exit_code == 0, result.stderr
    return result


def one_error_line(result: Any) -> str:
    assert result.exit_code != 0, result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    return str(lines[0])


def extraction(run_cli: RunCli, table: str) -> Any:
    return run_cli("offload", "-t", table, "-x", "--incremental-run-extraction")


def enabled(
    run_cli: RunCli, source: Source, create: str, method: str = "CHANGELOG", *flags: str
) -> str:
    table = f"{source.schema}.events"
    run(source, create.format(table=table))
    ok(
        run_cli(
            "offload",
            "-t",
            table,
            "-x",
            "--incremental-updates-enabled",
            f"--incremental-extraction-method={method}",
            *flags,
        )
    )
    return table


PG_EVENTS = "CREATE TABLE {table} (id INTEGER PRIMARY KEY, at TIMESTAMPTZ, note TEXT)"


def pg_events(run_cli: RunCli, pg: Source) -> str:
    table = enabled(run_cli, pg, PG_EVENTS)
    run(
        pg,
        f"INSERT INTO {table} VALUES (1, '2026-01-01 10:00+00', 'one'), "
        "(2, '2026-01-02 10:00+00', 'two')",
    )
    ok(extraction(run_cli, table))
    return table


def set_aside_command(line: str) -> list[str]:
    """The command the extraction's error line gives."""
    command = line.split("set just these changes aside (they are recorded, not lost): ")[1]
    return command.split(" (docs/")[0].split()


def test_an_infinity_updated_back_is_named_set_aside_and_shown(
    pg: Source, run_cli: RunCli, tmp_path: Path
) -> None:
    table = pg_events(run_cli, pg)
    run(pg, f"UPDATE {table} SET at = 'infinity' WHERE id = 1")
    run(pg, f"UPDATE {table} SET at = '2026-03-01 10:00+00' WHERE id = 1")
    run(pg, f"UPDATE {table} SET note = 'other' WHERE id = 2")
    line = one_error_line(extraction(run_cli, table))
    assert line.startswith(f"offload: error: {KEY}: the lake cannot take 1 waiting change(s): ")
    assert "gl_seq 3 (update of id=1, column at: timestamp infinity" in line
    assert "change gl_seq 4 of the same key follows" in line
    command = set_aside_command(line)
    assert command == ["offload", "-t", "app.events", "-x", f"{OPTION}=3"]

    dry = ok(run_cli(*command[:3], command[4]))
    assert "nothing was changed" in dry.stdout
    assert "record change gl_seq 3 (update of id=1" in dry.stdout
    assert pg.engine.connect().execute(sa.text("SELECT count(*) FROM app_h.events_log")).scalar()

    done = ok(run_cli(*command))
    assert "Set aside 1 change(s) of APP.EVENTS (gl_seq 3)" in done.stdout
    assert "a later change of each key ships with the next extraction" in done.stdout
    ok(extraction(run_cli, table))
    assert lake_rows(f"SELECT id, note FROM {table} ORDER BY id") == [
        {"id": 1, "note": "one"},
        {"id": 2, "note": "other"},
    ]
    assert [str(row["at"])[:10] for row in lake_rows(f"SELECT at FROM {table} ORDER BY id")] == [
        "2026-03-01",
        "2026-01-02",
    ]

    # Never without a trace: status (text and JSON), the report, the metrics.
    text = ok(run_cli("display_incremental_status", "-t", table)).stdout
    assert "CHANGES SET ASIDE" in text
    assert "- gl_seq 3 (U of id=1), column at: timestamp infinity; set aside" in text
    document = json.loads(ok(run_cli("display_incremental_status", "-t", table, "--json")).stdout)
    entry = document["set_aside"]["latest"][0]
    repo = Repository(load_settings().repo_url)
    assert document["set_aside"]["count"] == 1
    assert (entry["gl_seq"], entry["op"], entry["key"], entry["column"]) == (
        3,
        "U",
        {"id": "1"},
        "at",
    )
    assert entry["installation_id"] == repo.installation_id and entry["set_by"]

    out = tmp_path / "reports"
    for fmt in ("text", "json", "csv", "html"):
        report = ok(
            run_cli(
                "offload_status_report",
                "--output-level=detail",
                f"--output-format={fmt}",
                f"--output-dir={out}",
            )
        )
        saved = Path(report.stdout.strip().removeprefix("Report saved to "))
        content = saved.read_text()
        assert "could not take were set aside" in content, fmt
        if fmt == "csv":
            rows = list(csv.DictReader(content.splitlines()))
            assert [row["changes_set_aside"] for row in rows] == ["1"]
        if fmt == "json":
            findings = json.loads(content)["findings"]
            assert [f["code"] for f in findings] == ["changes_set_aside"]

    metrics = ServiceMetrics()
    settings = load_settings()
    record = repo.get_table(KEY)
    assert record is not None
    counter = ChangelogCounter(settings.source_url, settings.source_timeouts)
    metrics.lag(KEY, table_lag(repo, record, counter, record.offloaded_at or entry_time(entry)))
    scraped = generate_latest(metrics.registry).decode()
    assert 'gluon_table_changes_set_aside{table="APP.EVENTS"} 1.0' in scraped


def entry_time(entry: dict[str, Any]) -> Any:
    import datetime as dt

    return dt.datetime.fromisoformat(entry["set_at"])


def test_a_kill_at_any_step_of_setting_aside_loses_and_duplicates_nothing(
    pg: Source, run_cli: RunCli
) -> None:
    table = pg_events(run_cli, pg)
    run(pg, f"UPDATE {table} SET at = '-infinity' WHERE id = 2")  # the last change of its key
    run(pg, f"INSERT INTO {table} VALUES (3, '2026-05-01 00:00+00', 'three')")
    line = one_error_line(extraction(run_cli, table))
    assert "gl_seq 3 (update of id=2, column at: timestamp -infinity)" in line
    command = set_aside_command(line)
    repo = Repository(load_settings().repo_url)

    def waiting() -> list[int]:
        with pg.engine.connect() as db:
            return list(
                db.execute(sa.text("SELECT gl_seq FROM app_h.events_log ORDER BY 1")).scalars()
            )

    def recorded() -> list[int]:
        state = repo.incremental.get_state(KEY)
        assert state is not None and state.enablement_id is not None
        return sorted(repo.set_aside.seqs(KEY, state.enablement_id))

    for point, records, rows in (
        ("repo.before_record_set_aside", [], [3, 4]),
        ("repo.after_record_set_aside", [3], [3, 4]),
        ("set_aside.before_changelog_delete", [3], [3, 4]),
        ("set_aside.after_changelog_delete", [3], [4]),
    ):
        died = run_offload_process(*command[1:], env={"GLUON_FAULT": point})
        assert died.returncode == FAULT_EXIT_CODE, died.stderr
        assert (recorded(), waiting()) == (records, rows), point
    again = ok(run_cli(*command))
    assert "Nothing to do: gl_seq 3 of APP.EVENTS is already set aside" in again.stdout
    assert recorded() == [3] and repo.set_aside.count(KEY) == 1
    ok(extraction(run_cli, table))
    assert lake_rows(f"SELECT id, note FROM {table} ORDER BY id") == [
        {"id": 1, "note": "one"},
        {"id": 2, "note": "two"},
        {"id": 3, "note": "three"},
    ]


def test_only_a_change_the_extraction_refuses_can_be_set_aside(pg: Source, run_cli: RunCli) -> None:
    table = pg_events(run_cli, pg)
    run(pg, f"UPDATE {table} SET note = 'fine' WHERE id = 1")
    fits = one_error_line(run_cli("offload", "-t", table, "-x", f"{OPTION}=3"))
    assert fits.startswith("offload: error: the lake can take change gl_seq 3 of APP.EVENTS")
    missing = one_error_line(run_cli("offload", "-t", table, "-x", f"{OPTION}=99"))
    assert "no change with gl_seq 99 waits in the changelog of APP.EVENTS" in missing
    bad = run_cli("offload", "-t", table, "-x", f"{OPTION}=3,x")
    assert bad.exit_code == 2
    assert one_error_line(bad).startswith(f"offload: error: {OPTION}=3,x: give the gl_seq")
    with pg.engine.connect() as db:
        assert db.execute(sa.text("SELECT count(*) FROM app_h.events_log")).scalar() == 1
    assert Repository(load_settings().repo_url).set_aside.count(KEY) == 0


def test_numeric_nans_are_named_together(pg: Source, run_cli: RunCli) -> None:
    """ADBC's Arrow batches (PostgreSQL): a batch with several unfit changes names them all,
    with one command."""
    table = enabled(
        run_cli, pg, "CREATE TABLE {table} (id INTEGER PRIMARY KEY, amount NUMERIC(10,2))"
    )
    run(pg, f"INSERT INTO {table} VALUES (1, 'NaN'), (2, 2.5), (3, 'NaN')")
    line = one_error_line(extraction(run_cli, table))
    assert "gl_seq 1 (insert of id=1, column amount: decimal NaN)" in line
    assert "gl_seq 3 (insert of id=3, column amount: decimal NaN)" in line
    assert set_aside_command(line)[-1] == f"{OPTION}=1,3"
    done = ok(run_cli(*set_aside_command(line)))
    assert "the lake keeps the previous state of (id=1), (id=3)" in done.stdout
    ok(extraction(run_cli, table))
    assert lake_rows(f"SELECT id FROM {table}") == [{"id": 2}]


def test_sqlite_text_in_an_integer_column_is_named(lite: Source, run_cli: RunCli) -> None:
    """Per-value conversion (SQLite)."""
    table = enabled(run_cli, lite, "CREATE TABLE {table} (id INTEGER PRIMARY KEY, qty INTEGER)")
    run(lite, f"INSERT INTO {table} VALUES (1, 'many'), (2, 5)")
    line = one_error_line(extraction(run_cli, table))
    assert "gl_seq 1 (insert of id=1, column qty: bigint many)" in line
    ok(run_cli(*set_aside_command(line)))
    ok(extraction(run_cli, table))
    assert lake_rows(f"SELECT id, qty FROM {table}") == [{"id": 2, "qty": 5}]


def test_pg_logical_names_and_sets_aside_a_change_in_its_slot(pg: Source, run_cli: RunCli) -> None:
    """The slot keeps the change until an extraction confirms past it; every read skips it
    once it is recorded as set aside."""
    # A slot of its own: setting aside is not offered for a member of the shared slot yet.
    table = enabled(run_cli, pg, PG_EVENTS, "PG_LOGICAL", "--incremental-pg-logical-slot=table")
    run(pg, f"INSERT INTO {table} VALUES (1, '2026-01-01 10:00+00', 'one')")
    run(pg, f"UPDATE {table} SET at = 'infinity' WHERE id = 1")
    run(pg, f"UPDATE {table} SET at = '2026-03-01 10:00+00', note = 'back' WHERE id = 1")
    run(pg, f"INSERT INTO {table} VALUES (2, '2026-01-02 10:00+00', 'two')")
    line = one_error_line(extraction(run_cli, table))
    assert "(update of id=1, column at: timestamp infinity; change gl_seq " in line
    command = set_aside_command(line)
    seq = int(command[-1].split("=")[1])
    assert f"gl_seq {seq} (update of id=1" in line
    ok(run_cli(*command))
    assert one_error_line(run_cli(*command[:4], f"{OPTION}={seq + 1}")).startswith(
        "offload: error: no change with gl_seq"
    )
    ok(extraction(run_cli, table))
    assert lake_rows(f"SELECT id, note FROM {table} ORDER BY id") == [
        {"id": 1, "note": "back"},
        {"id": 2, "note": "two"},
    ]
    document = json.loads(ok(run_cli("display_incremental_status", "-t", table, "--json")).stdout)
    assert document["set_aside"]["latest"][0]["gl_seq"] == seq
    assert document["changelog"]["rows"] == 0, "the slot was confirmed past the change"
