"""Status and the enable plan list every trigger a PostgreSQL changelog trigger stands for:
on a table that takes transition tables, the statement triggers of each event (the UPDATE
one named for the function, ``_insert`` and ``_delete``) and the TRUNCATE one; on a
partitioned table, or under an insert-only method, the row trigger and the TRUNCATE one.
Compared with ``pg_trigger``.

Real PostgreSQL, Sail and Delta tables.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.incremental import RunCli
from support.statements import configured_source
from support.tables import ok

SETUP = (
    "CREATE SCHEMA app",
    "CREATE TABLE app.plain (id INTEGER PRIMARY KEY, v TEXT)",
    "INSERT INTO app.plain VALUES (1, 'a')",
    "CREATE TABLE app.parted (id INTEGER PRIMARY KEY, v TEXT) PARTITION BY RANGE (id)",
    "CREATE TABLE app.parted_low PARTITION OF app.parted FOR VALUES FROM (0) TO (100)",
    "INSERT INTO app.parted VALUES (1, 'a')",
)


def triggers_on(engine: sa.Engine, table: str) -> list[str]:
    """The triggers the table itself has (its partitions' clones left out)."""
    with engine.connect() as db:
        rows = db.execute(
            sa.text(
                "SELECT tgname FROM pg_catalog.pg_trigger WHERE tgrelid = CAST(:t AS regclass) "
                "AND NOT tgisinternal ORDER BY tgname"
            ),
            {"t": table},
        )
        return [row[0] for row in rows]


@pytest.mark.parametrize(
    ("table", "method", "expected"),
    [
        (
            "plain",
            "CHANGELOG",
            ["plain_ct", "plain_ct_delete", "plain_ct_insert", "plain_ct_truncate"],
        ),
        ("parted", "CHANGELOG", ["parted_ct", "parted_ct_truncate"]),
        # records updates and deletes by key: the row trigger on any table
        ("plain", "CHANGELOG_INSERT", ["plain_ct", "plain_ct_truncate"]),
    ],
)
def test_status_and_the_plan_list_every_capture_trigger(
    pg_url: str,
    offload_home: Path,
    tmp_path: Path,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
    table: str,
    method: str,
    expected: list[str],
) -> None:
    engine = configured_source(pg_url, monkeypatch, *SETUP)
    enable = ("--incremental-updates-enabled", f"--incremental-extraction-method={method}")
    plan = ok(run_cli("offload", "-t", f"app.{table}", *enable))
    planned = next(line for line in plan.stdout.splitlines() if f"app_h.{table}_ct " in line)
    ok(run_cli("offload", "-t", f"app.{table}", "-x", *enable))
    assert triggers_on(engine, f"app.{table}") == expected
    assert sorted(planned.split(": triggers ")[1].split(", ")) == expected, planned
    status = ok(run_cli("display_incremental_status", "-t", f"app.{table}", "--json"))
    listed = [
        item["name"]
        for item in json.loads(status.stdout)["source_objects"]
        if item["role"] == "Changelog trigger"
    ]
    assert sorted(listed) == [f"app_h.{name}" for name in expected]
    # The report reads the trigger states of all its tables ahead, in one query.
    report = ok(
        run_cli(
            "offload_status_report",
            "--output-format=csv",
            "--output-level=detail",
            f"--output-dir={tmp_path}",
        )
    )
    saved = Path(report.stdout.strip().removeprefix("Report saved to ")).read_text()
    for name in expected:
        assert f"Changelog trigger|TRIGGER|app_h.{name}" in saved, saved
