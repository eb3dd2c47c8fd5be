"""Helpers for incremental-update tests: sources, enabling, extracting, reading the lake."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass

import sqlalchemy as sa
from typer.testing import Result

from gluon.config import load_settings
from gluon.methods import registered_methods
from gluon.methods.base import SourceObject, ViewKind
from gluon.read.catalog import lake_session
from gluon.repo import Repository
from support.workload import Row, Workload, canonical

SEED = int(os.environ.get("GLUON_TEST_SEED", "20261122"))
RunCli = Callable[..., Result]


@dataclass
class Source:
    dialect: str
    url: str
    schema: str

    @property
    def engine(self) -> sa.Engine:
        return sa.create_engine(self.url)

    @property
    def table(self) -> str:
        return f"{self.schema}.items"


def sqlite_source(path: object) -> Source:
    return Source("sqlite", f"sqlite:///{path}", "main")


def postgres_source(url: str) -> Source:
    with sa.create_engine(url).begin() as db:
        db.execute(sa.text("CREATE SCHEMA IF NOT EXISTS app"))
    return Source("postgresql", url, "app")


def methods_for(dialect: str) -> list[str]:
    return sorted(
        name for name, method in registered_methods().items() if method.supports_dialect(dialect)
    )


def lake_rows(statement: str) -> list[dict[str, object]]:
    with lake_session(load_settings()) as session:
        rows: list[dict[str, object]] = session.sql(statement).toArrow().to_pylist()
        return rows


def lake_state(schema: str) -> dict[int, Row]:
    """The user view of ``<schema>.items`` by key (fails if a key shows twice)."""
    rows = [canonical(row) for row in lake_rows(f"SELECT * FROM {schema}.items")]
    keys = [row[0] for row in rows]
    assert len(keys) == len(set(keys)), "the user view shows a key twice"
    return {row[0]: row for row in rows}


def enable(run_cli: RunCli, source: Source, method: str, *extra: str) -> None:
    result = run_cli(
        "offload",
        "-t",
        source.table,
        "-x",
        "--incremental-updates-enabled",
        f"--incremental-extraction-method={method}",
        *extra,
    )
    assert result.exit_code == 0, result.stderr


def extract(run_cli: RunCli, source: Source) -> Result:
    result = run_cli("offload", "-t", source.table, "-x", "--incremental-run-extraction")
    assert result.exit_code == 0, result.stderr
    return result


def workload_for(source: Source, method_name: str, seed: int) -> Workload:
    method = registered_methods()[method_name]
    return Workload(
        engine=source.engine,
        schema=source.schema,
        trigger_captures=method.has_object(SourceObject.CHANGELOG_TRIGGER)
        or method.has_object(SourceObject.REPLICATION_SLOT),
        inserts_only=method.view_kind is ViewKind.UNION_ALL,
        rng=random.Random(seed),
    )


def attach_patch_view(workload: Workload, source: Source, method_name: str) -> None:
    """Point the workload's patches at the updatable view, for the UPDATABLE family."""
    if not registered_methods()[method_name].has_object(SourceObject.UPDATABLE_VIEW):
        return
    state = Repository(load_settings().repo_url).incremental.get_state(source.table.upper())
    assert state is not None
    view = next(o for o in state.source_objects if o.kind == SourceObject.UPDATABLE_VIEW.value)
    workload.patch_view = f"{view.schema}.{view.name}"


def assert_no_duplicate_sequences(source: Source) -> None:
    duplicated = lake_rows(
        f"SELECT gl_seq, COUNT(*) AS n FROM {source.schema}_load.items_changes "
        "GROUP BY gl_seq HAVING COUNT(*) > 1"
    )
    assert duplicated == [], f"gl_seq values shipped twice: {duplicated}"


def run_offload_process(
    *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``offload ARGS`` in a child process (for kills and locks)."""
    return subprocess.run(
        [sys.executable, "-c", "from gluon.cli.offload import main; main()", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=300,
        check=False,
    )
