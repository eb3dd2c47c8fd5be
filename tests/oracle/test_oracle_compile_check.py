"""Issue 32 item 3: a trigger or view that does not compile on Oracle is dropped at once.

Oracle creates a trigger with compilation errors INVALID and ENABLED, and python-oracledb
reports it only as ``cursor.warning`` (DPY-7000, from ORA-24344), never as an exception:
every application INSERT/UPDATE/DELETE on the table would then fail with ORA-04098. No
Oracle server runs here: the decisions are checked on the rows and warnings a server gives.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import oracledb
import pytest

from gluon.capture import existing
from gluon.capture import objects as capture_objects
from gluon.errors import SourceError
from gluon.methods import registered_methods
from gluon.methods.base import SourceObject
from gluon.naming import TableRef
from gluon.schema import Column, TableSpec
from gluon.source import connect
from gluon.source.base import StatementRefused
from gluon.source.oracle import COMPILATION_WARNING, OracleSource, compile_problem_from_rows

URL = "oracle+oracledb://gluon:secret@localhost:1521/?service_name=FREEPDB1"
TABLE = TableSpec(
    schema="APP",
    name="ORDERS",
    columns=(
        Column("ORDER_ID", "NUMBER(10)", "decimal(10,0)", nullable=False),
        Column("END", "VARCHAR2(10)", "string"),
        Column("CASE", "NUMBER(12,2)", "decimal(12,2)"),
    ),
    primary_key=("ORDER_ID",),
)


@pytest.fixture
def source() -> Iterator[OracleSource]:
    dialect = connect(URL)  # builds the engine; nothing connects
    assert isinstance(dialect, OracleSource)
    yield dialect
    dialect.engine.dispose()


# -- the decision, from ALL_OBJECTS / ALL_ERRORS rows ------------------------------------------


def test_a_valid_object_has_no_problem() -> None:
    row = {"STATUS": "VALID", "LINE": None, "POSITION": None, "TEXT": None}
    assert compile_problem_from_rows([row]) is None


def test_a_missing_object_has_no_problem() -> None:
    assert compile_problem_from_rows([]) is None


def test_an_invalid_object_names_oracles_first_error_in_one_line() -> None:
    rows = [
        {
            "STATUS": "INVALID",
            "LINE": 4,
            "POSITION": 17,
            "TEXT": "PL/SQL: ORA-00942: table or view does not exist\n",
        },
        {"STATUS": "INVALID", "LINE": 4, "POSITION": 5, "TEXT": "PL/SQL: SQL Statement ignored"},
    ]
    problem = compile_problem_from_rows(rows)
    assert problem == (
        "line 4, column 17: PL/SQL: ORA-00942: table or view does not exist (and 1 more)"
    )


def test_an_invalid_object_without_errors_says_so() -> None:
    problem = compile_problem_from_rows([{"status": "INVALID", "line": None, "text": None}])
    assert problem is not None and "INVALID" in problem


# -- the driver's warning ----------------------------------------------------------------------


class WarningCursor:
    """What python-oracledb's cursor gives for a CREATE TRIGGER that did not compile."""

    def __init__(self, warning: Any) -> None:
        self.warning = warning
        self.executed: list[str] = []
        self.closed = False

    def execute(self, statement: str) -> None:
        self.executed.append(statement)

    def close(self) -> None:
        self.closed = True


def _connection(cursor: WarningCursor) -> Any:
    return SimpleNamespace(
        connection=SimpleNamespace(dbapi_connection=SimpleNamespace(cursor=lambda: cursor))
    )


def test_the_compilation_warning_is_an_error(source: OracleSource) -> None:
    warning = SimpleNamespace(
        message=f"{COMPILATION_WARNING}: creation succeeded with compilation errors"
    )
    cursor = WarningCursor(warning)
    with pytest.raises(StatementRefused, match="DPY-7000: creation succeeded"):
        source.execute_statement(_connection(cursor), "CREATE OR REPLACE TRIGGER ...")
    assert cursor.executed == ["CREATE OR REPLACE TRIGGER ..."]
    assert cursor.closed


def test_a_statement_without_warning_passes(source: OracleSource) -> None:
    cursor = WarningCursor(None)
    source.execute_statement(_connection(cursor), "CREATE TABLE T (X NUMBER)")
    assert cursor.closed


def test_the_driver_maps_ora_24344_to_the_warning_gluon_reads() -> None:
    from oracledb import errors

    assert errors.ERR_ORACLE_ERROR_XREF[24344] == errors.WRN_COMPILATION_ERROR
    assert f"DPY-{errors.WRN_COMPILATION_ERROR}" == COMPILATION_WARNING
    assert hasattr(oracledb.Cursor, "warning")


# -- capture: an invalid trigger is dropped at once ---------------------------------------------


def _objects(source: OracleSource) -> list[capture_objects.SourceObjectRef]:
    method = registered_methods()["CHANGELOG"]
    return capture_objects.named_source_objects(source, TableRef("APP", "ORDERS"), method)


def test_an_invalid_trigger_is_dropped_and_the_error_is_one_line(
    source: OracleSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    objects = _objects(source)
    trigger = next(o for o in objects if o.kind is SourceObject.CHANGELOG_TRIGGER)
    sent: list[str] = []

    def execute_script(template: str, **context: Any) -> None:
        sent.append(template)
        if template == "create_changelog_trigger":
            raise SourceError(
                "oracle script create_changelog_trigger failed: DPY-7000: creation succeeded "
                "with compilation errors"
            )

    def compile_problem(schema: str, name: str, object_type: str) -> str | None:
        if (schema, name, object_type) == (trigger.schema, trigger.name, "TRIGGER"):
            return "line 3, column 5: PL/SQL: ORA-01031: insufficient privileges"
        return None

    monkeypatch.setattr(source, "execute_script", execute_script)
    monkeypatch.setattr(source, "compile_problem", compile_problem)
    monkeypatch.setattr(capture_objects, "object_exists", lambda *_: False)
    monkeypatch.setattr(source, "read_server_limits", lambda: None)  # a 19c server
    with pytest.raises(SourceError) as failed:
        capture_objects.create_source_objects(
            source, TABLE, registered_methods()["CHANGELOG"], objects, ("ORDER_ID",)
        )
    message = str(failed.value)
    assert "\n" not in message
    assert f"trigger {trigger.display_name} did not compile and was dropped" in message
    assert "ORA-01031: insufficient privileges" in message
    assert sent[-2:] == ["create_changelog_trigger", "drop_changelog_trigger"]


def test_a_trigger_left_invalid_without_a_warning_is_dropped_too(
    source: OracleSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    objects = _objects(source)
    sent: list[str] = []
    monkeypatch.setattr(source, "execute_script", lambda template, **_: sent.append(template))
    monkeypatch.setattr(
        source,
        "compile_problem",
        lambda schema, name, object_type: "it is INVALID" if object_type == "TRIGGER" else None,
    )
    monkeypatch.setattr(capture_objects, "object_exists", lambda *_: False)
    monkeypatch.setattr(source, "read_server_limits", lambda: None)  # a 19c server
    with pytest.raises(SourceError, match="did not compile and was dropped"):
        capture_objects.create_source_objects(
            source, TABLE, registered_methods()["CHANGELOG"], objects, ("ORDER_ID",)
        )
    assert sent[-1] == "drop_changelog_trigger"


def test_a_refusal_that_left_nothing_invalid_is_reported_as_it_is(
    source: OracleSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    objects = _objects(source)

    def execute_script(template: str, **context: Any) -> None:
        if template == "create_changelog_trigger":
            raise SourceError("oracle script create_changelog_trigger failed: ORA-01031")

    monkeypatch.setattr(source, "execute_script", execute_script)
    monkeypatch.setattr(source, "compile_problem", lambda *_: None)
    monkeypatch.setattr(capture_objects, "object_exists", lambda *_: False)
    monkeypatch.setattr(source, "read_server_limits", lambda: None)  # a 19c server
    with pytest.raises(SourceError, match=r"failed: ORA-01031$"):
        capture_objects.create_source_objects(
            source, TABLE, registered_methods()["CHANGELOG"], objects, ("ORDER_ID",)
        )


# -- status: an INVALID trigger is broken -------------------------------------------------------


def test_status_reports_an_invalid_trigger(
    source: OracleSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    objects = _objects(source)
    trigger = next(o for o in objects if o.kind is SourceObject.CHANGELOG_TRIGGER)

    def run_query(template: str, params: Any = None, **_: Any) -> list[tuple[Any, ...]]:
        if template == "capture_trigger_state":
            return [(trigger.name, 1, 0)]  # ENABLED, INVALID
        return [(1,)]  # the changelog exists

    monkeypatch.setattr(source, "run_query", run_query)
    (problem,) = existing.capture_problems(source, TABLE, objects)
    assert "is INVALID" in problem
    assert f"drop it at once (DROP TRIGGER {trigger.schema}.{trigger.name})" in problem


def test_status_reports_nothing_for_a_valid_enabled_trigger(
    source: OracleSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    objects = _objects(source)
    trigger = next(o for o in objects if o.kind is SourceObject.CHANGELOG_TRIGGER)

    def run_query(template: str, params: Any = None, **_: Any) -> list[tuple[Any, ...]]:
        if template == "capture_trigger_state":
            return [(trigger.name, 1, 1)]  # ENABLED, VALID
        return [(1,)]  # the changelog exists

    monkeypatch.setattr(source, "run_query", run_query)
    assert existing.capture_problems(source, TABLE, objects) == []


# -- PL/SQL reserved words in trigger bodies ---------------------------------------------------


@pytest.mark.parametrize("word", ["END", "CASE", "WHEN", "EXCEPTION", "SQL", "CURSOR", "BEGIN"])
def test_plsql_reserved_words_are_quoted(source: OracleSource, word: str) -> None:
    assert source.quote(word) == f'"{word}"'


def test_trigger_bodies_quote_reserved_column_names(source: OracleSource) -> None:
    method = registered_methods()["UPDATABLE_CHANGELOG"]
    objects = capture_objects.named_source_objects(source, TableRef("APP", "ORDERS"), method)
    context = capture_objects.script_context(source, TABLE, method, objects, ("ORDER_ID",))
    for item in objects:
        if item.kind in (SourceObject.CHANGELOG_TRIGGER, SourceObject.UPDATABLE_TRIGGER):
            body = source.render(f"create_{item.kind.value}", object=item, **context)
            assert ':NEW."END"' in body
            assert ":NEW.END" not in body and ":NEW.CASE" not in body
