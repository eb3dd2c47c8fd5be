"""What the tests that run ``gluon service`` in this process over PostgreSQL tables share:
the test's own (named) connections, the tables enabled and listed in ``tables.toml``, the
service's client backends counted, and its metrics read."""

from __future__ import annotations

import socket
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from prometheus_client.parser import text_string_to_metric_families

TEST_APPLICATION = "gluon-test-observer"
"""The ``application_name`` of the test's own connections: they are not the service's."""


def observer_engine(pg_url: str) -> Iterator[sa.Engine]:
    """The test's own connections, named so they are not counted as the service's (for a
    fixture to ``yield from``)."""
    engine = sa.create_engine(pg_url, connect_args={"application_name": TEST_APPLICATION})
    yield engine
    engine.dispose()


def enable_service_tables(
    pg_url: str,
    offload_home: Path,
    observer: sa.Engine,
    run_cli: Callable[..., Any],
    tables: Mapping[str, Sequence[str]],
    rows: int,
) -> Path:
    """Create ``app.<name>`` (``rows`` rows) for each of ``tables``, enable it with its
    options, and list them all in ``conf/tables.toml`` (checked every second); its path."""
    with observer.begin() as db:
        db.execute(sa.text("CREATE SCHEMA app"))
        for name in tables:
            db.execute(sa.text(f"CREATE TABLE app.{name} (id INTEGER PRIMARY KEY, v INTEGER)"))
            db.execute(
                sa.text(f"INSERT INTO app.{name} SELECT g, g FROM generate_series(1, {rows}) g")
            )
    (offload_home / "conf").mkdir()
    (offload_home / "conf" / "offload.env").write_text(f"GLUON_SOURCE_URL={pg_url}\n")
    for name, options in tables.items():
        result = run_cli(
            "offload", "-t", f"app.{name}", "-x", "--incremental-updates-enabled", *options
        )
        assert result.exit_code == 0, result.stderr
    path = offload_home / "conf" / "tables.toml"
    lines = ["[defaults]", 'extraction_interval = "1s"', ""]
    path.write_text("\n".join(lines + [f'[tables."app.{name}"]' for name in tables]) + "\n")
    return path


def service_connections(observer: sa.Engine) -> int:
    """The client backends of the database that are not the test's own."""
    with observer.connect() as db:
        return int(
            db.execute(
                sa.text(
                    "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND backend_type = 'client backend' AND application_name <> :mine"
                ),
                {"mine": TEST_APPLICATION},
            ).scalar_one()
        )


def metric_samples(port: int, name: str) -> list[Any]:
    """The samples of metric ``name`` the service's endpoint on ``port`` shows now."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
        text = response.read().decode()
    return [
        sample
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    ]


def shipped_metric(port: int) -> float:
    """``gluon_service_changes_shipped_total``, summed over its labels."""
    samples = metric_samples(port, "gluon_service_changes_shipped_total")
    return float(sum(sample.value for sample in samples))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
