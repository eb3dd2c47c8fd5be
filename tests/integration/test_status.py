"""``display_incremental_status`` on tables in every state, with real sources and real runs.

The states come from the real commands (offload, extraction, compaction on
embedded Sail; failures from a real broken changelog), against SQLite and
PostgreSQL sources. The status command itself starts no Spark.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.cli import error_lines, query_json
from support.tables import (
    App,
    RunCli,
    compact,
    enable,
    extract,
    offload,
    status_json,
    status_text,
)

TOP_LEVEL_KEYS = [
    "table_key",
    "collected_at",
    "incremental_enabled",
    "incremental_state",
    "message",
    "offload",
    "extraction",
    "changelog",
    "schema_drift",
    "ingestion",
    "staging",
    "compaction",
    "objects",
    "source_objects",
    "lake_objects",
    "attention",
    "lag",
    "nullable_keys",
    "truncation",
    "set_aside",
    "verified",
    "unfilled_columns",
]
SECTIONS = [
    "| CHANGE EXTRACTION STATUS: |",
    "| CHANGE INGESTION STATUS: |",
    "| COMPACTION STATUS: |",
    "| MISC INFORMATION: |",
    "| OFFLOAD INFORMATION: |",
]
ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?\+00:00$")


def field(text: str, label: str) -> str:
    """The value printed after ``label:`` (first occurrence)."""
    match = re.search(rf"^{re.escape(label)}:\s+(.*)$", text, re.M)
    assert match, f"no {label!r} line in:\n{text}"
    return match.group(1)


def partitions(document: dict[str, Any]) -> dict[int, tuple[int, str]]:
    return {
        part["partition"]: (part["rows"], part["role"])
        for part in document["ingestion"]["partitions"]
    }


@pytest.fixture
def app(tmp_path: Path, offload_home: Path, monkeypatch: pytest.MonkeyPatch) -> App:
    source = App(f"sqlite:///{tmp_path / 'app.db'}", "main")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    return source


def test_status_follows_a_table_through_extraction_and_compaction(
    app: App, run_cli: RunCli
) -> None:
    table = app.create_table("items", 10)
    enable(run_cli, table)
    lake = Path(str(status_json(run_cli, table)["objects"]["delta_path"]))

    # Enabled, never extracted.
    document = status_json(run_cli, table)
    assert list(document) == TOP_LEVEL_KEYS
    assert document["table_key"] == "MAIN.ITEMS"
    assert document["incremental_enabled"] is True
    assert document["incremental_state"] == "enabled"
    assert ISO_UTC.match(document["collected_at"])
    extraction = document["extraction"]
    assert extraction["method"] == "CHANGELOG"
    assert extraction["position_kind"] == "sequence"
    assert extraction["max_position"] is None
    assert extraction["last_extraction_at"] is None
    assert extraction["runs"] == 0 and extraction["last_run"] is None
    assert document["changelog"] == {
        "changelog_table": "main.main_h_items_log",
        "rows": 0,
        "reason": None,
        "capture_problems": [],
        "slot": None,
    }
    ingestion = document["ingestion"]
    assert ingestion["requested"]["partition"] == ingestion["acknowledged"]["partition"] == 0
    assert ingestion["requested"]["location"] == f"{lake}/gl_control_partition=0"
    assert ISO_UTC.match(ingestion["requested"]["at"])
    assert ingestion["diversion_pending"] is False
    assert partitions(document) == {0: (0, "receiving new changes")}
    assert document["compaction"]["ongoing"] is None
    assert document["compaction"]["last_completed"] is None
    assert document["compaction"]["snapshot"] is None
    assert document["objects"] == {
        "base_table": "main.items_data",
        "key_columns": ["id"],
        "internal_view": "main.items_internal_user_view_0",
        "view_kind": "merge",
        "user_view": "main.items",
        "delta_table": "main_load.items_changes",
        "delta_path": str(lake),
        "base_path": str(lake.parent.parent / "main.db" / "items_data"),
    }
    assert document["offload"]["source_dialect"] == "sqlite"
    assert document["offload"]["source_table"] == "main.items"
    assert document["offload"]["offload_type"] == "FULL"
    assert document["offload"]["rows_offloaded"] == 10
    assert document["offload"]["base"]["rows"] == 10
    # SQLite: one trigger per event (main_h_items_ct_insert, ...), as they exist in the source.
    assert [(o["role"], o["object_type"], o["name"]) for o in document["source_objects"]] == [
        ("Changelog trigger", "TRIGGER", f"main.main_h_items_ct_{event}")
        for event in ("insert", "update", "delete")
    ] + [("Changelog table", "TABLE", "main.main_h_items_log")]
    assert [o["role"] for o in document["lake_objects"]] == [
        "Delta view",
        "Delta table",
        "Base table",
        "Internal delta view",
    ]
    text = status_text(run_cli, table)
    assert [line for line in text.splitlines() if line.startswith("| ")] == SECTIONS
    assert field(text, "Max change sequence extracted") == "none extracted yet"
    assert field(text, "Most recent extraction time") == "never"
    assert field(text, "Extraction method") == "CHANGELOG"
    assert field(text, "Changes waiting in the changelog") == "0 (in main.main_h_items_log)"
    assert field(text, "Current requested change ingestion location") == (
        f"{lake}/gl_control_partition=0"
    )
    assert field(text, "Ongoing compaction") == "none"
    assert field(text, "Last completed compaction") == "none completed yet"
    assert field(text, "Internal delta view (merge)") == "main.items_internal_user_view_0"
    assert field(text, "Key columns") == "id"
    assert field(text, "Offload type") == "FULL"

    # Changes captured, then extracted.
    app.change(table, first_key=100)
    assert status_json(run_cli, table)["changelog"]["rows"] == 5
    extract(run_cli, table)
    document = status_json(run_cli, table)
    extraction = document["extraction"]
    assert extraction["max_position"] == 5
    assert ISO_UTC.match(extraction["last_extraction_at"])
    assert (extraction["runs"], extraction["succeeded"], extraction["failed"]) == (1, 1, 0)
    assert extraction["changes_extracted"] == 5
    assert extraction["last_run"]["status"] == "success"
    assert extraction["last_run"]["rows_written"] == 5
    assert document["changelog"]["rows"] == 0
    assert partitions(document) == {0: (5, "receiving new changes")}
    assert document["ingestion"]["delta"]["rows"] == 5
    text = status_text(run_cli, table)
    assert field(text, "Max change sequence extracted") == "5"
    assert field(text, "Most recent extraction time").endswith(" UTC")
    assert "0 failed" in field(text, "Extraction runs")
    assert re.search(r"^\s+0:\s+5 changes, 1 files", text, re.M)

    # A compaction that stopped to wait for an extraction's acknowledgement.
    assert (
        "stopped at the acknowledgement step"
        in compact(run_cli, table, "--incremental-terminate-compaction").stdout
    )
    document = status_json(run_cli, table)
    ongoing = document["compaction"]["ongoing"]
    assert ongoing["status"] == "waiting"
    assert ongoing["current_step"] == "await_acknowledgement"
    assert ongoing["status_text"] == "waiting for acknowledgement"
    assert ongoing["compacted_partition"] == 0 and ongoing["new_partition"] == 1
    assert [step["step"] for step in ongoing["steps"]] == [
        "request_diversion",
        "await_acknowledgement",
    ]
    ingestion = document["ingestion"]
    assert ingestion["requested"]["partition"] == 1
    assert ingestion["requested"]["location"] == f"{lake}/gl_control_partition=1"
    assert ingestion["acknowledged"]["partition"] == 0
    assert ingestion["diversion_pending"] is True
    assert partitions(document) == {
        0: (5, f"being compacted by compaction run {ongoing['id']}"),
        1: (0, "requested for new changes, awaiting acknowledgement"),
    }
    text = status_text(run_cli, table, "-v")
    ongoing_line = field(text, "Ongoing compaction")
    assert "current step: await_acknowledgement" in ongoing_line
    assert "status: waiting for acknowledgement" in ongoing_line
    assert field(text, "Current requested change ingestion location").endswith(
        "gl_control_partition=1"
    )
    assert field(text, "Current acknowledged change ingestion location").endswith(
        "gl_control_partition=0"
    )
    assert "the next extraction switches to it and acknowledges" in text
    assert "Steps of compaction run 1:" in text and "  request_diversion: success" in text

    # The acknowledging extraction, then the compaction finishes (keeping what it replaced).
    app.run(f"UPDATE {table} SET amount = 9 WHERE id = 4", f"DELETE FROM {table} WHERE id = 5")
    assert "acknowledged" in extract(run_cli, table).stdout
    assert "complete" in compact(run_cli, table, "--incremental-retain-obsolete-objects").stdout
    document = status_json(run_cli, table)
    compaction = document["compaction"]
    assert compaction["ongoing"] is None
    last = compaction["last_completed"]
    assert (last["method"], last["status"], last["compacted_partition"]) == (
        "IN_PLACE",
        "success",
        0,
    )
    assert ISO_UTC.match(last["finished_at"])
    assert compaction["completed_runs"] == 1
    # The replaced base and the compacted control partition are kept as tables of their own.
    assert [item["kind"] for item in compaction["retained"]] == [
        "base table before compaction",
        "control partitions",
    ]
    assert document["objects"]["internal_view"] == "main.items_internal_user_view_1"
    assert document["ingestion"]["view_min_partition"] == 1
    assert partitions(document) == {1: (2, "receiving new changes")}
    assert document["extraction"]["max_position"] == 7
    snapshot = compaction["snapshot"]
    assert snapshot["run_completed"] is True
    entries = {entry["role"]: entry for entry in snapshot["entries"]}
    assert set(entries) == {"base", "delta"}
    assert entries["delta"]["path"] == str(lake)
    for role, expected_rows in (("base", 10), ("delta", 7)):
        entry = entries[role]
        assert entry["query"] == (
            f"SELECT * FROM delta.`{entry['path']}` VERSION AS OF {entry['version']}"
        )
        assert entry["command"] == f"gluon query '{entry['query']}'"
        # The printed query reads the pre-compaction version back on Sail.
        assert len(query_json(entry["query"])) == expected_rows, role
    text = status_text(run_cli, table)
    assert field(text, "Ongoing compaction") == "none"
    assert "(compaction run 1, IN_PLACE, control partition 0, 5 changes)" in field(
        text, "Last completed compaction"
    )
    assert f"    gluon query 'SELECT * FROM delta.`{lake}` VERSION AS OF" in text
    assert "Retained obsolete objects:" in text and "  control partitions main_load" in text

    # A failed extraction: the changelog table is gone (a real failure in the source).
    app.change(table, first_key=200)
    app.run("DROP TABLE main.main_h_items_log")
    failed = run_cli("offload", "-t", table, "-x", "--incremental-run-extraction")
    assert failed.exit_code == 1
    document = status_json(run_cli, table)
    extraction = document["extraction"]
    assert (extraction["runs"], extraction["succeeded"], extraction["failed"]) == (3, 2, 1)
    assert extraction["last_run"]["status"] == "failed"
    assert "main_h_items_log" in extraction["last_run"]["message"]
    assert document["changelog"]["rows"] is None
    assert "main_h_items_log" in document["changelog"]["reason"]
    text = status_text(run_cli, table)
    assert field(text, "Changes waiting in the changelog").startswith("unknown (")
    assert re.match(
        r"extraction run \d+ failed, started .*: .*main_h_items_log",
        field(text, "Last extraction run"),
    )
    assert field(text, "Max change sequence extracted") == "7"


def test_table_without_incremental_update_unknown_and_malformed_tables(
    app: App, run_cli: RunCli
) -> None:
    table = app.create_table("plain", 3)
    offload(run_cli, table)
    result = run_cli("display_incremental_status", "-t", "MAIN.Plain")
    assert result.exit_code == 0, result.stderr
    assert "Incremental update is not enabled for MAIN.PLAIN" in result.stdout
    assert "| OFFLOAD INFORMATION: |" in result.stdout
    assert "| COMPACTION STATUS: |" not in result.stdout
    assert field(result.stdout, "Source table") == "main.plain"
    assert field(result.stdout, "Base table now").startswith("3 rows in 1 files")
    document = status_json(run_cli, table)
    assert list(document) == TOP_LEVEL_KEYS
    assert document["incremental_enabled"] is False
    assert document["incremental_state"] is None
    assert document["extraction"] is None and document["compaction"] is None
    assert "--incremental-updates-enabled" in document["message"]
    assert document["offload"]["rows_offloaded"] == 3

    unknown = run_cli("display_incremental_status", "-t", "main.nothing")
    assert unknown.exit_code == 1
    assert error_lines(unknown) == [
        "display_incremental_status: error: MAIN.NOTHING has not been offloaded (the repository "
        "has no record of it): offload it first with: offload -t MAIN.NOTHING -x"
    ]
    assert unknown.stdout == ""
    malformed = run_cli("display_incremental_status", "-t", "nothing")
    assert malformed.exit_code == 2
    assert len(error_lines(malformed)) == 1


def test_postgres_source_and_an_unreachable_source(
    pg_url: str, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = App(pg_url, "app")
    app.run("CREATE SCHEMA app")
    monkeypatch.setenv("GLUON_SOURCE_URL", pg_url)
    table = app.create_table("orders", 6)
    enable(run_cli, table)
    app.change(table, first_key=50)
    document = status_json(run_cli, table)
    assert document["offload"]["source_dialect"] == "postgresql"
    assert document["changelog"] == {
        "changelog_table": "app_h.orders_log",
        "rows": 5,
        "reason": None,
        "capture_problems": [],
        "slot": None,
    }
    assert [(o["role"], o["name"]) for o in document["source_objects"]] == [
        ("Changelog trigger", "app_h.orders_ct"),  # the UPDATE statement trigger
        ("Changelog trigger", "app_h.orders_ct_insert"),
        ("Changelog trigger", "app_h.orders_ct_delete"),
        ("Changelog trigger", "app_h.orders_ct_truncate"),  # its TRUNCATE statement trigger
        ("Changelog table", "app_h.orders_log"),
        ("Changelog sequence", "app_h.orders_seq"),
        ("Hybrid schema", "app_h"),
    ]
    extract(run_cli, table)
    document = status_json(run_cli, table)
    assert document["extraction"]["max_position"] == 5
    assert document["changelog"]["rows"] == 0

    # The source is down: only the changelog count becomes unknown.
    monkeypatch.setenv("GLUON_SOURCE_URL", "postgresql+psycopg://nobody@127.0.0.1:9/nowhere")
    result = run_cli("display_incremental_status", "-t", table)
    assert result.exit_code == 0, result.stderr
    waiting = field(result.stdout, "Changes waiting in the changelog")
    assert waiting.startswith("unknown (cannot connect to the postgresql source database")
    assert field(result.stdout, "Max change sequence extracted") == "5"
    document = json.loads(run_cli("display_incremental_status", "-t", table, "--json").stdout)
    assert document["changelog"]["rows"] is None
    assert "cannot connect" in document["changelog"]["reason"]


def test_status_starts_no_spark(app: App, run_cli: RunCli) -> None:
    table = app.create_table("items", 5)
    enable(run_cli, table)
    app.change(table, first_key=100)
    extract(run_cli, table)
    probe = (
        "import sys\n"
        "from gluon.cli.status import main\n"
        "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
        "print('ENGINE', any(m in sys.modules for m in ('pyspark', 'pysail')), 'CODE', code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, "-t", table, "--json"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    last = done.stdout.strip().splitlines()[-1].split()
    assert last[3] == "0", done.stderr
    assert last[1] == "False", "display_incremental_status imported pyspark or pysail"
    assert json.loads(done.stdout[: done.stdout.rindex("ENGINE")])["extraction"]["runs"] == 1
