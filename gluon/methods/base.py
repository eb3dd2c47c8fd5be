"""The extraction-method contract: what a method captures, supports and creates, as data."""

from __future__ import annotations

import difflib
import logging
from enum import StrEnum
from importlib.metadata import entry_points
from typing import Any, ClassVar

from gluon.errors import ConfigError, UsageError
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
    """Lake rows staged in the source so the updatable view can show them.

    Staged by ``gluon.lifecycle.patching``.
    """
    REPLICATION_SLOT = "replication_slot"
    """A PostgreSQL logical replication slot (cluster-wide, named after the table)."""
    SHARED_SLOT_TABLE = "shared_slot_table"
    """The table's place in its database's shared pgoutput slot and publication
    (``--incremental-pg-logical-slot=database``): recorded under the table's own name, made
    and undone by its feed (``JOINED_KINDS``), not by a template."""
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


CREATION_ORDER: tuple[SourceObject, ...] = (
    SourceObject.HYBRID_SCHEMA,
    SourceObject.CHANGELOG_SEQUENCE,
    SourceObject.CHANGELOG_TABLE,
    SourceObject.CHANGELOG_TRIGGER,
    SourceObject.LAKE_ROWS_TABLE,
    SourceObject.UPDATABLE_VIEW,
    SourceObject.UPDATABLE_TRIGGER,
    SourceObject.REPLICATION_SLOT,
    SourceObject.SHARED_SLOT_TABLE,
)
"""Objects are created in this order and dropped in the reverse order."""

OBJECT_TYPES: dict[SourceObject, str] = {
    SourceObject.HYBRID_SCHEMA: "SCHEMA",
    SourceObject.CHANGELOG_SEQUENCE: "SEQUENCE",
    SourceObject.CHANGELOG_TABLE: "TABLE",
    SourceObject.CHANGELOG_TRIGGER: "TRIGGER",
    SourceObject.LAKE_ROWS_TABLE: "TABLE",
    SourceObject.UPDATABLE_VIEW: "VIEW",
    SourceObject.UPDATABLE_TRIGGER: "TRIGGER",
    SourceObject.REPLICATION_SLOT: "SLOT",
    SourceObject.SHARED_SLOT_TABLE: "PUBLICATION TABLE",
}
"""The catalog's object type of each kind (what ``object_exists`` looks for)."""

UNMARKED_KINDS: frozenset[SourceObject] = frozenset(
    {SourceObject.REPLICATION_SLOT, SourceObject.SHARED_SLOT_TABLE}
)
"""Kinds no dialect can mark (a slot takes no comment): the repository's record is the mark."""

SNAPSHOT_KINDS: frozenset[SourceObject] = frozenset({SourceObject.REPLICATION_SLOT})
"""Kinds created with a snapshot an initial offload in the same command reads: each change
is then in the copy or captured, never both (``SourceDialect.slot_with_snapshot``)."""

JOINED_KINDS: frozenset[SourceObject] = frozenset({SourceObject.SHARED_SLOT_TABLE})
"""A table's place in an object its feed shares between tables: the feed joins it
(``ChangeFeed.capturing``, around the enable's copy) and leaves it (``ChangeFeed.release``);
``create_source_objects`` and ``drop_source_objects`` pass it by."""

_REGISTRY: dict[str, type[ExtractionMethod]] = {}

METHODS_ENTRY_POINTS = "gluon.methods"
"""Entry point group of methods from packages outside gluon (name: the method's name;
value: its module or its class)."""

_PLUGIN_PROBLEMS: dict[str, str] = {}
"""Entry points that failed to load, by name: why (said when that name is asked for)."""

_plugins_loaded = False

log = logging.getLogger(__name__)

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
    summary: ClassVar[str] = ""
    """A few words on how it captures, for ``offload --help`` (``method_choices``)."""
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
    fills_added_defaults: ClassVar[bool] = False
    """The method's changes carry no image of the rows unchanged since a column was added
    (it has no changelog to record them in): carrying an ``ADD COLUMN ... DEFAULT`` writes
    the default the source stores for them into the lake's rows instead."""
    keeps_lake_only_rows: ClassVar[bool] = False
    """The lake may hold keys the source has not: rows gone from the source or added
    through the updatable view (data patching). ``gluon verify`` reports them as lake-only,
    not as differences; the lake records no origin, so a row appended to the Delta table
    by hand is lake-only too."""
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


def _load_plugins() -> None:
    """Import the methods installed packages declare (group :data:`METHODS_ENTRY_POINTS`),
    once; subclassing registers them. One that fails to load is skipped (other commands go
    on working) and named when asked for."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for entry in entry_points(group=METHODS_ENTRY_POINTS):
        try:
            entry.load()
        except Exception as exc:  # a broken plugin must not break every command
            _PLUGIN_PROBLEMS[entry.name.upper()] = f"{type(exc).__name__}: {exc}"
            log.warning("extraction method plugin %s did not load: %s", entry.value, exc)


def registered_methods() -> dict[str, type[ExtractionMethod]]:
    """Every method by name: gluon's own (importing ``gluon.methods`` loads them) and those
    of installed packages (entry point group :data:`METHODS_ENTRY_POINTS`)."""
    _load_plugins()
    return dict(_REGISTRY)


def method_choices() -> str:
    """Every method with its summary, for help texts: ``CHANGELOG (a trigger on the table),
    ...``."""
    return ", ".join(
        f"{name} ({method.summary})" if method.summary else name
        for name, method in registered_methods().items()
    )


def get_method(name: str) -> type[ExtractionMethod]:
    """The method called ``name`` (case-insensitive).

    Raises:
        UsageError: unknown name; the closest valid name is suggested.
        ConfigError: the package declaring the method failed to load.
    """
    _load_plugins()
    method = _REGISTRY.get(name.upper())
    if method is None and name.upper() in _PLUGIN_PROBLEMS:
        raise ConfigError(
            f"extraction method {name.upper()} is declared by an installed package that failed "
            f"to load ({_PLUGIN_PROBLEMS[name.upper()]}): reinstall or remove that package"
        )
    if method is None:
        close = difflib.get_close_matches(name.upper(), _REGISTRY, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        valid = ", ".join(sorted(_REGISTRY))
        raise UsageError(
            f"unknown --incremental-extraction-method {name!r}{hint}; use one of {valid}"
        )
    return method
