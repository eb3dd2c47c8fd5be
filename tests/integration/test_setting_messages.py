"""Settings and storage that are wrong: one line naming what and how to fix it, the right
exit code, nothing written (issue 30). Each case runs the real command."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.cli import error_lines
from typer.testing import Result

from gluon.repo import Repository

RunCli = Callable[..., Result]


@pytest.fixture
def sqlite_source(offload_home: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A SQLite source with ``main.products`` (two rows), as GLUON_SOURCE_URL."""
    path = offload_home.parent / "app.db"
    url = f"sqlite:///{path}"
    monkeypatch.setenv("GLUON_SOURCE_URL", url)
    with sa.create_engine(url).begin() as db:
        db.exec_driver_sql("CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT)")
        db.exec_driver_sql("INSERT INTO products VALUES (1, 'a'), (2, 'b')")
    return url


def one_line(result: Result, program: str, exit_code: int, *fragments: str) -> str:
    lines = error_lines(result)
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"{program}: error: "), lines[0]
    assert "unexpected" not in lines[0] and "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert result.exit_code == exit_code, lines[0]
    return lines[0]


def nothing_written(home: Path) -> None:
    """No lake, and no record in a repository (log and lock files are expected, and the first
    offload may have created an empty repository, as test_bad_input allows)."""
    kept = ("log", "run", "repo")
    written = [p for p in home.rglob("*") if p.is_file() and p.parent.name not in kept]
    assert written == [], written
    assert list(home.parent.rglob("_delta_log")) == []
    repository = home / "repo" / "gluon.db"
    if repository.exists():
        assert Repository(f"sqlite:///{repository}").list_tables() == []


@pytest.mark.parametrize("value", ["1e12", "2000000", "inf", "-1"])
def test_a_timeout_no_source_takes_is_refused_at_load(
    sqlite_source: str,
    offload_home: Path,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
    value: str,
) -> None:
    monkeypatch.setenv("GLUON_SOURCE_LOCK_TIMEOUT", value)
    result = run_cli("offload", "-t", "main.products", "-x")
    one_line(result, "offload", 2, "GLUON_SOURCE_LOCK_TIMEOUT", "from 0 to 1000000", repr(value))
    nothing_written(offload_home)


@pytest.mark.parametrize("value", ["ten", "-1", "inf"])
def test_a_bad_shared_slot_wal_bound_is_refused_at_load(
    sqlite_source: str,
    offload_home: Path,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
    value: str,
) -> None:
    monkeypatch.setenv("GLUON_PG_LOGICAL_MAX_RETAINED_WAL", value)
    result = run_cli("offload", "-t", "main.products", "-x")
    one_line(result, "offload", 2, "GLUON_PG_LOGICAL_MAX_RETAINED_WAL", "MiB", repr(value))
    nothing_written(offload_home)


def test_a_relative_lake_root_is_refused(
    sqlite_source: str,
    offload_home: Path,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OFFLOAD_LAKE_ROOT", "lake")
    result = run_cli("offload", "-t", "main.products", "-x")
    one_line(result, "offload", 2, "OFFLOAD_LAKE_ROOT must be an absolute path", "'lake'")
    assert not (tmp_path / "lake").exists()
    nothing_written(offload_home)


@pytest.mark.parametrize(
    ("url", "fragments"),
    [
        ("mysql://gluon:secret@repohost/gluon", ("a mysql repository is not supported", "sqlite:")),
        ("postgresql+psycopg2://gluon:secret@repohost/gluon", ("driver (psycopg2)",)),
        ("sqlite:///repo/gluon.db", ("relative", "sqlite:////absolute/path/gluon.db")),
    ],
)
def test_a_repository_url_gluon_cannot_use_is_named(
    sqlite_source: str,
    offload_home: Path,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
    url: str,
    fragments: tuple[str, ...],
) -> None:
    monkeypatch.chdir(offload_home.parent)  # where a relative path would land
    monkeypatch.setenv("GLUON_REPO_URL", url)
    result = run_cli("offload", "-t", "main.products", "-x")
    line = one_line(result, "offload", 2, "GLUON_REPO_URL", *fragments)
    assert "secret" not in line
    assert not (offload_home.parent / "repo").exists()
    nothing_written(offload_home)


def test_a_damaged_sqlite_repository_is_named_as_such(
    sqlite_source: str, offload_home: Path, run_cli: RunCli
) -> None:
    path = offload_home / "repo" / "gluon.db"
    Repository(f"sqlite:///{path}", create=True).engine.dispose()
    with path.open("r+b") as file:  # keep the header, damage every page after it
        file.seek(100)
        file.write(b"\xff" * (path.stat().st_size - 100))
    damaged = path.read_bytes()
    for program, args in (
        ("display_incremental_status", ("-t", "main.products")),
        ("offload", ("-t", "main.products", "-x")),
    ):
        result = run_cli(program, *args)
        one_line(result, program, 1, f"the repository {path} is damaged", "restore it")
    assert path.read_bytes() == damaged


def test_an_object_store_without_credentials_is_named_before_anything_is_written(
    sqlite_source: str,
    offload_home: Path,
    run_cli: RunCli,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance role either
    monkeypatch.setenv("AWS_CONFIG_FILE", str(offload_home.parent / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(offload_home.parent / "no-aws-creds"))
    monkeypatch.setenv("OFFLOAD_LAKE_ROOT", "s3://gluon-test-bucket/lake")
    result = run_cli("offload", "-t", "main.products", "-x")
    one_line(result, "offload", 2, "s3://gluon-test-bucket/lake", "AWS_ACCESS_KEY_ID")
    nothing_written(offload_home)


def test_the_enable_plan_names_a_replication_slot_without_a_schema(
    pg_url: str, offload_home: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GLUON_SOURCE_URL", pg_url)
    with sa.create_engine(pg_url).begin() as db:
        db.exec_driver_sql("CREATE TABLE items (id INTEGER PRIMARY KEY, v TEXT)")
    result = run_cli(
        "offload",
        "-t",
        "public.items",
        "--incremental-updates-enabled",
        "--incremental-extraction-method=PG_LOGICAL",
        "--incremental-pg-logical-slot=table",  # a slot of its own: the one the plan names
    )
    assert result.exit_code == 0, result.stderr
    (line,) = [line for line in result.stdout.splitlines() if "create slot" in line]
    assert "create slot gluon_" in line and "public." not in line, line
