"""The dialect-free part of the source layer: the contract each dialect fills in.

A dialect is a subclass of :class:`SourceDialect` with class attributes (its
capabilities and type table) and a few overridden methods. Registration is
automatic (``__init_subclass__``); see ``gluon/source/__init__.py``.

Why one module past 400 lines: it is the whole dialect contract, each method a default a
dialect may override, documented where it is declared.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Generator, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import sqlalchemy as sa

from gluon import templates
from gluon.config import SourceTimeouts
from gluon.errors import GluonError, NotFoundError, SourceError, UnsupportedError
from gluon.methods.base import ExtractionMethod, SourceObject
from gluon.naming import TableRef
from gluon.schema import Column, TableSpec

if TYPE_CHECKING:
    import pyarrow as pa

_REGISTRY: dict[str, type[SourceDialect]] = {}


@dataclass(frozen=True, slots=True)
class PartitionBound:
    """One native partition: ``[low, high)`` for RANGE, ``values`` for LIST (source text)."""

    name: str
    low: str | None = None
    high: str | None = None
    values: tuple[str, ...] = ()
    holds_null: bool = False
    """A LIST partition that also holds the rows whose key is NULL (``IN (NULL, ...)``)."""


@dataclass(frozen=True, slots=True)
class Subpartition:
    """One native subpartition of a two-level (composite) partitioned table.

    ``partition`` bounds its parent on ``partition_column``; ``bound`` bounds it on
    ``column`` (the subpartition key, possibly another column). ``kind`` is the
    subpartitioning strategy (RANGE, LIST or HASH): a HASH subpartition's ``bound`` has no
    values (no predicate tells its rows from its siblings').
    """

    name: str
    partition_column: str
    partition: PartitionBound
    column: str
    kind: str
    bound: PartitionBound


@dataclass(frozen=True, slots=True)
class StoredDefault:
    """What the source rows that existed before a column was added read for it."""

    missing_value: str | None
    """The default kept once for them, as text (None: NULL, or none kept)."""
    rewritten: bool
    """The column has a default but none is kept: each row was written with its own value
    (a volatile default such as ``now()``), which no change carried."""


class StatementRefused(Exception):
    """A script statement failed in the driver, before SQLAlchemy saw it: refused, or
    accepted with a warning that means it did not do its job (Oracle's "creation
    succeeded with compilation errors"). Its text is one line."""


def registered_dialects() -> dict[str, type[SourceDialect]]:
    """Dialect classes by name."""
    return dict(_REGISTRY)


class SourceDialect:
    """A source database dialect over a SQLAlchemy engine."""

    name: ClassVar[str] = ""
    """Registry key; also the templates folder and SQLAlchemy's backend name."""

    max_identifier_length: ClassVar[int | None] = None
    """Longest object name the database accepts (None: no practical limit); the connected
    server's may be lower (:meth:`read_server_limits`)."""

    identifier_length_in_bytes: ClassVar[bool] = False
    """Whether the limit counts bytes (Oracle: of the database character set) or characters."""

    has_schemas: ClassVar[bool] = True
    """Whether incremental objects go to a separate hybrid schema ``SCHEMA_H``."""

    name_case: ClassVar[str] = "upper"
    """How the database folds unquoted names: ``upper`` or ``lower``."""

    binds_arrays: ClassVar[bool] = False
    """Whether a bind parameter may hold a list of values (``= ANY(:values)``)."""

    fetch_rows: ClassVar[int] = 50_000
    """Rows per DBAPI fetch when reading a table."""

    statement_separator: ClassVar[str] = "/"
    """In a script template, a line holding only this text ends a statement.

    Not ``;``: trigger bodies (PL/SQL, PL/pgSQL, SQLite's BEGIN ... END) contain it.
    """

    captures_truncate: ClassVar[bool] = False
    """Whether the dialect's capture records a TRUNCATE as a change (a statement trigger, a
    decoded TRUNCATE record); where it does not, extraction compares row counts instead
    (``gluon.extract.truncation``). SQLite has no TRUNCATE; Oracle's row triggers do not
    fire on one."""

    has_catalog_version: ClassVar[bool] = False
    """Whether the dialect has a ``catalog_version`` query (:meth:`catalog_version`)."""

    stores_added_defaults: ClassVar[bool] = False
    """Whether an ``ADD COLUMN ... DEFAULT`` keeps the default once for the rows that
    existed before it, without writing them (PostgreSQL's ``attmissingval``): a
    ``stored_defaults`` query (:meth:`stored_defaults`)."""

    trigger_per_event: ClassVar[bool] = False
    """Whether a capture trigger is one trigger per row event, named ``<name>_<event>``
    (``insert``, ``update``, ``delete``: a SQLite trigger fires for one event), rather than
    one trigger named ``<name>`` for them all (``gluon.capture.objects.created_names``)."""

    captures_by_statement: ClassVar[bool] = False
    """Whether the dialect's changelog trigger captures at statement level where the table
    takes transition tables (a ``statement_capture_fits`` query says whether it does): one
    trigger per event, the UPDATE one named ``<name>``, the others ``<name>_insert`` and
    ``<name>_delete`` (``gluon.capture.statement_level.captures_by_statement``)."""

    implicit_source_objects: ClassVar[frozenset[str]] = frozenset()
    """Capture object kinds (``SourceObject`` values) the dialect needs no object for."""

    one_null_key_hint: ClassVar[str] = ""
    """How the dialect keeps NULL a single key value, for the refusal of a nullable key."""

    row_estimate: ClassVar[str | None] = None
    """The template of a query for the planner's estimate of a table's rows (binds
    ``:schema``, ``:table``); None: :meth:`estimate_rows` counts them."""

    checksum_settings: ClassVar[str | None] = None
    """The template of settings gluon verify's checksum passes take first, in their
    transaction (:meth:`run_checksum_query`); None: the dialect needs none."""

    unmarkable_source_objects: ClassVar[frozenset[SourceObject]] = frozenset()
    """Capture object kinds the dialect cannot comment (mark as gluon's): they are judged by
    the changelog table they serve (``gluon.capture.existing.existing_objects``)."""

    wide_types: ClassVar[tuple[tuple[re.Pattern[str], str], ...]] = ()
    """Changelog column types wide enough that widening a source column (varchar(10) to
    varchar(50), int to bigint, a larger numeric precision) never makes the capture
    trigger, and with it the application's DML, fail: (pattern of the declared type, wide
    type), first match wins; no match keeps the declared type (SQLite enforces no types)."""

    extended_wide_types: ClassVar[tuple[tuple[re.Pattern[str], str], ...]] = ()
    """Where the server allows extended strings (:attr:`extended_strings`; Oracle
    MAX_STRING_SIZE=EXTENDED, the default on Autonomous Database: VARCHAR2 and RAW up to
    32767 bytes), the wide types tried ahead of :attr:`wide_types`: VARCHAR2(4000) would
    refuse a longer value and fail the application's DML."""

    template_folders: ClassVar[tuple[str, ...]] = ()
    """Folders (absolute paths) searched for this dialect's templates before those of the
    dialects it extends: a dialect outside gluon ships its templates there."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Only a class that declares its own name registers (a subclass must not replace it).
        if "name" in cls.__dict__ and cls.name:
            _REGISTRY[cls.name] = cls

    @classmethod
    def engine_options(cls) -> dict[str, Any]:
        """Keyword arguments for ``sqlalchemy.create_engine``."""
        return {}

    @classmethod
    def timeout_connect_args(cls, url: sa.URL, timeouts: SourceTimeouts) -> dict[str, Any]:
        """DBAPI connect arguments that bound connecting, statements and lock waits."""
        return {}

    def install_timeouts(self, timeouts: SourceTimeouts) -> None:
        """Bounds the driver takes per connection rather than as connect arguments (hook)."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine
        self._preparer = engine.dialect.identifier_preparer
        self.identifier_length: int | None = self.max_identifier_length
        """The limit names are made to fit: the class's until :meth:`read_server_limits`."""
        self.extended_strings = False
        """The server takes strings past the usual maximum (Oracle MAX_STRING_SIZE=EXTENDED):
        changelog columns are typed wider (:attr:`extended_wide_types`)."""

    def read_server_limits(self) -> None:
        """Set :attr:`identifier_length` and :attr:`extended_strings` from the connected
        server, before objects to create are named and typed (hook: fixed limits need no
        query).

        Raises:
            SourceError: the database cannot be reached.
        """

    # -- helpers ---------------------------------------------------------------------------

    def quote(self, identifier: str) -> str:
        """Quote an identifier the way this database needs (only when needed)."""
        return str(self._preparer.quote(identifier))

    @classmethod
    def template_search(cls) -> tuple[str, ...]:
        """Where this dialect's templates are looked up, first match wins (``default/``
        last, added by ``gluon.templates``): its own folders, then those of each dialect it
        extends, so ``class MySource(PostgreSQLSource)`` overrides only what differs."""
        folders: list[str] = []
        for klass in cls.__mro__:
            if not issubclass(klass, SourceDialect) or klass is SourceDialect:
                continue
            folders += klass.__dict__.get("template_folders", ())
            if "name" in klass.__dict__ and klass.name:
                folders.append(klass.name)
        return tuple(folders)

    def render(self, template: str, **context: Any) -> str:
        """Render one of this dialect's SQL templates."""
        return templates.render(self.template_search(), template, quote=self.quote, **context)

    def run_query(
        self, template: str, params: dict[str, Any] | None = None, **context: Any
    ) -> list[Any]:
        """Render a template and run it as a query with bind parameters."""
        sql = self.render(template, **context)
        try:
            with self.engine.connect() as connection:
                # fetchall: the driver's rows at once (a slot's peek: 100k rows), not one by one.
                return list(connection.execute(sa.text(sql), params or {}).fetchall())
        except sa.exc.DBAPIError as exc:
            raise SourceError(f"{self.name} query {template} failed: {_first_line(exc)}") from exc

    def run_checksum_query(
        self, template: str, params: dict[str, Any] | None = None, **context: Any
    ) -> list[Any]:
        """:meth:`run_query` for a pass of gluon verify over the table, in a transaction that
        first takes the dialect's :attr:`checksum_settings` (a template), if it has any."""
        sql = self.render(template, **context)
        try:
            with self.engine.connect() as connection:
                if self.checksum_settings is not None:
                    connection.execute(sa.text(self.render(self.checksum_settings)))
                return list(connection.execute(sa.text(sql), params or {}).fetchall())
        except sa.exc.DBAPIError as exc:
            raise SourceError(f"{self.name} query {template} failed: {_first_line(exc)}") from exc

    def stream_query(
        self, template: str, params: dict[str, Any], *, rows: int
    ) -> Generator[list[Any]]:
        """:meth:`run_query`, its rows ``rows`` at a time from a server-side cursor: memory
        bounded by ``rows`` however many the query returns. The connection stays open until
        the rows end or the iterator is closed (dropped).

        Raises:
            SourceError: the query failed (at the first rows, or later).
        """
        sql = self.render(template)
        connection = self.engine.connect()
        try:
            result = connection.execution_options(stream_results=True, max_row_buffer=rows).execute(
                sa.text(sql), params
            )
            while chunk := result.fetchmany(rows):
                yield list(chunk)
        except sa.exc.DBAPIError as exc:
            raise SourceError(f"{self.name} query {template} failed: {_first_line(exc)}") from exc
        finally:
            # A stream dropped unfinished is closed when collected, maybe after its server
            # went away: nothing was written, so a failed rollback has nothing to report.
            with contextlib.suppress(sa.exc.DBAPIError):
                connection.close()

    def split_script(self, script: str) -> list[str]:
        """The statements of a rendered script, split on :attr:`statement_separator` lines."""
        statements: list[str] = []
        lines: list[str] = []
        for line in [*script.splitlines(), self.statement_separator]:
            if line.strip() == self.statement_separator:
                text = "\n".join(lines).strip()
                if text:
                    statements.append(text)
                lines = []
            else:
                lines.append(line)
        return statements

    def begin_script(self, connection: sa.Connection) -> None:
        """Open the script's transaction where the driver would not (hook; default: nothing)."""

    def execute_script(self, template: str, **context: Any) -> None:
        """Render a script template and run its statements in one transaction.

        Statements go to the driver as they are (no bind parameters), so ``:NEW``
        in a trigger body stays what it is. DDL is transactional on PostgreSQL and
        SQLite; Oracle commits each DDL statement on its own.

        Raises:
            SourceError: a statement failed (the transaction is rolled back).
        """
        statements = self.split_script(self.render(template, **context))
        try:
            with self.engine.begin() as connection:
                self.begin_script(connection)
                raw = connection.execution_options(no_parameters=True)
                for statement in statements:
                    self.execute_statement(raw, statement)
        except sa.exc.DBAPIError as exc:
            raise SourceError(f"{self.name} script {template} failed: {_first_line(exc)}") from exc
        except StatementRefused as warned:
            raise SourceError(f"{self.name} script {template} failed: {warned}") from warned

    def execute_statement(self, connection: sa.Connection, statement: str) -> None:
        """Send one statement of a script as it is (hook: a dialect reads driver warnings).

        Raises:
            sqlalchemy.exc.DBAPIError: the database refused it.
            StatementRefused: the database accepted it with a warning that means failure.
        """
        connection.exec_driver_sql(statement)

    def preflight(
        self,
        spec: TableSpec,
        method: type[ExtractionMethod],
        hybrid_schema: str | None,
        *,
        create_schema: bool,
        changelog_schema: str | None = None,
    ) -> list[str]:
        """What the source lacks for enabling ``method`` on ``spec``, one line each with the
        statement that gives it; checked before anything is created (hook: a dialect whose
        statements say what is missing themselves returns nothing).

        Args:
            hybrid_schema: the schema the capture objects go to (None: the table's own).
            create_schema: it does not exist yet, so gluon creates it.
            changelog_schema: the changelog's schema (``--incremental-changelog-table`` may
                put it elsewhere); None without a changelog.

        Raises:
            SourceError: the database cannot be reached.
        """
        return []

    def grant_scripts(
        self,
        table: TableRef,
        method: type[ExtractionMethod],
        hybrid_schema: str | None,
        changelog_schema: str | None = None,
    ) -> dict[str, list[str]]:
        """The statements a DBA runs so gluon's user can enable ``method`` on ``table``, by
        server release (title -> statements); empty where docs/operations.md section 13
        says it in a sentence. No database access."""
        return {}

    def slot_with_snapshot(self, slot: str) -> AbstractContextManager[str]:
        """Create replication slot ``slot`` and read under the snapshot it exports until exit
        (yields the snapshot's name); a dialect with replication slots overrides it.

        Raises:
            UnsupportedError: the dialect has no replication slot.
        """
        raise UnsupportedError(f"{self.name} sources have no replication slot to export")

    def exported_snapshot(self) -> AbstractContextManager[str]:
        """Read under one snapshot taken now until exit (yields it as ``xmin:xmax:xip``); a
        dialect with PG_LOGICAL's shared slot overrides it.

        Raises:
            UnsupportedError: the dialect exports no snapshot.
        """
        raise UnsupportedError(f"{self.name} sources export no snapshot")

    def compile_problem(self, schema: str, name: str, object_type: str) -> str | None:
        """Why the code object (trigger, view) ``schema.name`` does not compile, in one line;
        None when it does. Databases that refuse a broken object at CREATE (PostgreSQL,
        SQLite) keep this default; Oracle creates it INVALID and says so only as a warning.

        Raises:
            SourceError: the catalog cannot be read.
        """
        return None

    def execute_in_transaction(
        self, statements: Sequence[tuple[str, dict[str, Any]]], *, what: str
    ) -> int:
        """Run rendered statements with their bind parameters in one transaction.

        Args:
            statements: (SQL text, bind parameters) pairs, in order.
            what: the request in a few words, for the error message.

        Returns:
            The total number of rows the statements changed.

        Raises:
            SourceError: a statement failed (nothing is committed).
        """
        changed = 0
        try:
            with self.engine.begin() as connection:
                for sql, params in statements:
                    # A statement that changes no rows (SET) reports -1.
                    changed += max(connection.execute(sa.text(sql), params).rowcount, 0)
        except sa.exc.DBAPIError as exc:
            raise SourceError(f"{self.name}: {what} failed: {_first_line(exc)}") from exc
        return changed

    # -- introspection ---------------------------------------------------------------------

    def check_connection(self) -> None:
        """Connect once, so an unreachable database is one clear error."""
        try:
            with self.engine.connect() as connection:
                connection.execute(sa.text(self.render("ping")))
        except sa.exc.DBAPIError as exc:
            raise SourceError(
                f"cannot connect to the {self.name} source database: {_first_line(exc)} "
                "(check GLUON_SOURCE_URL)"
            ) from exc

    def describe_table(self, ref: TableRef) -> TableSpec:
        """Introspect ``ref``: columns with their lake types, primary key, partitioning.

        Raises:
            NotFoundError: no such table.
            UnsupportedError: a column type gluon cannot offload without loss.
        """
        raise NotImplementedError(f"{self.name} does not implement describe_table")

    def describe_tables(self, refs: Sequence[TableRef]) -> dict[TableRef, TableSpec | GluonError]:
        """:meth:`describe_table` of each of ``refs``, each its spec or the error describing
        it raised, in as few catalog queries as the dialect can (a report over 200 tables
        made four a table). A table the batched read does not describe (missing, named
        twice in case, a type gluon refuses) or a batched read that fails is described
        alone, so its own error names it."""
        try:
            together = self._describe_together(refs) if refs else {}
        except SourceError:
            together = {}
        described: dict[TableRef, TableSpec | GluonError] = {}
        for ref in refs:
            if ref in together:
                described[ref] = together[ref]
                continue
            try:
                described[ref] = self.describe_table(ref)
            except GluonError as exc:
                described[ref] = exc
        return described

    def _describe_together(self, refs: Sequence[TableRef]) -> dict[TableRef, TableSpec]:
        """The tables of ``refs`` one batched catalog read describes exactly as
        :meth:`describe_table` would (default: none, each is described alone)."""
        return {}

    def stored_defaults(self, ref: TableRef) -> dict[str, StoredDefault]:
        """Per column of ``ref`` (by name): the value the rows that existed before it was
        added read, as text, and whether a default was written into each row instead (a
        volatile default rewrites the table). Empty where the dialect does not store them.

        Raises:
            SourceError: the dictionary cannot be read.
        """
        if not self.stores_added_defaults:
            return {}
        rows = self.run_query("stored_defaults", {"schema": ref.schema, "table": ref.table})
        return {row.name: StoredDefault(row.missing_value, bool(row.rewritten)) for row in rows}

    def columns_with_defaults(self, ref: TableRef) -> frozenset[str]:
        """The names of ``ref``'s columns that have a default (rows that existed before such
        a column was added may read its default).

        Raises:
            SourceError: the dictionary cannot be read.
        """
        rows = self.run_query("columns_with_defaults", {"schema": ref.schema, "table": ref.table})
        return frozenset(row.name for row in rows)

    def stored_default_value(self, text: str, column: Column) -> object:
        """A :meth:`stored_defaults` text as a Python value of ``column``'s Arrow type, as a
        decoded change's value of the column is typed.

        Raises:
            SourceError: the value does not fit the column's lake type.
        """
        raise UnsupportedError(f"{self.name} keeps no stored defaults")

    def catalog_version(self, ref: TableRef) -> str | None:
        """One cheap value that changes whenever ``describe_table(ref)`` may answer
        differently (None: the dialect cannot tell, or no single table matches): a long-
        running process describes the table again only when it changed.

        Raises:
            SourceError: the dictionary cannot be read.
        """
        if not self.has_catalog_version:
            return None
        rows = self.run_query("catalog_version", {"schema": ref.schema, "table": ref.table})
        return str(rows[0].version) if len(rows) == 1 else None

    def unique_keys(self, spec: TableSpec) -> list[tuple[str, ...]]:
        """Column sets the source keeps unique: the primary key, unique constraints and indexes.

        Partial and expression indexes are left out (they do not make the plain
        column values unique).

        Raises:
            SourceError: the dictionary cannot be read.
        """
        keys = [columns for columns, _ in self._unique_column_sets(spec)]
        return [spec.primary_key, *keys] if spec.primary_key else keys

    def _unique_column_sets(self, spec: TableSpec) -> list[tuple[tuple[str, ...], bool]]:
        """The ``unique_keys`` query's column sets, each with whether its NULLs count as one
        value (a ``nulls_not_distinct`` column; a dialect whose query has none: never)."""
        rows = self.run_query("unique_keys", {"schema": spec.schema, "table": spec.name})
        found: dict[Any, list[str | None]] = {}
        one_null: dict[Any, bool] = {}
        for row in rows:
            values = {str(key).lower(): value for key, value in row._mapping.items()}
            found.setdefault(values["index_id"], []).append(values["column_name"])
            one_null[values["index_id"]] = bool(values.get("nulls_not_distinct"))
        return [
            (tuple(str(name) for name in names), one_null[index])
            for index, names in found.items()
            if all(name is not None for name in names)
        ]

    def nullable_key_columns(self, spec: TableSpec, keys: Sequence[str]) -> tuple[str, ...]:
        """The columns of ``keys`` whose NULLs the lake cannot tell apart (empty: none).

        The lake compares keys NULL-safely: every row with a NULL key is one key there. That
        matches the source only when the source keeps NULL a single key value: a key column
        that cannot hold NULL, or a unique constraint over exactly ``keys`` whose NULLs are
        not distinct (PostgreSQL 15+ ``NULLS NOT DISTINCT``).
        """
        nullable = tuple(key for key in keys if self.may_hold_null(spec, key))
        if not nullable:
            return ()
        wanted = {key.lower() for key in keys}
        for columns, one_null in self._unique_column_sets(spec):
            if one_null and {name.lower() for name in columns} == wanted:
                return ()
        return nullable

    def may_hold_null(self, spec: TableSpec, column: str) -> bool:
        """Whether ``column`` of ``spec`` can hold NULL (its declared nullability)."""
        return spec.column(column).nullable

    def _require_found(self, ref: TableRef, found: bool) -> None:
        if not found and not self._schema_exists(ref.schema):
            raise NotFoundError(
                f"table {ref} does not exist: the {self.name} source database has no schema "
                f"{ref.schema.upper()} (check the -t value and GLUON_SOURCE_URL)"
            )
        if not found:
            raise NotFoundError(
                f"table {ref} does not exist in the {self.name} source database "
                "(check the -t value and GLUON_SOURCE_URL)"
            )

    def _schema_exists(self, schema: str) -> bool:
        """Whether the source has ``schema`` in any case (asked after a table was not found,
        to name the part of ``-t`` that is wrong). True when it cannot tell."""
        try:
            return any(
                self.run_query(
                    "object_exists",
                    {"object_type": "SCHEMA", "schema": name, "name": name, "publication": None},
                )
                for name in dict.fromkeys((schema, schema.lower(), schema.upper()))
            )
        except GluonError:  # the diagnosis must not hide the error it explains
            return True

    @staticmethod
    def _refuse_types(ref: TableRef, refused: Sequence[tuple[str, str]]) -> None:
        if refused:
            listed = ", ".join(f"{name} ({type_})" for name, type_ in refused)
            raise UnsupportedError(
                f"table {ref} has column types gluon cannot offload without loss: {listed}; "
                "convert them in the source or offload a view that casts them"
            )

    def partition_bounds(self, spec: TableSpec) -> dict[str, PartitionBound]:
        """The native partitions of ``spec`` by name, with their bounds.

        Raises:
            UnsupportedError: the dialect or table has no native partitions.
        """
        raise UnsupportedError(
            f"{self.name} sources have no native partitions gluon can read: use --offload-predicate"
        )

    def subpartitions(self, spec: TableSpec) -> dict[str, Subpartition]:
        """The native subpartitions of ``spec`` by name (empty: the table has none, as every
        table of a dialect without native partitions).

        Raises:
            UnsupportedError: subpartitions gluon cannot describe by values.
        """
        return {}

    # -- reading ---------------------------------------------------------------------------

    def select_list(self, spec: TableSpec) -> list[str]:
        """Column expressions for reading ``spec``; text-read columns cast in the source."""
        return [
            self.render("cast_to_text", column=column.name).strip()
            if column.read_as_text
            else self.quote(column.name)
            for column in spec.columns
        ]

    def prepare_checksums(self) -> None:
        """Make the functions gluon verify's checksum templates call available (default:
        the database has them built in; templates/<dialect>/_verify_hash.sql.j2)."""

    def count_rows(self, spec: TableSpec) -> int:
        """Number of rows in the table."""
        rows = self.run_query("count_rows", schema=spec.schema, table=spec.name)
        return int(rows[0][0])

    def estimate_rows(self, spec: TableSpec) -> int:
        """About how many rows the table holds, to size work by (gluon verify's first
        buckets); counted unless the dialect keeps an estimate (:attr:`row_estimate`)."""
        if self.row_estimate is not None:
            [row] = self.run_query(self.row_estimate, {"schema": spec.schema, "table": spec.name})
            if row[0] is not None and int(row[0]) > 0:  # else never analyzed, or empty
                return int(row[0])
        return self.count_rows(spec)

    def read_batches(
        self,
        spec: TableSpec,
        *,
        batch_rows: int,
        where: str | None = None,
        params: dict[str, Any] | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """Read the table (or the rows matching ``where``) as Arrow batches of ``batch_rows``."""
        sql = self.render(
            "select_rows",
            schema=spec.schema,
            table=spec.name,
            columns=self.select_list(spec),
            where=where,
        )
        bound = self.adapt_params(params or {})
        yield from self.read_query_batches(spec, sa.text(sql), bound, batch_rows=batch_rows)

    def adapt_params(self, params: dict[str, Any]) -> dict[str, Any]:
        """Bind values as the driver takes them (a dialect overrides what its driver refuses)."""
        return params

    def count_matching(self, spec: TableSpec, where: str, params: dict[str, Any]) -> int:
        """Rows of ``spec`` matching a rendered condition with bind ``params``."""
        sql = self.render(
            "select_rows", schema=spec.schema, table=spec.name, columns=["COUNT(*)"], where=where
        )
        try:
            with self.engine.connect() as connection:
                bound = self.adapt_params(params)
                return int(connection.execute(sa.text(sql), bound).scalar() or 0)
        except sa.exc.DBAPIError as exc:
            raise SourceError(f"counting rows of {spec.name} failed: {_first_line(exc)}") from exc

    def arrow_batches(
        self, spec: TableSpec, statement: sa.TextClause, params: dict[str, Any]
    ) -> Iterator[pa.RecordBatch] | None:
        """The driver's own Arrow stream of ``statement``'s rows, in the driver's types.

        None (the default): this dialect reads through SQLAlchemy, value by value. A
        dialect that overrides it raises :class:`SourceError` for a failed read, like
        :meth:`read_query_batches`, and keeps memory bounded (a stream, not a table).
        """
        return None

    def read_query_batches(
        self,
        spec: TableSpec,
        statement: sa.TextClause,
        params: dict[str, Any],
        *,
        batch_rows: int,
        extra_fields: Sequence[pa.Field] = (),
    ) -> Iterator[pa.RecordBatch]:
        """Run ``statement`` (its columns in ``spec`` order, then ``extra_fields``) as batches.

        Dialects whose driver reads into Arrow itself (:meth:`arrow_batches`) hand over its
        batches, cast once per column; the others convert each value in Python.
        """
        import pyarrow as pa

        # Imported here: commands that read no rows never load pyarrow.
        from gluon.source.arrow import conform, converter_for, identity, rebatch, to_batch

        schema = pa.schema(list(spec.arrow_schema) + list(extra_fields))
        native = self.arrow_batches(spec, statement, params)
        if native is not None:
            for batch in rebatch(native, batch_rows):
                yield conform(batch, schema, spec)
            return
        converters = [converter_for(column) for column in spec.columns] + [
            identity for _ in extra_fields
        ]
        try:
            with self.engine.connect() as connection:
                result = connection.execution_options(
                    stream_results=True, max_row_buffer=self.fetch_rows
                ).execute(statement, params)
                while True:
                    rows = result.fetchmany(batch_rows)
                    if not rows:
                        break
                    yield to_batch(rows, schema, converters, spec)
        except sa.exc.DBAPIError as exc:
            raise SourceError(
                f"reading {spec.schema}.{spec.name} failed: {_first_line(exc)}"
            ) from exc


def _first_line(exc: BaseException) -> str:
    original = getattr(exc, "orig", None) or exc
    text = str(original).strip().splitlines()
    return text[0] if text else type(original).__name__


__all__ = [
    "PartitionBound",
    "SourceDialect",
    "StatementRefused",
    "Subpartition",
    "registered_dialects",
]
