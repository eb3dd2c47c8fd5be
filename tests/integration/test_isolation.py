"""One broken table never stops queries or commands on the others (issue 12,
reproduction 7): its own error names it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.cli import error_lines
from support.incremental import RunCli, lake_rows

from gluon.config import load_settings
from gluon.read.catalog import lake_session
from gluon.repo import Repository


def _create(engine: sa.Engine, table: str, rows: int) -> None:
    with engine.begin() as db:
        db.execute(sa.text(f"CREATE TABLE {table} (id integer PRIMARY KEY, label text)"))
        db.execute(
            sa.text(f"INSERT INTO {table} VALUES (:id, :label)"),
            [{"id": n, "label": f"row {n}"} for n in range(1, rows + 1)],
        )


def _query(run_cli: RunCli, statement: str) -> tuple[int, list[dict[str, object]], list[str]]:
    result = run_cli("gluon", "query", "--json", statement)
    rows = json.loads(result.stdout) if result.exit_code == 0 else []
    return result.exit_code, rows, error_lines(result)


@pytest.mark.parametrize("broken_part", ["base", "delta"])
def test_a_table_with_removed_files_stops_only_its_own_queries(
    broken_part: str,
    tmp_path: Path,
    offload_home: Path,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    monkeypatch.setenv("GLUON_SOURCE_URL", url)
    engine = sa.create_engine(url)
    _create(engine, "healthy", 5)
    _create(engine, "broken", 3)
    for table in ("main.healthy", "main.broken"):
        result = run_cli(
            "offload",
            "-t",
            table,
            "-x",
            "--incremental-updates-enabled",
            "--incremental-extraction-method=CHANGELOG",
        )
        assert result.exit_code == 0, result.stderr
    repo = Repository(load_settings().repo_url)
    record, state = repo.get_table("MAIN.BROKEN"), repo.incremental.get_state("MAIN.BROKEN")
    assert record is not None and state is not None
    shutil.rmtree(record.base_path if broken_part == "base" else state.delta_path)

    # Queries of the healthy table work; the broken one is not even registered (gluon query
    # registers only the tables a statement names), so no warning.
    code, rows, errors = _query(run_cli, "SELECT count(*) AS n FROM main.healthy")
    assert code == 0, errors
    assert rows == [{"n": 5}]
    assert errors == []
    # A statement naming both: the healthy one's rows, a warning naming the broken one.
    code, rows, errors = _query(
        run_cli, "SELECT count(*) AS n FROM main.healthy WHERE 'main.broken' <> ''"
    )
    assert code == 0, errors
    assert rows == [{"n": 5}]
    assert len(errors) == 1 and "main.broken" in errors[0] and "warning" in errors[0]

    # A query of the broken table fails in one line that names it.
    code, _, errors = _query(run_cli, "SELECT * FROM `main`.`broken`")
    assert code == 1
    assert any("main.broken is unavailable" in line for line in errors), errors
    missing = record.base_path if broken_part == "base" else state.delta_path
    assert any(f"{missing} is missing" in line for line in errors), errors
    assert not any("Traceback" in line for line in errors)

    # Commands on the healthy table keep working.
    with engine.begin() as db:
        db.execute(sa.text("UPDATE healthy SET label = 'changed' WHERE id = 2"))
    for flags in (
        ("--incremental-run-extraction",),
        (
            "--incremental-run-compaction",
            "--incremental-terminate-compaction",
            "--incremental-wait-time=0",
        ),
        ("--incremental-run-extraction",),
        ("--incremental-run-compaction", "--incremental-wait-time=0"),
    ):
        result = run_cli("offload", "-t", "main.healthy", "-x", *flags)
        assert result.exit_code == 0, result.stderr
    assert lake_rows("SELECT label FROM main.healthy WHERE id = 2") == [{"label": "changed"}]
    status = run_cli("display_incremental_status", "-t", "main.healthy")
    assert status.exit_code == 0, status.stderr
    report = run_cli("offload_status_report", "--output-format=json", f"--output-dir={tmp_path}")
    assert report.exit_code == 0, report.stderr

    # The Python API skips it too, and says so.
    with lake_session(load_settings()) as session:
        assert set(session.unavailable) == {"main.broken"}
        assert session.sql("SELECT count(*) AS n FROM main.healthy").collect()[0]["n"] == 5
