"""Lag per table (``gluon.status.lag``): backlog, oldest pending change, last latency.

Real sources (SQLite and PostgreSQL), real extractions on the embedded engine, and
the status commands as users run them. Ages are compared with each other and with
zero, never with the wall clock.
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.tables import App, RunCli, enable, extract, ok, status_json, status_text

from gluon.config import load_settings
from gluon.repo import Repository
from gluon.repo.incremental import IncrementalState
from gluon.status.lag import table_lag
from gluon.status.text import last_latency, oldest_pending


def field(text: str, label: str) -> str:
    match = re.search(rf"^\s*{re.escape(label)}:\s+(.*)$", text, re.M)
    assert match, f"no {label!r} line in:\n{text}"
    return match.group(1)


@pytest.fixture(params=["sqlite", "postgresql"])
def app(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    offload_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> App:
    if request.param == "sqlite":
        source = App(f"sqlite:///{tmp_path / 'app.db'}", "main")
    else:
        source = App(request.getfixturevalue("pg_url"), "app")
        source.run("CREATE SCHEMA app")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    return source


def test_pending_change_ages_and_an_extraction_records_its_latency(
    app: App, run_cli: RunCli
) -> None:
    table = app.create_table("items", 4)
    enable(run_cli, table)
    key = table.upper()

    nothing = table_lag(load_settings(), key)
    assert (nothing.backlog, nothing.oldest_pending_age_seconds) == (0, 0.0)
    assert nothing.oldest_pending_at is None
    assert nothing.last_latency_seconds is None
    assert nothing.latency_unknown_reason == "no extraction has shipped a change yet"
    assert oldest_pending(nothing) == "none pending"

    app.change(table, first_key=100)
    first = status_json(run_cli, table)["lag"]
    assert first["backlog"] == 5
    assert first["oldest_pending_age_seconds"] > 0
    assert first["oldest_pending_at"] is not None
    assert first["last_latency_seconds"] is None
    second = table_lag(load_settings(), key)
    assert second.backlog == 5
    assert second.oldest_pending_age_seconds is not None
    assert second.oldest_pending_age_seconds > first["oldest_pending_age_seconds"]
    text = status_text(run_cli, table)
    assert field(text, "Oldest change not in the lake").startswith("waiting ")
    assert field(text, "Last source-to-lake latency") == (
        "unknown (no extraction has shipped a change yet)"
    )

    extract(run_cli, table)
    after = table_lag(load_settings(), key)
    assert (after.backlog, after.oldest_pending_age_seconds) == (0, 0.0)
    assert after.oldest_pending_at is None
    assert after.last_latency_seconds is not None and after.last_shipped_run_id is not None
    # The oldest change waited at least as long as it had when last seen pending.
    assert after.last_latency_seconds >= second.oldest_pending_age_seconds
    document = status_json(run_cli, table)
    assert document["lag"]["last_latency_seconds"] == after.last_latency_seconds
    assert document["lag"]["last_shipped_run_id"] == document["extraction"]["last_run"]["id"]
    text = status_text(run_cli, table)
    assert field(text, "Oldest change not in the lake") == "none pending"
    assert re.fullmatch(
        r"\d.* \(extraction run \d+, finished .* UTC\)",
        field(text, "Last source-to-lake latency"),
    )

    # An extraction with nothing to ship keeps the latency of the last one that shipped.
    extract(run_cli, table)
    assert table_lag(load_settings(), key).last_latency_seconds == after.last_latency_seconds


def test_a_method_without_a_changelog_and_an_unreachable_source_say_unknown(
    tmp_path: Path, offload_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = Repository(f"sqlite:///{tmp_path / 'repo.db'}", create=True)
    repo.incremental.save_state(
        IncrementalState(
            table_key="APP.T",
            method="ORA_ROWSCN",
            status="enabled",
            key_columns=("ID",),
            source_objects=(),
            delta_table="app_load.t_changes",
            delta_path=str(tmp_path / "t_changes"),
        )
    )
    monkeypatch.setenv("GLUON_SOURCE_URL", "postgresql+psycopg://nobody@127.0.0.1:9/nowhere")
    lag = table_lag(load_settings(), "APP.T", repo=repo)
    assert lag.backlog is None
    assert lag.oldest_pending_age_seconds is None
    assert lag.last_latency_seconds is None
    assert lag.pending_unknown_reason == (
        "ORA_ROWSCN keeps no changelog: it cannot tell when a change was made"
    )
    assert oldest_pending(lag).startswith("unknown (ORA_ROWSCN keeps no changelog")
    assert last_latency(lag).startswith("unknown (ORA_ROWSCN keeps no changelog")
    assert table_lag(load_settings(), "APP.NOTHING", repo=repo).backlog is None


def test_unreachable_source_makes_the_pending_figures_unknown(
    app: App, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = app.create_table("items", 4)
    enable(run_cli, table)
    app.change(table, first_key=100)
    extract(run_cli, table)
    monkeypatch.setenv("GLUON_SOURCE_URL", "postgresql+psycopg://nobody@127.0.0.1:9/nowhere")
    lag = status_json(run_cli, table)["lag"]
    assert lag["backlog"] is None and lag["oldest_pending_age_seconds"] is None
    assert "cannot connect" in lag["pending_unknown_reason"]
    assert lag["last_latency_seconds"] is not None  # the repository still knows it
    direct = table_lag(load_settings(), table.upper())
    assert direct.backlog is None and "cannot connect" in str(direct.pending_unknown_reason)


def _report(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """``offload_status_report`` in a process of its own, stdout and stderr captured apart."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from gluon.cli.report import main; main()",
            f"--output-dir={tmp_path / 'reports'}",
            *args,
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env=os.environ.copy(),
    )
    assert done.returncode == 0, done.stderr
    path = Path(done.stdout.strip().removeprefix("Report saved to "))
    return done, path


def test_report_flags_lag_above_its_threshold_with_progress_on_stderr(
    app: App, run_cli: RunCli, tmp_path: Path
) -> None:
    table = app.create_table("items", 4)
    enable(run_cli, table)
    app.change(table, first_key=100)

    done, path = _report(tmp_path, "--output-format=json", "--lag-threshold=0")
    # stdout holds the result alone; every progress line went to stderr.
    assert done.stdout.splitlines() == [f"Report saved to {path}"]
    assert "Fetch Repository, Source And Lake Data" in done.stderr
    assert "Log file: " in done.stderr and "Report saved" not in done.stderr
    document: dict[str, Any] = json.loads(path.read_text())
    (entry,) = document["tables"]
    assert entry["oldest_pending_age_seconds"] > 0
    assert entry["oldest_pending_at"] is not None and entry["last_latency_seconds"] is None
    assert document["thresholds"]["lag_minutes"] == 0
    lag_findings = [item for item in entry["findings"] if item["code"] == "lag"]
    assert len(lag_findings) == 1 and lag_findings[0]["severity"] == "warning"
    assert "threshold 0 minutes" in lag_findings[0]["message"]

    # The default threshold (an hour) does not flag a change a few seconds old.
    _, path = _report(tmp_path, "--output-format=json")
    entry = json.loads(path.read_text())["tables"][0]
    assert [item for item in entry["findings"] if item["code"] == "lag"] == []

    extract(run_cli, table)
    _, path = _report(tmp_path, "--output-format=csv", "--lag-threshold=0")
    (row,) = list(csv.DictReader(path.open()))
    assert row["oldest_pending_age_seconds"] == "0.0"
    assert row["oldest_pending_at"] == ""
    assert float(row["last_latency_seconds"]) > 0
    _, path = _report(tmp_path, "--output-level=detail", "--lag-threshold=0")
    text = path.read_text()
    assert "Nothing needs attention." in text
    header = next(line for line in text.splitlines() if line.strip().startswith("Table "))
    assert "Oldest pending" in header and "Latency" in header
    assert "Ongoing compaction" in header
    assert field(text, "Oldest change not in the lake") == "none pending"


def test_help_documents_the_lag_threshold(run_cli: RunCli) -> None:
    result = ok(run_cli("offload_status_report", "--help"))
    assert "--lag-threshold" in result.stdout
    assert "oldest change not yet in the lake" in " ".join(result.stdout.split())


def test_status_names_extraction_runs_by_their_repository_id(
    tmp_path: Path, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run ids count across tables; status names each run by its id alone (the one the
    result line, the logs and ``gl_extraction_id`` carry), no per-table number beside it."""
    app = App(f"sqlite:///{tmp_path / 'app.db'}", "main")
    monkeypatch.setenv("GLUON_SOURCE_URL", app.url)
    first, second = app.create_table("first", 4), app.create_table("second", 4)
    enable(run_cli, first)
    enable(run_cli, second)
    extract(run_cli, first)  # run id 1
    extract(run_cli, second)  # run id 2
    extract(run_cli, first)  # run id 3
    extract(run_cli, second)  # run id 4: the second run of the second table

    text = status_text(run_cli, second, "-v")
    assert field(text, "Extraction runs").startswith("2 (2 succeeded")
    assert field(text, "Last extraction run").startswith("extraction run 4 success, started ")
    assert "\n  extraction run 2 success, started " in text
    extraction = status_json(run_cli, second)["extraction"]
    assert "recent_run_numbers" not in extraction
    assert [run["id"] for run in extraction["recent_runs"]] == [4, 2]
