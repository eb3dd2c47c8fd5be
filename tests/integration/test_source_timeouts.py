"""Timeouts toward the source: a hung source fails the command in one line and frees the lock.

A "hung" source is a socket on 127.0.0.1 that accepts connections and never answers,
what a stopped VM, a half-open firewall or a frozen listener looks like. Timeouts are
set small through the environment; the tests assert the failure and its message, never
the elapsed time (pytest's timeout only keeps a regression from hanging the suite).
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import filelock
import pytest
import sqlalchemy as sa
from support.cli import error_lines
from typer.testing import Result

from gluon import source as sources
from gluon.config import SourceTimeouts, load_settings

RunCli = Callable[..., Result]

pytestmark = pytest.mark.timeout(300)


@pytest.fixture
def hung_port() -> Iterator[int]:
    """A local port that accepts TCP connections and never sends a byte."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                connection, _ = server.accept()
            except (TimeoutError, OSError):
                continue
            held.append(connection)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield int(server.getsockname()[1])
    stop.set()
    thread.join()
    for connection in held:
        connection.close()
    server.close()


@pytest.fixture
def small_timeouts(monkeypatch: pytest.MonkeyPatch, offload_home: Path) -> None:
    monkeypatch.setenv("GLUON_SOURCE_CONNECT_TIMEOUT", "2")
    monkeypatch.setenv("GLUON_SOURCE_LOCK_TIMEOUT", "1")


@pytest.fixture
def enabled_items(
    pg_url: str, run_cli: RunCli, offload_home: Path, monkeypatch: pytest.MonkeyPatch
) -> sa.Engine:
    """public.items offloaded with CHANGELOG enabled, and one change waiting."""
    monkeypatch.setenv("GLUON_SOURCE_URL", pg_url)
    engine = sa.create_engine(pg_url)
    with engine.begin() as connection:
        connection.exec_driver_sql("CREATE TABLE public.items (id int PRIMARY KEY, note text)")
        connection.exec_driver_sql("INSERT INTO public.items VALUES (1, 'a'), (2, 'b')")
    result = run_cli(
        "offload",
        "-t",
        "public.items",
        "-x",
        "--incremental-updates-enabled",
        "--incremental-extraction-method=CHANGELOG",
    )
    assert result.exit_code == 0, result.stderr
    with engine.begin() as connection:
        connection.exec_driver_sql("UPDATE public.items SET note = 'c' WHERE id = 1")
    return engine


def hung_url(pg_url: str, port: int) -> str:
    return sa.engine.make_url(pg_url).set(port=port).render_as_string(hide_password=False)


def assert_lock_free(home: Path, operation: str) -> None:
    """A new holder gets the lock at once (an open handle in this process would refuse it)."""
    lock = filelock.FileLock(str(home / "run" / f"public.items.{operation}.lock"), timeout=0)
    lock.acquire()
    lock.release()


def assert_one_line(result: Result, program: str, *fragments: str) -> str:
    lines = error_lines(result)
    assert len(lines) == 1, result.stderr
    (line,) = lines
    assert line.startswith(f"{program}: error: "), line
    for fragment in fragments:
        assert fragment in line, line
    return line


def lake_notes(run_cli: RunCli) -> dict[int, str]:
    result = run_cli("gluon", "query", "--json", "SELECT id, note FROM public.items")
    assert result.exit_code == 0, result.stderr
    return {row["id"]: row["note"] for row in json.loads(result.stdout)}


def test_extraction_from_a_hung_source_fails_and_releases_the_lock(
    enabled_items: sa.Engine,
    pg_url: str,
    hung_port: int,
    small_timeouts: None,
    offload_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    run_cli: RunCli,
) -> None:
    monkeypatch.setenv("GLUON_SOURCE_URL", hung_url(pg_url, hung_port))
    for _ in range(2):  # the second run is not refused as "another extraction is running"
        result = run_cli("offload", "-t", "public.items", "-x", "--incremental-run-extraction")
        assert result.exit_code == 1, result.stderr
        assert_one_line(result, "offload", "timeout")
        assert_lock_free(offload_home, "extraction")

    monkeypatch.setenv("GLUON_SOURCE_URL", pg_url)
    result = run_cli("offload", "-t", "public.items", "-x", "--incremental-run-extraction")
    assert result.exit_code == 0, result.stderr
    assert lake_notes(run_cli) == {1: "c", 2: "b"}


@pytest.mark.parametrize(
    "action",
    ["--incremental-discard-changes", "--incremental-updates-disabled"],
)
def test_table_commands_against_a_hung_source_fail_and_release_the_locks(
    action: str,
    enabled_items: sa.Engine,
    pg_url: str,
    hung_port: int,
    small_timeouts: None,
    offload_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    run_cli: RunCli,
) -> None:
    """Every command that reads the source gets the timeouts (discard had none)."""
    monkeypatch.setenv("GLUON_SOURCE_URL", hung_url(pg_url, hung_port))
    result = run_cli("offload", "-t", "public.items", "-x", action)
    assert result.exit_code == 1, result.stderr
    assert_one_line(result, "offload", "timeout")
    assert_lock_free(offload_home, "lifecycle")
    assert_lock_free(offload_home, "extraction")


def test_status_and_report_over_a_hung_source_finish_and_say_why(
    enabled_items: sa.Engine,
    pg_url: str,
    hung_port: int,
    small_timeouts: None,
    monkeypatch: pytest.MonkeyPatch,
    run_cli: RunCli,
) -> None:
    """Both still show what the repository and the lake know; the backlog is unknown."""
    monkeypatch.setenv("GLUON_SOURCE_URL", hung_url(pg_url, hung_port))
    status = run_cli("display_incremental_status", "-t", "public.items", "--json")
    assert status.exit_code == 0, status.stderr
    backlog = json.loads(status.stdout)["changelog"]
    assert backlog["rows"] is None
    assert "timeout" in backlog["reason"]
    report = run_cli("offload_status_report", "--output-level=detail")
    assert report.exit_code == 0, report.stderr
    saved = next((Path(load_settings().log_dir)).glob("gluon_offload_status_report_*"))
    assert "timeout" in saved.read_text()


def test_offload_and_enable_against_a_hung_source_fail_in_one_line(
    pg_url: str,
    hung_port: int,
    small_timeouts: None,
    offload_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    run_cli: RunCli,
) -> None:
    monkeypatch.setenv("GLUON_SOURCE_URL", hung_url(pg_url, hung_port))
    offload = run_cli("offload", "-t", "public.items", "-x")
    assert offload.exit_code == 1
    assert_one_line(offload, "offload", "cannot connect", "timeout")
    enable = run_cli(
        "offload",
        "-t",
        "public.items",
        "-x",
        "--incremental-updates-enabled",
        "--incremental-extraction-method=CHANGELOG",
    )
    assert enable.exit_code == 1
    assert_one_line(enable, "offload", "timeout")
    assert (
        not (offload_home / "lake").exists()
        or list((offload_home / "lake").rglob("_delta_log")) == []
    )


def test_oracle_listener_that_never_answers(
    hung_port: int, small_timeouts: None, monkeypatch: pytest.MonkeyPatch, run_cli: RunCli
) -> None:
    """oracledb's tcp_connect_timeout stops at the TCP connect; gluon bounds the handshake."""
    monkeypatch.setenv("ORA_CONN", f"127.0.0.1:{hung_port}/freepdb1")
    monkeypatch.setenv("ORA_APP_USER", "gluon")
    monkeypatch.setenv("ORA_APP_PASS", "not-used-here")
    result = run_cli("offload", "-t", "app.items", "-x")
    assert result.exit_code == 1
    assert_one_line(
        result, "offload", "oracle", "no answer within 2s", "GLUON_SOURCE_CONNECT_TIMEOUT"
    )


def test_a_lock_held_by_the_application_fails_the_extraction_not_the_application(
    enabled_items: sa.Engine,
    small_timeouts: None,
    offload_home: Path,
    run_cli: RunCli,
) -> None:
    """A transaction locking the changelog makes gluon give up after the lock timeout."""
    changelog = "public_h.items_log"
    with enabled_items.connect() as application:
        transaction = application.begin()
        application.exec_driver_sql(f"LOCK TABLE {changelog} IN ACCESS EXCLUSIVE MODE")
        result = run_cli("offload", "-t", "public.items", "-x", "--incremental-run-extraction")
        assert result.exit_code == 1, result.stderr
        assert_one_line(result, "offload", "lock timeout")
        assert_lock_free(offload_home, "extraction")
        application.exec_driver_sql("UPDATE public.items SET note = 'd' WHERE id = 2")
        transaction.commit()
    result = run_cli("offload", "-t", "public.items", "-x", "--incremental-run-extraction")
    assert result.exit_code == 0, result.stderr
    assert lake_notes(run_cli) == {1: "c", 2: "d"}


def test_postgres_sessions_carry_the_timeouts_and_keep_the_url_options(pg_url: str) -> None:
    url = sa.engine.make_url(pg_url).update_query_dict({"options": "-c search_path=pg_catalog"})
    source = sources.connect(
        url.render_as_string(hide_password=False),
        SourceTimeouts(connect_seconds=5, statement_seconds=7.5, lock_seconds=2),
    )
    with source.engine.connect() as connection:
        shown = {
            name: connection.exec_driver_sql(f"SHOW {name}").scalar()
            for name in ("statement_timeout", "lock_timeout", "search_path")
        }
    assert shown == {
        "statement_timeout": "7500ms",
        "lock_timeout": "2s",
        "search_path": "pg_catalog",
    }
    unbounded = sources.connect(pg_url, SourceTimeouts(0, 0, 0))
    with unbounded.engine.connect() as connection:
        assert connection.exec_driver_sql("SHOW statement_timeout").scalar() == "0"


@pytest.mark.parametrize("value", ["abc", "-1", "inf", "nan"])
def test_malformed_timeout_setting(
    offload_home: Path, monkeypatch: pytest.MonkeyPatch, run_cli: RunCli, value: str
) -> None:
    monkeypatch.setenv("GLUON_SOURCE_URL", "sqlite:////nonexistent/app.db")
    monkeypatch.setenv("GLUON_SOURCE_STATEMENT_TIMEOUT", value)
    result = run_cli("offload", "-t", "main.items", "-x")
    assert result.exit_code == 2
    assert_one_line(result, "offload", "GLUON_SOURCE_STATEMENT_TIMEOUT", repr(value))
    assert list(offload_home.iterdir()) == []


def test_sqlite_busy_timeout_follows_the_lock_timeout(
    tmp_path: Path,
    small_timeouts: None,
    offload_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    run_cli: RunCli,
) -> None:
    """An application holding the file's write lock makes the extraction give up, then work."""
    url = f"sqlite:///{tmp_path / 'app.db'}"
    bounded = sources.connect(url, SourceTimeouts(lock_seconds=1.5))
    with bounded.engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() == 1500
    monkeypatch.setenv("GLUON_SOURCE_URL", url)
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        connection.exec_driver_sql("CREATE TABLE items (id INTEGER PRIMARY KEY, note TEXT)")
        connection.exec_driver_sql("INSERT INTO items VALUES (1, 'a'), (2, 'b')")
    enabled = run_cli(
        "offload",
        "-t",
        "main.items",
        "-x",
        "--incremental-updates-enabled",
        "--incremental-extraction-method=CHANGELOG",
    )
    assert enabled.exit_code == 0, enabled.stderr
    application = engine.raw_connection()
    try:
        cursor = application.cursor()
        cursor.execute("BEGIN EXCLUSIVE")
        cursor.execute("UPDATE items SET note = 'c' WHERE id = 1")
        result = run_cli("offload", "-t", "main.items", "-x", "--incremental-run-extraction")
        assert result.exit_code == 1, result.stderr
        assert_one_line(result, "offload", "database is locked")
        application.commit()
    finally:
        application.close()
    result = run_cli("offload", "-t", "main.items", "-x", "--incremental-run-extraction")
    assert result.exit_code == 0, result.stderr
    notes = run_cli("gluon", "query", "--json", "SELECT id, note FROM main.items")
    assert {row["id"]: row["note"] for row in json.loads(notes.stdout)} == {1: "c", 2: "b"}
