"""The extraction-method contract: what a method captures, supports and creates, as data."""

from __future__ import annotations

import difflib
from enum import StrEnum
from typing import Any, ClassVar

from gluon.errors import UsageError
from gluon.schema import TableSpec


class DML(StrEnum):
    INSERT = "INSERT"
    UPDATE = "UPDATE"
    DELETE = "DELETE"
    MERGE = "MERGE"


class OffloadUseCase(StrEnum):
    """The spec's offload use cases (offload type and how much stays in the source)."""

    FULL_100_0 = "FULL (100/0)"
    FULL_100_10 = "FULL (100/10)"
    INCREMENTAL_90_10 = "INCREMENTAL (90/10)"


class ViewKind(StrEnum):
    """How the delta view combines the base table with the changes."""

    MERGE = "merge"
    """Latest row per key; keys whose latest change is a delete are hidden."""
    UNION_ALL = "union_all"
    """Base rows followed by every inserted row (insert-only methods)."""


class SourceObject(StrEnum):
    """Kinds of objects a method creates in the source database."""

    CHANGELOG_TABLE = "changelog_table"
    CHANGELOG_SEQUENCE = "changelog_sequence"
    CHANGELOG_TRIGGER = "changelog_trigger"
    UPDATABLE_VIEW = "updatable_view"
    UPDATABLE_TRIGGER = "updatable_trigger"
    LAKE_ROWS_TABLE = "lake_rows_table"
    """Lake rows staged in the source so the updatable view can show them (``gluon.patching``)."""
    REPLICATION_SLOT = "replication_slot"
    """A PostgreSQL logical replication slot (cluster-wide, named after the table)."""
    HYBRID_SCHEMA = "hybrid_schema"
    """Created only when missing; no method declares it (``gluon.capture`` plans it)."""


class ChangeReader(StrEnum):
    """How an extraction finds the changes."""

    CHANGELOG = "changelog"
    """Every row of the changelog table; the extracted rows are then deleted."""
    ORA_ROWSCN = "ora_rowscn"
    """Rows whose ORA_ROWSCN is above the stored SCN (Oracle only; no deletes)."""
    PG_LOGICAL = "pg_logical"
    """PostgreSQL logical decoding: the committed changes a replication slot keeps."""


_REGISTRY: dict[str, type[ExtractionMethod]] = {}

CHANGELOG_OBJECTS = (SourceObject.CHANGELOG_TABLE, SourceObject.CHANGELOG_SEQUENCE)

UPDATABLE_OBJECTS = (
    SourceObject.LAKE_ROWS_TABLE,
    SourceObject.UPDATABLE_VIEW,
    SourceObject.UPDATABLE_TRIGGER,
)
"""The updatable view, its INSTEAD OF trigger and the staged lake rows the view also shows."""


class ExtractionMethod:
    """One extraction method; subclasses only declare class attributes (and rarely ``validate``)."""

    name: ClassVar[str] = ""
    """The ``--incremental-extraction-method`` value."""
    is_basic: ClassVar[bool] = False
    """The spec's 'basic' methods (Table 1)."""
    captured_dml: ClassVar[frozenset[DML]] = frozenset()
    offload_use_cases: ClassVar[frozenset[OffloadUseCase]] = frozenset()
    view_kind: ClassVar[ViewKind] = ViewKind.MERGE
    source_objects: ClassVar[tuple[SourceObject, ...]] = ()
    dialects: ClassVar[frozenset[str] | None] = None
    """Source dialects the method works on (None: every dialect)."""
    change_reader: ClassVar[ChangeReader] = ChangeReader.CHANGELOG
    verifies_unique_key: ClassVar[bool] = False
    """The key must be verified unique (``*_INSERT``) unless --incremental-no-verify-primary-key."""
    reports_uncaptured_dml: ClassVar[bool] = False
    """The changelog trigger also records, by key, the table DML the method does not capture,
    so extraction reports it instead of letting the lake drift silently (CHANGELOG_INSERT)."""
    sees_truncate: ClassVar[bool] = True
    """The method's capture can record a TRUNCATE where the dialect's can
    (``SourceDialect.captures_truncate``): not ORA_ROWSCN, which reads the table itself."""
    when_to_use: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "name" in cls.__dict__ and cls.name:
            _REGISTRY[cls.name] = cls

    @classmethod
    def supports_dialect(cls, dialect: str) -> bool:
        return cls.dialects is None or dialect in cls.dialects

    @classmethod
    def has_object(cls, kind: SourceObject) -> bool:
        return kind in cls.source_objects

    @classmethod
    def tracks_all_table_dml(cls) -> bool:
        """Whether the method captures every DML on the application table, bulk loads
        included: every method but the UPDATABLE* ones, which capture what goes through
        their view. The spec does not recommend that for a FULL offload of a (sub)partitioned
        table (Table 3, note 12)."""
        return not cls.has_object(SourceObject.UPDATABLE_VIEW)

    @classmethod
    def uncaptured_dml_reported(cls) -> frozenset[DML]:
        """Row operations on the application table recorded only to be reported."""
        if not cls.reports_uncaptured_dml:
            return frozenset()
        return frozenset({DML.INSERT, DML.UPDATE, DML.DELETE}) - cls.captured_dml

    @classmethod
    def validate(cls, spec: TableSpec) -> None:
        """Refuse a source table this method cannot serve (raise a GluonError)."""


def registered_methods() -> dict[str, type[ExtractionMethod]]:
    """Every method by name (importing ``gluon.methods`` loads them all)."""
    return dict(_REGISTRY)


def get_method(name: str) -> type[ExtractionMethod]:
    """The method called ``name`` (case-insensitive).

    Raises:
        UsageError: unknown name; the closest valid name is suggested.
    """
    method = _REGISTRY.get(name.upper())
    if method is None:
        close = difflib.get_close_matches(name.upper(), _REGISTRY, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        valid = ", ".join(sorted(_REGISTRY))
        raise UsageError(
            f"unknown --incremental-extraction-method {name!r}{hint}; use one of {valid}"
        )
    return method
