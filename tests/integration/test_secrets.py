"""No password or token in any log, message or file, whatever form the URL takes.

Each case gives a secret in one of the forms gluon accepts (``user:password@``,
``?password=``, Oracle's ``ORA_APP_PASS``, a repository URL, a Spark Connect token),
runs real commands (failing ones, where the driver's exception carries the URL or
DSN, and successful ones with ``-v`` and ``--debug``), then reads every file gluon
wrote under OFFLOAD_HOME and everything it printed, looking for the secret.
"""

from __future__ import annotations

import socket
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from typer.testing import Result

RunCli = Callable[..., Result]

SECRET = "Pa55-w0rd_Zq9"
"""Contains no character a URL would need to encode, so every form carries it verbatim."""

ENCODED_SECRET = "Pa55@w0rd/Zq9"
"""Needs percent-encoding in a URL: neither the encoded nor the plain form may leak."""


def closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def files_under(home: Path) -> Iterator[Path]:
    return (path for path in home.rglob("*") if path.is_file())


def assert_secret_nowhere(home: Path, results: list[Result], *secrets: str) -> None:
    """No ``secrets`` in stdout/stderr of ``results`` nor in any file below ``home``."""
    forms = {form for secret in secrets for form in (secret, secret.replace("@", "%40"))}
    for result in results:
        for form in forms:
            assert form not in result.stdout, result.stdout
            assert form not in result.stderr, result.stderr
    for path in files_under(home):
        content = path.read_bytes()
        for form in forms:
            assert form.encode() not in content, f"{form!r} found in {path}"


def assert_logs_private(home: Path) -> None:
    log_dir = home / "log"
    assert stat.S_IMODE(log_dir.stat().st_mode) == 0o700
    logs = list(log_dir.glob("*.log"))
    assert logs
    for log in logs:
        assert stat.S_IMODE(log.stat().st_mode) == 0o600, log


@pytest.fixture
def sqlite_url(offload_home: Path) -> str:
    path = offload_home.parent / "app.db"
    engine = sa.create_engine(f"sqlite:///{path}")
    with engine.begin() as connection:
        connection.exec_driver_sql("CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT)")
        connection.exec_driver_sql("INSERT INTO products VALUES (1, 'a'), (2, 'b')")
    return f"sqlite:///{path}"


FAILING_SOURCES = {
    "url-userinfo": {"GLUON_SOURCE_URL": f"postgresql+psycopg://gluon:{SECRET}@127.0.0.1:PORT/app"},
    "url-query": {
        "GLUON_SOURCE_URL": f"postgresql+psycopg://gluon@127.0.0.1:PORT/app?password={SECRET}"
    },
    "url-host-query": {
        "GLUON_SOURCE_URL": f"postgresql+psycopg:///app?host=127.0.0.1&port=PORT&password={SECRET}"
    },
    "url-encoded": {
        "GLUON_SOURCE_URL": "postgresql+psycopg://gluon:"
        + ENCODED_SECRET.replace("@", "%40").replace("/", "%2F")
        + "@127.0.0.1:PORT/app"
    },
    "oracle-ora-app-pass": {
        "ORA_CONN": "127.0.0.1:PORT/freepdb1",
        "ORA_APP_USER": "gluon",
        "ORA_APP_PASS": SECRET,
    },
    "oracle-url": {
        "GLUON_SOURCE_URL": f"oracle+oracledb://gluon:{SECRET}@127.0.0.1:PORT/?service_name=x"
    },
    "oracle-ezconnect-in-ora-conn": {
        "ORA_CONN": f"gluon/{SECRET}@127.0.0.1:PORT/freepdb1",
        "ORA_APP_USER": "gluon",
        "ORA_APP_PASS": "another",
    },
    "not-a-url": {"GLUON_SOURCE_URL": f"gluon:{SECRET}@127.0.0.1/app"},
    "unsupported-dialect": {"GLUON_SOURCE_URL": f"postgres://gluon:{SECRET}@127.0.0.1/app"},
}


@pytest.mark.parametrize("case", sorted(FAILING_SOURCES))
@pytest.mark.parametrize("flags", [["-v"], ["--debug"]], ids=["verbose", "debug"])
def test_failing_source_never_shows_its_password(
    offload_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    run_cli: RunCli,
    case: str,
    flags: list[str],
) -> None:
    port = str(closed_port())
    for name, value in FAILING_SOURCES[case].items():
        monkeypatch.setenv(name, value.replace("PORT", port))
    results = [
        run_cli("offload", "-t", "public.products", "-x", *flags),
        run_cli("offload", "-t", "public.products", "-x", "--incremental-run-extraction", *flags),
        run_cli("display_incremental_status", "-t", "public.products", *flags),
        run_cli("offload_status_report", *flags),
    ]
    assert results[0].exit_code != 0
    assert "error" in results[0].stderr
    assert_secret_nowhere(offload_home, results, SECRET, ENCODED_SECRET)


FAILING_REPOSITORIES = {
    "repo-userinfo": f"postgresql+psycopg://gluon:{SECRET}@127.0.0.1:PORT/repo",
    "repo-query": f"postgresql+psycopg://gluon@127.0.0.1:PORT/repo?password={SECRET}",
    "repo-bad-database": f"postgresql+psycopg://gluon:{SECRET}@127.0.0.1:PORT/repo?sslmode=nonsense",
}


@pytest.mark.parametrize("case", sorted(FAILING_REPOSITORIES))
def test_failing_repository_never_shows_its_password(
    offload_home: Path,
    sqlite_url: str,
    monkeypatch: pytest.MonkeyPatch,
    run_cli: RunCli,
    case: str,
) -> None:
    monkeypatch.setenv("GLUON_SOURCE_URL", sqlite_url)
    monkeypatch.setenv(
        "GLUON_REPO_URL", FAILING_REPOSITORIES[case].replace("PORT", str(closed_port()))
    )
    results = [
        run_cli("offload", "-t", "main.products", "-x", "-v"),
        run_cli("offload", "-t", "main.products", "-x", "--debug"),
        run_cli("display_incremental_status", "-t", "main.products", "-v"),
        run_cli("offload_status_report", "--debug"),
        run_cli("gluon", "query", "SELECT 1", "-v"),
    ]
    assert all(result.exit_code == 1 for result in results), [r.stderr for r in results]
    assert_secret_nowhere(offload_home, results, SECRET)
    assert_logs_private(offload_home)


def test_spark_connect_token_never_shown(
    offload_home: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch, run_cli: RunCli
) -> None:
    monkeypatch.setenv("SPARK_REMOTE", f"sc://127.0.0.1:{closed_port()}/;token={SECRET};user_id=x")
    monkeypatch.setenv("GLUON_SOURCE_URL", sqlite_url)
    results = [  # the offload starts the repository that the query needs
        run_cli("offload", "-t", "main.products", "-x", "--debug"),
        run_cli("gluon", "query", "SELECT 1", "-v"),
    ]
    assert all(result.exit_code == 1 for result in results)
    assert_secret_nowhere(offload_home, results, SECRET)


def _with_password(pg_url: str, form: str) -> str:
    url = sa.engine.make_url(pg_url)
    if form == "userinfo":
        return url.set(password=SECRET).render_as_string(hide_password=False)
    return url.update_query_dict({"password": SECRET}).render_as_string(hide_password=False)


@pytest.mark.parametrize("form", ["userinfo", "query"])
def test_successful_lifecycle_with_a_password_writes_it_nowhere(
    pg_url: str,
    offload_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    run_cli: RunCli,
    form: str,
) -> None:
    """The test cluster trusts local connections, so the password is accepted and ignored."""
    engine = sa.create_engine(pg_url)
    with engine.begin() as connection:
        connection.exec_driver_sql("CREATE TABLE public.items (id int PRIMARY KEY, note text)")
        connection.exec_driver_sql("INSERT INTO public.items VALUES (1, 'a'), (2, 'b')")
    monkeypatch.setenv("GLUON_SOURCE_URL", _with_password(pg_url, form))
    steps = [
        ("offload", "-t", "public.items", "-x", "-v"),
        (
            "offload",
            "-t",
            "public.items",
            "-x",
            "-v",
            "--incremental-updates-enabled",
            "--incremental-extraction-method=CHANGELOG",
        ),
    ]
    results = [run_cli(*step) for step in steps]

    def compact(*flags: str) -> Result:
        return run_cli(
            "offload",
            "-t",
            "public.items",
            "-x",
            "-v",
            "--incremental-run-compaction",
            "--incremental-wait-time=0",
            *flags,
        )

    with engine.begin() as connection:
        connection.exec_driver_sql("UPDATE public.items SET note = 'c' WHERE id = 1")
    results += [
        run_cli("offload", "-t", "public.items", "-x", "-v", "--incremental-run-extraction"),
        compact("--incremental-terminate-compaction"),  # the single-session compaction
        run_cli("offload", "-t", "public.items", "-x", "-v", "--incremental-run-extraction"),
        compact(),
        run_cli("display_incremental_status", "-t", "public.items", "-v"),
        run_cli("offload_status_report", "--output-level=detail", "--output-format=html", "-v"),
        run_cli("gluon", "query", "--json", "SELECT * FROM public.items", "-v"),
    ]
    assert [result.exit_code for result in results] == [0] * len(results), [
        result.stderr for result in results
    ]
    assert '"note": "c"' in results[-1].stdout
    assert_secret_nowhere(offload_home, results, SECRET)
    assert_logs_private(offload_home)
