"""Status commands without any database: help, usage errors, attention rules, charts, files."""

from __future__ import annotations

import datetime as dt
import re
import subprocess
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
import typer
from typer.core import TyperOption
from typer.testing import Result

from gluon.cli import report as report_cli
from gluon.cli import status as status_cli
from gluon.lake.stats import DeltaStats
from gluon.repo.compaction import CompactionRun
from gluon.repo.incremental import ExtractionRun
from gluon.status.attention import findings
from gluon.status.charts import bar_chart
from gluon.status.formatting import duration, jsonable, size
from gluon.status.lag import TableLag
from gluon.status.model import (
    RUN_STATUS_TEXT,
    Backlog,
    CompactionRunInfo,
    CompactionStatus,
    LakeTableStats,
    OffloadInfo,
    TableStatus,
    Thresholds,
)

RunCli = Callable[..., Result]
REPO_ROOT = Path(__file__).resolve().parents[2]
NOW = dt.datetime(2026, 6, 24, 12, 0, 0)


@pytest.fixture(autouse=True)
def no_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OFFLOAD_HOME", "GLUON_SOURCE_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    ("program", "app"),
    [("display_incremental_status", status_cli.app), ("offload_status_report", report_cli.app)],
)
def test_help_documents_every_option(run_cli: RunCli, program: str, app: typer.Typer) -> None:
    result = run_cli(program, "--help")
    assert result.exit_code == 0, result.stderr
    command = typer.main.get_command(app)
    for param in command.params:
        assert isinstance(param, TyperOption)
        assert param.help, f"{param.opts[0]} has no help text"
        for option in param.opts:
            assert option in result.stdout


def test_usage_errors_are_one_line_and_exit_2(run_cli: RunCli) -> None:
    no_home = run_cli("display_incremental_status", "-t", "main.items")
    assert no_home.exit_code == 2
    assert no_home.stderr.strip().splitlines() == [
        "display_incremental_status: error: OFFLOAD_HOME is not set: export "
        "OFFLOAD_HOME=/path/to/offload (the directory that holds conf/offload.env)"
    ]
    assert run_cli("display_incremental_status").exit_code == 2
    assert run_cli("offload_status_report", "--output-level=everything").exit_code == 2


def _status(
    *,
    changelog: int | None = 0,
    ongoing: CompactionRunInfo | None = None,
) -> TableStatus:
    base = LakeTableStats("s.t_data", DeltaStats("/lake/s.db/t_data", True, 0, 10, 1, 100))
    return TableStatus(
        table_key="S.T",
        collected_at=NOW,
        incremental_enabled=True,
        incremental_state="enabled",
        message=None,
        offload=OffloadInfo("sqlite", "s.t", "s.t", "FULL", "offloaded", NOW, 10, base),
        changelog=Backlog("s.t_log", changelog, None if changelog is not None else "down"),
        compaction=CompactionStatus(ongoing, None, 0, None, (), ()),
    )


def _lag(age_seconds: float | None) -> TableLag:
    pending = None if not age_seconds else NOW - dt.timedelta(seconds=age_seconds)
    return TableLag("S.T", NOW, 1, pending, age_seconds, None, None, None, None, None)


def test_lag_threshold_is_exclusive_and_unknown_never_flags() -> None:
    limits = Thresholds(lag_minutes=1)
    flagged = findings(replace(_status(), lag=_lag(61)), limits, NOW)
    assert [(f.severity, f.code) for f in flagged] == [("warning", "lag")]
    assert "captured 1 min 01 s ago (threshold 1 minutes)" in flagged[0].message
    assert findings(replace(_status(), lag=_lag(60)), limits, NOW) == ()
    assert findings(replace(_status(), lag=_lag(None)), limits, NOW) == ()
    assert Thresholds().lag_minutes == 60


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "unknown"),
        (0.0, "0.0 s"),
        (9.94, "9.9 s"),
        (42.4, "42 s"),
        (192, "3 min 12 s"),
        (7500, "2 h 05 min"),
        (273600, "3 d 4 h"),
    ],
)
def test_durations_for_people(seconds: float | None, text: str) -> None:
    assert duration(seconds) == text


def _run(status: str, started: dt.datetime) -> CompactionRunInfo:
    run = CompactionRun(
        1,
        "S.T",
        "IN_PLACE",
        status,
        "await_acknowledgement",
        started,
        None,
        {},
        0,
        1,
        5,
        None,
        {},
        None,
    )
    return CompactionRunInfo(run, ())


def test_attention_thresholds_are_exclusive() -> None:
    limits = Thresholds(backlog_rows=100, wait_minutes=30)
    assert findings(_status(changelog=100), limits, NOW) == ()
    assert [f.code for f in findings(_status(changelog=101), limits, NOW)] == ["changelog_backlog"]
    assert findings(_status(changelog=None), limits, NOW) == ()
    recent = _run("waiting", NOW - dt.timedelta(minutes=30))
    assert findings(_status(ongoing=recent), limits, NOW) == ()
    old = _run("waiting", NOW - dt.timedelta(minutes=31))
    assert [f.code for f in findings(_status(ongoing=old), limits, NOW)] == ["compaction_waiting"]
    failed = findings(_status(ongoing=_run("failed", NOW), changelog=500), limits, NOW)
    assert [(f.severity, f.code) for f in failed] == [
        ("error", "compaction_failed"),
        ("warning", "changelog_backlog"),
    ]


def test_bar_chart_scales_to_the_largest_value() -> None:
    chart = bar_chart("t", [("0", 50, "a"), ("1", 100, "b"), ("2", 0, "c")], height=128)
    assert [bar.height for bar in chart.bars] == [42.0, 84.0, 0.0]
    assert all(bar.y + bar.height == chart.baseline for bar in chart.bars)
    assert bar_chart("t", []).is_empty


def test_json_shows_the_published_fields_of_repository_records() -> None:
    document = jsonable(_run("failed", NOW))
    assert list(document) == [
        "id",
        "method",
        "status",
        "status_text",
        "current_step",
        "started_at",
        "finished_at",
        "compacted_partition",
        "new_partition",
        "changes",
        "message",
        "steps",
    ]
    assert document["status_text"] == RUN_STATUS_TEXT["failed"]
    run = ExtractionRun(7, "S.T", "success", NOW, None, 3, 2, 1, 2, 0, None, None, 1)
    assert jsonable(run) == {
        "id": 7,
        "status": "success",
        "started_at": "2026-06-24T12:00:00+00:00",
        "finished_at": None,
        "rows_read": 3,
        "rows_written": 2,
        "control_partition": 0,
        "message": None,
    }


def test_json_values_and_sizes() -> None:
    assert jsonable({"at": NOW, "items": (1, None)}) == {
        "at": "2026-06-24T12:00:00+00:00",
        "items": [1, None],
    }
    assert [size(n) for n in (0, 1023, 1024, 5 * 1024**3)] == [
        "0 B",
        "1023 B",
        "1.0 KiB",
        "5.0 GiB",
    ]


def test_env_template_documents_every_setting() -> None:
    read = set(re.findall(r'env\.get\("([A-Z_]+)"', (REPO_ROOT / "gluon/config.py").read_text()))
    read |= {"OFFLOAD_HOME", "GLUON_DEBUG"}
    template = (REPO_ROOT / "conf/offload.env.template").read_text()
    documented = set(re.findall(r"^# ([A-Z_]+):", template, re.M))
    assert read <= documented, f"undocumented: {sorted(read - documented)}"
    checked = subprocess.run(["bash", "-n", str(REPO_ROOT / "conf/offload.env.template")])
    assert checked.returncode == 0


@pytest.mark.parametrize(
    "name", ["offload", "display_incremental_status", "offload_status_report", "gluon"]
)
def test_wrappers_are_valid_bash(name: str) -> None:
    wrapper = REPO_ROOT / "bin" / name
    assert wrapper.stat().st_mode & 0o111, f"bin/{name} is not executable"
    assert subprocess.run(["bash", "-n", str(wrapper)]).returncode == 0
    assert subprocess.run(["bash", "-n", str(REPO_ROOT / "bin/gluon-wrapper.sh")]).returncode == 0
