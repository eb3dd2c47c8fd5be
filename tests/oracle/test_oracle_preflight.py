"""Issue 32 deliverable 2: before enable creates anything on Oracle, gluon checks what it
needs and refuses with one line per missing item, each with the statement a DBA runs.

The decisions are fed the rows Oracle's dictionary gives (SESSION_PRIVS, 23ai's
SESSION_SCHEMA_PRIVS, DBA_TS_QUOTAS, V$PARAMETER, V$DATABASE); the queries themselves
are checked by golden files and the parse (test_oracle_sql_parses.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gluon.capture import objects as capture_objects
from gluon.errors import SourceError, UnsupportedError
from gluon.lifecycle.enable_plan import _preflight
from gluon.methods import registered_methods
from gluon.naming import TableRef
from gluon.schema import Column, TableSpec
from gluon.source import connect
from gluon.source.oracle import OracleSource
from gluon.source.oracle_preflight import (
    PreflightFacts,
    grant_script,
    preflight_problems,
    requirements,
)

URL = "oracle+oracledb://gluon:secret@localhost:1521/?service_name=FREEPDB1"
TABLE = TableSpec(
    "APP", "ORDERS", (Column("ID", "NUMBER(10)", "decimal(10,0)", nullable=False),), ("ID",)
)
CHANGELOG = registered_methods()["CHANGELOG"]
UPDATABLE = registered_methods()["UPDATABLE_CHANGELOG"]
ROWSCN = registered_methods()["ORA_ROWSCN"]
EVERYTHING = frozenset(
    requirement.privilege for requirement in requirements(UPDATABLE, create_schema=True)
)


def _facts(**changes: Any) -> PreflightFacts:
    base: dict[str, Any] = {
        "user": "GLUON",
        "hybrid_schema": "APP_H",
        "hybrid_schema_exists": False,
        "system_privileges": EVERYTHING,
        "compatible": "19.0.0",
        "max_string_size": "STANDARD",
    }
    return PreflightFacts(**{**base, **changes})


def test_nothing_missing_means_no_problem() -> None:
    needed = requirements(UPDATABLE, create_schema=True)
    assert preflight_problems(_facts(), needed, needs_scn=False) == []


def test_each_missing_privilege_is_one_line_with_its_grant() -> None:
    needed = requirements(CHANGELOG, create_schema=True)
    granted = EVERYTHING - {"CREATE ANY TRIGGER", "CREATE USER"}
    problems = preflight_problems(_facts(system_privileges=granted), needed, needs_scn=False)
    assert problems == [
        "GLUON lacks CREATE USER (to create the hybrid schema): GRANT CREATE USER TO GLUON",
        "GLUON lacks CREATE ANY TRIGGER (to create the capture trigger): "
        "GRANT CREATE ANY TRIGGER TO GLUON "
        "(23ai: or GRANT CREATE ANY TRIGGER ON SCHEMA APP_H TO GLUON)",
    ]


def test_schema_privileges_on_the_hybrid_schema_count_on_23ai() -> None:
    needed = requirements(CHANGELOG, create_schema=False)
    schema_level = frozenset((r.privilege, "APP_H") for r in needed if r.on_hybrid_schema)
    system = frozenset(r.privilege for r in needed if not r.on_hybrid_schema)
    facts = _facts(
        hybrid_schema_exists=True, system_privileges=system, schema_privileges=schema_level
    )
    assert preflight_problems(facts, needed, needs_scn=False) == []
    elsewhere = frozenset((privilege, "OTHER_H") for privilege, _ in schema_level)
    facts = _facts(hybrid_schema_exists=True, system_privileges=system, schema_privileges=elsewhere)
    assert len(preflight_problems(facts, needed, needs_scn=False)) == len(schema_level)


def test_an_existing_hybrid_schema_needs_no_create_user_but_a_quota() -> None:
    needed = requirements(CHANGELOG, create_schema=False)
    assert "CREATE USER" not in {r.privilege for r in needed}
    problems = preflight_problems(
        _facts(hybrid_schema_exists=True, hybrid_quota=False), needed, needs_scn=False
    )
    assert problems == [
        "the hybrid schema APP_H has no tablespace quota for the changelog's rows: "
        "ALTER USER APP_H QUOTA UNLIMITED ON <its default tablespace>"
    ]
    unknown = _facts(hybrid_schema_exists=True, hybrid_quota=None)
    assert preflight_problems(unknown, needed, needs_scn=False) == []


def test_unreadable_parameters_are_named_with_their_grant() -> None:
    problems = preflight_problems(
        _facts(compatible=None, max_string_size=None), [], needs_scn=False
    )
    assert problems == [
        "GLUON cannot read V$PARAMETER (COMPATIBLE sets the identifier limit, MAX_STRING_SIZE "
        "the changelog's string types): GRANT SELECT ON SYS.V_$PARAMETER TO GLUON"
    ]


def test_ora_rowscn_needs_the_current_scn_and_creates_nothing() -> None:
    assert requirements(ROWSCN, create_schema=False) == []
    problems = preflight_problems(_facts(reads_current_scn=False), [], needs_scn=True)
    assert problems == [
        "GLUON cannot read V$DATABASE (ORA_ROWSCN reads the current SCN there): "
        "GRANT SELECT ON SYS.V_$DATABASE TO GLUON"
    ]


def test_an_old_driver_is_listed() -> None:
    problems = preflight_problems(
        _facts(driver_problem="python-oracledb 2.5 is too old"), [], needs_scn=False
    )
    assert problems == ["python-oracledb 2.5 is too old"]


def test_updatable_methods_need_the_view_privileges() -> None:
    needed = {r.privilege for r in requirements(UPDATABLE, create_schema=False)}
    assert {"CREATE ANY VIEW", "GRANT ANY OBJECT PRIVILEGE", "CREATE ANY INDEX"} <= needed
    assert "CREATE ANY VIEW" not in {
        r.privilege for r in requirements(CHANGELOG, create_schema=False)
    }


# -- grant scripts --------------------------------------------------------------------------


def test_19c_grant_script_uses_system_privileges() -> None:
    needed = requirements(CHANGELOG, create_schema=True)
    script = grant_script("GLUON", "APP_H", "APP.ORDERS", needed, schema_level=False)
    assert script[0] == "GRANT SELECT ON APP.ORDERS TO GLUON"
    assert "GRANT CREATE ANY TABLE TO GLUON" in script
    assert "GRANT DROP USER TO GLUON" in script
    assert script[-1] == "GRANT SELECT ON SYS.V_$PARAMETER TO GLUON"
    assert not any("ON SCHEMA" in statement for statement in script)
    assert "UNLIMITED TABLESPACE" not in " ".join(script)


def test_23ai_grant_script_scopes_to_the_hybrid_schema() -> None:
    needed = requirements(UPDATABLE, create_schema=True)
    script = grant_script("GLUON", "APP_H", "APP.ORDERS", needed, schema_level=True)
    assert "GRANT CREATE ANY TABLE ON SCHEMA APP_H TO GLUON" in script
    assert "GRANT DELETE ANY TABLE ON SCHEMA APP_H TO GLUON" in script
    # Not schema privileges: creating a user, granting on the application table.
    assert "GRANT CREATE USER TO GLUON" in script
    assert "GRANT GRANT ANY OBJECT PRIVILEGE TO GLUON" in script


# -- the source reads the facts; enable refuses before creating anything -------------------


@pytest.fixture
def source() -> Iterator[OracleSource]:
    dialect = connect(URL)
    assert isinstance(dialect, OracleSource)
    yield dialect
    dialect.engine.dispose()


def _server(
    source: OracleSource, monkeypatch: pytest.MonkeyPatch, privileges: frozenset[str]
) -> list[str]:
    asked: list[str] = []
    answers: dict[str, list[tuple[Any, ...]]] = {
        "session_user": [("GLUON",)],
        "session_privileges": [(privilege,) for privilege in sorted(privileges)],
        "compatible": [("19.0.0",)],
        "max_string_size": [("STANDARD",)],
        "current_scn": [(12345,)],
        "object_exists": [],
    }

    def run_query(template: str, params: Any = None, **_: Any) -> list[tuple[Any, ...]]:
        asked.append(template)
        if template not in answers:  # 19c has no SESSION_SCHEMA_PRIVS: ORA-00942
            raise SourceError(f"oracle query {template} failed: ORA-00942")
        return answers[template]

    monkeypatch.setattr(source, "run_query", run_query)
    return asked


def test_the_source_reads_its_facts_and_decides(
    source: OracleSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = _server(source, monkeypatch, EVERYTHING - {"DROP ANY TRIGGER"})
    problems = source.preflight(TABLE, CHANGELOG, "APP_H", create_schema=True)
    assert problems == [
        "GLUON lacks DROP ANY TRIGGER (to drop the capture trigger on disable): "
        "GRANT DROP ANY TRIGGER TO GLUON "
        "(23ai: or GRANT DROP ANY TRIGGER ON SCHEMA APP_H TO GLUON)"
    ]
    assert "session_schema_privileges" in asked


def test_enable_refuses_listing_every_missing_item(
    source: OracleSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    _server(source, monkeypatch, frozenset({"CREATE ANY TABLE"}))
    objects = capture_objects.plan_source_objects(source, TableRef("APP", "ORDERS"), CHANGELOG)
    with pytest.raises(UnsupportedError) as refused:
        _preflight(source, TABLE, CHANGELOG, objects)
    lines = str(refused.value).splitlines()
    assert lines[0].startswith("enabling CHANGELOG on APP.ORDERS needs what the oracle source")
    assert "nothing was created" in lines[0]
    missing = {r.privilege for r in requirements(CHANGELOG, create_schema=True)} - {
        "CREATE ANY TABLE"
    }
    assert len(lines) == 1 + len(missing)
    assert all(line.startswith("- GLUON lacks ") and " GRANT " in line for line in lines[1:])


# -- offload --incremental-print-grants ----------------------------------------------------


def test_print_grants_prints_both_scripts_and_sends_nothing(
    offload_home: Any, run_cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Port 9 (discard) on localhost: a connection attempt would fail, so none is made.
    monkeypatch.setenv(
        "GLUON_SOURCE_URL", "oracle+oracledb://gluon:secret@127.0.0.1:9/?service_name=X"
    )
    result = run_cli(
        "offload",
        "-t",
        "APP.ORDERS",
        "--incremental-print-grants",
        "--incremental-extraction-method=UPDATABLE_CHANGELOG",
    )
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "-- Oracle 19c (system privileges), as a DBA, for GLUON" in out
    assert "-- Oracle 23ai (privileges on schema APP_H only), as a DBA, for GLUON" in out
    assert "GRANT SELECT ON APP.ORDERS TO GLUON;" in out
    assert "GRANT CREATE ANY TRIGGER TO GLUON;" in out
    assert "GRANT CREATE ANY TRIGGER ON SCHEMA APP_H TO GLUON;" in out
    assert "GRANT CREATE ANY VIEW ON SCHEMA APP_H TO GLUON;" in out


def test_print_grants_needs_a_method(
    offload_home: Any, run_cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "GLUON_SOURCE_URL", "oracle+oracledb://gluon:secret@127.0.0.1:9/?service_name=X"
    )
    result = run_cli("offload", "-t", "APP.ORDERS", "--incremental-print-grants")
    assert result.exit_code == 2
    assert "needs --incremental-extraction-method" in result.stderr


def test_a_changelog_in_another_schema_is_granted_to_the_triggers_owner(
    source: OracleSource, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 32 item 3: with --incremental-changelog-table OTHER.T the trigger's owner had no
    INSERT on the changelog: the trigger never compiled."""
    objects = capture_objects.named_source_objects(
        source, TableRef("APP", "ORDERS"), CHANGELOG, changelog_table="OTHER.ORDERS_LOG"
    )
    context = capture_objects.script_context(source, TABLE, CHANGELOG, objects, ("ID",))
    log = next(o for o in objects if o.kind.value == "changelog_table")
    script = source.render("create_changelog_table", object=log, **context)
    assert "GRANT INSERT ON OTHER.ORDERS_LOG TO APP_H" in source.split_script(script)
    _server(source, monkeypatch, EVERYTHING - {"GRANT ANY OBJECT PRIVILEGE"})
    problems = source.preflight(
        TABLE, CHANGELOG, "APP_H", create_schema=False, changelog_schema="OTHER"
    )
    assert problems == [
        "GLUON lacks GRANT ANY OBJECT PRIVILEGE (to let the capture trigger's owner write a "
        "changelog in another schema): GRANT GRANT ANY OBJECT PRIVILEGE TO GLUON"
    ]
    assert source.preflight(TABLE, CHANGELOG, "APP_H", create_schema=False) == []


def test_the_usual_changelog_script_grants_nothing(source: OracleSource) -> None:
    objects = capture_objects.named_source_objects(source, TableRef("APP", "ORDERS"), CHANGELOG)
    context = capture_objects.script_context(source, TABLE, CHANGELOG, objects, ("ID",))
    log = next(o for o in objects if o.kind.value == "changelog_table")
    assert "GRANT" not in source.render("create_changelog_table", object=log, **context)


def test_print_grants_for_a_changelog_in_another_schema(source: OracleSource) -> None:
    scripts = source.grant_scripts(TableRef("APP", "ORDERS"), CHANGELOG, "APP_H", "OTHER")
    assert all("GRANT GRANT ANY OBJECT PRIVILEGE TO GLUON" in s for s in scripts.values())
    plain = source.grant_scripts(TableRef("APP", "ORDERS"), CHANGELOG, "APP_H", "APP_H")
    assert not any("GRANT ANY OBJECT" in " ".join(s) for s in plain.values())
