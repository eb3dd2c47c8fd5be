"""PostgreSQL over psycopg 3; bulk reads through the ADBC driver (COPY in binary, into Arrow).

Type table: ``information_schema.columns.data_type`` to lake type. Types
without an exact lake counterpart are read as text in the source (``::text``)
so nothing is lost; arrays, ranges and other composite types are refused.
"""

from __future__ import annotations

import math
import re
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Any, ClassVar
from urllib.parse import quote

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import psycopg

from gluon.config import SourceTimeouts
from gluon.errors import SourceError, UnsupportedError, UsageError
from gluon.naming import TableRef
from gluon.reuse import shared_pool
from gluon.schema import MAX_DECIMAL_PRECISION, Column, TableSpec, decimal_type
from gluon.source.base import PartitionBound, SourceDialect, Subpartition, _first_line

if TYPE_CHECKING:
    import pyarrow as pa


def _nothing() -> None:
    """Nothing to close yet."""


# Compiles templates' ``:name`` binds to the ``$1`` placeholders libpq (and ADBC) takes.
_POSITIONAL = psycopg.dialect(paramstyle="numeric_dollar")  # type: ignore[no-untyped-call]

# data_type -> lake type, for types read as they are.
TYPE_MAP: dict[str, str] = {
    "smallint": "smallint",
    "integer": "int",
    "bigint": "bigint",
    "real": "float",
    "double precision": "double",
    "boolean": "boolean",
    "text": "string",
    "character varying": "string",
    "character": "string",
    "name": "string",
    '"char"': "string",
    "citext": "string",
    "date": "date",
    "timestamp without time zone": "timestamp_ntz",
    "timestamp with time zone": "timestamp",
    "bytea": "binary",
}

# data_type values kept exactly as the server's text rendering.
TEXT_TYPES: frozenset[str] = frozenset(
    {
        "uuid",
        "json",
        "jsonb",
        "xml",
        "inet",
        "cidr",
        "macaddr",
        "macaddr8",
        "time without time zone",
        "time with time zone",
        "interval",
        "bit",
        "bit varying",
        "USER-DEFINED",  # enums and domains over text
    }
)

PINNED_STYLES: tuple[str, ...] = (
    "-c DateStyle=ISO,MDY",
    "-c IntervalStyle=postgres",
    "-c TimeZone=UTC",
)
"""Session settings every gluon connection starts with, whatever the server's or the
database's defaults: values printed as text by one session (a slot's decoding, a text
column) are read back by another, and a style such as DateStyle=SQL prints zone
abbreviations that do not read back (IST is Israel's to the parser, India's to the printer)."""

PARTITION_STRATEGIES: dict[str, str] = {"r": "RANGE", "l": "LIST", "h": "HASH"}


_RANGE_BOUND = re.compile(r"^FOR VALUES FROM \((.*)\) TO \((.*)\)$", re.S)
_LIST_BOUND = re.compile(r"^FOR VALUES IN \((.*)\)$", re.S)
_LITERAL = re.compile(r"\s*('(?:[^']|'')*'|[^,]+)\s*(?:,|$)")
_SNAPSHOT_NAME = re.compile(r"^[0-9A-F]+(-[0-9A-F]+)+$", re.I)
SERVICE_ARROW_CONNECTIONS = 2
"""The ADBC connections the service's threads share for their Arrow reads (each held for
one read's stream): with one SQLAlchemy connection a thread, the service's bound is
``--parallel`` plus a constant (docs/operations.md, "Connections")."""
SERVICE_ARROW_WAIT_SECONDS = 600.0
"""How long a read waits for a free one (holders wait for nothing of the pool's; a read a
lock holds is ended by the source's lock and statement timeouts first)."""


def _is_integer(value: object) -> bool:
    """An int that renders as its digits alone, safe anywhere a bind stood: not a bool (an
    int that renders as a word), not negative (``-:x`` would render as a ``--`` comment)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _literals(text: str) -> list[str | None]:
    """``'a', 10, MINVALUE`` -> ``["a", "10", None]`` (None: unbounded)."""
    values: list[str | None] = []
    for match in _LITERAL.finditer(text.strip()):
        token = match.group(1).strip()
        if token.upper() in ("MINVALUE", "MAXVALUE"):
            values.append(None)
        elif token.startswith("'"):
            values.append(token[1:-1].replace("''", "'"))
        else:
            values.append(token)
    return values


class PostgreSQLSource(SourceDialect):
    name = "postgresql"
    max_identifier_length: ClassVar[int | None] = 63
    captures_truncate: ClassVar[bool] = True
    has_catalog_version: ClassVar[bool] = True
    """An ``AFTER TRUNCATE`` statement trigger, and test_decoding's TRUNCATE record."""
    stores_added_defaults: ClassVar[bool] = True
    captures_by_statement: ClassVar[bool] = True
    """templates/postgresql/create_changelog_trigger.sql.j2, ``statement_level``."""
    binds_arrays = True
    has_schemas = True
    name_case = "lower"
    checksum_settings = "verify_settings"
    row_estimate = "estimate_rows"
    wide_types = tuple(
        (re.compile(pattern, re.IGNORECASE), wide)
        for pattern, wide in (
            (r"^(character varying|varchar|character|char|bpchar)(\(\d+\))?$", "text"),
            (r"^(smallint|integer|int|int2|int4)$", "bigint"),
            (r"^(numeric|decimal)(\(\d+(,\s*-?\d+)?\))?$", "numeric"),
            (r"^real$", "double precision"),
            (r"^(bit varying|varbit|bit)(\(\d+\))?$", "bit varying"),
        )
    )
    one_null_key_hint = (
        ", or declare a UNIQUE NULLS NOT DISTINCT constraint (PostgreSQL 15+) on exactly them"
    )

    def stored_default_value(self, text: str, column: Column) -> object:
        from gluon.source.logical_values import typed_value  # loads pyarrow

        return typed_value(text, column)

    @classmethod
    def timeout_connect_args(cls, url: sa.URL, timeouts: SourceTimeouts) -> dict[str, Any]:
        # connect_timeout covers the whole handshake (a server that accepts and never answers);
        # statement_timeout and lock_timeout are session settings sent with the startup packet,
        # appended to any options the URL already carries.
        args: dict[str, Any] = {}
        if timeouts.connect_seconds:
            args["connect_timeout"] = max(2, math.ceil(timeouts.connect_seconds))
        session = [
            f"-c {name}={round(seconds * 1000)}"
            for name, seconds in (
                ("statement_timeout", timeouts.statement_seconds),
                ("lock_timeout", timeouts.lock_seconds),
            )
            if seconds
        ]
        given = url.query.get("options")
        existing = [given] if isinstance(given, str) else list(given or ())
        args["options"] = " ".join([*existing, *session, *PINNED_STYLES])
        return args

    def __init__(self, engine: sa.Engine) -> None:
        super().__init__(engine)
        self._libpq_uri = self._arrow_uri({})
        self._snapshot: str | None = None
        """The exported snapshot every Arrow read imports (inside :meth:`slot_with_snapshot`)."""
        self._arrow_root: Any = None
        """The ADBC connection reads clone theirs from (see :meth:`_arrow_connection`)."""
        self._arrow_root_uri = ""
        self._close_arrow_root: Callable[[], Any] = _nothing

    def install_timeouts(self, timeouts: SourceTimeouts) -> None:
        # ADBC connects with libpq itself: the same bounds, as URI parameters.
        self._libpq_uri = self._arrow_uri(self.timeout_connect_args(self.engine.url, timeouts))

    def _arrow_uri(self, connect_args: dict[str, Any]) -> str:
        # String values are rendered as quoted literals (see arrow_batches): the session's
        # string syntax is pinned to the one the quoting assumes.
        given = connect_args.get("options") or self.engine.url.query.get("options") or ()
        existing = [given] if isinstance(given, str) else list(given)
        options = " ".join([*existing, "-c standard_conforming_strings=on"])
        return libpq_uri(self.engine.url, {**connect_args, "options": options})

    def arrow_batches(
        self, spec: TableSpec, statement: sa.TextClause, params: dict[str, Any]
    ) -> Iterator[pa.RecordBatch]:
        # ``:name`` binds become ``$n`` parameters, except strings and integers. ADBC binds a
        # str as ``text``, which PostgreSQL will not compare with a uuid, enum or inet column
        # (psycopg sends it untyped). A quoted literal is untyped like psycopg's parameter;
        # SQLAlchemy quotes it for standard_conforming_strings, which the connection sets.
        # A query without parameters streams through COPY; with any, ADBC runs it with
        # PQexecPrepared and holds the whole result in libpq before the first batch (a
        # changelog batch's LIMIT: 0.2-0.3 s more per 100k rows). A non-negative integer's
        # digits are exact as a literal.
        binds = [
            sa.bindparam(name, value, type_=sa.String(), literal_execute=True)
            if isinstance(value, str)
            else sa.bindparam(name, value, type_=sa.BigInteger(), literal_execute=True)
            if _is_integer(value)
            else sa.bindparam(name, value, type_=sa.types.NULLTYPE)
            for name, value in params.items()
            if name in statement._bindparams
        ]
        compiled = statement.bindparams(*binds).compile(
            dialect=_POSITIONAL, compile_kwargs={"render_postcompile": True}
        )
        values = [params[name] for name in compiled.positiontup or ()]
        return self._stream(spec, compiled.string, values)

    def _stream(self, spec: TableSpec, sql: str, values: list[Any]) -> Iterator[pa.RecordBatch]:
        from gluon.source.adbc import error_type  # imported by reads only (start-up cost)

        try:
            with self._arrow_connection() as connection:
                # A cloned connection opens a transaction (autocommit off): the snapshot is
                # its first statement.
                if self._snapshot is not None:
                    script = self.render("import_snapshot", snapshot=self._snapshot)
                    for statement in self.split_script(script):
                        connection.execute(statement)
                yield from connection.stream(sql, values)
        except error_type() as exc:
            raise SourceError(
                f"reading {spec.schema}.{spec.name} failed: {_first_line(exc)}"
            ) from exc

    @contextmanager
    def slot_with_snapshot(self, slot: str) -> Iterator[str]:
        """Create logical replication slot ``slot`` and read under its snapshot until exit.

        The slot is created over a replication connection, which exports the snapshot of
        the slot's consistent point: the slot streams exactly the transactions that
        snapshot does not see. Every Arrow read of this source inside the ``with`` imports
        it (REPEATABLE READ), so an offload read there and the slot's stream neither
        overlap nor leave a gap. The snapshot lives as long as the replication connection
        stays idle, so the connection stays open (and idle) until exit. Yields the
        snapshot's name.

        Raises:
            SourceError: the replication connection or the slot's creation failed (the
                user lacks the REPLICATION attribute, the slot exists, no free slot).
        """
        import psycopg  # the driver of the engine: already installed, loaded only here

        command = self.render("create_replication_slot_exporting_snapshot", slot=slot).strip()
        try:
            connection = psycopg.connect(self._libpq_uri, replication="database", autocommit=True)
        except psycopg.Error as exc:
            raise SourceError(
                f"opening a replication connection to create slot {slot} failed: {_first_line(exc)}"
            ) from exc
        with connection:
            try:
                row = connection.execute(command).fetchone()
            except psycopg.Error as exc:
                raise SourceError(
                    f"creating replication slot {slot} failed: {_first_line(exc)}"
                ) from exc
            snapshot = str(row[2]) if row is not None else ""
            if not _SNAPSHOT_NAME.match(snapshot):
                raise SourceError(f"creating replication slot {slot} exported no snapshot")
            self._snapshot = snapshot
            try:
                yield snapshot
            finally:
                self._snapshot = None

    @contextmanager
    def exported_snapshot(self) -> Iterator[str]:
        """Read under one snapshot taken now until exit (every Arrow read imports it, as in
        :meth:`slot_with_snapshot`); yields the snapshot as ``xmin:xmax:xip`` text
        (``pg_current_snapshot``), which tells which transactions the reads see.

        The snapshot is exported by a REPEATABLE READ transaction held open (idle) until exit.

        Raises:
            SourceError: the connection or the export failed.
        """
        import psycopg  # the driver of the engine: already installed, loaded only here

        try:
            connection = psycopg.connect(self._libpq_uri)
        except psycopg.Error as exc:
            raise SourceError(f"exporting a snapshot failed: {_first_line(exc)}") from exc
        with connection:
            connection.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            try:
                row = connection.execute(self.render("export_snapshot")).fetchone()
            except psycopg.Error as exc:
                raise SourceError(f"exporting a snapshot failed: {_first_line(exc)}") from exc
            name = str(row[0]) if row is not None else ""
            if row is None or not _SNAPSHOT_NAME.match(name):
                raise SourceError("exporting a snapshot gave no snapshot name")
            self._snapshot = name
            try:
                yield str(row[1])
            finally:
                self._snapshot = None
                connection.rollback()

    @contextmanager
    def _arrow_connection(self) -> Iterator[Any]:
        """An ADBC connection for one read (each read sees what is committed when it runs).

        Creating ADBC's database object loads the server's type catalog (~0.2 s, ten times a
        libpq connection; an extraction of 1M changes reads ten batches): the first read
        creates it with an idle autocommit connection that owns it, until this source is
        dropped; each read clones a connection from it. In the service (``gluon.reuse``), a
        read without a snapshot to import borrows an autocommit connection of the process's
        pool instead: at most :data:`SERVICE_ARROW_CONNECTIONS` for all its threads.
        """
        from gluon.source.adbc import ArrowDatabase

        uri = self._libpq_uri
        pool = None
        if self._snapshot is None:
            pool = shared_pool(
                ("arrow", uri),
                lambda: ArrowDatabase(uri),
                ArrowDatabase.close,
                SERVICE_ARROW_CONNECTIONS,
            )
        if pool is not None:
            with ExitStack() as stack:
                try:
                    root = stack.enter_context(pool.borrow(SERVICE_ARROW_WAIT_SECONDS))
                except TimeoutError as exc:
                    raise SourceError(f"reading from the source: {exc}") from None
                yield root
            return
        if self._arrow_root is None or self._arrow_root_uri != self._libpq_uri:
            self._close_arrow_root()
            self._arrow_root = ArrowDatabase(self._libpq_uri)
            self._arrow_root_uri = self._libpq_uri
            self._close_arrow_root = weakref.finalize(self, self._arrow_root.close)
        with self._arrow_root.transaction() as connection:
            yield connection

    def select_list(self, spec: TableSpec) -> list[str]:
        # The one-byte "char" arrives from a binary read as the byte itself, b"\x00" for the
        # empty value the text rendering gives as '': read it as text.
        return [
            self.render("cast_to_text", column=column.name).strip()
            if column.read_as_text or column.source_type == '"char"'
            else self.quote(column.name)
            for column in spec.columns
        ]

    def lake_column(self, row: object) -> Column | None:
        """Map one ``describe_columns`` row; None when the type cannot be offloaded."""
        data_type: str = row.data_type  # type: ignore[attr-defined]
        declared = row.formatted_type  # type: ignore[attr-defined]
        nullable = row.is_nullable == "YES"  # type: ignore[attr-defined]
        name: str = row.column_name  # type: ignore[attr-defined]
        if data_type == "numeric":
            precision, scale = row.numeric_precision, row.numeric_scale  # type: ignore[attr-defined]
            if precision is not None and precision <= MAX_DECIMAL_PRECISION and scale >= 0:
                return Column(name, declared, decimal_type(precision, scale), nullable)
            return Column(name, declared, "string", nullable, read_as_text=True)
        if data_type in TYPE_MAP:
            return Column(name, declared, TYPE_MAP[data_type], nullable)
        if data_type in TEXT_TYPES and row.element_kind != "c":  # type: ignore[attr-defined]
            return Column(name, declared, "string", nullable, read_as_text=True)
        return None

    def describe_table(self, ref: TableRef) -> TableSpec:
        found = self.run_query("find_table", {"schema": ref.schema, "table": ref.table})
        self._require_found(ref, bool(found))
        if len(found) > 1:
            names = ", ".join(f'"{row.table_schema}"."{row.table_name}"' for row in found)
            raise UsageError(f"-t {ref} matches several tables that differ only in case: {names}")
        schema, table = found[0].table_schema, found[0].table_name
        params = {"schema": schema, "table": table}
        partitioning = self.run_query("partitioning", params)
        return self._table_spec(
            ref,
            schema,
            table,
            self.run_query("describe_columns", params),
            tuple(row.column_name for row in self.run_query("primary_key", params)),
            PARTITION_STRATEGIES.get(partitioning[0].strategy) if partitioning else None,
            tuple(row.column_name for row in partitioning),
        )

    def _table_spec(
        self,
        ref: TableRef,
        schema: str,
        table: str,
        rows: Sequence[Any],
        primary_key: tuple[str, ...],
        partition_kind: str | None,
        partition_columns: tuple[str, ...],
    ) -> TableSpec:
        """The spec of ``schema.table`` from its ``describe_columns`` rows and keys.

        Raises:
            UnsupportedError: a column type gluon cannot offload without loss.
        """
        columns: list[Column] = []
        refused: list[tuple[str, str]] = []
        for row in rows:
            column = self.lake_column(row)
            if column is None:
                refused.append((row.column_name, row.formatted_type))
            else:
                columns.append(column)
        self._refuse_types(ref, refused)
        return TableSpec(
            schema=schema,
            name=table,
            columns=tuple(columns),
            primary_key=primary_key,
            partition_columns=partition_columns,
            partition_kind=partition_kind if partition_columns else None,
        )

    def _describe_together(self, refs: Sequence[TableRef]) -> dict[TableRef, TableSpec]:
        rows = self.run_query(
            "describe_tables",
            {"schemas": [ref.schema for ref in refs], "tables": [ref.table for ref in refs]},
        )
        tables: dict[tuple[str, str], list[Any]] = {}
        for row in rows:
            tables.setdefault((row.table_schema, row.table_name), []).append(row)
        matches: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for schema, table in tables:
            matches.setdefault((schema.lower(), table.lower()), []).append((schema, table))
        described: dict[TableRef, TableSpec] = {}
        for ref in refs:
            found = matches.get((ref.schema.lower(), ref.table.lower()), [])
            if len(found) != 1:
                continue  # missing or ambiguous: describe_table says which
            schema, table = found[0]
            columns = tables[found[0]]
            key = sorted((row.key_position, row.column_name) for row in columns if row.key_position)
            partition = sorted(
                (row.partition_position, row.column_name)
                for row in columns
                if row.partition_position
            )
            try:
                described[ref] = self._table_spec(
                    ref,
                    schema,
                    table,
                    columns,
                    tuple(name for _, name in key),
                    PARTITION_STRATEGIES.get(columns[0].partition_strategy),
                    tuple(name for _, name in partition),
                )
            except UnsupportedError:
                continue  # described alone, which raises the same refusal
        return described

    def partition_bounds(self, spec: TableSpec) -> dict[str, PartitionBound]:
        if len(spec.partition_columns) != 1 or spec.partition_kind not in ("RANGE", "LIST"):
            raise UnsupportedError(
                f"{spec.schema}.{spec.name} is not RANGE or LIST partitioned on one column: "
                "use --offload-predicate"
            )
        rows = self.run_query("list_partitions", {"schema": spec.schema, "table": spec.name})
        return {row.partition_name: _bound(row.partition_name, row.bound) for row in rows}

    def subpartitions(self, spec: TableSpec) -> dict[str, Subpartition]:
        if not spec.partition_columns:
            return {}
        rows = self.run_query("list_subpartitions", {"schema": spec.schema, "table": spec.name})
        found: dict[str, Subpartition] = {}
        for row in rows:
            keys = list(row.key_columns or [])
            if len(spec.partition_columns) != 1 or len(keys) != 1 or keys[0] is None:
                raise UnsupportedError(
                    f"subpartition {row.subpartition_name} of {spec.schema}.{spec.name}: "
                    "gluon offloads subpartitions of tables partitioned and subpartitioned on "
                    "one column each; use --offload-predicate"
                )
            found[row.subpartition_name] = Subpartition(
                name=row.subpartition_name,
                partition_column=spec.partition_columns[0],
                partition=_bound(row.partition_name, row.partition_bound),
                column=keys[0],
                kind=PARTITION_STRATEGIES.get(row.strategy, row.strategy),
                bound=_bound(row.subpartition_name, row.bound),
            )
        return found


def _bound(name: str, bound: str) -> PartitionBound:
    """A partition's ``pg_get_expr(relpartbound)`` text as its bounds."""
    text = bound.strip()
    if (match := _RANGE_BOUND.match(text)) is not None:
        low, high = _literals(match.group(1))[0], _literals(match.group(2))[0]
        return PartitionBound(name, low, high)
    if (match := _LIST_BOUND.match(text)) is not None:
        tokens = [m.group(1).strip() for m in _LITERAL.finditer(match.group(1).strip())]
        # An unquoted NULL is the NULL key; a quoted 'NULL' is a string
        keys = [token for token in tokens if token.upper() != "NULL"]
        values = tuple(v for v in _literals(", ".join(keys)) if v is not None)
        return PartitionBound(name, values=values, holds_null=len(keys) < len(tokens))
    # DEFAULT partitions hold "everything else", HASH ones a share of the keys' hashes:
    # no predicate on values describes them
    return PartitionBound(name)


def libpq_uri(url: sa.URL, connect_args: Mapping[str, Any]) -> str:
    """``url`` (a SQLAlchemy URL) as a libpq connection URI, with ``connect_args`` added.

    Query values are percent-encoded (libpq reads ``+`` literally, not as a space).
    """
    base = url.set(drivername="postgresql", query={}).render_as_string(hide_password=False)
    pairs: list[tuple[str, str]] = []
    for key, given in url.query.items():
        if key not in connect_args:
            pairs.extend((key, value) for value in ([given] if isinstance(given, str) else given))
    pairs.extend((key, str(value)) for key, value in connect_args.items())
    if not pairs:
        return base
    return (
        base
        + "?"
        + "&".join(f"{quote(key, safe='')}={quote(value, safe='')}" for key, value in pairs)
    )


__all__ = ["PostgreSQLSource", "libpq_uri"]
