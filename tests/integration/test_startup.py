"""Start-up (issue 14): commands load only what they use.

* A no-op extraction and ``display_incremental_status`` start no lake engine and import
  neither the compaction code nor Alembic (the repository is up to date), nor the
  predicate parser, nor rich (their lines are plain), nor pyarrow, numpy or pandas
  (about a third of the start-up before they were made lazy). Checked in a fresh
  process, from ``sys.modules`` after the command: the test process itself has
  imported everything. An extraction with changes to ship loads Arrow (it writes its
  batch with deltalake, still without the engine) and ``gluon query`` starts the engine,
  so the checks can tell the cases apart.
* ``gluon query`` registers only the tables its statement names, seen in the statements
  gluon sends to the engine (``GLUON_RECORD_SQL``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.cli import error_lines
from support.incremental import RunCli
from support.sql import read_statements

import gluon

ENGINE_MODULES = ("pyspark", "pysail")
UNUSED_MODULES = (
    "gluon.compact.runner",
    "gluon.offload.copy",
    "gluon.lifecycle.patching",
    "gluon.predicates",
    "alembic",
    "rich",
)
ARROW_MODULES = ("pyarrow", "numpy", "pandas")
"""Loaded only when rows are read or written (status reads Delta statistics through
deltalake's own Arrow tables)."""

PROBE = """
import json, sys
from importlib import import_module

module, argv = sys.argv[1], sys.argv[2:]
sys.argv = [module, *argv]
code = 0
try:
    import_module(module).main()
except SystemExit as exc:
    code = exc.code or 0
print(json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""
"""Runs a command's ``main`` in a fresh interpreter; prints its exit code and modules."""


def _run_fresh(module: str, *argv: str) -> tuple[int, set[str], str]:
    # The gluon under test, whatever the working directory (``-c`` puts it first on the path).
    here = str(Path(gluon.__file__).parents[1])
    path = os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-c", PROBE, module, *argv],
        cwd=Path(os.environ["OFFLOAD_HOME"]),
        env={**os.environ, "PYTHONPATH": path},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    lines = done.stdout.strip().splitlines()
    assert lines, done.stderr
    report = json.loads(lines[-1])
    return int(report["code"]), set(report["modules"]), done.stdout + done.stderr


def _loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return [name for name in names if name in modules]


def _create(engine: sa.Engine, table: str, rows: int) -> None:
    with engine.begin() as db:
        db.execute(sa.text(f"CREATE TABLE {table} (id integer PRIMARY KEY, label text)"))
        db.execute(
            sa.text(f"INSERT INTO {table} VALUES (:id, :label)"),
            [{"id": n, "label": f"row {n}"} for n in range(1, rows + 1)],
        )


def _enable(run_cli: RunCli, table: str) -> None:
    result = run_cli(
        "offload",
        "-t",
        table,
        "-x",
        "--incremental-updates-enabled",
        "--incremental-extraction-method=CHANGELOG",
    )
    assert result.exit_code == 0, result.stderr


@pytest.mark.usefixtures("offload_home")
def test_a_no_op_extraction_and_status_start_no_engine(
    tmp_path: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    monkeypatch.setenv("GLUON_SOURCE_URL", url)
    engine = sa.create_engine(url)
    _create(engine, "items", 3)
    _enable(run_cli, "main.items")

    extract = ("gluon.cli.offload", "-t", "main.items", "-x", "--incremental-run-extraction")
    code, modules, output = _run_fresh(*extract)
    assert code == 0, output
    assert "Extracted 0 changes" in output
    assert _loaded(modules, ENGINE_MODULES) == [], "a no-op extraction started the engine"
    assert _loaded(modules, UNUSED_MODULES) == []
    assert _loaded(modules, ARROW_MODULES) == [], "a no-op extraction loaded Arrow"

    code, modules, output = _run_fresh("gluon.cli.status", "-t", "main.items")
    assert code == 0, output
    assert "Changes waiting in the changelog:  0" in output
    assert _loaded(modules, ENGINE_MODULES) == [], "status started the engine"
    assert _loaded(modules, UNUSED_MODULES) == []
    assert _loaded(modules, ARROW_MODULES) == [], "status loaded Arrow"

    # The same probe sees Arrow when rows are shipped (an append is written with deltalake,
    # no engine) and the engine when a query reads the lake: the checks above can fail.
    with engine.begin() as db:
        db.execute(sa.text("UPDATE items SET label = 'changed' WHERE id = 2"))
    code, modules, output = _run_fresh(*extract)
    assert code == 0, output
    assert "Extracted 1 changes" in output
    assert "pyarrow" in modules
    # Its progress bar asks whether stderr is a terminal: not one, so rich stays unloaded.
    assert "rich" not in modules, "an extraction with changes loaded rich off a terminal"
    _assert_a_query_starts_the_engine("main.items")


@pytest.mark.usefixtures("offload_home")
def test_a_no_op_pg_logical_extraction_starts_no_engine(
    pg_url: str, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PG_LOGICAL cannot count what is pending without reading the slot: its no-op run
    peeks once and finds nothing, still without an engine."""
    monkeypatch.setenv("GLUON_SOURCE_URL", pg_url)
    engine = sa.create_engine(pg_url)
    with engine.begin() as db:
        db.execute(sa.text("CREATE SCHEMA app"))
    _create(engine, "app.items", 3)
    result = run_cli(
        "offload",
        "-t",
        "app.items",
        "-x",
        "--incremental-updates-enabled",
        "--incremental-extraction-method=PG_LOGICAL",
    )
    assert result.exit_code == 0, result.stderr
    extract = ("gluon.cli.offload", "-t", "app.items", "-x", "--incremental-run-extraction")
    code, modules, output = _run_fresh(*extract)
    assert code == 0, output
    assert "Extracted 0 changes" in output
    assert _loaded(modules, ENGINE_MODULES) == [], "a no-op extraction started the engine"

    with engine.begin() as db:
        db.execute(sa.text("UPDATE app.items SET label = 'changed' WHERE id = 2"))
    code, modules, output = _run_fresh(*extract)
    assert code == 0, output
    assert "Extracted 1 changes" in output
    _assert_a_query_starts_the_engine("app.items")
    engine.dispose()


def _assert_a_query_starts_the_engine(table: str) -> None:
    """The probe's power: a command that reads the lake loads the engine's modules."""
    code, modules, output = _run_fresh("gluon.cli.app", "query", f"SELECT COUNT(*) FROM {table}")
    assert code == 0, output
    assert _loaded(modules, ENGINE_MODULES) == list(ENGINE_MODULES)


def _registered_since(recorded_sql_path: Path, already: int) -> str:
    """The text of the statements recorded after the first ``already``, lower case."""
    return "\n".join(s["text"].lower() for s in read_statements(recorded_sql_path)[already:])


@pytest.mark.usefixtures("offload_home")
def test_gluon_query_registers_only_the_tables_it_names(
    tmp_path: Path, run_cli: RunCli, monkeypatch: pytest.MonkeyPatch, recorded_sql_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'app.db'}"
    monkeypatch.setenv("GLUON_SOURCE_URL", url)
    engine = sa.create_engine(url)
    for table, count in (("alpha", 2), ("beta", 3), ("gamma", 4)):
        _create(engine, table, count)
    _enable(run_cli, "main.alpha")
    for table in ("main.beta", "main.gamma"):
        result = run_cli("offload", "-t", table, "-x")
        assert result.exit_code == 0, result.stderr

    def query(statement: str) -> tuple[list[dict[str, object]], str]:
        already = len(read_statements(recorded_sql_path))
        result = run_cli("gluon", "query", "--json", statement)
        assert result.exit_code == 0, error_lines(result)
        return json.loads(result.stdout), _registered_since(recorded_sql_path, already)

    rows, sent = query("SELECT count(*) AS n FROM main.alpha")
    assert rows == [{"n": 2}]
    assert "alpha_data" in sent and "alpha_changes" in sent
    assert "beta" not in sent and "gamma" not in sent

    rows, sent = query("SELECT count(*) AS n FROM `main`.`beta` b JOIN main.gamma g ON b.id = g.id")
    assert rows == [{"n": 3}]
    assert "beta_data" in sent and "gamma_data" in sent
    assert "alpha" not in sent

    # The tables' own objects count as names too: the delta table, the base table.
    rows, sent = query("SELECT count(*) AS n FROM main_load.alpha_changes")
    assert rows == [{"n": 0}]
    assert "beta" not in sent and "gamma" not in sent
