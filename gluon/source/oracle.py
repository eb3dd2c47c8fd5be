"""Oracle Database over python-oracledb in thin mode (no Oracle Client needed).

How each Oracle type is read, and what the driver is told to return, is in
``gluon.source.oracle_types``; this module is the dialect: quoting, the data dictionary
queries, timeouts, preflight and grants, and streaming rows as Arrow batches.

Why one module past 400 lines: the one class of Oracle's overrides of the contract in
``gluon.source.base``; its types and driver handling are in ``oracle_types``.
"""

from __future__ import annotations

import contextlib
import queue
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import oracledb
import sqlalchemy as sa

from gluon.config import SourceTimeouts
from gluon.errors import SourceError, UnsupportedError, UsageError
from gluon.methods.base import ChangeReader, ExtractionMethod, SourceObject
from gluon.naming import TableRef
from gluon.schema import TableSpec, decimal_parts
from gluon.source.base import (
    PartitionBound,
    SourceDialect,
    StatementRefused,
    Subpartition,
    _first_line,
)
from gluon.source.oracle_bounds import (
    partition_bounds_from_dictionary,
    subpartitions_from_dictionary,
)
from gluon.source.oracle_types import (
    Row,
    install_output_type_handler,
    lower_keys,
    table_spec_from_dictionary,
)

if TYPE_CHECKING:
    import pyarrow as pa

_BARE_NAME = re.compile(r"^[A-Z][A-Z0-9_$#]*$")

# Oracle SQL reserved words (SQL Language Reference, appendix D); SQLAlchemy's list lacks
# some (COLUMN, FILE, ROWID, ROWNUM, SESSION, SYSDATE...), so names are checked against both.
_RESERVED_TEXT = """
ACCESS ADD ALL ALTER AND ANY AS ASC AUDIT BETWEEN BY CHAR CHECK CLUSTER COLUMN COMMENT
COMPRESS CONNECT CREATE CURRENT DATE DECIMAL DEFAULT DELETE DESC DISTINCT DROP ELSE
EXCLUSIVE EXISTS FILE FLOAT FOR FROM GRANT GROUP HAVING IDENTIFIED IMMEDIATE IN INCREMENT
INDEX INITIAL INSERT INTEGER INTERSECT INTO IS LEVEL LIKE LOCK LONG MAXEXTENTS MINUS
MLSLABEL MODE MODIFY NOAUDIT NOCOMPRESS NOT NOWAIT NULL NUMBER OF OFFLINE ON ONLINE OPTION
OR ORDER PCTFREE PRIOR PRIVILEGES PUBLIC RAW RENAME RESOURCE REVOKE ROW ROWID ROWNUM ROWS
SELECT SESSION SET SHARE SIZE SMALLINT START SUCCESSFUL SYNONYM SYSDATE TABLE THEN TO
TRIGGER UID UNION UNIQUE UPDATE USER VALIDATE VALUES VARCHAR VARCHAR2 VIEW WHENEVER WHERE
WITH
"""
# PL/SQL reserved words (PL/SQL Language Reference, appendix D, table D-1): a column named
# so must be quoted in a trigger body (":NEW.END" does not compile) even where SQL takes it.
_PLSQL_RESERVED_TEXT = """
ALL ALTER AND ANY AS ASC AT BEGIN BETWEEN BY CASE CHECK CLUSTER CLUSTERS COLAUTH COLUMNS
COMPRESS CONNECT CRASH CREATE CURSOR DECLARE DEFAULT DESC DISTINCT DROP ELSE END EXCEPTION
EXCLUSIVE FETCH FOR FROM FUNCTION GOTO GRANT GROUP HAVING IDENTIFIED IF IN INDEX INDEXES
INSERT INTERSECT INTO IS LIKE LOCK MINUS MODE NOCOMPRESS NOT NOWAIT NULL OF ON OPTION OR
ORDER OVERLAPS PROCEDURE PUBLIC RESOURCE REVOKE SELECT SHARE SIZE SQL START SUBTYPE TABAUTH
TABLE THEN TO TYPE UNION UNIQUE UPDATE VALUES VIEW VIEWS WHEN WHERE WITH
"""
RESERVED_WORDS: frozenset[str] = frozenset(_RESERVED_TEXT.split() + _PLSQL_RESERVED_TEXT.split())


MIN_DRIVER_VERSION = (3, 4)
"""python-oracledb's first release with ``fetch_df_batches(fetch_decimals=...)`` (3.0 brought
``fetch_df_batches``, 3.4 its ``fetch_decimals``)."""


def driver_version_problem(version: str) -> str | None:
    """One line when python-oracledb ``version`` is too old for gluon; None when it will do."""
    parts = re.findall(r"\d+", version)[:2]
    found = tuple(int(part) for part in parts) if len(parts) == 2 else (0, 0)
    if found >= MIN_DRIVER_VERSION:
        return None
    needed = ".".join(map(str, MIN_DRIVER_VERSION))
    return (
        f"python-oracledb {version} is too old: gluon reads Oracle through fetch_df_batches "
        f"with fetch_decimals, new in {needed}: run pip install 'oracledb>={needed}'"
    )


COMPILATION_WARNING = "DPY-7000"
"""python-oracledb's warning for ORA-24344 (success with compilation error): a CREATE
TRIGGER / VIEW / PROCEDURE that left the object INVALID. Not an exception: it is only
on ``cursor.warning``."""


def compile_problem_from_rows(rows: Iterable[Row]) -> str | None:
    """One line saying why an object does not compile, from ``compile_errors`` rows
    (ALL_OBJECTS.STATUS joined with its ALL_ERRORS lines); None when it is VALID or gone."""
    found = [lower_keys(row) for row in rows]
    if not found or all(row["status"] == "VALID" for row in found):
        return None
    errors = [row for row in found if row.get("text")]
    if not errors:
        return "it is INVALID (no error recorded: it depends on an invalid or missing object)"
    first = errors[0]
    text = " ".join(str(first["text"]).split())
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"line {first['line']}, column {first['position']}: {text}{more}"


MAX_DDL_LOCK_TIMEOUT = 1_000_000
"""Oracle's largest DDL_LOCK_TIMEOUT, in seconds."""


def _call_within(seconds: float, connect: Callable[[], Any]) -> Any:
    """``connect()`` run in a daemon thread; fail when it has not returned after ``seconds``."""
    outcome: queue.Queue[tuple[bool, Any]] = queue.Queue(maxsize=1)

    def attempt() -> None:
        try:
            outcome.put((True, connect()))
        except BaseException as exc:  # handed to the waiting thread
            outcome.put((False, exc))

    threading.Thread(target=attempt, name="gluon-oracle-connect", daemon=True).start()
    try:
        succeeded, value = outcome.get(timeout=seconds)
    except queue.Empty:
        raise SourceError(
            f"cannot connect to the oracle source database: no answer within {seconds:g}s "
            "(check ORA_CONN or GLUON_SOURCE_URL; GLUON_SOURCE_CONNECT_TIMEOUT sets the limit)"
        ) from None
    if succeeded:
        return value
    raise value


class OracleSource(SourceDialect):
    name = "oracle"
    max_identifier_length: ClassVar[int | None] = 128
    """128 when the server's COMPATIBLE is 12.2 or later, else
    :attr:`legacy_identifier_length`; :meth:`server_identifier_length` tells which."""

    identifier_length_in_bytes: ClassVar[bool] = True

    legacy_identifier_length: ClassVar[int] = 30
    """The limit before Oracle 12.2 (or with COMPATIBLE below 12.2)."""

    long_identifiers_since: ClassVar[tuple[int, int]] = (12, 2)
    """The COMPATIBLE level that allows :attr:`max_identifier_length`."""

    has_schemas = True
    name_case = "upper"
    unmarkable_source_objects = frozenset(
        {SourceObject.CHANGELOG_SEQUENCE, SourceObject.HYBRID_SCHEMA}
    )
    """A sequence and a schema take no comment in Oracle."""
    wide_types = (
        (re.compile(r"^(VARCHAR2|VARCHAR|CHAR)\(\d+( BYTE| CHAR)?\)$"), "VARCHAR2(4000)"),
        (re.compile(r"^(NVARCHAR2|NCHAR)\(\d+\)$"), "NVARCHAR2(2000)"),
        (re.compile(r"^NUMBER\(\d+(,\s*-?\d+)?\)$"), "NUMBER"),
        (re.compile(r"^RAW\(\d+\)$"), "RAW(2000)"),
        (re.compile(r"^BINARY_FLOAT$"), "BINARY_DOUBLE"),
    )
    extended_wide_types = (
        (re.compile(r"^(VARCHAR2|VARCHAR|CHAR)\(\d+( BYTE| CHAR)?\)$"), "VARCHAR2(32767)"),
        (re.compile(r"^(NVARCHAR2|NCHAR)\(\d+\)$"), "NVARCHAR2(16383)"),
        (re.compile(r"^RAW\(\d+\)$"), "RAW(32767)"),
    )

    fetch_arraysize: ClassVar[int] = 1_000
    """Rows per round trip (oracledb's default is 100)."""

    @classmethod
    def engine_options(cls) -> dict[str, Any]:
        # Thin mode is oracledb's default: no Oracle Client, no thick_mode option. Values
        # are made exact by output_type_handler, installed on connect by __init__.
        # coerce_to_decimal (SQLAlchemy's default) keeps unconstrained NUMBER exact.
        return {"arraysize": cls.fetch_arraysize, "coerce_to_decimal": True}

    def __init__(self, engine: sa.Engine) -> None:
        problem = driver_version_problem(oracledb.__version__)
        if problem is not None:
            raise UnsupportedError(problem)
        super().__init__(engine)
        if not sa.event.contains(engine, "connect", install_output_type_handler):
            sa.event.listen(engine, "connect", install_output_type_handler)

    @classmethod
    def timeout_connect_args(cls, url: sa.URL, timeouts: SourceTimeouts) -> dict[str, Any]:
        if not timeouts.connect_seconds:
            return {}
        return {"tcp_connect_timeout": timeouts.connect_seconds}

    def install_timeouts(self, timeouts: SourceTimeouts) -> None:
        # tcp_connect_timeout bounds only the TCP connect: thin mode then waits for the
        # listener's answer without a limit, so the whole connect runs under a deadline.
        if timeouts.connect_seconds:
            deadline = timeouts.connect_seconds

            def connect_within_deadline(
                dialect: Any, _record: Any, cargs: Any, cparams: Any
            ) -> Any:
                return _call_within(deadline, lambda: dialect.dbapi.connect(*cargs, **cparams))

            sa.event.listen(self.engine, "do_connect", connect_within_deadline)

        def bound_session(dbapi_connection: Any, _record: Any) -> None:
            # call_timeout bounds each round trip (a fetch of a bulk read is one), in ms.
            dbapi_connection.call_timeout = round(timeouts.statement_seconds * 1000)
            if timeouts.lock_seconds:
                seconds = min(MAX_DDL_LOCK_TIMEOUT, round(timeouts.lock_seconds))
                with dbapi_connection.cursor() as cursor:
                    cursor.execute(f"ALTER SESSION SET DDL_LOCK_TIMEOUT = {seconds}")

        sa.event.listen(self.engine, "connect", bound_session)

    @classmethod
    def identifier_length_for(cls, compatible: str | None) -> int:
        """The identifier limit for a server whose COMPATIBLE parameter is ``compatible``.

        An unknown or unparsable value counts as a current server.
        """
        current = cls.max_identifier_length or cls.legacy_identifier_length
        parts = re.findall(r"\d+", compatible or "")
        if len(parts) < 2:
            return current
        level = (int(parts[0]), int(parts[1]))
        return cls.legacy_identifier_length if level < cls.long_identifiers_since else current

    def read_server_limits(self) -> None:
        self.identifier_length = self.server_identifier_length()
        self.extended_strings = self.server_max_string_size() == "EXTENDED"

    def server_max_string_size(self) -> str:
        """MAX_STRING_SIZE (``STANDARD`` or ``EXTENDED``) from V$PARAMETER; ``STANDARD``
        when it cannot be read (the preflight names the grant that lets gluon read it).

        Raises:
            SourceError: the database cannot be reached.
        """
        try:
            rows = self.run_query("max_string_size")
        except SourceError:
            rows = []
        return str(rows[0][0]).upper() if rows and rows[0][0] else "STANDARD"

    def server_identifier_length(self) -> int:
        """The identifier limit of the connected server (reads COMPATIBLE from V$PARAMETER).

        Without access to V$PARAMETER (it needs SELECT_CATALOG_ROLE or a grant),
        SQLAlchemy's own detection, made on the first connection, is used.

        Raises:
            SourceError: the database cannot be reached.
        """
        try:
            rows = self.run_query("compatible")
        except SourceError:
            rows = []
        if rows:
            return self.identifier_length_for(rows[0][0])
        self.check_connection()
        return int(self.engine.dialect.max_identifier_length)

    def execute_statement(self, connection: sa.Connection, statement: str) -> None:
        """Send one script statement on the DBAPI cursor, whose ``warning`` (DPY-7000: the
        object was created INVALID) SQLAlchemy never shows: it closes a DDL's cursor."""
        cursor = connection.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        try:
            cursor.execute(statement)
            warning = cursor.warning
        except oracledb.Error as exc:
            raise StatementRefused(_first_line(exc)) from exc
        finally:
            cursor.close()
        if warning is not None:
            raise StatementRefused(_first_line(Exception(warning.message)))

    def preflight(
        self,
        spec: TableSpec,
        method: type[ExtractionMethod],
        hybrid_schema: str | None,
        *,
        create_schema: bool,
        changelog_schema: str | None = None,
    ) -> list[str]:
        from gluon.source.oracle_preflight import PreflightFacts, preflight_problems, requirements

        schema = hybrid_schema or spec.schema
        facts = PreflightFacts(
            user=str(self._optional("session_user")[0][0]),
            hybrid_schema=schema,
            hybrid_schema_exists=not create_schema,
            system_privileges=frozenset(
                str(row[0]) for row in self._optional("session_privileges")
            ),
            schema_privileges=frozenset(
                (str(row[0]), str(row[1])) for row in self._optional("session_schema_privileges")
            ),
            hybrid_quota=self._hybrid_quota(schema) if not create_schema else None,
            compatible=self._parameter("compatible"),
            max_string_size=self._parameter("max_string_size"),
            reads_current_scn=bool(self._optional("current_scn")),
            driver_problem=driver_version_problem(oracledb.__version__),
        )
        needs_scn = method.change_reader is ChangeReader.ORA_ROWSCN
        elsewhere = changelog_schema is not None and changelog_schema != schema
        needed = requirements(method, create_schema=create_schema, changelog_elsewhere=elsewhere)
        return preflight_problems(facts, needed, needs_scn=needs_scn)

    def grant_scripts(
        self,
        table: TableRef,
        method: type[ExtractionMethod],
        hybrid_schema: str | None,
        changelog_schema: str | None = None,
    ) -> dict[str, list[str]]:
        from gluon.source.oracle_preflight import grant_script, requirements

        user = (self.engine.url.username or "GLUON").upper()
        schema = hybrid_schema or table.schema
        elsewhere = changelog_schema is not None and changelog_schema != schema
        needed = requirements(method, create_schema=True, changelog_elsewhere=elsewhere)
        target = f"{self.quote(table.schema)}.{self.quote(table.table)}"
        needs_scn = method.change_reader is ChangeReader.ORA_ROWSCN
        return {
            f"Oracle 19c (system privileges), as a DBA, for {user}": grant_script(
                user, schema, target, needed, schema_level=False, needs_scn=needs_scn
            ),
            f"Oracle 23ai (privileges on schema {schema} only), as a DBA, for {user}": (
                grant_script(user, schema, target, needed, schema_level=True, needs_scn=needs_scn)
            ),
        }

    def _optional(self, template: str, params: dict[str, Any] | None = None) -> list[Any]:
        """A dictionary query's rows; none when the view is missing (before 23ai) or not
        granted: the preflight then names the grant."""
        try:
            return self.run_query(template, params)
        except SourceError:
            return []

    def _parameter(self, template: str) -> str | None:
        rows = self._optional(template)
        return str(rows[0][0]) if rows and rows[0][0] is not None else None

    def _hybrid_quota(self, schema: str) -> bool | None:
        try:
            rows = self.run_query("hybrid_quota", {"schema": schema})
        except SourceError:
            return None  # DBA_TS_QUOTAS is not readable: nothing to say
        return bool(rows and int(rows[0][0]))

    def compile_problem(self, schema: str, name: str, object_type: str) -> str | None:
        params = {"schema": schema, "name": name, "object_type": object_type}
        return compile_problem_from_rows(self._dictionary("compile_errors", params))

    def quote(self, identifier: str) -> str:
        """Quote ``identifier``, an exact-case name, unless it is a plain upper-case word.

        SQLAlchemy's preparer treats lower case as case-insensitive and leaves ``abc``
        bare, which Oracle reads as ``ABC``: wrong for a dictionary name ``abc``.
        """
        reserved = (
            identifier in RESERVED_WORDS or identifier.lower() in self._preparer.reserved_words
        )
        if _BARE_NAME.match(identifier) and not reserved:
            return identifier
        return '"' + identifier.replace('"', '""') + '"'

    def _dictionary(self, template: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        """Run a dictionary query; rows as dicts keyed by lower-case column name."""
        rows = self.run_query(template, params)
        return [{str(key).lower(): value for key, value in row._mapping.items()} for row in rows]

    def describe_table(self, ref: TableRef) -> TableSpec:
        found = self._dictionary("find_table", {"schema": ref.schema, "table": ref.table})
        self._require_found(ref, bool(found))
        if len(found) > 1:
            names = ", ".join(f'"{row["table_schema"]}"."{row["table_name"]}"' for row in found)
            raise UsageError(f"-t {ref} matches several tables that differ only in case: {names}")
        table = found[0]
        params = {"schema": table["table_schema"], "table": table["table_name"]}
        partitioned = table["partitioned"] == "YES"
        return table_spec_from_dictionary(
            table,
            self._dictionary("describe_columns", params),
            self._dictionary("primary_key", params),
            self._dictionary("partitioning", params) if partitioned else [],
        )

    def _describe_together(self, refs: Sequence[TableRef]) -> dict[TableRef, TableSpec]:
        params: dict[str, Any] = {}
        for number, ref in enumerate(refs):
            params[f"s{number}"], params[f"t{number}"] = ref.schema, ref.table
        tables: dict[tuple[str, str], list[dict[str, Any]]] = {}
        rows = self.run_query("describe_tables", params, tables=list(refs))
        for row in rows:
            values = {str(key).lower(): value for key, value in row._mapping.items()}
            tables.setdefault((values["table_schema"], values["table_name"]), []).append(values)
        described: dict[TableRef, TableSpec] = {}
        for ref in refs:
            found = [
                (schema, table)
                for schema, table in tables
                if schema in (ref.schema, ref.schema.upper())
                and table in (ref.table, ref.table.upper())
            ]
            if len(found) != 1:
                continue  # missing or ambiguous: describe_table says which
            columns = tables[found[0]]
            first = columns[0]
            key = sorted(
                (row["key_position"], row["column_name"])
                for row in columns
                if row["key_position"] is not None
            )
            partitioning: list[dict[str, Any]] = []
            if first["partitioned"] == "YES" and first["partitioning_type"] is not None:
                # One row per partition key column; a reference-partitioned table has
                # none of its own (a row with no column, as the partitioning query's).
                placed = sorted(
                    (row["partition_position"], row["column_name"])
                    for row in columns
                    if row["partition_position"] is not None
                )
                names: list[str | None] = [name for _, name in placed] or [None]
                partitioning = [
                    {"partitioning_type": first["partitioning_type"], "column_name": name}
                    for name in names
                ]
            with contextlib.suppress(UnsupportedError):  # described alone, refused again
                described[ref] = table_spec_from_dictionary(
                    first,
                    columns,
                    [{"column_name": name} for _, name in key],
                    partitioning,
                )
        return described

    def partition_bounds(self, spec: TableSpec) -> dict[str, PartitionBound]:
        params = {"schema": spec.schema, "table": spec.name}
        return partition_bounds_from_dictionary(spec, self._dictionary("list_partitions", params))

    def subpartitions(self, spec: TableSpec) -> dict[str, Subpartition]:
        if not spec.partition_columns:
            return {}
        params = {"schema": spec.schema, "table": spec.name}
        subpartitions = self._dictionary("list_subpartitions", params)
        if not subpartitions:
            return {}
        partitions = self._dictionary("list_partitions", params)
        return subpartitions_from_dictionary(spec, partitions, subpartitions)

    def arrow_batches(
        self, spec: TableSpec, statement: sa.TextClause, params: dict[str, Any]
    ) -> Iterator[pa.RecordBatch]:
        return self._stream(spec, statement.text, params)

    def _stream(
        self, spec: TableSpec, sql: str, params: dict[str, Any]
    ) -> Iterator[pa.RecordBatch]:
        """python-oracledb's own Arrow fetch, on a pooled connection (its timeouts set).

        Each batch is one round trip of :attr:`fetch_arraysize` rows, as the row-wise read's
        fetches were, so ``call_timeout`` bounds the same work.
        ``fetch_decimals`` returns NUMBER(p,s) as decimal128 rather than binary floats;
        output type handlers do not apply to data frame fetches, and
        :func:`gluon.source.arrow.cast_exactly` refuses a float where a decimal is due.
        """
        import pyarrow as pa

        failed = f"reading {spec.schema}.{spec.name} failed"
        try:
            connection = self.engine.raw_connection()
        except sa.exc.DBAPIError as exc:
            raise SourceError(f"{failed}: {_first_line(exc)}") from exc
        try:
            driver: Any = connection.driver_connection
            frames = driver.fetch_df_batches(
                statement=sql, parameters=params, size=self.fetch_arraysize, fetch_decimals=True
            )
            for frame in frames:
                yield from pa.table(frame).to_batches()
        except oracledb.Error as exc:
            raise SourceError(f"{failed}: {_first_line(exc)}") from exc
        finally:
            connection.close()

    def select_list(self, spec: TableSpec) -> list[str]:
        """Column expressions; text columns cast with their declared type, zoned ones in UTC,
        fixed-point ones to their lake precision (see :func:`fetched_arrow_type`)."""
        expressions = []
        for column in spec.columns:
            exact = decimal_parts(column.lake_type)
            if column.read_as_text:
                sql = self.render(
                    "cast_to_text", column=column.name, source_type=column.source_type
                )
            elif column.lake_type == "timestamp":
                sql = self.render("extract_utc", column=column.name)
            elif exact is not None:
                precision, scale = exact
                sql = self.render(
                    "exact_number", column=column.name, precision=precision, scale=scale
                )
            else:
                sql = self.quote(column.name)
            expressions.append(sql.strip())
        return expressions
