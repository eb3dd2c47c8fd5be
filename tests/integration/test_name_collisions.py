"""Two tables' capture objects never share a name (issue 32 item 12): the changelog trigger
is ``<TABLE>_CT``, so table ``X_UV``'s trigger is no longer table ``X``'s updatable trigger
``X_UV``. A table enabled before keeps its recorded names, which the scheme cannot rule
out: enabling the other table then stops at the existing object in one line that says
how to go on. Real SQLite, offload and enable through the command line.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from support.cli import error_lines
from support.incremental import RunCli

from gluon.config import load_settings
from gluon.repo import Repository


@pytest.fixture
def engine(tmp_path: Path, offload_home: Path, monkeypatch: pytest.MonkeyPatch) -> sa.Engine:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'app.db'}")
    with engine.begin() as db:
        for table in ("items", "items_uv"):
            db.execute(sa.text(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, name TEXT)"))
            db.execute(sa.text(f"INSERT INTO {table} VALUES (1, 'one')"))
    monkeypatch.setenv("GLUON_SOURCE_URL", str(engine.url))
    return engine


def _enable(run_cli: RunCli, table: str, method: str) -> tuple[int, list[str]]:
    result = run_cli(
        "offload",
        "-t",
        f"main.{table}",
        "-x",
        "--incremental-updates-enabled",
        f"--incremental-extraction-method={method}",
    )
    return result.exit_code, error_lines(result)


def _triggers(engine: sa.Engine) -> list[str]:
    with engine.connect() as db:
        query = "SELECT name FROM sqlite_master WHERE type = 'trigger' ORDER BY name"
        return [str(row[0]) for row in db.execute(sa.text(query))]


def test_table_x_uv_and_table_x_are_captured_side_by_side(
    engine: sa.Engine, run_cli: RunCli
) -> None:
    assert _enable(run_cli, "items_uv", "CHANGELOG")[0] == 0
    assert _enable(run_cli, "items", "UPDATABLE_CHANGELOG")[0] == 0
    triggers = _triggers(engine)
    assert "main_h_items_uv_ct_insert" in triggers  # items_uv's capture trigger
    assert "main_h_items_uv_insert" in triggers  # items' updatable view's trigger
    assert "main_h_items_ct_insert" in triggers


def test_an_object_named_by_the_old_scheme_stops_enable_in_one_line(
    engine: sa.Engine, run_cli: RunCli
) -> None:
    """items_uv enabled before the _CT suffix: its capture trigger is main_h_items_uv, the
    name items' updatable trigger gets now."""
    assert run_cli("offload", "-t", "main.items_uv", "-x").exit_code == 0  # makes the repository
    installation = Repository(load_settings().repo_url).installation_id
    with engine.begin() as db:
        db.execute(
            sa.text(
                "CREATE TRIGGER main_h_items_uv_insert AFTER INSERT ON items_uv BEGIN "
                f"/* gluon:{installation}:MAIN.ITEMS_UV */ SELECT 1; END"
            )
        )
    code, lines = _enable(run_cli, "items", "UPDATABLE_CHANGELOG")
    assert code != 0
    assert len(lines) == 1, lines
    (line,) = lines
    assert "main.main_h_items_uv" in line and "MAIN.ITEMS_UV" in line
    assert "--incremental-changelog-table" not in line  # it names no trigger
    assert "disable incremental update on MAIN.ITEMS_UV" in line
    assert "main_h_items_ct_insert" not in _triggers(engine)  # nothing created
