"""Every statement gluon sends to Spark stays inside the subset Sail and Spark+Delta share.

The session fixture ``recorded_sql_path`` (tests/conftest.py) records every
statement of the whole test session and checks them all at the end; this test
checks, right after a real offload and query, that recording works at all
and that what was just recorded is portable.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.cli import query_json
from support.lake import read_arrow
from support.sql import read_statements, violating_statements
from typer.testing import Result

RunCli = Callable[..., Result]


def test_offload_and_query_record_only_portable_statements(
    offload_home: Path,
    monkeypatch: pytest.MonkeyPatch,
    recorded_sql_path: Path,
    run_cli: RunCli,
) -> None:
    source = offload_home.parent / "app.db"
    monkeypatch.setenv("GLUON_SOURCE_URL", f"sqlite:///{source}")
    engine = sa.create_engine(f"sqlite:///{source}")
    with engine.begin() as connection:
        connection.exec_driver_sql(
            "CREATE TABLE sales (id INTEGER PRIMARY KEY, sold_on DATE, amount DECIMAL(10,2))"
        )
        connection.exec_driver_sql(
            "INSERT INTO sales VALUES (1, '2024-01-05', 1.25), (2, '2024-02-05', 2.5)"
        )
    engine.dispose()
    already = len(read_statements(recorded_sql_path))

    result = run_cli("offload", "-t", "main.sales", "-x", "--partition-columns=sold_on")
    assert result.exit_code == 0, result.stderr
    assert len(query_json("SELECT count(*) AS n FROM main.sales")) == 1
    assert read_arrow("SELECT sum(amount) AS total FROM main.sales").num_rows == 1

    statements = read_statements(recorded_sql_path)
    assert statements, f"nothing was recorded in {recorded_sql_path}"
    new = statements[already:]
    kinds = {statement["kind"] for statement in new}
    assert kinds == {"sql", "write"}
    texts = [statement["text"] for statement in new]
    base = str(offload_home / "lake" / "main.db" / "sales_data")
    assert any(text.startswith("overwrite " + base) for text in texts)
    assert any("USING delta LOCATION" in text for text in texts)
    assert any(text.startswith("CREATE OR REPLACE VIEW `main`.`sales`") for text in texts)
    assert "SELECT count(*) AS n FROM main.sales" in texts
    assert "SELECT sum(amount) AS total FROM main.sales" in texts
    assert violating_statements(recorded_sql_path) == []


def test_the_engine_switch(offload_home: Path) -> None:
    """GLUON_TEST_SPARK_REMOTE (tests/conftest.py) moves the whole suite to Spark Connect."""
    from gluon.config import EngineKind, load_settings

    remote = os.environ.get("GLUON_TEST_SPARK_REMOTE")
    settings = load_settings()
    if remote:
        assert (settings.engine, settings.spark_remote) == (EngineKind.REMOTE, remote)
    else:
        assert (settings.engine, settings.spark_remote) == (EngineKind.SAIL, None)
