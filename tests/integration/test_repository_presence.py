"""A missing or empty repository is an error unless a command creates one on purpose.

Only the first offload of a table starts a repository. Every other command with no
repository file, a 0-byte one, or an OFFLOAD_HOME that points elsewhere says so in
one line, exits non-zero, and creates nothing (issue 12, reproduction 2).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa
from support.cli import error_lines, run_cli

from gluon.config import load_settings
from gluon.repo import Repository

COMMANDS: list[tuple[str, ...]] = [
    ("offload", "-t", "main.items", "-x", "--incremental-run-extraction"),
    ("offload", "-t", "main.items", "-x", "--incremental-run-compaction"),
    ("offload", "-t", "main.items", "-x", "--incremental-updates-disabled"),
    ("offload", "-t", "main.items", "--incremental-stage-lake-rows=none"),
    ("display_incremental_status", "-t", "main.items"),
    ("offload_status_report",),
    ("gluon", "query", "SELECT 1"),
]


@pytest.fixture
def source(offload_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = offload_home.parent / "app.db"
    monkeypatch.setenv("GLUON_SOURCE_URL", f"sqlite:///{path}")
    with sa.create_engine(f"sqlite:///{path}").begin() as db:
        db.exec_driver_sql("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT)")
        db.exec_driver_sql("INSERT INTO items VALUES (1, 'a'), (2, 'b')")
    return path


def repo_file(home: Path) -> Path:
    return home / "repo" / "gluon.db"


def assert_refused(args: tuple[str, ...], *fragments: str) -> str:
    result = run_cli(*args)
    lines = error_lines(result)
    assert result.exit_code != 0, result.stdout
    assert len(lines) == 1, result.stderr
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda args: "-".join(args[:1] + args[-1:]))
def test_a_missing_repository_is_an_error_and_is_not_created(
    source: Path, offload_home: Path, args: tuple[str, ...]
) -> None:
    assert_refused(args, "no gluon repository", str(repo_file(offload_home)), "OFFLOAD_HOME")
    assert not repo_file(offload_home).exists()


@pytest.mark.parametrize("args", COMMANDS, ids=lambda args: "-".join(args[:1] + args[-1:]))
def test_an_empty_repository_file_is_an_error_and_stays_empty(
    source: Path, offload_home: Path, args: tuple[str, ...]
) -> None:
    repo_file(offload_home).parent.mkdir()
    repo_file(offload_home).touch()
    assert_refused(args, "empty file (0 bytes)")
    assert repo_file(offload_home).stat().st_size == 0


def test_even_the_first_offload_refuses_an_empty_repository_file(
    source: Path, offload_home: Path
) -> None:
    repo_file(offload_home).parent.mkdir()
    repo_file(offload_home).touch()
    assert_refused(("offload", "-t", "main.items", "-x"), "empty file (0 bytes)", "backup")
    assert repo_file(offload_home).stat().st_size == 0
    assert not (offload_home / "lake").exists()


def test_a_misspelt_offload_home_does_not_start_a_new_repository(
    source: Path, offload_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert run_cli("offload", "-t", "main.items", "-x").exit_code == 0
    misspelt = offload_home.parent / "ofload_home"
    misspelt.mkdir()
    monkeypatch.setenv("OFFLOAD_HOME", str(misspelt))
    assert_refused(("display_incremental_status", "-t", "main.items"), str(misspelt))
    assert_refused(("gluon", "query", "SELECT * FROM main.items"), str(misspelt))
    assert not repo_file(misspelt).exists()


def test_the_first_offload_creates_the_repository_with_an_installation_id(
    source: Path, offload_home: Path
) -> None:
    assert run_cli("offload", "-t", "main.items", "-x").exit_code == 0
    installation = Repository(load_settings().repo_url).installation_id
    assert len(installation) == 32
    # Stable: every later command of this installation sees the same id.
    assert Repository(load_settings().repo_url).installation_id == installation


def test_a_database_without_gluon_tables_is_not_a_repository(
    source: Path, offload_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = offload_home.parent / "other.db"
    with sa.create_engine(f"sqlite:///{other}").begin() as db:
        db.exec_driver_sql("CREATE TABLE unrelated (id INTEGER)")
    monkeypatch.setenv("GLUON_REPO_URL", f"sqlite:///{other}")
    assert_refused(("display_incremental_status", "-t", "main.items"), "GLUON_REPO_URL")
    with sa.create_engine(f"sqlite:///{other}").connect() as db:
        assert sa.inspect(db).get_table_names() == ["unrelated"]
