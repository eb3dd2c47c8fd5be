"""Shared pytest fixtures for the gluon test suite.

Fixtures are grouped by the service they provide, one section each. Helpers
that are more than a few lines live in ``tests/support/`` and are imported
from here as ``support.<module>``: pytest puts this directory (``tests/``,
which deliberately has no ``__init__.py``) on ``sys.path`` when it loads this
file.
"""

from __future__ import annotations

import re
import uuid
import warnings
from collections.abc import Iterator

import pytest
from support.postgres import PostgresServer

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
