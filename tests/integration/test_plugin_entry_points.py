"""A method and a dialect from a package outside gluon (issue 27): found through the entry
point groups ``gluon.methods`` and ``gluon.dialects``, with no edit of gluon.

The package is not installed: a folder holding it and its ``.dist-info`` (METADATA and
entry_points.txt, what pip writes) is put on the ``PYTHONPATH`` of the processes the test
starts, so importlib.metadata finds it as it finds an installed one, and nothing of it
reaches this test process's registries. The toy dialect extends SQLite (``class
ToySource(SQLiteSource)``): SQLAlchemy learns its backend name from the package's
``sqlalchemy.dialects`` entry point, and gluon renders SQLite's templates for it, except
the one the package ships itself.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support.cli import GLUON_SETTINGS

PACKAGE = "toy_gluon_plugin"
METHOD = "TOY_CHANGELOG"
DIALECT = "toysqlite"

PLUGIN_MODULE = f'''
"""A method and a source dialect gluon does not ship."""

from pathlib import Path

from sqlalchemy.dialects.sqlite.pysqlite import SQLiteDialect_pysqlite

from gluon.methods.base import (
    CHANGELOG_OBJECTS,
    DML,
    ExtractionMethod,
    OffloadUseCase,
    SourceObject,
)
from gluon.source.sqlite import SQLiteSource


class ToyChangelogMethod(ExtractionMethod):
    name = "{METHOD}"
    summary = "a toy from outside gluon"
    captured_dml = frozenset(DML)
    offload_use_cases = frozenset({{OffloadUseCase.FULL_100_0}})
    source_objects = (*CHANGELOG_OBJECTS, SourceObject.CHANGELOG_TRIGGER)
    when_to_use = "Never: it shows that a package outside gluon can add a method."


class ToySource(SQLiteSource):
    name = "{DIALECT}"
    template_folders = (str(Path(__file__).parent / "templates"),)


class ToySQLAlchemyDialect(SQLiteDialect_pysqlite):
    name = "{DIALECT}"
    supports_statement_cache = True
'''

ENTRY_POINTS = f"""
[gluon.methods]
{METHOD} = {PACKAGE}:ToyChangelogMethod

[gluon.dialects]
{DIALECT} = {PACKAGE}:ToySource

[sqlalchemy.dialects]
{DIALECT} = {PACKAGE}:ToySQLAlchemyDialect
"""

PROBE = f"""
import json
from gluon.methods import get_method, registered_methods
from gluon.source import connect, dialect_class, dialect_names
source = connect("{DIALECT}:///:memory:")
print(json.dumps({{
    "methods": sorted(registered_methods()),
    "found": get_method("{METHOD.lower()}").name,
    "dialects": dialect_names(),
    "dialect": dialect_class("{DIALECT}").__name__,
    "ping": source.render("ping"),
    "count_rows": source.render("count_rows", schema="main", table="t"),
}}))
"""


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding the toy package and its dist-info, as site-packages would."""
    root = tmp_path_factory.mktemp("site")
    package = root / PACKAGE
    (package / "templates").mkdir(parents=True)
    (package / "__init__.py").write_text(PLUGIN_MODULE)
    # Its own ping; every other template is SQLite's (then default/).
    (package / "templates" / "ping.sql.j2").write_text("SELECT 1 /* toy */\n")
    info = root / f"{PACKAGE}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {PACKAGE}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(ENTRY_POINTS))
    return root


def _run(
    args: list[str], plugin: Path | None, home: Path, **env: str
) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k not in GLUON_SETTINGS}
    environment["OFFLOAD_HOME"] = str(home)
    paths = [str(plugin)] if plugin else []
    environment["PYTHONPATH"] = os.pathsep.join([*paths, environment.get("PYTHONPATH", "")])
    environment.update(env)
    return subprocess.run(
        args, env=environment, capture_output=True, text=True, timeout=300, check=False
    )


def _offload(*args: str) -> list[str]:
    return [sys.executable, "-c", "from gluon.cli.offload import main; main()", *args]


def test_the_registries_find_the_package_s_method_and_dialect(
    plugin_path: Path, tmp_path: Path
) -> None:
    probe = _run([sys.executable, "-c", PROBE], plugin_path, tmp_path)
    assert probe.returncode == 0, probe.stderr
    found = json.loads(probe.stdout)
    assert METHOD in found["methods"] and "CHANGELOG" in found["methods"]
    assert found["found"] == METHOD
    assert DIALECT in found["dialects"] and "sqlite" in found["dialects"]
    assert found["dialect"] == "ToySource"
    assert "toy" in found["ping"]  # the package's own template first
    assert "COUNT(*)" in found["count_rows"].upper()  # then SQLite's


def test_help_lists_the_method_only_where_the_package_is(plugin_path: Path, tmp_path: Path) -> None:
    with_it = _run(_offload("--help"), plugin_path, tmp_path)
    without = _run(_offload("--help"), None, tmp_path)
    assert with_it.returncode == 0 and without.returncode == 0, with_it.stderr + without.stderr
    listed = " ".join(with_it.stdout.split())  # the help is wrapped to the terminal
    assert f"{METHOD} (a toy from outside gluon)" in listed, with_it.stdout
    assert METHOD not in without.stdout
    assert "PG_LOGICAL (PostgreSQL logical decoding" in listed  # the built-in ones as before


def test_the_package_s_method_captures_and_ships_on_its_dialect(
    plugin_path: Path, tmp_path: Path
) -> None:
    database = tmp_path / "app.db"
    with sqlite3.connect(database) as db:
        db.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT)")
        db.execute("INSERT INTO items VALUES (1, 'a')")
    settings = {"GLUON_SOURCE_URL": f"{DIALECT}:///{database}"}
    enable = ["-t", "main.items", "--incremental-updates-enabled"]
    method = f"--incremental-extraction-method={METHOD}"
    plan = _run(_offload(*enable, method), plugin_path, tmp_path, **settings)
    assert plan.returncode == 0, plan.stderr
    assert "create table main.main_h_items_log in the source" in plan.stdout, plan.stdout
    assert "create trigger main.main_h_items_ct in the source" in plan.stdout, plan.stdout
    enabled = _run(_offload(*enable, method, "-x"), plugin_path, tmp_path, **settings)
    assert enabled.returncode == 0, enabled.stderr
    assert f"Incremental update enabled for MAIN.ITEMS with {METHOD}" in enabled.stdout
    with sqlite3.connect(database) as db:  # the trigger the toy method declared captures
        db.execute("INSERT INTO items VALUES (2, 'b')")
        db.execute("UPDATE items SET name = 'A' WHERE id = 1")
    shipped = _run(
        _offload("-t", "main.items", "-x", "--incremental-run-extraction"),
        plugin_path,
        tmp_path,
        **settings,
    )
    assert shipped.returncode == 0, shipped.stderr
    assert "Extracted 2 changes of MAIN.ITEMS" in shipped.stdout, shipped.stdout
    query = [sys.executable, "-c", "from gluon.cli.app import main; main()", "query", "--json"]
    lake = _run([*query, "SELECT id, name FROM main.items ORDER BY id"], plugin_path, tmp_path)
    assert lake.returncode == 0, lake.stderr
    assert json.loads(lake.stdout) == [{"id": 1, "name": "A"}, {"id": 2, "name": "b"}]
    # Without the package, its method and its dialect are refused in one line each.
    unknown = _run(_offload(*enable, method), None, tmp_path, **settings)
    assert unknown.returncode == 2, unknown.stdout + unknown.stderr
    assert f"unknown --incremental-extraction-method '{METHOD}'" in unknown.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    refused = _run(_offload("-t", "main.items"), None, elsewhere, **settings)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert f"source dialect '{DIALECT}' is not supported" in refused.stderr, refused.stderr
    assert "Traceback" not in unknown.stderr + refused.stderr
