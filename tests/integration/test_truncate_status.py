"""A TRUNCATE the capture cannot see (SQLite and Oracle; ORA_ROWSCN): extraction counts the
source's rows and the fewest the lake can show, and status, the report (text, JSON, HTML)
and the extraction itself say the source may have been truncated when the source holds
fewer.

SQLite has no TRUNCATE and its row triggers always fire, so rows disappear here the way an
Oracle TRUNCATE removes them: with the capture out of the way (the changelog trigger
dropped, the rows deleted, the same trigger created again).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.incremental import SEED, RunCli, Source, enable, extract, sqlite_source, workload_for
from support.workload import Workload

WARNING = "the source may have been truncated"


def _delete_uncaptured(source: Source, workload: Workload) -> None:
    """Delete every row of the table without its changelog trigger seeing it."""
    with source.engine.begin() as db:
        triggers = db.execute(
            sa.text(
                "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'items'"
            )
        ).all()
        assert triggers, "the table has no capture trigger"
        for name, _ in triggers:
            db.execute(sa.text(f'DROP TRIGGER "{name}"'))
        db.execute(sa.text(f"DELETE FROM {workload.table}"))
        for _, created in triggers:
            db.execute(sa.text(created))


def _status(run_cli: RunCli, source: Source) -> tuple[str, dict[str, object]]:
    text = run_cli("display_incremental_status", "-t", source.table)
    assert text.exit_code == 0, text.stderr
    document = run_cli("display_incremental_status", "-t", source.table, "--json")
    assert document.exit_code == 0, document.stderr
    return text.stdout, json.loads(document.stdout)


def _report(run_cli: RunCli, out: Path, output_format: str) -> str:
    result = run_cli(
        "offload_status_report", f"--output-dir={out}", f"--output-format={output_format}"
    )
    assert result.exit_code == 0, result.stderr
    return Path(result.stdout.strip().removeprefix("Report saved to ")).read_text()


@pytest.mark.parametrize("later_changes", [3, 0], ids=["changes after", "nothing after"])
@pytest.mark.parametrize("mode", ["DEFERRED", "IMMEDIATE"])
def test_rows_gone_without_capture_are_reported_as_a_possible_truncate(
    mode: str,
    later_changes: int,
    tmp_path: Path,
    offload_home: Path,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = sqlite_source(tmp_path / "app.db")
    monkeypatch.setenv("GLUON_SOURCE_URL", source.url)
    workload = workload_for(source, "CHANGELOG", SEED)
    workload.create(30)
    enable(run_cli, source, "CHANGELOG", f"--incremental-merge-mode={mode}")
    workload.round(10)  # captured deletes and updates: no alarm
    assert WARNING not in extract(run_cli, source).stderr
    text, document = _status(run_cli, source)
    assert WARNING not in text and document["truncation"] is None

    _delete_uncaptured(source, workload)
    # Rows written after it are captured; with none, the run ships nothing and compares with
    # the lake bound the previous run recorded.
    workload.round(later_changes)
    extracted = extract(run_cli, source)
    assert WARNING in extracted.stderr, extracted.stderr
    text, document = _status(run_cli, source)
    assert "NEEDS ATTENTION" in text and WARNING in text, text
    assert WARNING in str(document["truncation"])
    report = json.loads(_report(run_cli, tmp_path / "reports", "json"))
    findings = [f for table in report["tables"] for f in table["findings"]]
    assert any(f["code"] == "source_truncated" and WARNING in f["message"] for f in findings), (
        report
    )
    assert WARNING in _report(run_cli, tmp_path / "reports", "text")
    assert WARNING in _report(run_cli, tmp_path / "reports", "html")
