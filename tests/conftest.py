"""Shared pytest fixtures for the gluon test suite.

Fixtures are grouped by the service they provide, one section each. Helpers
that are more than a few lines live in ``tests/support/`` and are imported
from here as ``support.<module>``: pytest puts this directory (``tests/``,
which deliberately has no ``__init__.py``) on ``sys.path`` when it loads this
file.
"""

from __future__ import annotations

import os
import re
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support import cli as support_cli
from support import sql as support_sql
from support.cli import GLUON_SETTINGS
from support.postgres import PostgresServer
from support.s3 import S3Server
from typer.testing import Result

from gluon import logs
from gluon.env_file import OBJECT_STORE_PREFIXES as OBJECT_STORE

# ---------------------------------------------------------------------------
# PostgreSQL
#
# One throwaway cluster (initdb + pg_ctl on a free local port, trust auth, no
# fsync) serves the whole session; every test that asks for ``pg_url`` gets a
# brand-new database of its own, dropped again after the test.
# ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PostgresServer]:
    """The session's PostgreSQL server (started on first use, stopped at the end)."""
    server = PostgresServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pg_url(pg_server: PostgresServer, request: pytest.FixtureRequest) -> Iterator[str]:
    """SQLAlchemy URL (``postgresql+psycopg://...``) of a fresh, empty database for this test."""
    stem = re.sub(r"[^a-z0-9_]+", "_", request.node.name.lower()).strip("_")[:40]
    name = f"t_{stem}_{uuid.uuid4().hex[:8]}"
    url = pg_server.create_database(name)
    yield url
    try:
        pg_server.drop_database(name)
    except Exception as exc:  # the cluster is thrown away anyway; don't fail the test
        warnings.warn(f"could not drop test database {name}: {exc}", stacklevel=1)


# ---------------------------------------------------------------------------
# S3-compatible object store
#
# One moto server (support/s3.py) on 127.0.0.1 serves the whole session, started on
# first use; every test that asks for ``s3_bucket`` gets a brand-new bucket of its own.
# ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """The session's S3-compatible server (``.env()`` gives the AWS_* settings to reach it)."""
    server = S3Server()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_bucket(s3_server: S3Server) -> str:
    """The name of a fresh, empty bucket on the session's S3 server."""
    return s3_server.create_bucket()


# ---------------------------------------------------------------------------
# gluon environment and CLI
#
# ``offload_home`` gives each test its own OFFLOAD_HOME (default lake root,
# repository and log directory all live below it) and removes every other
# gluon setting the developer's shell may carry, so a test sees only what it
# sets itself. ``run_cli`` runs ``offload`` or ``gluon`` in this process with
# Typer's CliRunner: one embedded Sail server then serves the whole pytest
# process (gluon/lake/session.py starts it on first use), which keeps the
# integration tests fast.
#
# Engine switch: set GLUON_TEST_SPARK_REMOTE=sc://host:port to run the whole
# integration suite against a Spark Connect server (Spark 4.2 with delta-spark)
# instead of embedded Sail; ``offload_home`` then exports it as SPARK_REMOTE.
# The server must see the test's lake paths (same machine or a shared
# filesystem), since the lake root is a local temporary directory.
# ---------------------------------------------------------------------------

SPARK_REMOTE_ENV = "GLUON_TEST_SPARK_REMOTE"


@pytest.fixture
def offload_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh OFFLOAD_HOME (exported), with every other gluon setting cleared."""
    home = tmp_path / "offload_home"
    home.mkdir()
    for name in GLUON_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OFFLOAD_HOME", str(home))
    remote = os.environ.get(SPARK_REMOTE_ENV)
    if remote:
        monkeypatch.setenv("SPARK_REMOTE", remote)
    return home


@pytest.fixture
def run_cli() -> Callable[..., Result]:
    """``run_cli("offload", "-t", "main.t", "-x")`` -> Click Result (see support.cli)."""
    return support_cli.run_cli


# ---------------------------------------------------------------------------
# Engine portability: every statement gluon sends to Spark is recorded
#
# gluon/lake/sqllog.py appends one JSON line per statement to the file named
# by GLUON_RECORD_SQL. The whole session records into one file; at the end of
# the session every statement is checked against the subset that works on
# both Sail and Spark+Delta (support/portable_sql.py parses each one), and the session fails if any
# statement falls outside it.
# ---------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def forget_secrets() -> Iterator[None]:
    """Each test starts with no remembered secrets: gluon.logs keeps them for the process, so
    a password one test configured ("another") was masked in every later test's messages."""
    yield
    logs.forget_secrets()


@pytest.fixture(autouse=True)
def restore_object_store_environment() -> Iterator[None]:
    """Each test starts with the process's own object-store variables: a command puts its env
    file's ``AWS_*`` (and Azure, GCS) settings into the environment for the engine and
    deltalake (gluon.config.export_object_store), which in this long-lived process would
    reach every later test."""
    before = {key: value for key, value in os.environ.items() if key.startswith(OBJECT_STORE)}
    yield
    for key in [key for key in os.environ if key.startswith(OBJECT_STORE)]:
        if key not in before:
            del os.environ[key]
    os.environ.update(before)


@pytest.fixture(scope="session", autouse=True)
def recorded_sql_path(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The file this session's Spark statements are recorded in (checked at the end)."""
    path = tmp_path_factory.mktemp("recorded_sql") / "statements.jsonl"
    path.touch()
    previous = os.environ.get("GLUON_RECORD_SQL")
    os.environ["GLUON_RECORD_SQL"] = str(path)
    try:
        yield path
    finally:
        if previous is None:
            os.environ.pop("GLUON_RECORD_SQL", None)
        else:
            os.environ["GLUON_RECORD_SQL"] = previous
    bad = support_sql.violating_statements(path)
    if bad:
        listed = "\n".join(f"  {names}: {text}" for names, text in bad)
        pytest.fail(
            f"{len(bad)} statement(s) sent to Spark use constructs outside the portable "
            f"subset (tests/support/portable_sql.py):\n{listed}",
            pytrace=False,
        )
