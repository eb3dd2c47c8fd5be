"""What enabling incremental update asks of an Oracle account, checked before anything
is created (issue 32, deliverable 2), and the grant script a DBA runs for it.

gluon's user creates the hybrid schema ``<S>_H`` and, in it, the changelog, its sequence,
the capture trigger on the application table and (UPDATABLE methods) the updatable view,
its trigger and the lake-rows table; extraction reads and deletes changelog rows, schema
changes alter the capture tables, disable drops everything. Those objects belong to
another schema, so on 19c each needs an ``ANY`` system privilege; from 23ai a DBA can
grant the same privileges on the hybrid schema alone (``GRANT ... ON SCHEMA``).

The decisions here are pure (fed the dictionary's rows); :class:`PreflightFacts` is what
``OracleSource.preflight`` reads from the server.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from gluon.methods.base import ExtractionMethod, SourceObject


@dataclass(frozen=True, slots=True)
class Requirement:
    """One privilege gluon's user needs, and what for."""

    privilege: str
    why: str
    on_hybrid_schema: bool = True
    """A 23ai schema privilege on the hybrid schema can stand in for the system privilege."""


# The privileges each kind of capture object needs to be created, used and dropped.
_OBJECT_REQUIREMENTS: dict[SourceObject, tuple[Requirement, ...]] = {
    SourceObject.CHANGELOG_TABLE: (
        Requirement("CREATE ANY TABLE", "create the changelog"),
        Requirement("COMMENT ANY TABLE", "mark the changelog as gluon's", False),
        Requirement("SELECT ANY TABLE", "read the changelog"),
        Requirement("DELETE ANY TABLE", "delete extracted changes from the changelog"),
        Requirement("INSERT ANY TABLE", "record the table's rows after a schema change"),
        Requirement("ALTER ANY TABLE", "carry source schema changes to the changelog"),
        Requirement("DROP ANY TABLE", "drop the changelog on disable"),
    ),
    SourceObject.CHANGELOG_SEQUENCE: (
        Requirement("CREATE ANY SEQUENCE", "create the changelog sequence"),
        Requirement("SELECT ANY SEQUENCE", "read the changelog sequence's position"),
        Requirement("DROP ANY SEQUENCE", "drop the changelog sequence on disable"),
    ),
    SourceObject.CHANGELOG_TRIGGER: (
        Requirement("CREATE ANY TRIGGER", "create the capture trigger"),
        Requirement("DROP ANY TRIGGER", "drop the capture trigger on disable"),
    ),
    SourceObject.LAKE_ROWS_TABLE: (
        Requirement("CREATE ANY TABLE", "create the lake-rows table"),
        Requirement("CREATE ANY INDEX", "index the lake-rows table's key"),
        Requirement("INSERT ANY TABLE", "stage lake rows for patching"),
        Requirement("DELETE ANY TABLE", "unstage lake rows"),
        Requirement("DROP ANY TABLE", "drop the lake-rows table on disable"),
    ),
    SourceObject.UPDATABLE_VIEW: (
        Requirement("CREATE ANY VIEW", "create the updatable view"),
        Requirement(
            "GRANT ANY OBJECT PRIVILEGE",
            "let the hybrid schema read the application table for the updatable view",
            False,
        ),
        Requirement("DROP ANY VIEW", "drop the updatable view on disable"),
    ),
    SourceObject.UPDATABLE_TRIGGER: (
        Requirement("CREATE ANY TRIGGER", "create the updatable view's trigger"),
        Requirement("DROP ANY TRIGGER", "drop the updatable view's trigger on disable"),
    ),
}

_SCHEMA_REQUIREMENTS = (
    Requirement("CREATE USER", "create the hybrid schema", False),
    Requirement("DROP USER", "drop the hybrid schema on disable once it is empty", False),
)


def requirements(
    method: type[ExtractionMethod], *, create_schema: bool, changelog_elsewhere: bool = False
) -> list[Requirement]:
    """The privileges ``method`` needs, each once, in a stable order.

    Args:
        method: the extraction method (its objects).
        create_schema: the hybrid schema does not exist yet, so gluon creates it.
        changelog_elsewhere: ``--incremental-changelog-table`` puts the changelog in another
            schema than the triggers: gluon grants their owner INSERT on it.
    """
    found: dict[str, Requirement] = {}
    if changelog_elsewhere and method.has_object(SourceObject.CHANGELOG_TABLE):
        found["GRANT ANY OBJECT PRIVILEGE"] = Requirement(
            "GRANT ANY OBJECT PRIVILEGE",
            "let the capture trigger's owner write a changelog in another schema",
            False,
        )
    if create_schema:
        for requirement in _SCHEMA_REQUIREMENTS:
            found.setdefault(requirement.privilege, requirement)
    for kind, needed in _OBJECT_REQUIREMENTS.items():
        if method.has_object(kind):
            for requirement in needed:
                found.setdefault(requirement.privilege, requirement)
    return list(found.values())


@dataclass(frozen=True, slots=True)
class PreflightFacts:
    """What the server says about gluon's session (the dictionary queries' rows)."""

    user: str
    hybrid_schema: str
    hybrid_schema_exists: bool
    system_privileges: frozenset[str]
    """SESSION_PRIVS: system privileges, direct or through enabled roles."""
    schema_privileges: frozenset[tuple[str, str]] = frozenset()
    """SESSION_SCHEMA_PRIVS (23ai): (privilege, schema); empty before 23ai."""
    hybrid_quota: bool | None = None
    """An existing hybrid schema has a quota (None: gluon may not read DBA_TS_QUOTAS)."""
    compatible: str | None = None
    """V$PARAMETER's COMPATIBLE (None: V$PARAMETER is not readable)."""
    max_string_size: str | None = None
    reads_current_scn: bool = True
    """V$DATABASE.CURRENT_SCN is readable (needed by ORA_ROWSCN only)."""
    driver_problem: str | None = None
    extra: tuple[str, ...] = field(default=())
    """Problems found elsewhere (one line each)."""


def _granted(facts: PreflightFacts, requirement: Requirement) -> bool:
    if requirement.privilege in facts.system_privileges:
        return True
    return requirement.on_hybrid_schema and (
        (requirement.privilege, facts.hybrid_schema) in facts.schema_privileges
    )


def preflight_problems(
    facts: PreflightFacts, needed: Sequence[Requirement], *, needs_scn: bool
) -> list[str]:
    """One line per missing item, each with the statement a DBA runs."""
    user, schema = facts.user, facts.hybrid_schema
    problems = [facts.driver_problem] if facts.driver_problem else []
    for requirement in needed:
        if not _granted(facts, requirement):
            problems.append(
                f"{user} lacks {requirement.privilege} (to {requirement.why}): "
                f"GRANT {requirement.privilege} TO {user}"
                + (
                    f" (23ai: or GRANT {requirement.privilege} ON SCHEMA {schema} TO {user})"
                    if requirement.on_hybrid_schema
                    else ""
                )
            )
    if facts.hybrid_schema_exists and facts.hybrid_quota is False:
        problems.append(
            f"the hybrid schema {schema} has no tablespace quota for the changelog's rows: "
            f"ALTER USER {schema} QUOTA UNLIMITED ON <its default tablespace>"
        )
    if facts.compatible is None or facts.max_string_size is None:
        problems.append(
            f"{user} cannot read V$PARAMETER (COMPATIBLE sets the identifier limit, "
            "MAX_STRING_SIZE the changelog's string types): "
            f"GRANT SELECT ON SYS.V_$PARAMETER TO {user}"
        )
    if needs_scn and not facts.reads_current_scn:
        problems.append(
            f"{user} cannot read V$DATABASE (ORA_ROWSCN reads the current SCN there): "
            f"GRANT SELECT ON SYS.V_$DATABASE TO {user}"
        )
    problems.extend(facts.extra)
    return problems


def grant_script(
    user: str,
    hybrid_schema: str,
    table: str,
    needed: Iterable[Requirement],
    *,
    schema_level: bool,
    needs_scn: bool = False,
) -> list[str]:
    """The statements a DBA runs so ``user`` can enable incremental update of ``table``.

    Args:
        schema_level: 23ai and later: the hybrid schema's privileges as schema privileges
            (``ON SCHEMA``); else (19c) as system privileges.
    """
    statements = [f"GRANT SELECT ON {table} TO {user}"]
    for requirement in needed:
        scope = (
            f" ON SCHEMA {hybrid_schema}" if schema_level and requirement.on_hybrid_schema else ""
        )
        statements.append(f"GRANT {requirement.privilege}{scope} TO {user}")
    statements.append(f"GRANT SELECT ON SYS.V_$PARAMETER TO {user}")
    if needs_scn:
        statements.append(f"GRANT SELECT ON SYS.V_$DATABASE TO {user}")
    return statements


__all__ = [
    "PreflightFacts",
    "Requirement",
    "grant_script",
    "preflight_problems",
    "requirements",
]
