"""Enabling again after a disable, without copying the table anew (found by qa28).

The lake keeps the copy as it was at the disable: source changes made while capture was off
never reach it, and every reader (gluon's view, a Delta reader by path) differs from the
source for good. The enable says so, with the command that copies the table anew. Real
SQLite, Sail and Delta tables.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from support.incremental import RunCli

TABLE = "main.notes"


def _offload(run_cli: RunCli, *args: str) -> str:
    result = run_cli("offload", "-t", TABLE, "-x", *args)
    assert result.exit_code == 0, result.stderr
    return str(result.stderr)


def test_enabling_again_over_the_old_copy_says_changes_made_while_disabled_are_missing(
    tmp_path: Path, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    monkeypatch.setenv("GLUON_SOURCE_URL", url)
    engine = sa.create_engine(url)
    with engine.begin() as db:
        db.execute(sa.text("CREATE TABLE notes (id INTEGER PRIMARY KEY, val TEXT)"))
        db.execute(sa.text("INSERT INTO notes VALUES (1, 'a'), (2, 'b')"))
    enable = ("--incremental-updates-enabled", "--incremental-extraction-method=CHANGELOG")
    first = _offload(run_cli, *enable)
    assert "--reset-backend-table" not in first  # the copy is made in this command
    _offload(run_cli, "--incremental-updates-disabled")
    with engine.begin() as db:  # not captured: no trigger while disabled
        db.execute(sa.text("UPDATE notes SET val = 'changed' WHERE id = 1"))
    again = _offload(run_cli, *enable)
    assert "not in the lake" in again and "--reset-backend-table" in again, again
