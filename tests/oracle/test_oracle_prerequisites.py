"""Issue 32 items 2, 5, 6: what enable asks of the Oracle account, and the driver it needs.

- No script grants UNLIMITED TABLESPACE (that needs the privilege WITH ADMIN OPTION): the
  hybrid schema gets its quota in its CREATE USER.
- The current SCN comes from V$DATABASE (DBMS_FLASHBACK needs an EXECUTE grant no one has).
- python-oracledb older than 3.4 is refused in one line before anything is sent.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import oracledb
import pytest

from gluon.capture import objects as capture_objects
from gluon.errors import UnsupportedError
from gluon.methods import registered_methods
from gluon.methods.base import SourceObject
from gluon.naming import TableRef
from gluon.schema import Column, TableSpec
from gluon.source import connect
from gluon.source.oracle import MIN_DRIVER_VERSION, OracleSource, driver_version_problem

URL = "oracle+oracledb://gluon:secret@localhost:1521/?service_name=FREEPDB1"
TABLE = TableSpec(
    schema="APP",
    name="ORDERS",
    columns=(Column("ORDER_ID", "NUMBER(10)", "decimal(10,0)", nullable=False),),
    primary_key=("ORDER_ID",),
)


@pytest.fixture
def source() -> Iterator[OracleSource]:
    dialect = connect(URL)
    assert isinstance(dialect, OracleSource)
    yield dialect
    dialect.engine.dispose()


def _every_create_script(source: OracleSource) -> dict[str, str]:
    scripts: dict[str, str] = {}
    for name, method in sorted(registered_methods().items()):
        if not method.supports_dialect("oracle"):
            continue
        objects = capture_objects.named_source_objects(source, TableRef("APP", "ORDERS"), method)
        context = capture_objects.script_context(source, TABLE, method, objects, ("ORDER_ID",))
        for item in objects:
            template = f"create_{item.kind.value}"
            scripts[f"{name}:{template}"] = source.render(template, object=item, **context)
    schema = capture_objects.SourceObjectRef(SourceObject.HYBRID_SCHEMA, "APP_H", "APP_H", "SCHEMA")
    scripts["create_hybrid_schema"] = source.render("create_hybrid_schema", object=schema)
    return scripts


def test_no_script_grants_unlimited_tablespace(source: OracleSource) -> None:
    scripts = _every_create_script(source)
    assert any(key.endswith("create_changelog_table") for key in scripts)
    granting = [key for key, text in scripts.items() if "UNLIMITED TABLESPACE" in text.upper()]
    assert granting == []


def test_the_hybrid_schema_gets_its_quota_when_created(source: OracleSource) -> None:
    text = _every_create_script(source)["create_hybrid_schema"]
    assert "'CREATE USER APP_H NO AUTHENTICATION'" in text
    assert "' QUOTA UNLIMITED ON ' || gl_tablespace" in text
    assert "DEFAULT_PERMANENT_TABLESPACE" in text


def test_the_current_scn_needs_no_dbms_flashback(source: OracleSource) -> None:
    sql = source.render("current_scn")
    assert "DBMS_FLASHBACK" not in sql.upper()
    assert re.search(r"SELECT current_scn FROM v\$database", sql)


@pytest.mark.parametrize(
    ("version", "refused"),
    [("2.5.1", True), ("3.0.0", True), ("3.3.0", True), ("3.4.0", False), ("26.1.0", False)],
)
def test_driver_version(version: str, refused: bool) -> None:
    problem = driver_version_problem(version)
    assert (problem is not None) == refused
    if problem is not None:
        assert "\n" not in problem
        assert f"python-oracledb {version} is too old" in problem
        assert "pip install 'oracledb>=3.4'" in problem


def test_an_old_driver_is_refused_before_anything_connects(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(oracledb, "__version__", "2.5.1")
    with pytest.raises(UnsupportedError, match=r"^python-oracledb 2\.5\.1 is too old"):
        connect(URL)


def test_the_installed_driver_and_the_requirement_agree() -> None:
    assert driver_version_problem(oracledb.__version__) is None
    pyproject = (Path(__file__).parents[2] / "pyproject.toml").read_text()
    needed = ".".join(map(str, MIN_DRIVER_VERSION))
    assert f'"oracledb>={needed}"' in pyproject


def test_a_quote_in_a_name_is_doubled_inside_literals(source: OracleSource) -> None:
    """Issue 32 item 12: a ' in a quoted name ended the EXECUTE IMMEDIATE literal early."""
    schema = capture_objects.SourceObjectRef(
        SourceObject.HYBRID_SCHEMA, "O'BRIEN_H", "O'BRIEN_H", "SCHEMA"
    )
    text = source.render("create_hybrid_schema", object=schema)
    assert "'CREATE USER \"O''BRIEN_H\" NO AUTHENTICATION'" in text
    spec = TableSpec("O'BRIEN", "T", TABLE.columns, TABLE.primary_key)
    method = registered_methods()["CHANGELOG"]
    objects = capture_objects.named_source_objects(source, TableRef("O'BRIEN", "T"), method)
    context = capture_objects.script_context(source, spec, method, objects, ("ORDER_ID",))
    images = source.render("record_table_images", **context, where="")
    assert "'LOCK TABLE \"O''BRIEN\".T IN SHARE MODE'" in images
