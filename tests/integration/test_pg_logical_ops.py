"""PG_LOGICAL operations: status and report from the slot, the retained-WAL warning, enable's
prerequisite checks and disable. Real PostgreSQL (wal_level=logical) and Sail."""

from __future__ import annotations

import csv
import datetime as dt
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from support.incremental import (
    SEED,
    Source,
    enable,
    extract,
    lake_rows,
    lake_state,
    postgres_source,
    workload_for,
)
from typer.testing import Result

from gluon.naming import TableRef, slot_name

METHOD = "PG_LOGICAL"
OWN_SLOT = "--incremental-pg-logical-slot=table"
"""What the tests that pass it are about is the table's own test_decoding slot (its name, its
advance and fault points, its WAL); the others take the default, the shared slot."""


@pytest.fixture
def source(pg_url: str, offload_home: Path, monkeypatch: pytest.MonkeyPatch) -> Source:
    monkeypatch.setenv("GLUON_SOURCE_URL", pg_url)
    return postgres_source(pg_url)


def _run(source: Source, *statements: str) -> None:
    with source.engine.begin() as db:
        for statement in statements:
            db.execute(sa.text(statement))


def _status_json(run_cli: Callable[..., Result], source: Source) -> dict[str, Any]:
    result = run_cli("display_incremental_status", "-t", source.table, "--json")
    assert result.exit_code == 0, result.stderr
    status: dict[str, Any] = json.loads(result.stdout)
    return status


def _report(run_cli: Callable[..., Result], tmp_path: Path, fmt: str, *extra: str) -> str:
    out = tmp_path / f"report-{fmt}-{time.monotonic_ns()}"
    result = run_cli(
        "offload_status_report",
        "--output-level=detail",
        f"--output-format={fmt}",
        f"--output-dir={out}",
        *extra,
    )
    assert result.exit_code == 0, result.stderr
    (path,) = out.iterdir()
    return path.read_text()


def test_status_and_report_measure_the_backlog_and_lag_from_the_slot(
    source: Source, run_cli: Callable[..., Result], tmp_path: Path
) -> None:
    workload = workload_for(source, METHOD, SEED + 10)
    workload.create()
    enable(run_cli, source, METHOD, OWN_SLOT)
    _run(source, "CREATE TABLE app.other (id int PRIMARY KEY)")
    _run(source, "INSERT INTO app.other SELECT generate_series(1, 30)")  # not the table's
    before = time.time()
    time.sleep(1.1)  # the oldest pending change commits a measurable while ago
    _run(source, "UPDATE app.items SET amount = amount + 1 WHERE id <= 4")  # 4 row changes
    _run(source, "DELETE FROM app.items WHERE id = 5", "INSERT INTO app.other VALUES (99)")
    time.sleep(1.1)

    status = _status_json(run_cli, source)
    backlog, lag = status["changelog"], status["lag"]
    assert backlog["rows"] == 5, backlog
    slot = backlog["slot"]
    assert slot["slot"] == slot_name(TableRef("app", "items"), source.engine.url.database)
    assert slot["retained_bytes"] > 0 and slot["unconfirmed_bytes"] > 0, slot
    assert lag["backlog"] == 5
    waited = lag["oldest_pending_age_seconds"]
    assert waited is not None and 1.0 <= waited <= time.time() - before + 1, lag
    assert lag["last_latency_seconds"] is None, "nothing shipped yet"

    text = run_cli("display_incremental_status", "-t", source.table)
    assert text.exit_code == 0, text.stderr
    assert "Changes waiting in the replication slot:" in text.stdout, text.stdout
    assert "5 (in slot " in text.stdout
    assert "WAL retained by the slot:" in text.stdout and "WARNING" not in text.stdout

    extract(run_cli, source)
    assert lake_state(source.schema) == workload.source_rows()
    status = _status_json(run_cli, source)
    assert status["changelog"]["rows"] == 0
    assert status["lag"]["oldest_pending_age_seconds"] == 0.0
    assert status["lag"]["oldest_pending_at"] is None
    latency = status["lag"]["last_latency_seconds"]
    assert latency is not None and latency >= 1.0, status["lag"]  # from the first commit shipped

    _run(source, "UPDATE app.items SET name = 'x' WHERE id = 6")
    report = json.loads(_report(run_cli, tmp_path, "json"))
    (table,) = report["tables"]
    assert table["status"]["changelog"]["rows"] == 1
    assert table["status"]["changelog"]["slot"]["retained_bytes"] > 0
    (row,) = csv.DictReader(_report(run_cli, tmp_path, "csv").splitlines())
    assert row["changelog_rows"] == "1" and int(row["wal_retained_bytes"]) > 0, row
    assert float(row["last_latency_seconds"]) >= 1.0
    text_report = _report(run_cli, tmp_path, "text")
    assert "Changes waiting in the replication slot:" in text_report
    assert "WAL retained by the slot:" in text_report
    html = _report(run_cli, tmp_path, "html")
    assert "WAL retained by the slot" in html


def test_a_slot_that_retains_too_much_wal_needs_attention(
    source: Source, run_cli: Callable[..., Result], tmp_path: Path
) -> None:
    workload = workload_for(source, METHOD, SEED + 11)
    workload.create()
    enable(run_cli, source, METHOD, OWN_SLOT)
    _run(source, "CREATE TABLE app.filler (id int, pad text)")
    _run(
        source, "INSERT INTO app.filler SELECT i, repeat('x', 1000) FROM generate_series(1, 3000) i"
    )

    quiet = _report(run_cli, tmp_path, "text")
    assert "wal_retained" not in quiet and "makes the source keep" not in quiet

    report = json.loads(_report(run_cli, tmp_path, "json", "--wal-retained-threshold=1"))
    codes = [finding["code"] for finding in report["findings"]]
    assert "wal_retained" in codes, report["findings"]
    text = _report(run_cli, tmp_path, "text", "--wal-retained-threshold=1")
    assert "makes the source keep" in text and "run an extraction" in text, text

    status = run_cli("display_incremental_status", "-t", source.table, "--wal-retained-threshold=1")
    assert status.exit_code == 0, status.stderr
    assert "WARNING: above 1 MiB" in status.stdout, status.stdout
    assert "disable incremental update (which drops the slot)" in status.stdout


def _slots(source: Source) -> list[str]:
    with source.engine.connect() as db:
        rows = db.execute(
            sa.text(
                "SELECT slot_name FROM pg_replication_slots WHERE database = current_database()"
            )
        )
        return [row[0] for row in rows]


def _enable_refused(run_cli: Callable[..., Result], source: Source) -> str:
    result = run_cli(
        "offload",
        "-t",
        source.table,
        "-x",
        "--incremental-updates-enabled",
        f"--incremental-extraction-method={METHOD}",
    )
    assert result.exit_code != 0, result.stdout
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert _slots(source) == [], "nothing created"
    never = run_cli("display_incremental_status", "-t", source.table)
    assert never.exit_code != 0 and "no record" in never.stderr.lower(), never.stderr
    return lines[0]


def test_enable_refuses_when_no_replication_slot_is_free(
    source: Source, run_cli: Callable[..., Result]
) -> None:
    workload_for(source, METHOD, SEED + 12).create()
    with source.engine.connect() as db:
        free = db.execute(
            sa.text(
                "SELECT current_setting('max_replication_slots')::int - count(*) "
                "FROM pg_replication_slots"
            )
        ).scalar_one()
    fillers = [f"pgops_filler_{number}" for number in range(free)]
    try:
        _run(source, *[f"SELECT pg_create_physical_replication_slot('{f}')" for f in fillers])
        refusal = _enable_refused(run_cli, source)
        assert "free replication slot" in refusal and "max_replication_slots" in refusal
    finally:
        _run(source, *[f"SELECT pg_drop_replication_slot('{f}')" for f in fillers])
    enable(run_cli, source, METHOD)  # a slot freed: the same command goes through


def test_enable_refuses_a_user_without_the_replication_privilege(
    source: Source, run_cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    workload_for(source, METHOD, SEED + 13).create()
    role = f"pgops_reader_{source.engine.url.database}"[:60]
    _run(
        source,
        f"CREATE ROLE {role} LOGIN NOREPLICATION",
        f"GRANT ALL ON DATABASE {source.engine.url.database} TO {role}",
        f"GRANT USAGE, CREATE ON SCHEMA app TO {role}",
        f"GRANT SELECT ON ALL TABLES IN SCHEMA app TO {role}",
    )
    url = sa.make_url(source.url).set(username=role)
    monkeypatch.setenv("GLUON_SOURCE_URL", url.render_as_string(hide_password=False))
    refusal = _enable_refused(run_cli, source)
    assert "REPLICATION" in refusal and f"ALTER ROLE {role} REPLICATION" in refusal, refusal
    _run(source, f"ALTER ROLE {role} REPLICATION")
    enable(run_cli, source, METHOD)
    _run(source, "INSERT INTO app.items (id, name) VALUES (1000, 'by the app')")
    extract(run_cli, source)
    assert 1000 in lake_state(source.schema)


def test_values_decode_the_same_whatever_the_servers_date_and_interval_styles(
    source: Source, run_cli: Callable[..., Result]
) -> None:
    """The slot prints values in the decoding session's styles and gluon reads them back:
    gluon's sessions pin DateStyle, IntervalStyle and TimeZone, so a database whose defaults
    differ (day before month, SQL-standard intervals, a zone off UTC) changes nothing."""
    database = source.engine.url.database
    _run(
        source,
        "CREATE TABLE app.items (id int PRIMARY KEY, d date, ts timestamp, tz timestamptz, "
        "iv interval, t time)",
        "INSERT INTO app.items VALUES (1, '2026-02-03', '2026-02-03 04:05:06.5', "
        "'2026-02-03 04:05:06+00', '1 day 02:03:04', '04:05:06')",
        f"ALTER DATABASE {database} SET DateStyle = 'SQL, DMY'",
        f"ALTER DATABASE {database} SET IntervalStyle = 'sql_standard'",
        f"ALTER DATABASE {database} SET TimeZone = 'Asia/Kolkata'",
    )
    enable(run_cli, source, METHOD)
    _run(  # the application's sessions use the database's styles
        source,
        "INSERT INTO app.items VALUES (2, '04/05/2026', '04/05/2026 07:08:09', "
        "'04/05/2026 07:08:09 UTC', '3 4:05:06', '07:08:09')",
        "UPDATE app.items SET iv = iv + interval '1 hour', d = d + 1 WHERE id = 1",
    )
    extract(run_cli, source)
    rows = {row["id"]: row for row in lake_rows("SELECT id, d, ts, tz, iv, t FROM app.items")}
    assert set(rows) == {1, 2}
    assert str(rows[1]["d"]) == "2026-02-04" and str(rows[2]["d"]) == "2026-05-04"
    assert str(rows[2]["ts"]) == "2026-05-04 07:08:09"
    zoned = rows[2]["tz"]
    assert isinstance(zoned, dt.datetime)
    assert zoned.astimezone(dt.UTC).isoformat() == "2026-05-04T07:08:09+00:00"
    assert rows[1]["iv"] == "1 day 03:03:04" and rows[2]["iv"] == "3 days 04:05:06"
    status = run_cli("display_incremental_status", "-t", source.table)
    assert status.exit_code == 0, status.stderr


def test_disable_drops_the_slot_it_recorded_and_no_other(
    source: Source, run_cli: Callable[..., Result]
) -> None:
    workload = workload_for(source, METHOD, SEED + 14)
    workload.create()
    enable(run_cli, source, METHOD, OWN_SLOT)
    ours = slot_name(TableRef("app", "items"), source.engine.url.database)
    users = f"pgops_users_{source.engine.url.database}"[:60]
    _run(source, f"SELECT pg_create_logical_replication_slot('{users}', 'test_decoding')")
    try:
        assert sorted(_slots(source)) == sorted([ours, users])
        result = run_cli("offload", "-t", source.table, "-x", "--incremental-updates-disabled")
        assert result.exit_code == 0, result.stderr
        assert _slots(source) == [users], "gluon's slot is gone, the user's stays"
    finally:
        _run(source, f"SELECT pg_drop_replication_slot('{users}')")
