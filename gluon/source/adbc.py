"""Arrow reads from PostgreSQL through ADBC's low-level API, without its DB-API module.

``adbc_driver_manager.dbapi`` imports pandas, Polars and ``pyarrow.dataset`` (which
imports pandas again) when it loads: 0.3-0.5 s of every command that reads the source
(an IMMEDIATE sync of 20k changes at 2M rows took 1.2 s, a quarter of it that import;
issue 28). gluon only streams query results into Arrow, which the driver manager's
``_lib`` module does alone: connect, clone a connection, run one statement, import its
result stream. This module is that, the way ``dbapi`` does it (a prepared statement,
parameters bound as a one-row record batch, the result read through the driver
manager's error-translating reader, Ctrl-C cancelling the statement).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa


def error_type() -> type[Exception]:
    """The base class of every error the driver raises (DB-API's ``Error``)."""
    from adbc_driver_manager import Error

    return Error


class ArrowDatabase:
    """One ADBC database object (it loads the server's type catalog once) and the
    autocommit connection that owns it; further connections are cloned from it."""

    def __init__(self, uri: str) -> None:
        import adbc_driver_postgresql
        from adbc_driver_manager import AdbcConnection

        self._database = adbc_driver_postgresql.connect(uri)
        try:
            self._root = AdbcConnection(self._database)  # ADBC connections autocommit
        except BaseException:
            self._database.close()
            raise
        self._closed = False

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._root.close()
        finally:
            self._database.close()

    def stream(self, sql: str, values: Sequence[Any] = ()) -> Iterator[pa.RecordBatch]:
        """The result of ``sql`` on the autocommit connection, batch by batch."""
        yield from _stream(self._root, sql, values)

    @contextmanager
    def transaction(self) -> Iterator[ArrowTransaction]:
        """A connection of its own (autocommit off: its first statement takes the snapshot),
        closed, and its transaction rolled back, at exit."""
        from adbc_driver_manager import AdbcConnection

        connection = AdbcConnection(self._database)
        try:
            connection.set_autocommit(False)
            yield ArrowTransaction(connection)
        finally:
            connection.close()


class ArrowTransaction:
    """Statements run, in order, in one transaction (see :meth:`ArrowDatabase.transaction`)."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection

    def execute(self, sql: str) -> None:
        """Run ``sql``, discarding its result."""
        for _ in _stream(self._connection, sql, ()):
            pass

    def stream(self, sql: str, values: Sequence[Any] = ()) -> Iterator[pa.RecordBatch]:
        yield from _stream(self._connection, sql, values)


def _stream(connection: Any, sql: str, values: Sequence[Any]) -> Iterator[pa.RecordBatch]:
    import pyarrow as pa
    from adbc_driver_manager import AdbcStatement, NotSupportedError
    from adbc_driver_manager._lib import _blocking_call
    from adbc_driver_manager._reader import AdbcRecordBatchReader

    statement = AdbcStatement(connection)
    try:
        statement.set_sql_query(sql)
        with suppress(NotSupportedError):
            _blocking_call(statement.prepare, (), {}, statement.cancel)
        if values:
            statement.bind(
                pa.record_batch(
                    [[value] for value in values], names=[str(i) for i in range(len(values))]
                )
            )
        handle, _ = _blocking_call(statement.execute_query, (), {}, statement.cancel)
        reader = AdbcRecordBatchReader._import_from_c(handle.address)
        try:
            yield from reader
        finally:
            reader.close()
    finally:
        statement.close()
